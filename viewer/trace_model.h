// The timeline's data: a Chrome trace (profiler/chrome_trace_reader.h) read once, streaming, into
// compact arrays the view can query at frame rate.
//
// Storage: names, categories and kernel args are interned; a span is 40 bytes (start, duration,
// name, category, nesting depth, track, kernel args). Spans are ordered by (track, depth, start),
// so a span's id is its index and each track's level is one sorted run; a running maximum of the
// ends beside them makes "the first span ending after t" one binary search even where a file's
// spans overlap without nesting. Only the args that link a kernel to the compiler are kept
// (hlo_op, module, op_names, fusion_kind, bytes_accessed, flops), and a collective's wait
// (wait_ns, waited_for); the file itself is never held.
//
// Tracks, as Perfetto shows them: one per (pid, tid) named from the thread and process metadata,
// ordered by process sort index, pid, thread sort index, tid; then one per counter series of a
// process. Times are nanoseconds on the file's clock without its base time (ts * 1000).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "compiler/support/status.h"

namespace xlens::viewer {

using SpanId = int64_t;
inline constexpr SpanId kNoSpan = -1;

struct TraceTrack {
  enum class Kind { kSlices, kCounter };
  Kind kind = Kind::kSlices;
  int32_t pid = 0;
  int64_t tid = 0;
  std::string name;          // the thread's name, or "Thread <tid>"; for counters the series
  std::string process_name;  // the process's name, or "Process <pid>"
  int64_t process_sort_index = 0;
  int64_t sort_index = 0;
  int max_depth = 0;        // slices: the deepest nesting level (0: flat)
  int64_t span_count = 0;   // slices: spans; counters: samples
  double min_value = 0;     // counters: the range of the series
  double max_value = 0;
};

// The args that tie a kernel span to the HLO instruction it ran; a collective's (a span of
// category "collective") also say whom it waited for (profiler/collective_timeline.h).
struct KernelArgs {
  std::string_view hlo_op, module, op_names, fusion_kind;
  int64_t bytes_accessed = -1;  // -1: absent
  int64_t flops = -1;
  std::string_view waited_for;  // "device 0"; empty on the member that came last, or not said
  int64_t wait_ns = -1;         // -1: absent
};

struct SpanInfo {
  SpanId id = kNoSpan;
  std::string_view name, category;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int track = -1;
  int depth = 0;
  bool has_kernel_args = false;
  KernelArgs kernel;
};

// One box to draw: a span, or several under a pixel merged into one ("N spans").
struct SpanBox {
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  int depth = 0;
  SpanId span = kNoSpan;  // the span; for a merged box, its first
  int64_t count = 1;      // > 1: merged
  uint32_t name = 0;      // the (first) span's interned name, for its colour
};

// A counter's value over a stretch: at the start, and the largest within it.
struct CounterPoint {
  int64_t ts_ns = 0;
  double value = 0;
  double max = 0;
};

struct NameStats {
  std::string name;
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
  int64_t max_ns = 0;
};

struct SpanStats {
  int64_t count = 0;
  int64_t total_ns = 0;
  double mean_ns = 0;
};

// A flow arrow: a launch and the kernel it started, or two members of a collective meeting, one
// that arrived and the next to arrive. from_at_ns and to_at_ns say where the trace put the
// flow's ends on the two spans, after their starts (a collective member's arrival).
struct TraceFlow {
  SpanId from = kNoSpan;
  SpanId to = kNoSpan;
  int64_t from_at_ns = 0;
  int64_t to_at_ns = 0;
};

class TraceModel {
 public:
  // Streams the trace at `path` (JSON or gzip); errors are the reader's one line (file, line,
  // column or event and field).
  static StatusOr<std::unique_ptr<TraceModel>> Load(const std::string& path);

  const std::vector<TraceTrack>& tracks() const { return tracks_; }
  int64_t span_count() const { return static_cast<int64_t>(spans_.size()); }
  // The file's baseTimeNanoseconds.
  int64_t base_ns() const { return base_ns_; }
  // The earliest start and latest end of anything in the trace (0, 0 when empty).
  int64_t start_ns() const { return start_ns_; }
  int64_t end_ns() const { return end_ns_; }
  // An interned name, by the id in SpanBox::name.
  std::string_view Name(uint32_t name) const { return strings_[name]; }
  // How many strings are interned: names are below this.
  uint32_t interned_count() const { return static_cast<uint32_t>(strings_.size()); }

