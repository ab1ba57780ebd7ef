// Where simulated devices meet (the multi-device evaluator's, the CPU runtime's): each collective
// instruction (by name: every device runs the same module), each time it runs (a collective in a
// while loop meets once per iteration), gathers the contributions of one group of devices and
// hands every member all of them.
//
// A meeting that can never complete does not hang. It fails at once when a device it waits for
// has finished the program or failed, or when every device still running is waiting in a meeting
// that lacks someone (a deadlock, e.g. devices that took different branches of a conditional);
// and after the timeout otherwise (a device that never comes back). Every waiting device gets the
// same one-line error naming the instruction and the devices that did not arrive.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/instruction.h"
#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

class CollectiveRendezvous {
 public:
  // `cancel` (optional) is polled while waiting: once it reads true the waits end as cancelled.
  CollectiveRendezvous(int64_t num_devices, double timeout_seconds,
                       const std::atomic<bool>* cancel = nullptr);
  // Runs spread over processes meet through a subclass (distributed_rendezvous.h).
  virtual ~CollectiveRendezvous() = default;

  // Device `device` (a member of `group`, in rank order) brings `value` to the `occurrence`-th
  // run of `instruction` (the instruction of that name in its copy of the module); returns every
  // member's value in rank order once all have come (or, from a rendezvous that reduces an
  // all-reduce itself, the one reduced value).
  virtual StatusOr<std::vector<std::shared_ptr<const Literal>>> Meet(const HloInstruction& instruction,
                                                             int64_t occurrence, int64_t device,
                                                             std::span<const int64_t> group,
                                                             Literal value);
  // Whether every member lives in this process, so that what they bring may be addresses of
  // their buffers (MeetStep); a rendezvous spanning processes says no.
  virtual bool InProcess() const { return true; }
  // The same for one collective: a rendezvous spanning processes says yes for a collective whose
  // groups all stay within this process.
  virtual bool MeetsInProcess(const HloInstruction& instruction) { return InProcess(); }
  // Whether `instruction` may meet through MeetOnBuffers: a rendezvous spanning processes that
  // moves the members' buffers itself (typed transport calls on them) for this collective.
  virtual bool CanMeetOnBuffers(const HloInstruction& instruction) { return false; }
  // Runs the `occurrence`-th run of `instruction` (CanMeetOnBuffers) for `device`: operands[k]
  // and results[k] are the buffers (row-major arrays) of its k-th operand and result, filled
  // when this returns OK.
  virtual Status MeetOnBuffers(const HloInstruction& instruction, int64_t occurrence,
                               int64_t device, std::span<const char* const> operands,
                               std::span<char* const> results) {
    return Error("this rendezvous does not meet on buffers");
  }
  // One step (`step` >= 1) of an in-process collective that works on the members' buffers
  // directly: a meeting like Meet's, apart from the one Meet holds for the same run. A collective
  // exchanges its buffers' addresses at one step and waits at the next until every member has
  // finished with them. Only where InProcess().
  StatusOr<std::vector<std::shared_ptr<const Literal>>> MeetStep(const HloInstruction& instruction,
                                                                 int64_t occurrence, int64_t step,
                                                                 int64_t device,
                                                                 std::span<const int64_t> group,
                                                                 Literal value);
  // `device` stopped running the program (done or failed): meetings waiting for it fail.
  virtual void DeviceFinished(int64_t device);
  // Fails every meeting, now and later, with `why` (another device failed).
  virtual void Abort(const Status& why);

 private:
  struct Meeting {
    std::string instruction;  // its name
    int64_t occurrence = 0;
    std::vector<int64_t> group;
    std::vector<std::shared_ptr<const Literal>> values;  // by rank
    int64_t arrived = 0;
    int64_t departed = 0;
  };
  // The instruction's name, its run, the step (0: Meet's), the group's first device. By name,
  // not address: each compiled device holds its own copy of the module.
  using Key = std::tuple<std::string, int64_t, int64_t, int64_t>;

  StatusOr<std::vector<std::shared_ptr<const Literal>>> MeetAt(const HloInstruction& instruction,
                                                               int64_t occurrence, int64_t step,
                                                               int64_t device,
                                                               std::span<const int64_t> group,
                                                               Literal value);

  // "%ar (run 3)"
  static std::string Where(const Meeting& meeting);
  // The error of a meeting missing devices, saying where each of them is. Called under mutex_.
  std::string MissingMessage(const Meeting& meeting, std::string_view why) const;
  // Whether every running device waits in an incomplete meeting. Called under mutex_.
  bool Deadlocked() const;
  // A complete meeting's values for `rank`, and its cleanup once everyone has left.
  std::vector<std::shared_ptr<const Literal>> Leave(const Key& key, Meeting& meeting);

  const int64_t num_devices_;
  const double timeout_seconds_;
  const std::atomic<bool>* cancel_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<Key, Meeting> meetings_;
  std::vector<const Meeting*> waiting_in_;  // per device: the meeting it waits in, or nullptr
  std::vector<bool> finished_;
  std::optional<Status> aborted_;
};

// One simulated device of a multi-device evaluation: its ids, the rendezvous it meets the others
// at, and how many times it has run each collective.
class DeviceCollectives {
 public:
  DeviceCollectives(DeviceTopology topology, int64_t replica, int64_t partition,
                    CollectiveRendezvous* rendezvous)
      : topology_(topology), replica_(replica), partition_(partition), rendezvous_(rendezvous) {}

  const DeviceTopology& topology() const { return topology_; }
  int64_t replica() const { return replica_; }
  int64_t partition() const { return partition_; }
  int64_t device_id() const { return topology_.DeviceId(replica_, partition_); }
  // nullptr on a single device (every group is that device).
  CollectiveRendezvous* rendezvous() const { return rendezvous_; }
  // The run number of this execution of `instruction` on this device (0, 1, ...).
  int64_t NextOccurrence(const HloInstruction& instruction) { return occurrences_[&instruction]++; }

 private:
  DeviceTopology topology_;
  int64_t replica_ = 0;
  int64_t partition_ = 0;
  CollectiveRendezvous* rendezvous_ = nullptr;
  std::unordered_map<const HloInstruction*, int64_t> occurrences_;
};

}  // namespace xlens
