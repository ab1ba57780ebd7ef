#include "compiler/hlo/distributed_rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/evaluator_internal.h"
#include "compiler/hlo/literal_leaves.h"

namespace xlens {
namespace {

void PutU64(std::string& out, uint64_t value) { out.append(reinterpret_cast<const char*>(&value), 8); }

bool GetU64(std::string_view& in, uint64_t& value) {
  if (in.size() < 8) return false;
  std::memcpy(&value, in.data(), 8);
  in.remove_prefix(8);
  return true;
}

bool GetString(std::string_view& in, std::string& value) {
  uint64_t size = 0;
  if (!GetU64(in, size) || in.size() < size) return false;
  value.assign(in.data(), size);
  in.remove_prefix(size);
  return true;
}

// The reduction a transport can do for `to_apply`: a root of add, multiply, maximum or minimum
// of the two parameters.
std::optional<TransportReduction> RecognizeReduction(const HloComputation* to_apply) {
  if (to_apply == nullptr || to_apply->num_parameters() != 2) return std::nullopt;
  const HloInstruction* root = to_apply->root_instruction();
  if (root == nullptr || root->operand_count() != 2) return std::nullopt;
  for (int64_t i = 0; i < 2; ++i) {
    if (root->operand(i)->opcode() != HloOpcode::kParameter) return std::nullopt;
  }
  if (root->operand(0) == root->operand(1)) return std::nullopt;
  switch (root->opcode()) {
    case HloOpcode::kAdd: return TransportReduction::kSum;
    case HloOpcode::kMultiply: return TransportReduction::kProduct;
    case HloOpcode::kMaximum: return TransportReduction::kMax;
    case HloOpcode::kMinimum: return TransportReduction::kMin;
    default: return std::nullopt;
  }
}

std::string CollectiveWhere(std::string_view instruction, int64_t occurrence) {
  std::string where = fmt::format("collective %{}", instruction);
  if (occurrence > 0) where += fmt::format(" (execution {})", occurrence + 1);
  return where;
}

// The buffers hold the row-major bytes only in the default layout.
bool RowMajorArray(const Shape& shape) {
  if (!shape.IsArray()) return false;
  if (!shape.has_layout()) return true;
  const std::vector<int64_t>& order = shape.layout().minor_to_major;
  if (static_cast<int64_t>(order.size()) != shape.rank()) return false;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (order[i] != shape.rank() - 1 - i) return false;
  }
  return true;
}

int64_t DimsProduct(const Shape& shape, int64_t from, int64_t to) {
  int64_t product = 1;
  for (int64_t i = from; i < to; ++i) product *= shape.dimensions()[i];
  return product;
}

const Shape& ResultShape(const HloInstruction& instruction, size_t k) {
  return instruction.shape().IsTuple() ? instruction.shape().tuple_shapes()[k] : instruction.shape();
}

bool Overlap(const char* a, int64_t a_bytes, const char* b, int64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

}  // namespace

std::vector<int64_t> DevicesOfRank(int64_t num_devices, int rank, int num_ranks) {
  std::vector<int64_t> devices;
  if (num_ranks <= 0 || rank < 0 || rank >= num_ranks) return devices;
  for (int64_t d = num_devices * rank / num_ranks; d < num_devices * (rank + 1) / num_ranks; ++d) {
    devices.push_back(d);
  }
  return devices;
}

DistributedRendezvous::DistributedRendezvous(const DeviceTopology& topology,
                                             CollectiveTransport* transport, double timeout_seconds)
    : CollectiveRendezvous(topology.num_devices(), timeout_seconds),
      topology_(topology),
      transport_(transport),
      timeout_seconds_(timeout_seconds),
      local_devices_(DevicesOfRank(topology.num_devices(), transport->rank(), transport->num_ranks())),
      rank_of_device_(topology.num_devices(), 0),
      finished_(topology.num_devices(), false) {
  for (int r = 0; r < transport->num_ranks(); ++r) {
    for (int64_t d : DevicesOfRank(topology.num_devices(), r, transport->num_ranks())) {
      rank_of_device_[d] = r;
    }
  }
}

StatusOr<const DistributedRendezvous::Plan*> DistributedRendezvous::PlanFor(
    const HloInstruction& instruction, int64_t) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = plans_.find(instruction.name());
  if (it != plans_.end()) return &it->second;
  ASSIGN_OR_RETURN(auto groups, ParticipatingDeviceGroups(instruction, topology_));
  Plan plan;
  plan.participates.assign(topology_.num_devices(), false);
  for (const auto& group : groups) {
    if (group.size() < 2) continue;
    for (int64_t d : group) {
      plan.participates[d] = true;
      if (rank_of_device_[d] != rank_of_device_[group.front()]) plan.crosses = true;
    }
  }
  const bool all_reduce = instruction.opcode() == HloOpcode::kAllReduce ||
                          instruction.opcode() == HloOpcode::kAllReduceStart;
  if (all_reduce && groups.size() == 1 &&
      static_cast<int64_t>(groups[0].size()) == topology_.num_devices() &&
      topology_.num_devices() == transport_->num_ranks() && instruction.operand_count() == 1 &&
      instruction.operand(0)->shape().IsArray() &&
      transport_->CanReduce(instruction.operand(0)->shape().element_type())) {
    plan.reduction = RecognizeReduction(instruction.to_apply());
  }
  if (plan.crosses) PlanBuffers(instruction, groups, plan);
  return &plans_.emplace(instruction.name(), std::move(plan)).first->second;
}

