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

// Whether writing the results could change what another member reads: a result that overlaps
// anything but, where `in_place`, its own member's same operand exactly (an in-place all-reduce).
bool Overlapping(const std::vector<Range>& ranges, bool in_place) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    if (!ranges[i].output) continue;
    for (size_t j = 0; j < ranges.size(); ++j) {
      if (i == j) continue;
      const Range& a = ranges[i];
      const Range& b = ranges[j];
      if (a.end <= b.begin || b.end <= a.begin) continue;
      const bool same_place = in_place && !b.output && a.member == b.member && a.operand == b.operand &&
                              a.begin == b.begin && a.end == b.end;
      if (!same_place) return true;
    }
  }
  return false;
}

}  // namespace

bool CanRunInPlace(const HloInstruction& collective, const DeviceCollectives* device) {
  const HloOpcode opcode = collective.opcode();
  if ((opcode != HloOpcode::kAllReduce && opcode != HloOpcode::kReduceScatter &&
       opcode != HloOpcode::kAllGather) ||
      device == nullptr || device->rendezvous() == nullptr ||
      !device->rendezvous()->MeetsInProcess(collective) ||
      collective.operand_count() < 1) {
    return false;
  }
  const bool reduces = opcode != HloOpcode::kAllGather;
  if (reduces && collective.to_apply() == nullptr) return false;
  if (!reduces || opcode == HloOpcode::kReduceScatter) {
    if (collective.dimensions().size() != 1) return false;
  }
  const Shape& shape = collective.shape();
  const int64_t count = collective.operand_count();
  if (shape.IsTuple() != (count > 1)) return false;
  if (shape.IsTuple() && static_cast<int64_t>(shape.tuple_shapes().size()) != count) return false;
  for (int64_t k = 0; k < count; ++k) {
    const Shape& in = collective.operand(k)->shape();
    const Shape& out = shape.IsTuple() ? shape.tuple_shapes()[k] : shape;
    if (!RowMajor(in) || !RowMajor(out) || in.element_type() != out.element_type() ||
        in.rank() != out.rank()) {
      return false;
    }
    if (opcode == HloOpcode::kAllReduce) {
      if (in.num_elements() != out.num_elements()) return false;
    } else {
      const int64_t d = collective.dimensions()[0];
      if (d < 0 || d >= in.rank()) return false;
      for (int64_t i = 0; i < in.rank(); ++i) {
        if (i != d && in.dimensions()[i] != out.dimensions()[i]) return false;
      }
    }
    bool swapped = false;
    if (reduces && evaluator_internal::WholeArrayFold(collective.to_apply(), in.element_type(),
                                                      swapped) == nullptr) {
      return false;
    }
  }
  return true;
}

namespace {

int64_t Product(const Shape& shape, int64_t from, int64_t to) {
  int64_t product = 1;
  for (int64_t i = from; i < to; ++i) product *= shape.dimensions()[i];
  return product;
}

}  // namespace

