#include "compiler/runtime/in_process_all_reduce.h"

#include <algorithm>
#include <cstring>

#include <fmt/format.h>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::runtime {
namespace {

// The buffers hold the row-major bytes the evaluator's values do (CopyFromLayout copies them
// verbatim) only in the default layout.
bool RowMajor(const Shape& shape) {
  if (!shape.IsArray()) return false;
  if (!shape.has_layout()) return true;
  const std::vector<int64_t>& order = shape.layout().minor_to_major;
  if (static_cast<int64_t>(order.size()) != shape.rank()) return false;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (order[i] != shape.rank() - 1 - i) return false;
  }
  return true;
}

// A byte range of one member's buffer.
struct Range {
  uintptr_t begin = 0;
  uintptr_t end = 0;
  size_t member = 0;
  size_t operand = 0;
  bool output = false;
};

// Whether writing the results slice by slice could change what another slice reads: a result
// that overlaps anything but its own member's same operand, exactly (an in-place all-reduce).
bool Overlapping(const std::vector<Range>& ranges) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i].output) continue;
    for (size_t j = 0; j < ranges.size(); ++j) {
      if (i == j) continue;
      const Range& a = ranges[i];
      const Range& b = ranges[j];
      if (a.end <= b.begin || b.end <= a.begin) continue;
      const bool same_place = !b.output && a.member == b.member && a.operand == b.operand &&
                              a.begin == b.begin && a.end == b.end;
      if (!same_place) return true;
    }
  }
  return false;
}

}  // namespace

bool CanAllReduceInPlace(const HloInstruction& all_reduce, const DeviceCollectives* device) {
  if (all_reduce.opcode() != HloOpcode::kAllReduce || device == nullptr ||
      device->rendezvous() == nullptr || !device->rendezvous()->InProcess() ||
      all_reduce.to_apply() == nullptr || all_reduce.operand_count() < 1) {
    return false;
  }
  const Shape& shape = all_reduce.shape();
  const int64_t count = all_reduce.operand_count();
  if (shape.IsTuple() != (count > 1)) return false;
  if (shape.IsTuple() && static_cast<int64_t>(shape.tuple_shapes().size()) != count) return false;
  for (int64_t k = 0; k < count; ++k) {
    const Shape& in = all_reduce.operand(k)->shape();
    const Shape& out = shape.IsTuple() ? shape.tuple_shapes()[k] : shape;
    if (!RowMajor(in) || !RowMajor(out) || in.element_type() != out.element_type() ||
        in.num_elements() != out.num_elements()) {
      return false;
    }
    bool swapped = false;
    if (evaluator_internal::WholeArrayFold(all_reduce.to_apply(), in.element_type(), swapped) ==
        nullptr) {
      return false;
    }
  }
  return true;
}

