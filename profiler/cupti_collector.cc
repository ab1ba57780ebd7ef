#include "profiler/cupti_collector.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

#include "profiler/host_tracer.h"

// The toolkit is optional at build time: without CUPTI's headers the collector still builds and
// Start says why it cannot run. The conversion to a Trace never needs them.
#if defined(XLENS_HAVE_CUPTI_HEADERS) && __has_include(<cupti.h>)
#define XLENS_CUPTI 1
#include <dlfcn.h>

#include <atomic>
#include <mutex>
#include <type_traits>

#include <cupti.h>
#else
#define XLENS_CUPTI 0
#endif

namespace xlens::profiler {

// --- The collector. ------------------------------------------------------------------------------

#if XLENS_CUPTI
namespace {

// The oldest CUPTI whose records we read: CUDA 12.0's (API version 19; from CUDA 13 on the
// versions are numbered 130000 and up, so the comparison still holds).
constexpr uint32_t kMinCuptiVersion = 19;

// The record layouts. CUPTI writes the newest version of each record its release knows, and new
// versions only append fields, so the fields read here sit at the same offsets in every version
// from CUDA 12.0 on; the aliases only follow the names the headers at hand use.
#if CUPTI_API_VERSION >= 130000
using KernelActivity = CUpti_ActivityKernel10;
using MemcpyActivity = CUpti_ActivityMemcpy6;
using SyncActivity = CUpti_ActivitySynchronization2;
using OverheadActivity = CUpti_ActivityOverhead3;
using DeviceActivity = CUpti_ActivityDevice5;
#else
using KernelActivity = CUpti_ActivityKernel9;
using MemcpyActivity = CUpti_ActivityMemcpy5;
using SyncActivity = CUpti_ActivitySynchronization;
using OverheadActivity = CUpti_ActivityOverhead;
using DeviceActivity = CUpti_ActivityDevice4;
#endif

// The activity kinds collected; enabling any of them failing fails Start.
#define XLENS_KIND(kind) {kind, #kind}
constexpr struct {
  CUpti_ActivityKind kind;
  const char* name;
} kRequiredKinds[] = {
    XLENS_KIND(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_MEMCPY),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_MEMSET),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_RUNTIME),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_DRIVER),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_OVERHEAD),
    XLENS_KIND(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION),
};
#undef XLENS_KIND

// libcupti's entry points, with the headers' prototypes.
struct CuptiApi {
  std::string path;
  decltype(&cuptiGetVersion) GetVersion = nullptr;
  decltype(&cuptiGetResultString) GetResultString = nullptr;
  decltype(&cuptiGetTimestamp) GetTimestamp = nullptr;
  decltype(&cuptiSubscribe) Subscribe = nullptr;
  decltype(&cuptiUnsubscribe) Unsubscribe = nullptr;
  decltype(&cuptiActivityRegisterCallbacks) ActivityRegisterCallbacks = nullptr;
  decltype(&cuptiActivityEnable) ActivityEnable = nullptr;
  decltype(&cuptiActivityDisable) ActivityDisable = nullptr;
  decltype(&cuptiActivityFlushAll) ActivityFlushAll = nullptr;
  decltype(&cuptiActivityGetNextRecord) ActivityGetNextRecord = nullptr;
  decltype(&cuptiActivityGetNumDroppedRecords) ActivityGetNumDroppedRecords = nullptr;
  decltype(&cuptiActivityPushExternalCorrelationId) ActivityPushExternalCorrelationId = nullptr;
  decltype(&cuptiActivityPopExternalCorrelationId) ActivityPopExternalCorrelationId = nullptr;
  // Optional: API calls are then named "cbid N", and another client goes unnamed.
  decltype(&cuptiGetCallbackName) GetCallbackName = nullptr;
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  decltype(&cuptiSubscribe_v2) Subscribe_v2 = nullptr;
#endif

  std::string ResultText(CUptiResult result) const {
    const char* text = nullptr;
    if (GetResultString == nullptr || GetResultString(result, &text) != CUPTI_SUCCESS ||
        text == nullptr) {
      return fmt::format("CUPTI error {}", static_cast<int>(result));
    }
    return text;
  }
};

