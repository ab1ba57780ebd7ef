// `xlens run` on several simulated devices (--num_replicas, --num_partitions).
#pragma once

#include "compiler/cli/commands.h"

namespace xlens::cli {

// Runs args.file on args.num_replicas x args.num_partitions simulated devices, compiled for the
// CPU (`compiled`, xlens run; --reference compares with the evaluator) or on the reference
// evaluator (xlens eval); returns the exit code. multi_device_run.cc says how inputs and outputs
// are laid out.
int RunOnDevices(const RunArgs& args, bool compiled);

}  // namespace xlens::cli
