#include "compiler/passes/reshape_mover.h"

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

std::unique_ptr<HloModule> Move(std::string_view text, bool expect_change = true) {
  ReshapeMover pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

TEST(ReshapeMoverTest, SinksEquivalentReshapesThroughAChain) {
  auto module = Move(R"(HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[2,3] parameter(1)
  ra = f32[6] reshape(a), metadata={op_name="flatten"}
  rb = f32[6] reshape(b)
  s = f32[6] add(ra, rb)
  two = f32[] constant(2)
  twos = f32[6] broadcast(two), dimensions={}
  m = f32[6] multiply(s, twos)
  ROOT n = f32[6] negate(m)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kReshape);
  EXPECT_EQ(root->metadata.op_name, "flatten");
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kNegate);
  EXPECT_EQ(root->operand(0)->shape().dimensions(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReshape), 1);
}

TEST(ReshapeMoverTest, TransposesMoveAndConstantsAreTransposedBack) {
  auto module = Move(R"(HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  t = f32[3,2] transpose(a), dimensions={1,0}
  c = f32[3,2] constant({ {1, 2}, {3, 4}, {5, 6} })
  ROOT s = f32[3,2] subtract(t, c)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kTranspose);
  ASSERT_EQ(root->operand(0)->opcode(), HloOpcode::kSubtract);
  EXPECT_EQ(root->operand(0)->operand(1)->opcode(), HloOpcode::kTranspose);
}

TEST(ReshapeMoverTest, LeavesMismatchedOrPlainOperandsAlone) {
  Move(R"(HloModule m
ENTRY e {
  a = f32[2,3] parameter(0)
  b = f32[3,2] parameter(1)
  c = f32[6] parameter(2)
  ra = f32[6] reshape(a)
  rb = f32[6] reshape(b)
  ta = f32[3,2] transpose(a), dimensions={1,0}
  x = f32[6] add(ra, rb)
  y = f32[6] add(ra, c)
  z = f32[3,2] add(ta, b)
  k1 = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  k2 = f32[6] constant({1, 2, 3, 4, 5, 6})
  rk = f32[6] reshape(k1)
  k = f32[6] multiply(rk, k2)
  ROOT t = (f32[6], f32[6], f32[3,2], f32[6]) tuple(x, y, z, k)
})", /*expect_change=*/false);
}

TEST(ReshapeMoverTest, SelectAndCompareChangeTypeButMove) {
  auto module = Move(R"(HloModule m
ENTRY e {
  a = f32[4,2] parameter(0)
  b = f32[4,2] parameter(1)
  ra = f32[8] reshape(a)
  rb = f32[8] reshape(b)
  p = pred[8] compare(ra, rb), direction=GT
  ROOT s = f32[8] select(p, ra, rb)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kReshape);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kSelect);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReshape), 1);
}

TEST(ReshapeMoverTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<ReshapeMover>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "reshape-mover changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
