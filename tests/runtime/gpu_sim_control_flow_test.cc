// Control flow on the GPU backend (while, conditional, call: the host drives it around the
// kernels of their computations, reading predicates and branch indices back from the device)
// against the reference evaluator, on the GPU simulator.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu_sim_test_util.h"

namespace xlens::runtime {
namespace {

using testing::RunOnSimulatorAndEvaluator;

std::unique_ptr<GpuSimDevice> OpenDevice() {
  auto device = OpenSimulatedGpuDevice();
  return device.ok() ? std::move(*device) : nullptr;
}

Literal F32Vector(const std::vector<float>& values) {
  return Literal::CreateR1(PrimitiveType::F32, values);
}

// `control_flow`: the while, conditional and call instructions the compiled module must keep
// (what the test is about, not optimized away).
void ExpectAgreement(const std::string& text, const std::vector<Literal>& args, int64_t control_flow,
                     const GpuCompileOptions& options = {}) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  auto both = RunOnSimulatorAndEvaluator(text, args, *device, options);
  ASSERT_TRUE(both.ok()) << both.status().message();
  Status match = ExpectLiteralNear(both->expected, both->actual, ErrorSpec{1e-6, 1e-6});
  EXPECT_TRUE(match.ok()) << match.message();
  EXPECT_EQ(both->control_flow, control_flow);
}

TEST(GpuSimControlFlowTest, WhileLoopWithTupleStateRunsUntilItsPredicateIsFalse) {
  // The trip count comes from a parameter, so only the device's predicate can end the loop;
  // the body swaps two state arrays, so results land in each other's buffers.
  ExpectAgreement(R"(
HloModule while_loop
cond {
  s = (s32[], s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], s32[], f32[8], f32[8]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] get-tuple-element(s), index=1
  x = f32[8] get-tuple-element(s), index=2
  y = f32[8] get-tuple-element(s), index=3
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  half = f32[] constant(0.5)
  h = f32[8] broadcast(half), dimensions={}
  xh = f32[8] multiply(x, h)
  x1 = f32[8] add(xh, y)
  ROOT t = (s32[], s32[], f32[8], f32[8]) tuple(i1, n, x1, x)
}
ENTRY e {
  n = s32[] parameter(0)
  x = f32[8] parameter(1)
  zero = s32[] constant(0)
  y = f32[8] negate(x)
  init = (s32[], s32[], f32[8], f32[8]) tuple(zero, n, x, y)
  w = (s32[], s32[], f32[8], f32[8]) while(init), condition=cond, body=body
  r = f32[8] get-tuple-element(w), index=2
  c = s32[] get-tuple-element(w), index=0
  ROOT out = (f32[8], s32[]) tuple(r, c)
}
)", [] {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR0(PrimitiveType::S32, int32_t{7}));
    args.push_back(F32Vector({1, -2, 3, 0.5, 8, -1, 0, 2.5}));
    return args;
  }(), 1);
}

TEST(GpuSimControlFlowTest, WhileLoopThatNeverRuns) {
  ExpectAgreement(R"(
HloModule while_zero
cond {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  ten = s32[] constant(10)
  ROOT lt = pred[] compare(i, ten), direction=LT
}
body {
  s = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[4] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[4] exponential(x)
  ROOT t = (s32[], f32[4]) tuple(i1, x1)
}
ENTRY e {
  i = s32[] parameter(0)
  x = f32[4] parameter(1)
  init = (s32[], f32[4]) tuple(i, x)
  ROOT w = (s32[], f32[4]) while(init), condition=cond, body=body
}
)", [] {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR0(PrimitiveType::S32, int32_t{12}));
    args.push_back(F32Vector({1, 2, 3, 4}));
    return args;
  }(), 1);
}

const char* const kConditional = R"(
HloModule conditional
b0 {
  p = f32[6] parameter(0)
  ROOT r = f32[6] exponential(p)
}
b1 {
  p = (f32[6], f32[6]) parameter(0)
  a = f32[6] get-tuple-element(p), index=0
  b = f32[6] get-tuple-element(p), index=1
  ROOT r = f32[6] multiply(a, b)
}
b2 {
  p = f32[6] parameter(0)
  ROOT r = f32[6] negate(p)
}
ENTRY e {
  k = s32[] parameter(0)
  x = f32[6] parameter(1)
  y = f32[6] parameter(2)
  xy = (f32[6], f32[6]) tuple(x, y)
  ROOT c = f32[6] conditional(k, x, xy, y), branch_computations={b0, b1, b2}
}
)";

TEST(GpuSimControlFlowTest, ConditionalRunsTheBranchItsDeviceIndexNames) {
  // Each index, and one out of range (the last branch runs).
  for (int32_t k : {0, 1, 2, 7, -1}) {
    SCOPED_TRACE(k);
    std::vector<Literal> args;
    args.push_back(Literal::CreateR0(PrimitiveType::S32, k));
    args.push_back(F32Vector({0.5, -1, 2, 0, 1.5, -0.25}));
    args.push_back(F32Vector({2, 3, -1, 4, 0.5, 8}));
    ExpectAgreement(kConditional, args, 1);
  }
}

TEST(GpuSimControlFlowTest, ConditionalOnAPredicateComputedOnTheDevice) {
  for (float threshold : {-10.0f, 10.0f}) {
    SCOPED_TRACE(threshold);
    std::vector<Literal> args;
    args.push_back(F32Vector({1, 2, 3, 4}));
    args.push_back(Literal::CreateR0(PrimitiveType::F32, threshold));
    ExpectAgreement(R"(
HloModule pred_conditional
on_true {
  p = f32[4] parameter(0)
  ROOT r = f32[4] sqrt(p)
}
on_false {
  p = f32[4] parameter(0)
  ROOT r = f32[4] log(p)
}
ENTRY e {
  x = f32[4] parameter(0)
  t = f32[] parameter(1)
  zero = f32[] constant(0)
  sum = f32[] reduce(x, zero), dimensions={0}, to_apply=add
  gt = pred[] compare(sum, t), direction=GT
  ROOT c = f32[4] conditional(gt, x, x), true_computation=on_true, false_computation=on_false
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
)", args, 1);
  }
}

TEST(GpuSimControlFlowTest, CallAndALoopInsideAConditional) {
  // The call stays a call (the optimizer would inline it).
  GpuCompileOptions options;
  options.optimize.filter.disabled.insert("call-inliner");
  std::vector<Literal> args;
  args.push_back(Literal::CreateR0(PrimitiveType::PRED, true));
  args.push_back(F32Vector({1, 2, 3}));
  ExpectAgreement(R"(
HloModule nested
double {
  p = f32[3] parameter(0)
  ROOT r = f32[3] add(p, p)
}
cond {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  s = (s32[], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[3] get-tuple-element(s), index=1
  one = s32[] constant(1)
  i1 = s32[] add(i, one)
  x1 = f32[3] call(x), to_apply=double
  ROOT t = (s32[], f32[3]) tuple(i1, x1)
}
looping {
  p = f32[3] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[3]) tuple(zero, p)
  w = (s32[], f32[3]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=1
}
plain {
  ROOT p = f32[3] parameter(0)
}
ENTRY e {
  b = pred[] parameter(0)
  x = f32[3] parameter(1)
  ROOT c = f32[3] conditional(b, x, x), true_computation=looping, false_computation=plain
}
)", args, 3, options);
}

}  // namespace
}  // namespace xlens::runtime
