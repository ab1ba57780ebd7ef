// Reads a Chrome Trace Event file: what WriteChromeTrace writes, what PyTorch's profiler (Kineto)
// writes, and Chrome's plain array form. Gzip is recognised by its magic bytes, whatever the name.
//
// Complete events ("X"), begin/end pairs ("B"/"E"), instants ("i"), process and thread names and
// sort indices ("M"), flows ("s"/"f", bound to the event that starts where the flow point is) and
// counters ("C", handed to visitors that ask for them) are read; other phases are skipped. Times become baseTimeNanoseconds (0 when
// absent) plus the event's ts, in nanoseconds: the reader's clock is the file's. A ts or dur
// beyond 2^62 ns (146 years) either way, or a negative dur, is an error naming the event, so no
// sum of a time and a duration overflows. An "E" that comes before its "B"'s time closes a span of
// duration 0; a "B" never closed and an "E" never opened are dropped.
//
// The file is streamed (trace_input_stream.h, chrome_trace_parser.h): StreamChromeTrace hands on
// one event at a time and keeps nothing of it (only where it is, 24 bytes, when flows are to be
// bound), so a reader that aggregates (the trace summary) needs memory for what it keeps, not for
// the file.
// ReadChromeTrace keeps every event, for readers that need them all.
//
// Broken input (not JSON, truncated, wrong types, events without a phase, numbers beyond a
// double, nesting deeper than 256 levels, a gzip stream cut short or larger than the input
// limit) is a one-line error naming the file and, for JSON errors, the line and column; for a bad
// event, its index, name and field. No exception escapes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compiler/support/status.h"
#include "profiler/trace.h"

namespace xlens::profiler {

class TraceInputStream;

// One sample of a counter ("ph":"C"): Chrome draws one track per process and name (with " id"
// appended when the event has an id), and one series per numeric member of its args.
struct TraceCounterSample {
  std::string name;
  std::string category;
  int32_t pid = kHostPid;
  int64_t ts_ns = 0;  // on the file's clock without the base time, as TraceEvent's start_ns
  // The numeric args in file order: {"bytes": 12, "ops": 3.5}; the others are dropped.
  std::vector<std::pair<std::string, double>> values;
};

// The largest |ts| and dur the reader accepts, in nanoseconds.
inline constexpr int64_t kMaxTraceTimeNs = int64_t{1} << 62;

// What a streamed trace says besides its events; complete once the whole file is read.
struct ChromeTraceHeader {
  // baseTimeNanoseconds (0 when absent): add it to the events' start_ns.
  int64_t base_ns = 0;
  std::vector<TraceProcess> processes;
  std::vector<TraceThread> threads;
  // "otherData", and unbound_flow_points when some flow points found no event to bind to.
  std::vector<TraceArg> metadata;
};

// Receives a trace as it is read.
class ChromeTraceVisitor {
 public:
  virtual ~ChromeTraceVisitor() = default;
  // Whether events need their args; without, they are skipped unread (faster, and a hostile
  // file's args cost no memory) but for "hlo_op" and "hlo_module", which say what an XLA kernel
  // is, "bytes", "wait_ns" and "last_arrival" (a collective's), and the names of processes and
  // threads. otherData's scalars are read either way.
  virtual bool WantsArgs() const { return true; }
  // Whether flows are bound to events (OnFlow, unbound_flow_points): that keeps 24 bytes an event.
  virtual bool WantsFlows() const { return true; }
  // A span ("X"), an instant ("i"/"I") or a "B"/"E" pair, in the order they complete, with
  // start_ns on the file's clock *without* the base time (a file may give it after its events).
  // Flow ids are left 0; OnFlow sets them. The visitor may move from `event`.
  virtual void OnEvent(TraceEvent& event) = 0;
  // After the last event: the `ordinal`-th event handed on (0-based) starts (or ends) flow `id`,
  // at `at_ns` after its start.
  virtual void OnFlow(size_t ordinal, int64_t id, bool is_start, int64_t at_ns) {}
  // Whether counters are read (OnCounter); without, "C" events are skipped unread, so readers that
  // do not show counters accept whatever a file puts in them.
  virtual bool WantsCounters() const { return false; }
  // A counter sample, in file order. Its values are its args, so a visitor that does not want
  // args gets none. The visitor may move from `sample`.
  virtual void OnCounter(TraceCounterSample& sample) {}
};

// Streams the file at `path` into `visitor`: a Chrome trace, or an XSpace (*.xplane.pb, told by
// its name or first bytes, read by xspace_reader.h into the same visitor). The JSON may be
// jax.profiler's and TensorFlow's (ending its list with an empty "{}", which is skipped; XLA's
// kernels, without a "cat" but with an "hlo_op" arg, are "cpu_kernel" or "kernel"), TensorFlow 1's
// timeline (RunMetadata's, flow steps "t" skipped), Kineto's or ours.
StatusOr<ChromeTraceHeader> StreamChromeTrace(const std::string& path, ChromeTraceVisitor& visitor);
StatusOr<ChromeTraceHeader> StreamChromeTrace(TraceInputStream& input, ChromeTraceVisitor& visitor);

// The whole trace in memory (a Chrome trace or an XSpace, as StreamChromeTrace).
StatusOr<Trace> ReadChromeTrace(const std::string& path);

// The same from text (or gzip bytes) already in memory; `source` names it in errors.
StatusOr<Trace> ParseChromeTrace(const std::string& text, const std::string& source);

}  // namespace xlens::profiler
