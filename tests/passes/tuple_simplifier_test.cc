#include "compiler/passes/tuple_simplifier.h"

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

std::unique_ptr<HloModule> Simplify(std::string_view text, bool expect_change = true) {
  TupleSimplifier pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

TEST(TupleSimplifierTest, GetTupleElementOfTupleIsTheOperand) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  a = f32[2] parameter(0)
  b = s32[] parameter(1)
  t = (f32[2], s32[]) tuple(a, b)
  inner = ((f32[2], s32[]), f32[2]) tuple(t, a)
  g0 = (f32[2], s32[]) get-tuple-element(inner), index=0
  g1 = s32[] get-tuple-element(g0), index=1
  g2 = f32[2] get-tuple-element(t), index=0
  ROOT r = (s32[], f32[2]) tuple(g1, g2)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0)->name(), "b");
  EXPECT_EQ(root->operand(1)->name(), "a");
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTuple), 1);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kGetTupleElement), 0);
}

TEST(TupleSimplifierTest, TupleOfAllElementsIsTheSource) {
  auto module = Simplify(R"(HloModule m
ENTRY e {
  p = (f32[2], s32[]) parameter(0)
  g0 = f32[2] get-tuple-element(p), index=0
  g1 = s32[] get-tuple-element(p), index=1
  ROOT r = (f32[2], s32[]) tuple(g0, g1)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(module->entry_computation()->instruction_count(), 1);
}

TEST(TupleSimplifierTest, KeepsPartialReorderedOrMixedTuples) {
  Simplify(R"(HloModule m
ENTRY e {
  p = (f32[2], f32[2], f32[2]) parameter(0)
  q = (f32[2], f32[2]) parameter(1)
  g0 = f32[2] get-tuple-element(p), index=0
  g1 = f32[2] get-tuple-element(p), index=1
  h1 = f32[2] get-tuple-element(q), index=1
  partial = (f32[2], f32[2]) tuple(g0, g1)
  swapped = (f32[2], f32[2]) tuple(g1, g0)
  mixed = (f32[2], f32[2]) tuple(g0, h1)
  ROOT r = ((f32[2], f32[2]), (f32[2], f32[2]), (f32[2], f32[2])) tuple(partial, swapped, mixed)
})", /*expect_change=*/false);
}

TEST(TupleSimplifierTest, LeavesFusionOutputsAlone) {
  Simplify(R"(HloModule m
fused {
  p = (f32[2], f32[2]) parameter(0)
  g0 = f32[2] get-tuple-element(p), index=0
  g1 = f32[2] get-tuple-element(p), index=1
  ROOT r = (f32[2], f32[2]) tuple(g0, g1)
}
ENTRY e {
  a = (f32[2], f32[2]) parameter(0)
  ROOT f = (f32[2], f32[2]) fusion(a), kind=kLoop, calls=fused
})", /*expect_change=*/false);
}

TEST(TupleSimplifierTest, SimplifiesWhileBodies) {
  auto module = Simplify(R"(HloModule m
cond { s = (s32[], f32[2]) parameter(0) i = s32[] get-tuple-element(s), index=0 n = s32[] constant(3) ROOT c = pred[] compare(i, n), direction=LT }
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  y = f32[2] add(x, x)
  t = (s32[], f32[2]) tuple(j, y)
  j2 = s32[] get-tuple-element(t), index=0
  y2 = f32[2] get-tuple-element(t), index=1
  ROOT r = (s32[], f32[2]) tuple(j2, y2)
}
ENTRY e {
  p = f32[2] parameter(0)
  z = s32[] constant(0)
  init = (s32[], f32[2]) tuple(z, p)
  w = (s32[], f32[2]) while(init), condition=cond, body=body
  ROOT out = f32[2] get-tuple-element(w), index=1
})");
  ASSERT_NE(module, nullptr);
  const HloComputation* body = module->GetComputationWithName("body");
  EXPECT_EQ(body->root_instruction()->operand(0)->name(), "j");
  EXPECT_EQ(body->root_instruction()->operand(1)->name(), "y");
  EXPECT_EQ(body->GetInstructionWithName("t"), nullptr);
}

TEST(TupleSimplifierTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<TupleSimplifier>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "tuple-simplifier changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
