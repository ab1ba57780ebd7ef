// Shape inference for the ops that apply a scalar computation: reduce, reduce-window,
// select-and-scatter, sort, map and all-reduce.
#include <fmt/format.h>

#include "compiler/hlo/shape_inference_internal.h"

namespace xlens::shape_inference_internal {

namespace {

// Float parameters of a reducer may differ in precision from the values fed to them, as XLA
// allows (a bf16 input reduced with an f32 accumulator).
bool SameTypeIgnoringFpPrecision(PrimitiveType a, PrimitiveType b) {
  return a == b || (IsFloatingPointType(a) && IsFloatingPointType(b));
}

// Splits the operands of reduce and reduce-window into N inputs and N scalar init values.
struct Reduction {
  std::vector<const Shape*> inputs;
  std::vector<PrimitiveType> input_types;
  std::vector<PrimitiveType> init_types;
};

StatusOr<Reduction> SplitReductionOperands(const HloInstruction& instruction) {
  const int64_t count = instruction.operand_count();
  if (count < 2 || count % 2 != 0) {
    return Error(fmt::format("{} needs N inputs followed by N init values, but has {} operands",
                             HloOpcodeString(instruction.opcode()), count));
  }
  const int64_t n = count / 2;
  Reduction reduction;
  for (int64_t i = 0; i < n; ++i) {
    const Shape& input = OperandShape(instruction, i);
    const Shape& init = OperandShape(instruction, n + i);
    RETURN_IF_ERROR(ExpectArray(input, fmt::format("input {}", i)));
    if (!init.IsArray() || init.rank() != 0) {
      return Error(fmt::format("init value {} must be a scalar, not {}", i, ShapeString(init)));
    }
    if (i > 0 && !SameDimensions(input, *reduction.inputs[0])) {
      return Error(fmt::format("inputs must have the same dimensions: {} vs {}",
                               ShapeString(*reduction.inputs[0]), ShapeString(input)));
    }
    reduction.inputs.push_back(&input);
    reduction.input_types.push_back(input.element_type());
    reduction.init_types.push_back(init.element_type());
  }
  return reduction;
}

Shape TupleIfMany(std::vector<Shape> shapes) {
  if (shapes.size() == 1) return std::move(shapes[0]);
  return Shape::Tuple(std::move(shapes));
}

}  // namespace

Status CheckReducer(const HloComputation& reducer, const std::vector<PrimitiveType>& accumulators,
                    const std::vector<PrimitiveType>& inputs, std::string_view role) {
  const size_t n = accumulators.size();
  if (reducer.num_parameters() != static_cast<int64_t>(2 * n)) {
    return Error(fmt::format("{} %{} must take {} scalar parameters, but takes {}", role,
                             reducer.name(), 2 * n, reducer.num_parameters()));
  }
  for (size_t i = 0; i < 2 * n; ++i) {
    const HloInstruction* param = reducer.parameter_instruction(static_cast<int64_t>(i));
    if (param == nullptr) {
      return Error(fmt::format("{} %{} has no parameter {}", role, reducer.name(), i));
    }
    const Shape& shape = param->shape();
    const PrimitiveType expected = i < n ? accumulators[i] : inputs[i - n];
    const bool matches = shape.IsArray() && shape.rank() == 0 &&
                         (i < n ? shape.element_type() == expected
                                : SameTypeIgnoringFpPrecision(shape.element_type(), expected));
    if (!matches) {
      return Error(fmt::format("parameter {} of {} %{} must be {}[], not {}", i, role,
                               reducer.name(), PrimitiveTypeName(expected), ShapeString(shape)));
    }
  }
  ASSIGN_OR_RETURN(Shape root, RootShape(reducer));
  std::vector<Shape> expected;
  for (PrimitiveType type : accumulators) expected.push_back(Shape::Scalar(type));
  const bool matches = ShapesCompatible(root, Shape::Tuple(expected)) ||
                       (n == 1 && ShapesCompatible(root, expected[0]));
  if (!matches) {
    return Error(fmt::format("{} %{} must return {}, not {}", role, reducer.name(),
                             ShapeString(n == 1 ? expected[0] : Shape::Tuple(expected)),
                             ShapeString(root)));
  }
  return OkStatus();
}

StatusOr<Shape> InferReduceShape(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(Reduction reduction, SplitReductionOperands(instruction));
  const Shape& input = *reduction.inputs[0];
  const std::vector<int64_t>& dims = instruction.dimensions();
  RETURN_IF_ERROR(CheckDimensionList(dims, input.rank(), "dimensions", "operand"));
  ASSIGN_OR_RETURN(const HloComputation* reducer, CalledComputation(instruction, "to_apply"));
  RETURN_IF_ERROR(
      CheckReducer(*reducer, reduction.init_types, reduction.input_types, "the reducer"));

  std::vector<bool> reduced(input.rank(), false);
  for (int64_t d : dims) reduced[d] = true;
  std::vector<Shape> results;
  for (size_t i = 0; i < reduction.inputs.size(); ++i) {
    const Shape& in = *reduction.inputs[i];
    std::vector<int64_t> kept;
    std::vector<bool> dynamic;
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (reduced[d]) continue;
      kept.push_back(in.dimensions(d));
      dynamic.push_back(in.is_dynamic_dimension(d));
    }
    Shape out(reduction.init_types[i], std::move(kept));
    for (size_t d = 0; d < dynamic.size(); ++d) {
      out.set_dynamic_dimension(static_cast<int64_t>(d), dynamic[d]);
    }
    results.push_back(std::move(out));
  }
  return TupleIfMany(std::move(results));
}

