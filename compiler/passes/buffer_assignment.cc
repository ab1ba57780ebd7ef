#include "compiler/passes/buffer_assignment.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "compiler/passes/early_result_schedule.h"

namespace xlens {

namespace {

using Index = std::vector<int64_t>;
using Slot = std::pair<const HloInstruction*, Index>;

int64_t RoundUp(int64_t n, int64_t alignment) {
  return alignment <= 1 ? n : (n + alignment - 1) / alignment * alignment;
}

// Bytes of one array; unbounded dynamic dimensions have no static size (the runtime sizes them).
int64_t ArrayBytes(const Shape& shape) {
  for (int64_t d : shape.dimensions()) {
    if (d == Shape::kUnboundedSize) return 0;
  }
  return shape_util::ByteSizeOf(shape);
}

std::string IndexString(const Index& index) {
  return fmt::format("{{{}}}", fmt::join(index, ","));
}

// Instructions that only name buffers of their operands.
bool ForwardsBuffers(HloOpcode op) {
  switch (op) {
    case HloOpcode::kGetTupleElement: case HloOpcode::kTuple: case HloOpcode::kBitcast:
    case HloOpcode::kAddDependency: case HloOpcode::kOptimizationBarrier: case HloOpcode::kDomain:
      return true;
    default:
      return false;
  }
}

// Whether every use of fused parameter `number` inside `fused` reads element i to write element i;
// with `through_reductions`, or reduces (of elementwise values of it) that the root does not read
// directly.
bool ParameterReadElementwise(const HloComputation& fused, int64_t number, bool through_reductions = false) {
  if (number >= fused.num_parameters()) return false;
  const HloInstruction* param = fused.parameter_instruction(number);
  std::vector<const HloInstruction*> stack = {param};
  std::unordered_set<const HloInstruction*> seen;
  while (!stack.empty()) {
    const HloInstruction* value = stack.back();
    stack.pop_back();
    for (const HloInstruction* user : value->users()) {
      if (!seen.insert(user).second) continue;
      if (user->opcode() == HloOpcode::kTuple && user == fused.root_instruction()) continue;
      if (through_reductions && user->opcode() == HloOpcode::kReduce && user != fused.root_instruction()) {
        const std::vector<HloInstruction*>& readers = user->users();
        if (std::find(readers.begin(), readers.end(), fused.root_instruction()) != readers.end()) return false;
        for (int64_t i = user->operand_count() / 2; i < user->operand_count(); ++i) {
          if (user->operand(i) == value) return false;  // an initial value
        }
        continue;
      }
      if (!user->IsElementwise() || !user->shape().IsArray() ||
          !shape_util::SameDimensions(user->shape(), param->shape())) {
        return false;
      }
      stack.push_back(user);
    }
  }
  return true;
}

struct Placement {
  int64_t offset, size, start, end;
};

// Greedy by size, best fit: each block goes into the smallest gap that holds it among the blocks
// already placed whose live ranges overlap its own. Returns the heap size.
int64_t PackBlocks(std::vector<Placement*>& blocks) {
  std::stable_sort(blocks.begin(), blocks.end(), [](const Placement* a, const Placement* b) {
    return a->size != b->size ? a->size > b->size : a->start < b->start;
  });
  std::vector<const Placement*> placed;
  int64_t heap = 0;
  for (Placement* block : blocks) {
    std::vector<std::pair<int64_t, int64_t>> busy;
    for (const Placement* p : placed) {
      if (p->start <= block->end && block->start <= p->end) busy.push_back({p->offset, p->size});
    }
    std::sort(busy.begin(), busy.end());
    int64_t cursor = 0, best = -1, best_gap = 0;
    for (const auto& [offset, size] : busy) {
      int64_t gap = offset - cursor;
      if (gap >= block->size && (best < 0 || gap < best_gap)) {
        best = cursor;
        best_gap = gap;
      }
      cursor = std::max(cursor, offset + size);
    }
    block->offset = best >= 0 ? best : cursor;
    heap = std::max(heap, block->offset + block->size);
    placed.push_back(block);
  }
  return heap;
}

// The buffers of one computation, their sharing and live ranges.
class ComputationBuffers {
 public:
  ComputationBuffers(const HloComputation& comp, const BufferAssignmentOptions& options,
                     std::unordered_map<const HloComputation*, int64_t>& scratch_cache)
      : comp_(comp), options_(options), scratch_cache_(scratch_cache) {}

