// The reference evaluator over several simulated devices: every collective against values this
// test computes from the inputs by hand, both forms of replica groups, collectives in loops, and
// meetings that cannot complete failing fast instead of hanging.
#include "compiler/hlo/multi_device_evaluator.h"

#include <chrono>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "evaluator_test_util.h"
#include "multi_device_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using xlens::testing::MakeLiteral;
using xlens::testing::ParseWithReducers;
using xlens::testing::Values;

// Device d's argument: f32[n] with values d*100 + i.
std::vector<std::vector<Literal>> RampArguments(int64_t devices, int64_t n) {
  std::vector<std::vector<Literal>> arguments(devices);
  for (int64_t d = 0; d < devices; ++d) {
    std::vector<float> values;
    for (int64_t i = 0; i < n; ++i) values.push_back(static_cast<float>(d * 100 + i));
    arguments[d].push_back(MakeLiteral<float>(PrimitiveType::F32, {n}, values));
  }
  return arguments;
}

float Ramp(int64_t device, int64_t i) { return static_cast<float>(device * 100 + i); }

StatusOr<std::vector<Literal>> RunOnDevices(const std::string& entry, DeviceTopology topology,
                                   std::vector<std::vector<Literal>> arguments,
                                   double timeout = 60) {
  auto module = ParseWithReducers(entry);
  if (!module) return Error("parse failed");
  return EvaluateModuleOnDevices(*module, arguments, topology, {},
                                 MultiDeviceOptions{.collective_timeout_seconds = timeout});
}

TEST(MultiDeviceEvaluatorTest, AllReduceInBothGroupForms) {
  for (const char* groups : {"{{0,1},{2,3}}", "[2,2]<=[4]"}) {
    auto results = RunOnDevices(std::string(R"(ENTRY e {
  p = f32[3] parameter(0)
  ROOT r = f32[3] all-reduce(p), replica_groups=)") + groups + R"(, to_apply=add
})", {4, 1}, RampArguments(4, 3));
    ASSERT_TRUE(results.ok()) << results.status().message();
    for (int64_t d = 0; d < 4; ++d) {
      const int64_t first = d < 2 ? 0 : 2;
      std::vector<float> expected;
      for (int64_t i = 0; i < 3; ++i) expected.push_back(Ramp(first, i) + Ramp(first + 1, i));
      EXPECT_THAT(Values<float>((*results)[d]), ElementsAreArray(expected)) << groups << " device " << d;
    }
  }
  // The transposed iota form pairs 0 with 2 and 1 with 3.
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[2] parameter(0)
  ROOT r = f32[2] all-reduce(p), replica_groups=[2,2]<=[2,2]T(1,0), to_apply=max
})", {4, 1}, RampArguments(4, 2));
  ASSERT_TRUE(results.ok()) << results.status().message();
  EXPECT_THAT(Values<float>((*results)[0]), ElementsAre(Ramp(2, 0), Ramp(2, 1)));
  EXPECT_THAT(Values<float>((*results)[1]), ElementsAre(Ramp(3, 0), Ramp(3, 1)));
  EXPECT_THAT(Values<float>((*results)[3]), ElementsAre(Ramp(3, 0), Ramp(3, 1)));
}

TEST(MultiDeviceEvaluatorTest, IdsAndGroupModesOnReplicasAndPartitions) {
  // 2 replicas x 2 partitions: device = replica * 2 + partition.
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[1] parameter(0)
  r = u32[] replica-id()
  q = u32[] partition-id()
  cross_replica = f32[1] all-reduce(p), replica_groups={}, to_apply=add
  flattened = f32[1] all-reduce(p), channel_id=1, replica_groups={{0,3},{1,2}}, use_global_device_ids=true, to_apply=add
  both = f32[1] all-reduce(p), channel_id=2, replica_groups={{0,1}}, use_global_device_ids=false, to_apply=add
  ROOT t = (u32[], u32[], f32[1], f32[1], f32[1]) tuple(r, q, cross_replica, flattened, both)
})", {2, 2}, RampArguments(4, 1));
  ASSERT_TRUE(results.ok()) << results.status().message();
  for (int64_t d = 0; d < 4; ++d) {
    const Literal& t = (*results)[d];
    EXPECT_EQ(Values<uint32_t>(t.tuple_element(0))[0], d / 2);
    EXPECT_EQ(Values<uint32_t>(t.tuple_element(1))[0], d % 2);
    EXPECT_EQ(Values<float>(t.tuple_element(2))[0], Ramp(d % 2, 0) + Ramp(d % 2 + 2, 0)) << d;
    const int64_t partner = 3 - d;  // {0,3} and {1,2}
    EXPECT_EQ(Values<float>(t.tuple_element(3))[0], Ramp(d, 0) + Ramp(partner, 0)) << d;
    EXPECT_EQ(Values<float>(t.tuple_element(4))[0], Ramp(0, 0) + Ramp(1, 0) + Ramp(2, 0) + Ramp(3, 0));
  }
}

