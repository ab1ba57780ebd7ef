#include "compiler/passes/cse.h"

#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

std::unique_ptr<HloModule> Cse(std::string_view text, bool expect_change = true,
                               bool evaluable = true) {
  HloCse pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change, evaluable);
}

TEST(CseTest, MergesIdenticalChainsInOneSweep) {
  auto module = Cse(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = f32[4] parameter(1)
  c1 = f32[] constant(2)
  c2 = f32[] constant(2)
  b1 = f32[4] broadcast(c1), dimensions={}
  b2 = f32[4] broadcast(c2), dimensions={}
  a1 = f32[4] add(p, b1), metadata={op_name="first"}
  a2 = f32[4] add(p, b2), metadata={op_name="second"}
  m1 = f32[4] multiply(a1, q)
  m2 = f32[4] multiply(a2, q)
  ROOT r = f32[4] subtract(m1, m2)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kConstant), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kBroadcast), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kAdd), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kMultiply), 1);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0), root->operand(1));
  EXPECT_EQ(root->operand(0)->operand(0)->metadata.op_name, "first");
}

TEST(CseTest, KeepsDifferentAttributesShapesAndLiterals) {
  Cse(R"(HloModule m
ENTRY e {
  p = f32[2,3] parameter(0)
  t1 = f32[3,2] transpose(p), dimensions={1,0}
  r1 = f32[3,2] reshape(p)
  s1 = f32[1,3] slice(p), slice={[0:1], [0:3]}
  s2 = f32[1,3] slice(p), slice={[1:2], [0:3]}
  c1 = f32[] constant(1)
  c2 = f32[] constant(-1)
  c3 = f64[] constant(1)
  x = f32[3,2]{0,1} copy(t1)
  y = f32[3,2]{1,0} copy(t1)
  ROOT t = (f32[3,2], f32[3,2], f32[1,3], f32[1,3], f32[], f32[], f64[], f32[3,2]{0,1}, f32[3,2]{1,0}) tuple(t1, r1, s1, s2, c1, c2, c3, x, y)
})", /*expect_change=*/false);
}

TEST(CseTest, NeverMergesParametersSideEffectsOrElidedConstants) {
  Cse(R"(HloModule m
ENTRY e {
  p = f32[] parameter(0)
  q = f32[] parameter(1)
  r1 = f32[4] rng(p, q), distribution=rng_uniform
  r2 = f32[4] rng(p, q), distribution=rng_uniform
  e1 = f32[8] constant({...})
  e2 = f32[8] constant({...})
  ROOT t = (f32[4], f32[4], f32[8], f32[8]) tuple(r1, r2, e1, e2)
})", /*expect_change=*/false, /*evaluable=*/false);
}

TEST(CseTest, MergesInsideCalledComputations) {
  auto module = Cse(R"(HloModule m
body { a = s32[] parameter(0) x = s32[] multiply(a, a) y = s32[] multiply(a, a) ROOT s = s32[] add(x, y) }
ENTRY e {
  p = s32[] parameter(0)
  ROOT c = s32[] call(p), to_apply=body
})");
  ASSERT_NE(module, nullptr);
  const HloComputation* body = module->GetComputationWithName("body");
  EXPECT_EQ(body->instruction_count(), 3);
}

TEST(CseTest, RootMergedIntoAnEarlierTwin) {
  auto module = Cse(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  a = f32[4] exponential(p)
  b = f32[4] exponential(p)
  ROOT r = f32[4] exponential(p)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->instruction_count(), 2);
  EXPECT_EQ(module->entry_computation()->root_instruction()->name(), "a");
}

TEST(CseTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<HloCse>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "cse changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
