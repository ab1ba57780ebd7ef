// The reference evaluator over several simulated devices: every device runs the same module
// (SPMD) on its own arguments, in its own thread; replica-id and partition-id give its ids and
// the collectives meet the other devices with XLA's semantics (collective_attributes.h for who
// meets, collective_rendezvous.h for how a meeting that cannot complete fails instead of hanging).
#pragma once

#include <atomic>
#include <functional>
#include <span>
#include <vector>

#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

// The most devices one evaluation simulates (one thread each).
inline constexpr int64_t kMaxSimulatedDevices = 1024;

struct MultiDeviceOptions {
  // How long a device waits at a collective for the others before the evaluation fails naming it
  // and who did not come (0: no limit). Deadlocks and devices that finished without coming are
  // reported at once; this catches a device that never stops computing.
  double collective_timeout_seconds = 60;
  // RunOnSimulatedDevices: after a device failed, how long the others have to stop before they
  // are left running in the background and the failure is returned (0: wait for all). For
  // programs that cannot be interrupted (compiled code in an endless loop).
  double abandon_after_seconds = 0;
  // When set, receives how many devices were left running (0 when all stopped).
  int64_t* left_behind = nullptr;
  // A run spread over processes (xlens run --distributed=mpi): the devices meet at `rendezvous`
  // (a DistributedRendezvous, which outlives the run) and only `local_devices` run here; the
  // other devices' results are left empty. nullptr: every device runs here, meeting in memory.
  class CollectiveRendezvous* rendezvous = nullptr;
  std::vector<int64_t> local_devices = {};
};

// Error unless `topology` has 1 to kMaxSimulatedDevices devices.
Status CheckTopology(const DeviceTopology& topology);

class DeviceCollectives;  // collective_rendezvous.h

// What one simulated device runs: its result, or its failure. `stop` reads true once another
// device failed or the caller cancelled; a program that polls it stops early.
using DeviceProgram =
    std::function<StatusOr<Literal>(DeviceCollectives& device, const std::atomic<bool>* stop)>;

// Runs `program` once per device of `topology`, each in a thread of its own, with a rendezvous
// between them for their collectives (collective_rendezvous.h): result d is device d's. The first
// failure of any device stops the others (their meetings fail, `stop` is set) and is the error,
// naming the device. `cancel` (optional) stops every device. The program must stay callable from
// threads left behind (options.abandon_after_seconds): capture what it needs by value.
StatusOr<std::vector<Literal>> RunOnSimulatedDevices(const DeviceTopology& topology,
                                                     const MultiDeviceOptions& options,
                                                     const std::atomic<bool>* cancel,
                                                     DeviceProgram program);

// Runs `module`'s entry computation on topology.num_devices() devices: device d = replica *
// num_partitions + partition takes per_device_arguments[d] and gives result d. Before anything
// runs, every collective is checked against the topology (CheckModuleCollectives). The first
// failure of any device stops the others and is the error (one line, naming the device).
// evaluator_options.device is ignored; its cancel flag stops every device.
StatusOr<std::vector<Literal>> EvaluateModuleOnDevices(
    const HloModule& module, std::span<const std::vector<Literal>> per_device_arguments,
    const DeviceTopology& topology, const EvaluatorOptions& evaluator_options = {},
    const MultiDeviceOptions& options = {});

}  // namespace xlens