  Status Build(bool is_entry) {
    // The entry runs in EarlyResultSchedule's order (its thunks in the schedule's); a nested
    // computation's thunks run in its post-order.
    for (HloInstruction* instr : is_entry ? EarlyResultSchedule(comp_) : comp_.MakeInstructionPostOrder()) {
      pos_[instr] = static_cast<int64_t>(order_.size());
      order_.push_back(instr);
    }
    last_ = std::max<int64_t>(0, static_cast<int64_t>(order_.size()) - 1);
    for (const HloInstruction* instr : order_) RETURN_IF_ERROR(Define(*instr));
    for (const HloInstruction* instr : order_) {
      if (ForwardsBuffers(instr->opcode())) continue;
      for (const HloInstruction* operand : instr->operands()) {
        for (int64_t id : SlotsOf(operand)) buffers_[id].end = std::max(buffers_[id].end, pos_[instr]);
      }
    }
    for (int64_t id : SlotsOf(comp_.root_instruction())) {
      outputs_.insert(id);
      buffers_[id].end = last_;
    }
    for (LogicalBuffer& b : buffers_) {
      HloOpcode op = b.instruction->opcode();
      if (!b.is_scratch && (op == HloOpcode::kParameter || (is_entry && op == HloOpcode::kConstant))) {
        pinned_.insert(b.id);
        if (is_entry) {
          b.start = 0;
          b.end = last_;
        }
      }
    }
    group_.resize(buffers_.size());
    std::iota(group_.begin(), group_.end(), 0);
    group_start_.resize(buffers_.size());
    group_end_.resize(buffers_.size());
    for (const LogicalBuffer& b : buffers_) {
      group_start_[b.id] = b.start;
      group_end_[b.id] = b.end;
    }
    if (options_.allow_in_place) {
      for (const HloInstruction* instr : order_) ShareInPlace(*instr);
    }
    return OkStatus();
  }

  int64_t Group(int64_t id) {
    while (group_[id] != id) id = group_[id] = group_[group_[id]];
    return id;
  }
  bool IsPinnedOrOutput(int64_t group) {
    for (const LogicalBuffer& b : buffers_) {
      if (Group(b.id) == group && (pinned_.count(b.id) || outputs_.count(b.id))) return true;
    }
    return false;
  }

  // The temp heap size: every group that is not a parameter, constant or output.
  int64_t PackTemps(std::unordered_map<int64_t, int64_t>* offsets) {
    std::unordered_set<int64_t> excluded;
    for (int64_t id : pinned_) excluded.insert(Group(id));
    for (int64_t id : outputs_) excluded.insert(Group(id));
    std::vector<Placement> storage;
    std::vector<int64_t> groups;
    for (const LogicalBuffer& b : buffers_) {
      int64_t g = Group(b.id);
      if (g != b.id || excluded.count(g)) continue;
      storage.push_back({0, RoundUp(b.size, options_.alignment),
                         group_start_[g], group_end_[g]});
      groups.push_back(g);
    }
    std::vector<Placement*> blocks;
    for (Placement& p : storage) blocks.push_back(&p);
    int64_t heap = PackBlocks(blocks);
    if (offsets != nullptr) {
      for (size_t i = 0; i < storage.size(); ++i) (*offsets)[groups[i]] = storage[i].offset;
    }
    return heap;
  }