StatusOr<Shape> InferReduceWindowShape(const HloInstruction& instruction) {
  ASSIGN_OR_RETURN(Reduction reduction, SplitReductionOperands(instruction));
  if (!instruction.window) return Error("reduce-window needs window={...}");
  ASSIGN_OR_RETURN(const HloComputation* reducer, CalledComputation(instruction, "to_apply"));
  RETURN_IF_ERROR(
      CheckReducer(*reducer, reduction.init_types, reduction.input_types, "the reducer"));
  std::vector<Shape> results;
  for (size_t i = 0; i < reduction.inputs.size(); ++i) {
    ASSIGN_OR_RETURN(Shape out, InferWindowOutputShape(*reduction.inputs[i], *instruction.window));
    out.set_element_type(reduction.init_types[i]);
    results.push_back(std::move(out));
  }
  return TupleIfMany(std::move(results));
}

StatusOr<Shape> InferSelectAndScatterShape(const HloInstruction& instruction) {
  const Shape& operand = OperandShape(instruction, 0);
  const Shape& source = OperandShape(instruction, 1);
  const Shape& init = OperandShape(instruction, 2);
  RETURN_IF_ERROR(ExpectArray(operand, "the operand"));
  RETURN_IF_ERROR(ExpectArray(source, "the source"));
  if (!init.IsArray() || init.rank() != 0 || init.element_type() != source.element_type()) {
    return Error(fmt::format("the init value {} must be a scalar of the source's type {}",
                             ShapeString(init), PrimitiveTypeName(source.element_type())));
  }
  if (!instruction.window) return Error("select-and-scatter needs window={...}");
  ASSIGN_OR_RETURN(const HloComputation* select, CalledComputation(instruction, "select"));
  ASSIGN_OR_RETURN(const HloComputation* scatter, CalledComputation(instruction, "scatter"));

  const Shape operand_scalar = Shape::Scalar(operand.element_type());
  const Shape select_params[] = {operand_scalar, operand_scalar};
  RETURN_IF_ERROR(CheckParameters(*select, select_params, "the select computation"));
  ASSIGN_OR_RETURN(Shape select_root, RootShape(*select));
  if (!ShapesCompatible(select_root, Shape::Scalar(PrimitiveType::PRED))) {
    return Error(fmt::format("the select computation %{} must return pred[], not {}",
                             select->name(), ShapeString(select_root)));
  }
  const PrimitiveType source_type = source.element_type();
  RETURN_IF_ERROR(CheckReducer(*scatter, {source_type}, {source_type}, "the scatter computation"));

  ASSIGN_OR_RETURN(Shape windowed, InferWindowOutputShape(operand, *instruction.window));
  if (!SameDimensions(windowed, source)) {
    return Error(fmt::format("the source {} must have the dimensions of the windowed operand {}",
                             ShapeString(source), ShapeString(windowed)));
  }
  Shape out = operand;
  out.clear_layout();
  return out;
}

