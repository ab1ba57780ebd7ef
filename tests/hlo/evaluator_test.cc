// The reference evaluator on elementwise instructions, for every class of element type, and on
// the errors it must give instead of results.
#include "compiler/hlo/evaluator.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <numbers>
#include <thread>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "evaluator_test_util.h"
#include "nested_modules.h"

namespace xlens {
namespace {

using ::testing::DoubleEq;
using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;
using xlens::testing::DoubleValues;
using xlens::testing::EvaluateText;
using xlens::testing::MakeLiteral;
using xlens::testing::Values;

constexpr int32_t kIntMin = std::numeric_limits<int32_t>::min();
constexpr int32_t kIntMax = std::numeric_limits<int32_t>::max();

// Evaluates `text`, failing the test on an error.
Literal Eval(std::string_view text, const std::vector<Literal>& arguments = {}) {
  StatusOr<Literal> result = EvaluateText(text, arguments);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : Literal();
}

std::string EvalError(std::string_view text, const std::vector<Literal>& arguments = {}) {
  StatusOr<Literal> result = EvaluateText(text, arguments);
  EXPECT_FALSE(result.ok()) << "evaluated, but should have failed:\n" << text;
  return result.ok() ? "" : result.status().message();
}

TEST(EvaluatorTest, AddsParameters) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  ROOT add = f32[3] add(a, b)
})",
                        {MakeLiteral<float>(PrimitiveType::F32, {3}, {1, 2, 3}),
                         MakeLiteral<float>(PrimitiveType::F32, {3}, {0.5f, -2, 10})});
  EXPECT_THAT(Values<float>(result), ElementsAre(1.5f, 0, 13));
}

TEST(EvaluatorTest, IntegerDivisionAndRemainderFollowXla) {
  constexpr std::string_view kText = R"(HloModule m
ENTRY e {
  a = s32[5] constant({7, -7, 5, -2147483648, -2147483648})
  b = s32[5] constant({2, 2, 0, -1, 0})
  d = s32[5] divide(a, b)
  r = s32[5] remainder(a, b)
  ROOT t = (s32[5], s32[5]) tuple(d, r)
})";
  Literal result = Eval(kText);
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(3, -3, -1, kIntMin, -1));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(1, -1, 5, 0, kIntMin));
}

TEST(EvaluatorTest, UnsignedDivisionByZeroIsAllOnes) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = u32[2] constant({9, 9})
  b = u32[2] constant({0, 4})
  d = u32[2] divide(a, b)
  r = u32[2] remainder(a, b)
  ROOT t = (u32[2], u32[2]) tuple(d, r)
})");
  EXPECT_THAT(Values<uint32_t>(result.tuple_element(0)), ElementsAre(4294967295u, 2u));
  EXPECT_THAT(Values<uint32_t>(result.tuple_element(1)), ElementsAre(9u, 1u));
}

TEST(EvaluatorTest, ShiftsByBitWidthOrMore) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[5] constant({-8, 1, 1, -8, 5})
  n = s32[5] constant({1, 31, 32, 40, -1})
  shl = s32[5] shift-left(a, n)
  srl = s32[5] shift-right-logical(a, n)
  sra = s32[5] shift-right-arithmetic(a, n)
  ROOT t = (s32[5], s32[5], s32[5]) tuple(shl, srl, sra)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(-16, kIntMin, 0, 0, 0));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(2147483644, 0, 0, 0, 0));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(2)), ElementsAre(-4, 0, 0, -1, 0));
}

TEST(EvaluatorTest, ArithmeticShiftOfUnsignedUsesTheSignBit) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = u8[3] constant({128, 128, 64})
  n = u8[3] constant({1, 9, 9})
  ROOT sra = u8[3] shift-right-arithmetic(a, n)
})");
  EXPECT_THAT(Values<uint8_t>(result), ElementsAre(192, 255, 0));
}

TEST(EvaluatorTest, IntegerArithmeticWraps) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = u8[2] constant({200, 16})
  b = u8[2] constant({100, 16})
  add = u8[2] add(a, b)
  mul = u8[2] multiply(a, b)
  c = u16[1] constant({65535})
  sq = u16[1] multiply(c, c)
  d = s8[2] constant({100, -128})
  e = s8[2] constant({3, -1})
  smul = s8[2] multiply(d, e)
  z = u32[1] constant({0})
  o = u32[1] constant({1})
  sub = u32[1] subtract(z, o)
  ROOT t = (u8[2], u8[2], u16[1], s8[2], u32[1]) tuple(add, mul, sq, smul, sub)
})");
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(0)), ElementsAre(44, 32));
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(1)), ElementsAre(32, 0));
  EXPECT_THAT(Values<uint16_t>(result.tuple_element(2)), ElementsAre(1));
  EXPECT_THAT(Values<int8_t>(result.tuple_element(3)), ElementsAre(44, -128));
  EXPECT_THAT(Values<uint32_t>(result.tuple_element(4)), ElementsAre(4294967295u));
}

