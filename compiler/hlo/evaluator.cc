// The evaluator's driver: walks a computation in post order, dispatches each instruction to its
// handler, and frees every intermediate value as soon as its last user has run. Called
// computations (call, fusion, conditional, while) run on an explicit stack of frames.
#include "compiler/hlo/evaluator.h"

#include <algorithm>
#include <unordered_set>

#include "compiler/hlo/annotation_custom_calls.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/custom_call_targets.h"
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
    // Work that cannot finish is refused before anything runs, once per computation.
    RETURN_IF_ERROR(CheckInstructionWork(*instruction, options_.max_work));
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

// The values of one running computation, and where it is.
struct HloEvaluator::Frame {
  enum class Waiting : uint8_t {
    kNothing,         // the instruction at `slot` has not started
    kResult,          // it called a computation whose result is its value
    kWhileCondition,  // it is a while whose condition runs
    kWhileBody,       // it is a while whose body runs
  };

  const Plan* plan = nullptr;
  std::vector<const Literal*> arguments;
  std::vector<Literal> owned;
  std::vector<const Literal*> values;
  std::vector<int64_t> remaining_uses;
  int64_t slot = 0;
  Waiting waiting = Waiting::kNothing;
  Literal loop_state;      // of the while at `slot`
  int64_t iterations = 0;  // of the while at `slot`

  const HloInstruction& instruction() const { return *plan->order[slot]; }
  const std::vector<int64_t>& operand_slots() const { return plan->operand_slots[slot]; }
  bool done() const { return slot == static_cast<int64_t>(plan->order.size()); }

  std::vector<const Literal*> OperandValues() const {
    std::vector<const Literal*> out;
    for (int64_t operand_slot : operand_slots()) out.push_back(values[operand_slot]);
    return out;
  }
  // The value of an operand used for the last time by the current instruction may be moved, not
  // copied (loop states and multi-output fusions do not copy their buffers).
  bool Stealable(int64_t operand_slot) const {
    return values[operand_slot] == &owned[operand_slot] && remaining_uses[operand_slot] == 1 &&
           operand_slot != plan->root_slot;
  }
  // Stores the current instruction's value (nullptr: an argument), frees the operands used for
  // the last time and moves on.
  void Advance(std::optional<Literal> value, const Literal* argument = nullptr) {
    if (value) {
      owned[slot] = std::move(*value);
      values[slot] = &owned[slot];
    } else {
      values[slot] = argument;
    }
    for (int64_t operand_slot : operand_slots()) {
      if (--remaining_uses[operand_slot] == 0 && operand_slot != plan->root_slot) {
        owned[operand_slot] = Literal();
      }
    }
    ++slot;
    waiting = Waiting::kNothing;
  }
  Literal TakeRoot() {
    const int64_t root = plan->root_slot;
    if (values[root] == &owned[root]) return std::move(owned[root]);
    return Literal(*values[root]);
  }
};

Status HloEvaluator::PushFrame(FrameStack& stack, const HloComputation& computation,
                               std::vector<const Literal*> arguments) {
  ASSIGN_OR_RETURN(const Plan* plan, GetPlan(computation));
  if (static_cast<int64_t>(arguments.size()) != computation.num_parameters()) {
    return Error(fmt::format("computation %{} takes {} arguments, got {}", computation.name(),
                             computation.num_parameters(), arguments.size()));
  }
  auto frame = std::make_unique<Frame>();
  const size_t n = plan->order.size();
  frame->plan = plan;
  frame->arguments = std::move(arguments);
  frame->owned.resize(n);
  frame->values.assign(n, nullptr);
  frame->remaining_uses = plan->use_counts;
  stack.push_back(std::move(frame));
  return OkStatus();
}

