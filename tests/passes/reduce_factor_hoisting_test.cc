#include "compiler/passes/reduce_factor_hoisting.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;
using xlens::testing::FindInstruction;
using xlens::testing::LiveReduces;

std::unique_ptr<HloModule> Hoist(std::string_view text, bool expect_change = true) {
  ReduceFactorHoisting pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

// Batch norm's backward sums over N, H and W as JAX writes them, each with its own reducer.
constexpr char kBatchNormSums[] = R"(HloModule m
add_a {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
add_b {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(b, a)
}
add_c {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
add_d {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[2,3,4,5] parameter(0)
  dy = f32[2,3,4,5] parameter(1)
  gamma = f32[5] parameter(2)
  mean = f32[5] parameter(3)
  rstd = f32[5] parameter(4)
  zero = f32[] constant(0)
  m = f32[2,3,4,5] broadcast(mean), dimensions={3}
  centred = f32[2,3,4,5] subtract(x, m)
  g = f32[2,3,4,5] broadcast(gamma), dimensions={3}
  r = f32[2,3,4,5] broadcast(rstd), dimensions={3}
  dyg = f32[2,3,4,5] multiply(dy, g)
  dygr = f32[2,3,4,5] multiply(dyg, r)
  neg = f32[2,3,4,5] negate(dygr)
  sum_neg = f32[5] reduce(neg, zero), dimensions={0,1,2}, to_apply=add_a
  prod = f32[2,3,4,5] multiply(centred, dyg)
  sum_prod = f32[5] reduce(prod, zero), dimensions={0,1,2}, to_apply=add_b
  scaled = f32[2,3,4,5] multiply(centred, r)
  scaled_dy = f32[2,3,4,5] multiply(scaled, dy)
  sum_scaled = f32[5] reduce(scaled_dy, zero), dimensions={0,1,2}, to_apply=add_c
  sum_dy = f32[5] reduce(dy, zero), dimensions={0,1,2}, to_apply=add_d
  ROOT t = (f32[5], f32[5], f32[5], f32[5], f32[2,3,4,5]) tuple(sum_neg, sum_prod, sum_scaled, sum_dy, dygr)
})";

TEST(ReduceFactorHoistingTest, BatchNormSumsReadOnlyWhatVariesAlongTheBatch) {
  auto module = Hoist(kBatchNormSums);
  ASSERT_NE(module, nullptr);
  // sum(-(dy * g * r)) -> -(sum(dy) * gamma * rstd), on the sum of dy that was there;
  // sum((x - m) * dy * g) and sum((x - m) * r * dy) -> one sum((x - m) * dy), times gamma or rstd.
  std::vector<const HloInstruction*> reduces = LiveReduces(*module);
  ASSERT_EQ(reduces.size(), 2u) << PrintModule(*module);
  const HloInstruction* sum_dy = FindInstruction(*module, "sum_dy");
  ASSERT_NE(sum_dy, nullptr);
  const HloInstruction* other = reduces[0] == sum_dy ? reduces[1] : reduces[0];
  ASSERT_EQ(other->operand(0)->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(other->operand(0)->operand(0)->name(), "centred");
  EXPECT_EQ(other->operand(0)->operand(1)->name(), "dy");
  const HloInstruction* root = module->entry_computation()->root_instruction();
  const HloInstruction* neg = root->operand(0);
  ASSERT_EQ(neg->opcode(), HloOpcode::kNegate);
  ASSERT_EQ(neg->operand(0)->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(neg->operand(0)->operand(1)->name(), "rstd");
  ASSERT_EQ(neg->operand(0)->operand(0)->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(neg->operand(0)->operand(0)->operand(0), sum_dy);
  EXPECT_EQ(neg->operand(0)->operand(0)->operand(1)->name(), "gamma");
  // The per-element product y still needs stays for it.
  EXPECT_EQ(root->operand(4)->name(), "dygr");
}

TEST(ReduceFactorHoistingTest, FactorsAreSpreadOverTheKeptDimensionsInTheirOrder) {
  // Kept dimensions 0 and 2 of f32[4,5,6]: a factor along dimension 2 becomes dimension 1 of
  // the sum, a scalar constant one is spread over both.
  auto module = Hoist(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,5,6] parameter(0)
  c = f32[6] parameter(1)
  two = f32[] constant(2)
  cb = f32[4,5,6] broadcast(c), dimensions={2}
  twos = f32[4,5,6] broadcast(two), dimensions={}
  p = f32[4,5,6] multiply(cb, x)
  q = f32[4,5,6] multiply(twos, p)
  zero = f32[] constant(-0)
  ROOT r = f32[4,6] reduce(q, zero), dimensions={1}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  // (sum(x) * broadcast(2)) * broadcast(c), the factors in the order the product met them.
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kMultiply);
  ASSERT_EQ(root->operand(1)->opcode(), HloOpcode::kBroadcast);
  EXPECT_EQ(root->operand(1)->operand(0)->name(), "c");
  EXPECT_EQ(root->operand(1)->dimensions(), std::vector<int64_t>{1});
  const HloInstruction* by_two = root->operand(0);
  ASSERT_EQ(by_two->opcode(), HloOpcode::kMultiply);
  EXPECT_EQ(by_two->operand(0)->opcode(), HloOpcode::kReduce);
  EXPECT_EQ(by_two->operand(0)->operand(0)->name(), "x");
  ASSERT_EQ(by_two->operand(1)->opcode(), HloOpcode::kBroadcast);
  EXPECT_TRUE(by_two->operand(1)->dimensions().empty());
  EXPECT_EQ(by_two->operand(1)->shape().dimensions(), (std::vector<int64_t>{4, 6}));
}

TEST(ReduceFactorHoistingTest, IntegerSumsAndNegationsToo) {
  auto module = Hoist(R"(HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  x = s32[7,3] parameter(0)
  c = s32[3] parameter(1)
  cb = s32[7,3] broadcast(c), dimensions={1}
  p = s32[7,3] multiply(x, cb)
  n = s32[7,3] negate(p)
  zero = s32[] constant(0)
  ROOT r = s32[3] reduce(n, zero), dimensions={0}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kNegate);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReduce), 1);
}

TEST(ReduceFactorHoistingTest, LeavesAloneWhatIsNotAnInvariantFactorOfASum) {
  // A broadcast along a reduced dimension varies along it; a maximum is no sum; a non-zero init
  // would be scaled with the sum; a broadcast alone leaves nothing to sum; a divisor is not a
  // factor.
  Hoist(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] maximum(a, b)
}
ENTRY e {
  x = f32[4,6] parameter(0)
  c = f32[4] parameter(1)
  d = f32[6] parameter(2)
  cb = f32[4,6] broadcast(c), dimensions={0}
  db = f32[4,6] broadcast(d), dimensions={1}
  along = f32[4,6] multiply(x, cb)
  zero = f32[] constant(0)
  one = f32[] constant(1)
  r0 = f32[6] reduce(along, zero), dimensions={0}, to_apply=add
  byd = f32[4,6] multiply(x, db)
  r1 = f32[6] reduce(byd, zero), dimensions={0}, to_apply=max
  r2 = f32[6] reduce(byd, one), dimensions={0}, to_apply=add
  r3 = f32[6] reduce(db, zero), dimensions={0}, to_apply=add
  q = f32[4,6] divide(x, db)
  r4 = f32[6] reduce(q, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[6], f32[6], f32[6], f32[6], f32[6]) tuple(r0, r1, r2, r3, r4)
})", /*expect_change=*/false);
}

