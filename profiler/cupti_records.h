// What the CUPTI collector copies out of CUPTI's activity buffers, as plain structs, and the pure
// conversion of those records into the GPU part of a trace: one process per device, a track per
// stream, flows from launches to kernels, GPU times on the host clock. Nothing here needs CUPTI
// or a GPU, so tests drive it with synthetic records.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "profiler/trace.h"

namespace xlens::profiler {

// --- Records, as the collector copies them out of CUPTI's buffers. ------------------------------
// Times are CUPTI timestamps (cuptiGetTimestamp's clock, nanoseconds); 0 means CUPTI could not
// time the activity (it says so for lack of device memory), and such records are left out.

struct KernelRecord {
  std::string name;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
  int32_t grid[3] = {0, 0, 0};
  int32_t block[3] = {0, 0, 0};
  int32_t registers_per_thread = 0;
  int32_t static_shared_memory = 0;
  int32_t dynamic_shared_memory = 0;
};

// CUPTI's copy directions (CUpti_ActivityMemcpyKind, same numbers).
enum class MemcpyKind : uint8_t {
  kUnknown = 0, kHtoD = 1, kDtoH = 2, kHtoA = 3, kAtoH = 4, kAtoA = 5, kAtoD = 6, kDtoA = 7,
  kDtoD = 8, kHtoH = 9, kPtoP = 10,
};
// "HtoD", "DtoH", ...; "Unknown" for anything else.
const char* MemcpyKindName(MemcpyKind kind);

struct MemcpyRecord {
  MemcpyKind kind = MemcpyKind::kUnknown;
  uint64_t bytes = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
};

struct MemsetRecord {
  uint64_t bytes = 0;
  uint32_t value = 0;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t device_id = 0;
  uint32_t context_id = 0;
  uint32_t stream_id = 0;
  uint32_t correlation_id = 0;
};

// A CUDA runtime or driver API call, on the host thread that made it.
struct ApiRecord {
  bool driver = false;  // the driver API (cu*), else the runtime API (cuda*)
  uint32_t callback_id = 0;
  std::string name;     // "cuLaunchKernel"; "cbid N" where CUPTI cannot name it
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t thread_id = 0;  // CUPTI's id of the calling thread (not the host tracer's)
  uint32_t correlation_id = 0;
};

// CUPTI's synchronization types (CUpti_ActivitySynchronizationType, same numbers).
enum class SyncKind : uint8_t {
  kUnknown = 0, kEventSynchronize = 1, kStreamWaitEvent = 2, kStreamSynchronize = 3,
  kContextSynchronize = 4,
};

// A host thread waiting on the GPU (stream/event/context synchronize, stream wait event).
struct SyncRecord {
  SyncKind kind = SyncKind::kUnknown;
  uint64_t start = 0;
  uint64_t end = 0;
  uint32_t context_id = 0;
  int64_t stream_id = -1;  // -1: not tied to a stream (a context synchronize)
  uint32_t correlation_id = 0;
};

// Time CUPTI or the driver spent on their own business (buffer flushes, instrumentation).
struct OverheadRecord {
  std::string kind;  // "CUPTI buffer flush", "driver compiler", ...
  uint64_t start = 0;
  uint64_t end = 0;
};

// Links a CUDA API call (and so what it launched) to the id the runtime pushed around it.
struct ExternalCorrelationRecord {
  uint32_t correlation_id = 0;
  uint64_t external_id = 0;
};

struct CuptiRecords {
  std::vector<KernelRecord> kernels;
  std::vector<MemcpyRecord> memcpys;
  std::vector<MemsetRecord> memsets;
  std::vector<ApiRecord> api_calls;
  std::vector<SyncRecord> syncs;
  std::vector<OverheadRecord> overheads;
  std::vector<ExternalCorrelationRecord> external_correlations;
  std::map<uint32_t, std::string> device_names;  // device id -> "NVIDIA H100 80GB HBM3"
  uint64_t dropped_records = 0;  // as CUPTI counted them (no buffer was free)
  uint32_t cupti_version = 0;    // cuptiGetVersion
};

// --- Clocks. -------------------------------------------------------------------------------------

// One reading of both clocks, taken as close together as possible.
struct CuptiClockPair {
  int64_t cupti_ns = 0;  // cuptiGetTimestamp
  int64_t host_ns = 0;   // NowNs
};

// Maps CUPTI timestamps onto the host tracer's clock (NowNs) from a reading at Start and one at
// Stop: linearly between them, or by the offset at Start alone when the readings are too close
// together (under a millisecond) or disagree by more than a clock can drift (0.1%), which only
// a clock being set would explain.
class CuptiClock {
 public:
  CuptiClock(const CuptiClockPair& start, const CuptiClockPair& stop);
  int64_t ToHostNs(uint64_t cupti_ns) const;
  // How far the offset between the clocks moved from Start to Stop.
  int64_t drift_ns() const { return drift_ns_; }

 private:
  CuptiClockPair start_;
  double rate_ = 1.0;  // host nanoseconds per CUPTI nanosecond
  int64_t drift_ns_ = 0;
};

// --- Records -> Trace. ---------------------------------------------------------------------------

// Host track ids of what CUPTI reports on the host. CUPTI identifies a calling thread by its own
// id, which the host tracer does not know, so API calls get tracks of their own beside the host
// tracer's threads: the n-th thread (in order of its first call) that called CUDA is
// kCudaApiTidBase + n, named "CUDA API (thread n)".
inline constexpr int64_t kCudaApiTidBase = 1'000'000;
inline constexpr int64_t kCuptiOverheadTid = 2'000'000;  // "CUPTI overhead"
// The GPU track of synchronizations not tied to a stream (context synchronize).
inline constexpr int64_t kGpuSyncTid = 1'000'000;

// Turns records into the GPU part of a trace:
//  - one process per device (pid kGpuPidBase + n, "GPU n" or "GPU n (name)" where CUPTI named
//    the device, sort index 1 + n),
//    one track per stream (tid = stream id, "stream n");
//  - kernels, copies and memsets on their stream, with PyTorch profiler's args ("device",
//    "stream", "correlation", "External id", "grid", "block", "registers per thread",
//    "shared memory"; "bytes", "memory bandwidth (GB/s)");
//  - runtime and driver API calls on the host (see kCudaApiTidBase), named by the function;
//  - synchronizations on the GPU stream waited for; overhead on the host's "CUPTI overhead";
//  - a flow from each launching call (runtime preferred over the driver call inside it) to the
//    kernel, copy or memset it launched, matched by correlation id; flows whose other end is
//    missing are left out;
//  - metadata: dropped_records, kernels_before_launch (kernels that, on the host clock, start
//    before the call that launched them: a measure of clock mapping error; they are kept),
//    clock_drift_ns, cupti_version.
// The host process itself is named by the host tracer. Events are sorted by start time.
Trace ConvertCuptiRecords(const CuptiRecords& records, const CuptiClockPair& start,
                          const CuptiClockPair& stop);

// Copies what the runtime knows about a launch ("hlo_op", "fusion_kind", "op_names", "module",
// "source", "stack", "bytes_accessed", "flops") from host events carrying an "External id" arg to the GPU events
// with the same "External id" (arguments a GPU event already has are kept), and gives each
// such kernel "achieved GB/s" = bytes_accessed / its duration.
void LinkExternalIds(Trace& trace);

}  // namespace xlens::profiler
