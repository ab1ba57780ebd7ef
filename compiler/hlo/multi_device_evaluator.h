// The reference evaluator over several simulated devices: every device runs the same module
// (SPMD) on its own arguments, in its own thread; replica-id and partition-id give its ids and
// the collectives meet the other devices with XLA's semantics (collective_attributes.h for who
// meets, collective_rendezvous.h for how a meeting that cannot complete fails instead of hanging).
#pragma once

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
};

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
