// Gather and scatter with XLA's full dimension numbers, batching dimensions included.
//
// Both walk the batch ("scatter") dimensions of their indices: each batch position reads an
// index vector from the indices array and places a window in the operand. Gather clamps the
// window into the operand; scatter skips a window that does not fit whole.
#include <algorithm>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

bool Contains(std::span<const int64_t> list, int64_t value) {
  return std::find(list.begin(), list.end(), value) != list.end();
}

Status CheckDims(std::span<const int64_t> dims, int64_t rank, std::string_view what) {
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank || seen[d]) {
      return Error(fmt::format("{} dimension {} is out of range or repeated", what, d));
    }
    seen[d] = true;
  }
  return OkStatus();
}

// How the batch positions of an indices array are read: `batch_dims` of the indices array (all
// but index_vector_dim, in order) correspond one to one with `outer_dims` of the array walked
// (the gather result or the scatter updates).
struct IndexReader {
  const Literal* indices = nullptr;
  int64_t index_vector_dim = 0;
  int64_t vector_size = 1;
  std::vector<int64_t> batch_dims;
  std::vector<int64_t> outer_dims;
  std::vector<int64_t> strides;

  // Reads the index vector at the batch position given by `walked_index` into `out`.
  void Read(std::span<const int64_t> walked_index, std::vector<int64_t>& out) const {
    int64_t base = 0;
    for (size_t i = 0; i < batch_dims.size(); ++i) {
      base += walked_index[outer_dims[i]] * strides[batch_dims[i]];
    }
    const int64_t step =
        index_vector_dim < static_cast<int64_t>(strides.size()) ? strides[index_vector_dim] : 0;
    out.resize(vector_size);
    for (int64_t k = 0; k < vector_size; ++k) out[k] = IndexValue(*indices, base + k * step);
  }
  // The batch coordinate along indices dimension `indices_dim` at `walked_index`.
  int64_t BatchCoordinate(std::span<const int64_t> walked_index, int64_t indices_dim) const {
    const auto it = std::find(batch_dims.begin(), batch_dims.end(), indices_dim);
    return walked_index[outer_dims[it - batch_dims.begin()]];
  }
};

// `outer_dims` are the dimensions of a rank-`walked_rank` array that are not `window_dims`.
StatusOr<IndexReader> MakeIndexReader(const Literal& indices, int64_t index_vector_dim,
                                      int64_t expected_vector_size, int64_t walked_rank,
                                      std::span<const int64_t> window_dims) {
  const Shape& shape = indices.shape();
  if (!shape.IsArray() || !IsIntegralType(shape.element_type())) {
    return Error("indices must be an integer array, got " + shape.ToString(false));
  }
  if (index_vector_dim < 0 || index_vector_dim > shape.rank()) {
    return Error(fmt::format("index_vector_dim={} out of range for rank {}", index_vector_dim,
                             shape.rank()));
  }
  IndexReader reader;
  reader.indices = &indices;
  reader.index_vector_dim = index_vector_dim;
  reader.vector_size = index_vector_dim == shape.rank() ? 1 : shape.dimensions(index_vector_dim);
  if (reader.vector_size != expected_vector_size) {
    return Error(fmt::format("index vectors have {} elements, the dimension numbers map {}",
                             reader.vector_size, expected_vector_size));
  }
  reader.strides = StridesOf(shape);
  for (int64_t d = 0; d < shape.rank(); ++d) {
    if (d != index_vector_dim) reader.batch_dims.push_back(d);
  }
  for (int64_t d = 0; d < walked_rank; ++d) {
    if (!Contains(window_dims, d)) reader.outer_dims.push_back(d);
  }
  if (reader.outer_dims.size() != reader.batch_dims.size()) {
    return Error(fmt::format("{} batch dimensions in the indices, {} outside the window",
                             reader.batch_dims.size(), reader.outer_dims.size()));
  }
  return reader;
}