TEST(EvaluatorTest, IntegerPower) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[7] constant({2, 1, -1, -1, 0, 3, 2})
  b = s32[7] constant({10, -5, -3, -4, -1, 0, 31})
  ROOT p = s32[7] power(a, b)
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(1024, 1, -1, 1, 0, 1, kIntMin));
}

TEST(EvaluatorTest, FloatMaxMinPropagateNan) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[4] constant({nan, 1, -0, 3})
  b = f32[4] constant({1, nan, 0, 2})
  max = f32[4] maximum(a, b)
  min = f32[4] minimum(a, b)
  ROOT t = (f32[4], f32[4]) tuple(max, min)
})");
  std::vector<float> max = Values<float>(result.tuple_element(0));
  std::vector<float> min = Values<float>(result.tuple_element(1));
  EXPECT_TRUE(std::isnan(max[0]) && std::isnan(max[1]));
  EXPECT_TRUE(std::isnan(min[0]) && std::isnan(min[1]));
  EXPECT_EQ(max[2], 0.0f);
  EXPECT_FALSE(std::signbit(max[2]));
  EXPECT_TRUE(std::signbit(min[2]));
  EXPECT_EQ(max[3], 3.0f);
  EXPECT_EQ(min[3], 2.0f);
}

TEST(EvaluatorTest, CompareFloatWithNan) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[3] constant({nan, 1, -0})
  b = f32[3] constant({nan, 2, 0})
  eq = pred[3] compare(a, b), direction=EQ
  ne = pred[3] compare(a, b), direction=NE
  lt = pred[3] compare(a, b), direction=LT
  ge = pred[3] compare(a, b), direction=GE
  ROOT t = (pred[3], pred[3], pred[3], pred[3]) tuple(eq, ne, lt, ge)
})");
  EXPECT_THAT(Values<bool>(result.tuple_element(0)), ElementsAre(false, false, true));
  EXPECT_THAT(Values<bool>(result.tuple_element(1)), ElementsAre(true, true, false));
  EXPECT_THAT(Values<bool>(result.tuple_element(2)), ElementsAre(false, true, false));
  EXPECT_THAT(Values<bool>(result.tuple_element(3)), ElementsAre(false, false, true));
}

TEST(EvaluatorTest, CompareTotalOrderAndUnsigned) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[4] constant({-0, nan, -inf, -nan})
  b = f32[4] constant({0, inf, -1, -inf})
  lt = pred[4] compare(a, b), direction=LT, type=TOTALORDER
  i = s32[2] constant({-1, 1})
  j = s32[2] constant({1, 2})
  gt = pred[2] compare(i, j), direction=GT, type=UNSIGNED
  ROOT t = (pred[4], pred[2]) tuple(lt, gt)
})");
  EXPECT_THAT(Values<bool>(result.tuple_element(0)), ElementsAre(true, false, true, true));
  EXPECT_THAT(Values<bool>(result.tuple_element(1)), ElementsAre(true, false));
}

TEST(EvaluatorTest, PredicateLogic) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = pred[4] constant({false, false, true, true})
  b = pred[4] constant({false, true, false, true})
  and = pred[4] and(a, b)
  or = pred[4] or(a, b)
  xor = pred[4] xor(a, b)
  not = pred[4] not(a)
  add = pred[4] add(a, b)
  ROOT t = (pred[4], pred[4], pred[4], pred[4], pred[4]) tuple(and, or, xor, not, add)
})");
  EXPECT_THAT(Values<bool>(result.tuple_element(0)), ElementsAre(false, false, false, true));
  EXPECT_THAT(Values<bool>(result.tuple_element(1)), ElementsAre(false, true, true, true));
  EXPECT_THAT(Values<bool>(result.tuple_element(2)), ElementsAre(false, true, true, false));
  EXPECT_THAT(Values<bool>(result.tuple_element(3)), ElementsAre(true, true, false, false));
  EXPECT_THAT(Values<bool>(result.tuple_element(4)), ElementsAre(false, true, true, true));
}

TEST(EvaluatorTest, IntegerUnaryOps) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[4] constant({-3, -2147483648, 0, 7})
  abs = s32[4] abs(a)
  neg = s32[4] negate(a)
  sign = s32[4] sign(a)
  not = s32[4] not(a)
  pop = s32[4] popcnt(a)
  ROOT t = (s32[4], s32[4], s32[4], s32[4], s32[4]) tuple(abs, neg, sign, not, pop)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(3, kIntMin, 0, 7));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(3, kIntMin, 0, -7));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(2)), ElementsAre(-1, -1, 0, 1));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(3)), ElementsAre(2, kIntMax, -1, -8));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(4)), ElementsAre(31, 1, 0, 3));
}

