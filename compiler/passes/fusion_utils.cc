#include "compiler/passes/fusion_utils.h"

#include <algorithm>
#include <deque>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/hlo/stack_frames.h"

namespace xlens {

std::string FusionDecision::ToString() const {
  std::string line;
  if (fused) {
    line = fmt::format("fused {} into {} ({})", producer, consumer, kind);
    if (!reason.empty()) line += ": " + reason;
  } else {
    line = fmt::format("refused {} into {}: {}", producer, consumer, reason);
  }
  if (!source.empty()) line += "  at " + source;
  return line;
}

std::string DecisionSource(const HloInstruction& producer) {
  std::vector<SourceFrame> stack = KernelStack(producer);
  return stack.empty() ? std::string() : stack.front().ToString();
}

namespace {

bool IsCheapOpcode(const HloInstruction& instruction) {
  using H = HloOpcode;
  switch (instruction.opcode()) {
    case H::kAdd: case H::kAnd: case H::kBitcast: case H::kBitcastConvert: case H::kBroadcast:
    case H::kCeil: case H::kClamp: case H::kClz: case H::kCompare: case H::kComplex:
    case H::kConcatenate: case H::kConstant: case H::kConvert: case H::kCopy:
    case H::kDynamicSlice: case H::kDynamicUpdateSlice: case H::kFloor:
    case H::kGetTupleElement: case H::kImag: case H::kIota: case H::kIsFinite: case H::kMaximum:
    case H::kMinimum: case H::kMultiply: case H::kNegate: case H::kNot: case H::kOr: case H::kXor:
    case H::kPad: case H::kPopulationCount: case H::kReal: case H::kReducePrecision:
    case H::kReshape: case H::kReverse: case H::kRoundNearestAfz: case H::kRoundNearestEven:
    case H::kSelect: case H::kShiftLeft: case H::kShiftRightArithmetic:
    case H::kShiftRightLogical: case H::kSign: case H::kSlice: case H::kSubtract:
    case H::kTranspose: case H::kTuple: case H::kParameter:
      return true;
    case H::kAbs:
      return !IsComplexType(instruction.shape().element_type());
    default:
      return false;
  }
}

template <typename Pred>
bool AnyInside(const HloInstruction& instruction, Pred pred) {
  if (instruction.opcode() != HloOpcode::kFusion || instruction.fused_computation() == nullptr) {
    return pred(instruction);
  }
  return instruction.fused_computation()->AnyInstruction(
      [&](const HloInstruction& inner) { return AnyInside(inner, pred); });
}

bool IsMultiOutputFusion(const HloInstruction& instruction) {
  if (instruction.opcode() != HloOpcode::kFusion || instruction.fused_computation() == nullptr ||
      instruction.fused_computation()->root_instruction()->opcode() != HloOpcode::kTuple ||
      instruction.users().empty()) {
    return false;
  }
  return std::all_of(instruction.users().begin(), instruction.users().end(), [](auto* user) {
    return user->opcode() == HloOpcode::kGetTupleElement;
  });
}

}  // namespace

bool IsExpensive(const HloInstruction& instruction) {
  return AnyInside(instruction, [](const HloInstruction& i) { return !IsCheapOpcode(i); });
}

bool IsLoopFusible(const HloInstruction& instruction) {
  using H = HloOpcode;
  if (instruction.IsElementwise()) return true;
  switch (instruction.opcode()) {
    case H::kBitcast: case H::kBroadcast: case H::kReshape: case H::kTranspose: case H::kSlice:
    case H::kDynamicSlice: case H::kConcatenate: case H::kPad: case H::kIota: case H::kReverse:
    case H::kConstant: case H::kGather:
      return instruction.shape().IsArray();
    default:
      return false;
  }
}

bool HasReduction(const HloInstruction& instruction) {
  return AnyInside(instruction,
                   [](const HloInstruction& i) { return i.opcode() == HloOpcode::kReduce; });
}

bool HasDotOrConvolution(const HloInstruction& instruction) {
  return AnyInside(instruction, [](const HloInstruction& i) {
    return i.opcode() == HloOpcode::kDot || i.opcode() == HloOpcode::kConvolution;
  });
}

bool HasOnlyRowReductions(const HloInstruction& instruction) {
  return !AnyInside(instruction, [](const HloInstruction& i) {
    if (i.opcode() != HloOpcode::kReduce) return false;
    const int64_t rank = i.operand(0)->shape().rank();
    std::vector<int64_t> dims = i.dimensions();
    std::sort(dims.begin(), dims.end());
    const int64_t kept = rank - static_cast<int64_t>(dims.size());
    if (kept < 1) return true;
    for (size_t k = 0; k < dims.size(); ++k) {
      if (dims[k] != kept + static_cast<int64_t>(k)) return true;
    }
    return false;
  });
}

int64_t UseCount(const HloInstruction& instruction) {
  const bool is_root = instruction.parent() != nullptr &&
                       instruction.parent()->root_instruction() == &instruction;
  return instruction.user_count() + (is_root ? 1 : 0);
}

std::vector<HloComputation*> FusibleComputations(const HloModule& module) {
  std::vector<HloComputation*> out;
  if (module.entry_computation() == nullptr) return out;
  std::unordered_set<const HloComputation*> seen = {module.entry_computation()};
  std::deque<HloComputation*> work = {module.entry_computation()};
  while (!work.empty()) {
    HloComputation* computation = work.front();
    work.pop_front();
    out.push_back(computation);
    for (const HloInstruction* instruction : computation->instructions()) {
      const HloOpcode op = instruction->opcode();
      if (op != HloOpcode::kWhile && op != HloOpcode::kConditional && op != HloOpcode::kCall) {
        continue;
      }
      for (HloComputation* called : instruction->called_computations()) {
        if (seen.insert(called).second) work.push_back(called);
      }
    }
  }
  return out;
}

bool CountsAsKernel(const HloInstruction& instruction) {
  switch (instruction.opcode()) {
    case HloOpcode::kParameter: case HloOpcode::kConstant: case HloOpcode::kTuple:
    case HloOpcode::kGetTupleElement: case HloOpcode::kBitcast:
      return false;
    default:
      return true;
  }
}

int64_t CountKernels(const HloModule& module) {
  if (module.entry_computation() == nullptr) return 0;
  int64_t kernels = 0;
  for (const HloInstruction* instruction : module.entry_computation()->instructions()) {
    kernels += CountsAsKernel(*instruction) ? 1 : 0;
  }
  return kernels;
}

namespace {

// The members with the get-tuple-element users of multi-output member fusions added: those read
// a value the merged fusion computes inside.
std::unordered_set<HloInstruction*> ExpandedMembers(const FusionPlan& plan,
                                                    const std::unordered_set<HloInstruction*>& dup) {
  std::unordered_set<HloInstruction*> members(plan.members.begin(), plan.members.end());
  for (HloInstruction* member : plan.members) {
    if (dup.count(member) || !IsMultiOutputFusion(*member)) continue;
    for (HloInstruction* user : member->users()) members.insert(user);
  }
  return members;
}

bool HasOutsideUse(const HloInstruction& member, const std::unordered_set<HloInstruction*>& set) {
  if (member.parent()->root_instruction() == &member) return true;
  return std::any_of(member.users().begin(), member.users().end(),
                     [&](HloInstruction* user) { return !set.count(user); });
}

// The members in an order where operands come before users, found by searching the members
// alone: a post-order of the whole computation per fusion would make fusing a long chain
// quadratic. Deterministic: the search starts from the plan's members in order.
std::vector<HloInstruction*> InPostOrder(const FusionPlan& plan,
                                         const std::unordered_set<HloInstruction*>& set) {
  std::vector<HloInstruction*> seeds = plan.members;
  for (HloInstruction* member : plan.members) {
    for (HloInstruction* user : member->users()) {
      if (set.count(user)) seeds.push_back(user);
    }
  }
  std::vector<HloInstruction*> order;
  std::unordered_set<const HloInstruction*> visited;
  std::vector<std::pair<HloInstruction*, size_t>> stack;
  for (HloInstruction* seed : seeds) {
    if (!visited.insert(seed).second) continue;
    stack.push_back({seed, 0});
    while (!stack.empty()) {
      auto& [instruction, next] = stack.back();
      if (next < instruction->operands().size()) {
        HloInstruction* operand = instruction->operand(static_cast<int64_t>(next++));
        if (set.count(operand) && visited.insert(operand).second) stack.push_back({operand, 0});
        continue;
      }
      order.push_back(instruction);
      stack.pop_back();
    }
  }
  return order;
}

}  // namespace

FusionFootprint EstimateFusion(const FusionPlan& plan) {
  const std::unordered_set<HloInstruction*> dup(plan.duplicated.begin(), plan.duplicated.end());
  const std::unordered_set<HloInstruction*> members = ExpandedMembers(plan, dup);
  FusionFootprint footprint;
  std::unordered_set<const HloInstruction*> operands;
  for (HloInstruction* member : members) {
    if (member->opcode() == HloOpcode::kGetTupleElement && members.count(member->operand(0))) {
      continue;
    }
    if (member->opcode() == HloOpcode::kFusion && member->fused_computation() != nullptr) {
      const HloComputation* fused = member->fused_computation();
      footprint.instructions += fused->instruction_count() - fused->num_parameters();
    } else {
      footprint.instructions += 1;
    }
    for (const HloInstruction* operand : member->operands()) {
      if (!members.count(const_cast<HloInstruction*>(operand))) operands.insert(operand);
    }
    if (!dup.count(member) && HasOutsideUse(*member, members)) ++footprint.outputs;
  }
  footprint.operands = static_cast<int64_t>(operands.size());
  footprint.instructions += footprint.operands + (footprint.outputs > 1 ? 1 : 0);
  return footprint;
}

TopologicalPositions PostOrderPositions(const HloComputation& computation) {
  TopologicalPositions positions;
  int64_t i = 0;
  for (const HloInstruction* instruction : computation.MakeInstructionPostOrder()) {
    positions[instruction] = i++;
  }
  return positions;
}

const HloInstruction* FindCycleWitness(const FusionPlan& plan,
                                       const TopologicalPositions* positions) {
  const std::unordered_set<HloInstruction*> dup(plan.duplicated.begin(), plan.duplicated.end());
  const std::unordered_set<HloInstruction*> members = ExpandedMembers(plan, dup);
  // Paths only go forward in a topological numbering: past the last member nothing leads back.
  int64_t limit = -1;
  if (positions != nullptr) {
    for (HloInstruction* member : members) {
      auto it = positions->find(member);
      if (it == positions->end()) {
        limit = -1;
        break;
      }
      limit = std::max(limit, it->second);
    }
  }
  auto beyond_members = [&](const HloInstruction* instruction) {
    if (limit < 0) return false;
    auto it = positions->find(instruction);
    return it != positions->end() && it->second > limit;
  };
  for (HloInstruction* member : members) {
    if (dup.count(member)) continue;
    std::vector<HloInstruction*> starts;
    for (HloInstruction* user : member->users()) {
      if (!members.count(user)) starts.push_back(user);
    }
    for (HloInstruction* successor : member->control_successors()) {
      if (!members.count(successor)) starts.push_back(successor);
    }
    for (HloInstruction* start : starts) {
      if (beyond_members(start)) continue;
      std::unordered_set<const HloInstruction*> seen = {start};
      std::vector<HloInstruction*> stack = {start};
      while (!stack.empty()) {
        HloInstruction* at = stack.back();
        stack.pop_back();
        auto visit = [&](HloInstruction* next) {
          if (members.count(next)) return true;
          if (!beyond_members(next) && seen.insert(next).second) stack.push_back(next);
          return false;
        };
        for (HloInstruction* user : at->users()) {
          if (visit(user)) return start;
        }
        for (HloInstruction* successor : at->control_successors()) {
          if (visit(successor)) return start;
        }
      }
    }
  }
  return nullptr;
}

FusionKind PlannedKind(const FusionPlan& plan) {
  bool dot = false, reduction = false;
  for (const HloInstruction* member : plan.members) {
    dot = dot || HasDotOrConvolution(*member) ||
          (member->fusion_kind == FusionKind::kOutput && member->opcode() == HloOpcode::kFusion);
    reduction = reduction || HasReduction(*member) ||
                (member->fusion_kind == FusionKind::kInput &&
                 member->opcode() == HloOpcode::kFusion);
  }
  if (dot) return FusionKind::kOutput;
  return reduction ? FusionKind::kInput : FusionKind::kLoop;
}

namespace {

// Builds the fused computation's instructions. Names stay as written where they are free in the
// fused computation, so `add.4` inside the kernel is the `add.4` the user saw before fusion.
class FusedComputationBuilder {
 public:
  FusedComputationBuilder(HloModule& module, HloComputation& fused) : module_(module), fused_(fused) {}

