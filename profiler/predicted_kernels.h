// Predicted GPU kernels in a timeline: where the GPU simulator ran a launch on the host, the
// trace shows the kernel as a GPU would (its predicted time, on a GPU process with one stream
// track), so the timeline reads as a CUPTI one does. Every such span carries "predicted": 1 and
// the analysis behind the prediction, and a flow links it to the host span of its launch (the
// span that carries the same "External id"), as CUPTI's kernels are linked to their launches.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/trace.h"

namespace xlens::profiler {

struct PredictedKernel {
  std::string name;             // the kernel function
  int64_t external_id = 0;      // the launch's id; its host span has "External id" = this
  int64_t launch_ns = 0;        // when the host launched it (the kernel starts no earlier)
  int64_t duration_ns = 0;      // predicted
  std::vector<TraceArg> args;   // the analysis: grid, block, sectors per request, bound, ...
};

// The GPU process id predicted kernels go to: after any real device's.
inline constexpr int32_t kPredictedGpuPid = kGpuPidBase + 64;
inline constexpr int64_t kPredictedStreamTid = 0;

// Appends `kernels` (in launch order) to `trace` on a process named "GPU (predicted: DEVICE)"
// with one track "stream 0 (predicted)": each starts at the later of its launch and the end of
// the one before (one stream runs one kernel at a time). The host events carrying the same
// "External id" get the flow's start. Events are kept sorted by start time.
void AppendPredictedKernels(Trace& trace, const std::string& device, std::vector<PredictedKernel> kernels);

}  // namespace xlens::profiler
