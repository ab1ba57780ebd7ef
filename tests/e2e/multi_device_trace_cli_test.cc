// `xlens run --num_partitions=4 --trace` as a user runs it: every device on the timeline, a
// process each with its kernels, each collective a span per device with its bytes and group,
// flows joining the devices that meet, and the waits saying who waited for whom: device 0 alone
// computes a chain of products before the first all-reduce (a conditional on partition-id), so
// the others wait for it there. The trace summary and --xla_hlo_profile say the same per device.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "profiler/trace_schema.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using json = nlohmann::json;

// ar.1 meets all four devices after device 0's products; ar.2 meets pairs {0,1} and {2,3}.
const std::string kSkewedStep = std::string(XLENS_SOURCE_DIR) + "/samples/skewed_allreduce_step.hlo";

constexpr int64_t kDevicePidBase = 1000;
constexpr int64_t kCollectiveFlowIdBase = int64_t{1} << 40;

class MultiDeviceTraceCliTest : public CliTest {
 protected:
  // Runs the step on 4 devices (3 runs: the untimed first and 2 timed) with a trace.
  json TraceOfSkewedStep(const std::string& extra = "") {
    const std::string& module = kSkewedStep;
    trace_ = (dir_ / "timeline.ctf.json").string();
    RunResult r = RunXlens("run " + module + " --num_partitions=4 --iterations 2 --trace " + trace_ + " " + extra);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    output_ = r.output;
    std::ifstream in(trace_);
    return json::parse(in);
  }
  std::string trace_, output_;
};

std::vector<json> Collectives(const json& doc) {
  std::vector<json> spans;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e.value("cat", "") == "collective") spans.push_back(e);
  }
  std::sort(spans.begin(), spans.end(), [](const json& a, const json& b) {
    return a["ts"].get<double>() < b["ts"].get<double>();
  });
  return spans;
}

TEST_F(MultiDeviceTraceCliTest, EveryDeviceIsAProcessWithItsKernelsAndCollectives) {
  json doc = TraceOfSkewedStep();
  EXPECT_THAT(output_, HasSubstr("trace events on 4 devices to " + trace_));
  EXPECT_THAT(testing::CheckTraceSchema(doc), IsEmpty());
  std::map<int64_t, std::string> processes;
  std::map<int64_t, int64_t> kernels, runs;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes[e["pid"]] = e["args"]["name"];
    if (e["ph"] != "X") continue;
    const std::string cat = e.value("cat", "");
    if (cat == "cpu_kernel" || cat == "library_call") ++kernels[e["pid"]];
    if (cat == "execute") ++runs[e["pid"]];
  }
  for (int64_t d = 0; d < 4; ++d) {
    const int64_t pid = kDevicePidBase + d;
    EXPECT_EQ(processes[pid], "CPU device " + std::to_string(d) + " (replica 0, partition " + std::to_string(d) + ")");
    EXPECT_EQ(runs[pid], 3) << "device " << d;
    EXPECT_GT(kernels[pid], 0) << "device " << d;
  }
  // Device 0 ran the products: more kernels than a device that took the other branch.
  EXPECT_GT(kernels[kDevicePidBase], kernels[kDevicePidBase + 1]);
  // The compilations stay on the host; no device's run is there.
  EXPECT_EQ(runs[0], 0);

  // One span per collective per device per run, with what it brought and whom it met.
  std::map<std::pair<int64_t, std::string>, int64_t> count;
  for (const json& span : Collectives(doc)) {
    const int64_t device = span["pid"].get<int64_t>() - kDevicePidBase;
    ++count[{device, span["name"]}];
    const json& args = span["args"];
    EXPECT_EQ(args["device"], device);
    EXPECT_EQ(args["bytes"], 8 * 8 * 4);
    EXPECT_EQ(args["hlo_op"], span["name"]);
    std::vector<int64_t> group = args["group"];
    if (span["name"] == "ar.1") {
      EXPECT_EQ(group, (std::vector<int64_t>{0, 1, 2, 3}));
    } else {
      EXPECT_EQ(group, device < 2 ? (std::vector<int64_t>{0, 1}) : (std::vector<int64_t>{2, 3}));
    }
    EXPECT_EQ(args["rank"], std::find(group.begin(), group.end(), device) - group.begin());
    EXPECT_TRUE(args["wait_ns"].is_number_integer());
    EXPECT_TRUE(args["last_arrival"].is_number_integer());
    EXPECT_TRUE(args["waited_for"].is_string());
  }
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_EQ((count[{d, "ar.1"}]), 3) << "device " << d;
    EXPECT_EQ((count[{d, "ar.2"}]), 3) << "device " << d;
  }
  EXPECT_EQ(doc["otherData"]["collective_meetings"], 3 * (1 + 2));
}

