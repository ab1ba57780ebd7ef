// The rendezvous of a run spread over several processes (xlens run --distributed=mpi): each
// process runs some of the devices (DevicesOfRank), and a collective whose groups cross processes
// meets through a CollectiveTransport (collective_transport.h) instead of in memory.
//
// Design: every device runs the same program, so every process reaches its collectives in the
// same order. For each run of such a collective, once this process's members have all brought
// their buffers (or values), the last of them takes one step over the transport for the whole
// process: an all-gather of a small header (which collective, which run, or that the process
// failed), then the collective itself.
//
// The compiled runtime's all-reduce, reduce-scatter, all-gather, all-to-all (its array form) and
// collective-permute of row-major arrays meet on the members' buffers (MeetOnBuffers) with the
// transport's typed calls: MPI_Allreduce, MPI_Reduce_scatter_block, MPI_Allgather and
// MPI_Alltoall on a communicator per group (MPI_Comm_split, made once per set of groups),
// MPI_Isend/MPI_Irecv pairs for a permutation. A process's several members of one group first
// fold (or pack) their buffers in memory and take one place in the communicator. That needs each
// process's members of a group to follow each other in the group's order, and all of them in one
// group ("aligned"), and a reduction MPI has: a to_apply of add, multiply, maximum or minimum, of
// f32, f64 or a signed or unsigned integer of 8 to 64 bits. Anything else (f16, bf16, pred,
// complex, another to_apply, groups interleaved across processes, the tuple form of all-to-all,
// collective-broadcast, the -start forms, the evaluator's Meet) goes the generic way: an
// all-gather of every device's serialized values, from which each device picks its group's (an
// all-reduce over one group of every device with one device per process is one MPI_Allreduce
// there too). Collectives whose groups all stay within one process meet in memory as
// CollectiveRendezvous's do, with no step.
//
// Failure: the header says what each process is doing, so a process that failed (before the
// run, or during it) or finished tells the others in the step they are waiting in, and every
// process reaches the same one-line verdict from the same headers (Start, Finish and every
// step). A process that never comes ends every process after the timeout (the transport's).
#pragma once

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/collective_transport.h"

namespace xlens {

// The devices process `rank` of `num_ranks` runs: a contiguous block, devices spread in order
// (6 devices on 4 processes: {0}, {1, 2}, {3}, {4, 5}). Empty when there are more processes than
// devices.
std::vector<int64_t> DevicesOfRank(int64_t num_devices, int rank, int num_ranks);

class DistributedRendezvous : public CollectiveRendezvous {
 public:
  // `transport` must outlive this; the devices of this process are DevicesOfRank(transport's).
  DistributedRendezvous(const DeviceTopology& topology, CollectiveTransport* transport,
                        double timeout_seconds);

  const std::vector<int64_t>& local_devices() const { return local_devices_; }

  // Before the run: every process says whether it is ready (`ready`); OK when all are, else the
  // same error on every process (the first failed process's message) or, for the process that
  // failed, its own.
  Status Start(const Status& ready);
  // After the run (and its outputs): as Start, with how this process's run ended. A process that
  // finished while others wait in a collective fails them, saying so.
  Status Finish(const Status& outcome);

  StatusOr<std::vector<std::shared_ptr<const Literal>>> Meet(const HloInstruction& instruction,
                                                             int64_t occurrence, int64_t device,
                                                             std::span<const int64_t> group,
                                                             Literal value) override;
  bool InProcess() const override { return false; }
  bool MeetsInProcess(const HloInstruction& instruction) override;
  bool CanMeetOnBuffers(const HloInstruction& instruction) override;
  Status MeetOnBuffers(const HloInstruction& instruction, int64_t occurrence, int64_t device,
                       std::span<const char* const> operands,
                       std::span<char* const> results) override;
  void DeviceFinished(int64_t device) override;
  void Abort(const Status& why) override;

