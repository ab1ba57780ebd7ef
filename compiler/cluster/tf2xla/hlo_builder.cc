#include "compiler/cluster/tf2xla/hlo_builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>
#include <limits>
#include <utility>

#include "compiler/hlo/shape_inference.h"

namespace xlens::cluster {

namespace {

void SetDefaultLayouts(Shape& shape) {
  if (shape.IsTuple()) {
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      SetDefaultLayouts(*shape.mutable_tuple_shapes(i));
    }
  } else if (shape.IsArray()) {
    shape.SetDefaultLayout();
  }
}

std::unique_ptr<HloInstruction> Make(HloOpcode opcode, std::vector<HloInstruction*> operands,
                                     Shape declared = Shape()) {
  auto instr = std::make_unique<HloInstruction>(opcode, std::move(declared));
  for (HloInstruction* operand : operands) instr->AppendOperand(operand);
  return instr;
}

}  // namespace

HloBuilder::HloBuilder(HloModule* module, HloComputation* computation)
    : module_(module), computation_(computation) {}

void HloBuilder::SetMetadata(OpMetadata metadata, std::string name) {
  metadata_ = std::move(metadata);
  name_ = std::move(name);
}

StatusOr<HloInstruction*> HloBuilder::Add(std::unique_ptr<HloInstruction> instruction) {
  StatusOr<Shape> shape = InferShape(*instruction);
  if (!shape.ok()) {
    std::string operands;
    for (const HloInstruction* operand : instruction->operands()) {
      operands += (operands.empty() ? "" : ", ") + operand->shape().ToString(false);
    }
    return Error(fmt::format("cannot build {}({}): {}", HloOpcodeString(instruction->opcode()),
                             operands, shape.status().message()));
  }
  SetDefaultLayouts(*shape);
  instruction->set_shape(std::move(*shape));
  instruction->metadata = metadata_;
  if (!name_.empty()) instruction->set_name(name_);
  else if (instruction->name().empty()) {
    instruction->set_name(std::string(HloOpcodeString(instruction->opcode())));
  }
  return computation_->AddInstruction(std::move(instruction));
}