double DistributedRendezvous::TransportTimeout() const {
  return timeout_seconds_ > 0 ? timeout_seconds_ * 1.5 + 2 : 0;
}

int64_t DistributedRendezvous::LocalParticipants(const Plan& plan) const {
  return std::count_if(local_devices_.begin(), local_devices_.end(),
                       [&](int64_t d) { return plan.participates[d]; });
}

std::vector<std::pair<DistributedRendezvous::Header, std::string>> DistributedRendezvous::Gather(
    const Header& mine, std::string_view payload) {
  std::string blob;
  blob.push_back(mine.kind);
  PutU64(blob, static_cast<uint64_t>(mine.occurrence));
  PutU64(blob, mine.instruction.size());
  blob += mine.instruction;
  PutU64(blob, mine.message.size());
  blob += mine.message;
  blob.append(payload);
  std::string what = mine.kind == 'X' || mine.kind == 'R'
                         ? CollectiveWhere(mine.instruction, mine.occurrence)
                         : std::string(mine.kind == 'D' ? "the end of the run" : "the start of the run");
  std::vector<std::string> blobs = transport_->AllGather(blob, what, TransportTimeout());
  std::vector<std::pair<Header, std::string>> all;
  for (const std::string& b : blobs) {
    std::string_view in = b;
    Header header;
    uint64_t occurrence = 0;
    if (in.empty()) {
      header.kind = 'F';
      header.message = "sent nothing";
    } else {
      header.kind = in[0];
      in.remove_prefix(1);
      if (!GetU64(in, occurrence) || !GetString(in, header.instruction) ||
          !GetString(in, header.message)) {
        header.kind = 'F';
        header.message = "sent an unreadable header";
      }
      header.occurrence = static_cast<int64_t>(occurrence);
    }
    all.emplace_back(std::move(header), std::string(in));
  }
  return all;
}

std::optional<std::string> DistributedRendezvous::Disagreement(
    const std::vector<std::pair<Header, std::string>>& all, const Header& mine) const {
  for (size_t r = 0; r < all.size(); ++r) {
    if (all[r].first.kind == 'F') return fmt::format("rank {} failed: {}", r, all[r].first.message);
  }
  bool agree = true;
  for (const auto& [header, payload] : all) {
    agree = agree && header.kind == mine.kind && header.instruction == mine.instruction &&
            header.occurrence == mine.occurrence;
  }
  if (agree) return std::nullopt;
  std::vector<std::string> parts;
  for (size_t r = 0; r < all.size(); ++r) {
    const Header& h = all[r].first;
    std::string doing = h.kind == 'S'   ? "is ready to run"
                        : h.kind == 'D' ? "finished its run"
                                        : "waits at " + CollectiveWhere(h.instruction, h.occurrence);
    parts.push_back(fmt::format("rank {} {}", r, doing));
  }
  return fmt::format("the processes cannot meet: {}", fmt::join(parts, "; "));
}

