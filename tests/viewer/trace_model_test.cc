// TraceModel against the profiler's own reader (ReadChromeTrace keeps every event, so it is an
// independent account of the file): the real trace of the test dump, traces written with the
// profiler's writer, and broken files.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <map>
#include <set>
#include <tuple>

#include <QtTest/QtTest>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/support/file_io.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/trace.h"
#include "tests/scratch_directory.h"
#include "viewer/trace_model.h"

namespace xlens::viewer {
namespace {

namespace fs = std::filesystem;

std::string DumpTrace() {
  QByteArray dump = qgetenv("XLENS_VIEWER_TEST_DUMP");
  return dump.isEmpty() ? std::string() : dump.toStdString() + "/timeline.ctf.json";
}

// In one folder per test process, removed when the process ends (or is signalled).
std::string TempPath(const std::string& name) {
  return xlens::testing::ScratchDirectory("trace-model-test") + "/" + name;
}

bool ContainsIgnoringCase(const std::string& text, const std::string& needle) {
  auto lower = [](std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
  };
  return lower(text).find(lower(needle)) != std::string::npos;
}

// The nesting depth of each event by definition: how many other events of its track contain it
// (ties broken as the model breaks them: the longer one, then the earlier in the file, is outside).
std::vector<int> DepthsByContainment(const profiler::Trace& trace) {
  std::vector<int> depths(trace.events.size(), 0);
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const auto& e = trace.events[i];
    for (size_t j = 0; j < trace.events.size(); ++j) {
      const auto& o = trace.events[j];
      if (j == i || o.pid != e.pid || o.tid != e.tid) continue;
      bool contains = o.start_ns <= e.start_ns && o.start_ns + o.duration_ns >= e.start_ns + e.duration_ns &&
                      o.start_ns + o.duration_ns > e.start_ns;
      bool outside = o.start_ns < e.start_ns || o.duration_ns > e.duration_ns || (o.duration_ns == e.duration_ns && j < i);
      if (contains && outside) ++depths[i];
    }
  }
  return depths;
}

// Writes `events` spans over `threads` threads: each thread runs steps of one "execute" holding
// kernels back to back, some of them holding a "copy" (three levels).
profiler::Trace SyntheticTrace(int threads, int kernels_per_thread) {
  profiler::Trace trace;
  trace.base_ns = 1'000'000;
  trace.processes = {{0, "Host (CPU)", 0}, {1, "GPU 0", 1}};
  for (int t = 0; t < threads; ++t) trace.threads.push_back({t % 2, t + 1, "worker " + std::to_string(t), t});
  for (int t = 0; t < threads; ++t) {
    int64_t now = trace.base_ns + t * 7;
    for (int k = 0; k < kernels_per_thread;) {
      int in_step = std::min(50, kernels_per_thread - k);
      int64_t step_start = now;
      std::vector<profiler::TraceEvent> step;
      for (int i = 0; i < in_step; ++i, ++k) {
        int64_t dur = 100 + (k * 37) % 400;
        profiler::TraceEvent kernel{"fusion." + std::to_string(k % 13), profiler::category::kCpuKernel, t % 2, t + 1,
                                    now + 10, dur,
                                    {{"hlo_op", std::string("fusion." + std::to_string(k % 13))},
                                     {"module", std::string(k % 2 ? "train" : "eval")},
                                     {"bytes_accessed", int64_t{1000 + k}}}};
        step.push_back(kernel);
        if (k % 5 == 0) step.push_back({"copy", profiler::category::kThunk, t % 2, t + 1, now + 20, dur / 2, {}});
        now += dur + 20;
      }
      trace.events.push_back({"execute", profiler::category::kExecute, t % 2, t + 1, step_start, now + 10 - step_start, {}});
      for (auto& e : step) trace.events.push_back(std::move(e));
      now += 500;
    }
  }
  return trace;
}

struct Written {
  std::string path;
  profiler::Trace trace;  // as read back by the profiler's reader
};

Written WriteAndReadBack(const profiler::Trace& trace, const std::string& name) {
  std::string path = TempPath(name);
  Status written = profiler::WriteChromeTrace(trace, path);
  if (!written.ok()) qFatal("%s", written.message().c_str());
  auto read = profiler::ReadChromeTrace(path);
  if (!read.ok()) qFatal("%s", read.status().message().c_str());
  return {path, std::move(*read)};
}

std::unique_ptr<TraceModel> MustLoad(const std::string& path) {
  auto model = TraceModel::Load(path);
  if (!model.ok()) qFatal("%s", model.status().message().c_str());
  return std::move(*model);
}

// Every span the model has, as (track pid, tid, name, start, duration, depth), sorted.
using SpanKey = std::tuple<int32_t, int64_t, std::string, int64_t, int64_t, int>;
std::vector<SpanKey> ModelSpans(const TraceModel& model) {
  std::vector<SpanKey> keys;
  for (SpanId id = 0; id < model.span_count(); ++id) {
    SpanInfo span = model.Span(id);
    const TraceTrack& track = model.tracks()[span.track];
    keys.emplace_back(track.pid, track.tid, std::string(span.name), span.start_ns, span.duration_ns, span.depth);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::vector<SpanKey> FileSpans(const profiler::Trace& trace) {
  std::vector<int> depths = DepthsByContainment(trace);
  std::vector<SpanKey> keys;
  for (size_t i = 0; i < trace.events.size(); ++i) {
    const auto& e = trace.events[i];
    keys.emplace_back(e.pid, e.tid, e.name, e.start_ns - trace.base_ns, e.duration_ns, depths[i]);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

}  // namespace

class TraceModelTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY2(!DumpTrace().empty(), "XLENS_VIEWER_TEST_DUMP is not set");
    auto file = profiler::ReadChromeTrace(DumpTrace());
    QVERIFY2(file.ok(), file.status().message().c_str());
    file_ = std::move(*file);
    QVERIFY(!file_.events.empty());
  }

  // Every event of the real trace is a span on its track at the depth its containers give it.
  void RealTraceSpansAndDepths() {
    auto model = MustLoad(DumpTrace());
    QCOMPARE(model->span_count(), static_cast<int64_t>(file_.events.size()));
    QCOMPARE(ModelSpans(*model), FileSpans(file_));
    int deepest = 0;
    for (const auto& track : model->tracks()) deepest = std::max(deepest, track.max_depth);
    QVERIFY2(deepest >= 1, "kernels run inside execute spans");
  }

  // Tracks are named from the metadata and hold their events.
  void RealTraceTracksAreNamedFromMetadata() {
    auto model = MustLoad(DumpTrace());
    std::map<std::pair<int32_t, int64_t>, int64_t> per_track;
    for (const auto& e : file_.events) ++per_track[{e.pid, e.tid}];
    QCOMPARE(model->tracks().size(), per_track.size());
    for (const TraceTrack& track : model->tracks()) {
      QCOMPARE(track.span_count, (per_track[{track.pid, track.tid}]));
      for (const auto& thread : file_.threads) {
        if (thread.pid == track.pid && thread.tid == track.tid) QCOMPARE(track.name, thread.name);
      }
      for (const auto& process : file_.processes) {
        if (process.pid == track.pid) QCOMPARE(track.process_name, process.name);
      }
    }
  }

  // Kernel spans keep the args that link them to HLO; the others keep none.
  void KernelArgsAndHloOps() {
    auto model = MustLoad(DumpTrace());
    std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> by_op;  // count, total
    int64_t kernels = 0;
    for (const auto& e : file_.events) {
      if (!profiler::IsKernelCategory(e.category)) continue;
      ++kernels;
      const auto* op = profiler::FindArg(e, "hlo_op");
      const auto* module = profiler::FindArg(e, "module");
      QVERIFY(op != nullptr && module != nullptr);
      auto& entry = by_op[{std::get<std::string>(module->value), std::get<std::string>(op->value)}];
      ++entry.first;
      entry.second += e.duration_ns;
    }
    QVERIFY(kernels > 0);
    int64_t with_args = 0;
    for (SpanId id = 0; id < model->span_count(); ++id) {
      SpanInfo span = model->Span(id);
      QCOMPARE(span.has_kernel_args, profiler::IsKernelCategory(std::string(span.category)));
      if (span.has_kernel_args) {
        ++with_args;
        QVERIFY(!span.kernel.hlo_op.empty());
        QVERIFY(span.kernel.bytes_accessed >= 0);
      }
    }
    QCOMPARE(with_args, kernels);
    for (const auto& [key, expected] : by_op) {
      std::vector<SpanId> spans = model->SpansOfHloOp(key.first, key.second);
      SpanStats stats = model->Stats(spans);
      QCOMPARE(stats.count, expected.first);
      QCOMPARE(stats.total_ns, expected.second);
      QCOMPARE(stats.mean_ns, static_cast<double>(expected.second) / expected.first);
      for (SpanId id : spans) QCOMPARE(std::string(model->Span(id).kernel.hlo_op), key.second);
      // Without a module, every module's spans of that name.
      QVERIFY(model->SpansOfHloOp("", key.second).size() >= spans.size());
    }
    QVERIFY(model->SpansOfHloOp("no_such_module", by_op.begin()->first.second).empty());
  }

  // The aggregate of a range counts each span that overlaps it, with its whole duration.
  void AggregateEqualsTheSpansInTheRange() {
    auto model = MustLoad(DumpTrace());
    int64_t span = model->end_ns() - model->start_ns();
    for (auto [a, b] : {std::pair{0.0, 1.0}, {0.3, 0.6}, {0.9, 0.95}, {0.5, 0.5001}}) {
      int64_t t0 = model->start_ns() + static_cast<int64_t>(span * a);
      int64_t t1 = model->start_ns() + static_cast<int64_t>(span * b);
      std::map<std::string, std::pair<int64_t, int64_t>> expected;
      for (const auto& e : file_.events) {
        int64_t start = e.start_ns - file_.base_ns;
        int64_t end = start + e.duration_ns;
        bool overlaps = start < t1 && (end > t0 || (e.duration_ns == 0 && start >= t0));
        if (!overlaps) continue;
        ++expected[e.name].first;
        expected[e.name].second += e.duration_ns;
      }
      std::vector<NameStats> stats = model->Aggregate(t0, t1);
      QCOMPARE(stats.size(), expected.size());
      for (const NameStats& s : stats) {
        QCOMPARE(s.count, expected[s.name].first);
        QCOMPARE(s.total_ns, expected[s.name].second);
        QCOMPARE(s.mean_ns, static_cast<double>(s.total_ns) / s.count);
      }
      for (size_t i = 1; i < stats.size(); ++i) QVERIFY(stats[i - 1].total_ns >= stats[i].total_ns);
    }
  }

  // Search finds the spans whose names contain the text, whatever the case, in time order.
  void SearchByName() {
    auto model = MustLoad(DumpTrace());
    for (std::string text : {"fusion", "FUSION", "matmul", "execute", "no such span"}) {
      int64_t expected = 0;
      for (const auto& e : file_.events) expected += ContainsIgnoringCase(e.name, text);
      std::vector<SpanId> hits = model->Search(text);
      QCOMPARE(static_cast<int64_t>(hits.size()), expected);
      for (size_t i = 1; i < hits.size(); ++i) QVERIFY(model->Span(hits[i - 1]).start_ns <= model->Span(hits[i]).start_ns);
      for (SpanId id : hits) QVERIFY(ContainsIgnoringCase(std::string(model->Span(id).name), text));
    }
  }

  // Zoomed out, spans under a pixel merge into fewer boxes that still account for every span;
  // zoomed in, every span is its own box.
  void LevelOfDetailMergesAndCountsEverySpan() {
    Written written = WriteAndReadBack(SyntheticTrace(4, 20000), "lod.json");
    auto model = MustLoad(written.path);
    QCOMPARE(model->span_count(), static_cast<int64_t>(written.trace.events.size()));
    const int64_t t0 = model->start_ns();
    const int64_t t1 = model->end_ns() + 1;
    for (double pixels : {200.0, 2000.0}) {
      int64_t boxes = 0;
      int64_t spans = 0;
      for (int t = 0; t < static_cast<int>(model->tracks().size()); ++t) {
        std::vector<SpanBox> out;
        model->SpansIn(t, t0, t1, (t1 - t0) / pixels, out);
        boxes += static_cast<int64_t>(out.size());
        for (const SpanBox& box : out) {
          spans += box.count;
          QVERIFY(box.end_ns >= box.start_ns);
          if (box.count == 1) QCOMPARE(model->Span(box.span).start_ns, box.start_ns);
        }
      }
      QCOMPARE(spans, model->span_count());
      // A few boxes per pixel column and level, not one per span.
      QVERIFY2(boxes < model->span_count() / 10, qPrintable(QString::number(boxes)));
      QVERIFY(boxes <= static_cast<int64_t>(pixels) * 4 * 3 * 2);
    }
    // One nanosecond a pixel: nothing merges.
    std::vector<SpanBox> out;
    model->SpansIn(0, t0, t1, 0.5, out);
    QCOMPARE(static_cast<int64_t>(out.size()), model->tracks()[0].span_count);
    for (const SpanBox& box : out) QCOMPARE(box.count, int64_t{1});
    // A window in the middle holds exactly the spans that overlap it.
    int64_t w0 = t0 + (t1 - t0) / 3;
    int64_t w1 = w0 + (t1 - t0) / 50;
    int64_t expected = 0;
    const TraceTrack& track = model->tracks()[0];
    for (const auto& e : written.trace.events) {
      int64_t start = e.start_ns - written.trace.base_ns;
      if (e.pid == track.pid && e.tid == track.tid && start < w1 && start + e.duration_ns >= w0) ++expected;
    }
    out.clear();
    model->SpansIn(0, w0, w1, (w1 - w0) / 100.0, out);
    int64_t counted = 0;
    for (const SpanBox& box : out) counted += box.count;
    QCOMPARE(counted, expected);
  }

  // Tracks follow the process and thread sort indices, not the order of the events.
  void TracksFollowSortIndices() {
    profiler::Trace trace;
    trace.processes = {{7, "late process", 5}, {3, "early process", 1}};
    trace.threads = {{3, 20, "second", 2}, {3, 10, "first", 1}, {7, 1, "only", 0}};
    trace.events = {{"a", "x", 7, 1, 100, 10, {}}, {"b", "x", 3, 20, 100, 10, {}}, {"c", "x", 3, 10, 100, 10, {}},
                    {"d", "x", 9, 4, 100, 10, {}}};
    Written written = WriteAndReadBack(trace, "order.json");
    auto model = MustLoad(written.path);
    std::vector<std::string> names;
    for (const auto& track : model->tracks()) names.push_back(track.process_name + "/" + track.name);
    // Process 9 has no metadata: sort index 0, before the others, as Chrome orders them.
    std::vector<std::string> expected{"Process 9/Thread 4", "early process/first", "early process/second",
                                      "late process/only"};
    QVERIFY2(names == expected, qPrintable(QString::fromStdString(fmt::format("{}", fmt::join(names, ", ")))));
  }

  // Flows join the launch to the kernel it started, both ways.
  void FlowsJoinLaunchAndKernel() {
    profiler::Trace trace;
    trace.processes = {{0, "Host", 0}, {1, "GPU 0", 1}};
    profiler::TraceEvent launch{"cuLaunchKernel", profiler::category::kCudaRuntime, 0, 1, 1000, 50, {}};
    launch.flow_out = 42;
    profiler::TraceEvent kernel{"fusion.1", profiler::category::kGpuKernel, 1, 7, 1200, 300, {}};
    kernel.flow_in = 42;
    profiler::TraceEvent other{"fusion.2", profiler::category::kGpuKernel, 1, 7, 1600, 300, {}};
    trace.events = {launch, kernel, other};
    Written written = WriteAndReadBack(trace, "flows.json");
    auto model = MustLoad(written.path);
    std::vector<SpanId> launches = model->Search("cuLaunch");
    std::vector<SpanId> kernels = model->Search("fusion.1");
    QCOMPARE(launches.size(), size_t{1});
    QCOMPARE(kernels.size(), size_t{1});
    std::vector<TraceFlow> from_launch = model->FlowsOf(launches[0]);
    QCOMPARE(from_launch.size(), size_t{1});
    QCOMPARE(from_launch[0].from, launches[0]);
    QCOMPARE(from_launch[0].to, kernels[0]);
    std::vector<TraceFlow> into_kernel = model->FlowsOf(kernels[0]);
    QCOMPARE(into_kernel.size(), size_t{1});
    QCOMPARE(into_kernel[0].from, launches[0]);
    QVERIFY(model->FlowsOf(model->Search("fusion.2")[0]).empty());
  }

  // XLA's profilers name a kernel's module "hlo_module" (jax.profiler's JSON, XSpace's stats):
  // its spans are found by module and instruction as ours are.
  void XlaProfilerKernelsAreFoundByHloModule() {
    std::string path = TempPath("jax_profile.json");
    QVERIFY(WriteFile(path, R"({"traceEvents":[
      {"ph":"X","name":"multiply_subtract_fusion","pid":1,"tid":2,"ts":0,"dur":3,
       "args":{"hlo_op":"multiply_subtract_fusion","hlo_module":"jit_step"}},
      {"ph":"X","name":"multiply_subtract_fusion","pid":1,"tid":2,"ts":5,"dur":4,
       "args":{"hlo_op":"multiply_subtract_fusion","hlo_module":"jit_other"}},
      {}]})")
                .ok());
    auto model = MustLoad(path);
    QCOMPARE(model->SpansOfHloOp("jit_step", "multiply_subtract_fusion").size(), size_t{1});
    QCOMPARE(model->SpansOfHloOp("", "multiply_subtract_fusion").size(), size_t{2});
    QVERIFY(model->SpansOfHloOp("module_0006", "multiply_subtract_fusion").empty());
  }