TEST(EvaluatorTest, FloatRoundingAndSign) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[6] constant({0.5, 1.5, 2.5, -0.5, -2.7, nan})
  even = f32[6] round-nearest-even(a)
  afz = f32[6] round-nearest-afz(a)
  floor = f32[6] floor(a)
  ceil = f32[6] ceil(a)
  sign = f32[6] sign(a)
  ROOT t = (f32[6], f32[6], f32[6], f32[6], f32[6]) tuple(even, afz, floor, ceil, sign)
})");
  std::vector<float> even = Values<float>(result.tuple_element(0));
  EXPECT_THAT(std::vector<float>(even.begin(), even.end() - 1), ElementsAre(0, 2, 2, -0.0f, -3));
  EXPECT_TRUE(std::signbit(even[3]));
  std::vector<float> afz = Values<float>(result.tuple_element(1));
  EXPECT_THAT(std::vector<float>(afz.begin(), afz.end() - 1), ElementsAre(1, 2, 3, -1, -3));
  std::vector<float> floor = Values<float>(result.tuple_element(2));
  EXPECT_THAT(std::vector<float>(floor.begin(), floor.end() - 1), ElementsAre(0, 1, 2, -1, -3));
  std::vector<float> ceil = Values<float>(result.tuple_element(3));
  EXPECT_THAT(std::vector<float>(ceil.begin(), ceil.end() - 1), ElementsAre(1, 2, 3, -0.0f, -2));
  std::vector<float> sign = Values<float>(result.tuple_element(4));
  EXPECT_THAT(std::vector<float>(sign.begin(), sign.end() - 1), ElementsAre(1, 1, 1, -1, -1));
  EXPECT_TRUE(std::isnan(sign[5]));
}

TEST(EvaluatorTest, SignKeepsSignedZeros) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f64[2] constant({0, -0})
  ROOT sign = f64[2] sign(a)
})");
  std::vector<double> sign = Values<double>(result);
  EXPECT_EQ(sign[0], 0.0);
  EXPECT_FALSE(std::signbit(sign[0]));
  EXPECT_TRUE(std::signbit(sign[1]));
}

TEST(EvaluatorTest, TranscendentalFunctions) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f64[2] constant({0.25, 4})
  exp = f64[2] exponential(a)
  expm1 = f64[2] exponential-minus-one(a)
  log = f64[2] log(a)
  log1p = f64[2] log-plus-one(a)
  sqrt = f64[2] sqrt(a)
  rsqrt = f64[2] rsqrt(a)
  cbrt = f64[2] cbrt(a)
  tanh = f64[2] tanh(a)
  logistic = f64[2] logistic(a)
  sin = f64[2] sine(a)
  cos = f64[2] cosine(a)
  atan2 = f64[2] atan2(a, a)
  pow = f64[2] power(a, a)
  ROOT t = (f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2], f64[2]) tuple(exp, expm1, log, log1p, sqrt, rsqrt, cbrt, tanh, logistic, sin, cos, atan2, pow)
})");
  const double x[] = {0.25, 4};
  for (int i = 0; i < 2; ++i) {
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(0))[i], std::exp(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(1))[i], std::expm1(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(2))[i], std::log(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(3))[i], std::log1p(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(4))[i], std::sqrt(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(5))[i], 1 / std::sqrt(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(6))[i], std::cbrt(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(7))[i], std::tanh(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(8))[i], 1 / (1 + std::exp(-x[i])));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(9))[i], std::sin(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(10))[i], std::cos(x[i]));
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(11))[i], std::numbers::pi / 4);
    EXPECT_DOUBLE_EQ(Values<double>(result.tuple_element(12))[i], std::pow(x[i], x[i]));
  }
  EXPECT_EQ(Values<double>(result.tuple_element(4))[1], 2.0);
  EXPECT_EQ(Values<double>(result.tuple_element(5))[1], 0.5);
}

TEST(EvaluatorTest, FloatRemainderAndIsFinite) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[3] constant({5.5, -5.5, inf})
  b = f32[3] constant({2, 2, 1})
  rem = f32[3] remainder(a, b)
  fin = pred[3] is-finite(a)
  ROOT t = (f32[3], pred[3]) tuple(rem, fin)
})");
  std::vector<float> rem = Values<float>(result.tuple_element(0));
  EXPECT_EQ(rem[0], 1.5f);
  EXPECT_EQ(rem[1], -1.5f);
  EXPECT_TRUE(std::isnan(rem[2]));
  EXPECT_THAT(Values<bool>(result.tuple_element(1)), ElementsAre(true, true, false));
}

