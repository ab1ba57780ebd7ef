// `xlens run` on several simulated devices (--num_replicas, --num_partitions).
#pragma once

#include "compiler/cli/commands.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"

namespace xlens::cli {

// Runs args.file on args.num_replicas x args.num_partitions simulated devices, compiled for the
// CPU (`compiled`, xlens run; --reference compares with the evaluator) or on the reference
// evaluator (xlens eval); returns the exit code. multi_device_run.cc says how inputs and outputs
// are laid out.
int RunOnDevices(const RunArgs& args, bool compiled);

// Where device `device`'s inputs and outputs lie under `dir`: DIR/device_D.
std::string DeviceDir(const std::string& dir, int64_t device);

// Every device's arguments: --inputs DIR's device_D/ folders or global arrays split by the entry
// parameters' shardings, or random values (the same on every device).
StatusOr<std::vector<std::vector<Literal>>> LoadDeviceInputs(const HloModule& module,
                                                             const RunArgs& args,
                                                             const DeviceTopology& topology);

}  // namespace xlens::cli
