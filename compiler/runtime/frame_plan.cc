#include "compiler/runtime/frame_plan.h"

#include <fmt/format.h>

namespace xlens::runtime {

int64_t AlignedSize(int64_t bytes) { return (bytes + 63) / 64 * 64; }

int64_t FramePlan::NewSlot(int64_t offset, int64_t size) {
  slot_offsets_.push_back(offset);
  slot_sizes_.push_back(size);
  return static_cast<int64_t>(slot_offsets_.size()) - 1;
}

int64_t FramePlan::Slot(const HloInstruction* hlo, const std::vector<int64_t>& index) const {
  auto it = slot_of_.find({hlo, index});
  return it == slot_of_.end() ? -1 : it->second;
}

std::vector<int64_t> FramePlan::LeafSlots(const HloInstruction* hlo) const {
  std::vector<int64_t> slots;
  hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
    if (s.IsArray()) slots.push_back(Slot(hlo, index));
  });
  return slots;
}

StatusOr<FramePlan> FramePlan::ForEntry(const HloComputation& entry,
                                        const BufferAssignment& assignment,
                                        const std::vector<int64_t>& allocation_offsets) {
  FramePlan plan;
  plan.computation_ = &entry;
  for (const HloInstruction* hlo : entry.MakeInstructionPostOrder()) {
    Status status = OkStatus();
    hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!status.ok() || !s.IsArray()) return;
      auto slice = assignment.GetSlice(*hlo, index);
      if (!slice.ok()) {
        status = slice.status();
        return;
      }
      plan.slot_of_[{hlo, index}] =
          plan.NewSlot(allocation_offsets[slice->allocation] + slice->offset, slice->size);
    });
    RETURN_IF_ERROR(status);
  }
  for (const HloInstruction* p : entry.parameter_instructions()) {
    for (int64_t s : plan.LeafSlots(p)) plan.parameter_slots_.push_back(s);
  }
  plan.root_slots_ = plan.LeafSlots(entry.root_instruction());
  return plan;
}

std::pair<const HloInstruction*, std::vector<int64_t>> DefiningLeaf(const HloInstruction* hlo,
                                                                    std::vector<int64_t> index) {
  while (true) {
    switch (hlo->opcode()) {
      case HloOpcode::kTuple:
        if (index.empty()) return {hlo, index};
        hlo = hlo->operand(index[0]);
        index.erase(index.begin());
        break;
      case HloOpcode::kGetTupleElement:
        index.insert(index.begin(), hlo->tuple_index());
        hlo = hlo->operand(0);
        break;
      case HloOpcode::kBitcast: case HloOpcode::kAddDependency:
      case HloOpcode::kOptimizationBarrier: case HloOpcode::kDomain:
        hlo = hlo->operand(0);
        break;
      default:
        return {hlo, index};
    }
  }
}

StatusOr<FramePlan> FramePlan::ForNested(const HloComputation& computation, int64_t arena_begin) {
  FramePlan plan;
  plan.computation_ = &computation;
  int64_t offset = arena_begin;
  for (const HloInstruction* p : computation.parameter_instructions()) {
    p->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!s.IsArray()) return;
      const int64_t slot = plan.NewSlot(-1, shape_util::ByteSizeOf(s));
      plan.slot_of_[{p, index}] = slot;
      plan.parameter_slots_.push_back(slot);
    });
  }
  for (const HloInstruction* hlo : computation.MakeInstructionPostOrder()) {
    if (hlo->opcode() == HloOpcode::kParameter) continue;
    hlo->shape().ForEachLeaf([&](const Shape& s, const std::vector<int64_t>& index) {
      if (!s.IsArray()) return;
      auto [source, source_index] = DefiningLeaf(hlo, index);
      if (source != hlo || source_index != index) {
        auto it = plan.slot_of_.find({source, source_index});
        if (it != plan.slot_of_.end()) {
          plan.slot_of_[{hlo, index}] = it->second;
          return;
        }
      }
      const int64_t size = shape_util::ByteSizeOf(s);
      plan.slot_of_[{hlo, index}] = plan.NewSlot(offset, size);
      offset += AlignedSize(size);
    });
  }
  plan.root_slots_ = plan.LeafSlots(computation.root_instruction());
  plan.arena_end_ = offset;
  return plan;
}

}  // namespace xlens::runtime
