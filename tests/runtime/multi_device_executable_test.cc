// Collectives compiled for the CPU between simulated devices: every collective of handwritten
// modules and of random ones gives what the reference evaluator gives over the same devices;
// meetings that can never complete fail instead of hanging; one device is a group of one.
#include "compiler/runtime/multi_device_executable.h"

#include <random>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <fmt/format.h>

#include "compiler/hlo/literal_comparison.h"
#include "tests/hlo/multi_device_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;
using xlens::testing::ParseWithReducers;
using xlens::testing::RandomDeviceArguments;

// Compiled on the devices and evaluated on them: the same values, device by device.
void ExpectCompiledMatchesEvaluator(const std::string& entry, DeviceTopology topology,
                                    uint64_t seed = 1) {
  auto module = ParseWithReducers(entry);
  ASSERT_NE(module, nullptr);
  auto arguments = RandomDeviceArguments(*module, topology.num_devices(), seed);
  auto expected = EvaluateModuleOnDevices(*module, arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message() << "\n" << entry;
  auto executable = MultiDeviceExecutable::Compile(*module, topology, CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message() << "\n" << entry;
  auto actual = (*executable)->Execute(arguments, MultiDeviceOptions{});
  ASSERT_TRUE(actual.ok()) << actual.status().message() << "\n" << entry;
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    Status match = ExpectLiteralNear((*expected)[d], (*actual)[d], ErrorSpec{1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << "device " << d << ": " << match.message() << "\n" << entry;
  }
}

TEST(MultiDeviceExecutableTest, EveryCollectiveMatchesTheEvaluator) {
  ExpectCompiledMatchesEvaluator(std::string(xlens::testing::kEveryCollectiveUpToCpd) +
                                     "  ROOT t = (u32[], u32[], f32[1,12], f32[16,6]) tuple(r, q, rs, cpd)\n}",
                                 {4, 1});
}

TEST(MultiDeviceExecutableTest, ReplicasAndPartitionsAndALoop) {
  ExpectCompiledMatchesEvaluator(xlens::testing::kReplicasPartitionsAndALoop, {2, 2});
}

// Random programs of collectives and elementwise ops over f32[4,6] on 4 devices: the groups in
// every form, the ops that change the shape undone by their inverse.
std::string RandomProgram(std::mt19937_64& rng) {
  const std::vector<std::string> groups = {
      "{}", "{{0,1},{2,3}}", "{{0,2},{1,3}}", "[2,2]<=[4]", "[2,2]<=[2,2]T(1,0)", "[1,4]<=[4]",
      "mesh['a'=2,'b'=2] {'a'}", "mesh['a'=2,'b'=2] {'b'}", "{{3,1},{0,2}}"};
  auto pick = [&](int n) { return static_cast<int>(rng() % n); };
  std::string body = "  v0 = f32[4,6] parameter(0)\n  w = f32[4,6] parameter(1)\n";
  int last = 0;
  for (int step = 1; step <= 8; ++step) {
    const std::string in = fmt::format("v{}", last);
    const std::string out = fmt::format("v{}", step);
    const std::string group = groups[pick(static_cast<int>(groups.size()))];
    const int members = group == "{}" || group.find("[1,4]") != std::string::npos ? 4 : 2;
    switch (pick(6)) {
      case 0:
        body += fmt::format("  {} = f32[4,6] all-reduce({}), replica_groups={}, to_apply={}\n", out, in,
                            group, pick(2) ? "add" : "max");
        break;
      case 1: {
        const int d = pick(2);
        const std::string wide = d == 0 ? fmt::format("f32[{},6]", 4 * members)
                                        : fmt::format("f32[4,{}]", 6 * members);
        body += fmt::format("  g{} = {} all-gather({}), replica_groups={}, dimensions={{{}}}\n", step,
                            wide, in, group, d);
        body += fmt::format("  {} = f32[4,6] reduce-scatter(g{}), replica_groups={}, dimensions={{{}}}, "
                            "to_apply=add\n", out, step, group, d);
        break;
      }
      case 2:
        body += fmt::format("  {} = f32[4,6] all-to-all({}), replica_groups={}, dimensions={{0}}\n", out,
                            in, group);
        break;
      case 3: {
        std::vector<int> targets = {0, 1, 2, 3};
        std::shuffle(targets.begin(), targets.end(), rng);
        std::string pairs;
        for (int s = 0; s < 3; ++s) pairs += fmt::format("{}{{{},{}}}", s ? "," : "", s, targets[s]);
        body += fmt::format("  {} = f32[4,6] collective-permute({}), source_target_pairs={{{}}}\n", out,
                            in, pairs);
        break;
      }
      case 4:
        body += fmt::format("  {} = f32[4,6] collective-broadcast({}), replica_groups={}\n", out, in, group);
        break;
      default:
        body += fmt::format("  {} = f32[4,6] {}({}, w)\n", out, pick(2) ? "add" : "multiply", in);
        break;
    }
    last = step;
  }
  body += fmt::format("  ROOT r = f32[4,6] add(v{}, w)\n", last);
  return "ENTRY e {\n" + body + "}\n";
}

TEST(MultiDeviceExecutableTest, RandomProgramsMatchTheEvaluator) {
  std::mt19937_64 rng(20261129);
  for (int i = 0; i < 6; ++i) {
    SCOPED_TRACE(fmt::format("program {}", i));
    ExpectCompiledMatchesEvaluator(RandomProgram(rng), {4, 1}, /*seed=*/i);
  }
}

// The all-reduces between devices of one process work on the devices' buffers, each device
// folding a slice for all: every element has the evaluator's bits on every device, whatever the
// fold's order (a subtraction that reads its second parameter first, values of far apart
// magnitudes), the group's order, the slices' uneven ends, a tuple, an operand that may share the
// result's buffer, and a reducer no single kernel does (the evaluator's way); gathers and
// scatters along the first dimension and a later one.
TEST(MultiDeviceExecutableTest, CollectivesOnTheBuffersHaveTheEvaluatorsBits) {
  auto module = ParseWithReducers(R"(
rsub {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT d = f32[] subtract(y, x)
}
twice {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  s = f32[] add(x, y)
  ROOT t = f32[] add(s, y)
}
ENTRY e {
  p = f32[1001] parameter(0)
  q = f32[7] parameter(1)
  ar = (f32[1001], f32[7]) all-reduce(p, q), replica_groups={}, to_apply=add
  a0 = f32[1001] get-tuple-element(ar), index=0
  a1 = f32[7] get-tuple-element(ar), index=1
  x = f32[1001] multiply(a0, p)
  s = f32[1001] all-reduce(x), replica_groups={{2,0,1}}, to_apply=rsub
  m = f32[1001] all-reduce(s), replica_groups={{0},{1,2}}, to_apply=max
  t = f32[7] all-reduce(a1), replica_groups={}, to_apply=twice
  s14 = f32[14] slice(x), slice={[0:14]}
  s27 = f32[2,7] reshape(s14)
  g = f32[6,7] all-gather(s27), replica_groups={}, dimensions={0}
  p14 = f32[14] slice(p), slice={[3:17]}
  p27 = f32[2,7] reshape(p14)
  h = f32[2,21] all-gather(p27), replica_groups={{1,2,0}}, dimensions={1}
  rs = f32[2,7] reduce-scatter(h), replica_groups={{2,1,0}}, dimensions={1}, to_apply=rsub
  g61 = f32[6,1] slice(g), slice={[0:6],[2:3]}
  rt = f32[2,1] reduce-scatter(g61), replica_groups={}, dimensions={0}, to_apply=add
  ROOT r = (f32[1001], f32[7], f32[1001], f32[6,7], f32[2,21], f32[2,7], f32[2,1]) tuple(m, t, s, g, h, rs, rt)
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{3, 1};
  auto arguments = RandomDeviceArguments(*module, 3, 7);
  for (int64_t d = 0; d < 3; ++d) {
    for (Literal& argument : arguments[d]) {
      float scale = d == 1 ? 1e7f : 1e-3f * static_cast<float>(d + 1);
      for (float& v : argument.data<float>()) v *= scale;
    }
  }
  auto expected = EvaluateModuleOnDevices(*module, arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = MultiDeviceExecutable::Compile(*module, topology, CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  for (int run = 0; run < 2; ++run) {
    auto actual = (*executable)->Execute(arguments, MultiDeviceOptions{});
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    for (int64_t d = 0; d < 3; ++d) EXPECT_EQ((*expected)[d], (*actual)[d]) << "device " << d;
    EXPECT_EQ((*actual)[0].tuple_element(2), (*actual)[2].tuple_element(2));
  }
}

TEST(MultiDeviceExecutableTest, ADeviceThatSkipsACollectiveFailsTheMeeting) {
  auto module = ParseWithReducers(xlens::testing::kOnlyReplicaZeroMeets);
  ASSERT_NE(module, nullptr);
  auto executable = MultiDeviceExecutable::Compile(*module, {2, 1}, CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  auto results = (*executable)->Execute(RandomDeviceArguments(*module, 2, 0), MultiDeviceOptions{});
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("%ar"));
  EXPECT_THAT(results.status().message(), HasSubstr("device 1 never arrived"));
}

TEST(MultiDeviceExecutableTest, GroupsThatDoNotFitAreRefusedWhenCompiling) {
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(p), replica_groups={{0,1}}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  auto one = CompileForCpu(ParseHloModule(module->ToString()).value(), CompileOptions{});
  ASSERT_FALSE(one.ok());
  EXPECT_THAT(one.status().message(), HasSubstr("names replica 1"));
  auto two = MultiDeviceExecutable::Compile(*module, {2, 1}, CompileOptions{});
  EXPECT_TRUE(two.ok()) << two.status().message();
}

TEST(MultiDeviceExecutableTest, OneDeviceIsAGroupOfOne) {
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[3] parameter(0)
  ar = f32[3] all-reduce(p), replica_groups={}, to_apply=add
  ROOT g = f32[3] all-gather(ar), replica_groups={{0}}, dimensions={0}
})");
  ASSERT_NE(module, nullptr);
  auto executable = CompileForCpu(ParseHloModule(module->ToString()).value(), CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  std::vector<Literal> arguments;
  arguments.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3}));
  auto result = (*executable)->Execute(arguments);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(*result, arguments[0]);
}

// Repeated runs share the arguments and leave the results in the devices' buffers until asked:
// every run gives the evaluator's values, read once after the last.
TEST(MultiDeviceExecutableTest, RunsShareTheirArgumentsAndResultsAreReadAfterTheLast) {
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[64] parameter(0)
  q = f32[64] parameter(1)
  ar = f32[64] all-reduce(p), replica_groups={}, to_apply=add
  ROOT s = (f32[64], f32[64]) tuple(ar, q)
})");
  ASSERT_NE(module, nullptr);
  const DeviceTopology topology{2, 1};
  auto arguments = std::make_shared<const MultiDeviceExecutable::Arguments>(
      RandomDeviceArguments(*module, topology.num_devices(), 3));
  auto expected = EvaluateModuleOnDevices(*module, *arguments, topology);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = MultiDeviceExecutable::Compile(*module, topology, CompileOptions{});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  EXPECT_FALSE((*executable)->Results().ok()) << "no run has finished";
  for (int run = 0; run < 3; ++run) {
    auto ran = (*executable)->Execute(arguments, MultiDeviceOptions{}, nullptr, nullptr,
                                      /*read_results=*/false);
    ASSERT_TRUE(ran.ok()) << ran.status().message();
    for (const Literal& unread : *ran) EXPECT_EQ(unread.shape().ToString(false), Literal().shape().ToString(false));
  }
  // The devices hold the arguments, not copies of them.
  EXPECT_GE(arguments.use_count(), 2);
  auto results = (*executable)->Results();
  ASSERT_TRUE(results.ok()) << results.status().message();
  for (int64_t d = 0; d < topology.num_devices(); ++d) {
    Status match = ExpectLiteralNear((*expected)[d], (*results)[d], ErrorSpec{1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << "device " << d << ": " << match.message();
  }
}

}  // namespace
}  // namespace xlens::runtime