TEST(EvaluatorTest, HalfPrecisionRoundsEveryOperation) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f16[3] constant({2048, 65504, 1})
  b = f16[3] constant({1, 65504, 0.000488281})
  add = f16[3] add(a, b)
  c = bf16[3] constant({256, 1.5, 3})
  d = bf16[3] constant({1, 1.5, 3})
  badd = bf16[3] add(c, d)
  bmul = bf16[3] multiply(c, d)
  ROOT t = (f16[3], bf16[3], bf16[3]) tuple(add, badd, bmul)
})");
  EXPECT_THAT(DoubleValues(result.tuple_element(0)),
              ElementsAre(2048, std::numeric_limits<double>::infinity(), 1));
  EXPECT_THAT(DoubleValues(result.tuple_element(1)), ElementsAre(256, 3, 6));
  EXPECT_THAT(DoubleValues(result.tuple_element(2)), ElementsAre(256, 2.25, 9));
}

TEST(EvaluatorTest, ComplexArithmetic) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = c64[2] constant({(1, 2), (3, 4)})
  b = c64[2] constant({(3, 4), (3, 4)})
  mul = c64[2] multiply(a, b)
  sub = c64[2] subtract(a, b)
  abs = f32[2] abs(a)
  re = f32[2] real(a)
  im = f32[2] imag(a)
  eq = pred[2] compare(a, b), direction=EQ
  x = f64[2] constant({1, -2})
  y = f64[2] constant({0.5, 3})
  z = c128[2] complex(x, y)
  ROOT t = (c64[2], c64[2], f32[2], f32[2], f32[2], pred[2], c128[2]) tuple(mul, sub, abs, re, im, eq, z)
})");
  EXPECT_THAT(Values<complex64>(result.tuple_element(0)),
              ElementsAre(complex64(-5, 10), complex64(-7, 24)));
  EXPECT_THAT(Values<complex64>(result.tuple_element(1)),
              ElementsAre(complex64(-2, -2), complex64(0, 0)));
  EXPECT_THAT(Values<float>(result.tuple_element(2)), ElementsAre(FloatEq(std::sqrt(5.0f)), 5.0f));
  EXPECT_THAT(Values<float>(result.tuple_element(3)), ElementsAre(1, 3));
  EXPECT_THAT(Values<float>(result.tuple_element(4)), ElementsAre(2, 4));
  EXPECT_THAT(Values<bool>(result.tuple_element(5)), ElementsAre(false, true));
  EXPECT_THAT(Values<complex128>(result.tuple_element(6)),
              ElementsAre(complex128(1, 0.5), complex128(-2, 3)));
}

TEST(EvaluatorTest, ComplexTranscendentals) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = c128[1] constant({(0.5, 1)})
  exp = c128[1] exponential(a)
  log = c128[1] log(a)
  sqrt = c128[1] sqrt(a)
  expm1 = c128[1] exponential-minus-one(a)
  log1p = c128[1] log-plus-one(a)
  ROOT t = (c128[1], c128[1], c128[1], c128[1], c128[1]) tuple(exp, log, sqrt, expm1, log1p)
})");
  const complex128 z(0.5, 1);
  auto near = [](complex128 actual, complex128 expected) {
    EXPECT_NEAR(actual.real(), expected.real(), 1e-15);
    EXPECT_NEAR(actual.imag(), expected.imag(), 1e-15);
  };
  near(Values<complex128>(result.tuple_element(0))[0], std::exp(z));
  near(Values<complex128>(result.tuple_element(1))[0], std::log(z));
  near(Values<complex128>(result.tuple_element(2))[0], std::sqrt(z));
  near(Values<complex128>(result.tuple_element(3))[0], std::exp(z) - 1.0);
  near(Values<complex128>(result.tuple_element(4))[0], std::log(1.0 + z));
}

TEST(EvaluatorTest, ConvertFloatToIntegerSaturates) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[6] constant({nan, 1e10, -1e10, -1.9, 2.9, 2147483520})
  s = s32[6] convert(a)
  b = f32[3] constant({-1, 300, 254.9})
  u = u8[3] convert(b)
  c = f64[2] constant({1e300, -1e300})
  l = s64[2] convert(c)
  ul = u64[2] convert(c)
  ROOT t = (s32[6], u8[3], s64[2], u64[2]) tuple(s, u, l, ul)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)),
              ElementsAre(0, kIntMax, kIntMin, -1, 2, 2147483520));
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(1)), ElementsAre(0, 255, 254));
  EXPECT_THAT(Values<int64_t>(result.tuple_element(2)),
              ElementsAre(std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()));
  EXPECT_THAT(Values<uint64_t>(result.tuple_element(3)),
              ElementsAre(std::numeric_limits<uint64_t>::max(), 0u));
}