StatusOr<HloInstruction*> HloBuilder::Parameter(int64_t number, const Shape& shape,
                                                std::string name) {
  auto instr = HloInstruction::CreateParameter(number, shape, name);
  Shape s = shape;
  SetDefaultLayouts(s);
  instr->set_shape(s);
  instr->metadata = metadata_;
  return computation_->AddInstruction(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Constant(Literal literal) {
  if (literal.shape().IsArray()) {
    literal.set_layout(Layout{shape_util::DefaultMinorToMajor(literal.shape().rank()), ""});
  }
  return Add(HloInstruction::CreateConstant(std::move(literal)));
}

StatusOr<HloInstruction*> HloBuilder::ScalarConstant(PrimitiveType type, double value) {
  Literal literal{Shape::Scalar(type)};
  if (IsIntegralType(type) || type == PrimitiveType::PRED) {
    literal.SetFromInt64(0, static_cast<int64_t>(value));
  } else {
    literal.SetFromDouble(0, value);
  }
  return Constant(std::move(literal));
}

StatusOr<HloInstruction*> HloBuilder::FullConstant(PrimitiveType type, double value,
                                                   const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(HloInstruction * scalar, ScalarConstant(type, value));
  if (dims.empty()) return scalar;
  return Broadcast(scalar, dims, {});
}

StatusOr<HloInstruction*> HloBuilder::Unary(HloOpcode opcode, HloInstruction* operand) {
  return Add(Make(opcode, {operand}));
}

StatusOr<HloInstruction*> HloBuilder::Binary(HloOpcode opcode, HloInstruction* lhs,
                                             HloInstruction* rhs) {
  return Add(Make(opcode, {lhs, rhs}));
}

StatusOr<HloInstruction*> HloBuilder::Compare(HloInstruction* lhs, HloInstruction* rhs,
                                              ComparisonDirection direction) {
  auto instr = Make(HloOpcode::kCompare, {lhs, rhs});
  instr->comparison_direction = direction;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Select(HloInstruction* pred, HloInstruction* on_true,
                                             HloInstruction* on_false) {
  return Add(Make(HloOpcode::kSelect, {pred, on_true, on_false}));
}

StatusOr<HloInstruction*> HloBuilder::Convert(HloInstruction* operand, PrimitiveType type) {
  if (operand->shape().element_type() == type) return operand;
  return Add(Make(HloOpcode::kConvert, {operand},
                  shape_util::ChangeElementType(operand->shape(), type)));
}

StatusOr<HloInstruction*> HloBuilder::BitcastConvert(HloInstruction* operand, PrimitiveType type) {
  return Add(Make(HloOpcode::kBitcastConvert, {operand}, Shape(type, operand->shape().dimensions())));
}

StatusOr<HloInstruction*> HloBuilder::Reshape(HloInstruction* operand,
                                              const std::vector<int64_t>& dims) {
  return Add(Make(HloOpcode::kReshape, {operand},
                  Shape(operand->shape().element_type(), dims)));
}

StatusOr<HloInstruction*> HloBuilder::Broadcast(HloInstruction* operand,
                                                const std::vector<int64_t>& dims,
                                                const std::vector<int64_t>& dimensions) {
  auto instr = Make(HloOpcode::kBroadcast, {operand}, Shape(operand->shape().element_type(), dims));
  instr->dimensions_attr = dimensions;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::BroadcastTo(HloInstruction* operand,
                                                  const std::vector<int64_t>& dims) {
  const std::vector<int64_t>& from = operand->shape().dimensions();
  if (from == dims) return operand;
  const int64_t rank = static_cast<int64_t>(dims.size());
  const int64_t offset = rank - static_cast<int64_t>(from.size());
  if (offset < 0) {
    return Error(fmt::format("cannot broadcast {} to [{}]", operand->shape().ToString(false),
                             fmt::join(dims, ",")));
  }
  // Dimensions that keep their size map onto the result; size-1 dimensions being stretched are
  // dropped by a reshape first (XLA's broadcast cannot stretch).
  std::vector<int64_t> kept_dims, mapping;
  for (size_t i = 0; i < from.size(); ++i) {
    const int64_t to = dims[offset + i];
    if (from[i] == to) {
      kept_dims.push_back(from[i]);
      mapping.push_back(offset + static_cast<int64_t>(i));
    } else if (from[i] != 1) {
      return Error(fmt::format("cannot broadcast {} to [{}]", operand->shape().ToString(false),
                               fmt::join(dims, ",")));
    }
  }
  HloInstruction* source = operand;
  if (kept_dims.size() != from.size()) {
    ASSIGN_OR_RETURN(source, Reshape(operand, kept_dims));
  }
  return Broadcast(source, dims, mapping);
}

StatusOr<HloInstruction*> HloBuilder::Transpose(HloInstruction* operand,
                                                const std::vector<int64_t>& perm) {
  auto instr = Make(HloOpcode::kTranspose, {operand});
  instr->dimensions_attr = perm;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Reverse(HloInstruction* operand,
                                              const std::vector<int64_t>& dims) {
  auto instr = Make(HloOpcode::kReverse, {operand});
  instr->dimensions_attr = dims;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Slice(HloInstruction* operand,
                                            const std::vector<int64_t>& starts,
                                            const std::vector<int64_t>& limits,
                                            const std::vector<int64_t>& strides) {
  auto instr = Make(HloOpcode::kSlice, {operand});
  instr->slice_starts = starts;
  instr->slice_limits = limits;
  instr->slice_strides = strides;
  instr->has_slice = true;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Concatenate(const std::vector<HloInstruction*>& operands,
                                                  int64_t dimension) {
  auto instr = Make(HloOpcode::kConcatenate, operands);
  instr->dimensions_attr = std::vector<int64_t>{dimension};
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Pad(HloInstruction* operand, HloInstruction* padding_value,
                                          const PaddingConfig& config) {
  auto instr = Make(HloOpcode::kPad, {operand, padding_value});
  instr->padding_config = config;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Iota(PrimitiveType type, const std::vector<int64_t>& dims,
                                           int64_t iota_dimension) {
  auto instr = Make(HloOpcode::kIota, {}, Shape(type, dims));
  instr->iota_dimension_attr = iota_dimension;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Dot(HloInstruction* lhs, HloInstruction* rhs,
                                          const DotDimensionNumbers& dnums) {
  auto instr = Make(HloOpcode::kDot, {lhs, rhs});
  instr->dot_dimension_numbers = dnums;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Gather(HloInstruction* operand, HloInstruction* indices,
                                             const GatherDimensionNumbers& dnums,
                                             const std::vector<int64_t>& slice_sizes) {
  auto instr = Make(HloOpcode::kGather, {operand, indices});
  instr->gather_dimension_numbers = dnums;
  instr->slice_sizes_attr = slice_sizes;
  return Add(std::move(instr));
}

void HloBuilder::UniquifyNames(HloComputation& computation) {
  // Instruction names are unique in the whole module, as XLA's builder makes them ("x.8",
  // "add.10"): readers that key instructions by name (the dump's change records, the viewer,
  // XLA's own tools) must never see a reducer's "add" and a graph op's "add" as one.
  for (HloInstruction* instruction : computation.instructions()) {
    instruction->set_name(module_->UniqueInstructionName(instruction->name()));
  }
}

HloComputation* HloBuilder::ScalarComputation(HloOpcode combiner, PrimitiveType type) {
  auto key = std::make_pair(combiner, type);
  auto it = scalar_computations_.find(key);
  if (it != scalar_computations_.end()) return it->second;
  // Named as XLA's builder names its reducers ("add_float_", "max_float_").
  std::string op_name(HloOpcodeString(combiner));
  if (combiner == HloOpcode::kMaximum) op_name = "max";
  if (combiner == HloOpcode::kMinimum) op_name = "min";
  auto computation = std::make_unique<HloComputation>(
      module_->UniqueComputationName(fmt::format("{}_{}_", op_name, PrimitiveTypeName(type))));
  Shape scalar = Shape::Scalar(type);
  scalar.SetDefaultLayout();
  HloInstruction* x =
      computation->AddInstruction(HloInstruction::CreateParameter(0, scalar, "x"));
  HloInstruction* y =
      computation->AddInstruction(HloInstruction::CreateParameter(1, scalar, "y"));
  HloInstruction* root =
      computation->AddInstruction(HloInstruction::CreateBinary(combiner, scalar, x, y));
  computation->set_root_instruction(root);
  HloComputation* added = module_->AddComputationBefore(std::move(computation), computation_);
  UniquifyNames(*added);
  scalar_computations_[key] = added;
  return added;
}

StatusOr<HloInstruction*> HloBuilder::Reduce(HloInstruction* operand, HloInstruction* init,
                                             const std::vector<int64_t>& dimensions,
                                             HloOpcode combiner) {
  auto instr = Make(HloOpcode::kReduce, {operand, init});
  instr->dimensions_attr = dimensions;
  instr->SetCalledComputation("to_apply",
                              ScalarComputation(combiner, operand->shape().element_type()));
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::ArgMinMax(HloInstruction* operand, int64_t dimension,
                                                PrimitiveType index_type, bool is_max) {
  const Shape& shape = operand->shape();
  const PrimitiveType type = shape.element_type();
  const std::vector<int64_t>& dims = shape.dimensions();
  double init_value = is_max ? -std::numeric_limits<double>::infinity()
                             : std::numeric_limits<double>::infinity();
  if (IsIntegralType(type)) {
    init_value = is_max ? (IsSignedIntegralType(type)
                               ? -std::ldexp(1.0, BitWidth(type) - 1)
                               : 0.0)
                        : std::ldexp(1.0, BitWidth(type) - (IsSignedIntegralType(type) ? 1 : 0)) - 1;
  }
  ASSIGN_OR_RETURN(HloInstruction * init, ScalarConstant(type, init_value));
  ASSIGN_OR_RETURN(HloInstruction * extreme,
                   Reduce(operand, init, {dimension},
                          is_max ? HloOpcode::kMaximum : HloOpcode::kMinimum));
  std::vector<int64_t> kept;
  for (int64_t i = 0; i < static_cast<int64_t>(dims.size()); ++i) {
    if (i != dimension) kept.push_back(i);
  }
  ASSIGN_OR_RETURN(HloInstruction * extreme_b, Broadcast(extreme, dims, kept));
  ASSIGN_OR_RETURN(HloInstruction * is_extreme,
                   Compare(operand, extreme_b, ComparisonDirection::kEq));
  ASSIGN_OR_RETURN(HloInstruction * iota, Iota(index_type, dims, dimension));
  ASSIGN_OR_RETURN(HloInstruction * past_end,
                   FullConstant(index_type, static_cast<double>(dims[dimension]), dims));
  ASSIGN_OR_RETURN(HloInstruction * candidates, Select(is_extreme, iota, past_end));
  ASSIGN_OR_RETURN(HloInstruction * index_init,
                   ScalarConstant(index_type, static_cast<double>(dims[dimension])));
  ASSIGN_OR_RETURN(HloInstruction * first,
                   Reduce(candidates, index_init, {dimension}, HloOpcode::kMinimum));
  // A row of NaNs has no element equal to its maximum: TensorFlow's kernel answers 0 there.
  ASSIGN_OR_RETURN(HloInstruction * zero,
                   FullConstant(index_type, 0, first->shape().dimensions()));
  ASSIGN_OR_RETURN(HloInstruction * end,
                   FullConstant(index_type, static_cast<double>(dims[dimension]),
                                first->shape().dimensions()));
  ASSIGN_OR_RETURN(HloInstruction * none, Compare(first, end, ComparisonDirection::kEq));
  return Select(none, zero, first);
}

HloComputation* HloBuilder::ComparatorComputation(ComparisonDirection direction,
                                                  PrimitiveType type) {
  auto computation = std::make_unique<HloComputation>(module_->UniqueComputationName(
      fmt::format("{}_{}_", ComparisonDirectionString(direction), PrimitiveTypeName(type))));
  Shape scalar = Shape::Scalar(type);
  scalar.SetDefaultLayout();
  HloInstruction* x =
      computation->AddInstruction(HloInstruction::CreateParameter(0, scalar, "x"));
  HloInstruction* y =
      computation->AddInstruction(HloInstruction::CreateParameter(1, scalar, "y"));
  Shape pred = Shape::Scalar(PrimitiveType::PRED);
  pred.SetDefaultLayout();
  auto compare = HloInstruction::CreateBinary(HloOpcode::kCompare, pred, x, y);
  compare->comparison_direction = direction;
  computation->set_root_instruction(computation->AddInstruction(std::move(compare)));
  HloComputation* added = module_->AddComputationBefore(std::move(computation), computation_);
  UniquifyNames(*added);
  return added;
}

StatusOr<HloInstruction*> HloBuilder::ReduceWindow(HloInstruction* operand, HloInstruction* init,
                                                   const Window& window, HloOpcode combiner) {
  auto instr = Make(HloOpcode::kReduceWindow, {operand, init});
  instr->window = window;
  instr->SetCalledComputation("to_apply",
                              ScalarComputation(combiner, operand->shape().element_type()));
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::SelectAndScatter(HloInstruction* operand,
                                                       HloInstruction* source,
                                                       HloInstruction* init,
                                                       const Window& window) {
  auto instr = Make(HloOpcode::kSelectAndScatter, {operand, source, init});
  instr->window = window;
  instr->SetCalledComputation(
      "select", ComparatorComputation(ComparisonDirection::kGe, operand->shape().element_type()));
  instr->SetCalledComputation("scatter",
                              ScalarComputation(HloOpcode::kAdd, source->shape().element_type()));
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Convolution(HloInstruction* lhs, HloInstruction* rhs,
                                                  const Window& window,
                                                  const ConvolutionDimensionNumbers& dnums,
                                                  int64_t feature_group_count) {
  auto instr = Make(HloOpcode::kConvolution, {lhs, rhs});
  instr->window = window;
  instr->convolution_dimension_numbers = dnums;
  if (feature_group_count != 1) instr->feature_group_count_attr = feature_group_count;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Scatter(HloInstruction* operand, HloInstruction* indices,
                                              HloInstruction* updates,
                                              const ScatterDimensionNumbers& dnums,
                                              HloOpcode combiner) {
  auto instr = Make(HloOpcode::kScatter, {operand, indices, updates});
  instr->scatter_dimension_numbers = dnums;
  instr->SetCalledComputation("to_apply",
                              ScalarComputation(combiner, operand->shape().element_type()));
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Tuple(const std::vector<HloInstruction*>& elements) {
  return Add(Make(HloOpcode::kTuple, elements));
}

StatusOr<HloInstruction*> HloBuilder::GetTupleElement(HloInstruction* tuple, int64_t index) {
  auto instr = Make(HloOpcode::kGetTupleElement, {tuple});
  instr->tuple_index_attr = index;
  return Add(std::move(instr));
}

StatusOr<HloInstruction*> HloBuilder::Copy(HloInstruction* operand) {
  return Add(Make(HloOpcode::kCopy, {operand}));
}

}  // namespace xlens::cluster
