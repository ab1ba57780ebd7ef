// Instructions that only move elements: broadcast, reshape, bitcast, transpose, slice,
// dynamic-slice, dynamic-update-slice, concatenate, pad, reverse. All of them are a strided copy
// of raw elements, so none of them depends on the element type.
#include <algorithm>
#include <numeric>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

int64_t ElementSize(const Shape& shape) { return ByteWidth(shape.element_type()); }

Status ExpectSameElementType(const Shape& a, const Shape& b) {
  if (a.element_type() != b.element_type()) {
    return Error(fmt::format("element types differ: {} and {}", PrimitiveTypeName(a.element_type()),
                             PrimitiveTypeName(b.element_type())));
  }
  return OkStatus();
}

Status ExpectArray(const Shape& shape, std::string_view what) {
  if (!shape.IsArray()) return Error(fmt::format("{} must be an array, got {}", what, shape.ToString(false)));
  return OkStatus();
}

// Copies `source` whole into `destination` at element offset `base` with `strides`.
void CopyInto(Literal& destination, int64_t base, std::span<const int64_t> strides,
              const Literal& source) {
  const std::vector<int64_t> source_strides = StridesOf(source.shape());
  StridedCopy(ElementSize(source.shape()), source.shape().dimensions(),
              destination.untyped_data(), base, strides, source.untyped_data(), 0,
              source_strides);
}

// Start indices of a dynamic-(update-)slice: one scalar operand per dimension, or (the old form)
// one rank-1 operand. Each is clamped so that a window of `sizes` fits into `dims`.
StatusOr<std::vector<int64_t>> ClampedStarts(std::span<const Literal* const> index_operands,
                                             std::span<const int64_t> dims,
                                             std::span<const int64_t> sizes) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  std::vector<int64_t> starts;
  if (index_operands.size() == 1 && index_operands[0]->shape().rank() == 1 && rank != 1) {
    const Literal& vector = *index_operands[0];
    if (vector.shape().dimensions(0) != rank) {
      return Error(fmt::format("start index vector has {} elements for rank {}",
                               vector.shape().dimensions(0), rank));
    }
    for (int64_t d = 0; d < rank; ++d) starts.push_back(IndexValue(vector, d));
  } else {
    if (static_cast<int64_t>(index_operands.size()) != rank) {
      return Error(fmt::format("{} start indices for rank {}", index_operands.size(), rank));
    }
    for (const Literal* index : index_operands) {
      if (!index->shape().IsArray() || index->element_count() != 1 ||
          !(IsIntegralType(index->shape().element_type()))) {
        return Error("start index must be an integer scalar, got " + index->shape().ToString(false));
      }
      starts.push_back(IndexValue(*index, 0));
    }
  }
  for (int64_t d = 0; d < rank; ++d) {
    if (sizes[d] < 0 || sizes[d] > dims[d]) {
      return Error(fmt::format("slice size {} exceeds dimension {} of size {}", sizes[d], d, dims[d]));
    }
    starts[d] = std::clamp<int64_t>(starts[d], 0, dims[d] - sizes[d]);
  }
  return starts;
}

// The strides of the bytes of `shape` laid out physically by its layout (row-major when it has
// none), indexed by logical dimension.
StatusOr<std::vector<int64_t>> PhysicalStrides(const Shape& shape) {
  const int64_t rank = shape.rank();
  std::vector<int64_t> minor_to_major = shape.has_layout() ? shape.layout().minor_to_major
                                                           : shape_util::DefaultMinorToMajor(rank);
  std::vector<int64_t> sorted = minor_to_major;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> expected(rank);
  std::iota(expected.begin(), expected.end(), 0);
  if (sorted != expected) {
    return Error("layout " + shape.layout().ToString() + " is not a permutation of the dimensions");
  }
  std::vector<int64_t> strides(rank);
  int64_t stride = 1;
  for (int64_t dim : minor_to_major) {
    strides[dim] = stride;
    stride *= shape.dimensions(dim);
  }
  return strides;
}

}  // namespace

