// The per-HLO profile of a recorded trace: the kernel events of every module grouped by the HLO
// instruction they ran (the "hlo_op" argument, else the event's name), with their count, time and
// what the spans say each moved and computed. The same rows as the --xla_hlo_profile table
// (hlo_profile.h), but from any trace the reader reads (ours, jax.profiler's, TensorFlow's, an
// XSpace), after the fact; Python returns them as records (xlens.hlo_profile).
//
// The trace is streamed: memory holds one row per (module, instruction), never the events.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::profiler {

struct TraceHloProfileRow {
  std::string module;       // the span's "module" (ours) or "hlo_module" (XLA's); empty when unsaid
  std::string instruction;  // "fusion.3": the span's "hlo_op", else its name
  std::string kernel;       // the event's name, or the generated function ("kernel" argument)
  std::string category;     // cpu_kernel, library_call or kernel (GPU)
  std::string fusion_kind;  // kLoop, kInput, kOutput, kCustom; empty when not a fusion or unsaid
  std::string op_names;     // the graph ops inside, ";"-joined, as the span says
  std::string source;       // "train.py:15", as the span says
  int64_t count = 0;        // events
  int64_t total_ns = 0;
  int64_t min_ns = 0, max_ns = 0;
  // Per event, from the span's cost analysis arguments (the last event's); 0 when unsaid.
  double bytes_accessed = 0;
  double flops = 0;
  double transcendentals = 0;
};

struct TraceHloProfile {
  std::string file;                      // the trace read (a folder's is found in it)
  std::map<std::string, int64_t> runs;   // module -> its "execute" spans, where the trace has them
  std::vector<TraceHloProfileRow> rows;  // by module, then by total time, the longest first
};

// Finds the trace of a folder: a dump or profile folder holding timeline.ctf.json, *.trace.json
// (.gz), perfetto_trace.json.gz or *.xplane.pb, at most four levels down (jax.profiler writes
// plugins/profile/RUN/HOST.xplane.pb). Of several, an XSpace first (jax.profiler writes its JSON
// beside it from the same data), else the newest. A file is returned as it is.
StatusOr<std::string> FindTraceFile(const std::string& path);

// The per-HLO profile of the trace at `path` (a file, or a folder FindTraceFile searches).
StatusOr<TraceHloProfile> TraceHloProfileOf(const std::string& path);

}  // namespace xlens::profiler