TEST(EvaluatorTest, ConvertBetweenIntegersPredAndComplex) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[3] constant({300, -1, 0})
  u = u8[3] convert(a)
  p = pred[3] convert(a)
  f = f32[3] constant({0, nan, 0.5})
  fp = pred[3] convert(f)
  pf = f32[3] convert(fp)
  c = c64[2] constant({(1.5, 2), (-3, 1)})
  cf = f32[2] convert(c)
  cs = s32[2] convert(c)
  l = s64[1] constant({16777217})
  lf = f32[1] convert(l)
  ROOT t = (u8[3], pred[3], pred[3], f32[3], f32[2], s32[2], f32[1]) tuple(u, p, fp, pf, cf, cs, lf)
})");
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(0)), ElementsAre(44, 255, 0));
  EXPECT_THAT(Values<bool>(result.tuple_element(1)), ElementsAre(true, true, false));
  EXPECT_THAT(Values<bool>(result.tuple_element(2)), ElementsAre(false, true, true));
  EXPECT_THAT(Values<float>(result.tuple_element(3)), ElementsAre(0, 1, 1));
  EXPECT_THAT(Values<float>(result.tuple_element(4)), ElementsAre(1.5f, -3));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(5)), ElementsAre(1, -3));
  EXPECT_THAT(Values<float>(result.tuple_element(6)), ElementsAre(16777216.0f));
}

TEST(EvaluatorTest, ConvertRoundsToHalfAndBfloat16) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[3] constant({65520, 1.00097656, 65519})
  h = f16[3] convert(a)
  b = f32[3] constant({1.00390625, 1.01171875, 3.39e38})
  bf = bf16[3] convert(b)
  hb = f32[3] convert(h)
  ROOT t = (f16[3], bf16[3], f32[3]) tuple(h, bf, hb)
})");
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_THAT(DoubleValues(result.tuple_element(0)), ElementsAre(inf, 1.0009765625, 65504));
  EXPECT_THAT(DoubleValues(result.tuple_element(1)),
              ElementsAre(1.0, 1.015625, DoubleEq(3.3895313892515355e38)));
  EXPECT_THAT(Values<float>(result.tuple_element(2)),
              ElementsAre(std::numeric_limits<float>::infinity(), 1.0009765625f, 65504));
}

TEST(EvaluatorTest, BitcastConvertSameAndDifferentWidths) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[2] constant({1, -2})
  i = s32[2] bitcast-convert(a)
  b = s32[] constant(16909060)
  bytes = u8[4] bitcast-convert(b)
  c = u8[2,2] constant({ {52, 18}, {1, 0} })
  h = u16[2] bitcast-convert(c)
  ROOT t = (s32[2], u8[4], u16[2]) tuple(i, bytes, h)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)),
              ElementsAre(0x3F800000, static_cast<int32_t>(0xC0000000u)));
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(1)), ElementsAre(4, 3, 2, 1));
  EXPECT_THAT(Values<uint16_t>(result.tuple_element(2)), ElementsAre(0x1234, 1));
}

TEST(EvaluatorTest, ReducePrecision) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[6] constant({1.00390625, 1.01171875, 100000, 1e-08, nan, -3})
  ROOT r = f32[6] reduce-precision(a), exponent_bits=5, mantissa_bits=7
})");
  std::vector<float> values = Values<float>(result);
  EXPECT_EQ(values[0], 1.0f);
  EXPECT_EQ(values[1], 1.015625f);
  EXPECT_EQ(values[2], std::numeric_limits<float>::infinity());
  EXPECT_EQ(values[3], 0.0f);
  EXPECT_TRUE(std::isnan(values[4]));
  EXPECT_EQ(values[5], -3.0f);
}

TEST(EvaluatorTest, ReducePrecisionToNoMantissaTurnsNanIntoInfinity) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f64[3] constant({nan, 3, 3.5})
  ROOT r = f64[3] reduce-precision(a), exponent_bits=11, mantissa_bits=0
})");
  // 3 is a tie between 2 and 4; the even exponent wins.
  EXPECT_THAT(Values<double>(result),
              ElementsAre(std::numeric_limits<double>::infinity(), 2.0, 4.0));
}

TEST(EvaluatorTest, SelectWithArrayAndScalarPredicates) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  p = pred[3] constant({true, false, true})
  a = s64[3] constant({1, 2, 3})
  b = s64[3] constant({10, 20, 30})
  s = s64[3] select(p, a, b)
  q = pred[] constant(false)
  t = s64[3] select(q, a, b)
  ROOT r = (s64[3], s64[3]) tuple(s, t)
})");
  EXPECT_THAT(Values<int64_t>(result.tuple_element(0)), ElementsAre(1, 20, 3));
  EXPECT_THAT(Values<int64_t>(result.tuple_element(1)), ElementsAre(10, 20, 30));
}

