// The evaluator's driver: walks a computation in post order, dispatches each instruction to its
// handler, and frees every intermediate value as soon as its last user has run.
#include "compiler/hlo/evaluator.h"

#include <algorithm>
#include <unordered_set>

#include "compiler/hlo/evaluator_internal.h"

namespace xlens {
namespace evaluator_internal {

Status CheckSupportedShape(const Shape& shape) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) RETURN_IF_ERROR(CheckSupportedShape(element));
    return OkStatus();
  }
  if (!IsEvaluatorSupportedType(shape.element_type())) {
    return Error(fmt::format("unsupported element type {}", PrimitiveTypeName(shape.element_type())));
  }
  if (!shape.is_static()) {
    return Error(fmt::format("dynamic shape {} is not supported", shape.ToString(false)));
  }
  return OkStatus();
}

namespace {

template <int kSize>
struct ElementBytes {
  uint8_t bytes[kSize];
};

template <int kSize>
void StridedCopyOfSize(std::span<const int64_t> dims, uint8_t* dst, int64_t dst_base,
                       std::span<const int64_t> dst_strides, const uint8_t* src, int64_t src_base,
                       std::span<const int64_t> src_strides) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  for (int64_t d : dims) {
    if (d == 0) return;
  }
  if (rank == 0) {
    std::memcpy(dst + dst_base * kSize, src + src_base * kSize, kSize);
    return;
  }
  const int64_t inner = dims[rank - 1];
  const int64_t dst_step = dst_strides[rank - 1];
  const int64_t src_step = src_strides[rank - 1];
  std::vector<int64_t> index(rank - 1, 0);
  int64_t dst_offset = dst_base;
  int64_t src_offset = src_base;
  while (true) {
    if (dst_step == 1 && src_step == 1) {
      std::memcpy(dst + dst_offset * kSize, src + src_offset * kSize, inner * kSize);
    } else {
      uint8_t* d = dst + dst_offset * kSize;
      const uint8_t* s = src + src_offset * kSize;
      for (int64_t i = 0; i < inner; ++i) {
        std::memcpy(d + i * dst_step * kSize, s + i * src_step * kSize, kSize);
      }
    }
    int64_t dim = rank - 2;
    for (; dim >= 0; --dim) {
      dst_offset += dst_strides[dim];
      src_offset += src_strides[dim];
      if (++index[dim] < dims[dim]) break;
      dst_offset -= dst_strides[dim] * dims[dim];
      src_offset -= src_strides[dim] * dims[dim];
      index[dim] = 0;
    }
    if (dim < 0) return;
  }
}

}  // namespace

void StridedCopy(int64_t element_size, std::span<const int64_t> dims, uint8_t* dst,
                 int64_t dst_base, std::span<const int64_t> dst_strides, const uint8_t* src,
                 int64_t src_base, std::span<const int64_t> src_strides) {
  switch (element_size) {
    case 1: return StridedCopyOfSize<1>(dims, dst, dst_base, dst_strides, src, src_base, src_strides);
    case 2: return StridedCopyOfSize<2>(dims, dst, dst_base, dst_strides, src, src_base, src_strides);
    case 4: return StridedCopyOfSize<4>(dims, dst, dst_base, dst_strides, src, src_base, src_strides);
    case 8: return StridedCopyOfSize<8>(dims, dst, dst_base, dst_strides, src, src_base, src_strides);
    case 16:
      return StridedCopyOfSize<16>(dims, dst, dst_base, dst_strides, src, src_base, src_strides);
    default:
      break;
  }
}

std::vector<int64_t> StridesOf(const Shape& shape) {
  return shape_util::RowMajorStrides(shape.dimensions());
}

Status ExpectDimensions(const Shape& shape, std::span<const int64_t> dims, std::string_view what) {
  if (!shape.IsArray() || !std::equal(shape.dimensions().begin(), shape.dimensions().end(),
                                      dims.begin(), dims.end())) {
    return Error(fmt::format("{} has shape {}, expected dimensions [{}]", what,
                             shape.ToString(false), fmt::join(dims, ",")));
  }
  return OkStatus();
}

