// Shape inference for fft, topk, cholesky and the three batch-norm ops, with the checks of XLA's
// ShapeInference (xla/service/shape_inference.cc).
#include <fmt/format.h>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/hlo/shape_inference_internal.h"

namespace xlens::shape_inference_internal {

namespace {

bool IsRealFloat(PrimitiveType type) {
  return type == PrimitiveType::F16 || type == PrimitiveType::BF16 || type == PrimitiveType::F32 ||
         type == PrimitiveType::F64;
}

// XLA's batch-norm operands: a floating-point operand of rank >= 1 with feature_index in range,
// and each per-feature operand a vector of the feature dimension's size and the same type.
StatusOr<int64_t> CheckBatchNormOperands(const HloInstruction& instruction,
                                         std::initializer_list<int64_t> feature_operands,
                                         std::initializer_list<const char*> names) {
  ASSIGN_OR_RETURN(BatchNormAttributes attributes, GetBatchNormAttributes(instruction));
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  if (!IsRealFloat(operand.element_type())) {
    return Error(fmt::format("{} needs a floating-point operand, not {}",
                             HloOpcodeString(instruction.opcode()), ShapeString(operand)));
  }
  if (attributes.feature_index < 0 || attributes.feature_index >= operand.rank()) {
    return Error(fmt::format("feature_index={} is out of range for an operand of rank {}",
                             attributes.feature_index, operand.rank()));
  }
  const int64_t features = operand.dimensions(attributes.feature_index);
  auto name = names.begin();
  for (int64_t i : feature_operands) {
    const Shape& shape = OperandShape(instruction, i);
    RETURN_IF_ERROR(ExpectArray(shape, *name));
    if (shape.element_type() != operand.element_type() || shape.rank() != 1 ||
        !DimsCompatible(shape.dimensions(0), features)) {
      return Error(fmt::format("the {} must be {}[{}] (feature_index={} of {}), not {}", *name,
                               PrimitiveTypeName(operand.element_type()), features,
                               attributes.feature_index, ShapeString(operand),
                               ShapeString(shape)));
    }
    ++name;
  }
  return attributes.feature_index;
}

Shape FeatureShape(const Shape& operand, int64_t feature_index) {
  return Shape(operand.element_type(), {operand.dimensions(feature_index)});
}

Shape WithoutLayout(Shape shape) {
  shape.clear_layout();
  return shape;
}

}  // namespace

StatusOr<Shape> InferFftShape(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(FftAttributes attributes, GetFftAttributes(instruction));
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  const int64_t fft_rank = static_cast<int64_t>(attributes.lengths.size());
  if (operand.rank() < fft_rank) {
    return Error(fmt::format("fft_length={} names {} dimensions but the operand {} has rank {}",
                             DimsString(attributes.lengths), fft_rank, ShapeString(operand),
                             operand.rank()));
  }
  const int64_t first = operand.rank() - fft_rank;
  const PrimitiveType type = operand.element_type();
  Shape result = WithoutLayout(operand);
  // Every transformed dimension but an IRFFT's last one holds exactly fft_length elements; an
  // RFFT's last result dimension and an IRFFT's last operand dimension hold length/2+1 (a zero
  // length keeps a zero-sized dimension, as XLA).
  const int64_t checked = attributes.type == FftType::kIrfft ? fft_rank - 1 : fft_rank;
  for (int64_t i = 0; i < checked; ++i) {
    if (!DimsCompatible(operand.dimensions(first + i), attributes.lengths[i])) {
      return Error(fmt::format("{} needs the operand's last dimensions to be fft_length={}, but "
                               "the operand is {}",
                               FftTypeName(attributes.type), DimsString(attributes.lengths),
                               ShapeString(operand)));
    }
  }
  const int64_t last = attributes.lengths.back();
  switch (attributes.type) {
    case FftType::kFft:
    case FftType::kIfft:
      if (!IsComplexType(type)) {
        return Error(fmt::format("{} needs a c64 or c128 operand, not {}",
                                 FftTypeName(attributes.type), ShapeString(operand)));
      }
      return result;
    case FftType::kRfft:
      if (type != PrimitiveType::F32 && type != PrimitiveType::F64) {
        return Error(fmt::format("RFFT needs an f32 or f64 operand, not {}", ShapeString(operand)));
      }
      result.set_element_type(type == PrimitiveType::F32 ? PrimitiveType::C64
                                                         : PrimitiveType::C128);
      if (last != 0) result.set_dimensions(result.rank() - 1, last / 2 + 1);
      return result;
    case FftType::kIrfft: {
      if (!IsComplexType(type)) {
        return Error(fmt::format("IRFFT needs a c64 or c128 operand, not {}", ShapeString(operand)));
      }
      const int64_t operand_last = operand.dimensions(operand.rank() - 1);
      if ((operand_last != 0 || last != 0) && !DimsCompatible(operand_last, last / 2 + 1)) {
        return Error(fmt::format("IRFFT with fft_length={} needs the operand's last dimension to "
                                 "be {} (fft_length/2+1), but the operand is {}",
                                 DimsString(attributes.lengths), last / 2 + 1,
                                 ShapeString(operand)));
      }
      result.set_element_type(ComplexComponentType(type));
      result.set_dimensions(result.rank() - 1, last);
      return result;
    }
  }
  return result;
}

StatusOr<Shape> InferTopKShape(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(TopKAttributes attributes, GetTopKAttributes(instruction));
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  if (operand.rank() < 1) {
    return Error(fmt::format("topk needs an operand of rank 1 or more, not {}",
                             ShapeString(operand)));
  }
  if (IsComplexType(operand.element_type()) || operand.element_type() == PrimitiveType::PRED) {
    return Error(fmt::format("topk needs an integer or floating-point operand, not {}",
                             ShapeString(operand)));
  }
  const int64_t last = operand.dimensions(operand.rank() - 1);
  if (last >= 0 && attributes.k > last) {
    return Error(fmt::format("k={} is larger than the operand's last dimension ({} in {})",
                             attributes.k, last, ShapeString(operand)));
  }
  Shape values = WithoutLayout(operand);
  values.set_dimensions(values.rank() - 1, attributes.k);
  Shape indices = values;
  indices.set_element_type(PrimitiveType::S32);
  return Shape::Tuple({values, indices});
}

StatusOr<Shape> InferCholeskyShape(const HloInstruction& instruction) {
  RETURN_IF_ERROR(GetCholeskyLower(instruction).status());
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  const PrimitiveType type = operand.element_type();
  if (type != PrimitiveType::F32 && type != PrimitiveType::F64 && !IsComplexType(type)) {
    return Error(fmt::format("cholesky needs an f32, f64, c64 or c128 operand, not {}",
                             ShapeString(operand)));
  }
  if (operand.rank() < 2 || !DimsCompatible(operand.dimensions(operand.rank() - 1),
                                            operand.dimensions(operand.rank() - 2))) {
    return Error(fmt::format("cholesky needs a batch of square matrices (the last two dimensions "
                             "equal), not {}",
                             ShapeString(operand)));
  }
  return WithoutLayout(operand);
}

StatusOr<Shape> InferTriangularSolveShape(const HloInstruction& instruction) {
  const Shape& a = OperandShape(instruction, 0);
  const Shape& b = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(a, "a"));
  RETURN_IF_ERROR(ExpectArray(b, "b"));
  const PrimitiveType type = b.element_type();
  if ((type != PrimitiveType::F32 && type != PrimitiveType::F64 && !IsComplexType(type)) ||
      a.element_type() != type || b.rank() < 2 || a.rank() != b.rank()) {
    return Error(fmt::format("triangular-solve needs a and b of one f32, f64, c64 or c128 type "
                             "and one rank of at least 2, not {} and {}",
                             ShapeString(a), ShapeString(b)));
  }
  return WithoutLayout(b);
}