  std::vector<int64_t> SlotsOf(const HloInstruction* instr) const {
    std::vector<int64_t> ids;
    for (auto it = slots_.lower_bound({instr, {}}); it != slots_.end() && it->first.first == instr;
         ++it) {
      ids.push_back(it->second);
    }
    return ids;
  }

  const HloComputation& comp_;
  const BufferAssignmentOptions& options_;
  std::unordered_map<const HloComputation*, int64_t>& scratch_cache_;
  std::vector<const HloInstruction*> order_;
  std::unordered_map<const HloInstruction*, int64_t> pos_;
  int64_t last_ = 0;
  std::vector<LogicalBuffer> buffers_;
  std::map<Slot, int64_t> slots_;
  std::unordered_set<int64_t> pinned_, outputs_;
  std::vector<int64_t> group_, group_start_, group_end_;

 private:
  Status Define(const HloInstruction& instr) {
    const int64_t at = pos_[&instr];
    if (ForwardsBuffers(instr.opcode())) {
      if (instr.operand_count() == 0) return OkStatus();
      if (instr.opcode() == HloOpcode::kTuple) {
        for (int64_t i = 0; i < instr.operand_count(); ++i) Forward(instr, {i}, *instr.operand(i));
      } else if (instr.opcode() == HloOpcode::kGetTupleElement) {
        const HloInstruction* op = instr.operand(0);
        for (auto it = slots_.lower_bound({op, {}}); it != slots_.end() && it->first.first == op;
             ++it) {
          const Index& index = it->first.second;
          if (!index.empty() && index[0] == instr.tuple_index()) {
            slots_[{&instr, Index(index.begin() + 1, index.end())}] = it->second;
          }
        }
      } else {
        Forward(instr, {}, *instr.operand(0));
      }
      return OkStatus();
    }
    instr.shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>& index) {
      if (!leaf.IsArray()) return;
      int64_t id = static_cast<int64_t>(buffers_.size());
      buffers_.push_back(LogicalBuffer{id, &instr, index, leaf, false, ArrayBytes(leaf), at, at});
      slots_[{&instr, index}] = id;
    });
    int64_t scratch = 0;
    if (instr.opcode() == HloOpcode::kWhile || instr.opcode() == HloOpcode::kConditional ||
        instr.opcode() == HloOpcode::kCall) {
      for (const HloComputation* callee : instr.called_computations()) {
        ASSIGN_OR_RETURN(int64_t peak, CalleeTempPeak(*callee));
        scratch = std::max(scratch, peak);
      }
    }
    if (scratch > 0) {
      int64_t id = static_cast<int64_t>(buffers_.size());
      buffers_.push_back(LogicalBuffer{id, &instr, {}, Shape(), true, scratch, at, at});
    }
    return OkStatus();
  }

  // The slots of `source` appear in `instr` under `prefix`.
  void Forward(const HloInstruction& instr, const Index& prefix, const HloInstruction& source) {
    for (auto it = slots_.lower_bound({&source, {}}); it != slots_.end() && it->first.first == &source;
         ++it) {
      Index index = prefix;
      index.insert(index.end(), it->first.second.begin(), it->first.second.end());
      slots_[{&instr, index}] = it->second;
    }
  }

  StatusOr<int64_t> CalleeTempPeak(const HloComputation& callee) {
    if (auto it = scratch_cache_.find(&callee); it != scratch_cache_.end()) {
      if (it->second < 0) return Error("buffer assignment: %" + callee.name() + " calls itself");
      return it->second;
    }
    scratch_cache_[&callee] = -1;
    ComputationBuffers inner(callee, options_, scratch_cache_);
    RETURN_IF_ERROR(inner.Build(/*is_entry=*/false));
    int64_t peak = inner.PackTemps(nullptr);
    scratch_cache_[&callee] = peak;
    return peak;
  }