int64_t IndexValue(const Literal& literal, int64_t linear_index) {
  if (literal.shape().element_type() == PrimitiveType::U64) {
    // Indices past INT64_MAX are out of bounds however they are clamped; keep them positive.
    uint64_t v = literal.data<uint64_t>()[linear_index];
    return v > static_cast<uint64_t>(INT64_MAX) ? INT64_MAX : static_cast<int64_t>(v);
  }
  return literal.GetAsInt64(linear_index);
}

// ---------------------------------------------------------------------------------------------
// ScalarCaller

namespace {

Status ExpectScalar(const Shape& shape, PrimitiveType type, std::string_view what) {
  if (!shape.IsArray() || shape.rank() != 0 || shape.element_type() != type) {
    return Error(fmt::format("{} has shape {}, expected {}[]", what, shape.ToString(false),
                             PrimitiveTypeName(type)));
  }
  return OkStatus();
}

}  // namespace

StatusOr<ScalarCaller> ScalarCaller::Create(HloEvaluator& evaluator,
                                            const HloComputation* computation,
                                            std::vector<PrimitiveType> argument_types,
                                            std::vector<PrimitiveType> result_types) {
  if (computation == nullptr) return Error("missing called computation");
  const std::string where = "computation %" + computation->name();
  if (computation->num_parameters() != static_cast<int64_t>(argument_types.size())) {
    return Error(fmt::format("{} takes {} parameters, expected {}", where,
                             computation->num_parameters(), argument_types.size()));
  }
  for (int64_t i = 0; i < computation->num_parameters(); ++i) {
    const HloInstruction* parameter = computation->parameter_instruction(i);
    if (parameter == nullptr) return Error(fmt::format("{} lacks parameter {}", where, i));
    RETURN_IF_ERROR(ExpectScalar(parameter->shape(), argument_types[i],
                                 fmt::format("parameter {} of {}", i, where)));
  }
  const HloInstruction* root = computation->root_instruction();
  if (root == nullptr) return Error(where + " has no root");
  const Shape& root_shape = root->shape();
  if (root_shape.IsTuple()) {
    if (root_shape.tuple_shapes_size() != static_cast<int64_t>(result_types.size())) {
      return Error(fmt::format("{} returns {}, expected {} results", where,
                               root_shape.ToString(false), result_types.size()));
    }
    for (size_t i = 0; i < result_types.size(); ++i) {
      RETURN_IF_ERROR(ExpectScalar(root_shape.tuple_shapes(i), result_types[i],
                                   fmt::format("result {} of {}", i, where)));
    }
  } else {
    if (result_types.size() != 1) {
      return Error(fmt::format("{} returns {}, expected a tuple of {} scalars", where,
                               root_shape.ToString(false), result_types.size()));
    }
    RETURN_IF_ERROR(ExpectScalar(root_shape, result_types[0], "result of " + where));
  }

  ScalarCaller caller;
  caller.evaluator_ = &evaluator;
  caller.computation_ = computation;
  caller.argument_types_ = std::move(argument_types);
  caller.result_types_ = std::move(result_types);
  caller.compiled_ = caller.Compile();
  if (!caller.compiled_) {
    for (PrimitiveType type : caller.argument_types_) {
      caller.argument_literals_.emplace_back(Shape::Scalar(type));
    }
  }
  return caller;
}

