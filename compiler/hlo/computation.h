// HloComputation: a named DAG of instructions with one root, owned by an HloModule. A fused
// computation belongs to the module too and knows the fusion instruction that calls it.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens {

class HloModule;

class HloComputation {
 public:
  explicit HloComputation(std::string name) : name_(std::move(name)) {}
  HloComputation(const HloComputation&) = delete;
  HloComputation& operator=(const HloComputation&) = delete;

  const std::string& name() const { return name_; }
  // Renames; the module's name index follows (defined in module.cc).
  void set_name(std::string name);
  HloModule* parent() const { return parent_; }
  void set_parent(HloModule* module) { parent_ = module; }

  // Takes ownership and gives the instruction an id. With `uniquify_name` (what passes want) the
  // name is made module-unique by a ".N" suffix, as XLA does; the parser keeps names as written.
  HloInstruction* AddInstruction(std::unique_ptr<HloInstruction> instruction,
                                 bool uniquify_name = true);
  // Removes an instruction that has no users and is not the root. Its operands lose it as a user.
  Status RemoveInstruction(HloInstruction* instruction);
  // Removes `instruction` and then every operand that became dead (not parameters).
  Status RemoveInstructionAndUnusedOperands(HloInstruction* instruction);
  // Replaces all uses of `old` by `replacement` (and the root), then removes `old`.
  Status ReplaceInstruction(HloInstruction* old, HloInstruction* replacement);

  HloInstruction* root_instruction() const { return root_; }
  void set_root_instruction(HloInstruction* root) { root_ = root; }

  // Parameters by number (entries may be null while a computation is being built).
  int64_t num_parameters() const { return static_cast<int64_t>(parameters_.size()); }
  HloInstruction* parameter_instruction(int64_t i) const { return parameters_[i]; }
  const std::vector<HloInstruction*>& parameter_instructions() const { return parameters_; }

  int64_t instruction_count() const {
    return static_cast<int64_t>(instructions_.size()) - removed_;
  }
  // Instructions in insertion order.
  std::vector<HloInstruction*> instructions() const;
  // Whether `pred` holds for any instruction, asked in insertion order without copying the list.
  template <typename Pred>
  bool AnyInstruction(Pred pred) const {
    for (const auto& i : instructions_) {
      if (i != nullptr && pred(*i)) return true;
    }
    return false;
  }
  // Moves `instruction` to the end of the insertion order, where AddInstruction puts a new one.
  void MoveInstructionToEnd(HloInstruction* instruction);
  // Makes `order` (every instruction of the computation exactly once) the insertion order,
  // rebuilds the parameter list from the parameters' numbers (a caller may renumber them first)
  // and lists every instruction's users in that order, as adding them in it would have.
  Status ReorderInstructions(const std::vector<HloInstruction*>& order);
  // Operands (and control predecessors) before users; unreachable instructions included; stable
  // for an already-ordered computation, so printing is a fixed point.
  std::vector<HloInstruction*> MakeInstructionPostOrder() const;

  // The instruction called `name`, or nullptr.
  HloInstruction* GetInstructionWithName(std::string_view name) const;

  bool IsEntryComputation() const;
  bool IsFusionComputation() const { return fusion_instruction_ != nullptr; }
  HloInstruction* FusionInstruction() const { return fusion_instruction_; }
  void SetFusionInstruction(HloInstruction* fusion) { fusion_instruction_ = fusion; }

  // `execution_thread="..."` written after the closing brace; empty for the main thread.
  const std::string& execution_thread() const { return execution_thread_; }
  void set_execution_thread(std::string thread) { execution_thread_ = std::move(thread); }

  // The computation as text (signature, instructions, closing brace). Defined in printer.cc.
  std::string ToString(bool short_form = false) const;

 private:
  std::string name_;
  HloModule* parent_ = nullptr;
  // Drops the empty slots removed instructions left, renumbering the others' slots.
  void Compact();

  // In insertion order. A removed instruction leaves an empty slot (removal by a search and an
  // erase would make a pass that removes many instructions quadratic); the slots are compacted
  // once they are half of the list.
  std::vector<std::unique_ptr<HloInstruction>> instructions_;
  int64_t removed_ = 0;  // empty slots in instructions_
  std::vector<HloInstruction*> parameters_;
  HloInstruction* root_ = nullptr;
  HloInstruction* fusion_instruction_ = nullptr;
  std::string execution_thread_;
};

}  // namespace xlens