TEST_F(MultiDeviceTraceCliTest, FlowsJoinTheDevicesOfEachMeeting) {
  json doc = TraceOfSkewedStep();
  // Each flow id starts on one device's collective and ends on another's, at the same instruction.
  std::map<int64_t, std::pair<json, json>> flows;  // id -> (start, end)
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "s" && e["ph"] != "f") continue;
    const int64_t id = e["id"];
    if (id < kCollectiveFlowIdBase) continue;
    (e["ph"] == "s" ? flows[id].first : flows[id].second) = e;
  }
  // Per run: 3 flows join ar.1's four devices, one each ar.2's pairs.
  EXPECT_EQ(flows.size(), 3u * (3 + 1 + 1));
  // When the span's device reached the meeting (ns on the trace's clock): its start plus its
  // arrived_ns.
  auto ns = [](const json& ts) { return std::llround(ts.get<double>() * 1000); };
  auto arrival_ns = [&](const json& span) {
    return ns(span["ts"]) + span["args"]["arrived_ns"].get<int64_t>();
  };
  // The collective span of `point`'s device that holds it.
  const std::vector<json> collectives = Collectives(doc);
  auto span_of = [&](const json& point) -> const json* {
    for (const json& span : collectives) {
      if (span["pid"] == point["pid"] && ns(span["ts"]) <= ns(point["ts"]) &&
          ns(point["ts"]) <= ns(span["ts"]) + ns(span["dur"])) {
        return &span;
      }
    }
    return nullptr;
  };
  std::map<std::string, std::set<int64_t>> devices_joined;
  for (const auto& [id, ends] : flows) {
    ASSERT_FALSE(ends.first.is_null()) << id;
    ASSERT_FALSE(ends.second.is_null()) << id;
    EXPECT_NE(ends.first["pid"], ends.second["pid"]);
    const json* from = span_of(ends.first);
    const json* to = span_of(ends.second);
    ASSERT_NE(from, nullptr) << "flow " << id << " starts on no collective";
    ASSERT_NE(to, nullptr) << "flow " << id << " ends on no collective";
    const std::string name = (*from)["name"];
    EXPECT_EQ(name, (*to)["name"]);
    // Each end sits where its device reached the meeting, so the arrow runs forward in time, from
    // a device that arrived to the next one to arrive (a span can start a few nanoseconds after
    // another whose device arrived later: arrows between the spans' starts ran backwards then).
    EXPECT_EQ(ns(ends.first["ts"]), arrival_ns(*from)) << "flow " << id;
    EXPECT_EQ(ns(ends.second["ts"]), arrival_ns(*to)) << "flow " << id;
    EXPECT_LE(arrival_ns(*from), arrival_ns(*to)) << "flow " << id;
    devices_joined[name].insert(ends.first["pid"].get<int64_t>());
    devices_joined[name].insert(ends.second["pid"].get<int64_t>());
  }
  EXPECT_EQ(devices_joined["ar.1"].size(), 4u);
  EXPECT_EQ(devices_joined["ar.2"].size(), 4u);
}

TEST_F(MultiDeviceTraceCliTest, TheDevicesWaitForTheOneThatComputedMore) {
  json doc = TraceOfSkewedStep();
  // Each device's k-th span of ar.1 is its part of the k-th run's meeting.
  std::map<int64_t, std::vector<json>> ar1;  // device -> its ar.1 spans in time order
  for (const json& span : Collectives(doc)) {
    if (span["name"] == "ar.1") ar1[span["args"]["device"].get<int64_t>()].push_back(span);
  }
  ASSERT_EQ(ar1.size(), 4u);
  for (const auto& [device, spans] : ar1) ASSERT_EQ(spans.size(), 3u) << "device " << device;
  // Every span of a meeting names the same last arrival; it waited for no one, the others for
  // it. Which device comes last is the scheduler's to decide: device 0 computes about 10 ms more
  // than the others, so it comes last unless a loaded machine holds another device's thread
  // back longer than that; asked of one run in three, not of all.
  int64_t runs_device_0_last = 0;
  for (size_t run = 0; run < 3; ++run) {
    const int64_t last = ar1[0][run]["args"]["last_arrival"];
    runs_device_0_last += last == 0;
    for (int64_t device = 0; device < 4; ++device) {
      const json& args = ar1[device][run]["args"];
      EXPECT_EQ(args["last_arrival"], last) << "run " << run << ", device " << device;
      if (device == last) {
        EXPECT_EQ(args["waited_for"], "") << "run " << run;
        EXPECT_EQ(args["wait_ns"], 0) << "run " << run;
      } else {
        EXPECT_EQ(args["waited_for"], "device " + std::to_string(last)) << "run " << run;
        if (last == 0) EXPECT_GT(args["wait_ns"].get<int64_t>(), 0) << "run " << run;
      }
    }
  }
  EXPECT_GE(runs_device_0_last, 1) << "device 0, which computes more, never came last";

  // The run and `xlens trace summary` say it per device.
  EXPECT_THAT(output_, HasSubstr("Collectives by device"));
  RunResult summary = RunXlens("trace summary " + trace_);
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_THAT(summary.output, HasSubstr("5 processes"));
  EXPECT_THAT(summary.output, HasSubstr("Collectives by device"));
  for (int64_t d = 1; d < 4; ++d) {
    const std::string name = "CPU device " + std::to_string(d) + " (replica 0, partition " + std::to_string(d) + ")";
    bool found = false;
    std::istringstream lines(summary.output);
    for (std::string line; std::getline(lines, line);) {
      if (line.find(name) == std::string::npos) continue;
      found = true;
      if (runs_device_0_last == 3) {
        EXPECT_THAT(line, HasSubstr("device 0 (")) << "the device it waited for longest";
      }
    }
    EXPECT_TRUE(found) << summary.output;
  }
}