bool ScalarCaller::Compile() {
  std::unordered_map<const HloInstruction*, int64_t> slot_of;
  argument_slots_.assign(argument_types_.size(), -1);
  const HloInstruction* root = computation_->root_instruction();
  for (const HloInstruction* instruction : computation_->MakeInstructionPostOrder()) {
    const HloOpcode opcode = instruction->opcode();
    if (opcode == HloOpcode::kTuple && instruction == root) {
      for (const HloInstruction* operand : instruction->operands()) {
        result_slots_.push_back(slot_of.at(operand));
      }
      continue;
    }
    const Shape& shape = instruction->shape();
    if (!shape.IsArray() || shape.rank() != 0 || !CheckSupportedShape(shape).ok()) return false;
    for (const HloInstruction* operand : instruction->operands()) {
      if (!operand->shape().IsArray() || operand->shape().rank() != 0) return false;
    }
    const int64_t slot = static_cast<int64_t>(slots_.size());
    slots_.emplace_back();
    slot_of[instruction] = slot;
    auto operand_slot = [&](int64_t i) { return slot_of.at(instruction->operand(i)); };
    Step step;
    step.out = slot;
    if (opcode == HloOpcode::kParameter) {
      argument_slots_[instruction->parameter_number()] = slot;
      continue;
    } else if (opcode == HloOpcode::kConstant) {
      if (!instruction->has_literal() || instruction->literal().is_elided() ||
          instruction->literal().is_text_only() ||
          !shape_util::Compatible(instruction->literal().shape(), shape)) {
        return false;
      }
      std::memcpy(slots_[slot].bytes, instruction->literal().untyped_data(),
                  ByteWidth(shape.element_type()));
      continue;
    } else if (opcode == HloOpcode::kSelect && instruction->operand_count() == 3) {
      step.is_select = true;
      step.a = operand_slot(0);
      step.b = operand_slot(1);
      step.third = operand_slot(2);
      step.width = ByteWidth(shape.element_type());
    } else if (opcode == HloOpcode::kConvert && instruction->operand_count() == 1) {
      StatusOr<UnaryKernel> kernel =
          SelectConvertKernel(instruction->operand(0)->shape().element_type(), shape.element_type());
      if (!kernel.ok()) return false;
      step.unary = *kernel;
      step.a = operand_slot(0);
    } else if ((IsElementwiseUnary(opcode) || opcode == HloOpcode::kCopy) &&
               instruction->operand_count() == 1) {
      if (opcode == HloOpcode::kCopy) {
        StatusOr<UnaryKernel> kernel =
            SelectConvertKernel(shape.element_type(), shape.element_type());
        if (!kernel.ok()) return false;
        step.unary = *kernel;
      } else {
        StatusOr<UnaryKernel> kernel =
            SelectUnaryKernel(*instruction, instruction->operand(0)->shape().element_type());
        if (!kernel.ok()) return false;
        step.unary = *kernel;
      }
      step.a = operand_slot(0);
    } else if (IsElementwiseBinary(opcode) && instruction->operand_count() == 2 &&
               instruction->operand(0)->shape().element_type() ==
                   instruction->operand(1)->shape().element_type()) {
      StatusOr<BinaryKernel> kernel =
          SelectBinaryKernel(*instruction, instruction->operand(0)->shape().element_type());
      if (!kernel.ok()) return false;
      step.binary = *kernel;
      step.a = operand_slot(0);
      step.b = operand_slot(1);
    } else {
      return false;
    }
    steps_.push_back(step);
  }
  if (result_slots_.empty()) result_slots_.push_back(slot_of.at(root));
  return true;
}

Status ScalarCaller::Call(std::span<const void* const> arguments, std::span<void* const> results) {
  if (compiled_) {
    for (size_t i = 0; i < argument_slots_.size(); ++i) {
      if (argument_slots_[i] >= 0) {
        std::memcpy(slots_[argument_slots_[i]].bytes, arguments[i], ByteWidth(argument_types_[i]));
      }
    }
    for (const Step& step : steps_) {
      void* out = slots_[step.out].bytes;
      if (step.binary != nullptr) {
        step.binary(slots_[step.a].bytes, slots_[step.b].bytes, out, 1);
      } else if (step.unary != nullptr) {
        step.unary(slots_[step.a].bytes, out, 1);
      } else {
        const bool pred = slots_[step.a].bytes[0] != 0;
        std::memcpy(out, slots_[pred ? step.b : step.third].bytes, step.width);
      }
    }
    for (size_t i = 0; i < result_slots_.size(); ++i) {
      std::memcpy(results[i], slots_[result_slots_[i]].bytes, ByteWidth(result_types_[i]));
    }
    return OkStatus();
  }
  // Pointers into argument_literals_ are taken here: the caller object may have been moved.
  argument_pointers_.clear();
  for (size_t i = 0; i < argument_literals_.size(); ++i) {
    std::memcpy(argument_literals_[i].untyped_data(), arguments[i],
                argument_literals_[i].size_bytes());
    argument_pointers_.push_back(&argument_literals_[i]);
  }
  ASSIGN_OR_RETURN(Literal result, evaluator_->Evaluate(*computation_, argument_pointers_));
  if (result.shape().IsTuple()) {
    for (size_t i = 0; i < result_types_.size(); ++i) {
      const Literal& element = result.tuple_element(i);
      std::memcpy(results[i], element.untyped_data(), element.size_bytes());
    }
  } else {
    std::memcpy(results[0], result.untyped_data(), result.size_bytes());
  }
  return OkStatus();
}

