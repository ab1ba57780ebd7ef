#include "profiler/host_tracer.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <thread>

#include <fmt/format.h>

namespace xlens::profiler {

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace {

// Strings live in the thread's arena and are referenced by offset, so a span record is a few
// words and recording copies bytes instead of allocating strings.
struct StringRef {
  uint32_t offset = 0;
  uint32_t size = 0;
};

struct RawSpan {
  int64_t start_ns = 0;
  int64_t end_ns = -1;  // -1 while open
  StringRef name, category;
  std::shared_ptr<const SpanInfo> info;  // when set, name, category and first args come from it
};

struct RawArg {
  int32_t span = 0;  // index in the buffer's spans
  enum Kind : uint8_t { kInt, kDouble, kString } kind = kInt;
  StringRef key;
  int64_t int_value = 0;
  double double_value = 0;
  StringRef string_value;
};

struct ThreadBuffer {
  int64_t tid = 0;
  std::string name;
  uint64_t generation = 0;  // the session whose spans the vectors hold
  std::vector<RawSpan> spans;
  std::vector<RawArg> args;
  std::string strings;

  StringRef Intern(std::string_view text) {
    StringRef ref{static_cast<uint32_t>(strings.size()), static_cast<uint32_t>(text.size())};
    strings.append(text);
    return ref;
  }
  std::string_view View(StringRef ref) const {
    return std::string_view(strings).substr(ref.offset, ref.size);
  }
};

// Every thread's buffer, owned here so spans of threads that have exited are still collected.
struct Registry {
  std::mutex mutex;
  std::vector<std::shared_ptr<ThreadBuffer>> buffers;
  std::atomic<uint64_t> generation{0};
  bool running = false;
  int64_t start_ns = 0;
  int64_t start_wall_ns = 0;
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();  // never destroyed: threads may outlive statics
  return *registry;
}

thread_local ThreadBuffer* t_buffer = nullptr;

ThreadBuffer& CurrentBuffer() {
  if (t_buffer == nullptr) {
    auto buffer = std::make_shared<ThreadBuffer>();
    // Room for a typical session, so the first spans do not grow the vectors.
    buffer->spans.reserve(1 << 14);
    buffer->args.reserve(1 << 15);
    buffer->strings.reserve(1 << 20);
    Registry& registry = GetRegistry();
    std::lock_guard lock(registry.mutex);
    buffer->tid = static_cast<int64_t>(registry.buffers.size()) + 1;
    registry.buffers.push_back(buffer);
    t_buffer = buffer.get();
  }
  return *t_buffer;
}

// The buffer, emptied if it still holds an earlier session's spans (capacity is kept).
ThreadBuffer& SessionBuffer() {
  ThreadBuffer& buffer = CurrentBuffer();
  uint64_t generation = GetRegistry().generation.load(std::memory_order_relaxed);
  if (buffer.generation != generation) {
    buffer.spans.clear();  // drops the shared span descriptions too
    buffer.args.clear();
    buffer.strings.clear();
    buffer.generation = generation;
  }
  return buffer;
}

// The handle of the buffer's last span: its index and the buffer's session.
internal::SpanHandle LastSpan(const ThreadBuffer& buffer) {
  return static_cast<int64_t>(buffer.generation) << 32 |
         static_cast<int64_t>(buffer.spans.size() - 1);
}

// The span a handle names, or nullptr when it belongs to an earlier session (whose records a
// later session has cleared and reused).
RawSpan* SpanOf(ThreadBuffer& buffer, internal::SpanHandle handle) {
  if (static_cast<uint32_t>(handle >> 32) != static_cast<uint32_t>(buffer.generation)) return nullptr;
  size_t index = static_cast<uint32_t>(handle);
  return index < buffer.spans.size() ? &buffer.spans[index] : nullptr;
}

}  // namespace

namespace internal {

std::atomic<bool> g_tracing_enabled{false};

SpanHandle BeginSpan(std::string_view name, std::string_view category) {
  ThreadBuffer& buffer = SessionBuffer();
  RawSpan span;
  span.name = buffer.Intern(name);
  span.category = buffer.Intern(category);
  buffer.spans.push_back(span);
  // The clock is read last so the span's own bookkeeping is not inside it.
  buffer.spans.back().start_ns = NowNs();
  return LastSpan(buffer);
}

void EndSpan(SpanHandle span) {
  // Once recording is off the buffers are being (or have been) collected: nothing writes them.
  if (!TracingEnabled()) return;
  int64_t now = NowNs();
  if (RawSpan* raw = SpanOf(CurrentBuffer(), span)) raw->end_ns = now;
}

namespace {
RawArg* NewArg(SpanHandle span, std::string_view key) {
  if (!TracingEnabled()) return nullptr;
  ThreadBuffer& buffer = CurrentBuffer();
  if (SpanOf(buffer, span) == nullptr) return nullptr;
  RawArg& arg = buffer.args.emplace_back();
  arg.span = static_cast<int32_t>(static_cast<uint32_t>(span));
  arg.key = buffer.Intern(key);
  return &arg;
}
}  // namespace

void AddIntArg(SpanHandle span, std::string_view key, int64_t value) {
  if (RawArg* arg = NewArg(span, key)) {
    arg->kind = RawArg::kInt;
    arg->int_value = value;
  }
}

void AddDoubleArg(SpanHandle span, std::string_view key, double value) {
  if (RawArg* arg = NewArg(span, key)) {
    arg->kind = RawArg::kDouble;
    arg->double_value = value;
  }
}

void AddStringArg(SpanHandle span, std::string_view key, std::string_view value) {
  if (RawArg* arg = NewArg(span, key)) {
    arg->kind = RawArg::kString;
    arg->string_value = t_buffer->Intern(value);
  }
}

}  // namespace internal

SpanArgs RecordSpan(std::string_view name, std::string_view category, int64_t start_ns,
                    int64_t end_ns, const std::vector<TraceArg>& args) {
  if (!TracingEnabled()) return SpanArgs();
  ThreadBuffer& buffer = SessionBuffer();
  RawSpan span;
  span.name = buffer.Intern(name);
  span.category = buffer.Intern(category);
  span.start_ns = start_ns;
  span.end_ns = std::max(start_ns, end_ns);
  buffer.spans.push_back(span);
  internal::SpanHandle index = LastSpan(buffer);
  for (const TraceArg& arg : args) {
    if (const auto* i = std::get_if<int64_t>(&arg.value)) {
      internal::AddIntArg(index, arg.key, *i);
    } else if (const auto* d = std::get_if<double>(&arg.value)) {
      internal::AddDoubleArg(index, arg.key, *d);
    } else if (const auto* s = std::get_if<std::string>(&arg.value)) {
      internal::AddStringArg(index, arg.key, *s);
    }
  }
  return SpanArgs(index);
}

SpanArgs RecordSpan(const std::shared_ptr<const SpanInfo>& info, int64_t start_ns, int64_t end_ns) {
  if (!TracingEnabled() || info == nullptr) return SpanArgs();
  ThreadBuffer& buffer = SessionBuffer();
  RawSpan& span = buffer.spans.emplace_back();
  span.start_ns = start_ns;
  span.end_ns = std::max(start_ns, end_ns);
  span.info = info;
  return SpanArgs(LastSpan(buffer));
}

void SetCurrentThreadName(std::string_view name) {
  ThreadBuffer& buffer = CurrentBuffer();
  std::lock_guard lock(GetRegistry().mutex);  // Stop reads names under the lock
  buffer.name = std::string(name);
}

bool TracerSession::Start() {
  Registry& registry = GetRegistry();
  std::lock_guard lock(registry.mutex);
  if (registry.running) return false;
  registry.running = true;
  // A new generation makes every buffer drop the previous session's spans on first use.
  registry.generation.fetch_add(1, std::memory_order_relaxed);
  registry.start_ns = NowNs();
  registry.start_wall_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  internal::g_tracing_enabled.store(true, std::memory_order_release);
  return true;
}

bool TracerSession::running() {
  Registry& registry = GetRegistry();
  std::lock_guard lock(registry.mutex);
  return registry.running;
}

Trace TracerSession::StopFromAnotherThread(std::chrono::milliseconds settle) {
  int64_t stop_ns = NowNs();
  internal::g_tracing_enabled.store(false, std::memory_order_seq_cst);
  // A thread that saw recording on just before is finishing one record (a few stores): let it.
  std::this_thread::sleep_for(settle);
  return Collect(stop_ns);
}

Trace TracerSession::Stop() {
  internal::g_tracing_enabled.store(false, std::memory_order_release);
  return Collect(NowNs());
}

Trace TracerSession::Collect(int64_t stop_ns) {
  Registry& registry = GetRegistry();
  std::lock_guard lock(registry.mutex);
  Trace trace;
  if (!registry.running) return trace;
  registry.running = false;
  trace.base_ns = registry.start_ns;
  trace.wall_base_ns = registry.start_wall_ns;
  trace.processes.push_back({kHostPid, "Host (CPU)", 0});
  uint64_t generation = registry.generation.load(std::memory_order_relaxed);
  for (const auto& buffer : registry.buffers) {
    if (buffer->generation != generation || buffer->spans.empty()) continue;
    std::string name = buffer->name.empty() ? fmt::format("thread {}", buffer->tid) : buffer->name;
    trace.threads.push_back({kHostPid, buffer->tid, std::move(name), buffer->tid});
    size_t first = trace.events.size();
    for (const RawSpan& raw : buffer->spans) {
      TraceEvent& event = trace.events.emplace_back();
      if (raw.info != nullptr) {
        event.name = raw.info->name;
        event.category = raw.info->category;
        event.args = raw.info->args;
      } else {
        event.name = std::string(buffer->View(raw.name));
        event.category = std::string(buffer->View(raw.category));
      }
      event.pid = kHostPid;
      event.tid = buffer->tid;
      event.start_ns = raw.start_ns;
      // A span still open (Stop called inside it) ends at Stop.
      event.duration_ns = (raw.end_ns < 0 ? stop_ns : raw.end_ns) - raw.start_ns;
    }
    for (const RawArg& raw : buffer->args) {
      TraceEvent& event = trace.events[first + raw.span];
      TraceArg arg;
      arg.key = std::string(buffer->View(raw.key));
      switch (raw.kind) {
        case RawArg::kInt: arg.value = raw.int_value; break;
        case RawArg::kDouble: arg.value = raw.double_value; break;
        case RawArg::kString: arg.value = std::string(buffer->View(raw.string_value)); break;
      }
      event.args.push_back(std::move(arg));
    }
  }
  for (TraceEvent& event : trace.events) {
    // Kernels only: a launch span carries its kernel's bytes but not its kernel's time.
    if (!IsKernelCategory(event.category)) continue;
    const TraceArg* bytes = FindArg(event, "bytes_accessed");
    const int64_t* value = bytes ? std::get_if<int64_t>(&bytes->value) : nullptr;
    if (value != nullptr && *value > 0 && event.duration_ns > 0) {
      event.args.push_back({"achieved GB/s", static_cast<double>(*value) / event.duration_ns});
    }
  }
  // Parents before children: by start, the longer first when two start together.
  std::stable_sort(trace.events.begin(), trace.events.end(),
                   [](const TraceEvent& a, const TraceEvent& b) {
                     if (a.tid != b.tid) return a.tid < b.tid;
                     if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
                     return a.duration_ns > b.duration_ns;
                   });
  return trace;
}

}  // namespace xlens::profiler
