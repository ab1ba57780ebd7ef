// The rendezvous of a run spread over several processes (xlens run --distributed=mpi): each
// process runs some of the devices (DevicesOfRank), and a collective whose groups cross processes
// meets through a CollectiveTransport (collective_transport.h) instead of in memory.
//
// Design: every device runs the same program, so every process reaches its collectives in the
// same order. For each run of such a collective, once this process's members have all brought
// their values, the last of them takes one step over the transport for the whole process: one
// all-gather of a small header (which collective, which run) and of the serialized values of its
// devices, from which each device picks its group's values. An all-reduce of one array of a type
// the transport reduces, over one group of every device with one device per process, is one
// MPI_Allreduce instead (its to_apply recognisably add, multiply, maximum or minimum), so its
// bandwidth is MPI's. Collectives whose groups all stay within one process meet in memory as
// CollectiveRendezvous's do, with no step.
//
// Failure: the header says what each process is doing, so a process that failed (before the
// run, or during it) or finished tells the others in the step they are waiting in, and every
// process reaches the same one-line verdict from the same headers (Start, Finish and every
// step). A process that never comes ends every process after the timeout (the transport's).
#pragma once

#include <condition_variable>
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
  void DeviceFinished(int64_t device) override;
  void Abort(const Status& why) override;

 private:
  // What every process knows of one collective instruction from the module alone.
  struct Plan {
    bool crosses = false;                 // some group spans two processes
    std::vector<bool> participates;       // by device: in a group of two or more
    std::optional<TransportReduction> reduction;  // a transport all-reduce applies
  };
  // One run of a collective on this process.
  struct Slot {
    std::map<int64_t, std::shared_ptr<Literal>> local;  // by device (a reduction works in place)
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