StatusOr<Literal> HandleBroadcast(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  const std::vector<int64_t>& dimensions = instruction.dimensions();
  if (static_cast<int64_t>(dimensions.size()) != operand.shape().rank()) {
    return Error(fmt::format("dimensions={{{}}} for an operand of rank {}",
                             fmt::join(dimensions, ","), operand.shape().rank()));
  }
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  std::vector<int64_t> source_strides(shape.rank(), 0);
  for (size_t i = 0; i < dimensions.size(); ++i) {
    const int64_t dim = dimensions[i];
    if (dim < 0 || dim >= shape.rank() || shape.dimensions(dim) != operand.shape().dimensions(i)) {
      return Error(fmt::format("cannot broadcast {} into {} with dimensions={{{}}}",
                               operand.shape().ToString(false), shape.ToString(false),
                               fmt::join(dimensions, ",")));
    }
    source_strides[dim] = operand_strides[i];
  }
  Literal result(shape);
  StridedCopy(ElementSize(shape), shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              operand.untyped_data(), 0, source_strides);
  return result;
}

StatusOr<Literal> HandleReshape(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  if (operand.element_count() != shape.num_elements()) {
    return Error(fmt::format("cannot reshape {} into {}", operand.shape().ToString(false),
                             shape.ToString(false)));
  }
  Literal result(shape);
  std::memcpy(result.untyped_data(), operand.untyped_data(), result.size_bytes());
  return result;
}

// A bitcast reinterprets the physical buffer: the operand's elements in the order of its layout
// are the result's elements in the order of the result's layout. Without layouts (or with
// row-major ones on both sides) this is a reshape.
StatusOr<Literal> HandleBitcast(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  const Shape& operand_shape = instruction.operand(0)->shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  if (ElementSize(operand.shape()) != ElementSize(shape) ||
      operand.element_count() != shape.num_elements() ||
      !shape_util::SameDimensions(operand.shape(), operand_shape)) {
    return Error(fmt::format("cannot bitcast {} to {}", operand.shape().ToString(false),
                             shape.ToString(false)));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> operand_physical, PhysicalStrides(operand_shape));
  ASSIGN_OR_RETURN(std::vector<int64_t> result_physical, PhysicalStrides(shape));
  const int64_t element_size = ElementSize(shape);
  Literal result(shape);
  if (operand_physical == StridesOf(operand_shape) && result_physical == StridesOf(shape)) {
    std::memcpy(result.untyped_data(), operand.untyped_data(), result.size_bytes());
    return result;
  }
  // Lay the operand out physically, then read the result's elements from that buffer.
  std::vector<uint8_t> physical(result.size_bytes());
  StridedCopy(element_size, operand.shape().dimensions(), physical.data(), 0, operand_physical,
              operand.untyped_data(), 0, StridesOf(operand.shape()));
  StridedCopy(element_size, shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              physical.data(), 0, result_physical);
  return result;
}

StatusOr<Literal> HandleTranspose(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  const std::vector<int64_t>& permutation = instruction.dimensions();
  const int64_t rank = operand.shape().rank();
  std::vector<int64_t> sorted = permutation;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> identity(rank);
  std::iota(identity.begin(), identity.end(), 0);
  if (sorted != identity || shape.rank() != rank) {
    return Error(fmt::format("dimensions={{{}}} is not a permutation of rank {}",
                             fmt::join(permutation, ","), rank));
  }
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  std::vector<int64_t> source_strides(rank);
  for (int64_t i = 0; i < rank; ++i) {
    if (shape.dimensions(i) != operand.shape().dimensions(permutation[i])) {
      return Error(fmt::format("cannot transpose {} into {}", operand.shape().ToString(false),
                               shape.ToString(false)));
    }
    source_strides[i] = operand_strides[permutation[i]];
  }
  Literal result(shape);
  StridedCopy(ElementSize(shape), shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              operand.untyped_data(), 0, source_strides);
  return result;
}