Status DistributedRendezvous::Conclude(const Header& mine) {
  std::lock_guard<std::mutex> step(step_mutex_);
  auto all = Gather(mine, "");
  if (mine.kind == 'F') return Error(mine.message);
  if (auto why = Disagreement(all, mine)) {
    std::lock_guard<std::mutex> lock(mutex_);
    verdict_ = Error(*why);
    return *verdict_;
  }
  return OkStatus();
}

Status DistributedRendezvous::Start(const Status& ready) {
  if (verdict_) return ready.ok() ? *verdict_ : ready;
  Status s = Conclude(Header{.kind = ready.ok() ? 'S' : 'F', .message = ready.message()});
  return ready.ok() ? s : ready;
}

Status DistributedRendezvous::Finish(const Status& outcome) {
  {
    // A step already failed on every process: they all stopped stepping.
    std::lock_guard<std::mutex> lock(mutex_);
    if (verdict_) return outcome.ok() ? *verdict_ : outcome;
  }
  Status s = Conclude(Header{.kind = outcome.ok() ? 'D' : 'F', .message = outcome.message()});
  return outcome.ok() ? s : outcome;
}

Status DistributedRendezvous::Step(const HloInstruction& instruction, int64_t occurrence,
                                   const Plan& plan, Slot& slot) {
  std::lock_guard<std::mutex> step(step_mutex_);
  Header mine{.kind = plan.reduction ? 'R' : 'X', .instruction = instruction.name(),
              .occurrence = occurrence};
  const int my_rank = transport_->rank();
  if (plan.reduction) {
    auto all = Gather(mine, "");
    if (auto why = Disagreement(all, mine)) return Error(*why);
    // In place: the slot holds this process's one value, which no one else reads.
    Literal& value = *slot.local.begin()->second;
    transport_->AllReduce(CollectiveTransport::kEveryProcess, value.untyped_data(),
                          value.element_count(), value.shape().element_type(),
                          *plan.reduction, CollectiveWhere(mine.instruction, occurrence),
                          TransportTimeout());
    slot.reduced = slot.local.begin()->second;
    return OkStatus();
  }
  std::string payload;
  for (int64_t d : local_devices_) {
    if (!plan.participates[d]) continue;
    ForEachArrayLeaf(*slot.local.at(d), [&](const Literal& leaf) {
      payload.append(reinterpret_cast<const char*>(leaf.untyped_data()), leaf.size_bytes());
    });
  }
  auto all = Gather(mine, payload);
  if (auto why = Disagreement(all, mine)) return Error(*why);
  const Literal& like = *slot.local.begin()->second;
  slot.all.assign(topology_.num_devices(), nullptr);
  for (int r = 0; r < static_cast<int>(all.size()); ++r) {
    std::string_view in = all[r].second;
    for (int64_t d : DevicesOfRank(topology_.num_devices(), r, transport_->num_ranks())) {
      if (!plan.participates[d]) continue;
      if (r == my_rank) {
        slot.all[d] = slot.local.at(d);
        continue;
      }
      Literal value(like.shape());
      if (!ReadArrayLeaves(in, value)) {
        return Error(fmt::format("{}: rank {} brought {} bytes, too few for its devices' {}",
                                 CollectiveWhere(mine.instruction, occurrence), r, all[r].second.size(),
                                 like.shape().ToString(false)));
      }
      slot.all[d] = std::make_shared<const Literal>(std::move(value));
    }
    if (r != my_rank && !in.empty()) {
      return Error(fmt::format("{}: rank {} brought {} bytes more than its devices' {}",
                               CollectiveWhere(mine.instruction, occurrence), r, in.size(),
                               like.shape().ToString(false)));
    }
  }
  return OkStatus();
}