TEST(EvaluatorTest, ClampWithScalarBoundsAndNan) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  lo = f32[] constant(0)
  hi = f32[] constant(1)
  x = f32[4] constant({-1, 5, nan, 0.5})
  c = f32[4] clamp(lo, x, hi)
  ilo = s32[3] constant({0, 0, 5})
  ix = s32[3] constant({-4, 4, 4})
  ihi = s32[3] constant({2, 2, 9})
  ic = s32[3] clamp(ilo, ix, ihi)
  ROOT t = (f32[4], s32[3]) tuple(c, ic)
})");
  std::vector<float> c = Values<float>(result.tuple_element(0));
  EXPECT_EQ(c[0], 0.0f);
  EXPECT_EQ(c[1], 1.0f);
  EXPECT_TRUE(std::isnan(c[2]));
  EXPECT_EQ(c[3], 0.5f);
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(0, 2, 5));
}

TEST(EvaluatorTest, Iota) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[2,3] iota(), iota_dimension=1
  b = f32[3,2] iota(), iota_dimension=0
  c = u8[4] iota(), iota_dimension=0
  ROOT t = (s32[2,3], f32[3,2], u8[4]) tuple(a, b, c)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(0, 1, 2, 0, 1, 2));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(0, 0, 1, 1, 2, 2));
  EXPECT_THAT(Values<uint8_t>(result.tuple_element(2)), ElementsAre(0, 1, 2, 3));
}

TEST(EvaluatorTest, MapAppliesTheComputationPerElement) {
  Literal result = Eval(R"(HloModule m
fma {
  x = f32[] parameter(0)
  y = s32[] parameter(1)
  yf = f32[] convert(y)
  m = f32[] multiply(x, yf)
  one = f32[] constant(1)
  ROOT r = f32[] add(m, one)
}
ENTRY e {
  a = f32[3] constant({1, 2, 3})
  b = s32[3] constant({4, 5, 6})
  ROOT m = f32[3] map(a, b), dimensions={0}, to_apply=fma
})");
  EXPECT_THAT(Values<float>(result), ElementsAre(5, 11, 19));
}

TEST(EvaluatorTest, CallFusionTupleAndGetTupleElement) {
  Literal result = Eval(R"(HloModule m
fused {
  p0 = f32[2] parameter(0)
  p1 = f32[2] parameter(1)
  s = f32[2] subtract(p0, p1)
  ROOT t = (f32[2], f32[2]) tuple(s, p0)
}
twice {
  x = f32[2] parameter(0)
  ROOT y = f32[2] add(x, x)
}
ENTRY e {
  a = f32[2] constant({5, 7})
  b = f32[2] constant({1, 2})
  f = (f32[2], f32[2]) fusion(a, b), kind=kLoop, calls=fused
  g0 = f32[2] get-tuple-element(f), index=0
  g1 = f32[2] get-tuple-element(f), index=1
  c = f32[2] call(g0), to_apply=twice
  o = f32[2] opt-barrier(g1)
  ROOT t = (f32[2], f32[2], f32[2]) tuple(c, o, g0)
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(8, 10));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(5, 7));
  EXPECT_THAT(Values<float>(result.tuple_element(2)), ElementsAre(4, 5));
}

TEST(EvaluatorTest, WhileLoopCountsAndAccumulates) {
  Literal result = Eval(R"(HloModule m
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  v = f32[2] get-tuple-element(s), index=1
  fi = f32[] convert(i)
  b = f32[2] broadcast(fi), dimensions={}
  w = f32[2] add(v, b)
  ROOT t = (s32[], f32[2]) tuple(next, w)
}
ENTRY e {
  zero = s32[] constant(0)
  v = f32[2] constant({0, 100})
  init = (s32[], f32[2]) tuple(zero, v)
  ROOT w = (s32[], f32[2]) while(init), condition=cond, body=body
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(10));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(45, 145));
}

TEST(EvaluatorTest, ConditionalWithPredicate) {
  constexpr std::string_view kText = R"(HloModule m
on_true {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
on_false {
  y = s32[] parameter(0)
  ROOT c = f32[] convert(y)
}
ENTRY e {
  p = pred[] parameter(0)
  a = f32[] constant(2.5)
  b = s32[] constant(7)
  ROOT c = f32[] conditional(p, a, b), true_computation=on_true, false_computation=on_false
})";
  EXPECT_THAT(Values<float>(Eval(kText, {Literal::CreateR0<bool>(PrimitiveType::PRED, true)})),
              ElementsAre(-2.5f));
  EXPECT_THAT(Values<float>(Eval(kText, {Literal::CreateR0<bool>(PrimitiveType::PRED, false)})),
              ElementsAre(7.0f));
}

