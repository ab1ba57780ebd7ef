#include "compiler/passes/reduce_factor_hoisting.h"
#include "compiler/passes/shifted_moments.h"

#include <cmath>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;

std::unique_ptr<HloModule> Hoist(std::string_view text, bool expect_change = true) {
  ReduceFactorHoisting pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

const HloInstruction* Find(const HloModule& module, std::string_view name) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->name() == name) return i;
  }
  return nullptr;
}

// The reduces of the entry that are still used.
std::vector<const HloInstruction*> LiveReduces(const HloModule& module) {
  std::vector<const HloInstruction*> out;
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kReduce && (i->user_count() > 0 || i->IsRoot())) out.push_back(i);
  }
  return out;
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
  const HloInstruction* sum_dy = Find(*module, "sum_dy");
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

// shifted-moments rewrites the same sums one step further (reduce-factor-hoisting runs before it
// in the pipeline); its cases share this binary.

// A batch norm's statistics and backward sums over N, H and W of f32[32,2,3,4] (C = 4), as JAX
// writes them after reduce-factor-hoisting: the mean, the variance, sum((x - mean) * dy) and
// sum(x - mean), beside sum(dy).
constexpr char kCentredSums[] = R"(HloModule m
add_a {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
add_b {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[32,2,3,4] parameter(0)
  dy = f32[32,2,3,4] parameter(1)
  zero = f32[] constant(0)
  sum_x = f32[4] reduce(x, zero), dimensions={0,1,2}, to_apply=add_a
  n = f32[] constant(192)
  nb = f32[4] broadcast(n), dimensions={}
  mean = f32[4] divide(sum_x, nb)
  m = f32[32,2,3,4] broadcast(mean), dimensions={3}
  centred = f32[32,2,3,4] subtract(x, m)
  square = f32[32,2,3,4] multiply(centred, centred)
  sum_sq = f32[4] reduce(square, zero), dimensions={0,1,2}, to_apply=add_b
  var = f32[4] divide(sum_sq, nb)
  prod = f32[32,2,3,4] multiply(centred, dy)
  neg = f32[32,2,3,4] negate(prod)
  sum_prod = f32[4] reduce(neg, zero), dimensions={0,1,2}, to_apply=add_a
  sum_c = f32[4] reduce(centred, zero), dimensions={0,1,2}, to_apply=add_b
  sum_dy = f32[4] reduce(dy, zero), dimensions={0,1,2}, to_apply=add_b
  ROOT t = (f32[4], f32[4], f32[4], f32[4], f32[4], f32[32,2,3,4]) tuple(mean, var, sum_prod, sum_c, sum_dy, centred)
})";

