#include "compiler/hlo/computation.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/hlo/module.h"

namespace xlens {

HloInstruction* HloComputation::AddInstruction(std::unique_ptr<HloInstruction> instruction,
                                               bool uniquify_name) {
  HloInstruction* instr = instruction.get();
  instr->set_parent(this);
  if (parent_ != nullptr) {
    if (instr->unique_id() < 0) instr->set_unique_id(parent_->NextUniqueId());
    if (uniquify_name) {
      instr->set_name(parent_->UniqueInstructionName(instr->name()));
    } else {
      parent_->ReserveInstructionName(instr->name());
    }
  }
  if (instr->opcode() == HloOpcode::kParameter) {
    int64_t n = instr->parameter_number();
    if (n >= static_cast<int64_t>(parameters_.size())) parameters_.resize(n + 1, nullptr);
    parameters_[n] = instr;
  }
  instructions_.push_back(std::move(instruction));
  return instr;
}

Status HloComputation::RemoveInstruction(HloInstruction* instruction) {
  if (instruction == root_) {
    return Error(fmt::format("cannot remove %{}: it is the root of %{}", instruction->name(), name_));
  }
  if (instruction->user_count() != 0) {
    return Error(fmt::format("cannot remove %{}: it still has {} user(s)", instruction->name(),
                             instruction->user_count()));
  }
  instruction->DetachOperands();
  instruction->DropAllControlDeps();
  if (instruction->opcode() == HloOpcode::kParameter) {
    auto& p = parameters_;
    for (auto& slot : p) {
      if (slot == instruction) slot = nullptr;
    }
  }
  auto it = std::find_if(instructions_.begin(), instructions_.end(),
                         [&](const auto& p) { return p.get() == instruction; });
  if (it == instructions_.end()) {
    return Error(fmt::format("%{} is not in computation %{}", instruction->name(), name_));
  }
  instructions_.erase(it);
  return OkStatus();
}

Status HloComputation::RemoveInstructionAndUnusedOperands(HloInstruction* instruction) {
  std::vector<HloInstruction*> worklist = {instruction};
  std::unordered_set<HloInstruction*> removed;
  while (!worklist.empty()) {
    HloInstruction* instr = worklist.back();
    worklist.pop_back();
    if (removed.count(instr) || instr->user_count() != 0 || instr == root_ ||
        instr->opcode() == HloOpcode::kParameter) {
      continue;
    }
    std::vector<HloInstruction*> operands = instr->operands();
    RETURN_IF_ERROR(RemoveInstruction(instr));
    removed.insert(instr);
    for (HloInstruction* op : operands) worklist.push_back(op);
  }
  return OkStatus();
}

Status HloComputation::ReplaceInstruction(HloInstruction* old, HloInstruction* replacement) {
  old->ReplaceAllUsesWith(replacement);
  return RemoveInstructionAndUnusedOperands(old);
}

std::vector<HloInstruction*> HloComputation::instructions() const {
  std::vector<HloInstruction*> out;
  out.reserve(instructions_.size());
  for (const auto& i : instructions_) out.push_back(i.get());
  return out;
}

std::vector<HloInstruction*> HloComputation::MakeInstructionPostOrder() const {
  std::vector<HloInstruction*> order;
  order.reserve(instructions_.size());
  std::unordered_set<const HloInstruction*> visited;
  // Iterative DFS: deep chains (100k instructions) must not overflow the stack.
  std::vector<std::pair<HloInstruction*, size_t>> stack;
  for (const auto& start : instructions_) {
    if (visited.count(start.get())) continue;
    stack.push_back({start.get(), 0});
    visited.insert(start.get());
    while (!stack.empty()) {
      auto& [instr, next] = stack.back();
      size_t n_ops = instr->operands().size();
      size_t n_total = n_ops + instr->control_predecessors().size();
      if (next < n_total) {
        HloInstruction* dep =
            next < n_ops ? instr->operand(next) : instr->control_predecessors()[next - n_ops];
        ++next;
        if (dep->parent() == this && !visited.count(dep)) {
          visited.insert(dep);
          stack.push_back({dep, 0});
        }
        continue;
      }
      order.push_back(instr);
      stack.pop_back();
    }
  }
  return order;
}

HloInstruction* HloComputation::GetInstructionWithName(std::string_view name) const {
  for (const auto& i : instructions_) {
    if (i->name() == name) return i.get();
  }
  return nullptr;
}

bool HloComputation::IsEntryComputation() const {
  return parent_ != nullptr && parent_->entry_computation() == this;
}

}  // namespace xlens
