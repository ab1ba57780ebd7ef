#include "viewer/trace_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "profiler/chrome_trace_reader.h"
#include "profiler/trace.h"

namespace xlens::viewer {

namespace {

// Deeper nesting than this is drawn at this level (a hostile file could nest a million deep).
constexpr int kMaxDepth = 255;
// Merged boxes end on a grid of this many pixels fixed in time, so a dense stretch shows its
// texture (and each box's count) instead of one bar, and panning does not move the cuts.
constexpr double kMergeCellPixels = 4;
// Flow points sharing an id beyond this many are not paired (a hostile file could make the pairs
// quadratic).
constexpr size_t kMaxFlowEndsPerId = 16;

// Nanoseconds per pixel within what the arithmetic below handles (times are within ±2^62).
double ClampPixel(double ns_per_pixel) { return std::clamp(ns_per_pixel, 1e-6, 1e17); }

// a + b for b >= 0, at most INT64_MAX (a span's end can reach 2^63 - 1 at the reader's limits).
int64_t SaturatingAdd(int64_t a, int64_t b) { return a > INT64_MAX - b ? INT64_MAX : a + b; }

// The end of the merge cell holding `t`, clamped to a time int64 holds.
int64_t CellEnd(int64_t t, double cell) {
  double end = (std::floor(static_cast<double>(t) / cell) + 1) * cell;
  return static_cast<int64_t>(std::min(std::ceil(end), 4.6e18));
}

bool ContainsIgnoringCase(std::string_view text, std::string_view needle) {
  if (needle.empty()) return true;
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  auto it = std::search(text.begin(), text.end(), needle.begin(), needle.end(),
                        [&](char a, char b) { return lower(a) == lower(b); });
  return it != text.end();
}

std::string ArgText(const profiler::TraceArgValue& value) {
  if (const auto* s = std::get_if<std::string>(&value)) return *s;
  if (const auto* i = std::get_if<int64_t>(&value)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&value)) return fmt::format("{}", *d);
  const auto& list = std::get<std::vector<int64_t>>(value);
  return fmt::format("[{}]", fmt::join(list, ","));
}

int64_t ArgInt(const profiler::TraceArgValue& value) {
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value); d && std::fabs(*d) < 9.2e18) return static_cast<int64_t>(*d);
  return -1;
}

}  // namespace

// The reader's visitor: appends each event as a record, then orders and indexes them.
class TraceModelBuilder : public profiler::ChromeTraceVisitor {
 public:
  explicit TraceModelBuilder(TraceModel& model) : model_(model) {}

  bool WantsArgs() const override { return true; }
  bool WantsFlows() const override { return true; }
  bool WantsCounters() const override { return true; }

  void OnEvent(profiler::TraceEvent& event) override {
    // Ids and ordinals are 32 bits; a trace this large would not fit in memory anyway.
    if (model_.spans_.size() >= UINT32_MAX - 1) {
      too_large_ = true;
      return;
    }
    TraceModel::SpanRecord record{};
    record.start_ns = event.start_ns;
    record.duration_ns = event.duration_ns;
    record.name = model_.Intern(event.name);
    record.category = model_.Intern(event.category);
    record.track = TrackOf(event.pid, event.tid);
    record.kernel = TraceModel::kNoKernel;
    record.ordinal = static_cast<uint32_t>(model_.spans_.size());
    if (!event.args.empty() && (profiler::IsKernelCategory(event.category) ||
                                event.category == profiler::category::kCollective)) {
      record.kernel = KeepKernelArgs(event);
    }
    model_.spans_.push_back(record);
  }

  void OnFlow(size_t ordinal, int64_t id, bool is_start, int64_t at_ns) override {
    if (ordinal < model_.spans_.size()) flow_points_.push_back({id, at_ns, static_cast<uint32_t>(ordinal), is_start});
  }

  void OnCounter(profiler::TraceCounterSample& sample) override {
    for (auto& [key, value] : sample.values) {
      std::string name = sample.values.size() == 1 && (key == "value" || key == sample.name)
                             ? sample.name
                             : sample.name + " " + key;
      auto [it, added] = counter_index_.try_emplace({sample.pid, name}, model_.counters_.size());
      if (added) {
        model_.counters_.emplace_back();
        counter_tracks_.push_back({sample.pid, name});
      }
      TraceModel::CounterSeries& series = model_.counters_[it->second];
      series.ts.push_back(sample.ts_ns);
      series.values.push_back(value);
    }
  }