  // The inner value for an outer instruction: a member already cloned, or a new parameter.
  HloInstruction* Value(HloInstruction* outer) {
    if (auto it = value_.find(outer); it != value_.end()) return it->second;
    const int64_t number = static_cast<int64_t>(operands_.size());
    operands_.push_back(outer);
    auto parameter = HloInstruction::CreateParameter(number, outer->shape(),
                                                     fmt::format("param_{}", number));
    return value_[outer] = Add(std::move(parameter));
  }

  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction, bool fresh_name = false) {
    std::string name = instruction->name();
    if (fresh_name || !names_.insert(name).second) {
      name = module_.UniqueInstructionName(name);
      names_.insert(name);
    }
    instruction->set_name(name);
    return fused_.AddInstruction(std::move(instruction), /*uniquify_name=*/false);
  }

  // Clones `member` (inlining a fusion) and records its inner value.
  void CloneMember(HloInstruction* member, bool duplicated) {
    if (member->opcode() == HloOpcode::kGetTupleElement) {
      auto it = value_.find(member->operand(0));
      if (it != value_.end() && it->second->opcode() == HloOpcode::kTuple) {
        value_[member] = it->second->operand(member->tuple_index());
        return;
      }
    }
    if (member->opcode() != HloOpcode::kFusion || member->fused_computation() == nullptr) {
      value_[member] = Add(member->CloneWithNewOperands(member->shape(), Operands(*member)),
                           duplicated);
      return;
    }
    const HloComputation* callee = member->fused_computation();
    std::unordered_map<const HloInstruction*, HloInstruction*> inner;
    for (HloInstruction* instruction : callee->MakeInstructionPostOrder()) {
      if (instruction->opcode() == HloOpcode::kParameter) continue;
      std::vector<HloInstruction*> operands;
      for (HloInstruction* operand : instruction->operands()) {
        operands.push_back(operand->opcode() == HloOpcode::kParameter
                               ? Value(member->operand(operand->parameter_number()))
                               : inner.at(operand));
      }
      inner[instruction] =
          Add(instruction->CloneWithNewOperands(instruction->shape(), operands), duplicated);
    }
    const HloInstruction* root = callee->root_instruction();
    value_[member] = root->opcode() == HloOpcode::kParameter
                         ? Value(member->operand(root->parameter_number()))
                         : inner.at(root);
  }

