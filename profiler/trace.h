// The in-memory form of a timeline: what the host tracer and the CUPTI collector produce and what
// the Chrome trace writer streams out (and the reader reads back). It knows nothing of HLO: the
// compiler and runtime put their names into spans as plain strings and numbers.
//
// Times are nanoseconds on the host's steady clock (profiler::NowNs); the writer makes them
// relative to the trace's base time.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace xlens::profiler {

// One `args` entry of an event: an integer, a number, a string or a list of integers (a grid).
using TraceArgValue = std::variant<int64_t, double, std::string, std::vector<int64_t>>;
struct TraceArg {
  std::string key;
  TraceArgValue value;
};

// Process ids: the host is 0, GPU n is kGpuPidBase + n (one process per device); simulated CPU
// device d of a run on several devices is kCpuDevicePidBase + d (its global id, so the traces of
// several processes merge without clashing).
inline constexpr int32_t kHostPid = 0;
inline constexpr int32_t kGpuPidBase = 1;
inline constexpr int32_t kCpuDevicePidBase = 1000;

// Categories, as PyTorch's profiler names them where it has a name for the thing, so tools that
// read its traces (HolisticTraceAnalysis, Perfetto's queries) find what they look for.
namespace category {
inline constexpr const char* kCompile = "compile";        // one module's compilation
inline constexpr const char* kPipeline = "pipeline";      // a named pass pipeline
inline constexpr const char* kPass = "pass";              // one pass (args: changed)
inline constexpr const char* kCodegen = "codegen";        // LLVM IR emission, JIT, PTX
inline constexpr const char* kClustering = "clustering";  // graph clustering passes
inline constexpr const char* kExecute = "execute";        // one run of an executable
inline constexpr const char* kThunk = "thunk";            // copies, control flow
inline constexpr const char* kCpuKernel = "cpu_kernel";   // a generated kernel on the CPU
inline constexpr const char* kLibrary = "library_call";   // Eigen dot/conv, sort
// One part of a library call split over the thread pool, on the thread that ran it. Not a kernel
// of its own (IsKernelCategory): its call's span counts the time.
inline constexpr const char* kLibraryPart = "library_part";
inline constexpr const char* kCopy = "memcpy";            // host <-> device copies (host side)
// A collective of several devices (all-reduce, ...): args bytes, group, wait_ns, waited_for.
inline constexpr const char* kCollective = "collective";
// GPU activity (CUPTI), with PyTorch's names.
inline constexpr const char* kGpuKernel = "kernel";
inline constexpr const char* kGpuMemcpy = "gpu_memcpy";
inline constexpr const char* kGpuMemset = "gpu_memset";
inline constexpr const char* kCudaRuntime = "cuda_runtime";
inline constexpr const char* kCudaDriver = "cuda_driver";
inline constexpr const char* kCudaSync = "cuda_sync";
inline constexpr const char* kOverhead = "overhead";
inline constexpr const char* kFlow = "ac2g";  // launch -> kernel flow events
}  // namespace category

// A complete span ("ph":"X").
struct TraceEvent {
  std::string name;
  std::string category;
  int32_t pid = kHostPid;
  int64_t tid = 0;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  std::vector<TraceArg> args;
  // Non-zero: this event starts (flow_out) or ends (flow_in) the flow with that id; a launch
  // on the host and the kernel it launched share the id (CUPTI's correlation id).
  int64_t flow_out = 0;
  int64_t flow_in = 0;
  // Where within the span each of its flows attaches, after its start: 0 (the start) for a launch
  // and its kernel; a collective's arrival, so that the arrows between the members of a meeting
  // run forward in time in the order they arrived, though a member may start its span after
  // another that arrives later.
  int64_t flow_out_at_ns = 0;
  int64_t flow_in_at_ns = 0;
};

struct TraceProcess {
  int32_t pid = 0;
  std::string name;
  int64_t sort_index = 0;
};

struct TraceThread {
  int32_t pid = 0;
  int64_t tid = 0;
  std::string name;
  int64_t sort_index = 0;
};

struct Trace {
  // Times in the file are microseconds after this (nanoseconds on the clock of start_ns).
  int64_t base_ns = 0;
  // The wall-clock time (Unix epoch, ns) of base_ns, when known: the file's baseTimeNanoseconds,
  // so that tools which merge traces (as PyTorch's) see when it was recorded.
  int64_t wall_base_ns = 0;
  std::vector<TraceProcess> processes;
  std::vector<TraceThread> threads;
  std::vector<TraceEvent> events;
  // Written under "otherData": counters such as dropped_records and kernels_before_launch.
  std::vector<TraceArg> metadata;

  // Adds every event, process, thread and metadata entry of `other` (a collector's part).
  void Append(Trace other);
  const TraceArg* FindMetadata(const std::string& key) const;
};

// Categories whose events are kernels: generated CPU kernels, library calls, GPU kernels. The
// trace summary, the per-HLO profile and the derived "achieved GB/s" count these.
bool IsKernelCategory(const std::string& category);

// Finds an argument of an event by key; nullptr when absent.
const TraceArg* FindArg(const TraceEvent& event, const std::string& key);

}  // namespace xlens::profiler