  // What to draw of a slice track over [t0, t1) at `ns_per_pixel`, level by level in time order,
  // appended to `out`: spans at least a pixel wide as themselves, runs of narrower ones (with less
  // than a pixel between them) merged into one box on a pixel grid fixed in time, so the boxes
  // do not shimmer as the view pans. Every span overlapping the range is in exactly one box.
  void SpansIn(int track, int64_t t0, int64_t t1, double ns_per_pixel, std::vector<SpanBox>& out) const;
  // The span at `depth` of `track` covering `t`, or the nearest within `slack_ns`; kNoSpan if none.
  SpanId SpanAt(int track, int depth, int64_t t, int64_t slack_ns) const;
  // Counter samples of a counter track over [t0, t1), one point per pixel at most (the value in
  // effect at the point's time and the largest sample until the next), starting with the value
  // in effect at t0.
  void CounterIn(int track, int64_t t0, int64_t t1, double ns_per_pixel, std::vector<CounterPoint>& out) const;

  SpanInfo Span(SpanId id) const;
  // Per name, the spans overlapping [t0, t1) (on `tracks`, or on all when empty) with their
  // whole durations, as Perfetto aggregates an area; sorted by total, largest first.
  std::vector<NameStats> Aggregate(int64_t t0, int64_t t1, const std::vector<int>& tracks = {}) const;
  // The spans of HLO instruction `hlo_op` of `module` (an empty module matches any), in id order.
  std::vector<SpanId> SpansOfHloOp(std::string_view module, std::string_view hlo_op) const;
  // Count, total and mean duration of `spans`.
  SpanStats Stats(const std::vector<SpanId>& spans) const;
  // Spans whose name contains `text` (ASCII case-insensitive), by start time.
  std::vector<SpanId> Search(std::string_view text) const;
  // Flows that start or end at `span`.
  std::vector<TraceFlow> FlowsOf(SpanId span) const;
  // The trace's "otherData" scalars as text ("dropped_records" -> "3").
  const std::vector<std::pair<std::string, std::string>>& metadata() const { return metadata_; }

 private:
  friend class TraceModelBuilder;
  struct SpanRecord {
    int64_t start_ns;
    int64_t duration_ns;
    uint32_t name;
    uint32_t category;
    uint32_t track;
    uint32_t kernel;  // index into kernels_, or kNoKernel
    uint32_t ordinal;  // while loading: the reader's order, to bind flows
    uint16_t depth;
  };
  struct KernelRecord {
    uint32_t hlo_op, module, op_names, fusion_kind, waited_for;
    int64_t bytes_accessed, flops, wait_ns;
    SpanId span;
  };
  // Where a track's spans are: level d is [levels[d], levels[d + 1]) of spans_.
  struct TrackIndex {
    std::vector<int64_t> levels;
    int counter = -1;  // counter tracks: index into counters_
  };
  struct CounterSeries {
    std::vector<int64_t> ts;
    std::vector<double> values;
  };
  static constexpr uint32_t kNoKernel = UINT32_MAX;

  TraceModel() = default;
  uint32_t Intern(std::string_view text);
  int64_t SpanEnd(int64_t i) const { return spans_[i].start_ns + spans_[i].duration_ns; }
  // The first span of [begin, end) whose end is after t (by the running maximum).
  int64_t FirstEndingAfter(int64_t begin, int64_t end, int64_t t) const;

  std::vector<TraceTrack> tracks_;
  std::vector<TrackIndex> index_;
  std::vector<SpanRecord> spans_;
  std::vector<int64_t> max_end_;  // running maximum of ends within each level
  std::vector<KernelRecord> kernels_;
  std::vector<CounterSeries> counters_;
  std::vector<TraceFlow> flows_by_from_;
  std::vector<TraceFlow> flows_by_to_;
  std::vector<std::string_view> strings_;
  // Looked up by string_view without making a string.
  struct StringHash {
    using is_transparent = void;
    size_t operator()(std::string_view text) const { return std::hash<std::string_view>{}(text); }
  };
  std::unordered_map<std::string, uint32_t, StringHash, std::equal_to<>> interned_;
  std::vector<std::pair<std::string, std::string>> metadata_;
  int64_t base_ns_ = 0;
  int64_t start_ns_ = 0;
  int64_t end_ns_ = 0;
};

}  // namespace xlens::viewer
