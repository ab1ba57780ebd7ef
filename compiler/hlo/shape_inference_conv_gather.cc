// Shape inference for the ops driven by dimension numbers: dot, convolution, gather, scatter.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/hlo/shape_inference_internal.h"

namespace xlens::shape_inference_internal {

namespace {

// The result element type of dot and convolution: written in the text when it differs from the
// operands' (preferred_element_type); derivable only when both operands agree.
StatusOr<PrimitiveType> ContractionResultType(const HloInstruction& instruction, const Shape& lhs,
                                              const Shape& rhs) {
  if (instruction.shape().IsValid() && instruction.shape().IsArray()) {
    return instruction.shape().element_type();
  }
  if (lhs.element_type() != rhs.element_type()) {
    return Error(fmt::format(
        "operands of {} have different element types ({} vs {}): the result shape must be "
        "written",
        HloOpcodeString(instruction.opcode()), ShapeString(lhs), ShapeString(rhs)));
  }
  return lhs.element_type();
}

std::vector<int64_t> Concat(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  std::vector<int64_t> out = a;
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

Status CheckSortedUnique(const std::vector<int64_t>& dims, int64_t bound, std::string_view name,
                         std::string_view what) {
  RETURN_IF_ERROR(CheckDimensionList(dims, bound, name, what));
  if (!std::is_sorted(dims.begin(), dims.end())) {
    return Error(fmt::format("{}={} must be sorted", name, DimsString(dims)));
  }
  return OkStatus();
}

bool Contains(const std::vector<int64_t>& dims, int64_t d) {
  return std::find(dims.begin(), dims.end(), d) != dims.end();
}

// Indices with index_vector_dim == rank have an implicit trailing index vector of size 1.
StatusOr<std::vector<int64_t>> ExpandedIndexDimensions(const Shape& indices,
                                                       int64_t index_vector_dim) {
  if (!indices.IsArray() || !IsIntegralType(indices.element_type())) {
    return Error(fmt::format("indices must be an integer array, not {}", ShapeString(indices)));
  }
  if (index_vector_dim < 0 || index_vector_dim > indices.rank()) {
    return Error(fmt::format("index_vector_dim={} is out of range for indices of rank {}",
                             index_vector_dim, indices.rank()));
  }
  std::vector<int64_t> dims = indices.dimensions();
  if (index_vector_dim == indices.rank()) dims.push_back(1);
  return dims;
}

Status CheckIndexBatchingDims(const std::vector<int64_t>& operand_batching,
                              const std::vector<int64_t>& indices_batching,
                              int64_t index_vector_dim, int64_t indices_rank,
                              std::string_view indices_name) {
  if (operand_batching.size() != indices_batching.size()) {
    return Error(fmt::format("{}={} must have one entry per operand batching dimension {}",
                             indices_name, DimsString(indices_batching),
                             DimsString(operand_batching)));
  }
  RETURN_IF_ERROR(CheckDimensionList(indices_batching, indices_rank, indices_name, "indices"));
  if (Contains(indices_batching, index_vector_dim)) {
    return Error(fmt::format("{}={} must not contain index_vector_dim={}", indices_name,
                             DimsString(indices_batching), index_vector_dim));
  }
  return OkStatus();
}

}  // namespace

StatusOr<Shape> InferDotShape(const HloInstruction& instruction) {
  const Shape& lhs = OperandShape(instruction, 0);
  const Shape& rhs = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(lhs, "the lhs operand"));
  RETURN_IF_ERROR(ExpectArray(rhs, "the rhs operand"));
  const DotDimensionNumbers dnums =
      instruction.dot_dimension_numbers.value_or(DotDimensionNumbers{});
  if (dnums.lhs_batch_dimensions.size() != dnums.rhs_batch_dimensions.size()) {
    return Error(fmt::format("lhs_batch_dims={} and rhs_batch_dims={} must have the same length",
                             DimsString(dnums.lhs_batch_dimensions),
                             DimsString(dnums.rhs_batch_dimensions)));
  }
  if (dnums.lhs_contracting_dimensions.size() != dnums.rhs_contracting_dimensions.size()) {
    return Error(
        fmt::format("lhs_contracting_dims={} and rhs_contracting_dims={} must have the same length",
                    DimsString(dnums.lhs_contracting_dimensions),
                    DimsString(dnums.rhs_contracting_dimensions)));
  }
  for (const auto& [name, dims, rank] :
       {std::tuple{"lhs_batch_dims", &dnums.lhs_batch_dimensions, lhs.rank()},
        std::tuple{"lhs_contracting_dims", &dnums.lhs_contracting_dimensions, lhs.rank()},
        std::tuple{"rhs_batch_dims", &dnums.rhs_batch_dimensions, rhs.rank()},
        std::tuple{"rhs_contracting_dims", &dnums.rhs_contracting_dimensions, rhs.rank()}}) {
    RETURN_IF_ERROR(CheckDimensionList(*dims, rank, name, "operand"));
  }
  RETURN_IF_ERROR(
      CheckDimensionList(Concat(dnums.lhs_batch_dimensions, dnums.lhs_contracting_dimensions),
                         lhs.rank(), "lhs batch and contracting dims", "lhs"));
  RETURN_IF_ERROR(
      CheckDimensionList(Concat(dnums.rhs_batch_dimensions, dnums.rhs_contracting_dimensions),
                         rhs.rank(), "rhs batch and contracting dims", "rhs"));
  for (size_t i = 0; i < dnums.lhs_batch_dimensions.size(); ++i) {
    const int64_t l = dnums.lhs_batch_dimensions[i];
    const int64_t r = dnums.rhs_batch_dimensions[i];
    if (!DimsCompatible(lhs.dimensions(l), rhs.dimensions(r))) {
      return Error(fmt::format(
          "batch dimension sizes must match: lhs dimension {} has size {}, rhs dimension {} has "
          "size {}",
          l, lhs.dimensions(l), r, rhs.dimensions(r)));
    }
  }
  for (size_t i = 0; i < dnums.lhs_contracting_dimensions.size(); ++i) {
    const int64_t l = dnums.lhs_contracting_dimensions[i];
    const int64_t r = dnums.rhs_contracting_dimensions[i];
    if (!DimsCompatible(lhs.dimensions(l), rhs.dimensions(r))) {
      return Error(fmt::format(
          "contracting dimension sizes must match: lhs dimension {} has size {}, rhs dimension {} "
          "has size {}",
          l, lhs.dimensions(l), r, rhs.dimensions(r)));
    }
  }
  ASSIGN_OR_RETURN(PrimitiveType type, ContractionResultType(instruction, lhs, rhs));

