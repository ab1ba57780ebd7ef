#include "compiler/hlo/multi_device_evaluator.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "compiler/hlo/collective_rendezvous.h"

namespace xlens {
namespace {

// What the device threads share. Held by a shared_ptr the threads keep, so that threads abandoned
// after the grace period (RunOnSimulatedDevices) never touch freed state.
struct SharedRun {
  SharedRun(const DeviceTopology& topology, const MultiDeviceOptions& options, DeviceProgram program)
      : topology(topology),
        program(std::move(program)),
        rendezvous(topology.num_devices(), options.collective_timeout_seconds, &stop),
        meet(options.rendezvous != nullptr ? options.rendezvous : &rendezvous),
        results(topology.num_devices()) {}

  const DeviceTopology topology;
  const DeviceProgram program;
  // Set when any device fails (or the caller cancels): the others stop where they poll it.
  std::atomic<bool> stop{false};
  CollectiveRendezvous rendezvous;
  CollectiveRendezvous* meet;  // `rendezvous`, or a run's over processes
  std::mutex mutex;  // guards results and first_failure
  std::vector<std::optional<StatusOr<Literal>>> results;
  std::optional<Status> first_failure;
  std::atomic<int64_t> running{0};
  std::condition_variable all_done;  // with `mutex`: running reached 0

  void Fail(const Status& failure) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      // The first failure is the cause; later ones are its echo (cancelled, aborted meetings).
      if (!first_failure) first_failure = failure;
    }
    stop.store(true);
    meet->Abort(*first_failure);
  }

  void RunDevice(int64_t d) {
    DeviceCollectives device(topology, d / topology.num_partitions, d % topology.num_partitions,
                             meet);
    StatusOr<Literal> result = program(device, &stop);
    if (!result.ok()) {
      Fail(result.status().WithContext(fmt::format("device {} (replica {}, partition {})", d,
                                                   device.replica(), device.partition())));
    }
    {
      std::lock_guard<std::mutex> lock(mutex);
      results[static_cast<size_t>(d)] = std::move(result);
    }
    meet->DeviceFinished(d);
    std::lock_guard<std::mutex> lock(mutex);
    if (running.fetch_sub(1) == 1) all_done.notify_all();
  }
};

}  // namespace

Status CheckTopology(const DeviceTopology& topology) {
  if (topology.num_replicas < 1 || topology.num_partitions < 1) {
    return Error(fmt::format("{} replicas x {} partitions: each must be at least 1",
                             topology.num_replicas, topology.num_partitions));
  }
  if (topology.num_replicas > kMaxSimulatedDevices ||
      topology.num_partitions > kMaxSimulatedDevices ||
      topology.num_devices() > kMaxSimulatedDevices) {
    return Error(fmt::format("{} replicas x {} partitions: at most {} devices are simulated",
                             topology.num_replicas, topology.num_partitions,
                             kMaxSimulatedDevices));
  }
  return OkStatus();
}

StatusOr<std::vector<Literal>> RunOnSimulatedDevices(const DeviceTopology& topology,
                                                     const MultiDeviceOptions& options,
                                                     const std::atomic<bool>* cancel,
                                                     DeviceProgram program) {
  RETURN_IF_ERROR(CheckTopology(topology));
  const int64_t devices = topology.num_devices();
  auto run = std::make_shared<SharedRun>(topology, options, std::move(program));
  std::vector<int64_t> here = options.local_devices;
  if (options.rendezvous == nullptr || here.empty()) {
    here.clear();
    for (int64_t d = 0; d < devices; ++d) here.push_back(d);
  }
  run->running.store(static_cast<int64_t>(here.size()));
  std::vector<std::thread> threads;
  threads.reserve(here.size());
  for (int64_t d : here) {
    threads.emplace_back([run, d] { run->RunDevice(d); });
  }
  // The caller's cancel flag is watched here and handed to the devices; after a failure, devices
  // that do not stop within the grace period are left behind.
  std::optional<std::chrono::steady_clock::time_point> failed_at;
  bool abandoned = false;
  while (true) {
    {
      // Woken when the last device finishes; the bound polls the cancel flag.
      std::unique_lock<std::mutex> lock(run->mutex);
      if (run->all_done.wait_for(lock, std::chrono::milliseconds(10),
                                 [&] { return run->running.load() == 0; })) {
        break;
      }
    }
    if (cancel != nullptr && cancel->load() && !run->stop.load()) run->Fail(Error("cancelled"));
    if (run->stop.load() && !failed_at) failed_at = std::chrono::steady_clock::now();
    if (failed_at && options.abandon_after_seconds > 0 &&
        std::chrono::steady_clock::now() - *failed_at >
            std::chrono::duration<double>(options.abandon_after_seconds)) {
      abandoned = true;
      break;
    }
  }
  for (std::thread& thread : threads) {
    if (abandoned) {
      thread.detach();
    } else {
      thread.join();
    }
  }
  std::lock_guard<std::mutex> lock(run->mutex);
  if (options.left_behind != nullptr) *options.left_behind = abandoned ? run->running.load() : 0;
  if (run->first_failure) {
    if (!abandoned) return *run->first_failure;
    std::vector<int64_t> still;
    for (int64_t d : here) {
      if (!run->results[static_cast<size_t>(d)]) still.push_back(d);
    }
    return Error(fmt::format("{} (device{} {} still running, left behind)",
                             run->first_failure->message(), still.size() > 1 ? "s" : "",
                             fmt::join(still, ", ")));
  }
  std::vector<Literal> outputs;
  outputs.reserve(devices);
  for (auto& result : run->results) outputs.push_back(result ? std::move(**result) : Literal());
  return outputs;
}

StatusOr<std::vector<Literal>> EvaluateModuleOnDevices(
    const HloModule& module, std::span<const std::vector<Literal>> per_device_arguments,
    const DeviceTopology& topology, const EvaluatorOptions& evaluator_options,
    const MultiDeviceOptions& options) {
  RETURN_IF_ERROR(CheckTopology(topology));
  const int64_t devices = topology.num_devices();
  if (static_cast<int64_t>(per_device_arguments.size()) != devices) {
    return Error(fmt::format("{} devices ({} replicas x {} partitions) need {} argument lists, got "
                             "{}", devices, topology.num_replicas, topology.num_partitions,
                             devices, per_device_arguments.size()));
  }
  if (module.entry_computation() == nullptr) {
    return Error("module " + module.name() + " has no entry computation");
  }
  RETURN_IF_ERROR(CheckModuleCollectives(module, topology));
  // The evaluator polls `stop` before every instruction, so every device stops: none is left
  // behind (they read `module` and the arguments, which the caller keeps until this returns).
  MultiDeviceOptions wait_for_all = options;
  wait_for_all.abandon_after_seconds = 0;
  return RunOnSimulatedDevices(
      topology, wait_for_all, evaluator_options.cancel,
      [&](DeviceCollectives& device, const std::atomic<bool>* stop) -> StatusOr<Literal> {
        EvaluatorOptions device_options = evaluator_options;
        device_options.cancel = stop;
        device_options.device = &device;
        return EvaluateModule(module, per_device_arguments[static_cast<size_t>(device.device_id())],
                              device_options);
      });
}

}  // namespace xlens
