// Executables built from whole modules: control flow, aliasing and argument checks.
#include "compiler/runtime/executable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::ElementsAre;

TEST(ExecutableTest, AWhileBodyThatSwapsItsStateIsStagedNotClobbered) {
  const char* text = R"(HloModule swap
cond {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[3] get-tuple-element(s), index=1
  b = f32[3] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[3], f32[3]) tuple(j, b, a)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[3], f32[3]) tuple(z, a, b)
  w = (s32[], f32[3], f32[3]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=1
})";
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3}));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {4, 5, 6}));
  Literal out = testing::ExpectMatchesEvaluator(text, std::move(args));
  // Three swaps: the second array.
  auto d = out.data<float>();
  EXPECT_THAT(std::vector<float>(d.begin(), d.end()), ElementsAre(4, 5, 6));
}

TEST(ExecutableTest, AnOutOfRangeBranchIndexRunsTheLastBranch) {
  const char* text = R"(HloModule cond
b0 { p = f32[2] parameter(0)  ROOT n = f32[2] negate(p) }
b1 { p = f32[2] parameter(0)  ROOT e = f32[2] exponential(p) }
b2 { p = f32[2] parameter(0)  ROOT a = f32[2] abs(p) }
ENTRY e {
  i = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(i, x, x, x), branch_computations={b0, b1, b2}
})";
  for (int32_t index : {0, 1, 2, 7, -1}) {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR0<int32_t>(PrimitiveType::S32, index));
    args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {-0.5f, 2.0f}));
    testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 1e-6});
  }
}

TEST(ExecutableTest, RunsAgainWithNewArgumentsAndRejectsWrongOnes) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT s = f32[4] sine(a)
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  for (float v : {0.0f, 1.0f}) {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {v, v, v, v}));
    auto out = (*exe)->Execute(args);
    ASSERT_TRUE(out.ok());
    EXPECT_FLOAT_EQ(out->data<float>()[3], std::sin(v));
  }
  std::vector<Literal> wrong;
  wrong.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2}));
  auto out = (*exe)->Execute(wrong);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("argument 0 is f32[2]"));
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::HasSubstr("kernel s"));
}

TEST(ExecutableTest, FusionMakesFewerKernelsThanOpsAndTheSameResult) {
  const char* text = R"(HloModule chain
ENTRY e {
  a = f32[1000] parameter(0)
  b = f32[1000] parameter(1)
  m = f32[1000] multiply(a, b)
  s = f32[1000] add(m, a)
  t = f32[1000] tanh(s)
  ROOT n = f32[1000] subtract(t, b)
})";
  CompileOptions unfused;
  unfused.optimize.filter.disabled = {"fusion", "multi-output-fusion"};
  auto m1 = ParseHloModule(text);
  auto m2 = ParseHloModule(text);
  auto fused_exe = CompileForCpu(std::move(*m1), {});
  auto unfused_exe = CompileForCpu(std::move(*m2), unfused);
  ASSERT_TRUE(fused_exe.ok() && unfused_exe.ok());
  EXPECT_EQ((*fused_exe)->kernels().size(), 1u);
  EXPECT_EQ((*unfused_exe)->kernels().size(), 4u);
  testing::ExpectMatchesEvaluator(text, {}, {1e-6, 1e-6}, unfused);
}

}  // namespace
}  // namespace xlens::runtime
