#include "compiler/passes/constant_folding.h"

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

// `evaluable`: whether the module can be evaluated at all (to compare results).
std::unique_ptr<HloModule> Fold(std::string_view text, bool expect_change = true,
                                bool evaluable = true) {
  HloConstantFolding pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change, evaluable);
}

TEST(ConstantFoldingTest, FoldsChainsInOneRunAndKeepsMetadata) {
  auto module = Fold(R"(HloModule m
ENTRY e {
  p = f32[3] parameter(0)
  a = f32[3] constant({1, 2, 3})
  b = f32[3] constant({10, 20, 30})
  s = f32[3] add(a, b)
  n = f32[3] negate(s), metadata={op_type="Neg" op_name="model/neg"}
  ROOT r = f32[3] multiply(p, n)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* folded = module->entry_computation()->root_instruction()->operand(1);
  ASSERT_EQ(folded->opcode(), HloOpcode::kConstant);
  EXPECT_EQ(folded->literal().GetAsDouble(0), -11.0);
  EXPECT_EQ(folded->literal().GetAsDouble(2), -33.0);
  EXPECT_EQ(folded->metadata.op_name, "model/neg");
  // The operands that only fed the fold are gone.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kConstant), 1);
  EXPECT_EQ(module->entry_computation()->instruction_count(), 3);
}

TEST(ConstantFoldingTest, FoldsReducesWithTheirComputations) {
  auto module = Fold(R"(HloModule m
add { a = s32[] parameter(0) b = s32[] parameter(1) ROOT s = s32[] add(a, b) }
ENTRY e {
  c = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  z = s32[] constant(0)
  ROOT r = s32[2] reduce(c, z), dimensions={1}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kConstant);
  EXPECT_EQ(root->literal().GetAsInt64(0), 6);
  EXPECT_EQ(root->literal().GetAsInt64(1), 15);
}

TEST(ConstantFoldingTest, LeavesBroadcastsIotasAndNonConstantOperandsAlone) {
  Fold(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  c = f32[] constant(2)
  b = f32[4] broadcast(c), dimensions={}
  i = f32[4] iota(), iota_dimension=0
  x = f32[4] add(b, i)
  ROOT r = f32[4] add(x, p)
})", /*expect_change=*/false);
}

TEST(ConstantFoldingTest, SkipsSideEffectsAndWhatTheEvaluatorRefuses) {
  Fold(R"(HloModule m
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  r = f32[4] rng(lo, hi), distribution=rng_uniform
  f8 = f8e8m0fnu[2] constant({1, 2})
  cv = f32[2] convert(f8)
  cc = f32[] custom-call(lo), custom_call_target="foo"
  ROOT t = (f32[4], f32[2], f32[]) tuple(r, cv, cc)
})", /*expect_change=*/false, /*evaluable=*/false);
}

TEST(ConstantFoldingTest, LeavesElidedConstantsAlone) {
  // TensorFlow's dumps print large constants as {...}: nothing to fold with (this crashed).
  auto module = Fold(R"(HloModule m
ENTRY e {
  c = f32[64]{0} constant({...})
  ROOT n = f32[64]{0} negate(c)
})", /*expect_change=*/false, /*evaluable=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kNegate);
  EXPECT_NE(PrintModule(*module).find("constant({...})"), std::string::npos);
}

TEST(ConstantFoldingTest, RespectsTheSizeLimit) {
  auto module = Fold(R"(HloModule m
ENTRY e {
  c = f32[] constant(1)
  big = f32[2048,1024] broadcast(c), dimensions={}
  ROOT n = f32[2048,1024] negate(big)
})", /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kNegate);
}

TEST(ConstantFoldingTest, FoldsInsideCalledComputationsButNotFusions) {
  auto module = Fold(R"(HloModule m
body { a = s32[] parameter(0) c = s32[] constant(2) d = s32[] multiply(c, c) ROOT s = s32[] add(a, d) }
fused { a = s32[] parameter(0) c = s32[] constant(2) d = s32[] multiply(c, c) ROOT s = s32[] add(a, d) }
ENTRY e {
  p = s32[] parameter(0)
  k = s32[] call(p), to_apply=body
  ROOT f = s32[] fusion(k), kind=kLoop, calls=fused
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->GetComputationWithName("body")->root_instruction()->operand(1)->opcode(),
            HloOpcode::kConstant);
  EXPECT_EQ(module->GetComputationWithName("fused")->root_instruction()->operand(1)->opcode(),
            HloOpcode::kMultiply);
}

TEST(ConstantFoldingTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus(
          [] { return std::make_unique<HloConstantFolding>(); }, &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "constant-folding changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
