// A module compiled by the GPU backend once per device and run on all of them at once in one
// process: each device is a GpuDevice of its own (a GPU simulator with its own memory, or one
// real GPU), holds its own executable and buffers, runs in a thread of its own, and meets the
// others in its collectives (gpu_collectives.h) at the same rendezvous the CPU runtime and the
// evaluator use, so a meeting that can never complete fails instead of hanging. On real GPUs the
// collectives NCCL takes go through NCCL (one communicator per group, created here).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_analysis.h"

namespace xlens::runtime {

// Opens the GpuDevice that device `device` of the topology runs on.
using GpuDeviceOpener = std::function<StatusOr<std::unique_ptr<GpuDevice>>(int64_t device)>;

class GpuMultiDeviceExecutable {
 public:
  // Checks the module's collectives against `topology` (CheckModuleCollectives), opens every
  // device and compiles one executable on each. When the devices run CUDA libraries (real GPUs)
  // and there are several, NCCL is loaded (an error without it) and the communicators of the
  // module's groups created, device d on CUDA device d. `target` (may be null) gives the modelled
  // time of the collectives on the trace. `nccl_on_one_gpu`: NCCL even for one device, each
  // group of one a communicator of one rank (how the NCCL calls are tested on a single GPU).
  static StatusOr<std::unique_ptr<GpuMultiDeviceExecutable>> Compile(
      const HloModule& module, const DeviceTopology& topology, const GpuCompileOptions& options,
      const GpuDeviceOpener& open, const GpuTarget* target = nullptr, bool nccl_on_one_gpu = false);
  ~GpuMultiDeviceExecutable();

  // Runs every device on its arguments (per_device_arguments[d]): result d is device d's. The
  // first failure stops the others and is the error, naming the device (RunOnSimulatedDevices).
  // While a trace is recorded each device's thread is named for its device (DeviceThreadName).
  StatusOr<std::vector<Literal>> Execute(std::span<const std::vector<Literal>> per_device_arguments,
                                         const MultiDeviceOptions& options,
                                         const std::atomic<bool>* cancel = nullptr);

  // One more run of every device with the simulator's analysis observing it
  // (gpu_sim_analysis.h), on the arguments of the last Execute: each device's launches predicted
  // on the target given to Compile. Simulated devices only.
  StatusOr<std::vector<GpuSimAnalysis>> AnalyseRun(const MultiDeviceOptions& options,
                                                   const std::atomic<bool>* cancel,
                                                   int64_t sample_blocks);

  const DeviceTopology& topology() const { return topology_; }
  GpuExecutable& executable(int64_t device) const { return *devices_[static_cast<size_t>(device)]->executable; }
  // The time opening the devices and all compilations took.
  int64_t compile_ns() const { return compile_ns_; }
  // Whether the collectives go through NCCL (real GPUs).
  bool uses_nccl() const { return nccl_ != nullptr; }

 private:
  // Destroyed executable first, then its device.
  struct Device {
    std::unique_ptr<GpuDevice> device;
    std::unique_ptr<GpuExecutable> executable;
  };
  DeviceTopology topology_;
  std::vector<std::shared_ptr<Device>> devices_;
  std::shared_ptr<NcclCliques> nccl_;
  GpuTarget target_;
  bool has_target_ = false;
  int64_t compile_ns_ = 0;
};

}  // namespace xlens::runtime
