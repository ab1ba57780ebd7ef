// FramePlan: where every array of one computation lives at run time. A frame is an array of
// pointers, one per slot; a slot is an (instruction, tuple leaf) pair. The entry computation's
// slots point into the buffer assignment's allocations; a nested computation (while body and
// condition, conditional branch, call) gets a region of the executable's arena for each value it
// defines, and slots for its parameter leaves that its caller fills before each run.
// Aliases (tuple, get-tuple-element, bitcast, add-dependency, opt-barrier) share their source's
// slot, so nothing is copied for them.
#pragma once

#include <map>
#include <vector>

#include "compiler/hlo/computation.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

class FramePlan {
 public:
  // The entry computation: allocation `i` of `assignment` starts at arena offset
  // `allocation_offsets[i]`.
  static StatusOr<FramePlan> ForEntry(const HloComputation& entry,
                                      const BufferAssignment& assignment,
                                      const std::vector<int64_t>& allocation_offsets);
  // A nested computation whose own values are packed from arena offset `arena_begin`.
  static StatusOr<FramePlan> ForNested(const HloComputation& computation, int64_t arena_begin);

  // The slot of leaf `index` of `hlo`; -1 when it has none (tokens).
  int64_t Slot(const HloInstruction* hlo, const std::vector<int64_t>& index = {}) const;
  // The slots of every array leaf of `hlo`, depth-first.
  std::vector<int64_t> LeafSlots(const HloInstruction* hlo) const;

  int64_t slot_count() const { return static_cast<int64_t>(slot_offsets_.size()); }
  // Arena offset of each slot; -1 for parameter slots the caller fills.
  const std::vector<int64_t>& slot_offsets() const { return slot_offsets_; }
  const std::vector<int64_t>& slot_sizes() const { return slot_sizes_; }
  // Slots of the parameters' leaves (in parameter order, depth-first) and of the root's leaves.
  const std::vector<int64_t>& parameter_slots() const { return parameter_slots_; }
  const std::vector<int64_t>& root_slots() const { return root_slots_; }
  // One past the last arena byte the plan uses (nested plans).
  int64_t arena_end() const { return arena_end_; }
  const HloComputation* computation() const { return computation_; }

 private:
  int64_t NewSlot(int64_t offset, int64_t size);
  const HloComputation* computation_ = nullptr;
  std::map<std::pair<const HloInstruction*, std::vector<int64_t>>, int64_t> slot_of_;
  std::vector<int64_t> slot_offsets_;
  std::vector<int64_t> slot_sizes_;
  std::vector<int64_t> parameter_slots_;
  std::vector<int64_t> root_slots_;
  int64_t arena_end_ = 0;
};

// The instruction and leaf that define the value at leaf `index` of `hlo`: tuple,
// get-tuple-element, bitcast, add-dependency, opt-barrier and domain define nothing of their own.
std::pair<const HloInstruction*, std::vector<int64_t>> DefiningLeaf(const HloInstruction* hlo,
                                                                    std::vector<int64_t> index);

// Bytes in the arena for one array, rounded up to 64.
int64_t AlignedSize(int64_t bytes);

}  // namespace xlens::runtime