  HloInstruction* MakeTuple(const std::vector<HloInstruction*>& elements) {
    std::vector<Shape> shapes;
    for (const HloInstruction* element : elements) shapes.push_back(element->shape());
    auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, Shape::Tuple(shapes), "tuple");
    for (HloInstruction* element : elements) tuple->AppendOperand(element);
    return Add(std::move(tuple));
  }

  const std::vector<HloInstruction*>& operands() const { return operands_; }
  HloInstruction* ValueOf(HloInstruction* member) const { return value_.at(member); }

 private:
  std::vector<HloInstruction*> Operands(const HloInstruction& member) {
    std::vector<HloInstruction*> operands;
    for (HloInstruction* operand : member.operands()) operands.push_back(Value(operand));
    return operands;
  }

  HloModule& module_;
  HloComputation& fused_;
  std::unordered_map<const HloInstruction*, HloInstruction*> value_;
  std::vector<HloInstruction*> operands_;
  std::unordered_set<std::string> names_;
};

// Collects the distinct names of ';'-joined op_name lists, in order of first appearance.
class OpNameJoiner {
 public:
  void Add(const std::string& joined) {
    size_t start = 0;
    while (start <= joined.size()) {
      size_t end = joined.find(';', start);
      if (end == std::string::npos) end = joined.size();
      std::string name = joined.substr(start, end - start);
      if (!name.empty() && seen_.insert(name).second) names_.push_back(name);
      start = end + 1;
    }
  }
  std::string Joined() const { return fmt::format("{}", fmt::join(names_, ";")); }