StatusOr<std::vector<std::shared_ptr<const Literal>>> DistributedRendezvous::Meet(
    const HloInstruction& instruction, int64_t occurrence, int64_t device,
    std::span<const int64_t> group, Literal value) {
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(instruction, 0));
  if (!plan->crosses) {
    return CollectiveRendezvous::Meet(instruction, occurrence, device, group, std::move(value));
  }
  std::vector<std::shared_ptr<const Literal>> values;
  auto shared = std::make_shared<Literal>(std::move(value));
  RETURN_IF_ERROR(Arrive(
      instruction, occurrence, *plan, [&](Slot& slot) { slot.local[device] = shared; },
      [&](Slot& slot) { return Step(instruction, occurrence, *plan, slot); },
      [&](Slot& slot) {
        if (slot.reduced) {
          // The reduction itself: the evaluator takes one value for the group as its result.
          values.push_back(slot.reduced);
        } else {
          for (int64_t member : group) values.push_back(slot.all[member]);
        }
      }));
  return values;
}

bool DistributedRendezvous::MeetsInProcess(const HloInstruction& instruction) {
  auto plan = PlanFor(instruction, 0);
  return plan.ok() && !(*plan)->crosses;
}

bool DistributedRendezvous::CanMeetOnBuffers(const HloInstruction& instruction) {
  auto plan = PlanFor(instruction, 0);
  return plan.ok() && (*plan)->crosses && (*plan)->on_buffers;
}

Status DistributedRendezvous::MeetOnBuffers(const HloInstruction& instruction, int64_t occurrence,
                                            int64_t device, std::span<const char* const> operands,
                                            std::span<char* const> results) {
  ASSIGN_OR_RETURN(const Plan* plan, PlanFor(instruction, 0));
  if (!plan->crosses || !plan->on_buffers) {
    return Error(fmt::format("%{} does not meet on buffers", instruction.name()));
  }
  Buffers mine{{operands.begin(), operands.end()}, {results.begin(), results.end()}};
  return Arrive(
      instruction, occurrence, *plan, [&](Slot& slot) { slot.buffers[device] = mine; },
      [&](Slot& slot) { return StepOnBuffers(instruction, occurrence, *plan, slot); },
      [](Slot&) {});
}

Status DistributedRendezvous::Arrive(const HloInstruction& instruction, int64_t occurrence,
                                     const Plan& plan, const std::function<void(Slot&)>& deposit,
                                     const std::function<Status(Slot&)>& step,
                                     const std::function<void(Slot&)>& leave) {
  const int64_t participants = LocalParticipants(plan);
  std::unique_lock<std::mutex> lock(mutex_);
  if (verdict_) return *verdict_;
  if (failure_) return *failure_;
  const auto key = std::make_pair(instruction.name(), occurrence);
  Slot& slot = slots_[key];
  deposit(slot);
  const auto depart = [&]() -> Status {
    leave(slot);
    if (++slot.departed == participants) slots_.erase(key);
    return OkStatus();
  };
  const auto arrived = [&](int64_t d) { return slot.local.count(d) > 0 || slot.buffers.count(d) > 0; };
  if (static_cast<int64_t>(slot.local.size() + slot.buffers.size()) == participants) {
    slot.stepping = true;
    lock.unlock();
    Status stepped = step(slot);
    lock.lock();
    slot.done = true;
    if (!stepped.ok() && !verdict_) verdict_ = stepped;
    changed_.notify_all();
    if (!stepped.ok()) return *verdict_;
    return depart();
  }
  const auto deadline = std::chrono::steady_clock::now() +
                        std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                            std::chrono::duration<double>(timeout_seconds_));
  while (!slot.done) {
    if (verdict_) return *verdict_;
    if (failure_ && !slot.stepping) return *failure_;
    if (!slot.stepping) {
      std::vector<int64_t> missing;
      bool gone = false;
      for (int64_t d : local_devices_) {
        if (plan.participates[d] && !arrived(d)) {
          missing.push_back(d);
          gone = gone || finished_[d];
        }
      }
      const bool late = timeout_seconds_ > 0 && std::chrono::steady_clock::now() >= deadline;
      if (gone || late) {
        failure_ = Error(fmt::format("{} cannot complete{}: device{} {} never arrived ({})",
                                     CollectiveWhere(instruction.name(), occurrence),
                                     late ? fmt::format(" within {:g} s", timeout_seconds_) : "",
                                     missing.size() > 1 ? "s" : "", fmt::join(missing, ", "),
                                     gone ? "finished its program" : "still running"));
        changed_.notify_all();
        return *failure_;
      }
    }
    changed_.wait_for(lock, std::chrono::milliseconds(50));
  }
  if (verdict_) return *verdict_;
  return depart();
}

