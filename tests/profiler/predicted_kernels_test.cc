#include "profiler/predicted_kernels.h"

#include <gtest/gtest.h>

#include "profiler/cupti_records.h"

namespace xlens::profiler {
namespace {

TraceEvent Launch(const std::string& name, int64_t start, int64_t id) {
  TraceEvent e;
  e.name = name;
  e.category = category::kThunk;
  e.start_ns = start;
  e.duration_ns = 500;
  e.args = {{"hlo_op", name}, {"bytes_accessed", int64_t{8000}}, {"External id", id}};
  return e;
}

TEST(PredictedKernelsTest, KernelsQueueOnOneStreamAndLinkToTheirLaunches) {
  Trace trace;
  trace.events = {Launch("fusion", 1000, 7), Launch("fusion.1", 1200, 8), Launch("fusion.2", 90000, 9)};
  std::vector<PredictedKernel> kernels = {
      {"fusion", 7, 1000, 4000, {{"bound", std::string("memory")}}},
      {"fusion_1", 8, 1200, 3000, {}},  // queued behind the first
      {"fusion_2", 9, 90000, 2000, {}},  // launched after the stream went idle
      {"orphan", 10, 95000, 2000, {}},  // no host span carries its id: no flow
  };
  AppendPredictedKernels(trace, "NVIDIA H100 SXM5 80GB", kernels);
  LinkExternalIds(trace);

  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_EQ(trace.processes[0].name, "GPU (predicted: NVIDIA H100 SXM5 80GB)");
  ASSERT_EQ(trace.threads.size(), 1u);
  EXPECT_EQ(trace.threads[0].name, "stream 0 (predicted)");
  std::vector<const TraceEvent*> gpu;
  std::vector<const TraceEvent*> host;
  for (const TraceEvent& e : trace.events) (e.pid == kPredictedGpuPid ? gpu : host).push_back(&e);
  ASSERT_EQ(gpu.size(), 4u);
  EXPECT_EQ(gpu[0]->start_ns, 1000);
  EXPECT_EQ(gpu[1]->start_ns, 5000);
  EXPECT_EQ(gpu[2]->start_ns, 90000);
  for (const TraceEvent* e : gpu) {
    EXPECT_EQ(e->category, category::kGpuKernel);
    const TraceArg* predicted = FindArg(*e, "predicted");
    ASSERT_NE(predicted, nullptr);
    EXPECT_EQ(std::get<int64_t>(predicted->value), 1);
  }
  EXPECT_EQ(std::get<std::string>(FindArg(*gpu[0], "bound")->value), "memory");
  // The host's knowledge followed the id, and the predicted GB/s with it: 8000 B in 4 us.
  EXPECT_EQ(std::get<std::string>(FindArg(*gpu[1], "hlo_op")->value), "fusion.1");
  EXPECT_DOUBLE_EQ(std::get<double>(FindArg(*gpu[0], "achieved GB/s")->value), 2.0);
  // Flows: each launch starts the one its kernel ends.
  for (int i = 0; i < 3; ++i) {
    EXPECT_NE(host[i]->flow_out, 0);
    EXPECT_EQ(host[i]->flow_out, gpu[i]->flow_in);
  }
  EXPECT_EQ(gpu[3]->flow_in, 0);
  // Sorted by start time.
  for (size_t i = 1; i < trace.events.size(); ++i) {
    EXPECT_LE(trace.events[i - 1].start_ns, trace.events[i].start_ns);
  }
}

TEST(PredictedKernelsTest, NothingToAddLeavesTheTraceAlone) {
  Trace trace;
  trace.events = {Launch("fusion", 1000, 7)};
  AppendPredictedKernels(trace, "x", {});
  EXPECT_TRUE(trace.processes.empty());
  EXPECT_EQ(trace.events[0].flow_out, 0);
}

}  // namespace
}  // namespace xlens::profiler
