#include "compiler/passes/dce.h"

#include <unordered_set>
#include <vector>

namespace xlens {

bool HasSideEffect(const HloInstruction& instruction) {
  switch (instruction.opcode()) {
    case HloOpcode::kSend: case HloOpcode::kSendDone: case HloOpcode::kRecv:
    case HloOpcode::kRecvDone: case HloOpcode::kInfeed: case HloOpcode::kOutfeed:
    case HloOpcode::kRng: case HloOpcode::kRngGetAndUpdateState: case HloOpcode::kAfterAll:
    case HloOpcode::kAllReduce: case HloOpcode::kAllGather: case HloOpcode::kAllToAll:
    case HloOpcode::kCollectivePermute: case HloOpcode::kReduceScatter:
    case HloOpcode::kAllReduceStart: case HloOpcode::kAllReduceDone:
    case HloOpcode::kAllGatherStart: case HloOpcode::kAllGatherDone:
    case HloOpcode::kCollectivePermuteStart: case HloOpcode::kCollectivePermuteDone:
    case HloOpcode::kAsyncStart: case HloOpcode::kAsyncUpdate: case HloOpcode::kAsyncDone:
    case HloOpcode::kCopyStart: case HloOpcode::kCopyDone: case HloOpcode::kDomain:
    case HloOpcode::kAddDependency: case HloOpcode::kOptimizationBarrier:
      return true;
    case HloOpcode::kCustomCall: {
      const std::string* side_effect = instruction.raw_attribute("custom_call_has_side_effect");
      return side_effect != nullptr && *side_effect == "true";
    }
    default:
      return false;
  }
}

StatusOr<bool> HloDce::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    // Users before operands, so one sweep removes whole dead chains.
    std::vector<HloInstruction*> order = computation->MakeInstructionPostOrder();
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      HloInstruction* instr = *it;
      if (instr->user_count() != 0 || instr == computation->root_instruction() ||
          instr->opcode() == HloOpcode::kParameter || HasSideEffect(*instr) ||
          !instr->control_successors().empty()) {
        continue;
      }
      RETURN_IF_ERROR(computation->RemoveInstruction(instr));
      changed = true;
    }
  }
  // Computations the entry does not reach are dead. One walk from the entry finds the live ones:
  // peeling uncalled computations round by round instead took one round per level of a dead
  // chain (5,000 nested calls left by the call-inliner: 5,000 rounds over every computation).
  if (const HloComputation* entry = module.entry_computation()) {
    std::unordered_set<const HloComputation*> live = {entry};
    std::vector<const HloComputation*> stack = {entry};
    while (!stack.empty()) {
      const HloComputation* computation = stack.back();
      stack.pop_back();
      for (const HloInstruction* instr : computation->instructions()) {
        for (const HloComputation* callee : instr->called_computations()) {
          if (callee != nullptr && live.insert(callee).second) stack.push_back(callee);
        }
      }
    }
    for (HloComputation* computation : module.computations()) {
      if (!live.contains(computation)) {
        module.RemoveComputation(computation);
        changed = true;
      }
    }
    return changed;
  }
  // No entry: computations no instruction calls are dead; removing one can make its callees dead.
  for (bool removed = true; removed;) {
    removed = false;
    std::unordered_set<const HloComputation*> called;
    for (HloComputation* computation : module.computations()) {
      for (HloInstruction* instr : computation->instructions()) {
        for (HloComputation* callee : instr->called_computations()) called.insert(callee);
      }
    }
    for (HloComputation* computation : module.computations()) {
      if (!called.count(computation)) {
        module.RemoveComputation(computation);
        removed = changed = true;
      }
    }
  }
  return changed;
}

}  // namespace xlens
