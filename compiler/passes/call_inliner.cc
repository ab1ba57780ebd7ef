#include "compiler/passes/call_inliner.h"

#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>

namespace xlens {
namespace {

bool IsComposite(const HloInstruction& call) {
  const std::string* composite = call.raw_attribute("is_composite");
  return composite != nullptr && *composite == "true";
}

// Clones the callee of `call` into the caller and replaces the call by the cloned root. The
// calls among the clones are appended to `cloned_calls`.
Status Inline(HloInstruction* call, std::vector<HloInstruction*>& cloned_calls) {
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
    HloInstruction* clone =
        caller->AddInstruction(instruction->CloneWithNewOperands(instruction->shape(), operands));
    if (clone->opcode() == HloOpcode::kCall) cloned_calls.push_back(clone);
    clone_of[instruction] = clone;
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

bool CallInliner::Inlinable(const HloInstruction& call) const {
  const HloComputation* callee = call.to_apply();
  return callee != nullptr && callee->root_instruction() != nullptr &&
         callee->execution_thread() == call.parent()->execution_thread() &&
         call.control_predecessors().empty() && call.control_successors().empty() &&
         !(preserve_composites_ && IsComposite(call));
}

StatusOr<bool> CallInliner::Run(HloModule& module) {
  bool changed = false;
  // Top down, callers first: each computation inlines its calls, and the calls its clones bring
  // along, until none is left; then the computations it still applies otherwise (loop bodies,
  // reducers, branches) are visited. A computation reached only through inlined calls is never
  // visited: it is dead, and inlining into it would copy each level of a chain of N nested calls
  // once per level (N^2 instructions; 5,000 levels needed gigabytes). Computations the entry does
  // not reach are dead already and left to dce (a module without an entry: every computation is
  // a root).
  std::vector<HloComputation*> roots;
  if (HloComputation* entry = module.entry_computation()) {
    roots.push_back(entry);
  } else {
    for (HloComputation* computation : module.computations()) roots.push_back(computation);
  }

  std::unordered_set<const HloComputation*> visited;
  for (HloComputation* root : roots) {
    if (!visited.insert(root).second) continue;
    std::deque<HloComputation*> queue = {root};
    while (!queue.empty()) {
      HloComputation* computation = queue.front();
      queue.pop_front();
      if (!computation->IsFusionComputation()) {
        std::vector<HloInstruction*> calls;
        for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
          if (instruction->opcode() == HloOpcode::kCall) calls.push_back(instruction);
        }
        // In order: a call's clones are appended behind the calls already found.
        for (size_t i = 0; i < calls.size(); ++i) {
          if (!Inlinable(*calls[i])) continue;
          RETURN_IF_ERROR(Inline(calls[i], calls));
          changed = true;
        }
      }
      for (const HloInstruction* instruction : computation->instructions()) {
        for (HloComputation* callee : instruction->called_computations()) {
          if (callee != nullptr && visited.insert(callee).second) queue.push_back(callee);
        }
      }
    }
  }
  return changed;
}

}  // namespace xlens