// The operand dimensions a window spans, in order: all but `excluded_a` and `excluded_b`.
std::vector<int64_t> WindowOperandDims(int64_t rank, std::span<const int64_t> excluded_a,
                                       std::span<const int64_t> excluded_b) {
  std::vector<int64_t> dims;
  for (int64_t d = 0; d < rank; ++d) {
    if (!Contains(excluded_a, d) && !Contains(excluded_b, d)) dims.push_back(d);
  }
  return dims;
}

}  // namespace

StatusOr<Literal> HandleGather(const HloInstruction& instruction, const Literal& operand,
                               const Literal& start_indices) {
  const Shape& shape = instruction.shape();
  if (!instruction.gather_dimension_numbers || !instruction.slice_sizes_attr) {
    return Error("gather needs dimension numbers and slice_sizes");
  }
  const GatherDimensionNumbers& dnums = *instruction.gather_dimension_numbers;
  const std::vector<int64_t>& slice_sizes = *instruction.slice_sizes_attr;
  const Shape& operand_shape = operand.shape();
  const int64_t rank = operand_shape.rank();
  if (static_cast<int64_t>(slice_sizes.size()) != rank) {
    return Error(fmt::format("{} slice sizes for an operand of rank {}", slice_sizes.size(), rank));
  }
  RETURN_IF_ERROR(CheckDims(dnums.start_index_map, rank, "start_index_map"));
  RETURN_IF_ERROR(CheckDims(dnums.offset_dims, shape.rank(), "offset"));
  std::vector<int64_t> excluded = dnums.collapsed_slice_dims;
  excluded.insert(excluded.end(), dnums.operand_batching_dims.begin(),
                  dnums.operand_batching_dims.end());
  RETURN_IF_ERROR(CheckDims(excluded, rank, "collapsed or batching"));
  if (dnums.operand_batching_dims.size() != dnums.start_indices_batching_dims.size()) {
    return Error("operand and start indices have different numbers of batching dimensions");
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (slice_sizes[d] < 0 || slice_sizes[d] > operand_shape.dimensions(d) ||
        (Contains(excluded, d) && slice_sizes[d] != 1)) {
      return Error(fmt::format("slice size {} invalid for operand dimension {}", slice_sizes[d], d));
    }
  }
  const std::vector<int64_t> window_dims = WindowOperandDims(rank, dnums.collapsed_slice_dims,
                                                             dnums.operand_batching_dims);
  if (window_dims.size() != dnums.offset_dims.size()) {
    return Error(fmt::format("{} offset dimensions for {} window dimensions",
                             dnums.offset_dims.size(), window_dims.size()));
  }
  ASSIGN_OR_RETURN(IndexReader reader,
                   MakeIndexReader(start_indices, dnums.index_vector_dim,
                                   static_cast<int64_t>(dnums.start_index_map.size()),
                                   shape.rank(), dnums.offset_dims));
  for (int64_t d : dnums.start_indices_batching_dims) {
    if (!Contains(reader.batch_dims, d)) return Error(fmt::format("invalid batching dimension {}", d));
  }
  std::vector<int64_t> expected(shape.rank());
  for (size_t i = 0; i < reader.outer_dims.size(); ++i) {
    expected[reader.outer_dims[i]] = start_indices.shape().dimensions(reader.batch_dims[i]);
  }
  for (size_t j = 0; j < dnums.offset_dims.size(); ++j) {
    expected[dnums.offset_dims[j]] = slice_sizes[window_dims[j]];
  }
  RETURN_IF_ERROR(ExpectDimensions(shape, expected, "gather result"));
  if (operand_shape.element_type() != shape.element_type()) {
    return Error("gather result and operand element types differ");
  }

  Literal result(shape);
  if (shape.num_elements() == 0) return result;
  const int64_t width = ByteWidth(shape.element_type());
  const std::vector<int64_t> operand_strides = StridesOf(operand_shape);
  std::vector<int64_t> index_vector, start(rank);
  IndexCounter out_index(shape.dimensions());
  int64_t out_linear = 0;
  do {
    const std::vector<int64_t>& o = out_index.index();
    reader.Read(o, index_vector);
    std::fill(start.begin(), start.end(), 0);
    for (size_t k = 0; k < dnums.start_index_map.size(); ++k) {
      start[dnums.start_index_map[k]] = index_vector[k];
    }
    for (size_t i = 0; i < dnums.operand_batching_dims.size(); ++i) {
      start[dnums.operand_batching_dims[i]] =
          reader.BatchCoordinate(o, dnums.start_indices_batching_dims[i]);
    }
    int64_t operand_linear = 0;
    for (int64_t d = 0; d < rank; ++d) {
      operand_linear += std::clamp<int64_t>(start[d], 0, operand_shape.dimensions(d) - slice_sizes[d]) *
                        operand_strides[d];
    }
    for (size_t j = 0; j < window_dims.size(); ++j) {
      operand_linear += o[dnums.offset_dims[j]] * operand_strides[window_dims[j]];
    }
    std::memcpy(result.untyped_data() + out_linear * width,
                operand.untyped_data() + operand_linear * width, width);
    ++out_linear;
  } while (out_index.Next());
  return result;
}

