#include "compiler/hlo/collective_rendezvous.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

namespace xlens {

CollectiveRendezvous::CollectiveRendezvous(int64_t num_devices, double timeout_seconds,
                                           const std::atomic<bool>* cancel)
    : num_devices_(num_devices),
      timeout_seconds_(timeout_seconds),
      cancel_(cancel),
      waiting_in_(num_devices, nullptr),
      finished_(num_devices, false) {}

std::string CollectiveRendezvous::Where(const Meeting& meeting) {
  std::string where = "%" + meeting.instruction;
  if (meeting.occurrence > 0) where += fmt::format(" (execution {})", meeting.occurrence + 1);
  return where;
}

std::string CollectiveRendezvous::MissingMessage(const Meeting& meeting,
                                                 std::string_view why) const {
  std::vector<int64_t> missing;
  std::vector<std::string> whereabouts;
  for (size_t rank = 0; rank < meeting.group.size(); ++rank) {
    if (meeting.values[rank] != nullptr) continue;
    const int64_t device = meeting.group[rank];
    missing.push_back(device);
    if (finished_[device]) {
      whereabouts.push_back(fmt::format("device {} finished its program", device));
    } else if (waiting_in_[device] != nullptr) {
      whereabouts.push_back(
          fmt::format("device {} waits at {}", device, Where(*waiting_in_[device])));
    } else {
      whereabouts.push_back(fmt::format("device {} is still running", device));
    }
  }
  return fmt::format("collective {} of devices {} cannot complete{}: device{} {} never arrived "
                     "({})", Where(meeting), fmt::join(meeting.group, ", "), why,
                     missing.size() > 1 ? "s" : "", fmt::join(missing, ", "),
                     fmt::join(whereabouts, "; "));
}

bool CollectiveRendezvous::Deadlocked() const {
  bool anyone_waiting = false;
  for (int64_t device = 0; device < num_devices_; ++device) {
    if (finished_[device]) continue;
    const Meeting* meeting = waiting_in_[device];
    if (meeting == nullptr || meeting->arrived == static_cast<int64_t>(meeting->group.size())) {
      return false;
    }
    anyone_waiting = true;
  }
  return anyone_waiting;
}

std::vector<std::shared_ptr<const Literal>> CollectiveRendezvous::Leave(const Key& key,
                                                                        Meeting& meeting) {
  std::vector<std::shared_ptr<const Literal>> values = meeting.values;
  if (++meeting.departed == static_cast<int64_t>(meeting.group.size())) meetings_.erase(key);
  return values;
}

StatusOr<std::vector<std::shared_ptr<const Literal>>> CollectiveRendezvous::Meet(
    const HloInstruction& instruction, int64_t occurrence, int64_t device,
    std::span<const int64_t> group, Literal value) {
  return MeetAt(instruction, occurrence, 0, device, group, std::move(value));
}

StatusOr<std::vector<std::shared_ptr<const Literal>>> CollectiveRendezvous::MeetStep(
    const HloInstruction& instruction, int64_t occurrence, int64_t step, int64_t device,
    std::span<const int64_t> group, Literal value) {
  if (step < 1) return Error(fmt::format("step {} of a collective: steps count from 1", step));
  return MeetAt(instruction, occurrence, step, device, group, std::move(value));
}

StatusOr<std::vector<std::shared_ptr<const Literal>>> CollectiveRendezvous::MeetAt(
    const HloInstruction& instruction, int64_t occurrence, int64_t step, int64_t device,
    std::span<const int64_t> group, Literal value) {
  auto rank_it = std::find(group.begin(), group.end(), device);
  if (group.empty() || rank_it == group.end() || device < 0 || device >= num_devices_) {
    return Error(fmt::format("device {} is not in its own group", device));
  }
  const size_t rank = static_cast<size_t>(rank_it - group.begin());
  std::unique_lock<std::mutex> lock(mutex_);
  if (aborted_) return *aborted_;
  const Key key{instruction.name(), occurrence, step, group.front()};
  Meeting& meeting = meetings_[key];
  if (meeting.values.empty()) {
    meeting.instruction = instruction.name();
    meeting.occurrence = occurrence;
    meeting.group.assign(group.begin(), group.end());
    meeting.values.resize(group.size());
  }
  if (!std::equal(meeting.group.begin(), meeting.group.end(), group.begin(), group.end()) ||
      meeting.values[rank] != nullptr) {
    Status why = Error(fmt::format("collective {}: devices disagree on who meets in it",
                                   Where(meeting)));
    aborted_ = why;
    changed_.notify_all();
    return why;
  }
  meeting.values[rank] = std::make_shared<const Literal>(std::move(value));
  if (++meeting.arrived == static_cast<int64_t>(group.size())) {
    changed_.notify_all();
    return Leave(key, meeting);
  }
  waiting_in_[device] = &meeting;
  // Other waiters re-check for a deadlock now that this device waits too.
  changed_.notify_all();
  const auto start = std::chrono::steady_clock::now();
  const auto deadline =
      start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                  std::chrono::duration<double>(timeout_seconds_));
  auto fail = [&](std::string message) -> Status {
    waiting_in_[device] = nullptr;
    if (!aborted_) {
      aborted_ = Error(std::move(message));
      changed_.notify_all();
    }
    return *aborted_;
  };
  while (true) {
    if (meeting.arrived == static_cast<int64_t>(meeting.group.size())) {
      waiting_in_[device] = nullptr;
      return Leave(key, meeting);
    }
    if (aborted_) {
      waiting_in_[device] = nullptr;
      return *aborted_;
    }
    for (size_t r = 0; r < meeting.group.size(); ++r) {
      if (meeting.values[r] == nullptr && finished_[meeting.group[r]]) {
        return fail(MissingMessage(meeting, ""));
      }
    }
    if (Deadlocked()) return fail(MissingMessage(meeting, " (a deadlock)"));
    if (cancel_ != nullptr && cancel_->load(std::memory_order_relaxed)) {
      waiting_in_[device] = nullptr;
      return Error(fmt::format("waiting at collective {}: cancelled", Where(meeting)));
    }
    const auto now = std::chrono::steady_clock::now();
    if (timeout_seconds_ > 0 && now >= deadline) {
      return fail(MissingMessage(meeting, fmt::format(" within {:g} s", timeout_seconds_)));
    }
    // Woken by arrivals, departures and failures; the short bound polls the cancel flag.
    auto until = now + std::chrono::milliseconds(50);
    if (timeout_seconds_ > 0) until = std::min(until, deadline);
    changed_.wait_until(lock, until);
  }
}

void CollectiveRendezvous::DeviceFinished(int64_t device) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (device >= 0 && device < num_devices_) {
    finished_[device] = true;
    waiting_in_[device] = nullptr;
  }
  changed_.notify_all();
}

void CollectiveRendezvous::Abort(const Status& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!aborted_) aborted_ = why;
  changed_.notify_all();
}

}  // namespace xlens