TEST(MultiDeviceEvaluatorTest, VariadicAllReduceGivesATuple) {
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[2] parameter(0)
  n = f32[2] negate(p)
  ROOT r = (f32[2], f32[2]) all-reduce(p, n), replica_groups={}, to_apply=max
})", {3, 1}, RampArguments(3, 2));
  ASSERT_TRUE(results.ok()) << results.status().message();
  EXPECT_THAT(Values<float>((*results)[1].tuple_element(0)), ElementsAre(Ramp(2, 0), Ramp(2, 1)));
  EXPECT_THAT(Values<float>((*results)[1].tuple_element(1)), ElementsAre(-Ramp(0, 0), -Ramp(0, 1)));
}

TEST(MultiDeviceEvaluatorTest, AllGatherAndReduceScatter) {
  std::vector<std::vector<Literal>> arguments(2);
  for (int64_t d = 0; d < 2; ++d) {
    arguments[d].push_back(MakeLiteral<float>(PrimitiveType::F32, {2, 2},
                                              {Ramp(d, 0), Ramp(d, 1), Ramp(d, 2), Ramp(d, 3)}));
  }
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[2,2] parameter(0)
  g = f32[2,4] all-gather(p), replica_groups={{0,1}}, dimensions={1}
  s = f32[1,2] reduce-scatter(p), replica_groups={{0,1}}, dimensions={0}, to_apply=add
  ROOT t = (f32[2,4], f32[1,2]) tuple(g, s)
})", {2, 1}, std::move(arguments));
  ASSERT_TRUE(results.ok()) << results.status().message();
  for (int64_t d = 0; d < 2; ++d) {
    // Row r of the gather: device 0's row r, then device 1's.
    EXPECT_THAT(Values<float>((*results)[d].tuple_element(0)),
                ElementsAre(Ramp(0, 0), Ramp(0, 1), Ramp(1, 0), Ramp(1, 1), Ramp(0, 2), Ramp(0, 3),
                            Ramp(1, 2), Ramp(1, 3)));
    // Device d keeps row d of the sum.
    EXPECT_THAT(Values<float>((*results)[d].tuple_element(1)),
                ElementsAre(Ramp(0, 2 * d) + Ramp(1, 2 * d), Ramp(0, 2 * d + 1) + Ramp(1, 2 * d + 1)));
  }
}

TEST(MultiDeviceEvaluatorTest, AllToAllWithAndWithoutSplitDimension) {
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[6] parameter(0)
  ROOT a = f32[6] all-to-all(p), replica_groups={{0,1,2}}, dimensions={0}
})", {3, 1}, RampArguments(3, 6));
  ASSERT_TRUE(results.ok()) << results.status().message();
  for (int64_t d = 0; d < 3; ++d) {
    // Piece d (elements 2d, 2d+1) of every device, in device order.
    std::vector<float> expected;
    for (int64_t source = 0; source < 3; ++source) {
      expected.push_back(Ramp(source, 2 * d));
      expected.push_back(Ramp(source, 2 * d + 1));
    }
    EXPECT_THAT(Values<float>((*results)[d]), ElementsAreArray(expected)) << d;
  }
  results = RunOnDevices(R"(ENTRY e {
  p = f32[2] parameter(0)
  n = f32[2] negate(p)
  ROOT a = (f32[2], f32[2]) all-to-all(p, n), replica_groups={{0,1}}
})", {2, 1}, RampArguments(2, 2));
  ASSERT_TRUE(results.ok()) << results.status().message();
  // Device 1 receives device 0's second operand and its own second operand.
  EXPECT_THAT(Values<float>((*results)[1].tuple_element(0)), ElementsAre(-Ramp(0, 0), -Ramp(0, 1)));
  EXPECT_THAT(Values<float>((*results)[1].tuple_element(1)), ElementsAre(-Ramp(1, 0), -Ramp(1, 1)));
  EXPECT_THAT(Values<float>((*results)[0].tuple_element(1)), ElementsAre(Ramp(1, 0), Ramp(1, 1)));
}

