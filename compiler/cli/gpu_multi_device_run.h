// `xlens run --backend=gpu-sim|gpu --num_replicas=R --num_partitions=P`: the GPU backend's
// executable on every device (gpu_multi_device_executable.h): a GPU simulator each with its own
// memory, or one real GPU each with NCCL between them.
#pragma once

#include <string>
#include <vector>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/hlo/collective_attributes.h"
#include "compiler/hlo/multi_device_evaluator.h"
#include "compiler/support/watchdog.h"

namespace xlens::cli {

// Whether the devices can be had before anything is read: on --backend=gpu, one GPU per device
// (NCCL puts one rank on a GPU) and NCCL itself where there are several; the simulator always.
Status CheckGpuDevices(const RunArgs& args, const DeviceTopology& topology);

// Compiles `module` on every device and runs it (once untimed, then args.iterations timed runs
// when iterations > 1); the timing line goes to `report`. While a trace is being recorded (the
// caller started it), the trace is written to args.trace with a track per device and each
// collective's bytes and modelled time.
StatusOr<std::vector<Literal>> RunOnGpuDevices(const RunArgs& args, tools::FlagsSetup& setup,
                                               const HloModule& module, const DeviceTopology& topology,
                                               const std::vector<std::vector<Literal>>& arguments,
                                               const MultiDeviceOptions& multi, Watchdog& watchdog,
                                               std::string& report);

}  // namespace xlens::cli
