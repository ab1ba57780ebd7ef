#include "profiler/chrome_trace_reader.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <utility>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "profiler/chrome_trace_parser.h"
#include "profiler/trace_input_stream.h"
#include "profiler/xspace_reader.h"

namespace xlens::profiler {

namespace {

// |ts| and dur in microseconds, as they are written.
constexpr double kMaxTraceTimeUs = static_cast<double>(kMaxTraceTimeNs / 1000);

// What the reader itself holds while it streams (track names, "B" spans waiting for their "E")
// is bounded, so no file makes it hold without limit what it does not hand on: 256 MiB, or the
// input limit when that is smaller.
size_t MaxRetainedBytes() { return static_cast<size_t>(std::min<int64_t>(int64_t{256} << 20, MaxInputBytes())); }
// Counted for each entry beside its strings: the nodes and fields around them.
constexpr size_t kEntryBytes = 128;

class RetainedBudget {
 public:
  bool Take(size_t bytes) {
    if (bytes > limit_ - std::min(used_, limit_)) return false;
    used_ += bytes;
    return true;
  }
  void Give(size_t bytes) { used_ -= std::min(bytes, used_); }
  std::string Exceeded() const {
    return fmt::format("the trace makes the reader hold more than {} of track names and \"B\" events still open "
                       "(without their \"E\"): more than any trace needs",
                       FormatBytes(static_cast<int64_t>(limit_)));
  }

 private:
  size_t limit_ = MaxRetainedBytes();
  size_t used_ = 0;
};

// Reads one event's fields with errors that say which event and which field.
class EventFields {
 public:
  EventFields(const std::string& source, const RawTraceEvent& event) : source_(source), event_(event) {}

  Status Fail(const std::string& what) const {
    std::string name;
    if (event_.name.kind == JsonKind::kString) {
      std::string_view shown = TruncateUtf8(event_.name.text, 80);
      name = fmt::format(" (\"{}{}\")", EscapeForTerminal(shown), shown.size() < event_.name.text.size() ? "..." : "");
    }
    return Error(fmt::format("{}: event {}{}: {}", source_, event_.index, name, what));
  }

  // OK when a required string field is there and is a string.
  Status Required(const JsonScalar& field, const char* key) const {
    if (!field.present()) return Fail(fmt::format("expected \"{}\" (a string)", key));
    if (field.kind != JsonKind::kString) {
      return Fail(fmt::format("\"{}\" must be a string, not {}", key, JsonKindName(field.kind)));
    }
    return OkStatus();
  }

  // An optional string field into `out` (swapped in: buffers are reused from event to event).
  Status String(JsonScalar& field, const char* key, std::string& out) const {
    if (!field.present()) {
      out.clear();
      return OkStatus();
    }
    RETURN_IF_ERROR(Required(field, key));
    out.swap(field.text);
    return OkStatus();
  }

  // Microseconds (a JSON number) to nanoseconds, within ±kMaxTraceTimeNs.
  StatusOr<int64_t> Micros(const JsonScalar& field, const char* key) const {
    if (!field.present()) return Fail(fmt::format("expected \"{}\" (microseconds)", key));
    if (!field.is_number()) {
      return Fail(fmt::format("\"{}\" must be a number, not {}", key, JsonKindName(field.kind)));
    }
    auto out_of_range = [&](const std::string& value) {
      return Fail(fmt::format("\"{}\" is out of range: {} us is beyond the {} us (about 146 years) a trace may span",
                              key, value, kMaxTraceTimeNs / 1000));
    };
    if (field.kind == JsonKind::kUnsigned) return out_of_range(std::to_string(field.unsigned_));
    if (field.kind == JsonKind::kInteger) {
      // Integers are converted exactly, without a double's rounding.
      if (field.integer > kMaxTraceTimeNs / 1000 || field.integer < -(kMaxTraceTimeNs / 1000)) {
        return out_of_range(std::to_string(field.integer));
      }
      return field.integer * 1000;
    }
    double us = field.number;
    if (!std::isfinite(us) || std::fabs(us) > kMaxTraceTimeUs) return out_of_range(field.text);
    return static_cast<int64_t>(std::llround(us * 1000.0));
  }