void DistributedRendezvous::PlanBuffers(const HloInstruction& instruction,
                                        const std::vector<std::vector<int64_t>>& groups,
                                        Plan& plan) const {
  const HloOpcode opcode = instruction.opcode();
  const bool reduces = opcode == HloOpcode::kAllReduce || opcode == HloOpcode::kReduceScatter;
  if (!reduces && opcode != HloOpcode::kAllGather && opcode != HloOpcode::kCollectivePermute &&
      opcode != HloOpcode::kAllToAll) {
    return;
  }
  const int64_t count = instruction.operand_count();
  if (count < 1 || instruction.shape().IsTuple() != (count > 1)) return;
  if (instruction.shape().IsTuple() &&
      static_cast<int64_t>(instruction.shape().tuple_shapes().size()) != count) {
    return;
  }
  if ((opcode == HloOpcode::kCollectivePermute || opcode == HloOpcode::kAllToAll) && count != 1) return;
  for (int64_t k = 0; k < count; ++k) {
    const Shape& in = instruction.operand(k)->shape();
    const Shape& out = ResultShape(instruction, static_cast<size_t>(k));
    if (!RowMajorArray(in) || !RowMajorArray(out) || in.element_type() != out.element_type() ||
        in.rank() != out.rank()) {
      return;
    }
    if (opcode == HloOpcode::kAllReduce || opcode == HloOpcode::kCollectivePermute) {
      if (in.num_elements() != out.num_elements()) return;
    } else if (opcode == HloOpcode::kAllToAll) {
      // The array form: dimension d split into one block per member, the blocks exchanged.
      if (instruction.dimensions().size() != 1 || in.dimensions() != out.dimensions()) return;
      const int64_t d = instruction.dimensions()[0];
      if (d < 0 || d >= in.rank()) return;
      for (const auto& group : groups) {
        if (in.dimensions()[d] % static_cast<int64_t>(group.size()) != 0) return;
      }
    } else {
      if (instruction.dimensions().size() != 1) return;
      const int64_t d = instruction.dimensions()[0];
      if (d < 0 || d >= in.rank()) return;
      const int64_t whole = opcode == HloOpcode::kAllGather ? out.dimensions()[d] : in.dimensions()[d];
      const int64_t piece = opcode == HloOpcode::kAllGather ? in.dimensions()[d] : out.dimensions()[d];
      for (const auto& group : groups) {
        if (piece * static_cast<int64_t>(group.size()) != whole) return;
      }
      for (int64_t i = 0; i < in.rank(); ++i) {
        if (i != d && in.dimensions()[i] != out.dimensions()[i]) return;
      }
    }
    if (reduces) {
      bool swapped = false;
      if (!transport_->CanReduce(in.element_type()) ||
          evaluator_internal::WholeArrayFold(instruction.to_apply(), in.element_type(), swapped) ==
              nullptr) {
        return;
      }
    }
  }
  if (reduces) {
    plan.buffer_reduction = RecognizeReduction(instruction.to_apply());
    if (!plan.buffer_reduction) return;
  }
  for (const auto& group : groups) {
    if (group.size() < 2) return;  // a device alone: the generic way copies it
  }
  if (opcode == HloOpcode::kCollectivePermute) {
    auto sources = PermuteSources(instruction, topology_);
    if (!sources.ok()) return;
    plan.permute_source = std::move(*sources);
    plan.on_buffers = true;
    return;
  }
  // Aligned groups: each process's members of a group follow each other in the group's order,
  // as many from each of its processes, and each process has members in one group only.
  const int ranks = transport_->num_ranks();
  std::vector<int> group_of_rank(static_cast<size_t>(ranks), -1);
  const int my_rank = transport_->rank();
  std::vector<std::vector<int>> rank_orders;
  for (size_t g = 0; g < groups.size(); ++g) {
    const auto& group = groups[g];
    std::vector<int> order;  // the group's processes, in its order
    std::vector<int64_t> runs;
    for (size_t m = 0; m < group.size(); ++m) {
      const int r = rank_of_device_[group[m]];
      if (m == 0 || r != order.back()) {
        if (std::find(order.begin(), order.end(), r) != order.end()) return;  // interleaved
        if (group_of_rank[r] != -1) return;  // members in two groups
        group_of_rank[r] = static_cast<int>(g);
        order.push_back(r);
        runs.push_back(0);
      }
      ++runs.back();
    }
    for (int64_t run : runs) {
      if (run != runs.front()) return;
    }
    const auto mine = std::find(order.begin(), order.end(), my_rank);
    if (mine != order.end()) {
      plan.color = static_cast<int>(g);
      plan.key = static_cast<int>(mine - order.begin());
      plan.group_size = static_cast<int64_t>(group.size());
      for (int64_t d : group) {
        if (rank_of_device_[d] == my_rank) plan.local_members.push_back(d);
      }
    }
    rank_orders.push_back(std::move(order));
  }
  plan.every_process = groups.size() == 1;
  for (int r = 0; plan.every_process && r < ranks; ++r) {
    plan.every_process = rank_orders[0].size() == static_cast<size_t>(ranks) && rank_orders[0][r] == r;
  }
  plan.group_set = ReplicaGroupsToString(groups);
  plan.on_buffers = !plan.local_members.empty();
}