TEST(MultiDeviceEvaluatorTest, PermuteBroadcastAndAsyncPairs) {
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[2] parameter(0)
  cp = f32[2] collective-permute(p), source_target_pairs={{0,1},{1,2}}
  b = f32[2] collective-broadcast(p), replica_groups={{2,0,1}}
  ars = f32[2] all-reduce-start(p), replica_groups={}, to_apply=add
  ard = f32[2] all-reduce-done(ars)
  ags = (f32[2], f32[6]) all-gather-start(p), replica_groups={}, dimensions={0}
  agd = f32[6] all-gather-done(ags)
  cps = (f32[2], f32[2], u32[], u32[]) collective-permute-start(p), source_target_pairs={{2,0}}
  cpd = f32[2] collective-permute-done(cps)
  ROOT t = (f32[2], f32[2], f32[2], f32[6], f32[2]) tuple(cp, b, ard, agd, cpd)
})", {3, 1}, RampArguments(3, 2));
  ASSERT_TRUE(results.ok()) << results.status().message();
  for (int64_t d = 0; d < 3; ++d) {
    const Literal& t = (*results)[d];
    if (d == 0) {
      EXPECT_THAT(Values<float>(t.tuple_element(0)), ElementsAre(0, 0));  // no one sends to 0
    } else {
      EXPECT_THAT(Values<float>(t.tuple_element(0)), ElementsAre(Ramp(d - 1, 0), Ramp(d - 1, 1)));
    }
    EXPECT_THAT(Values<float>(t.tuple_element(1)), ElementsAre(Ramp(2, 0), Ramp(2, 1)));
    const float sum0 = Ramp(0, 0) + Ramp(1, 0) + Ramp(2, 0);
    const float sum1 = Ramp(0, 1) + Ramp(1, 1) + Ramp(2, 1);
    EXPECT_THAT(Values<float>(t.tuple_element(2)), ElementsAre(sum0, sum1));
    EXPECT_THAT(Values<float>(t.tuple_element(3)),
                ElementsAre(Ramp(0, 0), Ramp(0, 1), Ramp(1, 0), Ramp(1, 1), Ramp(2, 0), Ramp(2, 1)));
    if (d == 0) {
      EXPECT_THAT(Values<float>(t.tuple_element(4)), ElementsAre(Ramp(2, 0), Ramp(2, 1)));
    } else {
      EXPECT_THAT(Values<float>(t.tuple_element(4)), ElementsAre(0, 0));
    }
  }
}

TEST(MultiDeviceEvaluatorTest, ACollectiveInALoopMeetsOncePerIteration) {
  // Each iteration adds the all-reduce of the running value: x <- 2x on two equal devices.
  auto results = RunOnDevices(R"(
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(5)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  next = s32[] add(i, one)
  r = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add
  ROOT t = (s32[], f32[2]) tuple(next, r)
}
ENTRY e {
  p = f32[2] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[2]) tuple(zero, p)
  w = (s32[], f32[2]) while(init), condition=cond, body=body
  ROOT x = f32[2] get-tuple-element(w), index=1
})", {2, 1}, RampArguments(2, 2));
  ASSERT_TRUE(results.ok()) << results.status().message();
  // After the first iteration both hold a+b; each further one doubles it.
  const float first = Ramp(0, 1) + Ramp(1, 1);
  EXPECT_EQ(Values<float>((*results)[0])[1], first * 16);
  EXPECT_EQ(Values<float>((*results)[1])[1], first * 16);
}

// Device 0 runs the all-reduce in a branch that device 1 does not take.
constexpr char kSkipped[] = R"(
with_collective {
  x = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add
}
without {
  ROOT x = f32[2] parameter(0)
}
ENTRY e {
  p = f32[2] parameter(0)
  r = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(r, zero), direction=EQ
  ROOT c = f32[2] conditional(first, p, p), true_computation=with_collective, false_computation=without
})";

