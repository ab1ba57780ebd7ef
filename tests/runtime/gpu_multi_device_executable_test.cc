// The GPU backend's collectives between simulated GPUs, each with its own memory: every
// collective (and its -start/-done form) gives what the reference evaluator and the CPU runtime
// give over the same devices; a meeting that can never complete fails instead of hanging; the
// trace has a track per device with each collective's modelled time. On a real GPU (where a
// driver is present) one device runs the same module with its collectives as a group of one.
#include "compiler/runtime/gpu_multi_device_executable.h"

#include <random>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>

#include "compiler/hlo/literal_comparison.h"
#include "compiler/runtime/cuda_driver.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "compiler/runtime/multi_device_executable.h"
#include "compiler/runtime/multi_device_trace.h"
#include "compiler/runtime/nccl_library.h"
#include "profiler/host_tracer.h"
#include "tests/hlo/multi_device_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;
using xlens::testing::ParseWithReducers;
using xlens::testing::RandomDeviceArguments;

StatusOr<std::unique_ptr<GpuDevice>> OpenSim(int64_t) {
  ASSIGN_OR_RETURN(std::unique_ptr<GpuSimDevice> sim, OpenSimulatedGpuDevice());
  return std::unique_ptr<GpuDevice>(std::move(sim));
}

bool SimulatorAvailable() { return OpenSimulatedGpuDevice().ok(); }

// On the simulated GPUs, on the CPU devices and evaluated: the same values, device by device.
void ExpectSimulatedMatchesEvaluator(const std::string& entry, DeviceTopology topology, uint64_t seed = 1) {
  auto module = ParseWithReducers(entry);
  ASSERT_NE(module, nullptr);
  auto arguments = RandomDeviceArguments(*module, topology.num_devices(), seed);
  auto expected = EvaluateModuleOnDevices(*module, arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message() << "\n" << entry;
  auto target = GpuTargetByName("h100");
  ASSERT_TRUE(target.ok());
  auto executable = GpuMultiDeviceExecutable::Compile(*module, topology, GpuCompileOptions{}, OpenSim, &*target);
  ASSERT_TRUE(executable.ok()) << executable.status().message() << "\n" << entry;
  EXPECT_GT((*executable)->executable(0).num_collectives(), 0u);
  EXPECT_FALSE((*executable)->uses_nccl());
  // Twice: the rendezvous of one run is not the next's.
  for (int run = 0; run < 2; ++run) {
    auto actual = (*executable)->Execute(arguments, MultiDeviceOptions{});
    ASSERT_TRUE(actual.ok()) << actual.status().message() << "\n" << entry;
    for (int64_t d = 0; d < topology.num_devices(); ++d) {
      Status match = ExpectLiteralNear((*expected)[d], (*actual)[d], ErrorSpec{1e-5, 1e-5});
      EXPECT_TRUE(match.ok()) << "run " << run << " device " << d << ": " << match.message() << "\n" << entry;
    }
  }
  auto cpu = MultiDeviceExecutable::Compile(*module, topology, CompileOptions{});
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  auto on_cpu = (*cpu)->Execute(arguments, MultiDeviceOptions{});
  ASSERT_TRUE(on_cpu.ok()) << on_cpu.status().message();
  auto on_gpu = (*executable)->Execute(arguments, MultiDeviceOptions{});
  ASSERT_TRUE(on_gpu.ok()) << on_gpu.status().message();
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    Status match = ExpectLiteralNear((*on_cpu)[d], (*on_gpu)[d], ErrorSpec{1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << "CPU vs simulated GPU, device " << d << ": " << match.message();
  }
}

// Every collective, then a kernel on the last one's value.
const std::string kEveryCollective = std::string(xlens::testing::kEveryCollectiveUpToCpd) + R"(  e = f32[16,6] exponential(cpd)
  ROOT t = (u32[], u32[], f32[1,12], f32[16,6]) tuple(r, q, rs, e)
})";

TEST(GpuMultiDeviceExecutableTest, EveryCollectiveMatchesTheEvaluatorAndTheCpu) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  ExpectSimulatedMatchesEvaluator(kEveryCollective, {4, 1});
}

