// The modelled time of a collective between GPUs of one NVLink board (the simulator's devices),
// for the trace: NCCL's ring algorithms, whose bus bytes are nccl-tests' (an all-reduce moves
// 2(n-1)/n of its bytes through each GPU's links, an all-gather or reduce-scatter (n-1)/n of the
// whole, an all-to-all (n-1)/n of its operand, a permute or broadcast the whole) at the target's
// NVLink bus bandwidth, plus one ring step's latency for each of its 2(n-1), n-1 or 1 steps.
// A group of one device moves nothing and takes no time.
#pragma once

#include <cstdint>
#include <string>

#include "compiler/hlo/opcode.h"
#include "compiler/runtime/gpu_timing_model.h"

namespace xlens::runtime {

struct CollectivePrediction {
  double bus_bytes = 0;  // through one GPU's links
  int64_t steps = 0;     // ring steps, each paying the target's collective_step_ns
  double ns = 0;
};

// `opcode`'s time (an -start counts as its collective, a -done as nothing) moving
// `operand_bytes` in and `result_bytes` out of each of `group_size` GPUs.
CollectivePrediction PredictCollectiveTime(const GpuTarget& target, HloOpcode opcode,
                                           int64_t operand_bytes, int64_t result_bytes,
                                           int64_t group_size);

}  // namespace xlens::runtime