std::vector<std::string> CandidateLibraries() {
  static const char* const kNames[] = {"libcupti.so.13", "libcupti.so.12", "libcupti.so"};
  std::vector<std::string> dirs;
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(home);
  }
  dirs.push_back("/usr/local/cuda");
  // First the loader's own search (LD_LIBRARY_PATH, ldconfig), then the toolkit's directories.
  std::vector<std::string> paths(std::begin(kNames), std::end(kNames));
  for (const std::string& dir : dirs) {
    for (const char* sub : {"lib64", "lib", "extras/CUPTI/lib64"}) {
      for (const char* name : kNames) paths.push_back(fmt::format("{}/{}/{}", dir, sub, name));
    }
  }
  return paths;
}

// Opens libcupti and resolves its functions. The library is never closed: CUPTI hooks itself
// into the driver for the life of the process and does not support being unloaded.
StatusOr<std::shared_ptr<const CuptiApi>> LoadCupti(const std::string& explicit_path) {
  auto api = std::make_shared<CuptiApi>();
  void* library = nullptr;
  std::string last_error;
  std::vector<std::string> candidates =
      explicit_path.empty() ? CandidateLibraries() : std::vector<std::string>{explicit_path};
  for (const std::string& path : candidates) {
    library = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (library != nullptr) {
      api->path = path;
      break;
    }
    const char* why = dlerror();
    last_error = why ? why : path;
  }
  if (library == nullptr) {
    if (!explicit_path.empty()) {
      return Error(fmt::format("cannot load CUPTI from {}: {}", explicit_path, last_error));
    }
    return Error(fmt::format(
        "CUPTI (libcupti.so) not found in the loader's path, $CUDA_HOME or /usr/local/cuda; "
        "add the toolkit's CUPTI directory to LD_LIBRARY_PATH or set CUDA_HOME (last error: {})",
        last_error));
  }

  std::string missing;
  auto bind = [&](auto& fn, const char* name, bool required = true) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(library, name));
    if (fn == nullptr && required && missing.empty()) missing = name;
  };
  bind(api->GetVersion, "cuptiGetVersion");
  bind(api->GetResultString, "cuptiGetResultString");
  bind(api->GetTimestamp, "cuptiGetTimestamp");
  bind(api->Subscribe, "cuptiSubscribe");
  bind(api->Unsubscribe, "cuptiUnsubscribe");
  bind(api->ActivityRegisterCallbacks, "cuptiActivityRegisterCallbacks");
  bind(api->ActivityEnable, "cuptiActivityEnable");
  bind(api->ActivityDisable, "cuptiActivityDisable");
  bind(api->ActivityFlushAll, "cuptiActivityFlushAll");
  bind(api->ActivityGetNextRecord, "cuptiActivityGetNextRecord");
  bind(api->ActivityGetNumDroppedRecords, "cuptiActivityGetNumDroppedRecords");
  bind(api->ActivityPushExternalCorrelationId, "cuptiActivityPushExternalCorrelationId");
  bind(api->ActivityPopExternalCorrelationId, "cuptiActivityPopExternalCorrelationId");
  bind(api->GetCallbackName, "cuptiGetCallbackName", /*required=*/false);
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  bind(api->Subscribe_v2, "cuptiSubscribe_v2", /*required=*/false);
#endif
  if (!missing.empty()) {
    return Error(fmt::format("CUPTI at {} is too old: it lacks {} (CUDA 12 or later needed)",
                             api->path, missing));
  }
  return std::shared_ptr<const CuptiApi>(std::move(api));
}

// The message for a CUPTI call that refused, with what the user can do about it.
Status CuptiError(const CuptiApi& api, CUptiResult result, const char* call) {
  std::string message = fmt::format("CUPTI cannot trace the GPU: {} returned {}", call,
                                    api.ResultText(result));
  switch (result) {
    case CUPTI_ERROR_INSUFFICIENT_PRIVILEGES:
      message +=
          "; the driver lets only administrators profile: run as root, or load the nvidia "
          "module with NVreg_RestrictProfilingToAdminUsers=0 "
          "(https://developer.nvidia.com/ERR_NVGPUCTRPERM)";
      break;
    case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
      message +=
          "; another CUPTI client is attached (Nsight Systems, Nsight Compute, cuda-gdb, "
          "compute-sanitizer or another profiler in this process); run without it";
      break;
    case CUPTI_ERROR_NOT_INITIALIZED:
    case CUPTI_ERROR_INVALID_DEVICE:
    case CUPTI_ERROR_NOT_SUPPORTED:
    case CUPTI_ERROR_NOT_COMPATIBLE:
    case CUPTI_ERROR_UNKNOWN:
      message +=
          "; check that the NVIDIA driver matches the toolkit and that nvidia-smi sees a GPU";
      break;
    default:
      break;
  }
  return Error(std::move(message));
}