  Status Finish(profiler::ChromeTraceHeader header);

 private:
  struct FlowPoint {
    int64_t id;
    int64_t at_ns;  // after the span's start
    uint32_t ordinal;
    bool is_start;
  };

  uint32_t TrackOf(int32_t pid, int64_t tid) {
    std::pair<int32_t, int64_t> key{pid, tid};
    if (last_track_ >= 0 && last_key_ == key) return static_cast<uint32_t>(last_track_);
    auto [it, added] = track_index_.try_emplace(key, static_cast<uint32_t>(slice_tracks_.size()));
    if (added) slice_tracks_.push_back(key);
    last_key_ = key;
    last_track_ = it->second;
    return it->second;
  }

  uint32_t KeepKernelArgs(const profiler::TraceEvent& event) {
    TraceModel::KernelRecord kernel{};
    uint32_t empty = model_.Intern("");
    kernel.hlo_op = kernel.module = kernel.op_names = kernel.fusion_kind = kernel.waited_for = empty;
    kernel.bytes_accessed = kernel.flops = kernel.wait_ns = -1;
    bool any = false;
    auto intern = [&](const profiler::TraceArgValue& value) {
      const auto* text = std::get_if<std::string>(&value);
      return text != nullptr ? model_.Intern(*text) : model_.Intern(ArgText(value));
    };
    for (const profiler::TraceArg& arg : event.args) {
      const std::string& key = arg.key;
      if (key == "hlo_op") {
        kernel.hlo_op = intern(arg.value);
      } else if (key == "module" || key == "hlo_module") {
        // Ours say "module"; XLA's profilers (jax.profiler's JSON, XSpace stats) "hlo_module".
        kernel.module = intern(arg.value);
      } else if (key == "op_names") {
        kernel.op_names = intern(arg.value);
      } else if (key == "fusion_kind") {
        kernel.fusion_kind = intern(arg.value);
      } else if (key == "bytes_accessed") {
        kernel.bytes_accessed = ArgInt(arg.value);
      } else if (key == "flops") {
        kernel.flops = ArgInt(arg.value);
      } else if (key == "waited_for") {
        kernel.waited_for = intern(arg.value);
      } else if (key == "wait_ns") {
        kernel.wait_ns = ArgInt(arg.value);
      } else {
        continue;
      }
      any = true;
    }
    if (!any) return TraceModel::kNoKernel;
    kernel.span = static_cast<SpanId>(model_.spans_.size());  // the ordinal until Finish
    model_.kernels_.push_back(kernel);
    return static_cast<uint32_t>(model_.kernels_.size() - 1);
  }

  void OrderTracks(const profiler::ChromeTraceHeader& header, std::vector<uint32_t>& slice_track_to_final,
                   std::vector<int>& counter_to_final);
  void OrderSpans();
  void BindFlows(const std::vector<uint32_t>& ordinal_to_id);

  TraceModel& model_;
  bool too_large_ = false;
  std::map<std::pair<int32_t, int64_t>, uint32_t> track_index_;
  std::vector<std::pair<int32_t, int64_t>> slice_tracks_;
  std::pair<int32_t, int64_t> last_key_;
  int64_t last_track_ = -1;
  std::map<std::pair<int32_t, std::string>, size_t> counter_index_;
  std::vector<std::pair<int32_t, std::string>> counter_tracks_;
  std::vector<FlowPoint> flow_points_;
};