TEST(EvaluatorTest, ConditionalWithIndexRunsTheLastBranchWhenOutOfRange) {
  constexpr std::string_view kText = R"(HloModule m
b0 {
  x = f32[] parameter(0)
  ROOT n = f32[] negate(x)
}
b1 {
  x = f32[] parameter(0)
  ROOT c = f32[] copy(x)
}
b2 {
  x = f32[] parameter(0)
  ROOT f = f32[] floor(x)
}
ENTRY e {
  i = s32[] parameter(0)
  a = f32[] constant(1.5)
  b = f32[] constant(2.5)
  c = f32[] constant(3.5)
  ROOT r = f32[] conditional(i, a, b, c), branch_computations={b0, b1, b2}
})";
  auto run = [&](int32_t index) {
    return Values<float>(Eval(kText, {Literal::CreateR0<int32_t>(PrimitiveType::S32, index)}))[0];
  };
  EXPECT_EQ(run(0), -1.5f);
  EXPECT_EQ(run(1), 2.5f);
  EXPECT_EQ(run(2), 3.0f);
  EXPECT_EQ(run(7), 3.0f);
  EXPECT_EQ(run(-1), 3.0f);
}

// --- Nesting, cancellation

// Calls, fusions, conditionals and while loops run on the evaluator's own frame stack: 5,000
// nested calls overflowed the machine stack when each level recursed.
TEST(EvaluatorTest, HundredThousandNestedCallsEvaluate) {
  auto module = ParseHloModule(testing::NestedCallsText(100000));
  ASSERT_TRUE(module.ok()) << module.status().message();
  std::vector<Literal> arguments;
  arguments.push_back(Literal::CreateR0<float>(PrimitiveType::F32, 1.25f));
  StatusOr<Literal> result = EvaluateModule(**module, arguments);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_THAT(Values<float>(*result), ElementsAre(2.5f));
}

TEST(EvaluatorTest, DeeplyNestedFusionsConditionalsAndWhileLoopsEvaluate) {
  auto module = ParseHloModule(testing::NestedControlFlowText(30000));
  ASSERT_TRUE(module.ok()) << module.status().message();
  std::vector<Literal> arguments;
  arguments.push_back(Literal::CreateR0<float>(PrimitiveType::F32, 2.0f));
  StatusOr<Literal> result = EvaluateModule(**module, arguments);
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_THAT(Values<float>(*result), ElementsAre(3.0f));
}

// An error deep inside names the outermost and innermost instructions, not all 100,000.
TEST(EvaluatorTest, ErrorsDeepInsideNestedCallsAreShort) {
  std::string text = testing::NestedCallsText(100000);
  const std::string leaf = "ROOT r = f32[] add(p, p)";
  text.replace(text.find(leaf), leaf.size(), "ROOT r = f32[] custom-call(p), custom_call_target=\"x\"");
  std::string error = EvalError(text, {Literal::CreateR0<float>(PrimitiveType::F32, 1.0f)});
  EXPECT_THAT(error, HasSubstr("more nested calls"));
  EXPECT_THAT(error, HasSubstr("custom-call"));
  EXPECT_LT(error.size(), 1000u);
}

// Computations applied element by element (map, reduce, sort, ...) nest on the machine stack:
// bounded, with a message.
TEST(EvaluatorTest, NestedApplicationsAreBoundedWithAMessage) {
  std::vector<Literal> arguments;
  arguments.push_back(MakeLiteral<float>(PrimitiveType::F32, {2}, {1, 2}));
  Literal fine = Eval(testing::NestedMapsText(kMaxNestedApplications), arguments);
  EXPECT_THAT(Values<float>(fine), ElementsAre(2, 4));
  for (int depth : {kMaxNestedApplications + 1, 20000}) {
    std::string error = EvalError(testing::NestedMapsText(depth), arguments);
    EXPECT_THAT(error, HasSubstr(fmt::format("nest more than {} deep", kMaxNestedApplications)));
  }
}

constexpr std::string_view kEndlessLoop = R"(HloModule m
cond {
  p = s32[] parameter(0)
  ROOT t = pred[] constant(true)
}
body {
  p = s32[] parameter(0)
  one = s32[] constant(1)
  ROOT a = s32[] add(p, one)
}
ENTRY e {
  z = s32[] constant(0)
  ROOT w = s32[] while(z), condition=cond, body=body
})";

TEST(EvaluatorTest, CancellationStopsAnEndlessLoopAndSaysWhere) {
  auto module = ParseHloModule(kEndlessLoop);
  ASSERT_TRUE(module.ok()) << module.status().message();
  std::atomic<bool> cancel = false;
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    cancel = true;
  });
  StatusOr<Literal> result = EvaluateModule(**module, {}, EvaluatorOptions{.cancel = &cancel});
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("evaluating %w (iteration "));
  EXPECT_THAT(result.status().message(), HasSubstr("cancelled"));
}