std::unique_ptr<HloModule> Shift(std::string_view text, bool expect_change = true) {
  ShiftedMoments pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

// Whether `x` reads, through anything, a reduce of an operand of `elements` elements.
bool ReadsSumOver(const HloInstruction* x, int64_t elements) {
  for (const HloInstruction* operand : x->operands()) {
    if (operand->opcode() == HloOpcode::kReduce &&
        operand->operand(0)->shape().num_elements() == elements) {
      return true;
    }
    if (ReadsSumOver(operand, elements)) return true;
  }
  return false;
}

TEST(ShiftedMomentsTest, CentredSumsWaitOnlyForTheSample) {
  auto module = Shift(kCentredSums);
  ASSERT_NE(module, nullptr);
  // Every live sum over x and dy reads only x, dy and the sample's mean (a sum over f32[1,2,3,4]):
  // one sweep. The sample sum is the one over the first of the 32 batch entries.
  int sweeps = 0, samples = 0;
  for (const HloInstruction* reduce : LiveReduces(*module)) {
    if (reduce->operand(0)->shape().num_elements() == 32 * 24) {
      ++sweeps;
      EXPECT_FALSE(ReadsSumOver(reduce, 32 * 24)) << reduce->name();
    } else {
      ++samples;
      ASSERT_EQ(reduce->operand(0)->opcode(), HloOpcode::kSlice);
      EXPECT_EQ(reduce->operand(0)->shape().dimensions(), (std::vector<int64_t>{1, 2, 3, 4}));
    }
  }
  // sum(x - K), sum((x - K)^2), sum((x - K) * dy) and sum(dy), which JAX's own sum serves.
  EXPECT_EQ(sweeps, 4) << PrintModule(*module);
  EXPECT_EQ(samples, 1);
  // The sum of x is gone; JAX's sum of dy serves the rewritten sums too.
  EXPECT_EQ(Find(*module, "sum_x"), nullptr);
  const HloInstruction* sum_dy = Find(*module, "sum_dy");
  ASSERT_NE(sum_dy, nullptr);
  EXPECT_GT(sum_dy->user_count(), 1);
}

// The rewritten module in f32 against the original evaluated in f64, x in `values` (per batch
// entry and channel) plus noise in [-1, 1], dy in [-1, 1]: within `abs` + `rel` * |expected|.
::testing::AssertionResult ShiftedMatches(const std::function<double(int64_t, int64_t)>& values,
                                          double abs, double rel) {
  std::string wide = kCentredSums;
  for (size_t at = wide.find("f32"); at != std::string::npos; at = wide.find("f32", at)) {
    wide.replace(at, 3, "f64");
  }
  auto reference = xlens::testing::ParseModuleOrDie(wide);
  auto shifted = xlens::testing::ParseModuleOrDie(kCentredSums);
  ShiftedMoments pass;
  auto changed = xlens::testing::RunPassChecked(pass, *shifted);
  if (!changed.ok() || !*changed) return ::testing::AssertionFailure() << "not rewritten";
  std::vector<Literal> narrow_args, wide_args;
  for (int k = 0; k < 2; ++k) {
    Literal narrow(Shape(PrimitiveType::F32, {32, 2, 3, 4}));
    Literal wide_arg(Shape(PrimitiveType::F64, {32, 2, 3, 4}));
    std::mt19937 rng(7 + k);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    for (int64_t i = 0; i < narrow.element_count(); ++i) {
      // i / 24: the batch entry; i % 4: the channel.
      const float v = static_cast<float>(k == 0 ? values(i / 24, i % 4) + unit(rng) : unit(rng));
      narrow.SetFromDouble(i, v);
      wide_arg.SetFromDouble(i, v);
    }
    narrow_args.push_back(std::move(narrow));
    wide_args.push_back(std::move(wide_arg));
  }
  auto expected = EvaluateModule(*reference, wide_args);
  auto actual = EvaluateModule(*shifted, narrow_args);
  if (!expected.ok() || !actual.ok()) return ::testing::AssertionFailure() << "not evaluated";
  for (int64_t t = 0; t < expected->tuple_size(); ++t) {
    const Literal& e = expected->tuple_element(t);
    const Literal& a = actual->tuple_element(t);
    for (int64_t i = 0; i < e.element_count(); ++i) {
      const double want = e.GetAsDouble(i), got = a.GetAsDouble(i);
      if (std::abs(got - want) > abs + rel * std::abs(want)) {
        return ::testing::AssertionFailure() << "result " << t << " element " << i << ": " << got
                                             << " where f64 gives " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(ShiftedMomentsTest, LargeMeansAndOutlyingSamplesKeepTheTwoPassPrecision) {
  // About the sample's mean the variance's cancellation grows with (mean - K)^2 / var, bounded by
  // the sample's share of the batch (1/32 here) whatever the data: E[x^2] - E[x]^2 (K = 0) is off
  // by 1e-1 relative at a mean of 1000. (The f32 two-pass form is off by 1.6e-3 in
  // sum((x - mean) * dy) there: its mean's rounding, times sum(dy).)
  EXPECT_TRUE(ShiftedMatches([](int64_t, int64_t c) { return 1000.0 * (c + 1); }, 1e-4, 1e-5));
  // The sample (batch entry 0) far from the rest in channel 1, all of the batch but the sample
  // far away in channel 2, and one outlier in the sample in channel 3. Channels 1 and 2 are the
  // worst case, (mean - K)^2 / var = 31: the variance is off by 1.1e-5 relative (the two-pass
  // form's by 3e-7); the benchmark's tolerance is 2e-3.
  EXPECT_TRUE(ShiftedMatches(
      [](int64_t b, int64_t c) {
        if (c == 1) return b == 0 ? 1e4 : 0.0;
        if (c == 2) return b == 0 ? 0.0 : -3e3;
        return c == 3 && b == 0 ? 1e3 : 0.0;
      },
      1e-4, 3e-5));
}

TEST(ShiftedMomentsTest, LeavesAloneRowsAndWhatIsNoPolynomialOfTheMean) {
  // A sum over the minor dimension (a layer norm's, whose rows are read from cache); a sum of
  // exp(x - mean) and one of the cube of x - mean, which the shift cannot expand; a mean over
  // dimensions other than the sum's.
  Shift(R"(HloModule m
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,16] parameter(0)
  zero = f32[] constant(0)
  rows = f32[8] reduce(x, zero), dimensions={1}, to_apply=add
  n16 = f32[] constant(16)
  n16b = f32[8] broadcast(n16), dimensions={}
  row_mean = f32[8] divide(rows, n16b)
  rm = f32[8,16] broadcast(row_mean), dimensions={0}
  rc = f32[8,16] subtract(x, rm)
  rsq = f32[8,16] multiply(rc, rc)
  row_var = f32[8] reduce(rsq, zero), dimensions={1}, to_apply=add
  cols = f32[16] reduce(x, zero), dimensions={0}, to_apply=add
  n8 = f32[] constant(8)
  n8b = f32[16] broadcast(n8), dimensions={}
  col_mean = f32[16] divide(cols, n8b)
  cm = f32[8,16] broadcast(col_mean), dimensions={1}
  cc = f32[8,16] subtract(x, cm)
  e = f32[8,16] exponential(cc)
  sum_e = f32[16] reduce(e, zero), dimensions={0}, to_apply=add
  sq = f32[8,16] multiply(cc, cc)
  cube = f32[8,16] multiply(sq, cc)
  sum_cube = f32[16] reduce(cube, zero), dimensions={0}, to_apply=add
  ROOT t = (f32[8], f32[16], f32[16]) tuple(row_var, sum_e, sum_cube)
})", /*expect_change=*/false);
}

}  // namespace
}  // namespace xlens