std::string HloEvaluator::Context(const FrameStack& stack) {
  // A hundred thousand nested calls would make a message no one reads: the outermost and the
  // innermost frames say where it happened.
  constexpr size_t kShownAtEachEnd = 4;
  std::vector<std::string> parts;
  for (size_t i = 0; i < stack.size(); ++i) {
    if (stack.size() > 2 * kShownAtEachEnd + 1 && i == kShownAtEachEnd) {
      parts.push_back(fmt::format("... {} more nested calls ...",
                                  stack.size() - 2 * kShownAtEachEnd));
      i = stack.size() - kShownAtEachEnd - 1;
      continue;
    }
    const Frame& frame = *stack[i];
    if (frame.done()) continue;
    std::string part = "evaluating %" + frame.instruction().name();
    if (frame.waiting == Frame::Waiting::kWhileCondition ||
        frame.waiting == Frame::Waiting::kWhileBody) {
      part += fmt::format(" (iteration {})", frame.iterations);
    }
    parts.push_back(std::move(part));
  }
  return fmt::format("{}", fmt::join(parts, ": "));
}

StatusOr<bool> HloEvaluator::StartCall(FrameStack& stack) {
  Frame& frame = *stack.back();
  const HloInstruction& instruction = frame.instruction();
  const HloOpcode opcode = instruction.opcode();
  if (opcode != HloOpcode::kCall && opcode != HloOpcode::kFusion &&
      opcode != HloOpcode::kConditional && opcode != HloOpcode::kWhile) {
    return false;
  }
  RETURN_IF_ERROR(CheckSupportedShape(instruction.shape()));
  std::vector<const Literal*> operands = frame.OperandValues();
  switch (opcode) {
    case HloOpcode::kCall:
    case HloOpcode::kFusion: {
      const HloComputation* callee = opcode == HloOpcode::kCall ? instruction.to_apply()
                                                                : instruction.fused_computation();
      if (callee == nullptr) return Error("missing called computation");
      frame.waiting = Frame::Waiting::kResult;
      RETURN_IF_ERROR(PushFrame(stack, *callee, std::move(operands)));
      return true;
    }
    case HloOpcode::kConditional: {
      ASSIGN_OR_RETURN(int64_t branch, SelectBranch(instruction, operands));
      frame.waiting = Frame::Waiting::kResult;
      RETURN_IF_ERROR(
          PushFrame(stack, *instruction.branch_computations()[branch], {operands[1 + branch]}));
      return true;
    }
    default: {  // kWhile
      const HloComputation* condition = instruction.while_condition();
      if (condition == nullptr || instruction.while_body() == nullptr) {
        return Error("while needs a condition and a body");
      }
      if (operands.size() != 1) {
        return Error(fmt::format("while takes 1 operand, got {}", operands.size()));
      }
      const int64_t init_slot = frame.operand_slots()[0];
      frame.loop_state = frame.Stealable(init_slot) ? std::move(frame.owned[init_slot])
                                                    : Literal(*operands[0]);
      frame.iterations = 0;
      frame.waiting = Frame::Waiting::kWhileCondition;
      RETURN_IF_ERROR(PushFrame(stack, *condition, {&frame.loop_state}));
      return true;
    }
  }
}

StatusOr<std::optional<Literal>> HloEvaluator::Resume(FrameStack& stack, Literal value) {
  Frame& frame = *stack.back();
  const HloInstruction& instruction = frame.instruction();
  switch (frame.waiting) {
    case Frame::Waiting::kWhileCondition:
      RETURN_IF_ERROR(ExpectLoopCondition(value));
      if (!value.data<bool>()[0]) return std::optional<Literal>(std::move(frame.loop_state));
      frame.waiting = Frame::Waiting::kWhileBody;
      RETURN_IF_ERROR(PushFrame(stack, *instruction.while_body(), {&frame.loop_state}));
      return std::optional<Literal>();
    case Frame::Waiting::kWhileBody:
      frame.loop_state = std::move(value);
      ++frame.iterations;
      frame.waiting = Frame::Waiting::kWhileCondition;
      RETURN_IF_ERROR(PushFrame(stack, *instruction.while_condition(), {&frame.loop_state}));
      return std::optional<Literal>();
    default:
      return std::optional<Literal>(std::move(value));
  }
}