StatusOr<bool> ScalarCaller::CallPredicate(std::span<const void* const> arguments) {
  bool out = false;
  void* results[] = {&out};
  RETURN_IF_ERROR(Call(arguments, results));
  return out;
}

// ---------------------------------------------------------------------------------------------
// HloEvaluator

StatusOr<const HloEvaluator::Plan*> HloEvaluator::GetPlan(const HloComputation& computation) {
  auto it = plans_.find(&computation);
  if (it != plans_.end()) return it->second.get();
  const HloInstruction* root = computation.root_instruction();
  if (root == nullptr) return Error("computation %" + computation.name() + " has no root");

  // Only what the root depends on is evaluated: dead code may hold anything.
  std::unordered_set<const HloInstruction*> live;
  std::vector<const HloInstruction*> stack = {root};
  while (!stack.empty()) {
    const HloInstruction* instruction = stack.back();
    stack.pop_back();
    if (!live.insert(instruction).second) continue;
    for (const HloInstruction* operand : instruction->operands()) stack.push_back(operand);
  }

  auto plan = std::make_unique<Plan>();
  std::unordered_map<const HloInstruction*, int64_t> slot_of;
  for (const HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
    if (!live.contains(instruction)) continue;
    slot_of[instruction] = static_cast<int64_t>(plan->order.size());
    plan->order.push_back(instruction);
  }
  plan->use_counts.assign(plan->order.size(), 0);
  for (const HloInstruction* instruction : plan->order) {
    std::vector<int64_t> slots;
    for (const HloInstruction* operand : instruction->operands()) {
      auto found = slot_of.find(operand);
      if (found == slot_of.end()) {
        return Error(fmt::format("operand %{} of %{} is not in computation %{}", operand->name(),
                                 instruction->name(), computation.name()));
      }
      slots.push_back(found->second);
      ++plan->use_counts[found->second];
    }
    plan->operand_slots.push_back(std::move(slots));
  }
  plan->root_slot = slot_of.at(root);
  const Plan* result = plan.get();
  plans_[&computation] = std::move(plan);
  return result;
}