StatusOr<Literal> HandleSlice(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  const int64_t rank = operand.shape().rank();
  if (static_cast<int64_t>(instruction.slice_starts.size()) != rank ||
      instruction.slice_limits.size() != instruction.slice_starts.size() ||
      instruction.slice_strides.size() != instruction.slice_starts.size() || shape.rank() != rank) {
    return Error(fmt::format("slice has {} dimensions for an operand of rank {}",
                             instruction.slice_starts.size(), rank));
  }
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  std::vector<int64_t> source_strides(rank);
  int64_t base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t start = instruction.slice_starts[d];
    const int64_t limit = instruction.slice_limits[d];
    const int64_t stride = instruction.slice_strides[d];
    if (start < 0 || limit < start || limit > operand.shape().dimensions(d) || stride < 1 ||
        shape.dimensions(d) != (limit - start + stride - 1) / stride) {
      return Error(fmt::format("slice [{}:{}:{}] of dimension {} (size {}) into size {}", start,
                               limit, stride, d, operand.shape().dimensions(d), shape.dimensions(d)));
    }
    base += start * operand_strides[d];
    source_strides[d] = stride * operand_strides[d];
  }
  Literal result(shape);
  StridedCopy(ElementSize(shape), shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              operand.untyped_data(), base, source_strides);
  return result;
}