  std::vector<int64_t> dims;
  std::vector<bool> dynamic;
  auto add = [&](const Shape& s, int64_t d) {
    dims.push_back(s.dimensions(d));
    dynamic.push_back(s.is_dynamic_dimension(d));
  };
  for (int64_t d : dnums.lhs_batch_dimensions) add(lhs, d);
  for (int64_t d = 0; d < lhs.rank(); ++d) {
    if (!Contains(dnums.lhs_batch_dimensions, d) &&
        !Contains(dnums.lhs_contracting_dimensions, d)) {
      add(lhs, d);
    }
  }
  for (int64_t d = 0; d < rhs.rank(); ++d) {
    if (!Contains(dnums.rhs_batch_dimensions, d) &&
        !Contains(dnums.rhs_contracting_dimensions, d)) {
      add(rhs, d);
    }
  }
  Shape out(type, std::move(dims));
  for (size_t i = 0; i < dynamic.size(); ++i) {
    if (dynamic[i]) out.set_dynamic_dimension(static_cast<int64_t>(i), true);
  }
  return out;
}

StatusOr<Shape> InferConvolutionShape(const HloInstruction& instruction) {
  const Shape& lhs = OperandShape(instruction, 0);
  const Shape& rhs = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(lhs, "the input"));
  RETURN_IF_ERROR(ExpectArray(rhs, "the kernel"));
  if (!instruction.convolution_dimension_numbers) return Error("convolution needs dim_labels=");
  const ConvolutionDimensionNumbers& dnums = *instruction.convolution_dimension_numbers;
  const Window window = instruction.window.value_or(Window{});
  const auto num_spatial = static_cast<int64_t>(dnums.input_spatial_dimensions.size());
  if (static_cast<int64_t>(dnums.kernel_spatial_dimensions.size()) != num_spatial ||
      static_cast<int64_t>(dnums.output_spatial_dimensions.size()) != num_spatial) {
    return Error(
        fmt::format("dim_labels={} must name the same number of spatial dimensions for "
                    "input, kernel and output",
                    dnums.ToString()));
  }
  if (static_cast<int64_t>(window.dimensions.size()) != num_spatial) {
    return Error(fmt::format("window has {} dimensions, but dim_labels={} has {} spatial ones",
                             window.dimensions.size(), dnums.ToString(), num_spatial));
  }
  if (lhs.rank() != num_spatial + 2 || rhs.rank() != num_spatial + 2) {
    return Error(fmt::format("dim_labels={} needs input and kernel of rank {}, not {} and {}",
                             dnums.ToString(), num_spatial + 2, ShapeString(lhs),
                             ShapeString(rhs)));
  }
  const int64_t rank = num_spatial + 2;
  RETURN_IF_ERROR(
      CheckDimensionList(Concat({dnums.input_batch_dimension, dnums.input_feature_dimension},
                                dnums.input_spatial_dimensions),
                         rank, "dim_labels input dimensions", "input"));
  RETURN_IF_ERROR(CheckDimensionList(
      Concat({dnums.kernel_input_feature_dimension, dnums.kernel_output_feature_dimension},
             dnums.kernel_spatial_dimensions),
      rank, "dim_labels kernel dimensions", "kernel"));
  RETURN_IF_ERROR(
      CheckDimensionList(Concat({dnums.output_batch_dimension, dnums.output_feature_dimension},
                                dnums.output_spatial_dimensions),
                         rank, "dim_labels output dimensions", "output"));

