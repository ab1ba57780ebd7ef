// Shape inference for the ops that move data without computing: broadcast, reshape, bitcast,
// transpose, slice, dynamic-slice, dynamic-update-slice, concatenate, pad, reverse.
#include <algorithm>

#include <fmt/format.h>

#include "compiler/hlo/shape_inference_internal.h"

namespace xlens::shape_inference_internal {

namespace {

bool HasUnboundedDimension(const Shape& shape) {
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (shape.is_unbounded_dynamic_dimension(i)) return true;
  }
  return false;
}

// Start indices are either one scalar per dimension or (the older form) a single vector.
Status CheckStartIndices(const HloInstruction& instruction, int64_t first, int64_t rank) {
  const int64_t count = instruction.operand_count() - first;
  if (count == 1 && rank != 1 && OperandShape(instruction, first).rank() == 1) {
    const Shape& indices = OperandShape(instruction, first);
    if (!IsIntegralType(indices.element_type()) || indices.dimensions(0) != rank) {
      return Error(fmt::format("start indices {} must be an integer vector of {} elements",
                               ShapeString(indices), rank));
    }
    return OkStatus();
  }
  if (count != rank) {
    return Error(fmt::format("{} needs {} start indices (one per operand dimension), but has {}",
                             HloOpcodeString(instruction.opcode()), rank, count));
  }
  for (int64_t i = first; i < instruction.operand_count(); ++i) {
    const Shape& index = OperandShape(instruction, i);
    if (!index.IsArray() || index.rank() != 0 || !IsIntegralType(index.element_type())) {
      return Error(fmt::format("start index {} must be an integer scalar, not {}", i - first,
                               ShapeString(index)));
    }
    if (index.element_type() != OperandShape(instruction, first).element_type()) {
      return Error("start indices must all have the same element type");
    }
  }
  return OkStatus();
}

}  // namespace

StatusOr<Shape> InferBroadcastShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
  RETURN_IF_ERROR(ExpectArray(declared, "the result of broadcast"));
  const std::vector<int64_t>& dims = instruction.dimensions();
  if (static_cast<int64_t>(dims.size()) != operand.rank()) {
    return Error(fmt::format("dimensions={} must map each of the {} operand dimensions",
                             DimsString(dims), operand.rank()));
  }
  RETURN_IF_ERROR(CheckDimensionList(dims, declared.rank(), "dimensions", "a result"));
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (!DimsCompatible(operand.dimensions(i), declared.dimensions(dims[i]))) {
      return Error(
          fmt::format("operand dimension {} (size {}) is mapped to result dimension {} of size {}",
                      i, operand.dimensions(i), dims[i], declared.dimensions(dims[i])));
    }
  }
  return WithElementType(declared, operand.element_type());
}

StatusOr<Shape> InferReshapeShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
  RETURN_IF_ERROR(ExpectArray(declared, "the result of reshape"));
  if (!HasUnboundedDimension(operand) && !HasUnboundedDimension(declared) &&
      operand.num_elements() != declared.num_elements()) {
    return Error(fmt::format("reshape cannot change the element count: {} has {}, {} has {}",
                             ShapeString(operand), operand.num_elements(), ShapeString(declared),
                             declared.num_elements()));
  }
  return WithElementType(declared, operand.element_type());
}

StatusOr<Shape> InferBitcastShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
  if (operand.IsArray() && declared.IsArray() && operand.is_static() && declared.is_static() &&
      shape_util::ByteSizeOf(operand) != shape_util::ByteSizeOf(declared)) {
    return Error(fmt::format("bitcast cannot change the byte size: {} is {} bytes, {} is {}",
                             ShapeString(operand), shape_util::ByteSizeOf(operand),
                             ShapeString(declared), shape_util::ByteSizeOf(declared)));
  }
  return declared;
}

StatusOr<Shape> InferTransposeShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  const std::vector<int64_t>& perm = instruction.dimensions();
  if (static_cast<int64_t>(perm.size()) != operand.rank()) {
    return Error(fmt::format("dimensions={} is not a permutation of the {} operand dimensions",
                             DimsString(perm), operand.rank()));
  }
  RETURN_IF_ERROR(CheckDimensionList(perm, operand.rank(), "dimensions", "operand"));
  Shape out(operand.element_type(), std::vector<int64_t>(perm.size()));
  for (size_t i = 0; i < perm.size(); ++i) {
    out.set_dimensions(static_cast<int64_t>(i), operand.dimensions(perm[i]));
    out.set_dynamic_dimension(static_cast<int64_t>(i), operand.is_dynamic_dimension(perm[i]));
  }
  return out;
}

