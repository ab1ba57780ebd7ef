#include "compiler/passes/shifted_moments.h"

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::FindInstruction;
using xlens::testing::LiveReduces;

// The sums below are those reduce-factor-hoisting leaves (it runs before shifted-moments in the
// pipeline).

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
  EXPECT_EQ(FindInstruction(*module, "sum_x"), nullptr);
  const HloInstruction* sum_dy = FindInstruction(*module, "sum_dy");
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

TEST(ShiftedMomentsTest, LargeMeansAndOutlyingSamplesStayWithinTheShiftsBound) {
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

// What an element is: NaN, an infinity of either sign, or finite.
int Kind(double value) {
  if (std::isnan(value)) return 0;
  if (std::isinf(value)) return value > 0 ? 1 : -1;
  return 2;
}

// kCentredSums evaluated in f32 before and after the rewrite, on x and dy in [-1, 1] with
// `edit` applied (x, dy: 32 batch entries of 24 elements, channel i % 4): every element is NaN,
// infinite with the same sign, or finite in both, finite ones within 1e-4.
::testing::AssertionResult SameNonFiniteResults(
    const std::function<void(std::vector<float>& x, std::vector<float>& dy)>& edit) {
  auto before = xlens::testing::ParseModuleOrDie(kCentredSums);
  auto after = xlens::testing::ParseModuleOrDie(kCentredSums);
  ShiftedMoments pass;
  auto changed = xlens::testing::RunPassChecked(pass, *after);
  if (!changed.ok() || !*changed) return ::testing::AssertionFailure() << "not rewritten";
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> x(768), dy(768);
  for (float& v : x) v = unit(rng);
  for (float& v : dy) v = unit(rng);
  edit(x, dy);
  std::vector<Literal> args;
  for (const std::vector<float>* values : {&x, &dy}) {
    Literal literal(Shape(PrimitiveType::F32, {32, 2, 3, 4}));
    for (int64_t i = 0; i < literal.element_count(); ++i) literal.SetFromDouble(i, (*values)[i]);
    args.push_back(std::move(literal));
  }
  auto expected = EvaluateModule(*before, args);
  auto actual = EvaluateModule(*after, args);
  if (!expected.ok() || !actual.ok()) return ::testing::AssertionFailure() << "not evaluated";
  for (int64_t t = 0; t < expected->tuple_size(); ++t) {
    const Literal& e = expected->tuple_element(t);
    const Literal& a = actual->tuple_element(t);
    for (int64_t i = 0; i < e.element_count(); ++i) {
      const double want = e.GetAsDouble(i), got = a.GetAsDouble(i);
      if (Kind(want) != Kind(got) ||
          (Kind(want) == 2 && std::abs(got - want) > 1e-4 + 1e-4 * std::abs(want))) {
        return ::testing::AssertionFailure() << "result " << t << " element " << i << ": " << got
                                             << " where the unrewritten module gives " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// Element i of batch entry b in channel c (of the 6 that entry holds in each channel).
int64_t At(int64_t b, int64_t c, int64_t i = 0) { return b * 24 + i * 4 + c; }

TEST(ShiftedMomentsTest, InfinitiesInTheFactorsStayInfinite) {
  // An infinity in dy, outside the sample (channel 0) or in it (1), a NaN (2), and infinities of
  // both signs (3): the unrewritten sum((x - mean) * dy) is infinite or NaN, and
  // sum(v * dy) - d * sum(dy) would be inf - inf. x is 5 or -5 there, so that x - K and x - mean
  // have one sign.
  EXPECT_TRUE(SameNonFiniteResults([](std::vector<float>& x, std::vector<float>& dy) {
    const float inf = std::numeric_limits<float>::infinity();
    x[At(20, 0)] = 5, dy[At(20, 0)] = inf;
    x[At(0, 1, 2)] = 5, dy[At(0, 1, 2)] = -inf;
    dy[At(7, 2)] = std::numeric_limits<float>::quiet_NaN();
    x[At(3, 3)] = 5, dy[At(3, 3)] = inf;
    x[At(9, 3, 1)] = -5, dy[At(9, 3, 1)] = -inf;
  }));
}

TEST(ShiftedMomentsTest, InfinitiesInXGiveTheUnrewrittenMeanAndNaNs) {
  // An infinity in x outside the sample (channel 0) or in it (1: K is infinite and the shift is
  // zero), a NaN (2), and infinities of both signs (3): the mean is infinite or NaN as sum(x) / n
  // is, and the centred sums NaN, as x - mean is NaN where x is the infinite mean.
  EXPECT_TRUE(SameNonFiniteResults([](std::vector<float>& x, std::vector<float>&) {
    const float inf = std::numeric_limits<float>::infinity();
    x[At(20, 0)] = inf;
    x[At(0, 1, 3)] = -inf;
    x[At(11, 2)] = std::numeric_limits<float>::quiet_NaN();
    x[At(0, 3)] = inf;
    x[At(30, 3)] = -inf;
  }));
}

TEST(ShiftedMomentsTest, ZerosKeepTheirSign) {
  // x of +0s (channels 0 and 1), -0s (2) and a constant 3 (3), dy of both signs: every centred
  // term is a zero, and the sums from +0 are +0. sum(-(x - mean) * dy) was rewritten to the
  // negation of sum(v * dy) - d * sum(dy), a +0: -0.
  auto before = xlens::testing::ParseModuleOrDie(kCentredSums);
  auto after = Shift(kCentredSums);
  ASSERT_NE(after, nullptr);
  std::vector<Literal> args;
  for (int k = 0; k < 2; ++k) {
    Literal literal(Shape(PrimitiveType::F32, {32, 2, 3, 4}));
    for (int64_t i = 0; i < literal.element_count(); ++i) {
      const int64_t c = i % 4;
      literal.SetFromDouble(i, k == 1 ? (i % 3 ? 0.5 : -2.0) : c < 2 ? 0.0 : c == 2 ? -0.0 : 3.0);
    }
    args.push_back(std::move(literal));
  }
  auto expected = EvaluateModule(*before, args);
  auto actual = EvaluateModule(*after, args);
  ASSERT_TRUE(expected.ok() && actual.ok());
  for (int64_t t = 0; t < expected->tuple_size(); ++t) {
    const Literal& e = expected->tuple_element(t);
    const Literal& a = actual->tuple_element(t);
    for (int64_t i = 0; i < e.element_count(); ++i) {
      const double want = e.GetAsDouble(i), got = a.GetAsDouble(i);
      EXPECT_TRUE(got == want && std::signbit(got) == std::signbit(want))
          << "result " << t << " element " << i << ": " << got << " where the unrewritten module gives "
          << want;
    }
  }
}

TEST(ShiftedMomentsTest, LeavesAloneSumsFromNegativeZero) {
  // From -0 a sum is -0 only where every addend is: x of -0s has the mean -0, but K + d is
  // -0 + +0 (K = -0, each v = -0 - -0 = +0).
  std::string text = kCentredSums;
  const std::string from = "zero = f32[] constant(0)";
  text.replace(text.find(from), from.size(), "zero = f32[] constant(-0)");
  Shift(text, /*expect_change=*/false);
}

TEST(ShiftedMomentsTest, LeavesAloneHalfPrecisionSums) {
  // In F16 and BF16 the variance's error after the cancellation, up to about 32 ulps, would be
  // 1.6% and 12%.
  for (const char* type : {"f16", "bf16"}) {
    std::string narrow = kCentredSums;
    for (size_t at = narrow.find("f32"); at != std::string::npos; at = narrow.find("f32", at)) {
      narrow.replace(at, 3, type);
    }
    auto module = xlens::testing::ParseModuleOrDie(narrow);
    ASSERT_NE(module, nullptr) << type;
    ShiftedMoments pass;
    auto changed = xlens::testing::RunPassChecked(pass, *module);
    ASSERT_TRUE(changed.ok()) << type;
    EXPECT_FALSE(*changed) << type;
  }
}

TEST(ShiftedMomentsTest, LeavesAloneDividesOfWhatIsNoSum) {
  // A divide whose dividend is a parameter, a constant or an integer sum: nothing to shift, and
  // nothing of the dividend's operands to read (a parameter has none).
  Shift(R"(HloModule m
add {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  ROOT s = s32[] add(a, b)
}
ENTRY e {
  p = f32[8,4] parameter(0)
  two = f32[] constant(2)
  tb = f32[8,4] broadcast(two), dimensions={}
  half = f32[8,4] divide(p, tb)
  q = f32[8,4] divide(tb, p)
  i = s32[8,4] parameter(1)
  zero = s32[] constant(0)
  si = s32[4] reduce(i, zero), dimensions={0}, to_apply=add
  eight = s32[] constant(8)
  eb = s32[4] broadcast(eight), dimensions={}
  mi = s32[4] divide(si, eb)
  ROOT t = (f32[8,4], f32[8,4], s32[4]) tuple(half, q, mi)
})",
        /*expect_change=*/false);
}

}  // namespace
}  // namespace xlens