TEST(GpuMultiDeviceExecutableTest, ReplicasAndPartitionsAndALoop) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  ExpectSimulatedMatchesEvaluator(xlens::testing::kReplicasPartitionsAndALoop, {2, 2});
}

// Random programs of collectives (their -start/-done forms and tuple operands too) and
// elementwise kernels over f32[4,6] on 2 x 2 devices, the groups in every form: the simulated GPUs
// give the evaluator's values.
std::string RandomGpuProgram(std::mt19937_64& rng) {
  const std::vector<std::string> groups = {"{{0,1},{2,3}}", "{{0,2},{1,3}}", "[2,2]<=[4]", "[2,2]<=[2,2]T(1,0)",
                                           "{{3,1},{0,2}}", "{{0,1,2,3}}"};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::string body = "  v0 = f32[4,6] parameter(0)\n  w = f32[4,6] parameter(1)\n";
  int channel = 1;
  for (int step = 1; step <= 8; ++step) {
    const std::string in = fmt::format("v{}", step - 1), out = fmt::format("v{}", step);
    const std::string group = groups[pick(static_cast<int>(groups.size()))];
    const int members = group == "{{0,1,2,3}}" ? 4 : 2;
    // Flattened ids: every group form names devices.
    const std::string ids = fmt::format("channel_id={}, replica_groups={}, use_global_device_ids=true", channel++, group);
    switch (pick(7)) {
      case 0:
        body += fmt::format("  {} = f32[4,6] all-reduce({}), {}, to_apply={}\n", out, in, ids, pick(2) ? "add" : "max");
        break;
      case 1:
        body += fmt::format("  s{0} = f32[4,6] all-reduce-start({1}), {2}, to_apply=add\n"
                            "  {3} = f32[4,6] all-reduce-done(s{0})\n", step, in, ids, out);
        break;
      case 2: {
        const int d = pick(2);
        const std::string wide = d == 0 ? fmt::format("f32[{},6]", 4 * members) : fmt::format("f32[4,{}]", 6 * members);
        body += fmt::format("  g{} = {} all-gather({}), {}, dimensions={{{}}}\n", step, wide, in, ids, d);
        body += fmt::format("  {} = f32[4,6] reduce-scatter(g{}), channel_id={}, replica_groups={}, "
                            "use_global_device_ids=true, dimensions={{{}}}, to_apply=add\n", out, step, channel++, group, d);
        break;
      }
      case 3:
        body += fmt::format("  t{0} = (f32[4,6], f32[4,6]) all-reduce({1}, w), {2}, to_apply=add\n"
                            "  {3} = f32[4,6] get-tuple-element(t{0}), index={4}\n", step, in, ids, out, pick(2));
        break;
      case 4: {
        // With a channel_id the pairs name partitions: a swap, or one partition sending its own.
        const int a = pick(3);
        const std::string pairs = a == 0 ? "{0,1},{1,0}" : a == 1 ? "{0,0},{1,1}" : "{1,0}";
        body += fmt::format("  c{0} = (f32[4,6], f32[4,6], u32[], u32[]) collective-permute-start({1}), "
                            "channel_id={2}, source_target_pairs={{{3}}}\n"
                            "  {4} = f32[4,6] collective-permute-done(c{0})\n",
                            step, in, channel++, pairs, out);
        break;
      }
      case 5:
        body += fmt::format("  {} = f32[4,6] all-to-all({}), channel_id={}, replica_groups={{{{0,1}}}}, dimensions={{0}}\n",
                            out, in, channel++);
        break;
      default:
        body += fmt::format("  {} = f32[4,6] {}({}, w)\n", out, pick(2) ? "add" : "multiply", in);
        break;
    }
  }
  body += "  ROOT r = f32[4,6] add(v8, w)\n";
  return "ENTRY e {\n" + body + "}\n";
}

TEST(GpuMultiDeviceExecutableTest, RandomProgramsMatchTheEvaluator) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  std::mt19937_64 rng(20261130);
  for (int i = 0; i < 4; ++i) {
    SCOPED_TRACE(fmt::format("program {}", i));
    ExpectSimulatedMatchesEvaluator(RandomGpuProgram(rng), {2, 2}, /*seed=*/i);
  }
}