  // A pid or tid: a number, or a string that names the track (Kineto writes some as strings).
  StatusOr<int64_t> Id(JsonScalar& field, const char* key, std::map<std::string, int64_t>& named_ids,
                       RetainedBudget& budget) const {
    switch (field.kind) {
      case JsonKind::kAbsent: return int64_t{0};
      case JsonKind::kInteger: return field.integer;
      case JsonKind::kUnsigned: return static_cast<int64_t>(field.unsigned_);
      case JsonKind::kFloat:
        // Outside int64's range the conversion would be undefined.
        if (!(std::fabs(field.number) < 9.2e18)) return Fail(fmt::format("\"{}\" is out of range: {}", key, field.text));
        return static_cast<int64_t>(field.number);
      case JsonKind::kString: {
        // Negative, so a named track never takes the number of a numbered one.
        auto it = named_ids.find(field.text);
        if (it != named_ids.end()) return it->second;
        if (!budget.Take(field.text.size() + kEntryBytes)) return Fail(budget.Exceeded());
        int64_t id = -1 - static_cast<int64_t>(named_ids.size());
        named_ids.emplace(std::move(field.text), id);
        return id;
      }
      default:
        return Fail(fmt::format("\"{}\" must be a number or a string, not {}", key, JsonKindName(field.kind)));
    }
  }

 private:
  const std::string& source_;
  const RawTraceEvent& event_;
};

// What an open "B" span holds (its args only roughly: they are kept by a reader that wants them,
// which keeps every event anyway).
size_t OpenSpanBytes(const TraceEvent& event) {
  return kEntryBytes + event.name.size() + event.category.size() + event.args.size() * 64;
}

const TraceArg* ArgNamed(const std::vector<TraceArg>& args, const char* key) {
  for (const TraceArg& arg : args) {
    if (arg.key == key) return &arg;
  }
  return args.empty() ? nullptr : &args.front();
}

std::string ArgString(const TraceArg* arg) {
  if (arg == nullptr) return "";
  if (const auto* s = std::get_if<std::string>(&arg->value)) return *s;
  return "";
}

int64_t ArgInt(const TraceArg* arg) {
  if (arg == nullptr) return 0;
  if (const auto* i = std::get_if<int64_t>(&arg->value)) return *i;
  if (const auto* d = std::get_if<double>(&arg->value); d && std::fabs(*d) < 9.2e18) return static_cast<int64_t>(*d);
  return 0;
}

struct FlowPoint {
  int64_t id;
  int32_t pid;
  int64_t tid;
  int64_t ts_ns;
  bool is_start;
};

// Binds each flow point to the innermost event on its track that contains it (a flow from a
// launch starts at the launch; one into a kernel ends at the kernel's start). Keeps 24 bytes an
// event: where it is, not what it is.
class FlowBinder {
 public:
  void AddSpan(int32_t pid, int64_t tid, int64_t start_ns, int64_t duration_ns, size_t ordinal) {
    std::pair<int32_t, int64_t> key{pid, tid};
    if (last_ == nullptr || last_key_ != key) {
      last_ = &tracks_[key];
      last_key_ = key;
    }
    last_->push_back({start_ns, duration_ns, ordinal});
  }
  void AddPoint(const FlowPoint& point) { points_.push_back(point); }

  // Calls `bind(ordinal, point, at_ns)` for each bound point (at_ns after the event's start);
  // returns how many found no event.
  int64_t Bind(const std::function<void(size_t, const FlowPoint&, int64_t)>& bind) {
    if (points_.empty()) return 0;
    for (auto& [key, spans] : tracks_) {
      std::stable_sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start_ns < b.start_ns; });
    }
    int64_t unbound = 0;
    for (const FlowPoint& point : points_) {
      auto it = tracks_.find({point.pid, point.tid});
      const Span* best = nullptr;
      if (it != tracks_.end()) {  // (best, if found, starts at or before the point)
        const std::vector<Span>& spans = it->second;
        // The innermost event containing the point is the one that started last before it; a
        // few steps back reach it in nested host tracks.
        auto after = std::upper_bound(spans.begin(), spans.end(), point.ts_ns,
                                      [](int64_t ts, const Span& span) { return ts < span.start_ns; });
        for (int steps = 0; after != spans.begin() && steps < 64; ++steps) {
          const Span& span = *--after;
          // Both within ±2^62 ns: the difference cannot overflow.
          if (point.ts_ns - span.start_ns <= span.duration_ns) {
            best = &span;
            break;
          }
        }
      }
      if (best == nullptr) {
        ++unbound;
        continue;
      }
      bind(best->ordinal, point, point.ts_ns - best->start_ns);
    }
    return unbound;
  }

 private:
  struct Span {
    int64_t start_ns;
    int64_t duration_ns;
    size_t ordinal;
  };
  std::map<std::pair<int32_t, int64_t>, std::vector<Span>> tracks_;
  std::vector<Span>* last_ = nullptr;
  std::pair<int32_t, int64_t> last_key_;
  std::vector<FlowPoint> points_;
};

