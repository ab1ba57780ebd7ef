// The timeline on a large trace: a 1,000,000-event trace written by the profiler's writer (host
// threads stepping through kernels, launches with flows to GPU streams), then
//   load    TraceModel::Load, streaming (aim: under 5 s),
//   memory  VmRSS and VmHWM after the load (aim: under 1 GB; the trace is made in a child
//           process so its memory does not count),
//   frames  painting the TimelineView (1920x1080) into an image while zooming in, panning and
//           zooming out over it (aim: under 16 ms a frame).
// Usage: viewer_trace_bench [EVENTS] [TRACE_PATH] [PNG_PREFIX]   (run by hand, like the other
// benchmarks). EVENTS 0 reads TRACE_PATH as it is (a real trace); PNG_PREFIX saves frames to look at.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <vector>

#include <QApplication>
#include <QImage>
#include <QPainter>

#include "profiler/chrome_trace_reader.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/trace.h"
#include "viewer/timeline_view.h"
#include "viewer/trace_model.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace profiler = xlens::profiler;

double Seconds(Clock::time_point since) { return std::chrono::duration<double>(Clock::now() - since).count(); }

// A field of /proc/self/status in MiB ("VmRSS", "VmHWM").
double StatusMiB(const char* field) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind(field, 0) == 0) return std::strtod(line.c_str() + std::strlen(field) + 1, nullptr) / 1024.0;
  }
  return -1;
}

// Four host threads run steps ("execute" holding kernels, every fourth holding a "copy", every
// eighth preceded by a launch), and the launches' kernels run on four GPU streams, joined by flows.
profiler::Trace MakeTrace(int64_t wanted) {
  profiler::Trace trace;
  trace.base_ns = 1'000'000'000;
  trace.processes = {{profiler::kHostPid, "Host (CPU)", 0}, {profiler::kGpuPidBase, "GPU 0", 1}};
  for (int t = 0; t < 4; ++t) {
    trace.threads.push_back({profiler::kHostPid, t + 1, "worker " + std::to_string(t), t});
    trace.threads.push_back({profiler::kGpuPidBase, 7 + t, "stream " + std::to_string(7 + t), t});
  }
  trace.events.reserve(static_cast<size_t>(wanted) + 64);
  std::vector<int64_t> now(4, trace.base_ns);
  std::vector<int64_t> gpu_now(4, trace.base_ns);
  int64_t flow = 1;
  for (int64_t k = 0; static_cast<int64_t>(trace.events.size()) < wanted;) {
    int t = static_cast<int>(k / 40 % 4);
    int64_t step_start = now[t];
    size_t execute = trace.events.size();
    trace.events.push_back({"execute train_step", profiler::category::kExecute, profiler::kHostPid, t + 1, step_start, 0, {}});
    for (int i = 0; i < 40; ++i, ++k) {
      int op = static_cast<int>(k % 23);
      int64_t dur = 200 + (k * 7919) % 3000;
      std::string hlo_op = "fusion." + std::to_string(op);
      trace.events.push_back({hlo_op, profiler::category::kCpuKernel, profiler::kHostPid, t + 1, now[t] + 50, dur,
                              {{"hlo_op", hlo_op},
                               {"module", std::string("train_step")},
                               {"op_names", std::string("dense/MatMul;dense/BiasAdd")},
                               {"fusion_kind", std::string("kLoop")},
                               {"bytes_accessed", int64_t{4096 + op}},
                               {"flops", int64_t{1000 * op}}}});
      if (k % 4 == 0) {
        trace.events.push_back({"copy", profiler::category::kThunk, profiler::kHostPid, t + 1, now[t] + 60, dur / 2, {}});
      }
      if (k % 8 == 0) {
        profiler::TraceEvent launch{"cudaLaunchKernel", profiler::category::kCudaRuntime, profiler::kHostPid, t + 1,
                                    now[t] + 10, 20, {}};
        launch.flow_out = flow;
        int64_t start = std::max(gpu_now[t], now[t] + 2000);
        profiler::TraceEvent kernel{hlo_op, profiler::category::kGpuKernel, profiler::kGpuPidBase, 7 + t, start, dur,
                                    {{"hlo_op", hlo_op}, {"module", std::string("train_step")}}};
        kernel.flow_in = flow++;
        gpu_now[t] = start + dur + 100;
        trace.events.push_back(launch);
        trace.events.push_back(kernel);
      }
      now[t] += dur + 100;
    }
    trace.events[execute].duration_ns = now[t] + 100 - step_start;
    now[t] += 1000;
  }
  return trace;
}

struct FrameStats {
  double mean = 0, median = 0, p95 = 0, max = 0;
};

