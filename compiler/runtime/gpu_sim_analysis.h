// The GPU simulator's memory analysis end to end: an observer that turns the simulator's access
// reports into GpuMemoryAnalysis counts per launch, and one observed run of a GpuExecutable whose
// launches come back with their counts, resources (ptxas) and predicted times, ready for the
// per-kernel table, the trace's predicted spans and the per-HLO profile.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_launch_analysis.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/runtime/gpu_sim_observer.h"
#include "profiler/hlo_profile.h"
#include "profiler/predicted_kernels.h"

namespace xlens::runtime {

// Feeds every observed launch into a GpuMemoryAnalysis; blocks may run concurrently, each
// worker recording its own block. Of a launch of more than `sample_blocks` blocks only that many
// are recorded (SampledBlocks) and the counts are scaled; 0 records every block.
class GpuAnalysisObserver : public GpuSimObserver {
 public:
  struct Observed {
    std::string kernel;
    int64_t blocks = 0;
    int64_t threads_per_block = 0;
    int64_t shared_memory_bytes = 0;
    KernelMemoryStats memory;
  };

  explicit GpuAnalysisObserver(int64_t sample_blocks) : sample_blocks_(sample_blocks) {}
  bool concurrent_blocks() const override { return true; }
  void KernelBegin(const GpuKernelLaunchInfo& launch, int workers) override;
  void BlockBegin(int worker, int64_t block) override;
  void Access(int worker, int64_t block, const GpuMemoryAccess& access) override;
  void Barrier(int worker, int64_t block) override;
  void BlockEnd(int worker, int64_t block) override;
  void KernelEnd() override;
  // The launches observed so far, in order.
  const std::vector<Observed>& launches() const { return launches_; }

 private:
  int64_t sample_blocks_;
  int32_t warp_size_ = 32;
  std::vector<int64_t> sampled_;  // sorted
  std::unique_ptr<GpuMemoryAnalysis> analysis_;
  std::vector<std::unique_ptr<GpuBlockRecorder>> recorders_;  // per worker; null: not recording
  std::vector<Observed> launches_;
};

struct GpuSimAnalysis {
  std::vector<GpuLaunchAnalysis> launches;  // in launch order
  std::string resources_source;             // where the register counts come from
};

// Runs `exe` once more on `device` (which must be the device it was created on) with the
// analysis observing, and predicts every launch on `target`.
StatusOr<GpuSimAnalysis> AnalyseGpuSimRun(GpuExecutable& exe, GpuSimDevice& device,
                                          const GpuTarget& target, int64_t sample_blocks);

// The launches as predicted kernel spans, linked to their launches by external id.
std::vector<profiler::PredictedKernel> PredictedKernels(const GpuSimAnalysis& analysis,
                                                        const GpuTarget& target);

// The per-HLO profile of one run with predicted times and the analysis columns.
profiler::HloProfile PredictedHloProfile(const GpuSimAnalysis& analysis, const GpuExecutable& exe,
                                         const GpuTarget& target);

}  // namespace xlens::runtime