// "cudaLaunchKernel_v7000" -> "cudaLaunchKernel", "cuMemcpyHtoD_v2" -> "cuMemcpyHtoD": the
// names users write; the suffix is the ABI version CUPTI's callback ids carry.
std::string StripVersionSuffix(std::string name) {
  size_t v = name.rfind("_v");
  if (v != std::string::npos && v + 2 < name.size() &&
      std::all_of(name.begin() + v + 2, name.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    name.resize(v);
  }
  return name;
}

// The buffers CUPTI writes into and the records copied out of them. Shared between the session
// and CUPTI's callbacks, which run on CUPTI's own thread and may still hold a reference while
// the session ends.
struct Sink {
  std::shared_ptr<const CuptiApi> api;
  size_t buffer_bytes = 0;
  std::vector<std::unique_ptr<uint64_t[]>> storage;  // uint64_t: the 8-byte alignment CUPTI needs

  std::mutex mu;
  std::vector<uint8_t*> free_buffers;  // guarded by mu
  size_t buffers_out = 0;              // with CUPTI now; guarded by mu
  CuptiRecords records;                // guarded by mu

  bool Owns(const uint8_t* buffer) const {
    return std::any_of(storage.begin(), storage.end(), [&](const auto& b) {
      return reinterpret_cast<const uint8_t*>(b.get()) == buffer;
    });
  }
};

// CUPTI's buffer callbacks carry no user data, hence one sink per process.
std::mutex g_sink_mu;
std::shared_ptr<Sink> g_sink;   // guarded by g_sink_mu
bool g_collector_live = false;  // guarded by g_sink_mu: one collector at a time

std::shared_ptr<Sink> CurrentSink() {
  std::lock_guard<std::mutex> lock(g_sink_mu);
  return g_sink;
}

void CUPTIAPI OnBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = nullptr;  // no buffer: CUPTI drops the records and counts them
  *size = 0;
  *max_records = 0;
  std::shared_ptr<Sink> sink = CurrentSink();
  if (sink == nullptr) return;
  std::lock_guard<std::mutex> lock(sink->mu);
  if (sink->free_buffers.empty()) return;
  *buffer = sink->free_buffers.back();
  *size = sink->buffer_bytes;
  sink->free_buffers.pop_back();
  ++sink->buffers_out;
}