StatusOr<Literal> HloEvaluator::Evaluate(const HloComputation& computation,
                                         std::span<const Literal* const> arguments) {
  ASSIGN_OR_RETURN(const Plan* plan, GetPlan(computation));
  if (static_cast<int64_t>(arguments.size()) != computation.num_parameters()) {
    return Error(fmt::format("computation %{} takes {} arguments, got {}", computation.name(),
                             computation.num_parameters(), arguments.size()));
  }
  const int64_t n = static_cast<int64_t>(plan->order.size());
  std::vector<Literal> owned(n);
  std::vector<const Literal*> values(n, nullptr);
  std::vector<int64_t> remaining_uses = plan->use_counts;
  std::vector<const Literal*> operand_values;

  for (int64_t slot = 0; slot < n; ++slot) {
    const HloInstruction& instruction = *plan->order[slot];
    const std::vector<int64_t>& operand_slots = plan->operand_slots[slot];
    const std::string context = "evaluating %" + instruction.name();
    if (instruction.opcode() == HloOpcode::kParameter) {
      const int64_t number = instruction.parameter_number();
      if (number < 0 || number >= static_cast<int64_t>(arguments.size())) {
        return Error(fmt::format("{}: parameter number {} out of range", context, number));
      }
      if (Status supported = CheckSupportedShape(instruction.shape()); !supported.ok()) {
        return supported.WithContext(context);
      }
      const Literal& argument = *arguments[number];
      if (argument.is_elided() || argument.is_text_only() ||
          !shape_util::Compatible(argument.shape(), instruction.shape())) {
        return Error(fmt::format("{}: argument has shape {}, expected {}", context,
                                 argument.shape().ToString(false),
                                 instruction.shape().ToString(false)));
      }
      values[slot] = &argument;
    } else {
      // The value of an operand used for the last time by a tuple or get-tuple-element is moved,
      // not copied, so that loop states and multi-output fusions do not copy their buffers.
      auto stealable = [&](int64_t operand_slot) {
        return values[operand_slot] == &owned[operand_slot] &&
               remaining_uses[operand_slot] == 1 && operand_slot != plan->root_slot;
      };
      auto compute = [&]() -> StatusOr<Literal> {
        if (instruction.opcode() == HloOpcode::kGetTupleElement && operand_slots.size() == 1) {
          const int64_t operand_slot = operand_slots[0];
          const Literal& tuple = *values[operand_slot];
          const int64_t index = instruction.tuple_index();
          if (!tuple.shape().IsTuple() || index < 0 || index >= tuple.tuple_size()) {
            return Error(fmt::format("index {} into a value of shape {}", index,
                                     tuple.shape().ToString(false)));
          }
          if (stealable(operand_slot)) return std::move(owned[operand_slot].tuple_element(index));
          return Literal(tuple.tuple_element(index));
        }
        if (instruction.opcode() == HloOpcode::kTuple) {
          std::vector<Literal> elements;
          for (int64_t operand_slot : operand_slots) {
            elements.push_back(stealable(operand_slot) ? std::move(owned[operand_slot])
                                                       : Literal(*values[operand_slot]));
          }
          return Literal::MakeTuple(std::move(elements));
        }
        operand_values.clear();
        for (int64_t operand_slot : operand_slots) operand_values.push_back(values[operand_slot]);
        return Visit(instruction, operand_values);
      };
      StatusOr<Literal> result = compute();
      if (!result.ok()) return result.status().WithContext(context);
      if (!shape_util::Compatible(result->shape(), instruction.shape())) {
        return Error(fmt::format("{}: computed a value of shape {}, but the instruction has shape {}",
                                 context, result->shape().ToString(false),
                                 instruction.shape().ToString(false)));
      }
      owned[slot] = std::move(*result);
      values[slot] = &owned[slot];
    }
    for (int64_t operand_slot : operand_slots) {
      if (--remaining_uses[operand_slot] == 0 && operand_slot != plan->root_slot) {
        owned[operand_slot] = Literal();
      }
    }
  }
  const int64_t root = plan->root_slot;
  if (values[root] == &owned[root]) return std::move(owned[root]);
  return Literal(*values[root]);
}

StatusOr<Literal> HloEvaluator::EvaluateInstruction(const HloInstruction& instruction,
                                                    std::span<const Literal* const> operands) {
  if (static_cast<int64_t>(operands.size()) != instruction.operand_count()) {
    return Error(fmt::format("%{} has {} operands, got {} values", instruction.name(),
                             instruction.operand_count(), operands.size()));
  }
  StatusOr<Literal> result = [&]() -> StatusOr<Literal> {
    switch (instruction.opcode()) {
      case HloOpcode::kParameter:
        return Error("a parameter has no value outside a call");
      case HloOpcode::kTuple: {
        std::vector<Literal> elements;
        for (const Literal* operand : operands) elements.push_back(*operand);
        return Literal::MakeTuple(std::move(elements));
      }
      case HloOpcode::kGetTupleElement: {
        const Literal& tuple = *operands[0];
        const int64_t index = instruction.tuple_index();
        if (!tuple.shape().IsTuple() || index < 0 || index >= tuple.tuple_size()) {
          return Error(fmt::format("index {} into a value of shape {}", index,
                                   tuple.shape().ToString(false)));
        }
        return Literal(tuple.tuple_element(index));
      }
      default:
        return Visit(instruction, operands);
    }
  }();
  if (!result.ok()) return result.status().WithContext("evaluating %" + instruction.name());
  if (!shape_util::Compatible(result->shape(), instruction.shape())) {
    return Error(fmt::format("evaluating %{}: computed a value of shape {}, but the instruction "
                             "has shape {}", instruction.name(), result->shape().ToString(false),
                             instruction.shape().ToString(false)));
  }
  return result;
}