  const int64_t feature_groups = instruction.feature_group_count();
  const int64_t batch_groups = instruction.batch_group_count();
  if (feature_groups <= 0 || batch_groups <= 0) {
    return Error(fmt::format("feature_group_count={} and batch_group_count={} must be positive",
                             feature_groups, batch_groups));
  }
  if (feature_groups > 1 && batch_groups > 1) {
    return Error("feature_group_count and batch_group_count cannot both be greater than 1");
  }
  const int64_t batch = lhs.dimensions(dnums.input_batch_dimension);
  const int64_t input_features = lhs.dimensions(dnums.input_feature_dimension);
  const int64_t kernel_input_features = rhs.dimensions(dnums.kernel_input_feature_dimension);
  const int64_t kernel_output_features = rhs.dimensions(dnums.kernel_output_feature_dimension);
  if (input_features % feature_groups != 0 ||
      input_features / feature_groups != kernel_input_features) {
    return Error(fmt::format(
        "the input feature size {} divided by feature_group_count={} must equal the kernel's "
        "input feature size {}",
        input_features, feature_groups, kernel_input_features));
  }
  if (kernel_output_features % feature_groups != 0) {
    return Error(fmt::format(
        "the kernel's output feature size {} must be a multiple of feature_group_count={}",
        kernel_output_features, feature_groups));
  }
  if (batch % batch_groups != 0 || kernel_output_features % batch_groups != 0) {
    return Error(fmt::format(
        "the input batch size {} and the kernel's output feature size {} must be multiples of "
        "batch_group_count={}",
        batch, kernel_output_features, batch_groups));
  }
  for (int64_t i = 0; i < num_spatial; ++i) {
    const int64_t kernel_size = rhs.dimensions(dnums.kernel_spatial_dimensions[i]);
    if (window.dimensions[i].size != kernel_size) {
      return Error(
          fmt::format("window size {} of spatial dimension {} must equal the kernel's "
                      "size {} there",
                      window.dimensions[i].size, i, kernel_size));
    }
  }
  ASSIGN_OR_RETURN(PrimitiveType type, ContractionResultType(instruction, lhs, rhs));
  Shape out(type, std::vector<int64_t>(rank, 0));
  out.set_dimensions(dnums.output_batch_dimension, batch / batch_groups);
  out.set_dimensions(dnums.output_feature_dimension, kernel_output_features);
  for (int64_t i = 0; i < num_spatial; ++i) {
    ASSIGN_OR_RETURN(int64_t size,
                     WindowedDimensionSize(lhs.dimensions(dnums.input_spatial_dimensions[i]),
                                           window.dimensions[i], i));
    out.set_dimensions(dnums.output_spatial_dimensions[i], size);
  }
  return out;
}

