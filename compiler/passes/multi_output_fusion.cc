#include "compiler/passes/multi_output_fusion.h"

#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace xlens {

namespace {

bool IsTupleRootedFusion(const HloInstruction& instruction) {
  return instruction.opcode() == HloOpcode::kFusion &&
         instruction.fused_computation()->root_instruction()->opcode() == HloOpcode::kTuple;
}

// A kernel this pass may merge with another.
bool IsMergeable(const HloInstruction& instruction) {
  if (!instruction.control_predecessors().empty() ||
      !instruction.control_successors().empty()) {
    return false;
  }
  switch (instruction.opcode()) {
    case HloOpcode::kFusion: {
      if (instruction.fused_computation() == nullptr ||
          (instruction.fusion_kind != FusionKind::kLoop &&
           instruction.fusion_kind != FusionKind::kInput) ||
          HasDotOrConvolution(instruction)) {
        return false;
      }
      if (instruction.shape().IsArray()) return true;
      // A multi-output fusion: every user reads one output.
      return IsTupleRootedFusion(instruction) &&
             std::all_of(instruction.users().begin(), instruction.users().end(),
                         [](auto* u) { return u->opcode() == HloOpcode::kGetTupleElement; });
    }
    case HloOpcode::kReduce:
      return instruction.shape().IsArray();
    case HloOpcode::kConstant: case HloOpcode::kIota:
      return false;
    default:
      return IsLoopFusible(instruction) && instruction.operand_count() > 0;
  }
}

const HloInstruction* FirstReduce(const HloInstruction& instruction) {
  if (instruction.opcode() == HloOpcode::kReduce) return &instruction;
  if (instruction.opcode() != HloOpcode::kFusion) return nullptr;
  for (const HloInstruction* inner : instruction.fused_computation()->MakeInstructionPostOrder()) {
    if (inner->opcode() == HloOpcode::kReduce) return inner;
  }
  return nullptr;
}

// The shape a kernel's threads walk: a reduction's input, a loop kernel's (first) output.
const Shape& IterationShape(const HloInstruction& instruction) {
  if (const HloInstruction* reduce = FirstReduce(instruction)) return reduce->operand(0)->shape();
  if (IsTupleRootedFusion(instruction)) {
    return instruction.fused_computation()->root_instruction()->operand(0)->shape();
  }
  return instruction.shape();
}

std::string IterationMismatch(const HloInstruction& a, const HloInstruction& b) {
  const Shape& sa = IterationShape(a);
  const Shape& sb = IterationShape(b);
  if (!sa.IsArray() || !sb.IsArray() || !shape_util::SameDimensions(sa, sb)) {
    return fmt::format("{} iterates over {} and {} over {}; one kernel needs one iteration space",
                       a.name(), sa.ToString(false), b.name(), sb.ToString(false));
  }
  const HloInstruction* ra = FirstReduce(a);
  const HloInstruction* rb = FirstReduce(b);
  if (ra != nullptr && rb != nullptr) {
    std::vector<int64_t> da = ra->dimensions(), db = rb->dimensions();
    std::sort(da.begin(), da.end());
    std::sort(db.begin(), db.end());
    if (da != db) {
      return fmt::format("{} and {} reduce different dimensions", a.name(), b.name());
    }
  }
  return "";
}

// The operands of `consumer` that read `producer`: the producer itself or, for a multi-output
// producer, its get-tuple-elements.
std::vector<int64_t> ReadsOf(const HloInstruction& consumer, const HloInstruction& producer) {
  std::vector<int64_t> out;
  for (int64_t i = 0; i < consumer.operand_count(); ++i) {
    const HloInstruction* operand = consumer.operand(i);
    if (operand == &producer || (operand->opcode() == HloOpcode::kGetTupleElement &&
                                 operand->operand(0) == &producer)) {
      out.push_back(i);
    }
  }
  return out;
}

// Where `producer` would land inside `consumer`: the instructions that read it there.
std::vector<const HloInstruction*> UseSites(const HloInstruction& producer,
                                            const HloInstruction& consumer) {
  if (consumer.opcode() != HloOpcode::kFusion) return {&consumer};
  std::vector<const HloInstruction*> sites;
  for (int64_t i : ReadsOf(consumer, producer)) {
    for (const HloInstruction* user : consumer.fused_computation()->parameter_instruction(i)->users()) {
      sites.push_back(user);
    }
  }
  return sites;
}

// Only element-by-element readers may take it into a reduction's kernel.
bool FeedsOnlyFusibleUses(const HloInstruction& producer, const HloInstruction& consumer) {
  for (const HloInstruction* user : UseSites(producer, consumer)) {
    if (!IsLoopFusible(*user) && user->opcode() != HloOpcode::kReduce &&
        user->opcode() != HloOpcode::kTuple) {
      return false;
    }
  }
  return true;
}

// In a loop kernel the producer's outputs are written at the loop's index, so the consumer must
// read them there too: through elementwise ops over the whole iteration space (or as outputs
// passed through). A broadcast, transpose or slice of them would compute the producer a second
// time at other indices.
bool ReadsInPlace(const HloInstruction& producer, const HloInstruction& consumer,
                  const Shape& iteration) {
  for (const HloInstruction* user : UseSites(producer, consumer)) {
    if (user->opcode() == HloOpcode::kTuple) continue;
    if (!user->IsElementwise() || !shape_util::SameDimensions(user->shape(), iteration)) {
      return false;
    }
  }
  return true;
}

// Every output of the kernel has the same dimensions, so that the emitter writes them all from
// one loop.
bool HasOneLoop(const HloInstruction& instruction) {
  if (!IsTupleRootedFusion(instruction)) return instruction.shape().IsArray();
  const HloInstruction* root = instruction.fused_computation()->root_instruction();
  for (const HloInstruction* out : root->operands()) {
    if (!out->shape().IsArray() ||
        !shape_util::SameDimensions(out->shape(), root->operand(0)->shape())) {
      return false;
    }
  }
  return true;
}

// The users of `producer`'s outputs besides `consumer`, the computation's root counted as one.
int64_t OtherReaders(const HloInstruction& producer, const HloInstruction& consumer) {
  int64_t others = producer.IsRoot() ? 1 : 0;
  for (const HloInstruction* user : producer.users()) {
    if (user == &consumer) continue;
    if (user->opcode() != HloOpcode::kGetTupleElement) {
      ++others;
      continue;
    }
    others += user->IsRoot() ? 1 : 0;
    for (const HloInstruction* reader : user->users()) others += reader != &consumer;
  }
  return others;
}

// A kernel this small beside the siblings' iteration space (at most 1/16 of its elements in each
// output and each operand) is taken into their merge when it lies on a path between them: the
// merged kernel computes it once, between the sweeps, where two kernels would each sweep the
// shared array. Batch norm's rsqrt(var + eps) over 128 channels lies between the variance and the
// sums and outputs that read it, beside an iteration space of 3.2M elements.
constexpr int64_t kBridgeRatio = 16;
// At most this many such kernels join one merge.
constexpr int kMaxBridges = 4;

int64_t LargestLeaf(const Shape& shape) {
  int64_t largest = 0;
  shape.ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
    if (leaf.IsArray()) largest = std::max(largest, leaf.num_elements());
  });
  return largest;
}