StatusOr<Shape> InferBatchNormShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  switch (instruction.opcode()) {
    case HloOpcode::kBatchNormTraining: {
      ASSIGN_OR_RETURN(int64_t feature, CheckBatchNormOperands(instruction, {1, 2},
                                                               {"scale", "offset"}));
      return Shape::Tuple({WithoutLayout(operand), FeatureShape(operand, feature),
                           FeatureShape(operand, feature)});
    }
    case HloOpcode::kBatchNormInference: {
      RETURN_IF_ERROR(CheckBatchNormOperands(instruction, {1, 2, 3, 4},
                                             {"scale", "offset", "mean", "variance"})
                          .status());
      return WithoutLayout(operand);
    }
    case HloOpcode::kBatchNormGrad: {
      ASSIGN_OR_RETURN(int64_t feature, CheckBatchNormOperands(instruction, {1, 2, 3},
                                                               {"scale", "mean", "variance"}));
      const Shape& grad_output = OperandShape(instruction, 4);
      if (!ShapesCompatible(grad_output, operand)) {
        return Error(fmt::format("the output gradient must have the operand's shape {}, not {}",
                                 ShapeString(operand), ShapeString(grad_output)));
      }
      return Shape::Tuple({WithoutLayout(operand), FeatureShape(operand, feature),
                           FeatureShape(operand, feature)});
    }
    default:
      return Error(fmt::format("{} is not a batch-norm op", HloOpcodeString(instruction.opcode())));
  }
}

}  // namespace xlens::shape_inference_internal