StatusOr<Shape> InferGatherShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  const Shape& indices = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  if (!instruction.gather_dimension_numbers) return Error("gather needs dimension numbers");
  if (!instruction.slice_sizes_attr) return Error("gather needs slice_sizes={...}");
  const GatherDimensionNumbers& d = *instruction.gather_dimension_numbers;
  const std::vector<int64_t>& slice_sizes = *instruction.slice_sizes_attr;
  ASSIGN_OR_RETURN(std::vector<int64_t> expanded,
                   ExpandedIndexDimensions(indices, d.index_vector_dim));

  if (static_cast<int64_t>(d.start_index_map.size()) != expanded[d.index_vector_dim]) {
    return Error(
        fmt::format("start_index_map={} must have one entry per element of the index vector ({})",
                    DimsString(d.start_index_map), expanded[d.index_vector_dim]));
  }
  RETURN_IF_ERROR(
      CheckDimensionList(d.start_index_map, operand.rank(), "start_index_map", "operand"));
  RETURN_IF_ERROR(
      CheckSortedUnique(d.collapsed_slice_dims, operand.rank(), "collapsed_slice_dims", "operand"));
  RETURN_IF_ERROR(CheckSortedUnique(d.operand_batching_dims, operand.rank(),
                                    "operand_batching_dims", "operand"));
  RETURN_IF_ERROR(CheckDimensionList(Concat(d.collapsed_slice_dims, d.operand_batching_dims),
                                     operand.rank(), "collapsed and batching dims", "operand"));
  RETURN_IF_ERROR(CheckIndexBatchingDims(d.operand_batching_dims, d.start_indices_batching_dims,
                                         d.index_vector_dim, indices.rank(),
                                         "start_indices_batching_dims"));
  if (static_cast<int64_t>(slice_sizes.size()) != operand.rank()) {
    return Error(fmt::format("slice_sizes={} must have one size per dimension of operand {}",
                             DimsString(slice_sizes), ShapeString(operand)));
  }
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (slice_sizes[i] < 0 ||
        (!operand.is_unbounded_dynamic_dimension(i) && slice_sizes[i] > operand.dimensions(i))) {
      return Error(fmt::format("slice_sizes={} is out of range for operand {}",
                               DimsString(slice_sizes), ShapeString(operand)));
    }
  }
  for (int64_t dim : Concat(d.collapsed_slice_dims, d.operand_batching_dims)) {
    if (slice_sizes[dim] > 1) {
      return Error(fmt::format("slice size {} of collapsed or batching dimension {} must be <= 1",
                               slice_sizes[dim], dim));
    }
  }
  const auto offset_count = static_cast<int64_t>(d.offset_dims.size());
  if (offset_count +
          static_cast<int64_t>(d.collapsed_slice_dims.size() + d.operand_batching_dims.size()) !=
      operand.rank()) {
    return Error(fmt::format(
        "offset_dims={}, collapsed_slice_dims={} and operand_batching_dims={} must together "
        "account for the {} operand dimensions",
        DimsString(d.offset_dims), DimsString(d.collapsed_slice_dims),
        DimsString(d.operand_batching_dims), operand.rank()));
  }
  const int64_t output_rank = offset_count + static_cast<int64_t>(expanded.size()) - 1;
  RETURN_IF_ERROR(CheckSortedUnique(d.offset_dims, output_rank, "offset_dims", "the result"));

  std::vector<int64_t> dims(output_rank);
  int64_t operand_dim = 0;
  int64_t index_dim = 0;
  for (int64_t i = 0; i < output_rank; ++i) {
    if (Contains(d.offset_dims, i)) {
      while (Contains(d.collapsed_slice_dims, operand_dim) ||
             Contains(d.operand_batching_dims, operand_dim)) {
        ++operand_dim;
      }
      dims[i] = slice_sizes[operand_dim++];
    } else {
      if (index_dim == d.index_vector_dim) ++index_dim;
      dims[i] = expanded[index_dim++];
    }
  }
  return Shape(operand.element_type(), std::move(dims));
}