bool IsSmallBridge(const HloInstruction& instruction, const Shape& iteration) {
  if (!IsMergeable(instruction) || !iteration.IsArray()) return false;
  const int64_t limit = iteration.num_elements() / kBridgeRatio;
  if (LargestLeaf(instruction.shape()) > limit) return false;
  return std::all_of(instruction.operands().begin(), instruction.operands().end(),
                     [&](const HloInstruction* operand) {
                       return LargestLeaf(operand->shape()) <= limit;
                     });
}

}  // namespace

// A refused pair stays refused for the rest of the run: merges elsewhere only add paths (a cycle
// stays a cycle), fusions only grow, and iteration spaces do not change. Skipping it saves the
// cycle search each time the scan starts over after a merge.
bool MultiOutputFusion::WasRefused(const HloInstruction& producer,
                                   const HloInstruction& consumer) const {
  return refused_.count(producer.name() + "\n" + consumer.name()) > 0;
}

void MultiOutputFusion::Refuse(const HloInstruction& producer, const HloInstruction& consumer,
                               std::string reason) {
  if (!refused_.insert(producer.name() + "\n" + consumer.name()).second) return;
  decisions_.push_back({producer.name(), consumer.name(), false, std::move(reason), "", "",
                        DecisionSource(producer)});
}

StatusOr<bool> MultiOutputFusion::TryMerge(HloInstruction* into, HloInstruction* other,
                                           std::string note,
                                           const TopologicalPositions& positions,
                                           bool take_bridges) {
  FusionPlan plan;
  plan.members = {other, into};
  plan.keep_name_of = into->opcode() == HloOpcode::kFusion    ? into
                      : other->opcode() == HloOpcode::kFusion ? other
                                                              : nullptr;
  std::vector<std::string> bridges;
  while (const HloInstruction* witness = FindCycleWitness(plan, &positions)) {
    HloInstruction* bridge = const_cast<HloInstruction*>(witness);
    if (!take_bridges || bridges.size() >= kMaxBridges ||
        !IsSmallBridge(*bridge, IterationShape(*into))) {
      Refuse(*other, *into,
             fmt::format("merging would create a cycle: {} lies on a path from one to the other",
                         witness->name()));
      return false;
    }
    plan.members.push_back(bridge);
    bridges.push_back(bridge->name());
  }
  if (!bridges.empty()) {
    note += fmt::format(", with {} between them ({} at most 1/{} of the iteration space)",
                        fmt::join(bridges, ", "), bridges.size() == 1 ? "small:" : "each",
                        kBridgeRatio);
  }
  const FusionFootprint footprint = EstimateFusion(plan);
  if (footprint.instructions > limits_.max_instructions ||
      footprint.operands + footprint.outputs > limits_.max_operands) {
    Refuse(*other, *into,
           fmt::format("the fusion would hold {} instructions, {} operands and {} outputs, over "
                       "the limits of {} instructions and {} operands and outputs",
                       footprint.instructions, footprint.operands, footprint.outputs,
                       limits_.max_instructions, limits_.max_operands));
    return false;
  }
  FusionDecision decision{other->name(), into->name(), true, note,
                          std::string(FusionKindString(PlannedKind(plan))), "",
                          DecisionSource(*other)};
  ASSIGN_OR_RETURN(HloInstruction* fusion, BuildFusion(plan));
  decision.fusion = fusion->name();
  decisions_.push_back(std::move(decision));
  return true;
}

