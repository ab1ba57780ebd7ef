// The GPU backend's collectives (replica-id, partition-id, all-reduce, all-gather,
// reduce-scatter, all-to-all, collective-permute, collective-broadcast and the -start/-done
// pairs), between the devices of one process, each device a GpuExecutable on a GpuDevice of its
// own (gpu_multi_device_executable.h).
//
// On real GPUs with NCCL (nccl_library.h), what NCCL takes is NCCL calls on the device's stream
// through the communicator of the device's group. Everything else meets at the devices'
// rendezvous with the CPU runtime's collective (CollectiveThunk: the evaluator's semantics and
// reductions, collective_rendezvous.h): on the simulator, whose device memory is host memory, on
// the device buffers themselves; on a real GPU through host copies of the operands and results.
// The same instruction therefore gives the evaluator's answer on every backend.
//
// While a trace is recorded each execution is a span of category "collective" (device, group,
// rank, bytes, arrived_ns as the CPU runtime's), with what the timing model says it would take
// between GPUs of an NVLink board (gpu_collective_model.h): modelled_ns, bus_bytes, link.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/module.h"
#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_timing_model.h"
#include "compiler/runtime/nccl_library.h"
#include "profiler/trace.h"

namespace xlens::runtime {

class CollectiveThunk;

// The NCCL communicators of a run on real GPUs: one per group of devices that meets in any of
// the module's collectives NCCL takes (ncclCommInitAll over the group's GPUs), destroyed with it.
class NcclCliques {
 public:
  // `gpu_of_device[d]` is device d's CUDA ordinal. NCCL refuses a group that names one GPU twice.
  // With `groups_of_one`, a device alone in its group gets a communicator of one rank too (its
  // collectives then go through NCCL as well: how the calls are tested on a single GPU).
  static StatusOr<std::unique_ptr<NcclCliques>> Create(const NcclLibrary& library,
                                                       const HloModule& module,
                                                       const DeviceTopology& topology,
                                                       const std::vector<int>& gpu_of_device,
                                                       bool groups_of_one = false);
  ~NcclCliques();
  NcclCliques(const NcclCliques&) = delete;
  NcclCliques& operator=(const NcclCliques&) = delete;

  // Device `device`'s communicator in `group` (ranks in the group's order), or nullptr.
  NcclComm Comm(const std::vector<int64_t>& group, int64_t device) const;
  const NcclLibrary& library() const { return library_; }
  // How many communicators were created.
  size_t size() const { return comms_.size(); }

 private:
  explicit NcclCliques(const NcclLibrary& library) : library_(library) {}
  const NcclLibrary& library_;
  std::map<std::vector<int64_t>, std::vector<NcclComm>> comms_;  // by group, by rank
};

// What the collectives of one device's run meet with.
struct GpuCollectiveContext {
  DeviceCollectives* devices = nullptr;  // nullptr: the only device (every group is itself)
  const GpuTarget* target = nullptr;     // the modelled time on the trace; nullptr: none
  const NcclCliques* nccl = nullptr;     // real GPUs: the communicators; nullptr: the host's way
};

class GpuCollective {
 public:
  // `operand_slots` holds the array leaves of each operand, depth-first; `output_slots` those of
  // the result. `hlo` must outlive this (the executable's module owns it).
  GpuCollective(const HloInstruction& hlo, std::vector<std::vector<int64_t>> operand_slots,
                std::vector<int64_t> output_slots);
  ~GpuCollective();

  // Before a device's runs: the trace arguments its spans carry (the modelled time of its group).
  void Prepare(const GpuCollectiveContext& context);
  // Runs once on `device`, whose frame holds the buffers of the slots.
  Status Run(GpuDevice& device, const std::vector<DevicePointer>& frame,
             const GpuCollectiveContext& context) const;
  // What one run takes between GPUs of an NVLink board (gpu_collective_model.h), as Prepare
  // found it for its context's target and group; 0 without a target.
  double modelled_ns() const { return modelled_ns_; }
  // Why NCCL does not take it (empty when it does).
  const std::string& why_not_nccl() const { return why_not_nccl_; }

 private:
  Status RunThroughHost(GpuDevice& device, const std::vector<DevicePointer>& frame,
                        const GpuCollectiveContext& context) const;
  Status RunNccl(GpuDevice& device, const std::vector<DevicePointer>& frame,
                 const GpuCollectiveContext& context) const;

  const HloInstruction* hlo_;
  std::unique_ptr<CollectiveThunk> thunk_;
  std::vector<std::vector<int64_t>> operand_slots_;
  std::vector<int64_t> output_slots_;
  // Every slot the collective reads or writes, with its bytes (for host copies).
  std::map<int64_t, int64_t> slot_bytes_;
  std::optional<NcclPlan> nccl_;
  std::string why_not_nccl_;
  std::vector<profiler::TraceArg> nccl_span_args_;
  double modelled_ns_ = 0;
};

}  // namespace xlens::runtime