StatusOr<Shape> InferScatterShape(const HloInstruction& instruction) {
  const int64_t count = instruction.operand_count();
  if (count < 3 || count % 2 == 0) {
    return Error(fmt::format(
        "scatter needs N operands, the indices and N updates, but has {} operands", count));
  }
  const int64_t n = (count - 1) / 2;
  const Shape& operand = OperandShape(instruction, 0);
  const Shape& indices = OperandShape(instruction, n);
  const Shape& updates = OperandShape(instruction, n + 1);
  std::vector<Shape> results;
  std::vector<PrimitiveType> operand_types, update_types;
  for (int64_t i = 0; i < n; ++i) {
    const Shape& o = OperandShape(instruction, i);
    const Shape& u = OperandShape(instruction, n + 1 + i);
    RETURN_IF_ERROR(ExpectArray(o, fmt::format("operand {}", i)));
    RETURN_IF_ERROR(ExpectArray(u, fmt::format("update {}", i)));
    if (!SameDimensions(o, operand) || !SameDimensions(u, updates)) {
      return Error("scatter operands (and updates) must all have the same dimensions");
    }
    results.push_back(o);
    results.back().clear_layout();
    operand_types.push_back(o.element_type());
    update_types.push_back(u.element_type());
  }
  if (!instruction.scatter_dimension_numbers) return Error("scatter needs dimension numbers");
  const ScatterDimensionNumbers& d = *instruction.scatter_dimension_numbers;
  ASSIGN_OR_RETURN(std::vector<int64_t> expanded,
                   ExpandedIndexDimensions(indices, d.index_vector_dim));

  RETURN_IF_ERROR(
      CheckSortedUnique(d.update_window_dims, updates.rank(), "update_window_dims", "updates"));
  RETURN_IF_ERROR(
      CheckSortedUnique(d.inserted_window_dims, operand.rank(), "inserted_window_dims", "operand"));
  RETURN_IF_ERROR(
      CheckSortedUnique(d.input_batching_dims, operand.rank(), "input_batching_dims", "operand"));
  RETURN_IF_ERROR(CheckDimensionList(Concat(d.inserted_window_dims, d.input_batching_dims),
                                     operand.rank(), "inserted and batching dims", "operand"));
  RETURN_IF_ERROR(CheckIndexBatchingDims(d.input_batching_dims, d.scatter_indices_batching_dims,
                                         d.index_vector_dim, indices.rank(),
                                         "scatter_indices_batching_dims"));
  if (static_cast<int64_t>(d.scatter_dims_to_operand_dims.size()) != expanded[d.index_vector_dim]) {
    return Error(fmt::format(
        "scatter_dims_to_operand_dims={} must have one entry per element of the index vector ({})",
        DimsString(d.scatter_dims_to_operand_dims), expanded[d.index_vector_dim]));
  }
  RETURN_IF_ERROR(CheckDimensionList(d.scatter_dims_to_operand_dims, operand.rank(),
                                     "scatter_dims_to_operand_dims", "operand"));
  const auto window_count = static_cast<int64_t>(d.update_window_dims.size());
  if (window_count +
          static_cast<int64_t>(d.inserted_window_dims.size() + d.input_batching_dims.size()) !=
      operand.rank()) {
    return Error(fmt::format(
        "update_window_dims={}, inserted_window_dims={} and input_batching_dims={} must together "
        "account for the {} operand dimensions",
        DimsString(d.update_window_dims), DimsString(d.inserted_window_dims),
        DimsString(d.input_batching_dims), operand.rank()));
  }
  const int64_t expected_rank = window_count + static_cast<int64_t>(expanded.size()) - 1;
  if (updates.rank() != expected_rank) {
    return Error(fmt::format("updates {} must have rank {} (window dims plus scatter dims)",
                             ShapeString(updates), expected_rank));
  }
  int64_t operand_dim = 0;
  int64_t index_dim = 0;
  for (int64_t i = 0; i < updates.rank(); ++i) {
    if (Contains(d.update_window_dims, i)) {
      while (Contains(d.inserted_window_dims, operand_dim) ||
             Contains(d.input_batching_dims, operand_dim)) {
        ++operand_dim;
      }
      if (!operand.is_unbounded_dynamic_dimension(operand_dim) &&
          !updates.is_unbounded_dynamic_dimension(i) &&
          updates.dimensions(i) > operand.dimensions(operand_dim)) {
        return Error(fmt::format(
            "update window dimension {} (size {}) is larger than operand dimension {} (size {})", i,
            updates.dimensions(i), operand_dim, operand.dimensions(operand_dim)));
      }
      ++operand_dim;
    } else {
      if (index_dim == d.index_vector_dim) ++index_dim;
      if (!DimsCompatible(updates.dimensions(i), expanded[index_dim])) {
        return Error(
            fmt::format("update scatter dimension {} has size {}, but the indices {} give {}", i,
                        updates.dimensions(i), ShapeString(indices), expanded[index_dim]));
      }
      ++index_dim;
    }
  }
  ASSIGN_OR_RETURN(const HloComputation* update, CalledComputation(instruction, "to_apply"));
  RETURN_IF_ERROR(CheckReducer(*update, operand_types, update_types, "the update computation"));
  if (n == 1) return std::move(results[0]);
  return Shape::Tuple(std::move(results));
}

}  // namespace xlens::shape_inference_internal
