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
  return Execute(std::make_shared<const Arguments>(per_device_arguments.begin(),
                                                   per_device_arguments.end()),
                 options, cancel, thunk_ns);
}

StatusOr<std::vector<Literal>> MultiDeviceExecutable::Execute(
    std::shared_ptr<const Arguments> arguments, const MultiDeviceOptions& options,
    const std::atomic<bool>* cancel, std::vector<std::vector<int64_t>>* thunk_ns,
    bool read_results) {
  const int64_t devices = topology_.num_devices();
  if (arguments == nullptr || static_cast<int64_t>(arguments->size()) != devices) {
    return Error(fmt::format("{} devices need {} argument lists, got {}", devices, devices,
                             arguments == nullptr ? 0 : arguments->size()));
  }
  if (left_behind_ > 0) {
    return Error(fmt::format("{} device{} of an earlier run never stopped and still run{} these "
                             "executables: compile the module again", left_behind_,
                             left_behind_ > 1 ? "s" : "", left_behind_ > 1 ? "" : "s"));
  }
  ran_ = false;
  last_arguments_ = arguments;
  std::vector<std::shared_ptr<Executable>> executables = executables_;
  MultiDeviceOptions run_options = options;
  run_options.left_behind = &left_behind_;
  // Each device adds into its own vector: no two threads share one.
  if (thunk_ns != nullptr) thunk_ns->resize(static_cast<size_t>(devices));
  auto results = RunOnSimulatedDevices(
      topology_, run_options, cancel,
      [executables, arguments, thunk_ns, read_results](DeviceCollectives& device,
                                                       const std::atomic<bool>*) -> StatusOr<Literal> {
        const size_t id = static_cast<size_t>(device.device_id());
        Executable& executable = *executables[id];
        const std::vector<Literal>& mine = (*arguments)[id];
        // The timeline puts this thread's spans on the device's own track.
        if (profiler::TracingEnabled()) profiler::SetCurrentThreadName(DeviceThreadName(device.device_id()));
        executable.set_device(&device);
        // Read in place where the program allows it: `arguments` outlives the run (and the
        // results read after it), held here and by last_arguments_.
        Status ran = executable.SetArguments(
            mine.size(), [&](size_t p) -> const Literal& { return mine[p]; },
            executable.borrows_arguments());
        if (ran.ok()) ran = executable.Run(thunk_ns != nullptr ? &(*thunk_ns)[id] : nullptr);
        executable.set_device(nullptr);
        if (!ran.ok()) return ran;
        if (!read_results) return Literal();
        return executable.Results();
      });
  if (options.left_behind != nullptr) *options.left_behind = left_behind_;
  ran_ = results.ok();
  return results;
}

StatusOr<std::vector<Literal>> MultiDeviceExecutable::Results() const {
  if (!ran_) return Error("no run has finished: there are no results to read");
  std::vector<Literal> results;
  results.reserve(executables_.size());
  for (const std::shared_ptr<Executable>& executable : executables_) {
    if (executable == nullptr) {
      results.emplace_back();
      continue;
    }
    ASSIGN_OR_RETURN(Literal result, executable->Results());
    results.push_back(std::move(result));
  }
  return results;
}

}  // namespace xlens::runtime