TEST(MultiDeviceEvaluatorTest, ADeviceThatNeverComesFailsTheMeetingAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  auto results = RunOnDevices(kSkipped, {2, 1}, RampArguments(2, 2), /*timeout=*/60);
  ASSERT_FALSE(results.ok());
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_THAT(results.status().message(), HasSubstr("%ar"));
  EXPECT_THAT(results.status().message(), HasSubstr("device 1 never arrived"));
  EXPECT_THAT(results.status().message(), HasSubstr("finished its program"));
}

TEST(MultiDeviceEvaluatorTest, CrossedCollectivesAreADeadlock) {
  auto results = RunOnDevices(R"(
a_first {
  x = f32[2] parameter(0)
  a = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=add
  ROOT b = f32[2] all-reduce(a), replica_groups={{0,1}}, to_apply=max
}
b_first {
  x = f32[2] parameter(0)
  b = f32[2] all-reduce(x), replica_groups={{0,1}}, to_apply=max
  ROOT a = f32[2] all-reduce(b), replica_groups={{0,1}}, to_apply=add
}
ENTRY e {
  p = f32[2] parameter(0)
  r = u32[] replica-id()
  zero = u32[] constant(0)
  first = pred[] compare(r, zero), direction=EQ
  ROOT c = f32[2] conditional(first, p, p), true_computation=a_first, false_computation=b_first
})", {2, 1}, RampArguments(2, 2), /*timeout=*/60);
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("deadlock"));
  EXPECT_THAT(results.status().message(), HasSubstr("waits at %"));
}

TEST(MultiDeviceEvaluatorTest, ADeviceThatNeverStopsTimesOut) {
  // Device 1 loops forever before the all-reduce; device 0 waits for it.
  auto results = RunOnDevices(R"(
cond {
  s = u32[] parameter(0)
  zero = u32[] constant(0)
  ROOT ne = pred[] compare(s, zero), direction=NE
}
body {
  ROOT s = u32[] parameter(0)
}
ENTRY e {
  p = f32[2] parameter(0)
  r = u32[] replica-id()
  w = u32[] while(r), condition=cond, body=body
  wf = f32[] convert(w)
  wb = f32[2] broadcast(wf), dimensions={}
  q = f32[2] add(p, wb)
  ROOT ar = f32[2] all-reduce(q), replica_groups={{0,1}}, to_apply=add
})", {2, 1}, RampArguments(2, 2), /*timeout=*/0.3);
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("%ar"));
  EXPECT_THAT(results.status().message(), HasSubstr("within 0.3 s"));
  EXPECT_THAT(results.status().message(), HasSubstr("device 1 is still running"));
}

TEST(MultiDeviceEvaluatorTest, MalformedGroupsFailBeforeAnythingRuns) {
  auto results = RunOnDevices(R"(ENTRY e {
  p = f32[2] parameter(0)
  ROOT ar = f32[2] all-reduce(p), replica_groups={{0,1},{2,3}}, to_apply=add
})", {2, 1}, RampArguments(2, 2));
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("%ar"));
  EXPECT_THAT(results.status().message(), HasSubstr("replica 2"));
  // A wrong number of argument lists.
  results = RunOnDevices("ENTRY e {\n  ROOT p = f32[2] parameter(0)\n}", {2, 1}, RampArguments(3, 2));
  ASSERT_FALSE(results.ok());
  EXPECT_THAT(results.status().message(), HasSubstr("need 2 argument lists, got 3"));
}

TEST(MultiDeviceEvaluatorTest, OneDeviceIsAGroupOfOne) {
  auto module = ParseWithReducers(R"(ENTRY e {
  p = f32[2] parameter(0)
  ar = f32[2] all-reduce(p), replica_groups={}, to_apply=add
  g = f32[2] all-gather(ar), replica_groups={{0}}, dimensions={0}
  r = u32[] replica-id()
  ROOT t = (f32[2], u32[]) tuple(g, r)
})");
  std::vector<Literal> arguments;
  arguments.push_back(MakeLiteral<float>(PrimitiveType::F32, {2}, {3, 4}));
  auto result = EvaluateModule(*module, arguments);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_THAT(Values<float>(result->tuple_element(0)), ElementsAre(3, 4));
  EXPECT_EQ(Values<uint32_t>(result->tuple_element(1))[0], 0u);
}

}  // namespace
}  // namespace xlens
