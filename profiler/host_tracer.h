// The host tracer: spans on the CPU, recorded into per-thread buffers.
//
//   profiler::TraceSpan span("fusion.3", profiler::category::kCpuKernel);
//   if (span.active()) span.AddArg("bytes_accessed", bytes);
//
// Disabled (no session running), a span is one load and one predictable branch. Enabled, it reads
// the steady clock twice and appends one record to its thread's buffer: no lock and, once the
// buffer has grown to the session's size, no allocation (strings are copied into a per-thread
// arena that is kept across sessions). Spans are strictly nested per thread because they are
// scoped objects.
//
// One session at a time (TracerSession): Start enables every thread's recording, Stop disables it
// and collects every buffer into a Trace. Threads keep their buffers after they exit, so a worker
// that ended mid-session still shows up.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "profiler/trace.h"

namespace xlens::profiler {

// Nanoseconds on the steady clock; every timestamp in a Trace is on this clock.
int64_t NowNs();

namespace internal {
extern std::atomic<bool> g_tracing_enabled;
// A recording span: its index in the thread's buffer and the session it belongs to, so a span
// that outlives its session never writes into a later one's records. -1: not recording.
using SpanHandle = int64_t;
// The recording side, out of line so TraceSpan stays small where it is inlined.
SpanHandle BeginSpan(std::string_view name, std::string_view category);
void AddIntArg(SpanHandle span, std::string_view key, int64_t value);
void AddDoubleArg(SpanHandle span, std::string_view key, double value);
void AddStringArg(SpanHandle span, std::string_view key, std::string_view value);
void EndSpan(SpanHandle span);
}  // namespace internal

inline bool TracingEnabled() {
  return __builtin_expect(internal::g_tracing_enabled.load(std::memory_order_relaxed), 0);
}

// Adds arguments to a recorded span; does nothing for a span that is not recording.
class SpanArgs {
 public:
  explicit SpanArgs(internal::SpanHandle span = -1) : span_(span) {}
  // Whether this span records (build expensive arguments only then).
  bool active() const { return span_ >= 0; }
  void AddArg(std::string_view key, int64_t value) {
    if (span_ >= 0) internal::AddIntArg(span_, key, value);
  }
  void AddArg(std::string_view key, int value) { AddArg(key, int64_t{value}); }
  void AddArg(std::string_view key, bool value) { AddArg(key, int64_t{value}); }
  void AddArg(std::string_view key, double value) {
    if (span_ >= 0) internal::AddDoubleArg(span_, key, value);
  }
  void AddArg(std::string_view key, std::string_view value) {
    if (span_ >= 0) internal::AddStringArg(span_, key, value);
  }
  void AddArg(std::string_view key, const char* value) { AddArg(key, std::string_view(value)); }
  void AddArg(std::string_view key, const std::string& value) {
    AddArg(key, std::string_view(value));
  }

 protected:
  internal::SpanHandle span_ = -1;
};

// A span from construction to destruction.
class TraceSpan : public SpanArgs {
 public:
  TraceSpan(std::string_view name, std::string_view category) {
    if (TracingEnabled()) span_ = internal::BeginSpan(name, category);
  }
  ~TraceSpan() {
    if (span_ >= 0) internal::EndSpan(span_);
  }
  TraceSpan(const TraceSpan&) = delete;
  TraceSpan& operator=(const TraceSpan&) = delete;
};

// Records a span whose times were measured elsewhere (a pass timed by the pipeline), on the
// calling thread; the strings are copied. Nothing happens when tracing is off.
SpanArgs RecordSpan(std::string_view name, std::string_view category, int64_t start_ns,
                    int64_t end_ns, const std::vector<TraceArg>& args = {});

// What a span that recurs every run shows (a kernel: its name, category and arguments), built
// once. Recording it shares the description instead of copying it, so a kernel's span costs
// the two clock reads and one record.
struct SpanInfo {
  std::string name;
  std::string category;
  std::vector<TraceArg> args;
};
SpanArgs RecordSpan(const std::shared_ptr<const SpanInfo>& info, int64_t start_ns, int64_t end_ns);

// Kernel spans (IsKernelCategory) whose arguments hold an integer "bytes_accessed" get "achieved
// GB/s" (bytes over their duration) when the session stops, so the hot path never divides.

// Names the calling thread's track ("main", "worker 3"). Cheap; may be called before any session.
void SetCurrentThreadName(std::string_view name);

class TracerSession {
 public:
  // Starts recording on every thread. Fails when another session is running.
  static bool Start();
  // Stops recording and returns every span since Start, the host process and its threads
  // named, events sorted by start time (parents before children).
  static Trace Stop();
  // Stop for a thread other than the recording ones, while they may still be recording: the
  // last resort of --timeout, whose process ends right after (watchdog.h). Recording is turned
  // off, spans being recorded get `settle` to finish, then the buffers are collected; spans still
  // open end now. After this no thread writes into the buffers again (a span that ends later is
  // not recorded), so the collection never races with them.
  static Trace StopFromAnotherThread(std::chrono::milliseconds settle = std::chrono::milliseconds(50));
  static bool running();

 private:
  // Every buffer of the session into a Trace; spans still open end at `stop_ns`.
  static Trace Collect(int64_t stop_ns);
};

}  // namespace xlens::profiler
