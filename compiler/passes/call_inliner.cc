#include "compiler/passes/call_inliner.h"

#include <unordered_map>
#include <vector>

#include <fmt/format.h>

namespace xlens {
namespace {

bool IsComposite(const HloInstruction& call) {
  const std::string* composite = call.raw_attribute("is_composite");
  return composite != nullptr && *composite == "true";
}

// Clones the callee of `call` into the caller and replaces the call by the cloned root.
Status Inline(HloInstruction* call) {
  HloComputation* caller = call->parent();
  const HloComputation* callee = call->to_apply();
  std::unordered_map<const HloInstruction*, HloInstruction*> clone_of;
  for (HloInstruction* instruction : callee->MakeInstructionPostOrder()) {
    if (instruction->opcode() == HloOpcode::kParameter) {
      const int64_t number = instruction->parameter_number();
      if (number < 0 || number >= call->operand_count()) {
        return Error(fmt::format("%{} calls %{} with {} operands, but it has parameter {}",
                                 call->name(), callee->name(), call->operand_count(), number));
      }
      clone_of[instruction] = call->operand(number);
      continue;
    }
    std::vector<HloInstruction*> operands;
    for (const HloInstruction* operand : instruction->operands()) {
      operands.push_back(clone_of.at(operand));
    }
    clone_of[instruction] =
        caller->AddInstruction(instruction->CloneWithNewOperands(instruction->shape(), operands));
  }
  for (HloInstruction* instruction : callee->instructions()) {
    for (HloInstruction* successor : instruction->control_successors()) {
      clone_of.at(instruction)->AddControlDependencyTo(clone_of.at(successor));
    }
  }
  call->ReplaceAllUsesWith(clone_of.at(callee->root_instruction()));
  return caller->RemoveInstruction(call);
}

}  // namespace

StatusOr<bool> CallInliner::Run(HloModule& module) {
  bool changed = false;
  // Inlining copies the callee's own calls into the caller; sweep until none is left. HLO has no
  // recursion, so this ends after at most the depth of the call graph.
  for (bool inlined = true; inlined;) {
    inlined = false;
    for (HloComputation* computation : module.computations()) {
      if (computation->IsFusionComputation()) continue;
      for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
        if (instruction->opcode() != HloOpcode::kCall) continue;
        const HloComputation* callee = instruction->to_apply();
        if (callee == nullptr || callee->root_instruction() == nullptr ||
            callee->execution_thread() != computation->execution_thread() ||
            !instruction->control_predecessors().empty() ||
            !instruction->control_successors().empty() ||
            (preserve_composites_ && IsComposite(*instruction))) {
          continue;
        }
        RETURN_IF_ERROR(Inline(instruction));
        inlined = changed = true;
      }
    }
  }
  return changed;
}

}  // namespace xlens