StatusOr<Literal> HandleDynamicSlice(const HloInstruction& instruction,
                                     std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  const Literal& operand = *operands[0];
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  if (instruction.dynamic_slice_sizes_attr &&
      *instruction.dynamic_slice_sizes_attr != shape.dimensions()) {
    return Error("dynamic_slice_sizes differ from the result's dimensions");
  }
  if (shape.rank() != operand.shape().rank()) {
    return Error(fmt::format("result rank {} differs from operand rank {}", shape.rank(),
                             operand.shape().rank()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                   ClampedStarts(operands.subspan(1), operand.shape().dimensions(),
                                 shape.dimensions()));
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  int64_t base = 0;
  for (int64_t d = 0; d < shape.rank(); ++d) base += starts[d] * operand_strides[d];
  Literal result(shape);
  StridedCopy(ElementSize(shape), shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              operand.untyped_data(), base, operand_strides);
  return result;
}

StatusOr<Literal> HandleDynamicUpdateSlice(const HloInstruction& instruction,
                                           std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  if (operands.size() < 2) return Error("dynamic-update-slice needs an operand and an update");
  const Literal& operand = *operands[0];
  const Literal& update = *operands[1];
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), shape.dimensions(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  RETURN_IF_ERROR(ExpectSameElementType(update.shape(), shape));
  if (update.shape().rank() != shape.rank()) {
    return Error(fmt::format("update rank {} differs from operand rank {}", update.shape().rank(),
                             shape.rank()));
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> starts,
                   ClampedStarts(operands.subspan(2), shape.dimensions(),
                                 update.shape().dimensions()));
  const std::vector<int64_t> strides = StridesOf(shape);
  int64_t base = 0;
  for (int64_t d = 0; d < shape.rank(); ++d) base += starts[d] * strides[d];
  Literal result(operand);
  if (shape.has_layout()) result.set_layout(shape.layout());
  CopyInto(result, base, strides, update);
  return result;
}

StatusOr<Literal> HandleConcatenate(const HloInstruction& instruction,
                                    std::span<const Literal* const> operands) {
  const Shape& shape = instruction.shape();
  if (instruction.dimensions().size() != 1) return Error("concatenate needs one dimension");
  const int64_t dimension = instruction.dimensions(0);
  if (dimension < 0 || dimension >= shape.rank()) {
    return Error(fmt::format("concatenate dimension {} out of range", dimension));
  }
  int64_t total = 0;
  for (const Literal* operand : operands) {
    RETURN_IF_ERROR(ExpectArray(operand->shape(), "operand"));
    RETURN_IF_ERROR(ExpectSameElementType(operand->shape(), shape));
    std::vector<int64_t> expected = shape.dimensions();
    if (operand->shape().rank() != shape.rank()) {
      return Error("concatenate operands must have the result's rank");
    }
    expected[dimension] = operand->shape().dimensions(dimension);
    RETURN_IF_ERROR(ExpectDimensions(operand->shape(), expected, "concatenate operand"));
    total += expected[dimension];
  }
  if (total != shape.dimensions(dimension)) {
    return Error(fmt::format("operands add up to {} along dimension {}, the result has {}", total,
                             dimension, shape.dimensions(dimension)));
  }
  Literal result(shape);
  const std::vector<int64_t> strides = StridesOf(shape);
  int64_t offset = 0;
  for (const Literal* operand : operands) {
    CopyInto(result, offset * strides[dimension], strides, *operand);
    offset += operand->shape().dimensions(dimension);
  }
  return result;
}

StatusOr<Literal> HandlePad(const HloInstruction& instruction, const Literal& operand,
                            const Literal& padding_value) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectArray(operand.shape(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  RETURN_IF_ERROR(ExpectSameElementType(padding_value.shape(), shape));
  RETURN_IF_ERROR(ExpectDimensions(padding_value.shape(), {}, "padding value"));
  if (!instruction.padding_config) return Error("pad without a padding config");
  const std::vector<PaddingDimension>& config = instruction.padding_config->dimensions;
  const int64_t rank = operand.shape().rank();
  if (static_cast<int64_t>(config.size()) != rank || shape.rank() != rank) {
    return Error(fmt::format("padding config has {} dimensions for rank {}", config.size(), rank));
  }
  // Element i of a dimension lands at low + i * (interior + 1); negative padding drops the
  // elements that land outside the result.
  std::vector<int64_t> counts(rank), dst_strides(rank);
  const std::vector<int64_t> result_strides = StridesOf(shape);
  const std::vector<int64_t> operand_strides = StridesOf(operand.shape());
  int64_t dst_base = 0, src_base = 0;
  for (int64_t d = 0; d < rank; ++d) {
    const PaddingDimension& p = config[d];
    const int64_t n = operand.shape().dimensions(d);
    const int64_t out = shape.dimensions(d);
    const int64_t step = p.interior_padding + 1;
    const int64_t expected =
        p.edge_padding_low + p.edge_padding_high + n + std::max<int64_t>(n - 1, 0) * p.interior_padding;
    if (p.interior_padding < 0 || expected != out) {
      return Error(fmt::format("padding {}_{}_{} of size {} gives {}, the result has {}",
                               p.edge_padding_low, p.edge_padding_high, p.interior_padding, n,
                               expected, out));
    }
    const int64_t first = p.edge_padding_low >= 0 ? 0 : (-p.edge_padding_low + step - 1) / step;
    const int64_t last_position = out - 1 - p.edge_padding_low;  // largest i * step that fits
    const int64_t end = last_position < 0 ? 0 : std::min(n, last_position / step + 1);
    counts[d] = std::max<int64_t>(end - first, 0);
    dst_base += (p.edge_padding_low + first * step) * result_strides[d];
    src_base += first * operand_strides[d];
    dst_strides[d] = step * result_strides[d];
  }
  Literal result(shape);
  const std::vector<int64_t> broadcast_strides(rank, 0);
  const int64_t element_size = ElementSize(shape);
  StridedCopy(element_size, shape.dimensions(), result.untyped_data(), 0, result_strides,
              padding_value.untyped_data(), 0, broadcast_strides);
  StridedCopy(element_size, counts, result.untyped_data(), dst_base, dst_strides,
              operand.untyped_data(), src_base, operand_strides);
  return result;
}

StatusOr<Literal> HandleReverse(const HloInstruction& instruction, const Literal& operand) {
  const Shape& shape = instruction.shape();
  RETURN_IF_ERROR(ExpectDimensions(operand.shape(), shape.dimensions(), "operand"));
  RETURN_IF_ERROR(ExpectSameElementType(operand.shape(), shape));
  std::vector<int64_t> source_strides = StridesOf(shape);
  std::vector<bool> reversed(shape.rank(), false);
  int64_t base = 0;
  for (int64_t dim : instruction.dimensions()) {
    if (dim < 0 || dim >= shape.rank() || reversed[dim]) {
      return Error(fmt::format("invalid reverse dimension {}", dim));
    }
    reversed[dim] = true;
    base += std::max<int64_t>(shape.dimensions(dim) - 1, 0) * source_strides[dim];
    source_strides[dim] = -source_strides[dim];
  }
  Literal result(shape);
  StridedCopy(ElementSize(shape), shape.dimensions(), result.untyped_data(), 0, StridesOf(shape),
              operand.untyped_data(), base, source_strides);
  return result;
}

}  // namespace xlens::evaluator_internal
