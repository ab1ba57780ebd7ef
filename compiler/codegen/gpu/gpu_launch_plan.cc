#include "compiler/codegen/gpu/gpu_launch_plan.h"

#include <algorithm>

namespace xlens::codegen::gpu {

SplitPlan PlanSplit(int64_t tiles, int64_t steps, int64_t min_steps, int64_t sms) {
  SplitPlan plan;
  plan.steps_per_slice = steps;
  if (tiles <= 0 || steps <= 0 || tiles >= sms) return plan;
  const int64_t wanted = std::min((sms + tiles - 1) / tiles, steps / std::max<int64_t>(1, min_steps));
  if (wanted < 2) return plan;
  plan.steps_per_slice = (steps + wanted - 1) / wanted;
  plan.slices = (steps + plan.steps_per_slice - 1) / plan.steps_per_slice;
  if (plan.slices < 2) plan = {1, steps};
  return plan;
}

namespace {
// The H100 figures of runtime/gpu_timing_model.cc (dram_copy_gbps, launch_overhead_ns,
// warp_gbps, max_warps_per_sm).
constexpr double kDramGbps = 3000, kLaunchNs = 2000, kWarpGbps = 6;
constexpr int64_t kWarpsPerSm = 64;
}  // namespace

SplitPlan PlanGemmSplit(int64_t tiles, int64_t steps, double step_ns, double partial_bytes, int64_t sms) {
  const SplitPlan plan = PlanSplit(tiles, steps, /*min_steps=*/2, sms);
  if (plan.slices == 1) return plan;
  // The blocks of a launch share the SMs: tiles * steps block-steps over min(sms, blocks) SMs.
  auto time_ns = [&](int64_t blocks) {
    return static_cast<double>(tiles * steps) * step_ns / static_cast<double>(std::min(sms, blocks));
  };
  const double saved = time_ns(tiles) - time_ns(tiles * plan.slices);
  if (saved <= kLaunchNs + static_cast<double>(plan.slices) * partial_bytes / kDramGbps) return {1, steps};
  return plan;
}

SplitPlan PlanStreamingSplit(int64_t tiles, int64_t warps_per_block, int64_t steps, int64_t min_steps,
                             double bytes, int64_t sms) {
  const SplitPlan plan = PlanSplit(tiles, steps, min_steps, sms);
  if (plan.slices == 1) return plan;
  auto time_ns = [&](int64_t blocks) {
    const double warps = static_cast<double>(std::min(blocks * warps_per_block, sms * kWarpsPerSm));
    return std::max(bytes / kDramGbps, bytes / (std::max(1.0, warps) * kWarpGbps));
  };
  if (time_ns(tiles) - time_ns(tiles * plan.slices) <= kLaunchNs) return {1, steps};
  return plan;
}

}  // namespace xlens::codegen::gpu
