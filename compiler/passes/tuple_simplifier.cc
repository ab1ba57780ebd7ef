#include "compiler/passes/tuple_simplifier.h"

#include <unordered_set>
#include <vector>

namespace xlens {
namespace {

bool HasControlDeps(const HloInstruction& instruction) {
  return !instruction.control_predecessors().empty() ||
         !instruction.control_successors().empty();
}

// What `instruction` can be replaced by, or nullptr.
HloInstruction* Replacement(const HloInstruction& instruction) {
  if (instruction.opcode() == HloOpcode::kGetTupleElement) {
    const HloInstruction* tuple = instruction.operand(0);
    const int64_t index = instruction.tuple_index();
    if (tuple->opcode() != HloOpcode::kTuple || index < 0 || index >= tuple->operand_count()) {
      return nullptr;
    }
    return tuple->operand(index);
  }
  if (instruction.opcode() == HloOpcode::kTuple && instruction.operand_count() > 0) {
    HloInstruction* source = nullptr;
    for (int64_t i = 0; i < instruction.operand_count(); ++i) {
      const HloInstruction* element = instruction.operand(i);
      if (element->opcode() != HloOpcode::kGetTupleElement || element->tuple_index() != i) {
        return nullptr;
      }
      if (source != nullptr && element->operand(0) != source) return nullptr;
      source = element->operand(0);
    }
    if (!source->shape().IsTuple() ||
        source->shape().tuple_shapes_size() != instruction.operand_count()) {
      return nullptr;
    }
    return source;
  }
  return nullptr;
}

}  // namespace

StatusOr<bool> TupleSimplifier::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    std::unordered_set<const HloInstruction*> removed;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (removed.contains(instruction) || HasControlDeps(*instruction)) continue;
      HloInstruction* replacement = Replacement(*instruction);
      // Exact shapes, layouts included: the replacement takes over every use.
      if (replacement == nullptr || !(replacement->shape() == instruction->shape())) continue;
      instruction->ReplaceAllUsesWith(replacement);
      changed = true;
      // Remove it, then the tuples and get-tuple-elements that only it used.
      std::vector<HloInstruction*> dead = {instruction};
      while (!dead.empty()) {
        HloInstruction* candidate = dead.back();
        dead.pop_back();
        if (removed.contains(candidate) || candidate->user_count() != 0 || candidate->IsRoot() ||
            HasControlDeps(*candidate) ||
            (candidate->opcode() != HloOpcode::kTuple &&
             candidate->opcode() != HloOpcode::kGetTupleElement)) {
          continue;
        }
        for (HloInstruction* operand : candidate->operands()) dead.push_back(operand);
        RETURN_IF_ERROR(computation->RemoveInstruction(candidate));
        removed.insert(candidate);
      }
    }
  }
  return changed;
}

}  // namespace xlens