// A permutation that leaves device 1 waiting for a device that finished: one line, no hang.
TEST(GpuMultiDeviceExecutableTest, AMeetingThatCannotCompleteFails) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  auto module = ParseWithReducers(xlens::testing::kOnlyReplicaZeroMeets);
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{2, 1};
  auto executable = GpuMultiDeviceExecutable::Compile(*module, topology, GpuCompileOptions{}, OpenSim);
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  MultiDeviceOptions options;
  options.collective_timeout_seconds = 20;
  auto result = (*executable)->Execute(RandomDeviceArguments(*module, 2, 3), options);
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("cannot complete"));
  EXPECT_EQ(result.status().message().find('\n'), std::string::npos) << result.status().message();
}

// Each device's spans go to its own track; every meeting span carries the bytes, the group and
// the time the timing model gives it between GPUs of an NVLink board.
TEST(GpuMultiDeviceExecutableTest, TheTraceHasADeviceTrackAndModelledCollectives) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] all-reduce(p), replica_groups={}, to_apply=add
  ROOT n = f32[1024] negate(a)
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{4, 1};
  auto target = GpuTargetByName("h100");
  auto executable = GpuMultiDeviceExecutable::Compile(*module, topology, GpuCompileOptions{}, OpenSim, &*target);
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  ASSERT_TRUE(profiler::TracerSession::Start());
  auto result = (*executable)->Execute(RandomDeviceArguments(*module, 4, 5), MultiDeviceOptions{});
  profiler::Trace trace = profiler::TracerSession::Stop();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(PlaceDevicesOnTimeline(trace, topology), 4);
  std::set<int64_t> devices_with_meetings;
  for (const profiler::TraceEvent& event : trace.events) {
    if (event.category != profiler::category::kCollective) continue;
    const int64_t* device = nullptr;
    const int64_t* modelled = nullptr;
    const int64_t* bytes = nullptr;
    for (const profiler::TraceArg& arg : event.args) {
      if (arg.key == "device") device = std::get_if<int64_t>(&arg.value);
      if (arg.key == "modelled_ns") modelled = std::get_if<int64_t>(&arg.value);
      if (arg.key == "bytes") bytes = std::get_if<int64_t>(&arg.value);
    }
    ASSERT_NE(device, nullptr);
    ASSERT_NE(modelled, nullptr);
    ASSERT_NE(bytes, nullptr);
    EXPECT_EQ(*bytes, 4096);
    // A ring of 4: 6 steps of 1.5 us and 2*3/4*4096 bytes at 360 GB/s (17 ns).
    EXPECT_EQ(*modelled, 9017);
    EXPECT_EQ(event.pid, profiler::kCpuDevicePidBase + *device);
    devices_with_meetings.insert(*device);
  }
  EXPECT_EQ(devices_with_meetings.size(), 4u);
}

// The simulator's analysis of every device in one more run: each device's launches predicted,
// and its collectives counted with their modelled time.
TEST(GpuMultiDeviceExecutableTest, TheAnalysisPredictsEveryDevicesStep) {
  if (!SimulatorAvailable()) GTEST_SKIP() << "no GPU simulator";
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[1024] parameter(0)
  a = f32[1024] all-reduce(p), replica_groups={{0,1}}, to_apply=add
  n = f32[1024] negate(a)
  ROOT g = f32[2048] all-gather(n), replica_groups={{0,1}}, dimensions={0}
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{2, 1};
  auto target = GpuTargetByName("h100");
  auto executable = GpuMultiDeviceExecutable::Compile(*module, topology, GpuCompileOptions{}, OpenSim, &*target);
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  ASSERT_TRUE((*executable)->Execute(RandomDeviceArguments(*module, 2, 9), MultiDeviceOptions{}).ok());
  auto analyses = (*executable)->AnalyseRun(MultiDeviceOptions{}, nullptr, 256);
  ASSERT_TRUE(analyses.ok()) << analyses.status().message();
  ASSERT_EQ(analyses->size(), 2u);
  for (int64_t d = 0; d < 2; ++d) {
    const GpuSimAnalysis& analysis = (*analyses)[static_cast<size_t>(d)];
    ASSERT_FALSE(analysis.launches.empty());
    EXPECT_GT(analysis.launches[0].prediction.total_ns, 0);
    EXPECT_EQ((*executable)->executable(d).last_run_collectives(), 2);
    // A ring of 2: the all-reduce 2 steps and 4096 bytes, the all-gather 1 step and 4096 bytes.
    EXPECT_NEAR((*executable)->executable(d).last_run_modelled_collective_ns(),
                3 * 1500 + 4096.0 / 360 + 4096.0 / 360, 1e-6);
  }
}