StatusOr<Literal> HloEvaluator::Visit(const HloInstruction& instruction,
                                      std::span<const Literal* const> operands) {
  const HloOpcode opcode = instruction.opcode();
  if (opcode == HloOpcode::kCustomCall) {
    return Error(fmt::format("unsupported opcode custom-call (custom_call_target=\"{}\")",
                             instruction.custom_call_target.value_or("")));
  }
  if (!IsFullySupportedOpcode(opcode) || opcode == HloOpcode::kAllReduce ||
      opcode == HloOpcode::kRngBitGenerator) {
    return Error(fmt::format("unsupported opcode {}", HloOpcodeString(opcode)));
  }
  RETURN_IF_ERROR(CheckSupportedShape(instruction.shape()));
  if (auto arity = HloOpcodeArity(opcode);
      arity && static_cast<int64_t>(operands.size()) != *arity) {
    return Error(fmt::format("{} takes {} operands, got {}", HloOpcodeString(opcode), *arity,
                             operands.size()));
  }

  switch (opcode) {
    case HloOpcode::kConstant: {
      if (!instruction.has_literal()) return Error("constant without a literal");
      const Literal& literal = instruction.literal();
      if (literal.is_elided()) return Error("the constant's literal is elided ({...})");
      if (literal.is_text_only()) {
        return Error("the constant's literal of type " +
                     std::string(PrimitiveTypeName(literal.shape().element_type())) +
                     " is held only as text");
      }
      return Literal(literal);
    }
    case HloOpcode::kIota:
      return HandleIota(instruction);
    case HloOpcode::kAbs: case HloOpcode::kNegate: case HloOpcode::kExp:
    case HloOpcode::kExpm1: case HloOpcode::kLog: case HloOpcode::kLog1p:
    case HloOpcode::kSqrt: case HloOpcode::kRsqrt: case HloOpcode::kCbrt:
    case HloOpcode::kTanh: case HloOpcode::kLogistic: case HloOpcode::kSin:
    case HloOpcode::kCos: case HloOpcode::kFloor: case HloOpcode::kCeil:
    case HloOpcode::kRoundNearestEven: case HloOpcode::kRoundNearestAfz:
    case HloOpcode::kSign: case HloOpcode::kNot: case HloOpcode::kIsFinite:
    case HloOpcode::kPopulationCount: case HloOpcode::kReal: case HloOpcode::kImag:
      return HandleUnary(instruction, *operands[0]);
    case HloOpcode::kAdd: case HloOpcode::kSubtract: case HloOpcode::kMultiply:
    case HloOpcode::kDivide: case HloOpcode::kRemainder: case HloOpcode::kPower:
    case HloOpcode::kMaximum: case HloOpcode::kMinimum: case HloOpcode::kAnd:
    case HloOpcode::kOr: case HloOpcode::kXor: case HloOpcode::kAtan2:
    case HloOpcode::kShiftLeft: case HloOpcode::kShiftRightLogical:
    case HloOpcode::kShiftRightArithmetic: case HloOpcode::kComplex:
    case HloOpcode::kCompare:
      return HandleBinary(instruction, *operands[0], *operands[1]);
    case HloOpcode::kSelect:
      return HandleSelect(instruction, operands);
    case HloOpcode::kClamp:
      return HandleClamp(instruction, operands);
    case HloOpcode::kConvert:
      return HandleConvert(instruction, *operands[0]);
    case HloOpcode::kBitcastConvert:
      return HandleBitcastConvert(instruction, *operands[0]);
    case HloOpcode::kReducePrecision:
      return HandleReducePrecision(instruction, *operands[0]);
    case HloOpcode::kMap:
      return HandleMap(*this, instruction, operands);
    case HloOpcode::kBroadcast:
      return HandleBroadcast(instruction, *operands[0]);
    case HloOpcode::kReshape:
      return HandleReshape(instruction, *operands[0]);
    case HloOpcode::kBitcast:
      return HandleBitcast(instruction, *operands[0]);
    case HloOpcode::kTranspose:
      return HandleTranspose(instruction, *operands[0]);
    case HloOpcode::kSlice:
      return HandleSlice(instruction, *operands[0]);
    case HloOpcode::kDynamicSlice:
      return HandleDynamicSlice(instruction, operands);
    case HloOpcode::kDynamicUpdateSlice:
      return HandleDynamicUpdateSlice(instruction, operands);
    case HloOpcode::kConcatenate:
      return HandleConcatenate(instruction, operands);
    case HloOpcode::kPad:
      return HandlePad(instruction, *operands[0], *operands[1]);
    case HloOpcode::kReverse:
      return HandleReverse(instruction, *operands[0]);
    case HloOpcode::kCopy:
    case HloOpcode::kOptimizationBarrier: {
      Literal result(*operands[0]);
      if (result.shape().IsArray() && instruction.shape().has_layout()) {
        result.set_layout(instruction.shape().layout());
      }
      return result;
    }
    case HloOpcode::kReduce:
      return HandleReduce(*this, instruction, operands);
    case HloOpcode::kReduceWindow:
      return HandleReduceWindow(*this, instruction, operands);
    case HloOpcode::kSelectAndScatter:
      return HandleSelectAndScatter(*this, instruction, operands);
    case HloOpcode::kSort:
      return HandleSort(*this, instruction, operands);
    case HloOpcode::kDot:
      return HandleDot(instruction, *operands[0], *operands[1]);
    case HloOpcode::kConvolution:
      return HandleConvolution(instruction, *operands[0], *operands[1]);
    case HloOpcode::kGather:
      return HandleGather(instruction, *operands[0], *operands[1]);
    case HloOpcode::kScatter:
      return HandleScatter(*this, instruction, operands);
    case HloOpcode::kFusion:
      return HandleCall(*this, instruction, instruction.fused_computation(), operands);
    case HloOpcode::kCall:
      return HandleCall(*this, instruction, instruction.to_apply(), operands);
    case HloOpcode::kWhile:
      return HandleWhile(*this, instruction, *operands[0]);
    case HloOpcode::kConditional:
      return HandleConditional(*this, instruction, operands);
    default:
      return Error(fmt::format("unsupported opcode {}", HloOpcodeString(opcode)));
  }
}

}  // namespace evaluator_internal

namespace {

StatusOr<Literal> EvaluateWithPointers(const HloComputation& computation,
                                       std::span<const Literal> arguments) {
  std::vector<const Literal*> pointers;
  for (const Literal& argument : arguments) pointers.push_back(&argument);
  evaluator_internal::HloEvaluator evaluator;
  return evaluator.Evaluate(computation, pointers);
}

}  // namespace

StatusOr<Literal> EvaluateModule(const HloModule& module, std::span<const Literal> arguments) {
  const HloComputation* entry = module.entry_computation();
  if (entry == nullptr) return Error("module " + module.name() + " has no entry computation");
  return EvaluateWithPointers(*entry, arguments);
}

StatusOr<Literal> EvaluateComputation(const HloComputation& computation,
                                      std::span<const Literal> arguments) {
  return EvaluateWithPointers(computation, arguments);
}

StatusOr<Literal> EvaluateInstruction(const HloInstruction& instruction,
                                      std::span<const Literal* const> operands) {
  evaluator_internal::HloEvaluator evaluator;
  return evaluator.EvaluateInstruction(instruction, operands);
}

}  // namespace xlens