// A product that reuses itself has 2^n leaves in n instructions (here 2^61): the walk gives up
// after a bounded number of steps (which bounds its depth on a long chain too) and leaves such a
// sum alone, where it ran for ever.
TEST(ReduceFactorHoistingTest, ASelfReusingProductIsLeftAloneQuickly) {
  std::string squares = R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[4,8] parameter(0)
  c = f32[4] parameter(1)
  zero = f32[] constant(0)
  m0 = f32[4,8] multiply(x, x)
)";
  for (int i = 1; i <= 60; ++i) {
    squares += "  m" + std::to_string(i) + " = f32[4,8] multiply(m" + std::to_string(i - 1) + ", m" +
               std::to_string(i - 1) + ")\n";
  }
  squares += R"(  bc = f32[4,8] broadcast(c), dimensions={0}
  p = f32[4,8] multiply(m60, bc)
  ROOT r = f32[4] reduce(p, zero), dimensions={1}, to_apply=add
}
)";
  // Not evaluated: x^(2^61) is all infinities and NaNs.
  ReduceFactorHoisting pass;
  std::unique_ptr<HloModule> module =
      xlens::testing::RunPassOnText(pass, squares, /*expect_change=*/false, /*evaluable=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kReduce);
}

}  // namespace
}  // namespace xlens
