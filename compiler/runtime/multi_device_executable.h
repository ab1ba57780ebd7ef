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

  // Every device's arguments (one literal per entry parameter), shared with the devices' threads:
  // a device left behind keeps them while it runs.
  using Arguments = std::vector<std::vector<Literal>>;

  // Runs every device on its arguments ((*arguments)[d]): result d is device d's (empty for a
  // device another process runs, options.local_devices). A run works on the devices' buffers:
  // arguments are read where they lie when the program allows it (Executable::borrows_arguments)
  // and copied into the device's buffers otherwise, nothing is copied per run to hand them to the
  // threads, and with `read_results` false the results stay in the devices' buffers (Results()
  // reads them after the last run). The first failure stops the others and is the error.
  // A device that cannot stop (compiled code in an endless loop) is left behind after
  // options.abandon_after_seconds, its executable and arguments kept alive while it runs; later
  // calls then fail, since that device still uses them.
  // With `thunk_ns`, each device's thunk times are added into (*thunk_ns)[d] (one entry per
  // thunk of executable(d), for the per-HLO profile). While a trace is recorded each device's
  // thread is named for its device (DeviceThreadName, multi_device_trace.h).
  StatusOr<std::vector<Literal>> Execute(std::shared_ptr<const Arguments> arguments,
                                         const MultiDeviceOptions& options,
                                         const std::atomic<bool>* cancel = nullptr,
                                         std::vector<std::vector<int64_t>>* thunk_ns = nullptr,
                                         bool read_results = true);
  // The same on a copy of `per_device_arguments` (one run: tests, single calls).
  StatusOr<std::vector<Literal>> Execute(std::span<const std::vector<Literal>> per_device_arguments,
                                         const MultiDeviceOptions& options = {},
                                         const std::atomic<bool>* cancel = nullptr,
                                         std::vector<std::vector<int64_t>>* thunk_ns = nullptr);
  // The last successful run's results, read from the devices' buffers: result d is device d's,
  // empty for a device not compiled here.
  StatusOr<std::vector<Literal>> Results() const;

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
  // The last run's arguments: a result may be a parameter read where it lies.
  std::shared_ptr<const Arguments> last_arguments_;
  bool ran_ = false;
};

}  // namespace xlens::runtime