StatusOr<Literal> HandleScatter(HloEvaluator& evaluator, const HloInstruction& instruction,
                                std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  if (!instruction.scatter_dimension_numbers) return Error("scatter without dimension numbers");
  const ScatterDimensionNumbers& dnums = *instruction.scatter_dimension_numbers;
  if (operands.size() < 3 || operands.size() % 2 != 1) {
    return Error(fmt::format("scatter takes N operands, indices and N updates; got {} operands",
                             operands.size()));
  }
  const int64_t count = static_cast<int64_t>(operands.size() / 2);
  const std::span<const Literal* const> inputs = operands.subspan(0, count);
  const Literal& indices = *operands[count];
  const std::span<const Literal* const> updates = operands.subspan(count + 1);
  const Shape& operand_shape = inputs[0]->shape();
  const Shape& update_shape = updates[0]->shape();
  const int64_t rank = operand_shape.rank();

  std::vector<PrimitiveType> combiner_types, result_types;
  std::vector<Literal> results;
  for (int64_t i = 0; i < count; ++i) {
    RETURN_IF_ERROR(ExpectDimensions(inputs[i]->shape(), operand_shape.dimensions(), "operand"));
    RETURN_IF_ERROR(ExpectDimensions(updates[i]->shape(), update_shape.dimensions(), "updates"));
    const Shape& result_shape = count == 1 && !shape.IsTuple() ? shape
                                : shape.IsTuple() && shape.tuple_shapes_size() == count
                                    ? shape.tuple_shapes(i)
                                    : Shape();
    if (!shape_util::Compatible(result_shape, inputs[i]->shape())) {
      return Error(fmt::format("scatter of {} operands into {}", count, shape.ToString(false)));
    }
    result_types.push_back(inputs[i]->shape().element_type());
    results.emplace_back(*inputs[i]);
    if (result_shape.has_layout()) results.back().set_layout(result_shape.layout());
  }
  combiner_types = result_types;
  for (int64_t i = 0; i < count; ++i) combiner_types.push_back(updates[i]->shape().element_type());

  RETURN_IF_ERROR(CheckDims(dnums.scatter_dims_to_operand_dims, rank, "scatter_dims_to_operand"));
  RETURN_IF_ERROR(CheckDims(dnums.update_window_dims, update_shape.rank(), "update window"));
  std::vector<int64_t> excluded = dnums.inserted_window_dims;
  excluded.insert(excluded.end(), dnums.input_batching_dims.begin(), dnums.input_batching_dims.end());
  RETURN_IF_ERROR(CheckDims(excluded, rank, "inserted or batching"));
  if (dnums.input_batching_dims.size() != dnums.scatter_indices_batching_dims.size()) {
    return Error("operand and indices have different numbers of batching dimensions");
  }
  const std::vector<int64_t> window_dims = WindowOperandDims(rank, dnums.inserted_window_dims,
                                                             dnums.input_batching_dims);
  if (window_dims.size() != dnums.update_window_dims.size()) {
    return Error(fmt::format("{} update window dimensions for {} operand window dimensions",
                             dnums.update_window_dims.size(), window_dims.size()));
  }
  std::vector<int64_t> window_sizes(rank, 1);
  for (size_t j = 0; j < window_dims.size(); ++j) {
    window_sizes[window_dims[j]] = update_shape.dimensions(dnums.update_window_dims[j]);
    if (window_sizes[window_dims[j]] > operand_shape.dimensions(window_dims[j])) {
      return Error(fmt::format("update window dimension {} is larger than the operand", j));
    }
  }
  ASSIGN_OR_RETURN(IndexReader reader,
                   MakeIndexReader(indices, dnums.index_vector_dim,
                                   static_cast<int64_t>(dnums.scatter_dims_to_operand_dims.size()),
                                   update_shape.rank(), dnums.update_window_dims));
  for (size_t i = 0; i < reader.outer_dims.size(); ++i) {
    if (update_shape.dimensions(reader.outer_dims[i]) !=
        indices.shape().dimensions(reader.batch_dims[i])) {
      return Error("update scatter dimensions differ from the indices' batch dimensions");
    }
  }
  for (int64_t d : dnums.scatter_indices_batching_dims) {
    if (!Contains(reader.batch_dims, d)) return Error(fmt::format("invalid batching dimension {}", d));
  }
  ASSIGN_OR_RETURN(ScalarCaller combiner, ScalarCaller::Create(evaluator, instruction.to_apply(),
                                                               combiner_types, result_types));

  Literal result = count == 1 && !shape.IsTuple() ? std::move(results[0])
                                                  : Literal::MakeTuple(std::move(results));
  if (update_shape.num_elements() == 0) return result;
  std::vector<uint8_t*> result_data;
  std::vector<int64_t> result_widths, update_widths;
  for (int64_t i = 0; i < count; ++i) {
    Literal& r = result.shape().IsTuple() ? result.tuple_element(i) : result;
    result_data.push_back(r.untyped_data());
    result_widths.push_back(ByteWidth(r.shape().element_type()));
    update_widths.push_back(ByteWidth(updates[i]->shape().element_type()));
  }
  const std::vector<int64_t> operand_strides = StridesOf(operand_shape);
  std::vector<int64_t> index_vector, start(rank);
  std::vector<const void*> arguments(2 * count);
  std::vector<void*> outputs(count);
  IndexCounter update_index(update_shape.dimensions());
  int64_t update_linear = 0;
  do {
    const std::vector<int64_t>& u = update_index.index();
    reader.Read(u, index_vector);
    std::fill(start.begin(), start.end(), 0);
    for (size_t k = 0; k < dnums.scatter_dims_to_operand_dims.size(); ++k) {
      start[dnums.scatter_dims_to_operand_dims[k]] = index_vector[k];
    }
    for (size_t i = 0; i < dnums.input_batching_dims.size(); ++i) {
      start[dnums.input_batching_dims[i]] =
          reader.BatchCoordinate(u, dnums.scatter_indices_batching_dims[i]);
    }
    bool in_bounds = true;
    int64_t operand_linear = 0;
    for (int64_t d = 0; d < rank; ++d) {
      if (start[d] < 0 || start[d] > operand_shape.dimensions(d) - window_sizes[d]) {
        in_bounds = false;
        break;
      }
      operand_linear += start[d] * operand_strides[d];
    }
    if (in_bounds) {
      for (size_t j = 0; j < window_dims.size(); ++j) {
        operand_linear += u[dnums.update_window_dims[j]] * operand_strides[window_dims[j]];
      }
      for (int64_t i = 0; i < count; ++i) {
        uint8_t* target = result_data[i] + operand_linear * result_widths[i];
        arguments[i] = target;
        arguments[count + i] = updates[i]->untyped_data() + update_linear * update_widths[i];
        outputs[i] = target;
      }
      RETURN_IF_ERROR(combiner.Call(arguments, outputs));
    }
    ++update_linear;
  } while (update_index.Next());
  return result;
}

}  // namespace xlens::evaluator_internal
