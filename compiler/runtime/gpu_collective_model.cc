#include "compiler/runtime/gpu_collective_model.h"

namespace xlens::runtime {

CollectivePrediction PredictCollectiveTime(const GpuTarget& target, HloOpcode opcode,
                                           int64_t operand_bytes, int64_t result_bytes,
                                           int64_t group_size) {
  CollectivePrediction p;
  if (group_size <= 1) return p;
  const double n = static_cast<double>(group_size);
  const double share = (n - 1) / n;  // of the whole, what crosses one GPU's links
  switch (opcode) {
    case HloOpcode::kAllReduce: case HloOpcode::kAllReduceStart:
      // A ring reduce-scatter then a ring all-gather.
      p.bus_bytes = 2 * share * static_cast<double>(operand_bytes);
      p.steps = 2 * (group_size - 1);
      break;
    case HloOpcode::kAllGather: case HloOpcode::kAllGatherStart:
      p.bus_bytes = share * static_cast<double>(result_bytes);
      p.steps = group_size - 1;
      break;
    case HloOpcode::kReduceScatter:
      p.bus_bytes = share * static_cast<double>(operand_bytes);
      p.steps = group_size - 1;
      break;
    case HloOpcode::kAllToAll:
      // Every peer's piece sent at once (NCCL's grouped sends and receives).
      p.bus_bytes = share * static_cast<double>(operand_bytes);
      p.steps = 1;
      break;
    case HloOpcode::kCollectivePermute: case HloOpcode::kCollectivePermuteStart:
      p.bus_bytes = static_cast<double>(operand_bytes);
      p.steps = 1;
      break;
    case HloOpcode::kCollectiveBroadcast:
      // A pipelined ring: the whole through every link, the latency of the ring.
      p.bus_bytes = static_cast<double>(operand_bytes);
      p.steps = group_size - 1;
      break;
    default:
      return p;
  }
  // Bytes over GB/s are nanoseconds.
  const double bandwidth = target.nvlink_bus_gbps > 0 ? target.nvlink_bus_gbps : 1;
  p.ns = static_cast<double>(p.steps) * target.collective_step_ns + p.bus_bytes / bandwidth;
  return p;
}

}  // namespace xlens::runtime