void TraceModelBuilder::OrderTracks(const profiler::ChromeTraceHeader& header,
                                    std::vector<uint32_t>& slice_track_to_final, std::vector<int>& counter_to_final) {
  std::map<int32_t, const profiler::TraceProcess*> processes;
  for (const profiler::TraceProcess& process : header.processes) processes[process.pid] = &process;
  std::map<std::pair<int32_t, int64_t>, const profiler::TraceThread*> threads;
  for (const profiler::TraceThread& thread : header.threads) threads[{thread.pid, thread.tid}] = &thread;

  auto fill_process = [&](TraceTrack& track) {
    auto it = processes.find(track.pid);
    if (it != processes.end() && !it->second->name.empty()) {
      track.process_name = it->second->name;
    } else {
      track.process_name = fmt::format("Process {}", track.pid);
    }
    if (it != processes.end()) track.process_sort_index = it->second->sort_index;
  };
  std::vector<TraceTrack> tracks;
  for (auto [pid, tid] : slice_tracks_) {
    TraceTrack track;
    track.kind = TraceTrack::Kind::kSlices;
    track.pid = pid;
    track.tid = tid;
    fill_process(track);
    auto it = threads.find({pid, tid});
    track.name = it != threads.end() && !it->second->name.empty() ? it->second->name : fmt::format("Thread {}", tid);
    if (it != threads.end()) track.sort_index = it->second->sort_index;
    tracks.push_back(std::move(track));
  }
  for (const auto& [pid, name] : counter_tracks_) {
    TraceTrack track;
    track.kind = TraceTrack::Kind::kCounter;
    track.pid = pid;
    track.name = name;
    fill_process(track);
    tracks.push_back(std::move(track));
  }
  std::vector<size_t> order(tracks.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    const TraceTrack& x = tracks[a];
    const TraceTrack& y = tracks[b];
    return std::tuple(x.process_sort_index, x.pid, x.kind, x.sort_index, x.tid) <
           std::tuple(y.process_sort_index, y.pid, y.kind, y.sort_index, y.tid);
  });
  slice_track_to_final.assign(slice_tracks_.size(), 0);
  counter_to_final.assign(counter_tracks_.size(), 0);
  for (size_t final_index = 0; final_index < order.size(); ++final_index) {
    size_t i = order[final_index];
    if (i < slice_tracks_.size()) {
      slice_track_to_final[i] = static_cast<uint32_t>(final_index);
    } else {
      counter_to_final[i - slice_tracks_.size()] = static_cast<int>(final_index);
    }
    model_.tracks_.push_back(std::move(tracks[i]));
  }
}

// Sorts spans by (track, start, longest first) to find each one's nesting depth, then by (track,
// depth, start) so each level is one run; records the levels and the running maximum of ends.
void TraceModelBuilder::OrderSpans() {
  auto& spans = model_.spans_;
  auto by_start = [](const TraceModel::SpanRecord& a, const TraceModel::SpanRecord& b) {
    if (a.track != b.track) return a.track < b.track;
    if (a.start_ns != b.start_ns) return a.start_ns < b.start_ns;
    if (a.duration_ns != b.duration_ns) return a.duration_ns > b.duration_ns;
    return a.ordinal < b.ordinal;
  };
  std::sort(spans.begin(), spans.end(), by_start);
  std::vector<int64_t> open_ends;
  uint32_t track = UINT32_MAX;
  for (TraceModel::SpanRecord& span : spans) {
    if (span.track != track) {
      open_ends.clear();
      track = span.track;
    }
    while (!open_ends.empty() && open_ends.back() <= span.start_ns) open_ends.pop_back();
    span.depth = static_cast<uint16_t>(std::min<size_t>(open_ends.size(), kMaxDepth));
    open_ends.push_back(span.start_ns + span.duration_ns);
  }
  // Then by (track, depth), keeping the start order within each level: a counting sort, one
  // track at a time, as the records are already grouped by track.
  {
    std::vector<TraceModel::SpanRecord> ordered(spans.size());
    std::vector<size_t> at;
    for (size_t begin = 0; begin < spans.size();) {
      size_t end = begin;
      at.assign(kMaxDepth + 2, 0);
      while (end < spans.size() && spans[end].track == spans[begin].track) ++at[spans[end++].depth + 1];
      at[0] = begin;
      for (size_t d = 1; d < at.size(); ++d) at[d] += at[d - 1];
      for (size_t i = begin; i < end; ++i) ordered[at[spans[i].depth]++] = spans[i];
      begin = end;
    }
    spans.swap(ordered);
  }

  model_.index_.assign(model_.tracks_.size(), {});
  model_.max_end_.resize(spans.size());
  int64_t running_end = 0;
  for (size_t i = 0; i < spans.size(); ++i) {
    const TraceModel::SpanRecord& span = spans[i];
    TraceModel::TrackIndex& index = model_.index_[span.track];
    bool new_level = index.levels.empty() || spans[i - 1].track != span.track || spans[i - 1].depth != span.depth;
    if (new_level) {
      // Levels are dense: depth d exists when d + 1 does.
      while (index.levels.size() <= span.depth) index.levels.push_back(static_cast<int64_t>(i));
      running_end = model_.SpanEnd(static_cast<int64_t>(i));
    }
    running_end = std::max(running_end, model_.SpanEnd(static_cast<int64_t>(i)));
    model_.max_end_[i] = running_end;
    TraceTrack& t = model_.tracks_[span.track];
    t.max_depth = std::max<int>(t.max_depth, span.depth);
    ++t.span_count;
  }
  for (size_t t = 0; t < model_.index_.size(); ++t) {
    if (model_.tracks_[t].kind != TraceTrack::Kind::kSlices) continue;
    TraceModel::TrackIndex& index = model_.index_[t];
    // The end of the last level: the next track's first span.
    int64_t end = 0;
    if (!index.levels.empty()) end = index.levels.front() + model_.tracks_[t].span_count;
    index.levels.push_back(end);
  }
}

