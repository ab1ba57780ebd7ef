#include "compiler/passes/early_result_schedule.h"

#include <unordered_set>

#include "compiler/hlo/instruction.h"

namespace xlens {
namespace {

// Whether `instr` is read by the root tuple alone (and by something).
bool IsResultOnly(const HloInstruction& instr, const HloInstruction& root) {
  if (&instr == &root || instr.users().empty()) return false;
  for (const HloInstruction* user : instr.users()) {
    if (user != &root) return false;
  }
  return true;
}

}  // namespace

std::vector<HloInstruction*> EarlyResultSchedule(const HloComputation& computation) {
  const std::vector<HloInstruction*> post_order = computation.MakeInstructionPostOrder();
  const HloInstruction* root = computation.root_instruction();
  if (root == nullptr || root->opcode() != HloOpcode::kTuple) return post_order;
  std::vector<HloInstruction*> order;
  order.reserve(post_order.size());
  std::unordered_set<const HloInstruction*> done;
  auto ready = [&](const HloInstruction& instr) {
    for (const HloInstruction* operand : instr.operands()) {
      if (!done.count(operand)) return false;
    }
    for (const HloInstruction* predecessor : instr.control_predecessors()) {
      if (!done.count(predecessor)) return false;
    }
    return true;
  };
  auto emit = [&](HloInstruction* instr) {
    order.push_back(instr);
    done.insert(instr);
  };
  for (HloInstruction* instr : post_order) {
    if (done.count(instr)) continue;
    emit(instr);
    // The results this one made ready. A result is read by the root alone, so running one
    // readies no other.
    for (HloInstruction* user : instr->users()) {
      if (!done.count(user) && IsResultOnly(*user, *root) && ready(*user)) emit(user);
    }
    for (HloInstruction* successor : instr->control_successors()) {
      if (!done.count(successor) && IsResultOnly(*successor, *root) && ready(*successor)) emit(successor);
    }
  }
  return order;
}

}  // namespace xlens
