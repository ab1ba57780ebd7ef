// The timing model: a kernel launch's counts (from GpuMemoryAnalysis and the cost analysis) and
// its resources (registers, shared memory) to a predicted time on a named GPU, and what bounds
// it. A roofline with the corrections that explain most slow kernels without a GPU:
//
//   memory  = max(DRAM bytes / copy bandwidth,                      (streaming)
//                 L2<->SM sector bytes / L2 bandwidth,              (wasted sectors)
//                 L2<->SM sector bytes / (resident warps * per-warp bandwidth))  (too few warps)
//   compute = flops / (FP32 peak * issue use)      shared = wavefronts / (SMs used * clock)
//   time    = max(memory, compute, shared) + launch overhead
//
// The per-warp bandwidth is Little's law folded into one figure: the bytes a warp keeps in flight
// over the memory latency (a few requests, as unrolled loops issue them). The bound names the
// largest term: "memory", "uncoalesced" (the L2 sector term, requests touching more sectors than
// their bytes need), "latency" (the warp term), "compute", "shared" (bank conflicts), or "launch"
// when the overhead exceeds everything else.
//
// Two figures are not on any datasheet and were calibrated on an H100 (80GB HBM3) with the old
// one-thread-per-element kernels (PTX timed with CUDA events and Nsight Compute): the L2 figure
// on the transpose (every load a 32-sector request), the per-warp figure on the row reduction
// (one thread per row, 8 warps on each of 16 SMs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/runtime/gpu_memory_analysis.h"
#include "compiler/support/status.h"

namespace xlens::runtime {

struct GpuTarget {
  std::string name;          // "h100"
  std::string description;   // "NVIDIA H100 SXM5 80GB"
  int sms = 0;
  double clock_ghz = 0;            // boost clock
  double dram_peak_gbps = 0;       // datasheet HBM bandwidth
  double dram_copy_gbps = 0;       // what a device-to-device copy reaches
  double l2_gbps = 0;              // L2 <-> SM bandwidth
  double warp_gbps = 0;            // what one resident warp sustains (bytes in flight / latency)
  double fp32_tflops = 0;          // non-tensor FP32 (the SIMT kernels' arithmetic)
  double bf16_tensor_tflops = 0;   // dense, for reference (no kernel uses tensor cores yet)
  int max_warps_per_sm = 64;
  int max_blocks_per_sm = 32;
  int max_threads_per_block = 1024;
  int registers_per_sm = 65536;
  int max_registers_per_thread = 255;
  int register_allocation_unit = 256;  // per warp
  int64_t shared_bytes_per_sm = 228 * 1024;
  int64_t shared_bytes_per_block = 227 * 1024;
  int64_t shared_reserved_per_block = 1024;  // the driver's reservation
  double launch_overhead_ns = 0;  // one launch in a stream, back to back
  // NVLink between the GPUs of one board (an HGX H100/H200 8-GPU baseboard, NVSwitch): the
  // datasheet's bandwidth per GPU in one direction, what NCCL's ring collectives reach of it
  // (bus bandwidth, as nccl-tests reports it) and the time of one step of a ring (a peer's
  // flag seen, the next chunk posted). gpu_collective_model.h turns them into a collective's time.
  double nvlink_gbps = 0;
  double nvlink_bus_gbps = 0;
  double collective_step_ns = 0;
};

// "h100" or "h200"; any other name is an error that lists the known ones.
StatusOr<GpuTarget> GpuTargetByName(const std::string& name);
// The names GpuTargetByName knows.
std::vector<std::string> KnownGpuTargets();

struct GpuOccupancy {
  int blocks_per_sm = 0;
  int warps_per_sm = 0;
  double fraction = 0;  // warps_per_sm / max_warps_per_sm
  // What stops more blocks per SM: "warps", "blocks", "registers", "shared memory", or
  // "too large" when one block does not fit at all.
  std::string limiter;
};

// CUDA's occupancy calculator (cudaOccupancyMaxActiveBlocksPerMultiprocessor) for a block of
// `threads_per_block` threads using `registers_per_thread` and `shared_bytes` per block.
GpuOccupancy ComputeOccupancy(const GpuTarget& target, int64_t threads_per_block,
                              int registers_per_thread, int64_t shared_bytes);

struct KernelWorkload {
  int64_t blocks = 1;
  int64_t threads_per_block = 1;
  int registers_per_thread = 0;  // 0: unknown, taken as 32
  int64_t shared_bytes = 0;
  KernelMemoryStats memory;
  double flops = 0;
};

struct KernelPrediction {
  GpuOccupancy occupancy;
  int64_t resident_warps = 0;  // warps of the launch resident at once, machine-wide
  double dram_ns = 0;
  double l2_ns = 0;
  double latency_ns = 0;  // the sector bytes at what the resident warps can keep in flight
  double memory_ns = 0;
  double compute_ns = 0;
  double shared_ns = 0;
  double launch_ns = 0;
  double total_ns = 0;
  std::string bound;  // memory, compute, shared, uncoalesced, latency, launch
  // DRAM bytes over the predicted time, as a fraction of the target's copy bandwidth.
  double copy_bandwidth_fraction = 0;
};

KernelPrediction PredictKernelTime(const GpuTarget& target, const KernelWorkload& workload);

}  // namespace xlens::runtime
