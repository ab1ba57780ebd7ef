// HloModule: owns computations; one of them is the entry. Keeps the header attributes of the
// text (entry_computation_layout, is_scheduled, input_output_alias, ...) so dumps print back.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "compiler/hlo/computation.h"

namespace xlens {

class StackFrameTable;  // stack_frames.h

struct ComputationLayout {
  std::vector<Shape> parameters;
  Shape result;
  std::string ToString() const;  // "(f32[2]{0}, s32[])->f32[2]{0}"
};

class HloModule {
 public:
  explicit HloModule(std::string name) : name_(std::move(name)) {}
  HloModule(const HloModule&) = delete;
  HloModule& operator=(const HloModule&) = delete;

  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }

  // Adds a computation; the module owns it. Names are made unique.
  HloComputation* AddComputation(std::unique_ptr<HloComputation> computation, bool is_entry);
  // Adds before `before` in print order (fused and called computations print before callers).
  HloComputation* AddComputationBefore(std::unique_ptr<HloComputation> computation,
                                       const HloComputation* before);
  // Removes a computation nobody calls.
  void RemoveComputation(HloComputation* computation);
  // Moves `computation` to just before `before` in print order.
  void MoveComputationBefore(HloComputation* computation, const HloComputation* before);

  HloComputation* entry_computation() const { return entry_; }
  void set_entry_computation(HloComputation* entry) { entry_ = entry; }
  std::vector<HloComputation*> computations() const;
  HloComputation* GetComputationWithName(std::string_view name) const;
  int64_t computation_count() const { return static_cast<int64_t>(computations_.size()); }
  int64_t instruction_count() const;

  // The entry_computation_layout written in the header, when there was one.
  const std::optional<ComputationLayout>& entry_computation_layout() const {
    return entry_layout_;
  }
  void set_entry_computation_layout(std::optional<ComputationLayout> layout) {
    entry_layout_ = std::move(layout);
  }
  // Header attributes other than entry_computation_layout, verbatim, in order.
  std::vector<RawAttribute>& header_attributes() { return header_attributes_; }
  const std::vector<RawAttribute>& header_attributes() const { return header_attributes_; }

  // The stack-frame table written after the HloModule line (FileNames, FunctionNames,
  // FileLocations, StackFrames), which metadata's stack_frame_id points into; nullptr when the
  // text had none. Immutable and shared: a table is read once and never edited by passes.
  const StackFrameTable* stack_frames() const { return stack_frames_.get(); }
  const std::shared_ptr<const StackFrameTable>& shared_stack_frames() const { return stack_frames_; }
  void set_stack_frames(std::shared_ptr<const StackFrameTable> table) {
    stack_frames_ = std::move(table);
  }

  // A module-unique instruction name based on `prefix` ("add" -> "add", then "add.1", ...).
  std::string UniqueInstructionName(std::string_view prefix);
  // Registers a name the parser read so that generated names never collide with it.
  void ReserveInstructionName(const std::string& name) { instruction_names_.insert(name); }
  std::string UniqueComputationName(std::string_view prefix);
  int64_t NextUniqueId() { return next_unique_id_++; }
  // Keeps the computation name index in step with HloComputation::set_name.
  void OnComputationRenamed(const std::string& old_name, const std::string& new_name);

  // The module as HLO text. Defined in printer.cc.
  std::string ToString(bool short_form = false) const;

 private:
  std::string name_;
  std::vector<std::unique_ptr<HloComputation>> computations_;
  HloComputation* entry_ = nullptr;
  std::optional<ComputationLayout> entry_layout_;
  std::vector<RawAttribute> header_attributes_;
  std::shared_ptr<const StackFrameTable> stack_frames_;
  std::unordered_set<std::string> instruction_names_;
  std::unordered_map<std::string, int64_t> next_name_suffix_;
  std::unordered_map<std::string, int64_t> next_computation_suffix_;
  // How many computations bear each name: a fusion pass asks for a fresh name per fusion, and a
  // search through every computation each time made it quadratic.
  std::unordered_map<std::string, int64_t> computation_names_;
  int64_t next_unique_id_ = 0;
};

}  // namespace xlens
