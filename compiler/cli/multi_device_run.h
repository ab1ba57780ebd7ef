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

// The arguments of `devices` (every device when empty), one list per device of `topology` (the
// others' stay empty): --inputs DIR's device_D/ folders (only those of `devices` are read) or
// global arrays split by the entry parameters' shardings, or random values (the same on every
// device). A run spread over processes loads each process's own devices.
StatusOr<std::vector<std::vector<Literal>>> LoadDeviceInputs(const HloModule& module,
                                                             const RunArgs& args,
                                                             const DeviceTopology& topology,
                                                             const std::vector<int64_t>& devices = {});

// Writes the global results as args.outputs/outI.npy, assembled from every device's result
// (results[d], all of them) by the entry root's sharding, or prints one line saying why they
// cannot be (then only the device_D/ folders hold results).
Status WriteGlobalOutputs(const RunArgs& args, const HloModule& module,
                          const DeviceTopology& topology, const std::vector<Literal>& results);

}  // namespace xlens::cli