 private:
  std::vector<std::string> names_;
  std::unordered_set<std::string> seen_;
};

// Every distinct op_name inside the fused computation (and of the inlined fusions), in order.
std::string JoinedOpNames(const HloComputation& fused,
                          const std::vector<HloInstruction*>& members) {
  OpNameJoiner joiner;
  auto add = [&](const std::string& joined) { joiner.Add(joined); };
  for (const HloInstruction* instruction : fused.MakeInstructionPostOrder()) {
    add(instruction->metadata.op_name);
  }
  for (const HloInstruction* member : members) add(member->metadata.op_name);
  return joiner.Joined();
}

void RemoveDeadInner(HloComputation& fused) {
  std::vector<HloInstruction*> order = fused.MakeInstructionPostOrder();
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    HloInstruction* instruction = *it;
    if (instruction->user_count() == 0 && instruction != fused.root_instruction() &&
        instruction->opcode() != HloOpcode::kParameter) {
      (void)fused.RemoveInstruction(instruction);
    }
  }
}

}  // namespace

StatusOr<HloInstruction*> BuildFusion(const FusionPlan& plan) {
  if (plan.members.empty()) return Error("a fusion needs at least one instruction");
  HloComputation& computation = *plan.members.front()->parent();
  HloModule& module = *computation.parent();
  const std::unordered_set<HloInstruction*> dup(plan.duplicated.begin(), plan.duplicated.end());
  const std::unordered_set<HloInstruction*> members = ExpandedMembers(plan, dup);
  for (HloInstruction* member : members) {
    if (member->parent() != &computation) {
      return Error(fmt::format("%{} is not in %{}", member->name(), computation.name()));
    }
  }
  const std::vector<HloInstruction*> order = InPostOrder(plan, members);
  std::vector<HloInstruction*> outputs;
  for (HloInstruction* member : order) {
    if (!dup.count(member) && HasOutsideUse(*member, members)) outputs.push_back(member);
  }
  // Dead code (no use at all) still fuses: the fusion is as dead as the consumer it replaces.
  if (outputs.empty()) outputs.push_back(order.back());
  const FusionKind kind = PlannedKind(plan);

  HloComputation* fused = module.AddComputationBefore(
      std::make_unique<HloComputation>("fused_computation"), &computation);
  FusedComputationBuilder builder(module, *fused);
  for (HloInstruction* member : order) builder.CloneMember(member, dup.count(member) > 0);
  std::vector<HloInstruction*> results;
  for (HloInstruction* output : outputs) results.push_back(builder.ValueOf(output));
  fused->set_root_instruction(results.size() == 1 ? results[0] : builder.MakeTuple(results));
  RemoveDeadInner(*fused);

  const HloInstruction* last = order.back();
  const bool keep_name =
      plan.keep_name_of != nullptr && plan.keep_name_of->fused_computation() != nullptr;
  auto instruction = std::make_unique<HloInstruction>(
      HloOpcode::kFusion, fused->root_instruction()->shape(),
      keep_name ? plan.keep_name_of->name() : "fusion");
  for (HloInstruction* operand : builder.operands()) instruction->AppendOperand(operand);
  instruction->fusion_kind = kind;
  instruction->SetCalledComputation("calls", fused);
  instruction->metadata = last->metadata;
  instruction->metadata.op_name = JoinedOpNames(*fused, order);
  // A growing fusion keeps its name: the old one is removed below, before anyone looks.
  HloInstruction* fusion = computation.AddInstruction(std::move(instruction), !keep_name);
  fused->SetFusionInstruction(fusion);

  for (size_t i = 0; i < outputs.size(); ++i) {
    HloInstruction* output = outputs[i];
    HloInstruction* replacement = fusion;
    if (outputs.size() > 1) {
      auto gte = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement, output->shape(),
                                                  "get-tuple-element");
      gte->AppendOperand(fusion);
      gte->tuple_index_attr = static_cast<int64_t>(i);
      replacement = computation.AddInstruction(std::move(gte));
    }
    for (HloInstruction* user : std::vector<HloInstruction*>(output->users())) {
      if (members.count(user)) continue;
      for (int64_t k = 0; k < user->operand_count(); ++k) {
        if (user->operand(k) == output) user->ReplaceOperandWith(k, replacement);
      }
    }
    if (computation.root_instruction() == output) computation.set_root_instruction(replacement);
  }

  const std::string kept_computation =
      keep_name ? plan.keep_name_of->fused_computation()->name() : std::string();
  std::vector<HloComputation*> dead_computations;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    HloInstruction* member = *it;
    if (dup.count(member)) continue;
    if (member->opcode() == HloOpcode::kFusion && member->fused_computation() != nullptr) {
      dead_computations.push_back(member->fused_computation());
    }
    RETURN_IF_ERROR(computation.RemoveInstruction(member));
  }
  for (HloComputation* dead : dead_computations) module.RemoveComputation(dead);
  if (keep_name) fused->set_name(kept_computation);
  return fusion;
}

