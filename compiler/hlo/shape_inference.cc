#include "compiler/hlo/shape_inference.h"

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/shape_inference_internal.h"

namespace xlens {

namespace shape_inference_internal {

std::string ShapeString(const Shape& shape) {
  return shape.IsValid() ? shape.ToString(/*print_layout=*/false) : "<no shape>";
}

std::string DimsString(std::span<const int64_t> dims) {
  return fmt::format("{{{}}}", fmt::join(dims, ","));
}

bool DimsCompatible(int64_t a, int64_t b) {
  return a == b || a == Shape::kUnboundedSize || b == Shape::kUnboundedSize;
}

bool SameDimensions(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (!DimsCompatible(a.dimensions(i), b.dimensions(i))) return false;
  }
  return true;
}

bool ShapesCompatible(const Shape& a, const Shape& b) {
  if (a.IsTuple() || b.IsTuple()) {
    if (!a.IsTuple() || !b.IsTuple() || a.tuple_shapes_size() != b.tuple_shapes_size()) {
      return false;
    }
    for (int64_t i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!ShapesCompatible(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  return a.element_type() == b.element_type() && SameDimensions(a, b);
}

Status ExpectArray(const Shape& shape, std::string_view what) {
  if (shape.IsArray()) return OkStatus();
  return Error(fmt::format("{} must be an array, but has shape {}", what, ShapeString(shape)));
}

Status CheckDimensionList(std::span<const int64_t> dims, int64_t rank, std::string_view attribute,
                          std::string_view what) {
  std::vector<bool> seen(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= rank) {
      return Error(fmt::format("{}={} is out of range for {} of rank {}", attribute,
                               DimsString(dims), what, rank));
    }
    if (seen[d]) {
      return Error(fmt::format("{}={} names dimension {} twice", attribute, DimsString(dims), d));
    }
    seen[d] = true;
  }
  return OkStatus();
}

StatusOr<const HloComputation*> CalledComputation(const HloInstruction& instruction,
                                                  const std::string& key) {
  const HloComputation* computation = instruction.called_computation(key);
  if (computation == nullptr) {
    return Error(
        fmt::format("{} needs a `{}=` computation", HloOpcodeString(instruction.opcode()), key));
  }
  return computation;
}

Status CheckParameters(const HloComputation& computation, std::span<const Shape> parameters,
                       std::string_view role) {
  if (computation.num_parameters() != static_cast<int64_t>(parameters.size())) {
    return Error(fmt::format("{} %{} must take {} parameter(s), but takes {}", role,
                             computation.name(), parameters.size(), computation.num_parameters()));
  }
  for (size_t i = 0; i < parameters.size(); ++i) {
    const HloInstruction* param = computation.parameter_instruction(static_cast<int64_t>(i));
    if (param == nullptr) {
      return Error(fmt::format("{} %{} has no parameter {}", role, computation.name(), i));
    }
    if (!ShapesCompatible(param->shape(), parameters[i])) {
      return Error(fmt::format("parameter {} of {} %{} must have shape {}, but has {}", i, role,
                               computation.name(), ShapeString(parameters[i]),
                               ShapeString(param->shape())));
    }
  }
  return OkStatus();
}

StatusOr<Shape> RootShape(const HloComputation& computation) {
  const HloInstruction* root = computation.root_instruction();
  if (root == nullptr || !root->shape().IsValid()) {
    return Error(fmt::format("computation %{} has no root with a shape", computation.name()));
  }
  Shape shape = root->shape();
  shape.ClearLayouts();
  return shape;
}

StatusOr<int64_t> WindowedDimensionSize(int64_t size, const WindowDimension& window,
                                        int64_t dimension) {
  // As XLA: a window covers at least one element (size 0 would reduce nothing into every output).
  if (window.size <= 0 || window.stride <= 0 || window.base_dilation <= 0 ||
      window.window_dilation <= 0) {
    return Error(fmt::format(
        "window dimension {} is malformed: size={} stride={} lhs_dilate={} rhs_dilate={}",
        dimension, window.size, window.stride, window.base_dilation, window.window_dilation));
  }
  if (size == Shape::kUnboundedSize) return Shape::kUnboundedSize;
  // Sizes, dilations and paddings come from the text: every step is checked for overflow.
  int64_t dilated_base = 0, padded = 0, dilated_window = 0;
  bool overflow = false;
  if (size > 0) {
    overflow |= __builtin_mul_overflow(size - 1, window.base_dilation, &dilated_base);
    overflow |= __builtin_add_overflow(dilated_base, 1, &dilated_base);
  }
  overflow |= __builtin_add_overflow(dilated_base, window.padding_low, &padded);
  overflow |= __builtin_add_overflow(padded, window.padding_high, &padded);
  if (window.size > 0) {
    overflow |= __builtin_mul_overflow(window.size - 1, window.window_dilation, &dilated_window);
    overflow |= __builtin_add_overflow(dilated_window, 1, &dilated_window);
  }
  if (overflow) {
    return Error(fmt::format(
        "window dimension {}: size {} with padding {}_{}, window size {} and dilations {} and {} "
        "overflows 64 bits",
        dimension, size, window.padding_low, window.padding_high, window.size,
        window.base_dilation, window.window_dilation));
  }
  if (padded < 0) {
    return Error(fmt::format("window dimension {}: padding {}_{} makes the size {} negative",
                             dimension, window.padding_low, window.padding_high, size));
  }
  if (padded < dilated_window) return 0;
  return (padded - dilated_window) / window.stride + 1;
}

StatusOr<Shape> InferWindowOutputShape(const Shape& base, const Window& window) {
  if (static_cast<int64_t>(window.dimensions.size()) != base.rank()) {
    return Error(fmt::format("window has {} dimensions, but the operand {} has rank {}",
                             window.dimensions.size(), ShapeString(base), base.rank()));
  }
  Shape out = base;
  out.clear_layout();
  for (int64_t i = 0; i < base.rank(); ++i) {
    ASSIGN_OR_RETURN(int64_t size,
                     WindowedDimensionSize(base.dimensions(i), window.dimensions[i], i));
    out.set_dimensions(i, size);
  }
  return out;
}

const Shape& OperandShape(const HloInstruction& instruction, int64_t i) {
  return instruction.operand(i)->shape();
}

StatusOr<Shape> DeclaredShape(const HloInstruction& instruction) {
  if (!instruction.shape().IsValid()) {
    return Error(
        fmt::format("result shape must be written for {}", HloOpcodeString(instruction.opcode())));
  }
  return instruction.shape();
}

Shape WithElementType(const Shape& shape, PrimitiveType type) {
  Shape out = shape;
  out.set_element_type(type);
  out.clear_layout();
  return out;
}

}  // namespace shape_inference_internal

namespace {

using namespace shape_inference_internal;  // NOLINT(build/namespaces)

// Elementwise result dimensions: an unbounded size yields to the other operand's size (and
// bound); otherwise a dimension is dynamic where either operand's is.
Shape MergeDimensions(const Shape& a, const Shape& b, PrimitiveType type) {
  Shape out(type, a.dimensions());
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (a.is_unbounded_dynamic_dimension(i)) {
      out.set_dimensions(i, b.dimensions(i));
      out.set_dynamic_dimension(i, b.is_dynamic_dimension(i));
    } else if (!b.is_unbounded_dynamic_dimension(i)) {
      out.set_dynamic_dimension(i, a.is_dynamic_dimension(i) || b.is_dynamic_dimension(i));
    } else {
      out.set_dynamic_dimension(i, a.is_dynamic_dimension(i));
    }
  }
  return out;
}

StatusOr<Shape> InferBitcastConvert(const HloInstruction& instruction, const Shape& operand) {
  ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
  RETURN_IF_ERROR(ExpectArray(declared, "the result of bitcast-convert"));
  const PrimitiveType to = declared.element_type();
  const int from_bits = BitWidth(operand.element_type());
  const int to_bits = BitWidth(to);
  if (from_bits == to_bits) return WithElementType(operand, to);
  if (from_bits > to_bits) {
    // A wider element becomes a new minor dimension of narrower ones.
    if (from_bits % to_bits != 0) {
      return Error(fmt::format("cannot bitcast-convert {} to {}", ShapeString(operand),
                               PrimitiveTypeName(to)));
    }
    std::vector<int64_t> dims = operand.dimensions();
    dims.push_back(from_bits / to_bits);
    return Shape(to, std::move(dims));
  }
  if (to_bits % from_bits != 0 || operand.rank() == 0 ||
      operand.dimensions(operand.rank() - 1) != to_bits / from_bits) {
    return Error(
        fmt::format("cannot bitcast-convert {} to {}: the minor dimension must have size {}",
                    ShapeString(operand), PrimitiveTypeName(to), to_bits / from_bits));
  }
  std::vector<int64_t> dims = operand.dimensions();
  dims.pop_back();
  return Shape(to, std::move(dims));
}

StatusOr<Shape> InferUnary(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  const PrimitiveType type = operand.element_type();
  switch (instruction.opcode()) {
    case HloOpcode::kConvert: {
      ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
      RETURN_IF_ERROR(ExpectArray(declared, "the result of convert"));
      return WithElementType(operand, declared.element_type());
    }
    case HloOpcode::kBitcastConvert:
      return InferBitcastConvert(instruction, operand);
    case HloOpcode::kReal:
    case HloOpcode::kImag:
    case HloOpcode::kAbs:
      if (IsComplexType(type)) return WithElementType(operand, ComplexComponentType(type));
      if (instruction.opcode() != HloOpcode::kAbs && !IsFloatingPointType(type)) {
        return Error(fmt::format("{} needs a floating-point or complex operand, not {}",
                                 HloOpcodeString(instruction.opcode()), ShapeString(operand)));
      }
      return WithElementType(operand, type);
    case HloOpcode::kIsFinite:
      if (!IsFloatingPointType(type)) {
        return Error(
            fmt::format("is-finite needs a floating-point operand, not {}", ShapeString(operand)));
      }
      return WithElementType(operand, PrimitiveType::PRED);
    case HloOpcode::kNot:
      if (type != PrimitiveType::PRED && !IsIntegralType(type)) {
        return Error(
            fmt::format("not needs a pred or integer operand, not {}", ShapeString(operand)));
      }
      return WithElementType(operand, type);
    case HloOpcode::kPopulationCount:
    case HloOpcode::kClz:
      if (!IsIntegralType(type)) {
        return Error(fmt::format("{} needs an integer operand, not {}",
                                 HloOpcodeString(instruction.opcode()), ShapeString(operand)));
      }
      return WithElementType(operand, type);
    case HloOpcode::kReducePrecision:
      if (!IsFloatingPointType(type)) {
        return Error(fmt::format("reduce-precision needs a floating-point operand, not {}",
                                 ShapeString(operand)));
      }
      if (instruction.exponent_bits_attr.value_or(1) < 1 ||
          instruction.mantissa_bits_attr.value_or(0) < 0) {
        return Error(
            fmt::format("reduce-precision needs exponent_bits >= 1 and mantissa_bits "
                        ">= 0, not exponent_bits={} mantissa_bits={}",
                        instruction.exponent_bits_attr.value_or(1),
                        instruction.mantissa_bits_attr.value_or(0)));
      }
      return WithElementType(operand, type);
    default:
      return WithElementType(operand, type);
  }
}

StatusOr<Shape> InferBinary(const HloInstruction& instruction) {
  const Shape& lhs = OperandShape(instruction, 0);
  const Shape& rhs = OperandShape(instruction, 1);
  RETURN_IF_ERROR(ExpectArray(lhs, "the lhs operand"));
  RETURN_IF_ERROR(ExpectArray(rhs, "the rhs operand"));
  // HLO has no implicit broadcasting: a scalar operand is as wrong as any other mismatch.
  if (!SameDimensions(lhs, rhs)) {
    return Error("operands must have the same dimensions");
  }
  const HloOpcode op = instruction.opcode();
  if (op == HloOpcode::kStochasticConvert) {
    ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
    return MergeDimensions(lhs, rhs, declared.element_type());
  }
  if (lhs.element_type() != rhs.element_type()) {
    return Error(fmt::format("operands must have the same element type: {} vs {}",
                             PrimitiveTypeName(lhs.element_type()),
                             PrimitiveTypeName(rhs.element_type())));
  }
  PrimitiveType type = lhs.element_type();
  if (op == HloOpcode::kCompare) {
    if (!instruction.comparison_direction) return Error("compare needs direction=");
    type = PrimitiveType::PRED;
  } else if (op == HloOpcode::kComplex) {
    if (type != PrimitiveType::F32 && type != PrimitiveType::F64) {
      return Error(
          fmt::format("complex needs f32 or f64 operands, not {}", PrimitiveTypeName(type)));
    }
    type = type == PrimitiveType::F32 ? PrimitiveType::C64 : PrimitiveType::C128;
  } else if (op == HloOpcode::kAnd || op == HloOpcode::kOr || op == HloOpcode::kXor) {
    if (type != PrimitiveType::PRED && !IsIntegralType(type)) {
      return Error(fmt::format("{} needs pred or integer operands, not {}",
                               HloOpcodeString(instruction.opcode()), PrimitiveTypeName(type)));
    }
  } else if (op == HloOpcode::kShiftLeft || op == HloOpcode::kShiftRightArithmetic ||
             op == HloOpcode::kShiftRightLogical) {
    if (!IsIntegralType(type)) {
      return Error(fmt::format("{} needs integer operands, not {}",
                               HloOpcodeString(instruction.opcode()), PrimitiveTypeName(type)));
    }
  }
  return MergeDimensions(lhs, rhs, type);
}

StatusOr<Shape> InferSelect(const HloInstruction& instruction) {
  const Shape& pred = OperandShape(instruction, 0);
  const Shape& on_true = OperandShape(instruction, 1);
  const Shape& on_false = OperandShape(instruction, 2);
  RETURN_IF_ERROR(ExpectArray(pred, "the predicate"));
  RETURN_IF_ERROR(ExpectArray(on_true, "on_true"));
  RETURN_IF_ERROR(ExpectArray(on_false, "on_false"));
  if (pred.element_type() != PrimitiveType::PRED) {
    return Error(fmt::format("the predicate must be pred, not {}", ShapeString(pred)));
  }
  if (!ShapesCompatible(on_true, on_false)) {
    return Error(fmt::format("on_true and on_false must have the same shape: {} vs {}",
                             ShapeString(on_true), ShapeString(on_false)));
  }
  if (pred.rank() != 0 && !SameDimensions(pred, on_true)) {
    return Error(fmt::format("the predicate {} must be a scalar or have the dimensions of {}",
                             ShapeString(pred), ShapeString(on_true)));
  }
  return MergeDimensions(on_true, on_false, on_true.element_type());
}

StatusOr<Shape> InferClamp(const HloInstruction& instruction) {
  const Shape& min = OperandShape(instruction, 0);
  const Shape& operand = OperandShape(instruction, 1);
  const Shape& max = OperandShape(instruction, 2);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  for (const Shape* bound : {&min, &max}) {
    RETURN_IF_ERROR(ExpectArray(*bound, "a clamp bound"));
    if (bound->element_type() != operand.element_type()) {
      return Error(fmt::format("clamp bounds must have the operand's element type: {} vs {}",
                               ShapeString(*bound), ShapeString(operand)));
    }
    if (bound->rank() != 0 && !SameDimensions(*bound, operand)) {
      return Error(fmt::format("clamp bound {} must be a scalar or have the dimensions of {}",
                               ShapeString(*bound), ShapeString(operand)));
    }
  }
  return WithElementType(operand, operand.element_type());
}

StatusOr<Shape> InferIota(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(Shape shape, DeclaredShape(instruction));
  RETURN_IF_ERROR(ExpectArray(shape, "the result of iota"));
  if (shape.rank() == 0) return Error("iota needs a result of rank >= 1");
  const int64_t dim = instruction.iota_dimension_attr.value_or(0);
  if (dim < 0 || dim >= shape.rank()) {
    return Error(fmt::format("iota_dimension={} is out of range for a result of rank {}", dim,
                             shape.rank()));
  }
  return shape;
}

StatusOr<Shape> InferTuple(const HloInstruction& instruction) {
  std::vector<Shape> elements;
  elements.reserve(instruction.operand_count());
  for (const HloInstruction* operand : instruction.operands()) elements.push_back(operand->shape());
  return Shape::Tuple(std::move(elements));
}

StatusOr<Shape> InferGetTupleElement(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  if (!operand.IsTuple()) {
    return Error(
        fmt::format("get-tuple-element needs a tuple operand, not {}", ShapeString(operand)));
  }
  const int64_t index = instruction.tuple_index();
  if (index < 0 || index >= operand.tuple_shapes_size()) {
    return Error(fmt::format("index={} is out of range for a tuple of {} elements", index,
                             operand.tuple_shapes_size()));
  }
  return operand.tuple_shapes(index);
}

std::vector<Shape> OperandShapes(const HloInstruction& instruction, int64_t first = 0) {
  std::vector<Shape> shapes;
  for (int64_t i = first; i < instruction.operand_count(); ++i) {
    shapes.push_back(OperandShape(instruction, i));
  }
  return shapes;
}

// fusion and call: the called computation takes the operands and returns the result.
StatusOr<Shape> InferCallLike(const HloInstruction& instruction) {
  const bool fusion = instruction.opcode() == HloOpcode::kFusion;
  ASSIGN_OR_RETURN(const HloComputation* computation,
                   CalledComputation(instruction, fusion ? "calls" : "to_apply"));
  RETURN_IF_ERROR(CheckParameters(*computation, OperandShapes(instruction),
                                  fusion ? "the fused computation" : "the called computation"));
  return RootShape(*computation);
}

StatusOr<Shape> InferWhile(const HloInstruction& instruction) {
  const Shape& init = OperandShape(instruction, 0);
  ASSIGN_OR_RETURN(const HloComputation* condition, CalledComputation(instruction, "condition"));
  ASSIGN_OR_RETURN(const HloComputation* body, CalledComputation(instruction, "body"));
  const Shape state[] = {init};
  RETURN_IF_ERROR(CheckParameters(*condition, state, "the while condition"));
  RETURN_IF_ERROR(CheckParameters(*body, state, "the while body"));
  ASSIGN_OR_RETURN(Shape cond_root, RootShape(*condition));
  if (!ShapesCompatible(cond_root, Shape::Scalar(PrimitiveType::PRED))) {
    return Error(fmt::format("the while condition %{} must return pred[], not {}",
                             condition->name(), ShapeString(cond_root)));
  }
  ASSIGN_OR_RETURN(Shape body_root, RootShape(*body));
  if (!ShapesCompatible(body_root, init)) {
    return Error(fmt::format("the while body %{} returns {}, but the loop state is {}",
                             body->name(), ShapeString(body_root), ShapeString(init)));
  }
  Shape out = init;
  out.ClearLayouts();
  return out;
}

StatusOr<Shape> InferConditional(const HloInstruction& instruction) {
  if (instruction.operand_count() < 1) return Error("conditional needs a branch selector");
  const Shape& selector = OperandShape(instruction, 0);
  const std::vector<HloComputation*> branches = instruction.branch_computations();
  if (branches.empty()) {
    return Error("conditional needs branch_computations= or true_computation=/false_computation=");
  }
  const bool is_pred =
      selector.IsArray() && selector.rank() == 0 && selector.element_type() == PrimitiveType::PRED;
  const bool is_index =
      selector.IsArray() && selector.rank() == 0 && selector.element_type() == PrimitiveType::S32;
  if (!is_pred && !is_index) {
    return Error(
        fmt::format("the branch selector must be pred[] or s32[], not {}", ShapeString(selector)));
  }
  if (is_pred && branches.size() != 2) {
    return Error(fmt::format("a conditional on pred[] needs 2 branches, not {}", branches.size()));
  }
  if (static_cast<int64_t>(branches.size()) != instruction.operand_count() - 1) {
    return Error(fmt::format("conditional has {} branches but {} branch operands", branches.size(),
                             instruction.operand_count() - 1));
  }
  Shape result;
  for (size_t i = 0; i < branches.size(); ++i) {
    if (branches[i] == nullptr) return Error(fmt::format("branch {} is missing", i));
    const Shape operand[] = {OperandShape(instruction, static_cast<int64_t>(i) + 1)};
    RETURN_IF_ERROR(CheckParameters(*branches[i], operand, fmt::format("branch {}", i)));
    ASSIGN_OR_RETURN(Shape root, RootShape(*branches[i]));
    if (i == 0) {
      result = std::move(root);
    } else if (!ShapesCompatible(root, result)) {
      return Error(fmt::format("branch {} %{} returns {}, but branch 0 returns {}", i,
                               branches[i]->name(), ShapeString(root), ShapeString(result)));
    }
  }
  return result;
}

// The result is (new state, values), or just the values when the state is not wanted.
StatusOr<Shape> InferRngBitGenerator(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(Shape declared, DeclaredShape(instruction));
  if (!declared.IsTuple()) return declared;
  const Shape& state = OperandShape(instruction, 0);
  if (declared.tuple_shapes_size() != 2 || !ShapesCompatible(declared.tuple_shapes(0), state)) {
    return Error(fmt::format("rng-bit-generator must return (state, values) with state {}, not {}",
                             ShapeString(state), ShapeString(declared)));
  }
  return declared;
}

StatusOr<Shape> InferSupportedShape(const HloInstruction& instruction) {
  const HloOpcode op = instruction.opcode();
  switch (op) {
    case HloOpcode::kParameter:
      return DeclaredShape(instruction);
    case HloOpcode::kConstant:
      if (instruction.has_literal() && instruction.literal().shape().IsValid()) {
        return instruction.literal().shape();
      }
      return DeclaredShape(instruction);
    case HloOpcode::kIota:
      return InferIota(instruction);
    case HloOpcode::kSelect:
      return InferSelect(instruction);
    case HloOpcode::kClamp:
      return InferClamp(instruction);
    case HloOpcode::kBroadcast:
      return InferBroadcastShape(instruction);
    case HloOpcode::kReshape:
      return InferReshapeShape(instruction);
    case HloOpcode::kBitcast:
      return InferBitcastShape(instruction);
    case HloOpcode::kTranspose:
      return InferTransposeShape(instruction);
    case HloOpcode::kSlice:
      return InferSliceShape(instruction);
    case HloOpcode::kDynamicSlice:
      return InferDynamicSliceShape(instruction);
    case HloOpcode::kDynamicUpdateSlice:
      return InferDynamicUpdateSliceShape(instruction);
    case HloOpcode::kConcatenate:
      return InferConcatenateShape(instruction);
    case HloOpcode::kPad:
      return InferPadShape(instruction);
    case HloOpcode::kReverse:
      return InferReverseShape(instruction);
    case HloOpcode::kReduce:
      return InferReduceShape(instruction);
    case HloOpcode::kReduceWindow:
      return InferReduceWindowShape(instruction);
    case HloOpcode::kSelectAndScatter:
      return InferSelectAndScatterShape(instruction);
    case HloOpcode::kDot:
      return InferDotShape(instruction);
    case HloOpcode::kConvolution:
      return InferConvolutionShape(instruction);
    case HloOpcode::kGather:
      return InferGatherShape(instruction);
    case HloOpcode::kScatter:
      return InferScatterShape(instruction);
    case HloOpcode::kSort:
      return InferSortShape(instruction);
    case HloOpcode::kFft:
      return InferFftShape(instruction);
    case HloOpcode::kTopK:
      return InferTopKShape(instruction);
    case HloOpcode::kCholesky:
      return InferCholeskyShape(instruction);
    case HloOpcode::kTriangularSolve:
      return InferTriangularSolveShape(instruction);
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      return InferBatchNormShape(instruction);
    case HloOpcode::kMap:
      return InferMapShape(instruction);
    case HloOpcode::kAllReduce:
      return InferAllReduceShape(instruction);
    case HloOpcode::kTuple:
      return InferTuple(instruction);
    case HloOpcode::kGetTupleElement:
      return InferGetTupleElement(instruction);
    case HloOpcode::kFusion:
    case HloOpcode::kCall:
      return InferCallLike(instruction);
    case HloOpcode::kWhile:
      return InferWhile(instruction);
    case HloOpcode::kConditional:
      return InferConditional(instruction);
    case HloOpcode::kCustomCall:
      return DeclaredShape(instruction);
    case HloOpcode::kRngBitGenerator:
      return InferRngBitGenerator(instruction);
    case HloOpcode::kOptimizationBarrier:
    case HloOpcode::kCopy:
      return OperandShape(instruction, 0);
    default:
      if (IsElementwiseUnary(op)) return InferUnary(instruction);
      if (IsElementwiseBinary(op)) return InferBinary(instruction);
      return Error(fmt::format("no shape inference rule for {}", HloOpcodeString(op)));
  }
}

}  // namespace

StatusOr<Shape> InferShape(const HloInstruction& instruction) {
  const HloOpcode op = instruction.opcode();
  if (!IsFullySupportedOpcode(op)) {
    if (instruction.shape().IsValid()) {
      Shape shape = instruction.shape();
      shape.ClearLayouts();
      return shape;
    }
    return Error(fmt::format("the shape of {} cannot be inferred: result shape must be written",
                             HloOpcodeString(op)));
  }
  if (std::optional<int> arity = HloOpcodeArity(op);
      arity && instruction.operand_count() != *arity) {
    return Error(fmt::format("{} takes {} operand(s), but has {}", HloOpcodeString(op), *arity,
                             instruction.operand_count()));
  }
  for (int64_t i = 0; i < instruction.operand_count(); ++i) {
    if (instruction.operand(i) == nullptr || !instruction.operand(i)->shape().IsValid()) {
      return Error(fmt::format("operand {} has no shape", i));
    }
  }
  ASSIGN_OR_RETURN(Shape shape, InferSupportedShape(instruction));
  shape.ClearLayouts();
  return shape;
}

}  // namespace xlens
