// The conversion of CUPTI's records to a trace (flows, tracks, clocks, counters, external ids),
// on synthetic records: no GPU needed.
#include "profiler/cupti_records.h"

#include <algorithm>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

// CUPTI's clock is far from the host's (it reads the wall clock); the host's starts at 5 us.
constexpr int64_t kCupti0 = 1'700'000'000'000'000'000;
constexpr int64_t kHost0 = 5'000;
// A session of 10 ms over which the clocks agree exactly (offset kHost0 - kCupti0).
constexpr CuptiClockPair kStart{kCupti0, kHost0};
constexpr CuptiClockPair kStop{kCupti0 + 10'000'000, kHost0 + 10'000'000};

uint64_t At(int64_t offset_ns) { return static_cast<uint64_t>(kCupti0 + offset_ns); }

const TraceEvent* FindEvent(const Trace& trace, const std::string& name) {
  for (const TraceEvent& event : trace.events) {
    if (event.name == name) return &event;
  }
  return nullptr;
}

int64_t IntArg(const TraceEvent& event, const std::string& key) {
  const TraceArg* arg = FindArg(event, key);
  if (arg == nullptr || !std::holds_alternative<int64_t>(arg->value)) {
    ADD_FAILURE() << event.name << " has no integer arg " << key;
    return -1;
  }
  return std::get<int64_t>(arg->value);
}

double DoubleArg(const TraceEvent& event, const std::string& key) {
  const TraceArg* arg = FindArg(event, key);
  if (arg == nullptr || !std::holds_alternative<double>(arg->value)) {
    ADD_FAILURE() << event.name << " has no number arg " << key;
    return -1;
  }
  return std::get<double>(arg->value);
}

int64_t IntMetadata(const Trace& trace, const std::string& key) {
  const TraceArg* arg = trace.FindMetadata(key);
  if (arg == nullptr || !std::holds_alternative<int64_t>(arg->value)) {
    ADD_FAILURE() << "no integer metadata " << key;
    return -1;
  }
  return std::get<int64_t>(arg->value);
}

const TraceThread* FindThread(const Trace& trace, int32_t pid, int64_t tid) {
  for (const TraceThread& thread : trace.threads) {
    if (thread.pid == pid && thread.tid == tid) return &thread;
  }
  return nullptr;
}

KernelRecord Kernel(std::string name, int64_t start, int64_t end, uint32_t correlation,
                    uint32_t device = 0, uint32_t stream = 7) {
  KernelRecord k;
  k.name = std::move(name);
  k.start = At(start);
  k.end = At(end);
  k.device_id = device;
  k.context_id = 1 + device;
  k.stream_id = stream;
  k.correlation_id = correlation;
  k.grid[0] = 128;
  k.grid[1] = 2;
  k.grid[2] = 1;
  k.block[0] = 256;
  k.block[1] = 1;
  k.block[2] = 1;
  k.registers_per_thread = 32;
  k.static_shared_memory = 1024;
  k.dynamic_shared_memory = 2048;
  return k;
}

ApiRecord Api(std::string name, bool driver, int64_t start, int64_t end, uint32_t correlation,
              uint32_t thread = 4242) {
  ApiRecord a;
  a.name = std::move(name);
  a.driver = driver;
  a.callback_id = driver ? 307 : 211;
  a.start = At(start);
  a.end = At(end);
  a.thread_id = thread;
  a.correlation_id = correlation;
  return a;
}