  // Which operand arrays `instr` may overwrite with which of its result arrays.
  std::vector<std::pair<Index, std::pair<int64_t, Index>>> InPlaceCandidates(
      const HloInstruction& instr) {
    std::vector<std::pair<Index, std::pair<int64_t, Index>>> pairs;
    auto same_array = [](const Shape& a, const Shape& b) {
      return a.IsArray() && b.IsArray() && shape_util::SameDimensions(a, b) &&
             ArrayBytes(a) == ArrayBytes(b) &&
             (!a.has_layout() || !b.has_layout() ||
              a.layout().minor_to_major == b.layout().minor_to_major);
    };
    switch (instr.opcode()) {
      case HloOpcode::kWhile:
        for (const auto& [slot, id] : slots_) {
          if (slot.first == &instr) pairs.push_back({slot.second, {0, slot.second}});
        }
        return pairs;
      case HloOpcode::kDynamicUpdateSlice:
        pairs.push_back({{}, {0, {}}});
        return pairs;
      case HloOpcode::kScatter:
        if (instr.shape().IsArray()) pairs.push_back({{}, {0, {}}});
        return pairs;
      case HloOpcode::kFusion: {
        const HloComputation* fused = instr.fused_computation();
        const FusionKind kind = instr.fusion_kind.value_or(FusionKind::kLoop);
        const bool row = kind == FusionKind::kInput && options_.in_place_row_fusions && instr.shape().IsArray() &&
                         fused != nullptr && fused->root_instruction()->opcode() != HloOpcode::kTuple;
        if (fused == nullptr || (kind != FusionKind::kLoop && !row)) return pairs;
        for (int64_t k = 0; k < instr.operand_count(); ++k) {
          if (!ParameterReadElementwise(*fused, k, row)) continue;
          instr.shape().ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>& index) {
            if (same_array(leaf, instr.operand(k)->shape())) pairs.push_back({index, {k, {}}});
          });
        }
        return pairs;
      }
      default:
        if (!instr.IsElementwise() || instr.opcode() == HloOpcode::kCopy) return pairs;
        for (int64_t k = 0; k < instr.operand_count(); ++k) {
          if (same_array(instr.shape(), instr.operand(k)->shape())) pairs.push_back({{}, {k, {}}});
        }
        return pairs;
    }
  }

  void ShareInPlace(const HloInstruction& instr) {
    const int64_t at = pos_[&instr];
    const bool elementwise = instr.IsElementwise();
    std::unordered_set<int64_t> taken;
    for (const auto& [out_index, from] : InPlaceCandidates(instr)) {
      auto out = slots_.find({&instr, out_index});
      auto in = slots_.find({instr.operand(from.first), from.second});
      if (out == slots_.end() || in == slots_.end()) continue;
      int64_t out_group = Group(out->second), in_group = Group(in->second);
      if (out_group == in_group || taken.count(out_group) || group_end_[in_group] != at ||
          buffers_[out->second].size != buffers_[in->second].size ||
          buffers_[out->second].instruction != &instr || IsPinnedOrOutput(in_group)) {
        continue;
      }
      // Outside elementwise code, reading the same buffer through another operand is unsafe.
      bool read_elsewhere = false;
      for (int64_t k = 0; k < instr.operand_count() && !elementwise; ++k) {
        if (k == from.first) continue;
        for (int64_t id : SlotsOf(instr.operand(k))) read_elsewhere |= Group(id) == in_group;
      }
      if (read_elsewhere) continue;
      group_[out_group] = in_group;
      group_start_[in_group] = std::min(group_start_[in_group], group_start_[out_group]);
      group_end_[in_group] = std::max(group_end_[in_group], group_end_[out_group]);
      taken.insert(in_group);
    }
  }
};

}  // namespace

std::string LogicalBuffer::ToShortString() const {
  std::string name = instruction != nullptr ? instruction->name() : "?";
  if (is_scratch) return fmt::format("<{} {} scratch @{}>", id, name, start);
  if (instruction != nullptr && instruction->shape().IsTuple()) name += IndexString(index);
  return fmt::format("<{} {} @{}>", id, name, start);
}