Status DistributedRendezvous::StepOnBuffers(const HloInstruction& instruction, int64_t occurrence,
                                            const Plan& plan, Slot& slot) {
  std::lock_guard<std::mutex> step(step_mutex_);
  Header mine{.kind = 'X', .instruction = instruction.name(), .occurrence = occurrence};
  auto all = Gather(mine, "");
  if (auto why = Disagreement(all, mine)) return Error(*why);
  const std::string what = CollectiveWhere(instruction.name(), occurrence);
  const double timeout = TransportTimeout();
  const HloOpcode opcode = instruction.opcode();
  const int my_rank = transport_->rank();
  const auto buffers = [&](int64_t device) -> const Buffers& { return slot.buffers.at(device); };

  if (opcode == HloOpcode::kCollectivePermute) {
    const Shape& shape = instruction.operand(0)->shape();
    const int64_t bytes = shape_util::ByteSizeOf(shape);
    std::vector<int64_t> target(plan.permute_source.size(), -1);
    for (size_t d = 0; d < plan.permute_source.size(); ++d) {
      if (plan.permute_source[d] >= 0) target[plan.permute_source[d]] = static_cast<int64_t>(d);
    }
    std::vector<TransportSend> sends;
    std::vector<TransportReceive> receives;
    // An operand that a received result would overwrite is sent from a copy.
    std::vector<std::vector<char>> copies;
    copies.reserve(slot.buffers.size());
    for (const auto& [d, b] : slot.buffers) {
      const int64_t t = target[d];
      if (t >= 0 && rank_of_device_[t] != my_rank && bytes > 0) {
        const char* data = b.operands[0];
        if (Overlap(data, bytes, b.results[0], bytes)) {
          copies.emplace_back(data, data + bytes);
          data = copies.back().data();
        }
        sends.push_back({data, bytes, rank_of_device_[t], t});
      }
      const int64_t source = plan.permute_source[d];
      if (source >= 0 && rank_of_device_[source] != my_rank && bytes > 0) {
        receives.push_back({b.results[0], bytes, rank_of_device_[source], d});
      }
    }
    // Local pairs read operands before anything is received over them.
    std::vector<std::pair<int64_t, std::vector<char>>> local;
    for (const auto& [d, b] : slot.buffers) {
      const int64_t source = plan.permute_source[d];
      if (source >= 0 && rank_of_device_[source] == my_rank) {
        const char* from = buffers(source).operands[0];
        local.emplace_back(d, std::vector<char>(from, from + bytes));
      }
    }
    transport_->Exchange(sends, receives, what, timeout);
    for (auto& [d, values] : local) {
      if (bytes > 0) std::memcpy(buffers(d).results[0], values.data(), static_cast<size_t>(bytes));
    }
    for (const auto& [d, b] : slot.buffers) {
      if (plan.permute_source[d] < 0 && bytes > 0) std::memset(b.results[0], 0, static_cast<size_t>(bytes));
    }
    return OkStatus();
  }

  int communicator = CollectiveTransport::kEveryProcess;
  if (!plan.every_process) {
    // Made once per set of groups, and kept by the transport for the later runs' rendezvous.
    communicator = transport_->CommunicatorFor(plan.group_set, plan.color, plan.key, what, timeout);
  }
  const std::vector<int64_t>& members = plan.local_members;
  const size_t local = members.size();
  const int64_t group = plan.group_size;
  for (size_t k = 0; k < static_cast<size_t>(instruction.operand_count()); ++k) {
    const Shape& operand = instruction.operand(static_cast<int64_t>(k))->shape();
    const Shape& result = ResultShape(instruction, k);
    const PrimitiveType type = operand.element_type();
    const int64_t width = ByteWidth(type);
    const int64_t n = operand.num_elements();
    const int64_t result_n = result.num_elements();
    if (n == 0 || result_n == 0) continue;
    std::vector<const char*> sources;
    for (int64_t d : members) sources.push_back(buffers(d).operands[k]);
    bool swapped = false;
    const bool reduces = opcode == HloOpcode::kAllReduce || opcode == HloOpcode::kReduceScatter;
    evaluator_internal::BinaryKernel fold =
        reduces ? evaluator_internal::WholeArrayFold(instruction.to_apply(), type, swapped) : nullptr;
    if (opcode == HloOpcode::kAllReduce) {
      // This process's members folded into the first one's result, reduced over the processes
      // in place there, and copied to the others'.
      char* acc = buffers(members[0]).results[k];
      evaluator_internal::FoldInOrder(fold, swapped, sources, acc, n, width);
      transport_->AllReduce(communicator, acc, n, type, *plan.buffer_reduction, what, timeout);
      for (size_t j = 1; j < local; ++j) {
        std::memcpy(buffers(members[j]).results[k], acc, static_cast<size_t>(n * width));
      }
      continue;
    }
    const int64_t d = instruction.dimensions()[0];
    const int64_t outer = DimsProduct(operand, 0, d);
    if (opcode == HloOpcode::kAllToAll) {
      // Member g's operand holds, under each of the `outer` leading indices, one block for every
      // member; member m's result holds there every member's block for m, in member order. Each
      // process sends a process its members' blocks for that process's members, together.
      const int64_t block = n / outer / group;
      const int64_t block_bytes = block * width;
      const int64_t L = static_cast<int64_t>(local);
      const int64_t processes = group / L;
      const int64_t chunk = L * L * outer * block_bytes;  // per process, both ways
      std::vector<char> sent(static_cast<size_t>(processes * chunk));
      std::vector<char> received(sent.size());
      for (int64_t p = 0; p < processes; ++p) {
        for (int64_t j = 0; j < L; ++j) {
          for (int64_t i = 0; i < L; ++i) {
            for (int64_t o = 0; o < outer; ++o) {
              std::memcpy(sent.data() + p * chunk + ((j * L + i) * outer + o) * block_bytes,
                          sources[j] + (o * group + p * L + i) * block_bytes,
                          static_cast<size_t>(block_bytes));
            }
          }
        }
      }
      transport_->AllToAllBytes(communicator, sent.data(), received.data(), chunk, what, timeout);
      for (int64_t p = 0; p < processes; ++p) {
        for (int64_t j = 0; j < L; ++j) {
          for (int64_t i = 0; i < L; ++i) {
            char* out = buffers(members[i]).results[k];
            for (int64_t o = 0; o < outer; ++o) {
              std::memcpy(out + (o * group + p * L + j) * block_bytes,
                          received.data() + p * chunk + ((j * L + i) * outer + o) * block_bytes,
                          static_cast<size_t>(block_bytes));
            }
          }
        }
      }
      continue;
    }
    if (opcode == HloOpcode::kReduceScatter) {
      // Member m's result is block m of dimension d under each of the `outer` leading indices:
      // packed member by member, each process's members' blocks follow each other.
      const int64_t piece = DimsProduct(result, d, result.rank());
      std::vector<char> folded;
      const char* whole = sources[0];
      if (local > 1) {
        folded.resize(static_cast<size_t>(n * width));
        evaluator_internal::FoldInOrder(fold, swapped, sources, folded.data(), n, width);
        whole = folded.data();
      }
      std::vector<char> packed;
      if (outer > 1) {
        packed.resize(static_cast<size_t>(n * width));
        for (int64_t m = 0; m < group; ++m) {
          for (int64_t o = 0; o < outer; ++o) {
            std::memcpy(packed.data() + (m * outer + o) * piece * width,
                        whole + (o * group + m) * piece * width, static_cast<size_t>(piece * width));
          }
        }
        whole = packed.data();
      }
      std::vector<char> received;
      char* into = buffers(members[0]).results[k];
      if (local > 1) {
        received.resize(static_cast<size_t>(local * result_n * width));
        into = received.data();
      }
      transport_->ReduceScatter(communicator, whole, into, static_cast<int64_t>(local) * result_n,
                                type, *plan.buffer_reduction, what, timeout);
      for (size_t j = 0; j < local && local > 1; ++j) {
        std::memcpy(buffers(members[j]).results[k], received.data() + j * result_n * width,
                    static_cast<size_t>(result_n * width));
      }
      continue;
    }
    // All-gather: each process brings its members' operands one after another; member m's
    // operand lands as block m of dimension d under each leading index.
    const int64_t piece = DimsProduct(operand, d, operand.rank());
    std::vector<char> sent;
    const char* send = sources[0];
    if (local > 1) {
      sent.resize(static_cast<size_t>(local * n * width));
      for (size_t j = 0; j < local; ++j) {
        std::memcpy(sent.data() + j * n * width, sources[j], static_cast<size_t>(n * width));
      }
      send = sent.data();
    }
    char* first = buffers(members[0]).results[k];
    const bool direct = outer == 1 && !Overlap(first, result_n * width, send, local * n * width);
    std::vector<char> received;
    char* into = first;
    if (!direct) {
      received.resize(static_cast<size_t>(result_n * width));
      into = received.data();
    }
    transport_->AllGatherBytes(communicator, send, into, static_cast<int64_t>(local) * n * width,
                               what, timeout);
    for (size_t j = 0; j < local; ++j) {
      char* out = buffers(members[j]).results[k];
      if (outer == 1) {
        if (out != into) std::memcpy(out, into, static_cast<size_t>(result_n * width));
        continue;
      }
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t m = 0; m < group; ++m) {
          std::memcpy(out + (o * group + m) * piece * width, into + (m * outer + o) * piece * width,
                      static_cast<size_t>(piece * width));
        }
      }
    }
  }
  return OkStatus();
}

void DistributedRendezvous::DeviceFinished(int64_t device) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (device >= 0 && device < topology_.num_devices()) finished_[device] = true;
    changed_.notify_all();
  }
  CollectiveRendezvous::DeviceFinished(device);
}

void DistributedRendezvous::Abort(const Status& why) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!failure_) failure_ = why;
    changed_.notify_all();
  }
  CollectiveRendezvous::Abort(why);
}

}  // namespace xlens
