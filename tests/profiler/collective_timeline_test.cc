// LinkCollectives joins the collective spans of several devices into meetings: the k-th span of
// an instruction and group on each member, each told how long it waited and for whom, and a chain
// of flows in arrival order.
#include "profiler/collective_timeline.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "profiler/chrome_trace_reader.h"
#include "profiler/chrome_trace_writer.h"
#include "tests/scratch_directory.h"

namespace xlens::profiler {
namespace {

TraceEvent Collective(int64_t device, const std::string& name, const std::string& group, int64_t start_ns,
                      int64_t arrived_ns = 0) {
  TraceEvent event;
  event.name = name;
  event.category = category::kCollective;
  event.pid = kCpuDevicePidBase + static_cast<int32_t>(device);
  event.tid = 1;
  event.start_ns = start_ns;
  event.duration_ns = 1000;
  event.args = {{"device", device}, {"group", group}, {"bytes", int64_t{64}}, {"arrived_ns", arrived_ns}};
  return event;
}

int64_t Int(const TraceEvent& event, const char* key) {
  const TraceArg* arg = FindArg(event, key);
  return arg != nullptr && std::holds_alternative<int64_t>(arg->value) ? std::get<int64_t>(arg->value) : -1;
}

std::string Str(const TraceEvent& event, const char* key) {
  const TraceArg* arg = FindArg(event, key);
  return arg != nullptr && std::holds_alternative<std::string>(arg->value) ? std::get<std::string>(arg->value) : "?";
}

TEST(CollectiveTimelineTest, MembersWaitForTheLastToArriveAndFlowsChainThemInArrivalOrder) {
  Trace trace;
  // Device 2 arrives first, then 0, then 1 (after 500 ns reading its operands), then 3 last.
  trace.events = {Collective(0, "ar", "0,1,2,3", 200), Collective(1, "ar", "0,1,2,3", 0, 500),
                  Collective(2, "ar", "0,1,2,3", 100), Collective(3, "ar", "0,1,2,3", 900)};
  CollectiveLinks links = LinkCollectives(trace);
  EXPECT_EQ(links.meetings, 1);
  EXPECT_EQ(links.spans, 4);
  EXPECT_EQ(links.flows, 3);
  EXPECT_EQ(links.incomplete, 0);
  const int64_t waits[] = {700, 400, 800, 0};
  for (int64_t d = 0; d < 4; ++d) {
    const TraceEvent& event = trace.events[d];
    EXPECT_EQ(Int(event, "wait_ns"), waits[d]) << d;
    EXPECT_EQ(Int(event, "last_arrival"), 3) << d;
    EXPECT_EQ(Str(event, "waited_for"), d == 3 ? "" : "device 3") << d;
    const TraceArg* group = FindArg(event, "group");
    ASSERT_NE(group, nullptr);
    EXPECT_EQ(std::get<std::vector<int64_t>>(group->value), (std::vector<int64_t>{0, 1, 2, 3}));
  }
  // 2 -> 0 -> 1 -> 3.
  EXPECT_EQ(trace.events[2].flow_in, 0);
  EXPECT_EQ(trace.events[2].flow_out, trace.events[0].flow_in);
  EXPECT_EQ(trace.events[0].flow_out, trace.events[1].flow_in);
  EXPECT_EQ(trace.events[1].flow_out, trace.events[3].flow_in);
  EXPECT_EQ(trace.events[3].flow_out, 0);
  EXPECT_GE(trace.events[2].flow_out, kCollectiveFlowIdBase);
}

TEST(CollectiveTimelineTest, EachFlowRunsFromAnArrivalToTheNextInTheWrittenTrace) {
  Trace trace;
  // Device 1 starts its span first (at 0) but arrives at 500, after device 0 (span and arrival
  // at 200): an arrow drawn between the spans' starts would run backwards, from 200 to 0.
  trace.events = {Collective(0, "ar", "0,1,2,3", 200), Collective(1, "ar", "0,1,2,3", 0, 500),
                  Collective(2, "ar", "0,1,2,3", 100), Collective(3, "ar", "0,1,2,3", 900)};
  ASSERT_EQ(LinkCollectives(trace).flows, 3);
  EXPECT_EQ(trace.events[0].flow_out_at_ns, 0);
  EXPECT_EQ(trace.events[1].flow_in_at_ns, 500);
  EXPECT_EQ(trace.events[1].flow_out_at_ns, 500);
  EXPECT_EQ(trace.events[3].flow_in_at_ns, 0);
  // Written and read back, each flow's two points are where the devices arrived, in order.
  const std::string path = xlens::testing::ScratchDirectory("collective-timeline-test") + "/t.json";
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto read = ReadChromeTrace(path);
  ASSERT_TRUE(read.ok()) << read.status().message();
  std::map<int64_t, int64_t> out_at, in_at;
  for (const TraceEvent& event : read->events) {
    if (event.flow_out != 0) out_at[event.flow_out] = event.start_ns + event.flow_out_at_ns;
    if (event.flow_in != 0) in_at[event.flow_in] = event.start_ns + event.flow_in_at_ns;
  }
  ASSERT_EQ(out_at.size(), 3u);
  ASSERT_EQ(in_at.size(), 3u);
  std::vector<std::pair<int64_t, int64_t>> arrows;
  for (const auto& [id, from] : out_at) arrows.push_back({from - read->base_ns, in_at.at(id) - read->base_ns});
  // 2 (100) -> 0 (200) -> 1 (500) -> 3 (900).
  EXPECT_EQ(arrows, (std::vector<std::pair<int64_t, int64_t>>{{100, 200}, {200, 500}, {500, 900}}));
}

TEST(CollectiveTimelineTest, RepeatedRunsAndSeparateGroupsMeetApart) {
  Trace trace;
  // Two runs of a pairwise all-reduce on groups {0,1} and {2,3}: four meetings.
  for (int64_t run = 0; run < 2; ++run) {
    const int64_t t = run * 10000;
    trace.events.push_back(Collective(0, "ar", "0,1", t + 100));
    trace.events.push_back(Collective(1, "ar", "0,1", t + 300));
    trace.events.push_back(Collective(2, "ar", "2,3", t + 400));
    trace.events.push_back(Collective(3, "ar", "2,3", t + 50));
  }
  CollectiveLinks links = LinkCollectives(trace);
  EXPECT_EQ(links.meetings, 4);
  EXPECT_EQ(links.flows, 4);
  for (int64_t run = 0; run < 2; ++run) {
    const TraceEvent* e = &trace.events[run * 4];
    EXPECT_EQ(Int(e[0], "wait_ns"), 200);
    EXPECT_EQ(Int(e[1], "wait_ns"), 0);
    EXPECT_EQ(Int(e[3], "wait_ns"), 350);
    EXPECT_EQ(Str(e[3], "waited_for"), "device 2");
    EXPECT_EQ(e[0].flow_out, e[1].flow_in);
    EXPECT_EQ(e[3].flow_out, e[2].flow_in);
  }
}

TEST(CollectiveTimelineTest, AMeetingMissingAMemberGetsNoWaitAndNoFlows) {
  Trace trace;
  // A failed run: device 1 never reached the collective.
  trace.events = {Collective(0, "ar", "0,1", 0)};
  // A span of one device alone meets no one.
  trace.events.push_back(Collective(2, "ar", "2", 0));
  CollectiveLinks links = LinkCollectives(trace);
  EXPECT_EQ(links.meetings, 0);
  EXPECT_EQ(links.incomplete, 1);
  EXPECT_EQ(links.flows, 0);
  EXPECT_EQ(FindArg(trace.events[0], "wait_ns"), nullptr);
  EXPECT_EQ(trace.events[0].flow_out, 0);
}

}  // namespace
}  // namespace xlens::profiler