// A real GPU, where one is present: a single device is every group of its collectives.
TEST(GpuMultiDeviceExecutableTest, OneRealGpuIsAGroupOfOne) {
  auto count = CountCudaDevices();
  if (!count.ok() || *count < 1) GTEST_SKIP() << "no GPU: " << (count.ok() ? "none seen" : count.status().message());
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[4,6] parameter(0)
  r = u32[] replica-id()
  ar = f32[4,6] all-reduce(p), replica_groups={}, to_apply=add
  ag = f32[4,6] all-gather(ar), replica_groups={}, dimensions={0}
  a2a = f32[4,6] all-to-all(ag), replica_groups={}, dimensions={0}
  cp = f32[4,6] collective-permute(a2a), source_target_pairs={{0,0}}
  ROOT t = (u32[], f32[4,6]) tuple(r, cp)
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{1, 1};
  auto arguments = RandomDeviceArguments(*module, 1, 7);
  auto expected = EvaluateModuleOnDevices(*module, arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = GpuMultiDeviceExecutable::Compile(
      *module, topology, GpuCompileOptions{},
      [](int64_t d) { return OpenCudaDevice(static_cast<int>(d)); });
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  auto actual = (*executable)->Execute(arguments, MultiDeviceOptions{});
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear((*expected)[0], (*actual)[0], ErrorSpec{1e-5, 1e-5});
  EXPECT_TRUE(match.ok()) << match.message();
}

// A real GPU with NCCL: each collective NCCL takes goes through a communicator of one rank (the
// calls, their types, counts and buffers as several GPUs would make them), the rest (an all-gather
// along a minor dimension, the -done forms) through the host; all of it the evaluator's values.
TEST(GpuMultiDeviceExecutableTest, OneRealGpuThroughNccl) {
  auto count = CountCudaDevices();
  if (!count.ok() || *count < 1) GTEST_SKIP() << "no GPU: " << (count.ok() ? "none seen" : count.status().message());
  auto nccl = LoadNccl();
  if (!nccl.ok()) GTEST_SKIP() << nccl.status().message();
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[8,6] parameter(0)
  ar = f32[8,6] all-reduce(p), replica_groups={}, to_apply=add
  mx = f32[8,6] all-reduce(ar), replica_groups={}, to_apply=max
  ag = f32[8,6] all-gather(mx), replica_groups={}, dimensions={0}
  agm = f32[8,6] all-gather(ag), replica_groups={}, dimensions={1}
  rs = f32[8,6] reduce-scatter(agm), replica_groups={}, dimensions={0}, to_apply=add
  a2a = f32[8,6] all-to-all(rs), replica_groups={}, dimensions={0}
  cp = f32[8,6] collective-permute(a2a), source_target_pairs={{0,0}}
  b = f32[8,6] collective-broadcast(cp), replica_groups={}
  ars = f32[8,6] all-reduce-start(b), replica_groups={}, to_apply=add
  ard = f32[8,6] all-reduce-done(ars)
  ROOT n = f32[8,6] negate(ard)
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{1, 1};
  auto arguments = RandomDeviceArguments(*module, 1, 11);
  auto expected = EvaluateModuleOnDevices(*module, arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = GpuMultiDeviceExecutable::Compile(
      *module, topology, GpuCompileOptions{}, [](int64_t d) { return OpenCudaDevice(static_cast<int>(d)); },
      nullptr, /*nccl_on_one_gpu=*/true);
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  EXPECT_TRUE((*executable)->uses_nccl());
  for (int run = 0; run < 2; ++run) {
    auto actual = (*executable)->Execute(arguments, MultiDeviceOptions{});
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear((*expected)[0], (*actual)[0], ErrorSpec{1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << "run " << run << ": " << match.message();
  }
}

}  // namespace
}  // namespace xlens::runtime
