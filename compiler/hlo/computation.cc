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
  instr->index_in_parent_ = static_cast<int64_t>(instructions_.size());
  instructions_.push_back(std::move(instruction));
  return instr;
}

void HloComputation::Compact() {
  if (removed_ == 0) return;
  std::erase_if(instructions_, [](const auto& p) { return p == nullptr; });
  for (size_t i = 0; i < instructions_.size(); ++i) {
    instructions_[i]->index_in_parent_ = static_cast<int64_t>(i);
  }
  removed_ = 0;
}

void HloComputation::MoveInstructionToEnd(HloInstruction* instruction) {
  const int64_t index = instruction->index_in_parent_;
  if (index + 1 == static_cast<int64_t>(instructions_.size())) return;
  std::unique_ptr<HloInstruction> owned = std::move(instructions_[index]);
  ++removed_;
  instruction->index_in_parent_ = static_cast<int64_t>(instructions_.size());
  instructions_.push_back(std::move(owned));
  if (removed_ > 16 && 2 * removed_ > static_cast<int64_t>(instructions_.size())) Compact();
}

Status HloComputation::ReorderInstructions(const std::vector<HloInstruction*>& order) {
  Compact();
  if (order.size() != instructions_.size()) {
    return Error(fmt::format("reordering %{}: {} instructions given for {}", name_, order.size(),
                             instructions_.size()));
  }
  std::vector<std::unique_ptr<HloInstruction>> reordered(order.size());
  int64_t parameters = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    HloInstruction* instr = order[i];
    if (instr->parent() != this || instructions_[instr->index_in_parent_].get() != instr) {
      return Error(fmt::format("reordering %{}: %{} is not in it or given twice", name_,
                               instr->name()));
    }
    reordered[i] = std::move(instructions_[instr->index_in_parent_]);
    if (instr->opcode() == HloOpcode::kParameter) ++parameters;
  }
  instructions_ = std::move(reordered);
  parameters_.assign(parameters, nullptr);
  for (size_t i = 0; i < instructions_.size(); ++i) {
    HloInstruction* instr = instructions_[i].get();
    instr->index_in_parent_ = static_cast<int64_t>(i);
    if (instr->opcode() != HloOpcode::kParameter) continue;
    const int64_t n = instr->parameter_number();
    if (n < 0 || n >= parameters || parameters_[n] != nullptr) {
      return Error(fmt::format("reordering %{}: parameter numbers are not 0..{}", name_,
                               parameters - 1));
    }
    parameters_[n] = instr;
  }
  for (const auto& instr : instructions_) instr->users_.clear();
  for (const auto& instr : instructions_) {
    for (HloInstruction* operand : instr->operands_) {
      if (operand->parent_ == this) operand->AddUser(instr.get());
    }
  }
  return OkStatus();
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
  const int64_t index = instruction->index_in_parent_;
  if (instruction->parent() != this || index < 0 ||
      index >= static_cast<int64_t>(instructions_.size()) ||
      instructions_[index].get() != instruction) {
    return Error(fmt::format("%{} is not in computation %{}", instruction->name(), name_));
  }
  instructions_[index].reset();
  ++removed_;
  if (removed_ > 16 && 2 * removed_ > static_cast<int64_t>(instructions_.size())) Compact();
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
  out.reserve(instructions_.size() - removed_);
  for (const auto& i : instructions_) {
    if (i != nullptr) out.push_back(i.get());
  }
  return out;
}

std::vector<HloInstruction*> HloComputation::MakeInstructionPostOrder() const {
  std::vector<HloInstruction*> order;
  order.reserve(instructions_.size());
  // Visited marks by slot: a hash set here costs more than the walk itself.
  std::vector<bool> visited(instructions_.size(), false);
  // Iterative DFS: deep chains (100k instructions) must not overflow the stack.
  std::vector<std::pair<HloInstruction*, size_t>> stack;
  for (const auto& start : instructions_) {
    if (start == nullptr || visited[start->index_in_parent_]) continue;
    stack.push_back({start.get(), 0});
    visited[start->index_in_parent_] = true;
    while (!stack.empty()) {
      auto& [instr, next] = stack.back();
      size_t n_ops = instr->operands().size();
      size_t n_total = n_ops + instr->control_predecessors().size();
      if (next < n_total) {
        HloInstruction* dep =
            next < n_ops ? instr->operand(next) : instr->control_predecessors()[next - n_ops];
        ++next;
        if (dep->parent() == this && !visited[dep->index_in_parent_]) {
          visited[dep->index_in_parent_] = true;
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
    if (i != nullptr && i->name() == name) return i.get();
  }
  return nullptr;
}

bool HloComputation::IsEntryComputation() const {
  return parent_ != nullptr && parent_->entry_computation() == this;
}

}  // namespace xlens
