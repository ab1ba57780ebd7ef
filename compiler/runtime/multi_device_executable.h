// A module compiled for the CPU once per simulated device and run on all of them at once in one
// process: each device has its own executable (its own buffers), runs in a thread of its own, and
// meets the others in its collectives (CollectiveThunk) with the evaluator's semantics and its
// rendezvous, so a meeting that can never complete fails instead of hanging.
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::runtime {

// Each device holds a whole executable (its code and its buffers): beyond this many devices the
// evaluator (EvaluateModuleOnDevices, up to kMaxSimulatedDevices) is the way to run a module.
inline constexpr int64_t kMaxCompiledDevices = 64;

class MultiDeviceExecutable {
 public:
  // Checks the module's collectives against `topology` (CheckModuleCollectives) and compiles one
  // executable per device (at most kMaxCompiledDevices), or only for `devices` when given (the
  // devices this process runs of a run spread over processes; the others are never run here).
  static StatusOr<std::unique_ptr<MultiDeviceExecutable>> Compile(
      const HloModule& module, const DeviceTopology& topology, const CompileOptions& options,
      const std::vector<int64_t>& devices = {});

  // Runs every device on its arguments (per_device_arguments[d], one literal per entry
  // parameter): result d is device d's. The first failure stops the others and is the error.
  // A device that cannot stop (compiled code in an endless loop) is left behind after
  // options.abandon_after_seconds, its executable kept alive while it runs; later calls then
  // fail, since that device still uses it.
  // With `thunk_ns`, each device's thunk times are added into (*thunk_ns)[d] (one entry per
  // thunk of executable(d), for the per-HLO profile). While a trace is recorded each device's
  // thread is named for its device (DeviceThreadName, multi_device_trace.h).
  StatusOr<std::vector<Literal>> Execute(std::span<const std::vector<Literal>> per_device_arguments,
                                         const MultiDeviceOptions& options,
                                         const std::atomic<bool>* cancel = nullptr,
                                         std::vector<std::vector<int64_t>>* thunk_ns = nullptr);

  const DeviceTopology& topology() const { return topology_; }
  // Device d's executable.
  const Executable& executable(int64_t device) const { return *executables_[device]; }
  // The time all compilations took.
  int64_t compile_ns() const { return compile_ns_; }

 private:
  DeviceTopology topology_;
  std::vector<std::shared_ptr<Executable>> executables_;
  int64_t compile_ns_ = 0;
  int64_t left_behind_ = 0;  // devices of an earlier run still running
};

}  // namespace xlens::runtime