StatusOr<Shape> InferSortShape(const HloInstruction& instruction) {
  if (instruction.operand_count() == 0) return Error("sort needs at least one operand");
  const Shape& keys = OperandShape(instruction, 0);
  std::vector<Shape> results;
  std::vector<Shape> comparator_params;
  for (int64_t i = 0; i < instruction.operand_count(); ++i) {
    const Shape& shape = OperandShape(instruction, i);
    RETURN_IF_ERROR(ExpectArray(shape, fmt::format("operand {}", i)));
    if (!SameDimensions(shape, keys)) {
      return Error(fmt::format("sort operands must have the same dimensions: {} vs {}",
                               ShapeString(keys), ShapeString(shape)));
    }
    results.push_back(shape);
    comparator_params.push_back(Shape::Scalar(shape.element_type()));
    comparator_params.push_back(Shape::Scalar(shape.element_type()));
  }
  if (instruction.dimensions().size() != 1) {
    return Error(fmt::format("sort needs exactly one dimension, not dimensions={}",
                             DimsString(instruction.dimensions())));
  }
  RETURN_IF_ERROR(
      CheckDimensionList(instruction.dimensions(), keys.rank(), "dimensions", "operand"));
  ASSIGN_OR_RETURN(const HloComputation* comparator, CalledComputation(instruction, "to_apply"));
  RETURN_IF_ERROR(CheckParameters(*comparator, comparator_params, "the comparator"));
  ASSIGN_OR_RETURN(Shape root, RootShape(*comparator));
  if (!ShapesCompatible(root, Shape::Scalar(PrimitiveType::PRED))) {
    return Error(fmt::format("the comparator %{} must return pred[], not {}", comparator->name(),
                             ShapeString(root)));
  }
  for (Shape& s : results) s.clear_layout();
  return TupleIfMany(std::move(results));
}

StatusOr<Shape> InferMapShape(const HloInstruction& instruction) {
  if (instruction.operand_count() == 0) return Error("map needs at least one operand");
  const Shape& first = OperandShape(instruction, 0);
  std::vector<Shape> params;
  for (int64_t i = 0; i < instruction.operand_count(); ++i) {
    const Shape& shape = OperandShape(instruction, i);
    RETURN_IF_ERROR(ExpectArray(shape, fmt::format("operand {}", i)));
    if (!SameDimensions(shape, first)) {
      return Error(fmt::format("map operands must have the same dimensions: {} vs {}",
                               ShapeString(first), ShapeString(shape)));
    }
    params.push_back(Shape::Scalar(shape.element_type()));
  }
  // Map applies its computation to every element: the dimensions, when written, are all of them.
  if (instruction.dimensions_attr) {
    const std::vector<int64_t>& dims = *instruction.dimensions_attr;
    bool identity = static_cast<int64_t>(dims.size()) == first.rank();
    for (size_t i = 0; identity && i < dims.size(); ++i) {
      identity = dims[i] == static_cast<int64_t>(i);
    }
    if (!identity) {
      return Error(fmt::format("map dimensions={} must list every operand dimension in order",
                               DimsString(dims)));
    }
  }
  ASSIGN_OR_RETURN(const HloComputation* computation, CalledComputation(instruction, "to_apply"));
  RETURN_IF_ERROR(CheckParameters(*computation, params, "the mapped computation"));
  ASSIGN_OR_RETURN(Shape root, RootShape(*computation));
  if (!root.IsArray() || root.rank() != 0) {
    return Error(fmt::format("the mapped computation %{} must return a scalar, not {}",
                             computation->name(), ShapeString(root)));
  }
  Shape out = first;
  out.set_element_type(root.element_type());
  out.clear_layout();
  return out;
}

StatusOr<Shape> InferAllReduceShape(const HloInstruction& instruction) {
  if (instruction.operand_count() == 0) return Error("all-reduce needs at least one operand");
  std::vector<Shape> results;
  for (int64_t i = 0; i < instruction.operand_count(); ++i) {
    const Shape& shape = OperandShape(instruction, i);
    RETURN_IF_ERROR(ExpectArray(shape, fmt::format("operand {}", i)));
    results.push_back(shape);
    results.back().clear_layout();
  }
  ASSIGN_OR_RETURN(const HloComputation* reducer, CalledComputation(instruction, "to_apply"));
  const PrimitiveType type = results[0].element_type();
  RETURN_IF_ERROR(CheckReducer(*reducer, {type}, {type}, "the reducer"));
  return TupleIfMany(std::move(results));
}

}  // namespace xlens::shape_inference_internal