// Gives the parser's raw events their meaning (phases, times, tracks) and hands them on.
class EventInterpreter : public RawTraceConsumer {
 public:
  EventInterpreter(const std::string& source, ChromeTraceVisitor& visitor)
      : source_(source), visitor_(visitor), wants_flows_(visitor.WantsFlows()) {}

  bool WantsArgs() const override { return visitor_.WantsArgs(); }

  Status OnBaseTime(const JsonScalar& value) override {
    if (value.kind != JsonKind::kInteger) {
      if (value.kind == JsonKind::kUnsigned) return BaseOutOfRange(std::to_string(value.unsigned_));
      return Error(fmt::format("{}: \"baseTimeNanoseconds\" must be an integer, not {}", source_,
                               value.kind == JsonKind::kFloat ? "a fraction" : JsonKindName(value.kind)));
    }
    if (value.integer >= kMaxTraceTimeNs || value.integer <= -kMaxTraceTimeNs) {
      return BaseOutOfRange(std::to_string(value.integer));
    }
    header_.base_ns = value.integer;
    return OkStatus();
  }

  void OnOtherData(TraceArg entry) override { header_.metadata.push_back(std::move(entry)); }

  Status OnEvent(RawTraceEvent& raw) override;

  ChromeTraceHeader Finish() {
    for (auto& [key, process] : processes_) header_.processes.push_back(std::move(process));
    for (auto& [key, thread] : threads_) header_.threads.push_back(std::move(thread));
    int64_t unbound = flows_.Bind([&](size_t ordinal, const FlowPoint& point, int64_t at_ns) {
      visitor_.OnFlow(ordinal, point.id, point.is_start, at_ns);
    });
    if (unbound > 0) header_.metadata.push_back({"unbound_flow_points", unbound});
    return std::move(header_);
  }

 private:
  Status BaseOutOfRange(const std::string& value) const {
    return Error(fmt::format("{}: \"baseTimeNanoseconds\" is out of range: {} (at most {})", source_, value,
                             kMaxTraceTimeNs - 1));
  }
  // jax.profiler's and TensorFlow's JSON give XLA's kernels no category, only an "hlo_op" arg:
  // a kernel on a device's stream ("kernel"), on the host a CPU thunk ("cpu_kernel"); the
  // derived lines of a device ("XLA Ops", "XLA Modules", "Steps") repeat them and are kept apart.
  std::string XlaCategory(int32_t pid, int64_t tid) const {
    auto process = processes_.find(pid);
    if (process == processes_.end() || process->second.name.rfind("/device:", 0) != 0) return category::kCpuKernel;
    auto thread = threads_.find({pid, tid});
    if (thread != threads_.end()) {
      const std::string& line = thread->second.name;
      if (line == "XLA Ops") return "xla_op";
      if (line == "XLA Modules") return "xla_module";
      if (line == "Steps") return "step";
      if (line == "TensorFlow Ops" || line == "Framework Ops" || line == "TensorFlow Name Scope") return "framework_op";
    }
    return category::kGpuKernel;
  }
  void Emit(TraceEvent& event) {
    if (wants_flows_) flows_.AddSpan(event.pid, event.tid, event.start_ns, event.duration_ns, ordinal_++);
    visitor_.OnEvent(event);
  }

  const std::string& source_;
  ChromeTraceVisitor& visitor_;
  const bool wants_flows_;
  ChromeTraceHeader header_;
  std::map<std::string, int64_t> named_ids_;
  std::map<int32_t, TraceProcess> processes_;
  std::map<std::pair<int32_t, int64_t>, TraceThread> threads_;
  std::map<std::pair<int32_t, int64_t>, std::vector<TraceEvent>> open_spans_;  // "B" without "E"
  FlowBinder flows_;
  size_t ordinal_ = 0;
  TraceEvent event_;
  TraceCounterSample counter_;
  RetainedBudget budget_;
};

