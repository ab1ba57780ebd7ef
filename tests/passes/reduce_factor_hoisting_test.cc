#include "compiler/passes/reduce_factor_hoisting.h"

#include <cmath>
#include <string>

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
  // sum(-(dy * g * r)) -> -(sum(dy) * gamma * rstd) + 0, on the sum of dy that was there;
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
  // (+ 0: a sum from +0 is never -0, the negation of one is.)
  ASSERT_EQ(root->operand(0)->opcode(), HloOpcode::kAdd);
  const HloInstruction* neg = root->operand(0)->operand(0);
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
  zero = f32[] constant(0)
  ROOT r = f32[4,6] reduce(q, zero), dimensions={1}, to_apply=add
})");
  ASSERT_NE(module, nullptr);
  // (sum(x) * broadcast(2)) * broadcast(c) + 0, the factors in the order the product met them.
  const HloInstruction* sum = module->entry_computation()->root_instruction();
  ASSERT_EQ(sum->opcode(), HloOpcode::kAdd);
  const HloInstruction* root = sum->operand(0);
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
  // Integers have no signed zero: the negation is the root.
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kNegate);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReduce), 1);
}

// f32[8,6] x times broadcast(c) (c: f32[6]) or negated, summed over dimension 0 from `init`.
std::string SignedSums(std::string_view init) {
  return std::string(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,6] parameter(0)
  c = f32[6] parameter(1)
  cb = f32[8,6] broadcast(c), dimensions={1}
  p = f32[8,6] multiply(x, cb)
  n = f32[8,6] negate(x)
  zero = f32[] constant()") + std::string(init) + R"()
  by_c = f32[6] reduce(p, zero), dimensions={0}, to_apply=add
  negated = f32[6] reduce(n, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[6], f32[6]) tuple(by_c, negated)
})";
}

// The columns of x: +0s, -0s, +0s and -0s, finite values, an infinity, a NaN; c: 1, -1 or 0.
std::vector<Literal> SignedZeroInputs() {
  Literal x(Shape(PrimitiveType::F32, {8, 6})), c(Shape(PrimitiveType::F32, {6}));
  for (int64_t i = 0; i < 8; ++i) {
    x.SetFromDouble(i * 6 + 0, 0.0);
    x.SetFromDouble(i * 6 + 1, -0.0);
    x.SetFromDouble(i * 6 + 2, i % 2 ? -0.0 : 0.0);
    x.SetFromDouble(i * 6 + 3, i % 3 ? 1.5 : -3.0);
    x.SetFromDouble(i * 6 + 4, i == 5 ? INFINITY : 2.0);
    x.SetFromDouble(i * 6 + 5, i == 2 ? NAN : 0.0);
  }
  for (int64_t j = 0; j < 6; ++j) c.SetFromDouble(j, j % 3 == 0 ? 1.0 : j % 3 == 1 ? -1.0 : 0.0);
  std::vector<Literal> inputs;
  inputs.push_back(std::move(x));
  inputs.push_back(std::move(c));
  return inputs;
}

// Every element of the evaluated results the same: NaN in both, or the same value and sign.
::testing::AssertionResult SameBits(const HloModule& before, const HloModule& after,
                                    const std::vector<Literal>& inputs) {
  auto expected = EvaluateModule(before, inputs);
  auto actual = EvaluateModule(after, inputs);
  if (!expected.ok() || !actual.ok()) return ::testing::AssertionFailure() << "not evaluated";
  for (int64_t t = 0; t < expected->tuple_size(); ++t) {
    const Literal& e = expected->tuple_element(t);
    const Literal& a = actual->tuple_element(t);
    for (int64_t i = 0; i < e.element_count(); ++i) {
      const double want = e.GetAsDouble(i), got = a.GetAsDouble(i);
      const bool same = std::isnan(want) ? std::isnan(got)
                                         : got == want && std::signbit(got) == std::signbit(want);
      if (!same) {
        return ::testing::AssertionFailure() << "result " << t << " element " << i << ": " << got
                                             << " where the original gives " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ReduceFactorHoistingTest, ZerosKeepTheirSign) {
  // A sum from +0 is never -0, but -sum(x) of +0s and c * sum(x) with c = -1 were. The rewritten
  // sums add +0 last; the negation then gives the original's bits everywhere, and the product
  // here too (its factors are 1, -1 and 0, which round nothing).
  const std::string text = SignedSums("0");
  auto before = xlens::testing::ParseModuleOrDie(text);
  auto module = Hoist(text);
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(CountOpcode(*module, HloOpcode::kReduce), 1) << PrintModule(*module);
  EXPECT_TRUE(SameBits(*before, *module, SignedZeroInputs())) << PrintModule(*module);
}

TEST(ReduceFactorHoistingTest, LeavesAloneFloatSumsFromNegativeZero) {
  // From -0 a sum is -0 only where every addend is: c * sum(x) with c = -1 and x = [+0, -0, ...]
  // would be -0 where sum(x * c) is +0. Integer sums from zero are rewritten (above).
  const std::string text = SignedSums("-0");
  auto module = Hoist(text, /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_TRUE(SameBits(*xlens::testing::ParseModuleOrDie(text), *module, SignedZeroInputs()));
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