void TraceModelBuilder::BindFlows(const std::vector<uint32_t>& ordinal_to_id) {
  std::stable_sort(flow_points_.begin(), flow_points_.end(),
                   [](const FlowPoint& a, const FlowPoint& b) { return a.id < b.id; });
  for (size_t i = 0; i < flow_points_.size();) {
    size_t j = i;
    while (j < flow_points_.size() && flow_points_[j].id == flow_points_[i].id) ++j;
    std::vector<std::pair<SpanId, int64_t>> starts, ends;  // (span, at_ns)
    for (size_t k = i; k < j; ++k) {
      auto& list = flow_points_[k].is_start ? starts : ends;
      if (list.size() < kMaxFlowEndsPerId) {
        list.push_back({ordinal_to_id[flow_points_[k].ordinal], flow_points_[k].at_ns});
      }
    }
    for (const auto& [from, from_at] : starts) {
      for (const auto& [to, to_at] : ends) model_.flows_by_from_.push_back({from, to, from_at, to_at});
    }
    i = j;
  }
  flow_points_ = {};
  auto& from = model_.flows_by_from_;
  std::sort(from.begin(), from.end(), [](const TraceFlow& a, const TraceFlow& b) {
    return std::pair(a.from, a.to) < std::pair(b.from, b.to);
  });
  model_.flows_by_to_ = from;
  std::sort(model_.flows_by_to_.begin(), model_.flows_by_to_.end(), [](const TraceFlow& a, const TraceFlow& b) {
    return std::pair(a.to, a.from) < std::pair(b.to, b.from);
  });
}

Status TraceModelBuilder::Finish(profiler::ChromeTraceHeader header) {
  if (too_large_) return Error("the trace has more events than the timeline can hold (4 billion)");
  model_.base_ns_ = header.base_ns;
  for (const profiler::TraceArg& entry : header.metadata) {
    model_.metadata_.emplace_back(entry.key, ArgText(entry.value));
  }
  std::vector<uint32_t> slice_track_to_final;
  std::vector<int> counter_to_final;
  OrderTracks(header, slice_track_to_final, counter_to_final);
  for (TraceModel::SpanRecord& span : model_.spans_) span.track = slice_track_to_final[span.track];
  OrderSpans();

  std::vector<uint32_t> ordinal_to_id(model_.spans_.size());
  for (size_t i = 0; i < model_.spans_.size(); ++i) ordinal_to_id[model_.spans_[i].ordinal] = static_cast<uint32_t>(i);
  for (TraceModel::KernelRecord& kernel : model_.kernels_) kernel.span = ordinal_to_id[kernel.span];
  BindFlows(ordinal_to_id);

  for (size_t c = 0; c < model_.counters_.size(); ++c) {
    TraceModel::CounterSeries& series = model_.counters_[c];
    // Samples in time order (files usually give them so; stable keeps the file's order on ties).
    std::vector<size_t> order(series.ts.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return series.ts[a] < series.ts[b]; });
    TraceModel::CounterSeries sorted;
    for (size_t i : order) {
      sorted.ts.push_back(series.ts[i]);
      sorted.values.push_back(series.values[i]);
    }
    series = std::move(sorted);
    int t = counter_to_final[c];
    model_.index_[t].counter = static_cast<int>(c);
    TraceTrack& track = model_.tracks_[t];
    track.span_count = static_cast<int64_t>(series.ts.size());
    if (!series.values.empty()) {
      auto [lo, hi] = std::minmax_element(series.values.begin(), series.values.end());
      track.min_value = *lo;
      track.max_value = *hi;
    }
  }

  bool any = false;
  auto extend = [&](int64_t start, int64_t end) {
    model_.start_ns_ = any ? std::min(model_.start_ns_, start) : start;
    model_.end_ns_ = any ? std::max(model_.end_ns_, end) : end;
    any = true;
  };
  for (size_t i = 0; i < model_.spans_.size(); ++i) extend(model_.spans_[i].start_ns, model_.SpanEnd(i));
  for (const TraceModel::CounterSeries& series : model_.counters_) {
    if (!series.ts.empty()) extend(series.ts.front(), series.ts.back());
  }
  return OkStatus();
}