Status EventInterpreter::OnEvent(RawTraceEvent& raw) {
  EventFields fields(source_, raw);
  // TensorFlow's and XLA's trace writers end the list with an empty object ("{}"); Chrome and
  // Perfetto skip an event that has neither a phase nor a name, and so does this reader.
  if (!raw.ph.present() && !raw.name.present()) return OkStatus();
  RETURN_IF_ERROR(fields.Required(raw.ph, "ph"));
  const std::string& phase = raw.ph.text;
  ASSIGN_OR_RETURN(int64_t pid64, fields.Id(raw.pid, "pid", named_ids_, budget_));
  ASSIGN_OR_RETURN(int64_t tid, fields.Id(raw.tid, "tid", named_ids_, budget_));
  int32_t pid = static_cast<int32_t>(pid64);
  if (phase == "M") {
    RETURN_IF_ERROR(fields.Required(raw.name, "name"));
    const std::string& name = raw.name.text;
    bool process = name == "process_name" || name == "process_sort_index";
    bool thread = name == "thread_name" || name == "thread_sort_index";
    if (!process && !thread) return OkStatus();
    if (process ? !processes_.count(pid) : !threads_.count({pid, tid})) {
      if (!budget_.Take(kEntryBytes)) return fields.Fail(budget_.Exceeded());
    }
    std::string* track_name = nullptr;
    if (process) {
      TraceProcess& entry = processes_[pid];
      entry.pid = pid;
      if (name == "process_sort_index") entry.sort_index = ArgInt(ArgNamed(raw.args, "sort_index"));
      if (name == "process_name") track_name = &entry.name;
    } else {
      TraceThread& entry = threads_[{pid, tid}];
      entry.pid = pid;
      entry.tid = tid;
      if (name == "thread_sort_index") entry.sort_index = ArgInt(ArgNamed(raw.args, "sort_index"));
      if (name == "thread_name") track_name = &entry.name;
    }
    if (track_name != nullptr) {
      std::string value = ArgString(ArgNamed(raw.args, "name"));
      budget_.Give(track_name->size());
      if (!budget_.Take(value.size())) return fields.Fail(budget_.Exceeded());
      *track_name = std::move(value);
    }
    return OkStatus();
  }
  if (phase == "X" || phase == "B" || phase == "i" || phase == "I") {
    // One event reused: its strings keep their buffers from event to event.
    TraceEvent& event = event_;
    ASSIGN_OR_RETURN(event.start_ns, fields.Micros(raw.ts, "ts"));
    event.duration_ns = 0;
    if (phase == "X") {
      ASSIGN_OR_RETURN(event.duration_ns, fields.Micros(raw.dur, "dur"));
      if (event.duration_ns < 0) return fields.Fail("\"dur\" is negative");
    }
    // The name last: the messages above name the event by it.
    RETURN_IF_ERROR(fields.String(raw.cat, "cat", event.category));
    RETURN_IF_ERROR(fields.String(raw.name, "name", event.name));
    event.pid = pid;
    event.tid = tid;
    event.args.swap(raw.args);
    if (event.category.empty() && FindArg(event, "hlo_op") != nullptr) event.category = XlaCategory(pid, tid);
    event.flow_out = event.flow_in = 0;
    if (phase == "B") {
      if (!budget_.Take(OpenSpanBytes(event))) return fields.Fail(budget_.Exceeded());
      open_spans_[{pid, tid}].push_back(std::move(event));
    } else {
      Emit(event);
    }
    return OkStatus();
  }
  if (phase == "E") {
    ASSIGN_OR_RETURN(int64_t ts, fields.Micros(raw.ts, "ts"));
    auto it = open_spans_.find({pid, tid});
    if (it == open_spans_.end() || it->second.empty()) return OkStatus();  // an end whose begin was cut off
    TraceEvent event = std::move(it->second.back());
    it->second.pop_back();
    budget_.Give(OpenSpanBytes(event));
    // Both within ±2^62 ns: the difference fits. An end before its begin is a span of 0.
    event.duration_ns = std::max<int64_t>(0, ts - event.start_ns);
    for (TraceArg& arg : raw.args) event.args.push_back(std::move(arg));
    Emit(event);
    return OkStatus();
  }
  if (phase == "s" || phase == "f") {
    ASSIGN_OR_RETURN(int64_t ts, fields.Micros(raw.ts, "ts"));
    int64_t flow_id;
    if (raw.id.kind == JsonKind::kInteger) {
      flow_id = raw.id.integer;
    } else if (raw.id.kind == JsonKind::kUnsigned) {
      flow_id = static_cast<int64_t>(raw.id.unsigned_);
    } else if (raw.id.kind == JsonKind::kString) {
      flow_id = static_cast<int64_t>(std::hash<std::string>{}(raw.id.text) >> 1);
    } else {
      return fields.Fail("a flow event needs an \"id\" (an integer or a string)");
    }
    if (wants_flows_) flows_.AddPoint({flow_id, pid, tid, ts, phase == "s"});
    return OkStatus();
  }
  if (phase == "C") {
    if (!visitor_.WantsCounters()) return OkStatus();
    ASSIGN_OR_RETURN(counter_.ts_ns, fields.Micros(raw.ts, "ts"));
    RETURN_IF_ERROR(fields.String(raw.cat, "cat", counter_.category));
    RETURN_IF_ERROR(fields.Required(raw.name, "name"));
    counter_.name.swap(raw.name.text);
    // Chrome keeps counters with different ids apart: "name id".
    if (raw.id.kind == JsonKind::kString) {
      counter_.name += " " + raw.id.text;
    } else if (raw.id.kind == JsonKind::kInteger) {
      counter_.name += " " + std::to_string(raw.id.integer);
    } else if (raw.id.kind == JsonKind::kUnsigned) {
      counter_.name += " " + std::to_string(raw.id.unsigned_);
    }
    counter_.pid = pid;
    counter_.values.clear();
    for (TraceArg& arg : raw.args) {
      if (const auto* i = std::get_if<int64_t>(&arg.value)) {
        counter_.values.emplace_back(std::move(arg.key), static_cast<double>(*i));
      } else if (const auto* d = std::get_if<double>(&arg.value); d && std::isfinite(*d)) {
        counter_.values.emplace_back(std::move(arg.key), *d);
      }
    }
    visitor_.OnCounter(counter_);
    return OkStatus();
  }
  // Async and object events: not shown by our tools, skipped.
  return OkStatus();
}

