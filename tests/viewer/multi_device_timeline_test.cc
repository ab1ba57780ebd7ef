// The timeline of a run on several devices in the viewer: each device is a process, shown as its
// own track beside the others (no device-specific code: the model's tracks are Perfetto's), the
// collectives keep their wait and the device they waited for, tie to their HLO instruction like
// kernels, and the flows of a meeting join spans on different devices' tracks.
#include <unistd.h>

#include <filesystem>
#include <set>
#include <string>

#include <QtTest/QtTest>

#include "profiler/chrome_trace_writer.h"
#include "profiler/collective_timeline.h"
#include "profiler/trace.h"
#include "viewer/trace_model.h"

namespace xlens::viewer {
namespace {

namespace fs = std::filesystem;

// Four devices each run once and meet in all-reduce "ar"; device 0 arrives last (it computed
// first), after the others arrived at 100 ns steps.
profiler::Trace FourDeviceTrace() {
  profiler::Trace trace;
  trace.processes.push_back({profiler::kHostPid, "Host (CPU)", 0});
  trace.threads.push_back({profiler::kHostPid, 1, "main", 0});
  trace.events.push_back({"compile step", profiler::category::kCompile, profiler::kHostPid, 1, 0, 1000});
  for (int64_t d = 0; d < 4; ++d) {
    const int32_t pid = profiler::kCpuDevicePidBase + static_cast<int32_t>(d);
    trace.processes.push_back({pid, "CPU device " + std::to_string(d) + " (replica 0, partition " +
                                        std::to_string(d) + ")", 1 + d});
    trace.threads.push_back({pid, 1, "device " + std::to_string(d), 0});
    trace.events.push_back({"execute step", profiler::category::kExecute, pid, 1, 2000, 10000});
    const int64_t arrival = d == 0 ? 5000 : 2000 + 100 * d;
    profiler::TraceEvent collective{"ar", profiler::category::kCollective, pid, 1, arrival, 6000 - arrival};
    collective.args = {{"hlo_op", std::string("ar")}, {"module", std::string("step")}, {"device", d},
                       {"group", std::string("0,1,2,3")}, {"bytes", int64_t{256}}, {"arrived_ns", int64_t{0}}};
    trace.events.push_back(collective);
  }
  profiler::LinkCollectives(trace);
  return trace;
}

class MultiDeviceTimelineTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    dir_ = fs::temp_directory_path() / ("xlens_multi_device_timeline_test_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
    path_ = (dir_ / "four_devices.ctf.json").string();
    QVERIFY(profiler::WriteChromeTrace(FourDeviceTrace(), path_).ok());
  }
  void cleanupTestCase() { fs::remove_all(dir_); }

  void devicesAreTracksSideBySide() {
    auto model = TraceModel::Load(path_);
    QVERIFY(model.ok());
    const std::vector<TraceTrack>& tracks = (*model)->tracks();
    QCOMPARE(tracks.size(), size_t{5});
    QCOMPARE(tracks[0].process_name, std::string("Host (CPU)"));
    for (int d = 0; d < 4; ++d) {
      QCOMPARE(tracks[1 + d].process_name,
               "CPU device " + std::to_string(d) + " (replica 0, partition " + std::to_string(d) + ")");
      QCOMPARE(tracks[1 + d].name, "device " + std::to_string(d));
    }
  }

  void collectivesSayWhomTheyWaitedForAndTieToTheirInstruction() {
    auto model = TraceModel::Load(path_);
    QVERIFY(model.ok());
    std::vector<SpanId> spans = (*model)->SpansOfHloOp("step", "ar");
    QCOMPARE(spans.size(), size_t{4});
    std::set<int> tracks;
    for (SpanId id : spans) {
      SpanInfo info = (*model)->Span(id);
      QCOMPARE(info.category, std::string_view("collective"));
      QVERIFY(info.has_kernel_args);
      tracks.insert(info.track);
      if (info.track == 1) {  // device 0 came last
        QCOMPARE(info.kernel.wait_ns, int64_t{0});
        QVERIFY(info.kernel.waited_for.empty());
      } else {
        QVERIFY(info.kernel.wait_ns > 0);
        QCOMPARE(info.kernel.waited_for, std::string_view("device 0"));
      }
    }
    QCOMPARE(tracks.size(), size_t{4});
  }

  void flowsJoinTheMeetingAcrossDevices() {
    auto model = TraceModel::Load(path_);
    QVERIFY(model.ok());
    std::set<std::pair<int, int>> joined;  // (from track, to track)
    for (SpanId id : (*model)->SpansOfHloOp("step", "ar")) {
      for (const TraceFlow& flow : (*model)->FlowsOf(id)) {
        joined.insert({(*model)->Span(flow.from).track, (*model)->Span(flow.to).track});
      }
    }
    // Arrival order 1, 2, 3, then 0: devices are tracks 1 + d.
    const std::set<std::pair<int, int>> expected = {{2, 3}, {3, 4}, {4, 1}};
    QVERIFY(joined == expected);
  }

 private:
  fs::path dir_;
  std::string path_;
};

}  // namespace
}  // namespace xlens::viewer

QTEST_MAIN(xlens::viewer::MultiDeviceTimelineTest)
#include "multi_device_timeline_test.moc"