StatusOr<Shape> InferSliceShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  if (!instruction.has_slice) return Error("slice needs slice={...}");
  const auto& starts = instruction.slice_starts;
  const auto& limits = instruction.slice_limits;
  const auto& strides = instruction.slice_strides;
  const auto rank = static_cast<size_t>(operand.rank());
  if (starts.size() != rank || limits.size() != rank || strides.size() != rank) {
    return Error(fmt::format("slice has {} dimensions, but the operand {} has rank {}",
                             starts.size(), ShapeString(operand), rank));
  }
  Shape out = WithElementType(operand, operand.element_type());
  for (size_t i = 0; i < rank; ++i) {
    const int64_t size = operand.dimensions(static_cast<int64_t>(i));
    if (strides[i] <= 0) {
      return Error(fmt::format("slice stride {} of dimension {} must be positive", strides[i], i));
    }
    if (starts[i] < 0 || starts[i] > limits[i] ||
        (size != Shape::kUnboundedSize && limits[i] > size)) {
      return Error(fmt::format("slice [{}:{}] of dimension {} is out of range for size {}",
                               starts[i], limits[i], i, size));
    }
    out.set_dimensions(static_cast<int64_t>(i),
                       (limits[i] - starts[i] + strides[i] - 1) / strides[i]);
    out.set_dynamic_dimension(static_cast<int64_t>(i), false);
  }
  return out;
}

StatusOr<Shape> InferDynamicSliceShape(const HloInstruction& instruction) {
  if (instruction.operand_count() < 1) return Error("dynamic-slice needs an operand");
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  RETURN_IF_ERROR(CheckStartIndices(instruction, 1, operand.rank()));
  if (!instruction.dynamic_slice_sizes_attr) {
    return Error("dynamic-slice needs dynamic_slice_sizes={...}");
  }
  const std::vector<int64_t>& sizes = *instruction.dynamic_slice_sizes_attr;
  if (static_cast<int64_t>(sizes.size()) != operand.rank()) {
    return Error(fmt::format("dynamic_slice_sizes={} must have one size per dimension of {}",
                             DimsString(sizes), ShapeString(operand)));
  }
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (sizes[i] < 0 ||
        (!operand.is_unbounded_dynamic_dimension(i) && sizes[i] > operand.dimensions(i))) {
      return Error(fmt::format("dynamic_slice_sizes={} is out of range for operand {}",
                               DimsString(sizes), ShapeString(operand)));
    }
  }
  return Shape(operand.element_type(), sizes);
}

StatusOr<Shape> InferDynamicUpdateSliceShape(const HloInstruction& instruction) {
  if (instruction.operand_count() < 2) {
    return Error("dynamic-update-slice needs an operand, an update and start indices");
  }
  const Shape& operand = OperandShape(instruction, 0);
  const Shape& update = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  RETURN_IF_ERROR(ExpectArray(update, "the update"));
  if (update.element_type() != operand.element_type() || update.rank() != operand.rank()) {
    return Error(fmt::format("the update {} must have the element type and rank of operand {}",
                             ShapeString(update), ShapeString(operand)));
  }
  for (int64_t i = 0; i < operand.rank(); ++i) {
    if (!operand.is_unbounded_dynamic_dimension(i) && !update.is_unbounded_dynamic_dimension(i) &&
        update.dimensions(i) > operand.dimensions(i)) {
      return Error(fmt::format("the update {} does not fit in operand {}", ShapeString(update),
                               ShapeString(operand)));
    }
  }
  RETURN_IF_ERROR(CheckStartIndices(instruction, 2, operand.rank()));
  return WithElementType(operand, operand.element_type());
}

