#include "profiler/cupti_records.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <fmt/format.h>

namespace xlens::profiler {

// --- Records -> Trace (pure). -------------------------------------------------------------------

const char* MemcpyKindName(MemcpyKind kind) {
  switch (kind) {
    case MemcpyKind::kHtoD: return "HtoD";
    case MemcpyKind::kDtoH: return "DtoH";
    case MemcpyKind::kHtoA: return "HtoA";
    case MemcpyKind::kAtoH: return "AtoH";
    case MemcpyKind::kAtoA: return "AtoA";
    case MemcpyKind::kAtoD: return "AtoD";
    case MemcpyKind::kDtoA: return "DtoA";
    case MemcpyKind::kDtoD: return "DtoD";
    case MemcpyKind::kHtoH: return "HtoH";
    case MemcpyKind::kPtoP: return "PtoP";
    case MemcpyKind::kUnknown: break;
  }
  return "Unknown";
}

namespace {

// Below this the two readings are too close for their difference to give a rate.
constexpr int64_t kMinClockSpanNs = 1'000'000;
// Oscillators drift by parts per million and NTP slews by at most 500 ppm; a larger disagreement
// means one clock was set, and a rate fitted through that step would skew every event.
constexpr double kMaxClockRateError = 1e-3;

// The name PyTorch's profiler gives each kind of synchronization, and its "cuda_sync_kind".
const char* SyncEventName(SyncKind kind) {
  switch (kind) {
    case SyncKind::kEventSynchronize: return "Event Sync";
    case SyncKind::kStreamWaitEvent: return "Stream Wait Event";
    case SyncKind::kStreamSynchronize: return "Stream Sync";
    case SyncKind::kContextSynchronize: return "Context Sync";
    case SyncKind::kUnknown: break;
  }
  return "Sync";
}
const char* SyncKindKey(SyncKind kind) {
  switch (kind) {
    case SyncKind::kEventSynchronize: return "event_sync";
    case SyncKind::kStreamWaitEvent: return "stream_wait_event";
    case SyncKind::kStreamSynchronize: return "stream_sync";
    case SyncKind::kContextSynchronize: return "context_sync";
    case SyncKind::kUnknown: break;
  }
  return "unknown";
}

// Calls that put work on a stream: kernel and graph launches, copies and memsets, in both APIs
// and all their variants (_v2, _ptsz, Async, Ex). Only those whose correlation id matches GPU
// activity start a flow, so a name that matches too widely (cudaLaunchHostFunc) does no harm.
bool IsLaunchApi(std::string_view name) {
  return name.find("Launch") != std::string_view::npos ||
         name.find("Memcpy") != std::string_view::npos ||
         name.find("Memset") != std::string_view::npos;
}

bool Timed(uint64_t start, uint64_t end) { return start != 0 && end != 0; }

}  // namespace

CuptiClock::CuptiClock(const CuptiClockPair& start, const CuptiClockPair& stop) : start_(start) {
  drift_ns_ = (stop.host_ns - stop.cupti_ns) - (start.host_ns - start.cupti_ns);
  int64_t cupti_span = stop.cupti_ns - start.cupti_ns;
  int64_t host_span = stop.host_ns - start.host_ns;
  if (cupti_span >= kMinClockSpanNs && host_span > 0) {
    double rate = static_cast<double>(host_span) / static_cast<double>(cupti_span);
    if (std::abs(rate - 1.0) <= kMaxClockRateError) rate_ = rate;
  }
}

int64_t CuptiClock::ToHostNs(uint64_t cupti_ns) const {
  int64_t delta = static_cast<int64_t>(cupti_ns) - start_.cupti_ns;
  return start_.host_ns + std::llround(static_cast<double>(delta) * rate_);
}

Trace ConvertCuptiRecords(const CuptiRecords& records, const CuptiClockPair& start,
                          const CuptiClockPair& stop) {
  Trace trace;
  const CuptiClock clock(start, stop);
  int64_t untimed = 0;
  auto place = [&](TraceEvent& event, uint64_t begin, uint64_t end) {
    event.start_ns = clock.ToHostNs(begin);
    event.duration_ns = std::max<int64_t>(0, clock.ToHostNs(end) - event.start_ns);
  };

  // The id the runtime pushed around each call; the first record wins if CUPTI sent several.
  std::unordered_map<uint32_t, uint64_t> external_id;
  for (const ExternalCorrelationRecord& r : records.external_correlations) {
    external_id.emplace(r.correlation_id, r.external_id);
  }

  // The launching call of each piece of GPU work. A runtime call and the driver call it makes
  // share the correlation id; the runtime call is the one the user wrote, so it starts the flow
  // (a flow has exactly one start).
  std::unordered_set<uint32_t> gpu_correlations;
  auto add_gpu_work = [&](const auto& work) {
    for (const auto& w : work) {
      if (Timed(w.start, w.end) && w.correlation_id != 0) gpu_correlations.insert(w.correlation_id);
    }
  };
  add_gpu_work(records.kernels);
  add_gpu_work(records.memcpys);
  add_gpu_work(records.memsets);
  std::unordered_map<uint32_t, size_t> launch_of;
  for (size_t i = 0; i < records.api_calls.size(); ++i) {
    const ApiRecord& api = records.api_calls[i];
    if (!Timed(api.start, api.end) || !gpu_correlations.count(api.correlation_id) ||
        !IsLaunchApi(api.name)) {
      continue;
    }
    auto [it, inserted] = launch_of.emplace(api.correlation_id, i);
    const ApiRecord& held = records.api_calls[it->second];
    if (!inserted && (held.driver != api.driver ? held.driver : api.start < held.start)) {
      it->second = i;
    }
  }

  // Devices and streams seen, and which device each context belongs to (synchronization
  // records name only the context).
  std::set<uint32_t> devices;
  std::set<std::pair<uint32_t, int64_t>> streams;
  std::unordered_map<uint32_t, uint32_t> device_of_context;
  auto gpu_event = [&](const char* category, std::string name, uint32_t device, uint32_t context,
                       uint32_t stream, uint32_t correlation, uint64_t begin, uint64_t end) {
    devices.insert(device);
    streams.emplace(device, stream);
    device_of_context.emplace(context, device);
    TraceEvent event;
    event.name = std::move(name);
    event.category = category;
    event.pid = kGpuPidBase + static_cast<int32_t>(device);
    event.tid = stream;
    place(event, begin, end);
    event.args.push_back({"device", int64_t{device}});
    event.args.push_back({"stream", int64_t{stream}});
    event.args.push_back({"correlation", int64_t{correlation}});
    if (auto it = external_id.find(correlation); it != external_id.end()) {
      event.args.push_back({"External id", static_cast<int64_t>(it->second)});
    }
    if (correlation != 0 && launch_of.count(correlation)) event.flow_in = correlation;
    trace.events.push_back(std::move(event));
    return &trace.events.back();
  };

  int64_t kernels_before_launch = 0;
  for (const KernelRecord& k : records.kernels) {
    if (!Timed(k.start, k.end)) {
      ++untimed;
      continue;
    }
    TraceEvent* event = gpu_event(category::kGpuKernel, k.name, k.device_id, k.context_id,
                                  k.stream_id, k.correlation_id, k.start, k.end);
    event->args.push_back({"grid", std::vector<int64_t>{k.grid[0], k.grid[1], k.grid[2]}});
    event->args.push_back({"block", std::vector<int64_t>{k.block[0], k.block[1], k.block[2]}});
    event->args.push_back({"registers per thread", int64_t{k.registers_per_thread}});
    event->args.push_back(
        {"shared memory", int64_t{k.static_shared_memory} + int64_t{k.dynamic_shared_memory}});
    if (auto it = launch_of.find(k.correlation_id); it != launch_of.end() &&
        event->start_ns < clock.ToHostNs(records.api_calls[it->second].start)) {
      ++kernels_before_launch;
    }
  }
  auto add_bytes = [](TraceEvent* event, uint64_t bytes) {
    event->args.push_back({"bytes", static_cast<int64_t>(bytes)});
    // Bytes per nanosecond are GB/s.
    double bandwidth = event->duration_ns > 0
                           ? static_cast<double>(bytes) / static_cast<double>(event->duration_ns)
                           : 0.0;
    event->args.push_back({"memory bandwidth (GB/s)", bandwidth});
  };
  for (const MemcpyRecord& m : records.memcpys) {
    if (!Timed(m.start, m.end)) {
      ++untimed;
      continue;
    }
    add_bytes(gpu_event(category::kGpuMemcpy, fmt::format("Memcpy {}", MemcpyKindName(m.kind)),
                        m.device_id, m.context_id, m.stream_id, m.correlation_id, m.start, m.end),
              m.bytes);
  }
  for (const MemsetRecord& m : records.memsets) {
    if (!Timed(m.start, m.end)) {
      ++untimed;
      continue;
    }
    add_bytes(gpu_event(category::kGpuMemset, "Memset", m.device_id, m.context_id, m.stream_id,
                        m.correlation_id, m.start, m.end),
              m.bytes);
  }

  // Synchronizations: on the stream waited for, like PyTorch's; context and event waits on a
  // track of their own. A context never seen in GPU work goes to the first device.
  std::set<uint32_t> untied_sync_devices;
  for (const SyncRecord& s : records.syncs) {
    if (!Timed(s.start, s.end)) {
      ++untimed;
      continue;
    }
    uint32_t device = devices.empty() ? 0 : *devices.begin();
    if (auto it = device_of_context.find(s.context_id); it != device_of_context.end()) {
      device = it->second;
    }
    devices.insert(device);
    TraceEvent event;
    event.name = SyncEventName(s.kind);
    event.category = category::kCudaSync;
    event.pid = kGpuPidBase + static_cast<int32_t>(device);
    if (s.stream_id >= 0) {
      event.tid = s.stream_id;
      streams.emplace(device, s.stream_id);
    } else {
      event.tid = kGpuSyncTid;
      untied_sync_devices.insert(device);
    }
    place(event, s.start, s.end);
    event.args.push_back({"device", int64_t{device}});
    event.args.push_back({"stream", s.stream_id});
    event.args.push_back({"correlation", int64_t{s.correlation_id}});
    event.args.push_back({"cuda_sync_kind", std::string(SyncKindKey(s.kind))});
    trace.events.push_back(std::move(event));
  }

  // API calls: one host track per calling thread, numbered in the order the threads first
  // called CUDA so that the numbering does not depend on CUPTI's thread ids.
  std::unordered_map<uint32_t, uint64_t> first_call;
  for (const ApiRecord& api : records.api_calls) {
    if (!Timed(api.start, api.end)) continue;
    auto [it, inserted] = first_call.emplace(api.thread_id, api.start);
    if (!inserted) it->second = std::min(it->second, api.start);
  }
  std::vector<std::pair<uint64_t, uint32_t>> thread_order;
  for (const auto& [thread, first] : first_call) thread_order.emplace_back(first, thread);
  std::sort(thread_order.begin(), thread_order.end());
  std::unordered_map<uint32_t, int64_t> api_tid;
  for (size_t n = 0; n < thread_order.size(); ++n) {
    int64_t tid = kCudaApiTidBase + static_cast<int64_t>(n);
    api_tid[thread_order[n].second] = tid;
    trace.threads.push_back({kHostPid, tid, fmt::format("CUDA API (thread {})", n), tid});
  }
  for (size_t i = 0; i < records.api_calls.size(); ++i) {
    const ApiRecord& api = records.api_calls[i];
    if (!Timed(api.start, api.end)) {
      ++untimed;
      continue;
    }
    TraceEvent event;
    event.name = api.name;
    event.category = api.driver ? category::kCudaDriver : category::kCudaRuntime;
    event.pid = kHostPid;
    event.tid = api_tid[api.thread_id];
    place(event, api.start, api.end);
    event.args.push_back({"cbid", int64_t{api.callback_id}});
    event.args.push_back({"correlation", int64_t{api.correlation_id}});
    if (auto it = external_id.find(api.correlation_id); it != external_id.end()) {
      event.args.push_back({"External id", static_cast<int64_t>(it->second)});
    }
    if (auto it = launch_of.find(api.correlation_id); it != launch_of.end() && it->second == i) {
      event.flow_out = api.correlation_id;
    }
    trace.events.push_back(std::move(event));
  }

  for (const OverheadRecord& o : records.overheads) {
    if (!Timed(o.start, o.end)) {
      ++untimed;
      continue;
    }
    TraceEvent event;
    event.name = o.kind;
    event.category = category::kOverhead;
    event.pid = kHostPid;
    event.tid = kCuptiOverheadTid;
    place(event, o.start, o.end);
    trace.events.push_back(std::move(event));
  }
  if (!records.overheads.empty()) {
    trace.threads.push_back({kHostPid, kCuptiOverheadTid, "CUPTI overhead", kCuptiOverheadTid});
  }

  for (uint32_t device : devices) {
    std::string name = fmt::format("GPU {}", device);
    if (auto it = records.device_names.find(device); it != records.device_names.end()) {
      name += fmt::format(" ({})", it->second);
    }
    int32_t pid = kGpuPidBase + static_cast<int32_t>(device);
    trace.processes.push_back({pid, std::move(name), 1 + int64_t{device}});
    if (untied_sync_devices.count(device)) {
      trace.threads.push_back({pid, kGpuSyncTid, "synchronization", kGpuSyncTid});
    }
  }
  for (const auto& [device, stream] : streams) {
    trace.threads.push_back(
        {kGpuPidBase + static_cast<int32_t>(device), stream, fmt::format("stream {}", stream),
         stream});
  }

  // By start; on a tie the longer first, as an enclosing span comes before what it encloses.
  std::sort(trace.events.begin(), trace.events.end(), [](const TraceEvent& a, const TraceEvent& b) {
    return std::tie(a.start_ns, b.duration_ns, a.pid, a.tid, a.name) <
           std::tie(b.start_ns, a.duration_ns, b.pid, b.tid, b.name);
  });
  trace.metadata.push_back({"dropped_records", static_cast<int64_t>(records.dropped_records)});
  trace.metadata.push_back({"kernels_before_launch", kernels_before_launch});
  trace.metadata.push_back({"clock_drift_ns", clock.drift_ns()});
  trace.metadata.push_back({"cupti_version", int64_t{records.cupti_version}});
  if (untimed > 0) trace.metadata.push_back({"untimed_records", untimed});
  return trace;
}

void LinkExternalIds(Trace& trace) {
  static const char* const kLinkedKeys[] = {"hlo_op", "module", "fusion_kind", "op_names",
                                            "source", "stack", "bytes_accessed", "flops"};
  auto id_of = [](const TraceEvent& event) -> const int64_t* {
    const TraceArg* arg = FindArg(event, "External id");
    return arg ? std::get_if<int64_t>(&arg->value) : nullptr;
  };

  // What the host knows per id; several host events may carry one id (the thunk's span and
  // the CUDA calls inside it), and the first value of each key wins.
  std::unordered_map<int64_t, std::vector<TraceArg>> known;
  for (const TraceEvent& event : trace.events) {
    const int64_t* id = event.pid == kHostPid ? id_of(event) : nullptr;
    if (id == nullptr) continue;
    std::vector<TraceArg>& args = known[*id];
    for (const char* key : kLinkedKeys) {
      const TraceArg* arg = FindArg(event, key);
      bool have = std::any_of(args.begin(), args.end(),
                              [&](const TraceArg& a) { return a.key == key; });
      if (arg != nullptr && !have) args.push_back(*arg);
    }
  }

  for (TraceEvent& event : trace.events) {
    if (event.pid < kGpuPidBase) continue;
    const int64_t* id = id_of(event);
    if (id == nullptr) continue;
    if (auto it = known.find(*id); it != known.end()) {  // (args grow below: `id` dies here)
      for (const TraceArg& arg : it->second) {
        if (FindArg(event, arg.key) == nullptr) event.args.push_back(arg);
      }
    }
    const TraceArg* bytes = FindArg(event, "bytes_accessed");
    if (event.category != category::kGpuKernel || bytes == nullptr || event.duration_ns <= 0 ||
        FindArg(event, "achieved GB/s") != nullptr) {
      continue;
    }
    double value = 0;
    if (const int64_t* i = std::get_if<int64_t>(&bytes->value)) {
      value = static_cast<double>(*i);
    } else if (const double* d = std::get_if<double>(&bytes->value)) {
      value = *d;
    } else {
      continue;
    }
    // Bytes per nanosecond are GB/s.
    event.args.push_back({"achieved GB/s", value / static_cast<double>(event.duration_ns)});
  }
}

}  // namespace xlens::profiler
