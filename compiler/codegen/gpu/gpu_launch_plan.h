// How the GPU emitters split work that a plain tiled launch would spread over too few SMs: a
// GEMM with few output tiles and a long K (the MLP's [128,784]x[784,256] makes 8 tiles of 64x64
// for 132 SMs, each walking K = 784 alone) and a column reduction with few 32-column tiles and
// many rows. Both are cut along the reduced dimension into slices whose partial results a
// second kernel combines in a fixed order (no atomics: the result does not depend on the
// schedule). The rule is the one the timing model (runtime/gpu_timing_model.h) explains: a
// launch of fewer blocks than SMs leaves the rest of the machine idle and its few warps cannot
// keep enough memory requests in flight, while a second kernel costs one launch (about 2 us).
#pragma once

#include <cstdint>

namespace xlens::codegen::gpu {

// The SMs the plans fill: 132 on both known targets (H100 SXM5 and H200, one GH100 chip).
inline constexpr int64_t kTargetSms = 132;

struct SplitPlan {
  int64_t slices = 1;           // 1: no split (one kernel)
  int64_t steps_per_slice = 0;  // units of the reduced dimension each slice walks
};

// Splits `steps` sequential steps of each of `tiles` blocks into slices when tiles < sms: as
// many slices as bring the launch to about `sms` blocks, each at least `min_steps` steps long
// (shorter slices would spend more on their partial results than they save), all slices but
// the last of equal length. No split when that leaves fewer than 2 slices.
SplitPlan PlanSplit(int64_t tiles, int64_t steps, int64_t min_steps, int64_t sms = kTargetSms);

// A streaming launch (a column reduction) of `tiles` blocks of `warps_per_block` warps reading
// `bytes` over `steps` rows: PlanSplit's slices only when the timing model predicts they pay for
// the second kernel. Its figures: a resident warp keeps about 6 GB/s in flight, the DRAM gives
// 3.0 TB/s, a launch costs 2 us, an SM holds 64 warps; so a launch of w warps takes
// max(bytes / 3 TB/s, bytes / (w * 6 GB/s)), and splitting must save more than 2 us.
// A tiled GEMM of `tiles` blocks walking `steps` steps of K, each step of one block costing
// `step_ns` on its SM (its shared-memory wavefronts at the clock): PlanSplit's slices only when
// the time they save on the SMs exceeds the second kernel's launch and its read of the partial
// tiles (`partial_bytes` per slice), at the timing model's figures (as PlanStreamingSplit).
SplitPlan PlanGemmSplit(int64_t tiles, int64_t steps, double step_ns, double partial_bytes,
                        int64_t sms = kTargetSms);

SplitPlan PlanStreamingSplit(int64_t tiles, int64_t warps_per_block, int64_t steps, int64_t min_steps,
                             double bytes, int64_t sms = kTargetSms);

}  // namespace xlens::codegen::gpu
