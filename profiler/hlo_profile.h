// The per-HLO profile (--xla_hlo_profile): after a run, one row per kernel or library call,
// sorted by time, with what each moved and computed and how close it came to the machine's
// memory bandwidth. XLA prints the same kind of table ("Execution profile for ...").
//
// The profiler knows nothing of HLO: the runtime fills the rows with names, times and the costs
// its cost analysis found.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiler/machine_limits.h"

namespace xlens::profiler {

struct HloProfileEntry {
  std::string name;      // the HLO instruction the kernel or call runs ("fusion.3")
  std::string kind;      // "kLoop fusion", "dot (Eigen)", "copy", "while", ...
  int64_t total_ns = 0;  // over every run
  // Per run, from the cost analysis of the optimized module; 0 when unknown.
  double bytes_accessed = 0;
  double flops = 0;
  double transcendentals = 0;
  // What the GPU simulator's memory analysis found (--backend=gpu-sim); shown as columns when
  // any row has it.
  struct GpuAnalysis {
    double sectors_per_request = 0;  // global loads and stores together
    double dram_bytes = 0;           // distinct sectors moved, per run
    double occupancy = 0;            // resident warps over the SM's maximum
    int64_t bank_conflicts = 0;      // shared memory, per run
    std::string bound;               // memory, compute, latency, uncoalesced, shared, launch
  };
  bool has_gpu_analysis = false;
  GpuAnalysis gpu = {};
  // Where the instruction came from in the user's program ("train.py:15"), as the compiler's
  // stack-frame table or source_file metadata says (for a fusion, the rule of KernelStack in
  // compiler/hlo/stack_frames.h); empty when unknown. A source column when any row has one.
  std::string source;
};

struct HloProfile {
  std::string module;
  int64_t runs = 1;
  std::vector<HloProfileEntry> entries;
  // A copy's bandwidth (GB/s) for the %peakBW column; 0 leaves it out. Set for predicted times
  // (the target's device copy); measured runs on this machine have `limits` instead, whose
  // %bound holds each row to the bandwidth of its working set's cache or memory (a copy loop
  // over memory, beside it, read over 100% for every kernel in cache).
  double peak_bandwidth_gbps = 0;
  // This machine's measured limits (not owned; ThisMachineLimits() lives for the process). When
  // set, a %bound column holds each row to the floor they put under its time: its bytes over the
  // bandwidth of a working set that size (the cache that holds it, or memory) or its flops over
  // the peak FLOP/s, whichever is longer; the `limit` column says which.
  const MachineLimits* limits = nullptr;
  // Non-empty when the times are not measured but predicted ("predicted for h100 (NVIDIA
  // H100 SXM5 80GB)"): said in the header, and the %peak column is of the target's copy
  // bandwidth.
  std::string predicted_for;
};

// The table, rows sorted by time, ending in a newline.
std::string FormatHloProfile(const HloProfile& profile);

// GB/s (bytes read plus bytes written) of a parallel copy of 64 MiB, the best of a few tries.
// Measured on the first call and cached for the process.
double PeakMemoryBandwidthGBps();

}  // namespace xlens::profiler