StatusOr<bool> MultiOutputFusion::MergeProducerIntoConsumer(HloComputation& computation,
                                                            bool widened) {
  // Each call merges at most once and returns, so the numbering stays exact while it is used.
  const TopologicalPositions positions = PostOrderPositions(computation);
  for (HloInstruction* consumer : computation.MakeInstructionPostOrder()) {
    if (!IsMergeable(*consumer)) continue;
    const bool reduction = HasReduction(*consumer);
    if (!reduction && !HasOneLoop(*consumer)) continue;
    const Shape& iteration = IterationShape(*consumer);
    std::vector<HloInstruction*> producers;
    for (HloInstruction* operand : consumer->operands()) {
      HloInstruction* producer = operand->opcode() == HloOpcode::kGetTupleElement
                                     ? operand->operand(0)
                                     : operand;
      if (std::find(producers.begin(), producers.end(), producer) == producers.end()) {
        producers.push_back(producer);
      }
    }
    for (HloInstruction* producer : producers) {
      if (!IsMergeable(*producer) || HasReduction(*producer) || !HasOneLoop(*producer)) continue;
      // The first pass takes array producers into reductions alone; loop consumers and
      // multi-output producers wait until those and the siblings are merged.
      if (widened == (reduction && producer->shape().IsArray())) continue;
      // A producer read by the consumer alone was left to instruction fusion; a multi-output
      // one loses outputs that only the consumer reads.
      const int64_t others = OtherReaders(*producer, *consumer);
      if (producer->shape().IsArray() && others == 0) continue;
      if (!shape_util::SameDimensions(IterationShape(*producer), iteration)) continue;
      if (reduction ? !FeedsOnlyFusibleUses(*producer, *consumer)
                    : !ReadsInPlace(*producer, *consumer, iteration)) {
        continue;
      }
      if (WasRefused(*producer, *consumer)) continue;
      ASSIGN_OR_RETURN(bool merged,
                       TryMerge(consumer, producer,
                                fmt::format("its {} other users read it as an output", others),
                                positions));
      if (merged) return true;
    }
  }
  return false;
}

StatusOr<bool> MultiOutputFusion::MergeSiblings(HloComputation& computation) {
  const TopologicalPositions positions = PostOrderPositions(computation);
  for (HloInstruction* shared : computation.MakeInstructionPostOrder()) {
    // Sharing a scalar or a constant saves no memory traffic worth a merge.
    if (!shared->shape().IsArray() || shared->shape().num_elements() <= 1 ||
        shared->opcode() == HloOpcode::kConstant || shared->user_count() < 2) {
      continue;
    }
    std::vector<HloInstruction*> siblings;
    for (HloInstruction* user : shared->users()) {
      if (IsMergeable(*user)) siblings.push_back(user);
    }
    for (size_t i = 0; i < siblings.size(); ++i) {
      for (size_t j = i + 1; j < siblings.size(); ++j) {
        HloInstruction* a = siblings[i];
        HloInstruction* b = siblings[j];
        if (WasRefused(*b, *a)) continue;
        if (std::string mismatch = IterationMismatch(*a, *b); !mismatch.empty()) {
          Refuse(*b, *a, mismatch);
          continue;
        }
        ASSIGN_OR_RETURN(bool merged,
                         TryMerge(a, b, fmt::format("siblings reading {}", shared->name()),
                                  positions, /*take_bridges=*/true));
        if (merged) return true;
      }
    }
  }
  return false;
}

StatusOr<bool> MultiOutputFusion::Run(HloModule& module) {
  decisions_.clear();
  refused_.clear();
  bool changed = false;
  for (HloComputation* computation : FusibleComputations(module)) {
    for (bool merged = true; merged;) {
      // Merges into reductions and between siblings first: they read the big arrays the
      // reductions sweep, and a merge into a loop kernel taken earlier could close the path
      // (a cycle) that one of them needs.
      ASSIGN_OR_RETURN(merged, MergeProducerIntoConsumer(*computation, /*widened=*/false));
      if (!merged) {
        ASSIGN_OR_RETURN(merged, MergeSiblings(*computation));
      }
      if (!merged) {
        ASSIGN_OR_RETURN(merged, MergeProducerIntoConsumer(*computation, /*widened=*/true));
      }
      changed = changed || merged;
    }
  }
  return changed;
}

}  // namespace xlens