StatusOr<std::unique_ptr<TraceModel>> TraceModel::Load(const std::string& path) {
  std::unique_ptr<TraceModel> model(new TraceModel());
  TraceModelBuilder builder(*model);
  ASSIGN_OR_RETURN(profiler::ChromeTraceHeader header, profiler::StreamChromeTrace(path, builder));
  RETURN_IF_ERROR(builder.Finish(std::move(header)));
  model->spans_.shrink_to_fit();
  model->kernels_.shrink_to_fit();
  return model;
}

uint32_t TraceModel::Intern(std::string_view text) {
  auto it = interned_.find(text);
  if (it != interned_.end()) return it->second;
  auto [added, ok] = interned_.emplace(std::string(text), static_cast<uint32_t>(strings_.size()));
  strings_.push_back(added->first);
  return added->second;
}

int64_t TraceModel::FirstEndingAfter(int64_t begin, int64_t end, int64_t t) const {
  auto first = max_end_.begin() + begin;
  auto it = std::partition_point(first, max_end_.begin() + end, [t](int64_t e) { return e < t; });
  return it - max_end_.begin();
}

void TraceModel::SpansIn(int track, int64_t t0, int64_t t1, double ns_per_pixel, std::vector<SpanBox>& out) const {
  if (track < 0 || track >= static_cast<int>(tracks_.size()) || tracks_[track].kind != TraceTrack::Kind::kSlices) {
    return;
  }
  const double px = ClampPixel(ns_per_pixel);
  const int64_t px_ceil = static_cast<int64_t>(std::ceil(px));
  const double cell = px * kMergeCellPixels;
  const std::vector<int64_t>& levels = index_[track].levels;
  for (size_t d = 0; d + 1 < levels.size(); ++d) {
    const int64_t level_end = levels[d + 1];
    int64_t i = FirstEndingAfter(levels[d], level_end, t0);
    while (i < level_end && spans_[i].start_ns < t1) {
      const SpanRecord& first = spans_[i];
      if (SpanEnd(i) < t0) {  // a level whose spans overlap: this one ended before the range
        ++i;
        continue;
      }
      if (static_cast<double>(first.duration_ns) >= px) {
        out.push_back({first.start_ns, SpanEnd(i), static_cast<int>(d), i, 1, first.name});
        ++i;
        continue;
      }
      // A run of narrow spans with less than a pixel between them, cut at the cell grid.
      SpanBox box{first.start_ns, SpanEnd(i), static_cast<int>(d), i, 0, first.name};
      const int64_t stop = std::min(t1, CellEnd(first.start_ns, cell));
      int64_t j = i;
      while (true) {
        ++box.count;
        box.end_ns = std::max(box.end_ns, SpanEnd(j));
        ++j;
        if (j >= level_end || spans_[j].start_ns >= stop) break;
        // Every span starting within a pixel of the box joins it; on a nested level all but the
        // last of them end before the next starts, so they are narrow: take them at once.
        const int64_t limit = std::min(stop, SaturatingAdd(box.end_ns, px_ceil));
        auto k = std::partition_point(spans_.begin() + j, spans_.begin() + level_end,
                                      [limit](const SpanRecord& s) { return s.start_ns < limit; }) -
                 spans_.begin();
        if (k - j >= 2) {
          box.count += (k - 1) - j;
          box.end_ns = std::max(box.end_ns, max_end_[k - 2]);
          j = k - 1;
        }
        if (j >= level_end || spans_[j].start_ns >= stop) break;
        if (static_cast<double>(spans_[j].start_ns) - static_cast<double>(box.end_ns) >= px) break;
        if (static_cast<double>(spans_[j].duration_ns) >= px) break;
      }
      out.push_back(box);
      i = j;
    }
  }
}