StatusOr<Shape> InferConcatenateShape(const HloInstruction& instruction) {
  if (instruction.operand_count() == 0) return Error("concatenate needs at least one operand");
  if (instruction.dimensions().size() != 1) {
    return Error(fmt::format("concatenate needs exactly one dimension, not dimensions={}",
                             DimsString(instruction.dimensions())));
  }
  const int64_t dim = instruction.dimensions(0);
  const Shape& first = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(first, "operand 0"));
  if (dim < 0 || dim >= first.rank()) {
    return Error(
        fmt::format("dimensions={{{}}} is out of range for operand of rank {}", dim, first.rank()));
  }
  Shape out = WithElementType(first, first.element_type());
  for (int64_t i = 1; i < instruction.operand_count(); ++i) {
    const Shape& shape = OperandShape(instruction, i);
    RETURN_IF_ERROR(ExpectArray(shape, fmt::format("operand {}", i)));
    if (shape.rank() != first.rank()) {
      return Error(fmt::format("Cannot concatenate arrays of different ranks: {} vs {}",
                               ShapeString(first), ShapeString(shape)));
    }
    if (shape.element_type() != first.element_type()) {
      return Error(fmt::format("Cannot concatenate arrays with different element types: {} vs {}",
                               ShapeString(first), ShapeString(shape)));
    }
    for (int64_t d = 0; d < first.rank(); ++d) {
      if (d == dim) continue;
      if (!DimsCompatible(first.dimensions(d), shape.dimensions(d))) {
        return Error(fmt::format(
            "Cannot concatenate arrays that differ in dimensions other than the one being "
            "concatenated. Dimension {} in both shapes must be equal: {} vs {}",
            d, ShapeString(first), ShapeString(shape)));
      }
    }
    const int64_t a = out.dimensions(dim);
    const int64_t b = shape.dimensions(dim);
    out.set_dimensions(dim, a == Shape::kUnboundedSize || b == Shape::kUnboundedSize
                                ? Shape::kUnboundedSize
                                : a + b);
    out.set_dynamic_dimension(dim,
                              out.is_dynamic_dimension(dim) || shape.is_dynamic_dimension(dim));
  }
  return out;
}

StatusOr<Shape> InferPadShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  const Shape& value = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  if (!value.IsArray() || value.rank() != 0 || value.element_type() != operand.element_type()) {
    return Error(fmt::format("the padding value {} must be a scalar of the operand's type {}",
                             ShapeString(value), PrimitiveTypeName(operand.element_type())));
  }
  if (!instruction.padding_config) return Error("pad needs padding=");
  const auto& config = instruction.padding_config->dimensions;
  if (static_cast<int64_t>(config.size()) != operand.rank()) {
    return Error(fmt::format("padding={} has {} dimensions, but the operand {} has rank {}",
                             instruction.padding_config->ToString(), config.size(),
                             ShapeString(operand), operand.rank()));
  }
  Shape out = WithElementType(operand, operand.element_type());
  for (int64_t i = 0; i < operand.rank(); ++i) {
    const PaddingDimension& p = config[i];
    if (p.interior_padding < 0) {
      return Error(
          fmt::format("interior padding {} of dimension {} is negative", p.interior_padding, i));
    }
    const int64_t size = operand.dimensions(i);
    if (size == Shape::kUnboundedSize) continue;
    int64_t padded = 0, interior = 0;
    if (__builtin_mul_overflow(std::max<int64_t>(size - 1, 0), p.interior_padding, &interior) ||
        __builtin_add_overflow(size, interior, &padded) ||
        __builtin_add_overflow(padded, p.edge_padding_low, &padded) ||
        __builtin_add_overflow(padded, p.edge_padding_high, &padded)) {
      return Error(fmt::format("padding {}_{}_{} of dimension {} of size {} overflows 64 bits",
                               p.edge_padding_low, p.edge_padding_high, p.interior_padding, i,
                               size));
    }
    if (padded < 0) {
      return Error(fmt::format("padding {}_{}_{} makes dimension {} of size {} negative",
                               p.edge_padding_low, p.edge_padding_high, p.interior_padding, i,
                               size));
    }
    out.set_dimensions(i, padded);
  }
  return out;
}

StatusOr<Shape> InferReverseShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  RETURN_IF_ERROR(
      CheckDimensionList(instruction.dimensions(), operand.rank(), "dimensions", "operand"));
  return WithElementType(operand, operand.element_type());
}

}  // namespace xlens::shape_inference_internal