  // Counter events ("C") become one track per process and series, after the process's threads.
  void CountersBecomeTracks() {
    std::string path = TempPath("counters.json");
    QVERIFY(WriteFile(path, R"({"traceEvents":[
      {"ph":"M","name":"process_name","pid":0,"args":{"name":"Host"}},
      {"ph":"X","name":"k","cat":"cpu_kernel","pid":0,"tid":1,"ts":0,"dur":10},
      {"ph":"C","name":"memory","pid":0,"ts":2,"args":{"used":100,"free":50}},
      {"ph":"C","name":"memory","pid":0,"ts":1,"args":{"used":40,"free":110}},
      {"ph":"C","name":"memory","pid":0,"ts":6,"args":{"used":300,"free":0}}]})")
                .ok());
    auto model = MustLoad(path);
    QCOMPARE(model->tracks().size(), size_t{3});
    QCOMPARE(model->tracks()[0].kind, TraceTrack::Kind::kSlices);
    const TraceTrack& used = model->tracks()[1];
    QCOMPARE(used.kind, TraceTrack::Kind::kCounter);
    QCOMPARE(used.name, std::string("memory used"));
    QCOMPARE(used.process_name, std::string("Host"));
    QCOMPARE(used.span_count, int64_t{3});
    QCOMPARE(used.min_value, 40.0);
    QCOMPARE(used.max_value, 300.0);
    QCOMPARE(model->tracks()[2].name, std::string("memory free"));
    std::vector<CounterPoint> points;
    model->CounterIn(1, 0, 10'000, 1.0, points);
    QCOMPARE(points.size(), size_t{3});
    QCOMPARE(points[0].ts_ns, int64_t{1000});  // sorted by time
    QCOMPARE(points[0].value, 40.0);
    QCOMPARE(points[2].value, 300.0);
    // From the middle: the value in effect first.
    points.clear();
    model->CounterIn(1, 3000, 10'000, 1.0, points);
    QCOMPARE(points.size(), size_t{2});
    QCOMPARE(points[0].value, 100.0);
    QCOMPARE(points[0].ts_ns, int64_t{3000});
    // Two samples within one pixel become one point with the last value and the largest.
    points.clear();
    model->CounterIn(1, 0, 10'000, 5000.0, points);
    QCOMPARE(points.size(), size_t{2});
    QCOMPARE(points[0].value, 100.0);
    QCOMPARE(points[0].max, 100.0);
    QCOMPARE(model->Aggregate(0, 10'000).size(), size_t{1});  // counters are not spans
  }

  // Each broken file is one line naming the file and where, never a crash.
  void BrokenTracesGiveTheReadersError() {
    const std::map<std::string, std::string> expected = {
        {"truncated.json", "truncated.json:3:"},
        {"ts_is_a_string.json", "event 0 (\"fusion.1\"): \"ts\" must be a number, not string"},
        {"pid_is_a_list.json", "\"pid\" must be a number or a string, not array"},
        {"events_not_a_list.json", "\"traceEvents\" must be a list, not object"},
        {"not_json.txt", "not_json.txt:1:1: not valid JSON"},
        {"cut_short.json.gz", "cut_short.json.gz: the gzip stream is cut short"},
    };
    int checked = 0;
    for (const auto& entry : fs::directory_iterator(std::string(XLENS_TESTDATA_DIR) + "/broken_traces")) {
      std::string name = entry.path().filename().string();
      auto it = expected.find(name);
      QVERIFY2(it != expected.end(), name.c_str());
      auto model = TraceModel::Load(entry.path().string());
      QVERIFY2(!model.ok(), name.c_str());
      const std::string message = model.status().message();
      QVERIFY2(message.find(name) != std::string::npos, message.c_str());
      QVERIFY2(message.find(it->second) != std::string::npos, message.c_str());
      QVERIFY2(message.find('\n') == std::string::npos, message.c_str());
      ++checked;
    }
    QCOMPARE(checked, static_cast<int>(expected.size()));
    auto missing = TraceModel::Load(TempPath("no_such_trace.json"));
    QVERIFY(!missing.ok());
    QVERIFY(missing.status().message().find("no_such_trace.json") != std::string::npos);
  }

  // An empty trace, and one at the edges of the times the reader accepts, load and answer.
  void EmptyAndExtremeTraces() {
    std::string empty = TempPath("no_events.json");
    QVERIFY(WriteFile(empty, R"({"traceEvents":[]})").ok());
    auto none = MustLoad(empty);
    QCOMPARE(none->span_count(), int64_t{0});
    QVERIFY(none->tracks().empty());
    QVERIFY(none->Aggregate(0, 1000).empty());
    QVERIFY(none->Search("a").empty());
    QVERIFY(none->SpansOfHloOp("", "a").empty());
    QCOMPARE(none->Span(0).id, kNoSpan);
    QVERIFY(none->FlowsOf(0).empty());
    std::vector<SpanBox> out;
    none->SpansIn(0, 0, 1000, 1.0, out);
    QVERIFY(out.empty());

    std::string edges = TempPath("edges.json");
    QVERIFY(WriteFile(edges, R"({"traceEvents":[
      {"ph":"X","name":"late","pid":0,"tid":1,"ts":4611686018427387,"dur":4611686018427387},
      {"ph":"X","name":"early","pid":0,"tid":1,"ts":-4611686018427387,"dur":1},
      {"ph":"i","name":"now","pid":0,"tid":1,"ts":0}]})")
                .ok());
    auto model = MustLoad(edges);
    QCOMPARE(model->span_count(), int64_t{3});
    for (double ns_per_pixel : {1e-9, 1.0, 1e6, 1e12, 1e18, 1e300}) {
      out.clear();
      model->SpansIn(0, INT64_MIN / 2, INT64_MAX, ns_per_pixel, out);
      int64_t counted = 0;
      for (const SpanBox& box : out) counted += box.count;
      QCOMPARE(counted, int64_t{3});
    }
    QCOMPARE(model->Aggregate(INT64_MIN / 2, INT64_MAX).size(), size_t{3});
  }

  // Overlapping spans that do not nest still each land in one box and one level.
  void OverlappingSpansAreKept() {
    profiler::Trace trace;
    trace.events = {{"a", "x", 0, 1, 0, 1000, {}}, {"b", "x", 0, 1, 500, 1000, {}}, {"c", "x", 0, 1, 1200, 100, {}},
                    {"d", "x", 0, 1, 1200, 0, {}}};
    Written written = WriteAndReadBack(trace, "overlap.json");
    auto model = MustLoad(written.path);
    QCOMPARE(model->span_count(), int64_t{4});
    std::vector<SpanBox> out;
    model->SpansIn(0, 0, 3000, 1.0, out);
    QCOMPARE(out.size(), size_t{4});
    QCOMPARE(model->Aggregate(1100, 1300).size(), size_t{3});  // b, c and the instant d
    QVERIFY(model->SpanAt(0, 0, 100, 0) != kNoSpan);
    QCOMPARE(std::string(model->Span(model->SpanAt(0, 0, 100, 0)).name), std::string("a"));
  }

 private:
  profiler::Trace file_;
};

}  // namespace xlens::viewer

QTEST_MAIN(xlens::viewer::TraceModelTest)
#include "trace_model_test.moc"