StatusOr<Literal> HloEvaluator::Evaluate(const HloComputation& computation,
                                         std::span<const Literal* const> arguments) {
  // Calls nest on `stack` below; what nests here, on the machine stack, are computations applied
  // element by element (a reducer whose reduce applies a reducer ...): bounded.
  if (nesting_ >= kMaxNestedApplications) {
    return Error(fmt::format(
        "computations applied element by element (reducers, comparators, combiners, mapped "
        "computations) nest more than {} deep here, at %{}",
        kMaxNestedApplications, computation.name()));
  }
  struct NestingGuard {
    int& nesting;
    explicit NestingGuard(int& n) : nesting(++n) {}
    ~NestingGuard() { --nesting; }
  } guard(nesting_);

  FrameStack stack;
  RETURN_IF_ERROR(PushFrame(stack, computation, {arguments.begin(), arguments.end()}));
  std::optional<Literal> returned;  // the result of the frame that just finished
  while (true) {
    if (returned) {
      Literal value = std::move(*returned);
      returned.reset();
      StatusOr<std::optional<Literal>> resumed = Resume(stack, std::move(value));
      if (!resumed.ok()) return resumed.status().WithContext(Context(stack));
      if (!resumed->has_value()) continue;  // the while's next condition or body runs
      Frame& frame = *stack.back();
      const HloInstruction& instruction = frame.instruction();
      if (!shape_util::Compatible((*resumed)->shape(), instruction.shape())) {
        return Error(fmt::format("{}: computed a value of shape {}, but the instruction has "
                                 "shape {}", Context(stack), (*resumed)->shape().ToString(false),
                                 instruction.shape().ToString(false)));
      }
      frame.Advance(std::move(*resumed));
      continue;
    }
    Frame& frame = *stack.back();
    if (frame.done()) {
      Literal result = frame.TakeRoot();
      stack.pop_back();
      if (stack.empty()) return result;
      returned = std::move(result);
      continue;
    }
    if (cancelled()) return CancelledError().WithContext(Context(stack));
    const HloInstruction& instruction = frame.instruction();
    if (instruction.opcode() == HloOpcode::kParameter) {
      const int64_t number = instruction.parameter_number();
      if (number < 0 || number >= static_cast<int64_t>(frame.arguments.size())) {
        return Error(fmt::format("{}: parameter number {} out of range", Context(stack), number));
      }
      if (Status supported = CheckSupportedShape(instruction.shape()); !supported.ok()) {
        return supported.WithContext(Context(stack));
      }
      const Literal& argument = *frame.arguments[number];
      if (argument.is_elided() || argument.is_text_only() ||
          !shape_util::Compatible(argument.shape(), instruction.shape())) {
        return Error(fmt::format("{}: argument has shape {}, expected {}", Context(stack),
                                 argument.shape().ToString(false),
                                 instruction.shape().ToString(false)));
      }
      frame.Advance(std::nullopt, &argument);
      continue;
    }
    StatusOr<bool> called = StartCall(stack);
    if (!called.ok()) return called.status().WithContext(Context(stack));
    if (*called) continue;

    const std::vector<int64_t>& operand_slots = frame.operand_slots();
    auto compute = [&]() -> StatusOr<Literal> {
      if (instruction.opcode() == HloOpcode::kGetTupleElement && operand_slots.size() == 1) {
        const int64_t operand_slot = operand_slots[0];
        const Literal& tuple = *frame.values[operand_slot];
        const int64_t index = instruction.tuple_index();
        if (!tuple.shape().IsTuple() || index < 0 || index >= tuple.tuple_size()) {
          return Error(fmt::format("index {} into a value of shape {}", index,
                                   tuple.shape().ToString(false)));
        }
        if (frame.Stealable(operand_slot)) {
          return std::move(frame.owned[operand_slot].tuple_element(index));
        }
        return Literal(tuple.tuple_element(index));
      }
      if (instruction.opcode() == HloOpcode::kTuple) {
        std::vector<Literal> elements;
        for (int64_t operand_slot : operand_slots) {
          elements.push_back(frame.Stealable(operand_slot)
                                 ? std::move(frame.owned[operand_slot])
                                 : Literal(*frame.values[operand_slot]));
        }
        return Literal::MakeTuple(std::move(elements));
      }
      return Visit(instruction, frame.OperandValues());
    };
    StatusOr<Literal> result = compute();
    if (!result.ok()) return result.status().WithContext(Context(stack));
    if (!shape_util::Compatible(result->shape(), instruction.shape())) {
      return Error(fmt::format("{}: computed a value of shape {}, but the instruction has shape {}",
                               Context(stack), result->shape().ToString(false),
                               instruction.shape().ToString(false)));
    }
    frame.Advance(std::move(*result));
  }
}