// Keeps every event, for ReadChromeTrace.
class TraceBuilder : public ChromeTraceVisitor {
 public:
  explicit TraceBuilder(Trace& trace) : trace_(trace) {}
  void OnEvent(TraceEvent& event) override { trace_.events.push_back(std::move(event)); }
  void OnFlow(size_t ordinal, int64_t id, bool is_start, int64_t at_ns) override {
    TraceEvent& event = trace_.events[ordinal];
    (is_start ? event.flow_out : event.flow_in) = id;
    (is_start ? event.flow_out_at_ns : event.flow_in_at_ns) = at_ns;
  }

 private:
  Trace& trace_;
};

Trace FinishTrace(Trace trace, ChromeTraceHeader header) {
  // Both within ±2^62 ns: the sum fits.
  trace.base_ns = header.base_ns;
  for (TraceEvent& event : trace.events) event.start_ns += header.base_ns;
  trace.processes = std::move(header.processes);
  trace.threads = std::move(header.threads);
  trace.metadata = std::move(header.metadata);
  return trace;
}

StatusOr<Trace> BuildTrace(TraceInputStream& input) {
  Trace trace;
  TraceBuilder builder(trace);
  ASSIGN_OR_RETURN(ChromeTraceHeader header, StreamChromeTrace(input, builder));
  return FinishTrace(std::move(trace), std::move(header));
}

}  // namespace

StatusOr<ChromeTraceHeader> StreamChromeTrace(TraceInputStream& input, ChromeTraceVisitor& visitor) {
  EventInterpreter interpreter(input.source(), visitor);
  RETURN_IF_ERROR(ParseChromeTraceJson(input, interpreter));
  return interpreter.Finish();
}

StatusOr<ChromeTraceHeader> StreamChromeTrace(const std::string& path, ChromeTraceVisitor& visitor) {
  // One entry for every trace a user has: an XSpace (*.xplane.pb) is told by its name or its
  // first bytes, and read by its own reader into the same visitor.
  {
    ASSIGN_OR_RETURN(InputFile file, InputFile::Open(path));
    char head[3];
    size_t n = 0;
    while (n < sizeof(head)) {
      ASSIGN_OR_RETURN(size_t got, file.Read(head + n, sizeof(head) - n));
      if (got == 0) break;
      n += got;
    }
    if (LooksLikeXSpace(std::string_view(head, n), path)) return StreamXSpace(path, visitor);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<TraceInputStream> input, TraceInputStream::Open(path));
  return StreamChromeTrace(*input, visitor);
}

StatusOr<Trace> ReadChromeTrace(const std::string& path) {
  Trace trace;
  TraceBuilder builder(trace);
  ASSIGN_OR_RETURN(ChromeTraceHeader header, StreamChromeTrace(path, builder));
  return FinishTrace(std::move(trace), std::move(header));
}

StatusOr<Trace> ParseChromeTrace(const std::string& text, const std::string& source) {
  std::unique_ptr<TraceInputStream> input = TraceInputStream::FromMemory(text, source);
  return BuildTrace(*input);
}

}  // namespace xlens::profiler
