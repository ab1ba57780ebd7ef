#include "compiler/hlo/multi_device_evaluator.h"

#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "compiler/hlo/collective_rendezvous.h"

namespace xlens {

StatusOr<std::vector<Literal>> EvaluateModuleOnDevices(
    const HloModule& module, std::span<const std::vector<Literal>> per_device_arguments,
    const DeviceTopology& topology, const EvaluatorOptions& evaluator_options,
    const MultiDeviceOptions& options) {
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

  // Set when any device fails (or the caller cancels): the others stop at their next instruction.
  std::atomic<bool> stop{false};
  CollectiveRendezvous rendezvous(devices, options.collective_timeout_seconds, &stop);
  std::vector<std::optional<StatusOr<Literal>>> results(devices);
  std::mutex first_failure_mutex;
  std::optional<Status> first_failure;
  std::atomic<int64_t> running{devices};

  auto run_device = [&](int64_t d) {
    DeviceCollectives device(topology, d / topology.num_partitions, d % topology.num_partitions,
                             &rendezvous);
    EvaluatorOptions device_options = evaluator_options;
    device_options.cancel = &stop;
    device_options.device = &device;
    StatusOr<Literal> result =
        EvaluateModule(module, per_device_arguments[static_cast<size_t>(d)], device_options);
    if (!result.ok()) {
      Status failure = result.status().WithContext(
          fmt::format("device {} (replica {}, partition {})", d, device.replica(),
                      device.partition()));
      {
        std::lock_guard<std::mutex> lock(first_failure_mutex);
        // The first failure is the cause; later ones are its echo (cancelled, aborted meetings).
        if (!first_failure) first_failure = failure;
      }
      stop.store(true);
      rendezvous.Abort(*first_failure);
    }
    results[static_cast<size_t>(d)] = std::move(result);
    rendezvous.DeviceFinished(d);
    running.fetch_sub(1);
  };

  std::vector<std::thread> threads;
  threads.reserve(devices);
  for (int64_t d = 0; d < devices; ++d) threads.emplace_back(run_device, d);
  // The caller's cancel flag is watched here and handed to the devices.
  while (running.load() > 0) {
    if (evaluator_options.cancel != nullptr && evaluator_options.cancel->load() && !stop.load()) {
      stop.store(true);
      rendezvous.Abort(Error("cancelled"));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (std::thread& thread : threads) thread.join();

  if (first_failure) return *first_failure;
  std::vector<Literal> outputs;
  outputs.reserve(devices);
  for (auto& result : results) outputs.push_back(std::move(**result));
  return outputs;
}

}  // namespace xlens