TEST_F(MultiDeviceTraceCliTest, HloProfilePerDevice) {
  const std::string& module = kSkewedStep;
  RunResult r = RunXlens("run " + module + " --num_partitions=4 --xla_hlo_profile");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (int64_t d = 0; d < 4; ++d) {
    EXPECT_THAT(r.output, HasSubstr("Execution profile for skewed_step on CPU device " + std::to_string(d)));
  }
  // Each device's table has its own collectives.
  size_t rows = 0;
  for (size_t at = r.output.find("ar.1"); at != std::string::npos; at = r.output.find("ar.1", at + 1)) ++rows;
  EXPECT_GE(rows, 4u);
}

// Under mpirun each rank records its own devices and rank 0 writes them as one trace: a host
// process per rank, the four devices, and flows joining devices of different ranks.
TEST_F(MultiDeviceTraceCliTest, UnderMpiOneTraceHoldsEveryRank) {
  if (RunShellCommand("command -v mpirun").exit_code != 0 ||
      !std::filesystem::exists(std::string(XLENS_BINARY_DIR) + "/compiler/cli/libxlens_mpi.so")) {
    GTEST_SKIP() << "no mpirun or no libxlens_mpi.so";
  }
  trace_ = (dir_ / "mpi.ctf.json").string();
  RunResult r = RunShellCommand("mpirun --allow-run-as-root --oversubscribe -np 2 " + std::string(XLENS_BINARY_DIR) +
                                "/compiler/cli/xlens run " + kSkewedStep +
                                " --num_partitions=4 --distributed=mpi --iterations 2 --trace " + trace_ + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("trace events of 2 ranks on 4 devices to " + trace_));
  EXPECT_THAT(r.output, HasSubstr("Collectives by device"));
  std::ifstream in(trace_);
  json doc = json::parse(in);
  EXPECT_THAT(testing::CheckTraceSchema(doc), IsEmpty());
  std::set<std::string> processes;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  }
  EXPECT_EQ(processes, (std::set<std::string>{"Host (CPU), rank 0", "Host (CPU), rank 1",
                                              "CPU device 0 (replica 0, partition 0)",
                                              "CPU device 1 (replica 0, partition 1)",
                                              "CPU device 2 (replica 0, partition 2)",
                                              "CPU device 3 (replica 0, partition 3)"}));
  EXPECT_EQ(doc["otherData"]["ranks"], 2);
  EXPECT_EQ(doc["otherData"]["collective_meetings"], 3 * (1 + 2));
  // ar.1 meets devices of both ranks: its flows cross from {0,1} to {2,3} or back.
  std::map<int64_t, int64_t> from, to;
  for (const auto& e : doc["traceEvents"]) {
    if ((e["ph"] == "s" || e["ph"] == "f") && e["id"].get<int64_t>() >= kCollectiveFlowIdBase) {
      (e["ph"] == "s" ? from : to)[e["id"]] = e["pid"].get<int64_t>() - kDevicePidBase;
    }
  }
  EXPECT_EQ(from.size(), 15u);
  int crossing = 0;
  for (const auto& [id, device] : from) crossing += (device < 2) != (to[id] < 2);
  EXPECT_GE(crossing, 3);
  // Who came last depends on when each rank started its run (their compilations race): each
  // meeting agrees on it, whoever it was.
  std::map<std::pair<std::string, int64_t>, std::set<int64_t>> last;  // (name, k-th on device 0) -> last
  std::map<std::pair<std::string, int64_t>, int64_t> seen;
  for (const json& span : Collectives(doc)) {
    ASSERT_TRUE(span["args"].contains("wait_ns")) << span.dump();
    const int64_t device = span["args"]["device"];
    const int64_t k = seen[{span["name"].get<std::string>() + std::to_string(device), 0}]++;
    if (span["name"] == "ar.1") last[{"ar.1", k}].insert(span["args"]["last_arrival"].get<int64_t>());
  }
  EXPECT_EQ(last.size(), 3u);
  for (const auto& [meeting, who] : last) EXPECT_EQ(who.size(), 1u) << "run " << meeting.second;
}

}  // namespace
}  // namespace xlens