TEST(CuptiClockTest, MapsLinearlyBetweenTheTwoReadings) {
  // Over 10 ms the host clock gains 1 us on CUPTI's (100 ppm): the offset drifts by 1000 ns.
  CuptiClock clock({kCupti0, kHost0}, {kCupti0 + 10'000'000, kHost0 + 10'001'000});
  EXPECT_EQ(clock.drift_ns(), 1'000);
  EXPECT_EQ(clock.ToHostNs(At(0)), kHost0);
  EXPECT_EQ(clock.ToHostNs(At(5'000'000)), kHost0 + 5'000'500);
  EXPECT_EQ(clock.ToHostNs(At(10'000'000)), kHost0 + 10'001'000);
  // Before Start (a record CUPTI timed early) the same line goes on.
  EXPECT_EQ(clock.ToHostNs(At(-1'000'000)), kHost0 - 1'000'100);
}

TEST(CuptiClockTest, UsesTheOffsetAloneWhenTheReadingsCannotGiveARate) {
  // Readings 1 us apart: the rate would be noise.
  CuptiClock close({kCupti0, kHost0}, {kCupti0 + 1'000, kHost0 + 1'050});
  EXPECT_EQ(close.drift_ns(), 50);
  EXPECT_EQ(close.ToHostNs(At(2'000'000)), kHost0 + 2'000'000);
  // 1% apart: a clock was set during the session, the rate would skew everything.
  CuptiClock stepped({kCupti0, kHost0}, {kCupti0 + 10'000'000, kHost0 + 10'100'000});
  EXPECT_EQ(stepped.drift_ns(), 100'000);
  EXPECT_EQ(stepped.ToHostNs(At(3'000'000)), kHost0 + 3'000'000);
}

TEST(ConvertCuptiRecordsTest, KernelCarriesPyTorchArgsAndTheFlowFromItsLaunch) {
  CuptiRecords records;
  records.cupti_version = 130001;
  records.kernels.push_back(Kernel("fusion_3", 2'000, 7'000, /*correlation=*/11));
  // The runtime call and the driver call inside it share the correlation id.
  records.api_calls.push_back(Api("cudaLaunchKernel", false, 1'000, 1'800, 11));
  records.api_calls.push_back(Api("cuLaunchKernel", true, 1'100, 1'700, 11));
  records.external_correlations.push_back({11, 99});
  records.device_names[0] = "NVIDIA H100 80GB HBM3";

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  const TraceEvent* kernel = FindEvent(trace, "fusion_3");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->category, category::kGpuKernel);
  EXPECT_EQ(kernel->pid, kGpuPidBase + 0);
  EXPECT_EQ(kernel->tid, 7);
  EXPECT_EQ(kernel->start_ns, kHost0 + 2'000);
  EXPECT_EQ(kernel->duration_ns, 5'000);
  EXPECT_EQ(IntArg(*kernel, "device"), 0);
  EXPECT_EQ(IntArg(*kernel, "stream"), 7);
  EXPECT_EQ(IntArg(*kernel, "correlation"), 11);
  EXPECT_EQ(IntArg(*kernel, "External id"), 99);
  EXPECT_EQ(IntArg(*kernel, "registers per thread"), 32);
  EXPECT_EQ(IntArg(*kernel, "shared memory"), 3072);
  const TraceArg* grid = FindArg(*kernel, "grid");
  ASSERT_NE(grid, nullptr);
  EXPECT_EQ(std::get<std::vector<int64_t>>(grid->value), (std::vector<int64_t>{128, 2, 1}));
  const TraceArg* block = FindArg(*kernel, "block");
  ASSERT_NE(block, nullptr);
  EXPECT_EQ(std::get<std::vector<int64_t>>(block->value), (std::vector<int64_t>{256, 1, 1}));
  EXPECT_EQ(kernel->flow_in, 11);
  EXPECT_EQ(kernel->flow_out, 0);

  // The flow starts at the runtime call only: a flow has one start.
  const TraceEvent* runtime = FindEvent(trace, "cudaLaunchKernel");
  const TraceEvent* driver = FindEvent(trace, "cuLaunchKernel");
  ASSERT_NE(runtime, nullptr);
  ASSERT_NE(driver, nullptr);
  EXPECT_EQ(runtime->category, category::kCudaRuntime);
  EXPECT_EQ(driver->category, category::kCudaDriver);
  EXPECT_EQ(runtime->flow_out, 11);
  EXPECT_EQ(driver->flow_out, 0);
  EXPECT_EQ(runtime->pid, kHostPid);
  EXPECT_EQ(runtime->tid, kCudaApiTidBase);
  EXPECT_EQ(driver->tid, kCudaApiTidBase);
  EXPECT_EQ(runtime->start_ns, kHost0 + 1'000);
  EXPECT_EQ(runtime->duration_ns, 800);
  EXPECT_EQ(IntArg(*runtime, "correlation"), 11);
  EXPECT_EQ(IntArg(*runtime, "External id"), 99);

  ASSERT_EQ(trace.processes.size(), 1u);
  EXPECT_EQ(trace.processes[0].pid, kGpuPidBase);
  EXPECT_EQ(trace.processes[0].name, "GPU 0 (NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(trace.processes[0].sort_index, 1);
  const TraceThread* stream = FindThread(trace, kGpuPidBase, 7);
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->name, "stream 7");
  const TraceThread* api = FindThread(trace, kHostPid, kCudaApiTidBase);
  ASSERT_NE(api, nullptr);
  EXPECT_EQ(api->name, "CUDA API (thread 0)");

  EXPECT_EQ(IntMetadata(trace, "kernels_before_launch"), 0);
  EXPECT_EQ(IntMetadata(trace, "dropped_records"), 0);
  EXPECT_EQ(IntMetadata(trace, "clock_drift_ns"), 0);
  EXPECT_EQ(IntMetadata(trace, "cupti_version"), 130001);
  EXPECT_EQ(trace.FindMetadata("untimed_records"), nullptr);

  // Sorted by start time.
  EXPECT_TRUE(std::is_sorted(trace.events.begin(), trace.events.end(),
                             [](const TraceEvent& a, const TraceEvent& b) {
                               return a.start_ns < b.start_ns;
                             }));
}

TEST(ConvertCuptiRecordsTest, FlowsOnlyBetweenLaunchesAndTheWorkTheyLaunched) {
  CuptiRecords records;
  records.kernels.push_back(Kernel("k_with_launch", 2'000, 3'000, 1));
  records.kernels.push_back(Kernel("k_without_launch", 4'000, 5'000, 2));
  records.api_calls.push_back(Api("cuLaunchKernel", true, 1'000, 1'500, 1));
  // Same correlation as nothing on the GPU, and a non-launch call sharing a kernel's id.
  records.api_calls.push_back(Api("cuLaunchKernel", true, 6'000, 6'500, 3));
  records.api_calls.push_back(Api("cuCtxSynchronize", true, 3'500, 5'500, 2));

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  EXPECT_EQ(FindEvent(trace, "k_with_launch")->flow_in, 1);
  EXPECT_EQ(FindEvent(trace, "k_without_launch")->flow_in, 0);
  int64_t flow_starts = 0;
  for (const TraceEvent& event : trace.events) {
    if (event.flow_out != 0) {
      ++flow_starts;
      EXPECT_EQ(event.flow_out, 1) << event.name;
      EXPECT_EQ(event.start_ns, kHost0 + 1'000);
    }
  }
  EXPECT_EQ(flow_starts, 1);
}

TEST(ConvertCuptiRecordsTest, CountsKernelsThatStartBeforeTheirLaunchAndKeepsThem) {
  CuptiRecords records;
  records.kernels.push_back(Kernel("early", 900, 2'000, 1));    // before its launch at 1000
  records.kernels.push_back(Kernel("on_time", 3'100, 4'000, 2));
  records.api_calls.push_back(Api("cudaLaunchKernel", false, 1'000, 1'200, 1));
  records.api_calls.push_back(Api("cudaLaunchKernel", false, 3'000, 3'200, 2));

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  EXPECT_EQ(IntMetadata(trace, "kernels_before_launch"), 1);
  ASSERT_NE(FindEvent(trace, "early"), nullptr);
  EXPECT_EQ(FindEvent(trace, "early")->flow_in, 1);
  EXPECT_EQ(trace.events.size(), 4u);
}

TEST(ConvertCuptiRecordsTest, AppliesTheClockMappingToEveryRecord) {
  CuptiRecords records;
  records.kernels.push_back(Kernel("k", 5'000'000, 5'001'000, 1));
  records.api_calls.push_back(Api("cudaLaunchKernel", false, 4'000'000, 4'000'100, 1));
  // The host clock gains 1 us over the 10 ms session.
  Trace trace = ConvertCuptiRecords(records, {kCupti0, kHost0},
                                    {kCupti0 + 10'000'000, kHost0 + 10'001'000});
  EXPECT_EQ(FindEvent(trace, "k")->start_ns, kHost0 + 5'000'500);
  EXPECT_EQ(FindEvent(trace, "k")->duration_ns, 1'000);
  EXPECT_EQ(FindEvent(trace, "cudaLaunchKernel")->start_ns, kHost0 + 4'000'400);
  EXPECT_EQ(IntMetadata(trace, "clock_drift_ns"), 1'000);
}

TEST(ConvertCuptiRecordsTest, CopiesAndMemsetsCarryBytesAndBandwidth) {
  CuptiRecords records;
  MemcpyRecord copy;
  copy.kind = MemcpyKind::kHtoD;
  copy.bytes = 4'000'000;
  copy.start = At(1'000);
  copy.end = At(2'001'000);  // 2 ms: 2 GB/s
  copy.stream_id = 3;
  copy.correlation_id = 5;
  records.memcpys.push_back(copy);
  copy.kind = MemcpyKind::kDtoH;
  copy.correlation_id = 6;
  copy.start = At(3'000'000);
  copy.end = At(3'001'000);
  records.memcpys.push_back(copy);
  MemsetRecord memset;
  memset.bytes = 1'000;
  memset.start = At(4'000'000);
  memset.end = At(4'000'500);
  memset.stream_id = 3;
  memset.correlation_id = 8;
  records.memsets.push_back(memset);
  records.api_calls.push_back(Api("cudaMemcpyAsync", false, 500, 900, 5));
  records.api_calls.push_back(Api("cudaMemsetAsync", false, 3'999'000, 3'999'500, 8));

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  const TraceEvent* htod = FindEvent(trace, "Memcpy HtoD");
  ASSERT_NE(htod, nullptr);
  EXPECT_EQ(htod->category, category::kGpuMemcpy);
  EXPECT_EQ(htod->tid, 3);
  EXPECT_EQ(IntArg(*htod, "bytes"), 4'000'000);
  EXPECT_DOUBLE_EQ(DoubleArg(*htod, "memory bandwidth (GB/s)"), 2.0);
  EXPECT_EQ(IntArg(*htod, "correlation"), 5);
  EXPECT_EQ(htod->flow_in, 5);
  EXPECT_EQ(FindEvent(trace, "cudaMemcpyAsync")->flow_out, 5);
  ASSERT_NE(FindEvent(trace, "Memcpy DtoH"), nullptr);
  EXPECT_EQ(FindEvent(trace, "Memcpy DtoH")->flow_in, 0);  // no launching call recorded

  const TraceEvent* set = FindEvent(trace, "Memset");
  ASSERT_NE(set, nullptr);
  EXPECT_EQ(set->category, category::kGpuMemset);
  EXPECT_EQ(IntArg(*set, "bytes"), 1'000);
  EXPECT_DOUBLE_EQ(DoubleArg(*set, "memory bandwidth (GB/s)"), 2.0);
  EXPECT_EQ(set->flow_in, 8);
  EXPECT_EQ(FindEvent(trace, "cudaMemsetAsync")->flow_out, 8);
}

TEST(ConvertCuptiRecordsTest, OneProcessPerDeviceAndOneTrackPerStream) {
  CuptiRecords records;
  records.kernels.push_back(Kernel("a", 1'000, 2'000, 1, /*device=*/0, /*stream=*/7));
  records.kernels.push_back(Kernel("b", 1'000, 2'000, 2, /*device=*/0, /*stream=*/13));
  records.kernels.push_back(Kernel("c", 1'000, 2'000, 3, /*device=*/2, /*stream=*/7));

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  ASSERT_EQ(trace.processes.size(), 2u);
  EXPECT_EQ(trace.processes[0].pid, kGpuPidBase + 0);
  EXPECT_EQ(trace.processes[0].name, "GPU 0");
  EXPECT_EQ(trace.processes[1].pid, kGpuPidBase + 2);
  EXPECT_EQ(trace.processes[1].name, "GPU 2");
  EXPECT_EQ(trace.processes[1].sort_index, 3);
  EXPECT_EQ(trace.threads.size(), 3u);
  EXPECT_NE(FindThread(trace, kGpuPidBase, 7), nullptr);
  EXPECT_NE(FindThread(trace, kGpuPidBase, 13), nullptr);
  EXPECT_NE(FindThread(trace, kGpuPidBase + 2, 7), nullptr);
  EXPECT_EQ(FindEvent(trace, "c")->pid, kGpuPidBase + 2);
  EXPECT_EQ(FindEvent(trace, "b")->tid, 13);
}

TEST(ConvertCuptiRecordsTest, ApiThreadsAreNumberedInTheOrderTheyFirstCalledCuda) {
  CuptiRecords records;
  records.api_calls.push_back(Api("cudaMalloc", false, 5'000, 6'000, 1, /*thread=*/900));
  records.api_calls.push_back(Api("cudaFree", false, 1'000, 2'000, 2, /*thread=*/17));
  records.api_calls.push_back(Api("cudaMalloc", false, 3'000, 4'000, 3, /*thread=*/900));

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  EXPECT_EQ(FindEvent(trace, "cudaFree")->tid, kCudaApiTidBase + 0);
  for (const TraceEvent& event : trace.events) {
    if (event.name == "cudaMalloc") {
      EXPECT_EQ(event.tid, kCudaApiTidBase + 1);
    }
  }
  ASSERT_NE(FindThread(trace, kHostPid, kCudaApiTidBase + 1), nullptr);
  EXPECT_EQ(FindThread(trace, kHostPid, kCudaApiTidBase + 1)->name, "CUDA API (thread 1)");
  EXPECT_TRUE(trace.processes.empty());  // the host process is the host tracer's to name
}

TEST(ConvertCuptiRecordsTest, SynchronizationsGoToTheirStreamAndOverheadToItsOwnTrack) {
  CuptiRecords records;
  records.kernels.push_back(Kernel("k", 1'000, 2'000, 1, /*device=*/1, /*stream=*/7));
  SyncRecord stream_sync;
  stream_sync.kind = SyncKind::kStreamSynchronize;
  stream_sync.start = At(1'500);
  stream_sync.end = At(2'100);
  stream_sync.context_id = 2;  // device 1's context
  stream_sync.stream_id = 7;
  stream_sync.correlation_id = 4;
  records.syncs.push_back(stream_sync);
  SyncRecord context_sync = stream_sync;
  context_sync.kind = SyncKind::kContextSynchronize;
  context_sync.stream_id = -1;
  records.syncs.push_back(context_sync);
  records.overheads.push_back({"CUPTI buffer flush", At(8'000), At(9'000)});

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  const TraceEvent* sync = FindEvent(trace, "Stream Sync");
  ASSERT_NE(sync, nullptr);
  EXPECT_EQ(sync->category, category::kCudaSync);
  EXPECT_EQ(sync->pid, kGpuPidBase + 1);
  EXPECT_EQ(sync->tid, 7);
  EXPECT_EQ(IntArg(*sync, "correlation"), 4);
  const TraceEvent* ctx = FindEvent(trace, "Context Sync");
  ASSERT_NE(ctx, nullptr);
  EXPECT_EQ(ctx->pid, kGpuPidBase + 1);
  EXPECT_EQ(ctx->tid, kGpuSyncTid);
  EXPECT_EQ(IntArg(*ctx, "stream"), -1);
  EXPECT_NE(FindThread(trace, kGpuPidBase + 1, kGpuSyncTid), nullptr);

  const TraceEvent* overhead = FindEvent(trace, "CUPTI buffer flush");
  ASSERT_NE(overhead, nullptr);
  EXPECT_EQ(overhead->category, category::kOverhead);
  EXPECT_EQ(overhead->pid, kHostPid);
  EXPECT_EQ(overhead->tid, kCuptiOverheadTid);
  EXPECT_EQ(overhead->duration_ns, 1'000);
  ASSERT_NE(FindThread(trace, kHostPid, kCuptiOverheadTid), nullptr);
  EXPECT_EQ(FindThread(trace, kHostPid, kCuptiOverheadTid)->name, "CUPTI overhead");
}

TEST(ConvertCuptiRecordsTest, DroppedAndUntimedRecordsAreCountedInTheMetadata) {
  CuptiRecords records;
  records.dropped_records = 1234;
  records.kernels.push_back(Kernel("timed", 1'000, 2'000, 1));
  KernelRecord untimed = Kernel("untimed", 0, 0, 2);
  untimed.start = 0;
  untimed.end = 0;
  records.kernels.push_back(untimed);

  Trace trace = ConvertCuptiRecords(records, kStart, kStop);

  EXPECT_EQ(IntMetadata(trace, "dropped_records"), 1234);
  EXPECT_EQ(IntMetadata(trace, "untimed_records"), 1);
  EXPECT_EQ(FindEvent(trace, "untimed"), nullptr);
  EXPECT_NE(FindEvent(trace, "timed"), nullptr);
}

TEST(ConvertCuptiRecordsTest, NoRecordsGiveAnEmptyGpuPartWithItsCounters) {
  Trace trace = ConvertCuptiRecords({}, kStart, kStop);
  EXPECT_TRUE(trace.events.empty());
  EXPECT_TRUE(trace.processes.empty());
  EXPECT_TRUE(trace.threads.empty());
  EXPECT_EQ(IntMetadata(trace, "dropped_records"), 0);
  EXPECT_EQ(IntMetadata(trace, "kernels_before_launch"), 0);
}

TEST(LinkExternalIdsTest, CopiesTheThunksArgsToItsGpuWorkAndComputesBandwidth) {
  Trace trace;
  TraceEvent thunk;
  thunk.name = "fusion.3";
  thunk.category = category::kThunk;
  thunk.pid = kHostPid;
  thunk.tid = 1;
  thunk.args = {{"External id", int64_t{42}},
                {"hlo_op", std::string("fusion.3")},
                {"fusion_kind", std::string("kLoop")},
                {"op_names", std::string("dense/MatMul;dense/BiasAdd")},
                {"source", std::string("train.py:15")},
                {"stack", std::string("train.py:40 (<module>)")},
                {"module", std::string("cluster_0")},
                {"bytes_accessed", int64_t{8'000'000}},
                {"flops", int64_t{1'000'000}},
                {"unrelated", int64_t{1}}};
  trace.events.push_back(thunk);
  TraceEvent launch;  // the CUDA call inside the thunk, carrying the same id
  launch.name = "cuLaunchKernel";
  launch.pid = kHostPid;
  launch.tid = kCudaApiTidBase;
  launch.args = {{"External id", int64_t{42}}, {"correlation", int64_t{5}}};
  trace.events.push_back(launch);
  TraceEvent kernel;
  kernel.name = "fusion_3";
  kernel.category = category::kGpuKernel;
  kernel.pid = kGpuPidBase;
  kernel.tid = 7;
  kernel.duration_ns = 4'000;  // 8 MB in 4 us: 2000 GB/s
  kernel.args = {{"External id", int64_t{42}}, {"module", std::string("kept")}};
  trace.events.push_back(kernel);
  TraceEvent other = kernel;  // another launch: untouched
  other.name = "other";
  other.args = {{"External id", int64_t{43}}};
  trace.events.push_back(other);

  LinkExternalIds(trace);

  const TraceEvent& linked = trace.events[2];
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "hlo_op")->value), "fusion.3");
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "fusion_kind")->value), "kLoop");
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "op_names")->value),
            "dense/MatMul;dense/BiasAdd");
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "source")->value), "train.py:15");
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "stack")->value), "train.py:40 (<module>)");
  EXPECT_EQ(std::get<std::string>(FindArg(linked, "module")->value), "kept");
  EXPECT_EQ(IntArg(linked, "bytes_accessed"), 8'000'000);
  EXPECT_EQ(IntArg(linked, "flops"), 1'000'000);
  EXPECT_EQ(FindArg(linked, "unrelated"), nullptr);
  EXPECT_DOUBLE_EQ(DoubleArg(linked, "achieved GB/s"), 2000.0);
  EXPECT_EQ(trace.events[3].args.size(), 1u);
  // Host events are sources, never targets.
  EXPECT_EQ(trace.events[1].args.size(), 2u);
}

}  // namespace
}  // namespace xlens::profiler
