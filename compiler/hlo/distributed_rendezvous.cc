#include "compiler/hlo/distributed_rendezvous.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
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
    transport_->AllReduce(value.untyped_data(), value.element_count(), value.shape().element_type(),
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
      bool short_payload = false;
      ForEachArrayLeaf(value, [&](Literal& leaf) {
        if (in.size() < leaf.size_bytes()) {
          short_payload = true;
          return;
        }
        std::memcpy(leaf.untyped_data(), in.data(), leaf.size_bytes());
        in.remove_prefix(leaf.size_bytes());
      });
      if (short_payload) {
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
  const int64_t participants = LocalParticipants(*plan);
  std::unique_lock<std::mutex> lock(mutex_);
  if (verdict_) return *verdict_;
  if (failure_) return *failure_;
  const auto key = std::make_pair(instruction.name(), occurrence);
  Slot& slot = slots_[key];
  slot.local[device] = std::make_shared<Literal>(std::move(value));
  const auto leave = [&]() -> StatusOr<std::vector<std::shared_ptr<const Literal>>> {
    std::vector<std::shared_ptr<const Literal>> values;
    if (slot.reduced) {
      // The reduction itself: the evaluator takes one value for the group as its result.
      values.push_back(slot.reduced);
    } else {
      for (int64_t member : group) values.push_back(slot.all[member]);
    }
    if (++slot.departed == participants) slots_.erase(key);
    return values;
  };
  if (static_cast<int64_t>(slot.local.size()) == participants) {
    slot.stepping = true;
    lock.unlock();
    Status stepped = Step(instruction, occurrence, *plan, slot);
    lock.lock();
    slot.done = true;
    if (!stepped.ok() && !verdict_) verdict_ = stepped;
    changed_.notify_all();
    if (!stepped.ok()) return *verdict_;
    return leave();
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
        if (plan->participates[d] && slot.local.count(d) == 0) {
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
  return leave();
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