FrameStats Summarise(std::vector<double> ms) {
  FrameStats s;
  std::sort(ms.begin(), ms.end());
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.median = ms[ms.size() / 2];
  s.p95 = ms[std::min(ms.size() - 1, ms.size() * 95 / 100)];
  s.max = ms.back();
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t events = argc > 1 ? std::atoll(argv[1]) : 1'000'000;
  std::string path = argc > 2 ? argv[2] : "/tmp/viewer_trace_bench_" + std::to_string(::getpid()) + ".json";
  bool keep = argc > 2;
  std::string png = argc > 3 ? argv[3] : "";

  // The trace is made and written in a child, so the parent's high-water mark is the load's.
  auto made = Clock::now();
  pid_t child = events > 0 ? ::fork() : -1;
  if (child == 0) {
    profiler::Trace trace = MakeTrace(events);
    auto written = profiler::WriteChromeTrace(trace, path);
    if (!written.ok()) {
      std::fprintf(stderr, "%s\n", written.message().c_str());
      _exit(1);
    }
    std::printf("trace: %zu events, %zu threads\n", trace.events.size(), trace.threads.size());
    std::fflush(stdout);
    _exit(0);
  }
  if (events > 0 && child < 0) return 1;
  if (child > 0) {
    int status = 0;
    ::waitpid(child, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
  }
  std::ifstream file(path, std::ios::binary | std::ios::ate);
  std::printf("written in %.2f s: %s, %.1f MiB\n", Seconds(made), path.c_str(),
              static_cast<double>(file.tellg()) / (1 << 20));

  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  double rss_before = StatusMiB("VmRSS");

  // The floor: the profiler's reader alone, handing on what the model asks for and keeping nothing.
  {
    struct Count : profiler::ChromeTraceVisitor {
      bool WantsCounters() const override { return true; }
      void OnEvent(profiler::TraceEvent&) override { ++events; }
      int64_t events = 0;
    } count;
    auto start = Clock::now();
    auto header = profiler::StreamChromeTrace(path, count);
    if (!header.ok()) {
      std::fprintf(stderr, "%s\n", header.status().message().c_str());
      return 1;
    }
    std::printf("reader alone: %.3f s (%lld events)\n", Seconds(start), static_cast<long long>(count.events));
  }

  std::shared_ptr<const xlens::viewer::TraceModel> model;
  std::vector<double> loads;
  double rss_after = 0, hwm_after = 0;
  for (int run = 0; run < 3; ++run) {
    model.reset();
    auto start = Clock::now();
    auto loaded = xlens::viewer::TraceModel::Load(path);
    loads.push_back(Seconds(start));
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().message().c_str());
      return 1;
    }
    model = std::move(*loaded);
    if (run == 0) {
      rss_after = StatusMiB("VmRSS");
      hwm_after = StatusMiB("VmHWM");
    }
  }
  std::printf("load: %.3f s, %.3f s, %.3f s (%lld spans, %zu tracks)\n", loads[0], loads[1], loads[2],
              static_cast<long long>(model->span_count()), model->tracks().size());
  std::printf("memory: VmRSS %.0f MiB before, %.0f MiB after the first load, VmHWM %.0f MiB\n", rss_before, rss_after,
              hwm_after);

  xlens::viewer::TimelineView view;
  view.resize(1920, 1080);
  view.SetModel(model);
  view.show();
  QApplication::processEvents();
  QImage image(view.viewport()->size(), QImage::Format_ARGB32_Premultiplied);
  auto frame = [&](std::vector<double>& times, int64_t& boxes, int64_t& spans) {
    auto start = Clock::now();
    view.viewport()->render(&image);
    times.push_back(Seconds(start) * 1e3);
    boxes = std::max(boxes, view.lastPaintBoxes());
    spans = std::max(spans, view.lastPaintSpans());
  };
  {
    std::vector<double> warm;
    int64_t boxes = 0, spans = 0;
    frame(warm, boxes, spans);  // fonts and caches
  }
  struct Phase {
    const char* name;
    std::vector<double> ms;
    int64_t boxes = 0, spans = 0;
  };
  std::vector<Phase> phases;
  for (const char* name : {"whole trace", "zoom in (W)", "pan (D)", "pan back (A)", "zoom out (S)"}) {
    phases.push_back(Phase{name, {}});
  }
  double middle = (view.XOf(view.visibleStart()) + view.XOf(view.visibleEnd())) / 2;
  for (int i = 0; i < 30; ++i) frame(phases[0].ms, phases[0].boxes, phases[0].spans);
  if (!png.empty()) image.save(QString::fromStdString(png + "_whole.png"));
  for (int i = 0; i < 60; ++i) {
    view.ZoomAt(0.85, middle);
    frame(phases[1].ms, phases[1].boxes, phases[1].spans);
  }
  if (!png.empty()) image.save(QString::fromStdString(png + "_zoomed.png"));
  for (int i = 0; i < 60; ++i) {
    view.Pan(0.05);
    frame(phases[2].ms, phases[2].boxes, phases[2].spans);
  }
  for (int i = 0; i < 60; ++i) {
    view.Pan(-0.05);
    frame(phases[3].ms, phases[3].boxes, phases[3].spans);
  }
  for (int i = 0; i < 60; ++i) {
    view.ZoomAt(1 / 0.85, middle);
    frame(phases[4].ms, phases[4].boxes, phases[4].spans);
  }
  std::vector<double> all;
  for (const Phase& phase : phases) {
    FrameStats s = Summarise(phase.ms);
    all.insert(all.end(), phase.ms.begin(), phase.ms.end());
    std::printf("frames %-13s n=%zu mean %.2f ms, median %.2f, p95 %.2f, max %.2f (up to %lld boxes for %lld spans)\n",
                phase.name, phase.ms.size(), s.mean, s.median, s.p95, s.max, static_cast<long long>(phase.boxes),
                static_cast<long long>(phase.spans));
  }
  FrameStats s = Summarise(all);
  std::printf("frames all           n=%zu mean %.2f ms, median %.2f, p95 %.2f, max %.2f\n", all.size(), s.mean, s.median,
              s.p95, s.max);
  if (!keep && events > 0) std::remove(path.c_str());
  return 0;
}
