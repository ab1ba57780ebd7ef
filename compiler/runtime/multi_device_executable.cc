#include "compiler/runtime/multi_device_executable.h"

#include <algorithm>
#include <chrono>

#include <fmt/format.h>

#include "compiler/hlo/collective_rendezvous.h"
#include "compiler/hlo/parser.h"
#include "compiler/runtime/multi_device_trace.h"
#include "profiler/host_tracer.h"

namespace xlens::runtime {

StatusOr<std::unique_ptr<MultiDeviceExecutable>> MultiDeviceExecutable::Compile(
    const HloModule& module, const DeviceTopology& topology, const CompileOptions& options,
    const std::vector<int64_t>& devices) {
  RETURN_IF_ERROR(CheckTopology(topology));
  const int64_t compiled = devices.empty() ? topology.num_devices() : static_cast<int64_t>(devices.size());
  if (compiled > kMaxCompiledDevices) {
    return Error(fmt::format("{} replicas x {} partitions: at most {} devices are compiled in one "
                             "process, one executable each (xlens eval simulates up to {})",
                             topology.num_replicas, topology.num_partitions, kMaxCompiledDevices,
                             kMaxSimulatedDevices));
  }
  RETURN_IF_ERROR(CheckModuleCollectives(module, topology));
  auto result = std::unique_ptr<MultiDeviceExecutable>(new MultiDeviceExecutable());
  result->topology_ = topology;
  const auto start = std::chrono::steady_clock::now();
  // Each device compiles its own copy (a copy through the text, as the compilation cache makes).
  const std::string text = module.ToString();
  CompileOptions device_options = options;
  device_options.topology = topology;
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    if (!devices.empty() && std::find(devices.begin(), devices.end(), d) == devices.end()) {
      result->executables_.push_back(nullptr);
      continue;
    }
    ASSIGN_OR_RETURN(std::unique_ptr<HloModule> copy, ParseHloModule(text, ParseOptions{.verify = true}));
    ASSIGN_OR_RETURN(std::unique_ptr<Executable> executable, CompileForCpu(std::move(copy), device_options));
    result->executables_.push_back(std::move(executable));
  }
  result->compile_ns_ = std::chrono::duration_cast<std::chrono::nanoseconds>(
                            std::chrono::steady_clock::now() - start).count();
  return result;
}

StatusOr<std::vector<Literal>> MultiDeviceExecutable::Execute(
    std::span<const std::vector<Literal>> per_device_arguments, const MultiDeviceOptions& options,
    const std::atomic<bool>* cancel, std::vector<std::vector<int64_t>>* thunk_ns) {
  const int64_t devices = topology_.num_devices();
  if (static_cast<int64_t>(per_device_arguments.size()) != devices) {
    return Error(fmt::format("{} devices need {} argument lists, got {}", devices, devices,
                             per_device_arguments.size()));
  }
  if (left_behind_ > 0) {
    return Error(fmt::format("{} device{} of an earlier run never stopped and still run{} these "
                             "executables: compile the module again", left_behind_,
                             left_behind_ > 1 ? "s" : "", left_behind_ > 1 ? "" : "s"));
  }
  // A device left behind still holds its executable and its arguments: the program owns copies.
  auto arguments = std::make_shared<std::vector<std::vector<Literal>>>(per_device_arguments.begin(),
                                                                        per_device_arguments.end());
  std::vector<std::shared_ptr<Executable>> executables = executables_;
  MultiDeviceOptions run_options = options;
  run_options.left_behind = &left_behind_;
  // Each device adds into its own vector: no two threads share one.
  if (thunk_ns != nullptr) thunk_ns->resize(static_cast<size_t>(devices));
  auto results = RunOnSimulatedDevices(
      topology_, run_options, cancel,
      [executables, arguments, thunk_ns](DeviceCollectives& device, const std::atomic<bool>*) -> StatusOr<Literal> {
        const size_t id = static_cast<size_t>(device.device_id());
        Executable& executable = *executables[id];
        // The timeline puts this thread's spans on the device's own track.
        if (profiler::TracingEnabled()) profiler::SetCurrentThreadName(DeviceThreadName(device.device_id()));
        executable.set_device(&device);
        Status ran = executable.SetArguments((*arguments)[id]);
        if (ran.ok()) ran = executable.Run(thunk_ns != nullptr ? &(*thunk_ns)[id] : nullptr);
        executable.set_device(nullptr);
        if (!ran.ok()) return ran;
        return executable.Results();
      });
  if (options.left_behind != nullptr) *options.left_behind = left_behind_;
  return results;
}

}  // namespace xlens::runtime