void ParseBuffer(const CuptiApi& api, uint8_t* buffer, size_t valid_bytes, CuptiRecords& out) {
  CUpti_Activity* record = nullptr;
  while (api.ActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    switch (record->kind) {
      case CUPTI_ACTIVITY_KIND_KERNEL:
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto& k = *reinterpret_cast<const KernelActivity*>(record);
        KernelRecord r;
        r.name = k.name ? k.name : "(unnamed kernel)";
        r.start = k.start;
        r.end = k.end;
        r.device_id = k.deviceId;
        r.context_id = k.contextId;
        r.stream_id = k.streamId;
        r.correlation_id = k.correlationId;
        r.grid[0] = k.gridX;
        r.grid[1] = k.gridY;
        r.grid[2] = k.gridZ;
        r.block[0] = k.blockX;
        r.block[1] = k.blockY;
        r.block[2] = k.blockZ;
        r.registers_per_thread = k.registersPerThread;
        r.static_shared_memory = k.staticSharedMemory;
        r.dynamic_shared_memory = k.dynamicSharedMemory;
        out.kernels.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto& m = *reinterpret_cast<const MemcpyActivity*>(record);
        out.memcpys.push_back({m.copyKind <= 10 ? static_cast<MemcpyKind>(m.copyKind)
                                                : MemcpyKind::kUnknown,
                               m.bytes, m.start, m.end, m.deviceId, m.contextId, m.streamId,
                               m.correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto& m = *reinterpret_cast<const CUpti_ActivityMemset4*>(record);
        out.memsets.push_back({m.bytes, m.value, m.start, m.end, m.deviceId, m.contextId,
                               m.streamId, m.correlationId});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME:
      case CUPTI_ACTIVITY_KIND_DRIVER: {
        const auto& a = *reinterpret_cast<const CUpti_ActivityAPI*>(record);
        ApiRecord r;
        r.driver = a.kind == CUPTI_ACTIVITY_KIND_DRIVER;
        r.callback_id = a.cbid;
        const char* name = nullptr;
        if (api.GetCallbackName == nullptr ||
            api.GetCallbackName(r.driver ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
                                a.cbid, &name) != CUPTI_SUCCESS ||
            name == nullptr) {
          r.name = fmt::format("cbid {}", a.cbid);
        } else {
          r.name = StripVersionSuffix(name);
        }
        r.start = a.start;
        r.end = a.end;
        r.thread_id = a.threadId;
        r.correlation_id = a.correlationId;
        out.api_calls.push_back(std::move(r));
        break;
      }
      case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION: {
        const auto& s = *reinterpret_cast<const SyncActivity*>(record);
        SyncRecord r;
        r.kind = s.type <= CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE
                     ? static_cast<SyncKind>(s.type)
                     : SyncKind::kUnknown;
        r.start = s.start;
        r.end = s.end;
        r.context_id = s.contextId;
        r.stream_id = s.streamId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? -1 : s.streamId;
        r.correlation_id = s.correlationId;
        out.syncs.push_back(r);
        break;
      }
      case CUPTI_ACTIVITY_KIND_OVERHEAD: {
        const auto& o = *reinterpret_cast<const OverheadActivity*>(record);
        const char* kind = "CUPTI overhead";
        switch (static_cast<int>(o.overheadKind)) {
          case CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER: kind = "driver compiler"; break;
          case CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH: kind = "CUPTI buffer flush"; break;
          case CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION: kind = "CUPTI instrumentation"; break;
          case CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE: kind = "CUPTI resource"; break;
          default: break;
        }
        out.overheads.push_back({kind, o.start, o.end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
        const auto& e = *reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
        // Other kinds belong to other libraries (NVTX users, framework profilers).
        if (e.externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
          out.external_correlations.push_back({e.correlationId, e.externalId});
        }
        break;
      }
      case CUPTI_ACTIVITY_KIND_DEVICE: {
        const auto& d = *reinterpret_cast<const DeviceActivity*>(record);
        if (d.name != nullptr) out.device_names[d.id] = d.name;
        break;
      }
      default:
        break;
    }
  }
}

template <typename T>
void MoveAppend(std::vector<T>& to, std::vector<T>& from) {
  to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
}

void CUPTIAPI OnBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                size_t size, size_t valid_bytes) {
  std::shared_ptr<Sink> sink = CurrentSink();
  // A buffer of a session that ended without getting it back was leaked on purpose (see
  // Finish); it is simply never reused.
  if (sink == nullptr || !sink->Owns(buffer)) return;
  // Parse without the lock: it is the slow part, and the buffer is ours alone until returned.
  CuptiRecords parsed;
  ParseBuffer(*sink->api, buffer, valid_bytes, parsed);
  size_t dropped = 0;
  if (sink->api->ActivityGetNumDroppedRecords(context, stream_id, &dropped) != CUPTI_SUCCESS) {
    dropped = 0;
  }
  std::lock_guard<std::mutex> lock(sink->mu);
  CuptiRecords& r = sink->records;
  MoveAppend(r.kernels, parsed.kernels);
  MoveAppend(r.memcpys, parsed.memcpys);
  MoveAppend(r.memsets, parsed.memsets);
  MoveAppend(r.api_calls, parsed.api_calls);
  MoveAppend(r.syncs, parsed.syncs);
  MoveAppend(r.overheads, parsed.overheads);
  MoveAppend(r.external_correlations, parsed.external_correlations);
  r.device_names.merge(parsed.device_names);
  r.dropped_records += dropped;
  sink->free_buffers.push_back(buffer);
  --sink->buffers_out;
}

// Subscribing claims CUPTI for this process (it allows one subscriber); the callback itself is
// never enabled.
void CUPTIAPI IgnoreCallback(void*, CUpti_CallbackDomain, CUpti_CallbackId, const void*) {}

// Both clocks, the host's read on either side of CUPTI's and averaged.
CuptiClockPair ReadClocks(const CuptiApi& api) {
  int64_t before = NowNs();
  uint64_t cupti = 0;
  api.GetTimestamp(&cupti);
  int64_t after = NowNs();
  return {static_cast<int64_t>(cupti), before + (after - before) / 2};
}

}  // namespace

struct CuptiCollector::Session {
  std::shared_ptr<const CuptiApi> api;
  std::shared_ptr<Sink> sink;
  uint32_t version = 0;
  CUpti_SubscriberHandle subscriber = nullptr;
  bool sink_installed = false;
  std::vector<CUpti_ActivityKind> enabled;
  CuptiClockPair start_clock;
  std::atomic<bool> running{false};

  // Undoes whatever Start did, in reverse: collection off, every buffer back from CUPTI, the
  // claim on CUPTI released. Returns what went wrong, for the trace's metadata.
  std::string Finish();
};

std::string CuptiCollector::Session::Finish() {
  std::vector<std::string> errors;
  running = false;
  if (!enabled.empty()) {
    // Flush, then disable, then flush what arrived meanwhile; never under a lock of ours, as
    // the flush calls OnBufferCompleted on this thread or waits for CUPTI's.
    CUptiResult rc = api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (rc != CUPTI_SUCCESS) errors.push_back("cuptiActivityFlushAll: " + api->ResultText(rc));
    for (auto it = enabled.rbegin(); it != enabled.rend(); ++it) api->ActivityDisable(*it);
    enabled.clear();
    rc = api->ActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    if (rc != CUPTI_SUCCESS) errors.push_back("cuptiActivityFlushAll: " + api->ResultText(rc));
    size_t dropped = 0;
    if (api->ActivityGetNumDroppedRecords(nullptr, 0, &dropped) == CUPTI_SUCCESS) {
      std::lock_guard<std::mutex> lock(sink->mu);
      sink->records.dropped_records += dropped;
    }
  }
  if (subscriber != nullptr) {
    api->Unsubscribe(subscriber);
    subscriber = nullptr;
  }
  std::lock_guard<std::mutex> lock(g_sink_mu);
  if (sink_installed) {
    g_sink.reset();
    sink_installed = false;
    g_collector_live = false;
    std::lock_guard<std::mutex> sink_lock(sink->mu);
    if (sink->buffers_out > 0) {
      // CUPTI kept buffers despite the flush and may still write into them: leak them rather
      // than let it write into freed memory.
      for (auto& buffer : sink->storage) static_cast<void>(buffer.release());
      errors.push_back(fmt::format("{} CUPTI buffers not returned", sink->buffers_out));
    }
  }
  std::string joined;
  for (const std::string& e : errors) joined += (joined.empty() ? "" : "; ") + e;
  return joined;
}

StatusOr<std::unique_ptr<CuptiCollector>> CuptiCollector::Start(const CuptiOptions& options) {
  if (options.buffer_count == 0 || options.buffer_bytes < 4096) {
    return Error("CUPTI needs at least one activity buffer of at least 4096 bytes");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<const CuptiApi> api, LoadCupti(options.library_path));
  uint32_t version = 0;
  if (CUptiResult rc = api->GetVersion(&version); rc != CUPTI_SUCCESS) {
    return CuptiError(*api, rc, "cuptiGetVersion");
  }
  if (version < kMinCuptiVersion) {
    return Error(fmt::format("CUPTI at {} is too old: API version {}, {} (CUDA 12.0) or later "
                             "needed",
                             api->path, version, kMinCuptiVersion));
  }
  // Without the driver every CUPTI call fails with an unhelpful CUPTI_ERROR_UNKNOWN; say so
  // first. (CUPTI loads the same library itself; this handle is simply kept.)
  if (dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL) == nullptr) {
    const char* why = dlerror();
    return Error(fmt::format("CUPTI cannot trace the GPU: no NVIDIA driver ({})",
                             why ? why : "libcuda.so.1 not found"));
  }

  // The buffers, allocated and touched (zeroed) now so that the measured run neither allocates
  // nor faults them in.
  auto sink = std::make_shared<Sink>();
  sink->api = api;
  sink->buffer_bytes = options.buffer_bytes / 8 * 8;
  for (size_t i = 0; i < options.buffer_count; ++i) {
    sink->storage.push_back(std::make_unique<uint64_t[]>(sink->buffer_bytes / 8));
    sink->free_buffers.push_back(reinterpret_cast<uint8_t*>(sink->storage.back().get()));
  }

  auto session = std::make_unique<Session>();
  session->api = api;
  session->sink = sink;
  session->version = version;
  {
    std::lock_guard<std::mutex> lock(g_sink_mu);
    if (g_collector_live) return Error("a CUPTI collector is already running in this process");
    g_collector_live = true;
    g_sink = sink;
    session->sink_installed = true;
  }
  auto fail = [&](Status status) {
    session->Finish();
    return status;
  };

  CUptiResult rc = CUPTI_SUCCESS;
  std::string other_client;
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
  if (api->Subscribe_v2 != nullptr) {
    char old_name[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = {};
    CUpti_SubscriberParams params = {};
    params.structSize = CUpti_SubscriberParams_STRUCT_SIZE;
    params.subscriberName = "xlens";
    params.oldSubscriberName = old_name;
    params.oldSubscriberSize = sizeof(old_name) - 1;
    rc = api->Subscribe_v2(&session->subscriber, IgnoreCallback, nullptr, &params);
    other_client = old_name;
  } else {
    rc = api->Subscribe(&session->subscriber, IgnoreCallback, nullptr);
  }
#else
  rc = api->Subscribe(&session->subscriber, IgnoreCallback, nullptr);
#endif
  if (rc != CUPTI_SUCCESS) {
    session->subscriber = nullptr;
    Status status = CuptiError(*api, rc, "cuptiSubscribe");
    if (!other_client.empty()) {
      status = Error(status.message() + " (attached: " + other_client + ")");
    }
    return fail(status);
  }
  rc = api->ActivityRegisterCallbacks(OnBufferRequested, OnBufferCompleted);
  if (rc != CUPTI_SUCCESS) return fail(CuptiError(*api, rc, "cuptiActivityRegisterCallbacks"));
  for (const auto& [kind, name] : kRequiredKinds) {
    rc = api->ActivityEnable(kind);
    if (rc != CUPTI_SUCCESS) {
      return fail(CuptiError(*api, rc, fmt::format("cuptiActivityEnable({})", name).c_str()));
    }
    session->enabled.push_back(kind);
  }
  // Device records only name the GPUs, and only for contexts created from now on: optional.
  if (api->ActivityEnable(CUPTI_ACTIVITY_KIND_DEVICE) == CUPTI_SUCCESS) {
    session->enabled.push_back(CUPTI_ACTIVITY_KIND_DEVICE);
  }

  session->start_clock = ReadClocks(*api);
  session->running = true;
  return std::unique_ptr<CuptiCollector>(new CuptiCollector(std::move(session)));
}

CuptiCollector::CuptiCollector(std::unique_ptr<Session> session) : session_(std::move(session)) {}

CuptiCollector::~CuptiCollector() {
  if (session_ != nullptr && session_->sink_installed) session_->Finish();
}

void CuptiCollector::PushExternalCorrelation(uint64_t id) {
  if (session_->running.load(std::memory_order_relaxed)) {
    session_->api->ActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, id);
  }
}

void CuptiCollector::PopExternalCorrelation() {
  if (session_->running.load(std::memory_order_relaxed)) {
    session_->api->ActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0,
                                                    nullptr);
  }
}