SpanId TraceModel::SpanAt(int track, int depth, int64_t t, int64_t slack_ns) const {
  if (track < 0 || track >= static_cast<int>(tracks_.size())) return kNoSpan;
  const std::vector<int64_t>& levels = index_[track].levels;
  if (depth < 0 || depth + 1 >= static_cast<int>(levels.size())) return kNoSpan;
  // Differences in 128 bits: a hostile trace's times reach ±2^62 and its ends 2^63.
  using Wide = __int128;
  slack_ns = std::clamp<int64_t>(slack_ns, 0, int64_t{1} << 62);
  int64_t end = levels[depth + 1];
  int64_t i = FirstEndingAfter(levels[depth], end, static_cast<int64_t>(std::max<Wide>(Wide{t} - slack_ns, INT64_MIN)));
  SpanId best = kNoSpan;
  Wide best_distance = Wide{slack_ns} + 1;
  for (int steps = 0; i < end && Wide{spans_[i].start_ns} <= Wide{t} + slack_ns && steps < 256; ++i, ++steps) {
    Wide distance = t < spans_[i].start_ns ? Wide{spans_[i].start_ns} - t : std::max<Wide>(0, Wide{t} - SpanEnd(i));
    // Inside a span beats near one; among those inside, the shortest (the most specific).
    if (distance < best_distance ||
        (distance == 0 && best_distance == 0 && spans_[i].duration_ns < spans_[best].duration_ns)) {
      best = i;
      best_distance = distance;
    }
  }
  return best;
}

void TraceModel::CounterIn(int track, int64_t t0, int64_t t1, double ns_per_pixel,
                           std::vector<CounterPoint>& out) const {
  if (track < 0 || track >= static_cast<int>(tracks_.size()) || index_[track].counter < 0) return;
  const CounterSeries& series = counters_[index_[track].counter];
  if (series.ts.empty()) return;
  const double px = ClampPixel(ns_per_pixel);
  size_t i = std::upper_bound(series.ts.begin(), series.ts.end(), t0) - series.ts.begin();
  // The value in effect at t0: the last sample at or before it.
  if (i > 0) {
    out.push_back({t0, series.values[i - 1], series.values[i - 1]});
  }
  while (i < series.ts.size() && series.ts[i] < t1) {
    int64_t bucket_end = SaturatingAdd(series.ts[i], static_cast<int64_t>(std::ceil(px)));
    CounterPoint point{series.ts[i], series.values[i], series.values[i]};
    size_t j = i + 1;
    for (; j < series.ts.size() && series.ts[j] < bucket_end; ++j) point.max = std::max(point.max, series.values[j]);
    // The value left at the end of the pixel is what the next stretch starts from.
    point.value = series.values[j - 1];
    point.max = std::max(point.max, series.values[i]);
    out.push_back(point);
    i = j;
  }
}

SpanInfo TraceModel::Span(SpanId id) const {
  SpanInfo info;
  if (id < 0 || id >= span_count()) return info;
  const SpanRecord& span = spans_[id];
  info.id = id;
  info.name = strings_[span.name];
  info.category = strings_[span.category];
  info.start_ns = span.start_ns;
  info.duration_ns = span.duration_ns;
  info.track = static_cast<int>(span.track);
  info.depth = span.depth;
  if (span.kernel != kNoKernel) {
    const KernelRecord& kernel = kernels_[span.kernel];
    info.has_kernel_args = true;
    info.kernel = {strings_[kernel.hlo_op], strings_[kernel.module], strings_[kernel.op_names],
                   strings_[kernel.fusion_kind], kernel.bytes_accessed, kernel.flops,
                   strings_[kernel.waited_for], kernel.wait_ns};
  }
  return info;
}