StatusOr<Literal> HloEvaluator::EvaluateInstruction(const HloInstruction& instruction,
                                                    std::span<const Literal* const> operands) {
  if (static_cast<int64_t>(operands.size()) != instruction.operand_count()) {
    return Error(fmt::format("%{} has {} operands, got {} values", instruction.name(),
                             instruction.operand_count(), operands.size()));
  }
  StatusOr<Literal> result = [&]() -> StatusOr<Literal> {
    RETURN_IF_ERROR(CheckInstructionWork(instruction, options_.max_work));
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
    // Sharding annotations pass their operand through (one device: the global view).
    if (IsAnnotationCustomCall(instruction)) {
      Literal value = *operands[0];
      if (instruction.shape().has_layout() && value.shape().IsArray()) {
        value.set_layout(instruction.shape().layout());
      }
      return value;
    }
    const std::string target = instruction.custom_call_target.value_or("");
    const std::string why = WhyCustomCallCannotRunOnCpu(target);
    return Error(fmt::format("unsupported opcode custom-call (custom_call_target=\"{}\"){}", target,
                             why.empty() ? "" : ": it " + why));
  }
  if (IsCollectiveOpcode(opcode)) return HandleCollective(*this, instruction, operands);
  if (!IsFullySupportedOpcode(opcode)) {
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
    case HloOpcode::kTanh: case HloOpcode::kLogistic: case HloOpcode::kSin: case HloOpcode::kErf:
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
    case HloOpcode::kFft:
      return HandleFft(instruction, *operands[0]);
    case HloOpcode::kCholesky:
      return HandleCholesky(instruction, *operands[0]);
    case HloOpcode::kTopK:
      return HandleTopK(instruction, *operands[0]);
    case HloOpcode::kRngBitGenerator:
      return HandleRngBitGenerator(instruction, *operands[0]);
    case HloOpcode::kTriangularSolve:
      return HandleTriangularSolve(instruction, *operands[0], *operands[1]);
    case HloOpcode::kBatchNormTraining:
    case HloOpcode::kBatchNormInference:
    case HloOpcode::kBatchNormGrad:
      return HandleBatchNorm(instruction, operands);
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
                                       std::span<const Literal> arguments,
                                       const EvaluatorOptions& options) {
  std::vector<const Literal*> pointers;
  for (const Literal& argument : arguments) pointers.push_back(&argument);
  evaluator_internal::HloEvaluator evaluator(options);
  return evaluator.Evaluate(computation, pointers);
}

}  // namespace

StatusOr<Literal> EvaluateModule(const HloModule& module, std::span<const Literal> arguments,
                                 const EvaluatorOptions& options) {
  const HloComputation* entry = module.entry_computation();
  if (entry == nullptr) return Error("module " + module.name() + " has no entry computation");
  return EvaluateWithPointers(*entry, arguments, options);
}

StatusOr<Literal> EvaluateComputation(const HloComputation& computation,
                                      std::span<const Literal> arguments,
                                      const EvaluatorOptions& options) {
  return EvaluateWithPointers(computation, arguments, options);
}

StatusOr<Literal> EvaluateInstruction(const HloInstruction& instruction,
                                      std::span<const Literal* const> operands,
                                      const EvaluatorOptions& options) {
  evaluator_internal::HloEvaluator evaluator(options);
  return evaluator.EvaluateInstruction(instruction, operands);
}

}  // namespace xlens
