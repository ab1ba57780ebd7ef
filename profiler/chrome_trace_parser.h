// The JSON side of reading a Chrome trace: a streaming (SAX) parse of a TraceInputStream that
// hands on one element of "traceEvents" at a time, with the fields the reader interprets and
// their JSON types, and never builds the document. What an event means is the reader's business
// (chrome_trace_reader.cc); this file knows the trace's shape:
//
//   {"traceEvents": [ {event}, ... ], "baseTimeNanoseconds": N, "otherData": {...}, ...}
//   [ {event}, ... ]          (Chrome's array form; it may lack its closing "]")
//
// Memory is bounded by what one event holds: nesting deeper than kMaxNestingDepth is an error
// (the parser's stack stays small however deep a hostile file nests), and tokens are bounded by
// the input stream. Every error is one line naming the source, and where the JSON is wrong, the
// line and column; inside an event, its index and the field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/support/status.h"
#include "profiler/trace.h"
#include "profiler/trace_input_stream.h"

namespace xlens::profiler {

// Deeper than this, a trace is refused. Ours nest 5 levels, PyTorch's 7.
inline constexpr int kMaxNestingDepth = 256;

enum class JsonKind : uint8_t { kAbsent, kNull, kBoolean, kInteger, kUnsigned, kFloat, kString, kArray, kObject };
// As nlohmann names them: "null", "boolean", "number", "string", "array", "object".
const char* JsonKindName(JsonKind kind);

// A field of an event: its type, and its value when it is a scalar.
struct JsonScalar {
  JsonKind kind = JsonKind::kAbsent;
  int64_t integer = 0;    // kInteger, kBoolean
  uint64_t unsigned_ = 0;  // kUnsigned (above INT64_MAX)
  double number = 0;      // kFloat
  std::string text;       // kString; for kFloat, the number as written
  bool present() const { return kind != JsonKind::kAbsent; }
  bool is_number() const {
    return kind == JsonKind::kInteger || kind == JsonKind::kUnsigned || kind == JsonKind::kFloat;
  }
};

// One element of "traceEvents" that is an object.
struct RawTraceEvent {
  size_t index = 0;  // in "traceEvents"
  JsonScalar ph, name, cat, pid, tid, ts, dur, id;
  // Filled when the consumer wants args and "args" is an object: its members in file order
  // (without args wanted, only "hlo_op" and "hlo_module": which of XLA's kernels it is; and
  // "bytes", "wait_ns" and "last_arrival": what a collective brought and waited for; "name" and
  // "sort_index": what metadata events name).
  // Scalars keep their type (booleans become 0/1), lists of integers stay lists, anything else
  // (nested objects and lists, null) is kept as compact JSON text, cut off deeper than 16 levels.
  std::vector<TraceArg> args;
};

class RawTraceConsumer {
 public:
  virtual ~RawTraceConsumer() = default;
  // Whether events' and otherData's args are wanted; without them they are skipped unread.
  virtual bool WantsArgs() const = 0;
  // An element of "traceEvents" that is an object, once it is complete.
  virtual Status OnEvent(RawTraceEvent& event) = 0;
  // "baseTimeNanoseconds", wherever it is in the top-level object.
  virtual Status OnBaseTime(const JsonScalar& value) = 0;
  // A member of "otherData". Without args wanted, only scalar members are handed on (lists and
  // objects are skipped).
  virtual void OnOtherData(TraceArg entry) = 0;
};

// Parses the whole input, handing on events in file order. The first error ends the parse.
Status ParseChromeTraceJson(TraceInputStream& input, RawTraceConsumer& consumer);

}  // namespace xlens::profiler