std::vector<NameStats> TraceModel::Aggregate(int64_t t0, int64_t t1, const std::vector<int>& tracks) const {
  std::unordered_map<uint32_t, NameStats> by_name;
  auto visit_track = [&](int t) {
    if (t < 0 || t >= static_cast<int>(tracks_.size())) return;
    const std::vector<int64_t>& levels = index_[t].levels;
    for (size_t d = 0; d + 1 < levels.size(); ++d) {
      for (int64_t i = FirstEndingAfter(levels[d], levels[d + 1], t0); i < levels[d + 1] && spans_[i].start_ns < t1;
           ++i) {
        const SpanRecord& span = spans_[i];
        // Overlapping [t0, t1): ends after t0, or an instant inside it.
        if (SpanEnd(i) <= t0 && !(span.duration_ns == 0 && span.start_ns >= t0)) continue;
        NameStats& stats = by_name[span.name];
        ++stats.count;
        stats.total_ns += span.duration_ns;
        stats.max_ns = std::max(stats.max_ns, span.duration_ns);
      }
    }
  };
  if (tracks.empty()) {
    for (int t = 0; t < static_cast<int>(tracks_.size()); ++t) visit_track(t);
  } else {
    for (int t : tracks) visit_track(t);
  }
  std::vector<NameStats> result;
  for (auto& [name, stats] : by_name) {
    stats.name = std::string(strings_[name]);
    stats.mean_ns = static_cast<double>(stats.total_ns) / static_cast<double>(stats.count);
    result.push_back(std::move(stats));
  }
  std::sort(result.begin(), result.end(), [](const NameStats& a, const NameStats& b) {
    return a.total_ns != b.total_ns ? a.total_ns > b.total_ns : a.name < b.name;
  });
  return result;
}

std::vector<SpanId> TraceModel::SpansOfHloOp(std::string_view module, std::string_view hlo_op) const {
  std::vector<SpanId> result;
  if (hlo_op.empty()) return result;
  for (const KernelRecord& kernel : kernels_) {
    if (strings_[kernel.hlo_op] != hlo_op) continue;
    if (!module.empty() && strings_[kernel.module] != module) continue;
    result.push_back(kernel.span);
  }
  std::sort(result.begin(), result.end());
  return result;
}

SpanStats TraceModel::Stats(const std::vector<SpanId>& spans) const {
  SpanStats stats;
  for (SpanId id : spans) {
    if (id < 0 || id >= span_count()) continue;
    ++stats.count;
    stats.total_ns += spans_[id].duration_ns;
  }
  if (stats.count > 0) stats.mean_ns = static_cast<double>(stats.total_ns) / static_cast<double>(stats.count);
  return stats;
}

std::vector<SpanId> TraceModel::Search(std::string_view text) const {
  std::vector<SpanId> result;
  if (text.empty()) return result;
  std::vector<bool> matches(strings_.size());
  for (size_t s = 0; s < strings_.size(); ++s) matches[s] = ContainsIgnoringCase(strings_[s], text);
  for (size_t i = 0; i < spans_.size(); ++i) {
    if (matches[spans_[i].name]) result.push_back(static_cast<SpanId>(i));
  }
  std::stable_sort(result.begin(), result.end(),
                   [&](SpanId a, SpanId b) { return spans_[a].start_ns < spans_[b].start_ns; });
  return result;
}

std::vector<TraceFlow> TraceModel::FlowsOf(SpanId span) const {
  std::vector<TraceFlow> result;
  auto from = std::lower_bound(flows_by_from_.begin(), flows_by_from_.end(), span,
                               [](const TraceFlow& f, SpanId id) { return f.from < id; });
  for (; from != flows_by_from_.end() && from->from == span; ++from) result.push_back(*from);
  auto to = std::lower_bound(flows_by_to_.begin(), flows_by_to_.end(), span,
                             [](const TraceFlow& f, SpanId id) { return f.to < id; });
  for (; to != flows_by_to_.end() && to->to == span; ++to) result.push_back(*to);
  return result;
}

}  // namespace xlens::viewer