bool InPlaceFusionKeepsForm(const HloInstruction& producer) {
  return producer.opcode() != HloOpcode::kFusion && producer.name().rfind("param_", 0) != 0;
}

StatusOr<HloInstruction*> FuseProducerInPlace(HloInstruction* producer, HloInstruction* fusion,
                                              bool duplicate) {
  HloComputation& computation = *fusion->parent();
  HloModule& module = *computation.parent();
  HloComputation& fused = *fusion->fused_computation();
  if (!InPlaceFusionKeepsForm(*producer) || producer->parent() != &computation ||
      fused.root_instruction()->opcode() == HloOpcode::kTuple ||
      fused.root_instruction()->opcode() == HloOpcode::kParameter) {
    return Error(fmt::format("%{} cannot grow in place by %{}", fusion->name(), producer->name()));
  }
  const FusionKind kind = PlannedKind(FusionPlan{.members = {producer, fusion}});
  // In this form the insertion order is the post-order BuildFusion walks.
  const std::vector<HloInstruction*> inner = fused.instructions();
  const std::vector<HloInstruction*> old_params = fused.parameter_instructions();

  // The outer values in the order a rebuild meets them (the producer's operands, then the
  // fusion's as its instructions read them) give the new parameter numbers; `sequence` is the new
  // instruction order: a parameter number, or an instruction (null for the producer's clone).
  std::vector<HloInstruction*> outer;
  std::unordered_map<const HloInstruction*, int64_t> number;
  std::vector<std::pair<HloInstruction*, int64_t>> sequence;
  auto number_of = [&](HloInstruction* value) {
    auto [it, added] = number.try_emplace(value, static_cast<int64_t>(outer.size()));
    if (added) {
      outer.push_back(value);
      sequence.push_back({nullptr, it->second});
    }
    return it->second;
  };
  for (HloInstruction* operand : producer->operands()) number_of(operand);
  sequence.push_back({nullptr, -1});
  // Operands that are parameters, as (user, operand index, new number or -1 for the producer),
  // read while the parameters still carry their old numbers.
  struct Rewire {
    HloInstruction* user;
    int64_t index;
    int64_t number;
  };
  std::vector<Rewire> rewires;
  for (HloInstruction* instruction : inner) {
    if (instruction->opcode() == HloOpcode::kParameter) continue;
    for (int64_t i = 0; i < instruction->operand_count(); ++i) {
      const HloInstruction* operand = instruction->operand(i);
      if (operand->opcode() != HloOpcode::kParameter) continue;
      HloInstruction* value = fusion->operand(operand->parameter_number());
      rewires.push_back({instruction, i, value == producer ? -1 : number_of(value)});
    }
    sequence.push_back({instruction, -1});
  }

  // Each parameter reading the same outer value as before stays; the others are new.
  std::vector<HloInstruction*> params(outer.size(), nullptr);
  for (int64_t k = 0; k < fusion->operand_count(); ++k) {
    auto it = number.find(fusion->operand(k));
    if (it != number.end() && params[it->second] == nullptr) params[it->second] = old_params[k];
  }
  for (size_t n = 0; n < outer.size(); ++n) {
    const std::string name = fmt::format("param_{}", n);
    if (params[n] == nullptr) {
      params[n] = fused.AddInstruction(
          HloInstruction::CreateParameter(static_cast<int64_t>(n), outer[n]->shape(), name),
          /*uniquify_name=*/false);
      continue;
    }
    params[n]->set_parameter_number(static_cast<int64_t>(n));
    params[n]->set_name(name);
    params[n]->set_shape(outer[n]->shape());
    module.ReserveInstructionName(name);
  }
  std::vector<HloInstruction*> clone_operands;
  for (HloInstruction* operand : producer->operands()) clone_operands.push_back(params[number.at(operand)]);
  auto clone = producer->CloneWithNewOperands(producer->shape(), clone_operands);
  if (duplicate) clone->set_name(module.UniqueInstructionName(producer->name()));
  HloInstruction* cloned = fused.AddInstruction(std::move(clone), /*uniquify_name=*/false);
  for (const Rewire& r : rewires) {
    r.user->ReplaceOperandWith(r.index, r.number < 0 ? cloned : params[r.number]);
  }
  for (HloInstruction* old : old_params) {
    if (old != nullptr && old->user_count() == 0 &&
        std::find(params.begin(), params.end(), old) == params.end()) {
      RETURN_IF_ERROR(fused.RemoveInstruction(old));
    }
  }
  std::vector<HloInstruction*> order;
  order.reserve(sequence.size());
  for (const auto& [instruction, n] : sequence) {
    order.push_back(instruction != nullptr ? instruction : n < 0 ? cloned : params[n]);
  }
  RETURN_IF_ERROR(fused.ReorderInstructions(order));

  // The fusion instruction, as a rebuild makes it: the fused computation's op_names (the
  // producer's first), the new operands, placed last in its computation and its fused computation
  // just before it. A rebuild would have asked for a fresh computation name before taking the old
  // one back; asking too keeps the names of later fusions the same.
  OpNameJoiner op_names;
  op_names.Add(producer->metadata.op_name);
  op_names.Add(fusion->metadata.op_name);
  fusion->metadata.op_name = op_names.Joined();
  fusion->fusion_kind = kind;
  fusion->DetachOperands();
  for (HloInstruction* value : outer) fusion->AppendOperand(value);
  (void)module.UniqueComputationName("fused_computation");
  module.MoveComputationBefore(&fused, &computation);
  computation.MoveInstructionToEnd(fusion);
  if (!duplicate) RETURN_IF_ERROR(computation.RemoveInstruction(producer));
  return fusion;
}

}  // namespace xlens