// Reductions poll the flag for every application of their reducer, so even one long instruction
// stops.
TEST(EvaluatorTest, CancellationIsPolledInsideReductions) {
  auto module = ParseHloModule(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[1000] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloInstruction* reduce = (*module)->entry_computation()->root_instruction();
  Literal input(Shape(PrimitiveType::F32, {1000}));
  Literal zero(Shape::Scalar(PrimitiveType::F32));
  const Literal* operands[] = {&input, &zero};
  std::atomic<bool> cancel = true;
  StatusOr<Literal> result =
      EvaluateInstruction(*reduce, operands, EvaluatorOptions{.cancel = &cancel});
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("evaluating %r: cancelled"));
  cancel = false;
  EXPECT_TRUE(EvaluateInstruction(*reduce, operands, EvaluatorOptions{.cancel = &cancel}).ok());
}

// --- Errors

TEST(EvaluatorTest, RefusesUnsupportedOpcodesByName) {
  std::string error = EvalError(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  ROOT c = f32[4] custom-call(p), custom_call_target="my_kernel"
})",
                                {Literal(Shape(PrimitiveType::F32, {4}))});
  EXPECT_THAT(error, HasSubstr("%c"));
  EXPECT_THAT(error, HasSubstr("custom-call"));
  EXPECT_THAT(error, HasSubstr("my_kernel"));

  error = EvalError(R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  p = f32[4] parameter(0)
  ROOT ar = f32[4] all-reduce(p), replica_groups={{0,1}}, to_apply=add
})",
                    {Literal(Shape(PrimitiveType::F32, {4}))});
  // One device is replica 0 alone: a group naming replica 1 cannot meet.
  EXPECT_THAT(error, HasSubstr("evaluating %ar"));
  EXPECT_THAT(error, HasSubstr("replica 1"));
}

TEST(EvaluatorTest, RefusesUnsupportedElementTypesByName) {
  const std::string error = EvalError(R"(HloModule m
ENTRY e {
  p = f8e8m0fnu[2] parameter(0)
  ROOT c = f32[2] convert(p)
})",
                                      {Literal(Shape(PrimitiveType::F8E8M0FNU, {2}))});
  EXPECT_THAT(error, HasSubstr("f8e8m0fnu"));
}

TEST(EvaluatorTest, RefusesElidedConstants) {
  const std::string error = EvalError(R"(HloModule m
ENTRY e {
  c = f32[1000] constant({...})
  ROOT n = f32[1000] negate(c)
})");
  EXPECT_THAT(error, HasSubstr("evaluating %c"));
  EXPECT_THAT(error, HasSubstr("elided"));
}

TEST(EvaluatorTest, RefusesMismatchedArguments) {
  constexpr std::string_view kText = R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  ROOT n = f32[2] negate(p)
})";
  EXPECT_THAT(EvalError(kText, {Literal(Shape(PrimitiveType::F32, {3}))}), HasSubstr("%p"));
  EXPECT_THAT(EvalError(kText, {}), HasSubstr("arguments"));
}

TEST(EvaluatorTest, DeadCodeIsNotEvaluated) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  p = f32[2] parameter(0)
  unused = f32[2] custom-call(p), custom_call_target="never_run"
  ROOT n = f32[2] negate(p)
})",
                        {MakeLiteral<float>(PrimitiveType::F32, {2}, {1, -2})});
  EXPECT_THAT(Values<float>(result), ElementsAre(-1, 2));
}

TEST(EvaluatorTest, AddsSixteenMillionFloatsQuickly) {
  constexpr int64_t kSize = 16 * 1024 * 1024;
  std::vector<Literal> arguments;
  arguments.emplace_back(Shape(PrimitiveType::F32, {kSize}));
  arguments.emplace_back(Shape(PrimitiveType::F32, {kSize}));
  auto a = arguments[0].data<float>();
  auto b = arguments[1].data<float>();
  for (int64_t i = 0; i < kSize; ++i) {
    a[i] = static_cast<float>(i);
    b[i] = 0.5f;
  }
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  a = f32[16777216] parameter(0)
  b = f32[16777216] parameter(1)
  ROOT add = f32[16777216] add(a, b)
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const auto start = std::chrono::steady_clock::now();
  StatusOr<Literal> result = EvaluateModule(**module, arguments);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->data<float>()[kSize - 1], static_cast<float>(kSize - 1) + 0.5f);
  std::printf("16M-element f32 add: %.3f s\n", seconds);
  // Generous for a loaded machine; an unloaded one takes well under a tenth of this.
  EXPECT_LT(seconds, 2.0);
}

}  // namespace
}  // namespace xlens