Trace CuptiCollector::Stop() {
  if (!session_->sink_installed) return Trace{};
  CuptiClockPair stop_clock = ReadClocks(*session_->api);
  std::string errors = session_->Finish();
  CuptiRecords records;
  {
    std::lock_guard<std::mutex> lock(session_->sink->mu);
    records = std::move(session_->sink->records);
  }
  records.cupti_version = session_->version;
  Trace trace = ConvertCuptiRecords(records, session_->start_clock, stop_clock);
  if (!errors.empty()) trace.metadata.push_back({"cupti_error", errors});
  return trace;
}

#else  // !XLENS_CUPTI

struct CuptiCollector::Session {};

StatusOr<std::unique_ptr<CuptiCollector>> CuptiCollector::Start(const CuptiOptions&) {
  return Error("CUPTI cannot trace the GPU: xlens was built without the CUDA toolkit's CUPTI "
               "headers");
}

CuptiCollector::CuptiCollector(std::unique_ptr<Session> session) : session_(std::move(session)) {}
CuptiCollector::~CuptiCollector() = default;
void CuptiCollector::PushExternalCorrelation(uint64_t) {}
void CuptiCollector::PopExternalCorrelation() {}
Trace CuptiCollector::Stop() { return Trace{}; }

#endif  // XLENS_CUPTI

}  // namespace xlens::profiler