std::string HumanReadableBytes(int64_t bytes) {
  if (bytes < 1024) return fmt::format("{}B", bytes);
  const char* units[] = {"KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = -1;
  while (value >= 1024 && unit < 3) {
    value /= 1024;
    ++unit;
  }
  return fmt::format("{:.2f}{}", value, units[unit]);
}

StatusOr<BufferSlice> BufferAssignment::GetSlice(const HloInstruction& instruction,
                                                 const std::vector<int64_t>& index) const {
  auto slot = slots_.find({&instruction, index});
  if (slot == slots_.end()) {
    return Error(fmt::format("buffer assignment: no array at {} of %{}", IndexString(index),
                             instruction.name()));
  }
  return buffer_slices_.at(slot->second);
}

int64_t BufferAssignment::total_allocated_bytes() const {
  int64_t total = 0;
  for (const BufferAllocation& a : allocations_) total += a.size;
  return total;
}

int64_t BufferAssignment::peak_temp_bytes() const {
  for (const BufferAllocation& a : allocations_) {
    if (a.kind == BufferAllocation::Kind::kTemp) return a.size;
  }
  return 0;
}

std::string BufferAssignment::ToString() const {
  std::string out = fmt::format("BufferAssignment for module {} (alignment {}, in-place {}):\n",
                                module_name_, options_.alignment,
                                options_.allow_in_place ? "on" : "off");
  for (const BufferAllocation& a : allocations_) {
    out += fmt::format("allocation {}: size {}", a.index, a.size);
    switch (a.kind) {
      case BufferAllocation::Kind::kParameter:
        out += fmt::format(", parameter {}, shape |{}| at ShapeIndex {}", a.parameter_number,
                           a.parameter_shape.ToString(false), IndexString(a.parameter_index));
        break;
      case BufferAllocation::Kind::kConstant:
        out += ", constant";
        break;
      case BufferAllocation::Kind::kOutput:
        out += fmt::format(", output shape is |{}|",
                           buffers_[a.assigned.front().buffer].shape.ToString(false));
        break;
      case BufferAllocation::Kind::kTemp:
        out += ", preallocated-temp";
        break;
    }
    if (a.maybe_live_out) out += ", maybe-live-out";
    out += ":\n";
    for (const BufferAllocation::Assigned& v : a.assigned) {
      const LogicalBuffer& b = buffers_[v.buffer];
      out += fmt::format(" value: {} (size={},offset={}): {}\n", b.ToShortString(), v.size, v.offset,
                         b.is_scratch ? "scratch" : b.shape.ToString());
    }
  }
  int64_t total = total_allocated_bytes();
  out += fmt::format("\nTotal bytes used: {} ({})\n", total, HumanReadableBytes(total));
  out += fmt::format("Sum of logical buffers: {} ({})\n", sum_of_buffer_sizes_,
                     HumanReadableBytes(sum_of_buffer_sizes_));
  out += fmt::format("Peak live bytes: {} ({})\n", peak_live_bytes_,
                     HumanReadableBytes(peak_live_bytes_));
  out += fmt::format("Peak temp bytes: {} ({})\n", peak_temp_bytes(),
                     HumanReadableBytes(peak_temp_bytes()));
  return out;
}

StatusOr<BufferAssignment> AssignBuffers(const HloModule& module,
                                         const BufferAssignmentOptions& options) {
  const HloComputation* entry = module.entry_computation();
  if (entry == nullptr) return Error("buffer assignment: the module has no entry computation");
  if (options.alignment < 1) return Error("buffer assignment: alignment must be at least 1");
  std::unordered_map<const HloComputation*, int64_t> scratch_cache;
  scratch_cache[entry] = -1;
  ComputationBuffers cb(*entry, options, scratch_cache);
  RETURN_IF_ERROR(cb.Build(/*is_entry=*/true));

  BufferAssignment result;
  result.module_name_ = module.name();
  result.options_ = options;
  result.schedule_ = cb.order_;
  result.slots_ = cb.slots_;
  result.buffers_ = cb.buffers_;
  for (const LogicalBuffer& b : cb.buffers_) result.sum_of_buffer_sizes_ += b.size;

  // Members of each group, in id order.
  std::map<int64_t, std::vector<int64_t>> members;
  for (const LogicalBuffer& b : cb.buffers_) members[cb.Group(b.id)].push_back(b.id);
  std::unordered_set<int64_t> output_groups;
  for (int64_t id : cb.outputs_) output_groups.insert(cb.Group(id));

  auto add_allocation = [&](BufferAllocation::Kind kind, int64_t group, int64_t offset_base,
                            BufferAllocation* into) {
    for (int64_t id : members[group]) {
      const LogicalBuffer& b = cb.buffers_[id];
      into->assigned.push_back({id, offset_base, b.size});
      result.buffer_slices_[id] = BufferSlice{into->index, offset_base, b.size};
    }
    into->kind = kind;
  };
  std::unordered_set<int64_t> done;
  // Parameters first (in parameter order), then constants, outputs and the temp heap.
  for (const HloInstruction* param : entry->parameter_instructions()) {
    if (param == nullptr) continue;
    for (int64_t id : cb.SlotsOf(param)) {
      int64_t g = cb.Group(id);
      if (!done.insert(g).second) continue;
      BufferAllocation a;
      a.index = static_cast<int64_t>(result.allocations_.size());
      a.size = cb.buffers_[id].size;
      a.parameter_number = param->parameter_number();
      a.parameter_index = cb.buffers_[id].index;
      a.parameter_shape = cb.buffers_[id].shape;
      a.maybe_live_out = output_groups.count(g) > 0;
      add_allocation(BufferAllocation::Kind::kParameter, g, 0, &a);
      result.allocations_.push_back(std::move(a));
    }
  }
  for (bool outputs : {false, true}) {
    for (const LogicalBuffer& b : cb.buffers_) {
      int64_t g = cb.Group(b.id);
      if (done.count(g)) continue;
      bool is_constant = b.instruction->opcode() == HloOpcode::kConstant && !b.is_scratch;
      if (outputs ? !output_groups.count(g) : !is_constant) continue;
      done.insert(g);
      BufferAllocation a;
      a.index = static_cast<int64_t>(result.allocations_.size());
      a.size = b.size;
      a.maybe_live_out = output_groups.count(g) > 0;
      add_allocation(outputs ? BufferAllocation::Kind::kOutput : BufferAllocation::Kind::kConstant,
                     g, 0, &a);
      result.allocations_.push_back(std::move(a));
    }
  }
  std::unordered_map<int64_t, int64_t> offsets;
  int64_t heap = cb.PackTemps(&offsets);
  if (!offsets.empty()) {
    BufferAllocation temp;
    temp.index = static_cast<int64_t>(result.allocations_.size());
    temp.size = heap;
    temp.kind = BufferAllocation::Kind::kTemp;
    std::vector<std::pair<int64_t, int64_t>> by_offset(offsets.begin(), offsets.end());
    std::sort(by_offset.begin(), by_offset.end(),
              [](const auto& a, const auto& b) { return a.second != b.second ? a.second < b.second
                                                                             : a.first < b.first; });
    for (const auto& [group, offset] : by_offset) {
      add_allocation(BufferAllocation::Kind::kTemp, group, offset, &temp);
    }
    result.allocations_.push_back(std::move(temp));
  }

  // Peak live bytes: a group counts from its first definition to its last use.
  std::vector<int64_t> delta(cb.order_.size() + 2, 0);
  for (const auto& [group, ids] : members) {
    int64_t start = cb.group_start_[group], end = cb.group_end_[group];
    int64_t size = cb.buffers_[group].size;
    delta[start] += size;
    delta[end + 1] -= size;
  }
  int64_t live = 0;
  for (int64_t d : delta) {
    live += d;
    result.peak_live_bytes_ = std::max(result.peak_live_bytes_, live);
  }
  return result;
}

}  // namespace xlens