StatusOr<bool> AllReduceInPlace(const HloInstruction& all_reduce, DeviceCollectives& device,
                                const std::vector<const char*>& operands,
                                const std::vector<char*>& results) {
  const size_t count = operands.size();
  if (results.size() != count || static_cast<int64_t>(count) != all_reduce.operand_count()) {
    return Error(fmt::format("all-reduce with {} operands has {} operand and {} result buffers",
                             all_reduce.operand_count(), count, results.size()));
  }
  ASSIGN_OR_RETURN(auto groups, ParticipatingDeviceGroups(all_reduce, device.topology()));
  const int64_t id = device.device_id();
  std::vector<int64_t> group;
  int64_t rank = -1;
  for (auto& g : groups) {
    auto it = std::find(g.begin(), g.end(), id);
    if (it != g.end()) {
      rank = it - g.begin();
      group = std::move(g);
      break;
    }
  }
  if (rank < 0) return Error(fmt::format("device {} is in none of the groups", id));
  const int64_t occurrence = device.NextOccurrence(all_reduce);
  const size_t members = group.size();

  // What this member brings: per operand, its operand's and its result's addresses and size.
  constexpr size_t kFields = 3;
  Literal mine(Shape(PrimitiveType::U64, {static_cast<int64_t>(count * kFields)}));
  auto* fields = reinterpret_cast<uint64_t*>(mine.untyped_data());
  std::vector<int64_t> elements(count);
  for (size_t k = 0; k < count; ++k) {
    elements[k] = all_reduce.operand(static_cast<int64_t>(k))->shape().num_elements();
    fields[k * kFields] = reinterpret_cast<uintptr_t>(operands[k]);
    fields[k * kFields + 1] = reinterpret_cast<uintptr_t>(results[k]);
    fields[k * kFields + 2] = static_cast<uint64_t>(elements[k]);
  }
  CollectiveRendezvous& rendezvous = *device.rendezvous();
  ASSIGN_OR_RETURN(auto brought,
                   rendezvous.MeetStep(all_reduce, occurrence, 1, id, group, std::move(mine)));
  std::vector<const uint64_t*> all(members);
  std::vector<Range> ranges;
  for (size_t m = 0; m < members; ++m) {
    if (brought[m]->size_bytes() != count * kFields * sizeof(uint64_t)) {
      return Error(fmt::format("device {} brought {} operands where device {} brought {}",
                               group[m], brought[m]->size_bytes() / (kFields * sizeof(uint64_t)),
                               id, count));
    }
    all[m] = reinterpret_cast<const uint64_t*>(brought[m]->untyped_data());
    for (size_t k = 0; k < count; ++k) {
      const int64_t width = ByteWidth(all_reduce.operand(static_cast<int64_t>(k))->shape().element_type());
      if (static_cast<int64_t>(all[m][k * kFields + 2]) != elements[k]) {
        return Error(fmt::format("device {} brought {} elements for operand {} where device {} "
                                 "brought {}", group[m], all[m][k * kFields + 2], k, id,
                                 elements[k]));
      }
      const uintptr_t bytes = static_cast<uintptr_t>(elements[k] * width);
      if (bytes == 0) continue;
      ranges.push_back({all[m][k * kFields], all[m][k * kFields] + bytes, m, k, false});
      ranges.push_back({all[m][k * kFields + 1], all[m][k * kFields + 1] + bytes, m, k, true});
    }
  }
  const bool overlapping = Overlapping(ranges);
  if (!overlapping) {
    // This member's slice of every operand, cut at 64-byte lines so that no two members write
    // one cache line; each element is folded as the evaluator folds it, whoever folds it.
    for (size_t k = 0; k < count; ++k) {
      const PrimitiveType type = all_reduce.operand(static_cast<int64_t>(k))->shape().element_type();
      const int64_t width = ByteWidth(type);
      const int64_t n = elements[k];
      if (n == 0) continue;
      const int64_t line = std::max<int64_t>(1, 64 / std::max<int64_t>(1, width));
      const int64_t lines = (n + line - 1) / line;
      const int64_t begin = std::min(n, lines * rank / static_cast<int64_t>(members) * line);
      const int64_t end = std::min(n, lines * (rank + 1) / static_cast<int64_t>(members) * line);
      if (begin >= end) continue;
      bool swapped = false;
      evaluator_internal::BinaryKernel fold =
          evaluator_internal::WholeArrayFold(all_reduce.to_apply(), type, swapped);
      auto in = [&](size_t m) {
        return reinterpret_cast<const uint8_t*>(all[m][k * kFields]) + begin * width;
      };
      auto out = [&](size_t m) {
        return reinterpret_cast<uint8_t*>(all[m][k * kFields + 1]) + begin * width;
      };
      // Rank 0's result holds the fold; its own operand may be the same buffer (in place), read
      // element by element before it is written, as the evaluator's accumulator is.
      uint8_t* acc = out(0);
      const int64_t len = end - begin;
      if (members == 1) {
        std::memmove(acc, in(0), len * width);
      } else if (swapped) {
        fold(in(1), in(0), acc, len);
      } else {
        fold(in(0), in(1), acc, len);
      }
      for (size_t m = 2; m < members; ++m) {
        if (swapped) {
          fold(in(m), acc, acc, len);
        } else {
          fold(acc, in(m), acc, len);
        }
      }
      for (size_t m = 1; m < members; ++m) std::memcpy(out(m), acc, len * width);
    }
  }
  // Nobody leaves (and reuses its buffers) before everyone has finished with them.
  Literal done(Shape(PrimitiveType::U64, {0}));
  RETURN_IF_ERROR(
      rendezvous.MeetStep(all_reduce, occurrence, 2, id, group, std::move(done)).status());
  return !overlapping;
}

}  // namespace xlens::runtime