 private:
  // What every process knows of one collective instruction from the module alone.
  struct Plan {
    bool crosses = false;                 // some group spans two processes
    std::vector<bool> participates;       // by device: in a group of two or more
    std::optional<TransportReduction> reduction;  // a transport all-reduce applies
    // MeetOnBuffers applies (see the file comment).
    bool on_buffers = false;
    std::optional<TransportReduction> buffer_reduction;  // all-reduce and reduce-scatter
    std::string group_set;  // the communicator's key: the groups' text
    int color = 0;          // this process's group
    int key = 0;            // this process's place in it
    bool every_process = false;  // one group, the processes in rank order
    std::vector<int64_t> local_members;  // this process's members of its group, in group order
    int64_t group_size = 0;
    std::vector<int64_t> permute_source;  // by device (collective-permute): -1 none
  };
  // A member's buffers (MeetOnBuffers).
  struct Buffers {
    std::vector<const char*> operands;
    std::vector<char*> results;
  };
  // One run of a collective on this process.
  struct Slot {
    std::map<int64_t, std::shared_ptr<Literal>> local;  // by device (a reduction works in place)
    std::map<int64_t, Buffers> buffers;                 // by device, MeetOnBuffers
    bool stepping = false;
    bool done = false;
    std::vector<std::shared_ptr<const Literal>> all;  // by device, once done
    std::shared_ptr<const Literal> reduced;          // a transport all-reduce's result
    int64_t departed = 0;
  };
  struct Header {
    char kind = 0;  // 'X' exchange, 'R' reduce, 'S' ready, 'D' done, 'F' failed
    std::string instruction = {};
    int64_t occurrence = 0;
    std::string message = {};
  };

  StatusOr<const Plan*> PlanFor(const HloInstruction& instruction, int64_t participants_hint);
  // The step for `slot`; called without mutex_.
  Status Step(const HloInstruction& instruction, int64_t occurrence, const Plan& plan, Slot& slot);
  // The step of a MeetOnBuffers slot; called without mutex_.
  Status StepOnBuffers(const HloInstruction& instruction, int64_t occurrence, const Plan& plan,
                       Slot& slot);
  // Decides plan.on_buffers and what it needs.
  void PlanBuffers(const HloInstruction& instruction,
                   const std::vector<std::vector<int64_t>>& groups, Plan& plan) const;
  // Brings this device's part to the slot of `instruction`'s `occurrence` (`deposit` puts it
  // there, under mutex_); the last local member steps (`step`), the others wait for it. Returns
  // the slot's outcome; `leave` (under mutex_) takes what the device needs from a done slot.
  Status Arrive(const HloInstruction& instruction, int64_t occurrence, const Plan& plan,
                const std::function<void(Slot&)>& deposit,
                const std::function<Status(Slot&)>& step, const std::function<void(Slot&)>& leave);
  // One all-gather of headers (and payloads) over every process.
  std::vector<std::pair<Header, std::string>> Gather(const Header& mine, std::string_view payload);
  // The verdict of headers that do not all agree with `mine`; nullopt when they do.
  std::optional<std::string> Disagreement(const std::vector<std::pair<Header, std::string>>& all,
                                          const Header& mine) const;
  Status Conclude(const Header& mine);
  int64_t LocalParticipants(const Plan& plan) const;
  // The transport's time limit: longer than a device's wait for the devices of its own process
  // (the timeout), so that a process whose device is late tells the others why before they give
  // up on it.
  double TransportTimeout() const;

  const DeviceTopology topology_;
  CollectiveTransport* transport_;
  const double timeout_seconds_;
  std::vector<int64_t> local_devices_;
  std::vector<int> rank_of_device_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<std::string, Plan> plans_;
  std::map<std::pair<std::string, int64_t>, Slot> slots_;
  std::vector<bool> finished_;             // by device
  std::optional<Status> failure_;          // this process's run failed (Abort)
  std::optional<Status> verdict_;          // the processes agreed the run failed: no more steps
  std::mutex step_mutex_;                  // one step at a time on the transport
};

}  // namespace xlens
