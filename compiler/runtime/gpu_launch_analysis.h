// One kernel launch as the GPU simulator's analysis sees it: its counts (GpuMemoryAnalysis), its
// resources (ptxas), its flops (the cost analysis) and the time the model predicts for them on a
// target; and the three ways it is shown: a per-kernel table (`xlens run --gpu_sim_analysis`),
// the arguments of its predicted span in a trace, and the columns of the per-HLO profile.
#pragma once

#include <string>
#include <vector>

#include "compiler/runtime/gpu_device.h"
#include "compiler/runtime/gpu_kernel_resources.h"
#include "compiler/runtime/gpu_memory_analysis.h"
#include "compiler/runtime/gpu_timing_model.h"
#include "profiler/hlo_profile.h"
#include "profiler/trace.h"

namespace xlens::runtime {

struct GpuLaunchAnalysis {
  std::string kernel;
  std::string hlo_instruction;
  LaunchDimensions dims;
  KernelResources resources;
  KernelMemoryStats memory;
  double flops = 0;
  KernelPrediction prediction;
  int64_t external_id = 0;  // of the observed run's launch (its host span's "External id")
  int64_t launch_ns = 0;    // when the host launched it (NowNs; 0 when tracing was off)
};

// Fills `prediction` from the rest.
void PredictLaunch(const GpuTarget& target, GpuLaunchAnalysis& launch);

// Sectors per request of global loads and stores together (0 without requests).
double SectorsPerRequest(const KernelMemoryStats& memory);

// The table, one row per launch in launch order, then the module's totals. `resources_source`
// says where the register counts come from.
std::string FormatGpuLaunchAnalyses(const std::vector<GpuLaunchAnalysis>& launches,
                                    const GpuTarget& target, const std::string& resources_source);

// The arguments of the launch's predicted kernel span: PyTorch's keys where it has them (grid,
// block, registers per thread, shared memory), then the analysis.
std::vector<profiler::TraceArg> PredictedSpanArgs(const GpuLaunchAnalysis& launch,
                                                  const GpuTarget& target);

// The per-HLO profile's GPU columns.
profiler::HloProfileEntry::GpuAnalysis ProfileColumns(const GpuLaunchAnalysis& launch);

}  // namespace xlens::runtime
