#include "compiler/runtime/gpu_timing_model.h"

#include <algorithm>

#include <fmt/format.h>

namespace xlens::runtime {

namespace {

// The GH100 chip of both targets: 132 SMs enabled on the SXM5 boards, 1.98 GHz boost, 4 warp
// schedulers and 128 FP32 lanes per SM (66.9 TFLOP/s), 228 KiB of shared memory per SM.
// Datasheets: NVIDIA H100 Tensor Core GPU datasheet (SXM5 column) and NVIDIA H200 datasheet.
GpuTarget Gh100(std::string name, std::string description, double peak_gbps, double copy_gbps) {
  GpuTarget t;
  t.name = std::move(name);
  t.description = std::move(description);
  t.sms = 132;
  t.clock_ghz = 1.98;
  t.dram_peak_gbps = peak_gbps;
  t.dram_copy_gbps = copy_gbps;
  // Not on a datasheet. Measured here: the one-thread-per-element transpose of f32[4096,2048]
  // moves 302 MB of sectors (32 per load request) in 70.8 us on an H100 (73.6 us under Nsight
  // Compute): 4.4 TB/s. Published microbenchmarks of GH100's L2 give 4 to 7 TB/s.
  t.l2_gbps = 4400;
  // Measured here: the one-thread-per-row reduction of f32[4096,1024] (128 warps, each request
  // 32 sectors) moves 134 MB of sectors in 136 us (169 us under Nsight Compute, caches flushed):
  // 6 GB/s a warp, about 4 KB in flight over a DRAM latency of some 650 ns.
  t.warp_gbps = 6;
  t.fp32_tflops = 66.9;
  t.bf16_tensor_tflops = 989.4;
  // A back-to-back launch of an empty kernel in one stream, as Nsight Systems shows it on
  // Hopper with the driver API: about 2 us from one kernel's start to the next.
  t.launch_overhead_ns = 2000;
  // NVLink 4: 18 links of 25 GB/s each way, 450 GB/s a direction (900 GB/s both ways, the
  // datasheet's figure). Not measured here (one GPU): nccl-tests' all_reduce_perf on 8 H100 SXM
  // reaches a bus bandwidth of about 360 GB/s at large sizes (80% of the link), and NCCL's ring
  // steps cost a few microseconds each, so small collectives are latency (about 20 us for a
  // 8-GPU all-reduce of a few KB); both figures are assumptions of the model.
  t.nvlink_gbps = 450;
  t.nvlink_bus_gbps = 360;
  t.collective_step_ns = 1500;
  return t;
}

int64_t CeilOfRatio(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

std::vector<std::string> KnownGpuTargets() { return {"h100", "h200"}; }

StatusOr<GpuTarget> GpuTargetByName(const std::string& name) {
  if (name == "h100") return Gh100("h100", "NVIDIA H100 SXM5 80GB (HBM3)", 3350, 3000);
  if (name == "h200") return Gh100("h200", "NVIDIA H200 SXM 141GB (HBM3e)", 4800, 4300);
  return Error(fmt::format("--gpu_target: unknown target '{}' (known: {})", name,
                           fmt::join(KnownGpuTargets(), ", ")));
}

GpuOccupancy ComputeOccupancy(const GpuTarget& target, int64_t threads_per_block,
                              int registers_per_thread, int64_t shared_bytes) {
  GpuOccupancy occupancy;
  const int64_t warps_per_block = std::max<int64_t>(1, CeilOfRatio(threads_per_block, 32));
  if (threads_per_block > target.max_threads_per_block ||
      registers_per_thread > target.max_registers_per_thread ||
      shared_bytes > target.shared_bytes_per_block) {
    occupancy.limiter = "too large";
    return occupancy;
  }
  struct Limit {
    int64_t blocks;
    const char* name;
  };
  std::vector<Limit> limits;
  limits.push_back({target.max_warps_per_sm / warps_per_block, "warps"});
  limits.push_back({target.max_blocks_per_sm, "blocks"});
  if (registers_per_thread > 0) {
    // Registers are allocated per warp in units of 256.
    const int64_t per_warp =
        CeilOfRatio(int64_t{registers_per_thread} * 32, target.register_allocation_unit) *
        target.register_allocation_unit;
    limits.push_back({(target.registers_per_sm / per_warp) / warps_per_block, "registers"});
  }
  limits.push_back({target.shared_bytes_per_sm / (shared_bytes + target.shared_reserved_per_block),
                    "shared memory"});
  // The first of equal limits names it: warps before the rest, as the calculator reports.
  const Limit* least = &limits[0];
  for (const Limit& l : limits) {
    if (l.blocks < least->blocks) least = &l;
  }
  occupancy.blocks_per_sm = static_cast<int>(least->blocks);
  occupancy.warps_per_sm = static_cast<int>(least->blocks * warps_per_block);
  occupancy.fraction = static_cast<double>(occupancy.warps_per_sm) / target.max_warps_per_sm;
  occupancy.limiter = occupancy.blocks_per_sm == 0 ? "too large" : least->name;
  return occupancy;
}

KernelPrediction PredictKernelTime(const GpuTarget& target, const KernelWorkload& workload) {
  KernelPrediction p;
  const int registers = workload.registers_per_thread > 0 ? workload.registers_per_thread : 32;
  p.occupancy = ComputeOccupancy(target, workload.threads_per_block, registers, workload.shared_bytes);
  const int64_t warps_per_block = std::max<int64_t>(1, CeilOfRatio(workload.threads_per_block, 32));
  const double total_warps = static_cast<double>(workload.blocks * warps_per_block);
  const double resident =
      std::min(total_warps, static_cast<double>(target.sms) * std::max(1, p.occupancy.warps_per_sm));
  p.resident_warps = static_cast<int64_t>(resident);

  // Bytes over GB/s are nanoseconds.
  const double sector_bytes = static_cast<double>(workload.memory.l2_sector_bytes());
  p.dram_ns = static_cast<double>(workload.memory.dram_bytes()) / target.dram_copy_gbps;
  p.l2_ns = sector_bytes / target.l2_gbps;
  p.latency_ns = sector_bytes / (resident * target.warp_gbps);
  p.memory_ns = std::max({p.dram_ns, p.l2_ns, p.latency_ns});
  // The FP32 pipes of an SM need about 8 resident warps (2 per scheduler) to issue every cycle.
  const double compute_use = std::min(1.0, resident / (target.sms * 8.0));
  p.compute_ns = workload.flops / (target.fp32_tflops * 1e3) / std::max(compute_use, 1e-6);
  const SharedAccessCounts& sl = workload.memory.shared_loads;
  const SharedAccessCounts& ss = workload.memory.shared_stores;
  const double sms_used = std::min<double>(target.sms, std::max<int64_t>(1, workload.blocks));
  p.shared_ns = static_cast<double>(sl.wavefronts + ss.wavefronts) / (sms_used * target.clock_ghz);
  p.launch_ns = target.launch_overhead_ns;
  const double largest = std::max({p.memory_ns, p.compute_ns, p.shared_ns});
  p.total_ns = largest + p.launch_ns;

  const KernelMemoryStats& m = workload.memory;
  const double waste = m.ideal_l2_sector_bytes() > 0
                           ? static_cast<double>(m.l2_sector_bytes()) / m.ideal_l2_sector_bytes()
                           : 1.0;
  if (p.launch_ns > largest) {
    p.bound = "launch";
  } else if (largest == p.memory_ns) {
    if (p.memory_ns == p.latency_ns && p.latency_ns > p.dram_ns) {
      p.bound = "latency";
    } else if (p.memory_ns == p.l2_ns && p.l2_ns > p.dram_ns && waste > 1.25) {
      p.bound = "uncoalesced";
    } else {
      p.bound = "memory";
    }
  } else if (largest == p.compute_ns) {
    p.bound = "compute";
  } else {
    p.bound = "shared";
  }
  p.copy_bandwidth_fraction =
      p.total_ns > 0 ? static_cast<double>(m.dram_bytes()) / p.total_ns / target.dram_copy_gbps : 0;
  return p;
}

}  // namespace xlens::runtime