StatusOr<bool> RunInPlace(const HloInstruction& collective, DeviceCollectives& device,
                          const std::vector<const char*>& operands,
                          const std::vector<char*>& results) {
  const size_t count = operands.size();
  if (results.size() != count || static_cast<int64_t>(count) != collective.operand_count()) {
    return Error(fmt::format("{} with {} operands has {} operand and {} result buffers",
                             HloOpcodeString(collective.opcode()), collective.operand_count(),
                             count, results.size()));
  }
  const HloOpcode opcode = collective.opcode();
  ASSIGN_OR_RETURN(auto groups, ParticipatingDeviceGroups(collective, device.topology()));
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
  if (rank < 0) return false;  // the evaluator's way says what is wrong
  const size_t members = group.size();
  auto result_shape = [&](size_t k) -> const Shape& {
    return collective.shape().IsTuple() ? collective.shape().tuple_shapes()[k] : collective.shape();
  };
  if (opcode != HloOpcode::kAllReduce) {
    // The gathered (or scattered) dimension must hold one piece per member: else the evaluator's
    // way refuses it.
    const int64_t d = collective.dimensions()[0];
    for (size_t k = 0; k < count; ++k) {
      const int64_t in = collective.operand(static_cast<int64_t>(k))->shape().dimensions()[d];
      const int64_t out = result_shape(k).dimensions()[d];
      const int64_t whole = opcode == HloOpcode::kAllGather ? out : in;
      const int64_t piece = opcode == HloOpcode::kAllGather ? in : out;
      if (piece * static_cast<int64_t>(members) != whole) return false;
    }
  }
  const int64_t occurrence = device.NextOccurrence(collective);

  // What this member brings: per operand, its operand's and its result's addresses and size.
  constexpr size_t kFields = 3;
  Literal mine(Shape(PrimitiveType::U64, {static_cast<int64_t>(count * kFields)}));
  auto* fields = reinterpret_cast<uint64_t*>(mine.untyped_data());
  std::vector<int64_t> elements(count);
  for (size_t k = 0; k < count; ++k) {
    elements[k] = collective.operand(static_cast<int64_t>(k))->shape().num_elements();
    fields[k * kFields] = reinterpret_cast<uintptr_t>(operands[k]);
    fields[k * kFields + 1] = reinterpret_cast<uintptr_t>(results[k]);
    fields[k * kFields + 2] = static_cast<uint64_t>(elements[k]);
  }
  CollectiveRendezvous& rendezvous = *device.rendezvous();
  ASSIGN_OR_RETURN(auto brought,
                   rendezvous.MeetStep(collective, occurrence, 1, id, group, std::move(mine)));
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
      const int64_t width = ByteWidth(collective.operand(static_cast<int64_t>(k))->shape().element_type());
      if (static_cast<int64_t>(all[m][k * kFields + 2]) != elements[k]) {
        return Error(fmt::format("device {} brought {} elements for operand {} where device {} "
                                 "brought {}", group[m], all[m][k * kFields + 2], k, id,
                                 elements[k]));
      }
      const uintptr_t in_bytes = static_cast<uintptr_t>(elements[k] * width);
      const uintptr_t out_bytes = static_cast<uintptr_t>(result_shape(k).num_elements() * width);
      if (in_bytes > 0) {
        ranges.push_back({all[m][k * kFields], all[m][k * kFields] + in_bytes, m, k, false});
      }
      if (out_bytes > 0) {
        ranges.push_back({all[m][k * kFields + 1], all[m][k * kFields + 1] + out_bytes, m, k, true});
      }
    }
  }
  const bool overlapping = Overlapping(ranges, opcode == HloOpcode::kAllReduce);
  auto in = [&](size_t m, size_t k) {
    return reinterpret_cast<const uint8_t*>(all[m][k * kFields]);
  };
  auto out = [&](size_t m, size_t k) { return reinterpret_cast<uint8_t*>(all[m][k * kFields + 1]); };
  for (size_t k = 0; k < count && !overlapping; ++k) {
    const PrimitiveType type = collective.operand(static_cast<int64_t>(k))->shape().element_type();
    const int64_t width = ByteWidth(type);
    bool swapped = false;
    evaluator_internal::BinaryKernel fold =
        opcode == HloOpcode::kAllGather
            ? nullptr
            : evaluator_internal::WholeArrayFold(collective.to_apply(), type, swapped);
    std::vector<const uint8_t*> sources(members);
    if (opcode == HloOpcode::kAllReduce) {
      // This member's slice of the elements, cut at 64-byte lines so that no two members write
      // one cache line, folded into rank 0's result (its own operand may be that buffer: each
      // element is read before it is written, as the evaluator's accumulator is) and copied to
      // the others'.
      const int64_t n = elements[k];
      const int64_t line = std::max<int64_t>(1, 64 / std::max<int64_t>(1, width));
      const int64_t lines = (n + line - 1) / line;
      const int64_t m_count = static_cast<int64_t>(members);
      const int64_t begin = std::min(n, lines * rank / m_count * line);
      const int64_t end = std::min(n, lines * (rank + 1) / m_count * line);
      if (begin >= end) continue;
      for (size_t m = 0; m < members; ++m) sources[m] = in(m, k) + begin * width;
      uint8_t* acc = out(0, k) + begin * width;
      evaluator_internal::FoldInOrder(fold, swapped, sources, acc, end - begin, width);
      for (size_t m = 1; m < members; ++m) {
        std::memcpy(out(m, k) + begin * width, acc, (end - begin) * width);
      }
      continue;
    }
    // Gathers and scatters fill this member's own result: per run of the dimensions before d,
    // one piece per member.
    const int64_t d = collective.dimensions()[0];
    const Shape& operand = collective.operand(static_cast<int64_t>(k))->shape();
    const int64_t outer = Product(operand, 0, d);
    const int64_t piece = opcode == HloOpcode::kAllGather
                              ? Product(operand, d, operand.rank())
                              : Product(result_shape(k), d, operand.rank());
    if (piece == 0) continue;
    uint8_t* mine_out = out(static_cast<size_t>(rank), k);
    const int64_t m_count = static_cast<int64_t>(members);
    for (int64_t o = 0; o < outer; ++o) {
      if (opcode == HloOpcode::kAllGather) {
        for (int64_t m = 0; m < m_count; ++m) {
          std::memcpy(mine_out + (o * m_count + m) * piece * width, in(m, k) + o * piece * width,
                      piece * width);
        }
      } else {
        for (size_t m = 0; m < members; ++m) {
          sources[m] = in(m, k) + (o * m_count + rank) * piece * width;
        }
        evaluator_internal::FoldInOrder(fold, swapped, sources, mine_out + o * piece * width, piece, width);
      }
    }
  }
  // Nobody leaves (and reuses its buffers) before everyone has finished with them.
  Literal done(Shape(PrimitiveType::U64, {0}));
  RETURN_IF_ERROR(
      rendezvous.MeetStep(collective, occurrence, 2, id, group, std::move(done)).status());
  return !overlapping;
}

}  // namespace xlens::runtime
