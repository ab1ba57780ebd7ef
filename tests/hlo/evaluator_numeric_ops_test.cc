// The reference evaluator on fft, topk, cholesky and the batch-norm ops, with hand-computed
// results; and their shape inference, which the parser's verifier applies.
#include <cmath>
#include <complex>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/parser.h"
#include "evaluator_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xlens::testing::EvaluateText;
using xlens::testing::MakeLiteral;
using xlens::testing::Values;

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

Literal Eval(std::string_view text, const std::vector<Literal>& arguments = {}) {
  StatusOr<Literal> result = EvaluateText(text, arguments);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : Literal();
}

std::string Module(const std::string& body) { return "HloModule m\n\nENTRY e {\n" + body + "\n}\n"; }

void ExpectComplexNear(const Literal& literal, const std::vector<std::complex<double>>& expected,
                       double tolerance = 1e-5) {
  ASSERT_EQ(literal.element_count(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const complex128 v = literal.GetAsComplex(static_cast<int64_t>(i));
    EXPECT_NEAR(v.real(), expected[i].real(), tolerance) << "element " << i;
    EXPECT_NEAR(v.imag(), expected[i].imag(), tolerance) << "element " << i;
  }
}

void ExpectRealNear(const Literal& literal, const std::vector<double>& expected,
                    double tolerance = 1e-5) {
  ASSERT_EQ(literal.element_count(), static_cast<int64_t>(expected.size()));
  for (size_t i = 0; i < expected.size(); ++i) {
    const double v = literal.GetAsDouble(static_cast<int64_t>(i));
    if (std::isnan(expected[i])) {
      EXPECT_TRUE(std::isnan(v)) << "element " << i << " is " << v;
    } else {
      EXPECT_NEAR(v, expected[i], tolerance) << "element " << i;
    }
  }
}

// --- fft

TEST(EvaluatorNumericOpsTest, FftAndIfftOfLengthFour) {
  Literal result = Eval(Module(R"(
  x = c64[4] constant({(1,0), (2,0), (3,0), (4,0)})
  f = c64[4] fft(x), fft_type=FFT, fft_length={4}
  i = c64[4] fft(f), fft_type=IFFT, fft_length={4}
  ROOT out = (c64[4], c64[4]) tuple(f, i))"));
  ExpectComplexNear(result.tuple_element(0), {{10, 0}, {-2, 2}, {-2, 0}, {-2, -2}});
  // IFFT divides by N: the round trip gives the input back.
  ExpectComplexNear(result.tuple_element(1), {{1, 0}, {2, 0}, {3, 0}, {4, 0}});
}

TEST(EvaluatorNumericOpsTest, FftOfPrimeLengthsOverTwoDimensions) {
  // A 2x3 transform of a unit impulse at [0,1]: X[a][b] = exp(-2 pi i b / 3).
  Literal result = Eval(Module(R"(
  x = c128[2,3] constant({ {(0,0), (1,0), (0,0)}, {(0,0), (0,0), (0,0)} })
  ROOT f = c128[2,3] fft(x), fft_type=FFT, fft_length={2,3})"));
  const std::complex<double> w(-0.5, -std::sqrt(3.0) / 2);
  ExpectComplexNear(result, {1, w, std::conj(w), 1, w, std::conj(w)}, 1e-12);
}

TEST(EvaluatorNumericOpsTest, RfftKeepsTheNonNegativeFrequencies) {
  Literal result = Eval(Module(R"(
  x = f32[2,4] constant({ {1, 2, 3, 4}, {1, 1, 1, 1} })
  ROOT f = c64[2,3] fft(x), fft_type=RFFT, fft_length={4})"));
  ExpectComplexNear(result, {{10, 0}, {-2, 2}, {-2, 0}, {4, 0}, {0, 0}, {0, 0}});
}

TEST(EvaluatorNumericOpsTest, IrfftIgnoresTheImaginaryPartsOfDcAndNyquist) {
  // The half spectrum of {1,2,3,4}, with imaginary parts on X[0] and X[2] that a real signal
  // cannot have: c2r transforms drop them.
  Literal result = Eval(Module(R"(
  x = c64[3] constant({(10,7), (-2,2), (-2,-5)})
  ROOT f = f32[4] fft(x), fft_type=IRFFT, fft_length={4})"));
  ExpectRealNear(result, {1, 2, 3, 4});
  // Odd length: the last half-spectrum point has a partner, so its imaginary part counts.
  Literal odd = Eval(Module(R"(
  x = c64[2] constant({(3,0), (0,1)})
  ROOT f = f32[3] fft(x), fft_type=IRFFT, fft_length={3})"));
  // x[m] = (3 + 2 Re(i exp(2 pi i m / 3))) / 3 = 1 - (2/3) sin(2 pi m / 3).
  ExpectRealNear(odd, {1, 1 - std::sqrt(3.0) / 3, 1 + std::sqrt(3.0) / 3});
}

TEST(EvaluatorNumericOpsTest, HugeFftIsRefusedByTheWorkLimit) {
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(Module(R"(
  x = c64[4096,4096] parameter(0)
  ROOT f = c64[4096,4096] fft(x), fft_type=FFT, fft_length={4096,4096})"));
  ASSERT_TRUE(module.ok()) << module.status().message();
  const HloInstruction& fft = *(*module)->entry_computation()->root_instruction();
  // Every point, once per length of each transformed dimension, 4 operations each.
  EXPECT_DOUBLE_EQ(EvaluationWork(fft), 4 * 4096.0 * 4096 * 8192);
  Status status = CheckEvaluationWork(**module, 1e9);
  EXPECT_THAT(status.message(), HasSubstr("fft"));
}

// --- topk

TEST(EvaluatorNumericOpsTest, TopKOrdersTiesByIndexAndNaNAboveInfinity) {
  Literal x = MakeLiteral<float>(PrimitiveType::F32, {2, 6},
                                 {1, 3, 3, kNaN, -0.0f, 0.0f, 0.0f, -0.0f, 2, 2, 2, -kInf});
  const std::string largest = Module(R"(
  x = f32[2,6] parameter(0)
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=true)");
  Literal top = Eval(largest, {x});
  EXPECT_THAT(Values<int32_t>(top.tuple_element(1)), ElementsAre(3, 1, 2, 2, 3, 4));
  EXPECT_TRUE(std::isnan(Values<float>(top.tuple_element(0))[0]));
  // Smallest: -inf, then -0.0 before +0.0 (the total order), ties by index.
  std::string smallest = largest;
  smallest.replace(smallest.find("largest=true"), 12, "largest=false");
  Literal bottom = Eval(smallest, {x});
  EXPECT_THAT(Values<int32_t>(bottom.tuple_element(1)), ElementsAre(4, 5, 0, 5, 1, 0));
  EXPECT_TRUE(std::signbit(Values<float>(bottom.tuple_element(0))[0]));
  EXPECT_FALSE(std::signbit(Values<float>(bottom.tuple_element(0))[1]));
}

TEST(EvaluatorNumericOpsTest, TopKOfNegativeNaNAndIntegers) {
  // -NaN is below -inf: the smallest value of all.
  Literal x = MakeLiteral<float>(PrimitiveType::F32, {4}, {5, -kNaN, -kInf, kNaN});
  Literal bottom = Eval(Module(R"(
  x = f32[4] parameter(0)
  ROOT t = (f32[2], s32[2]) topk(x), k=2, largest=false)"), {x});
  EXPECT_THAT(Values<int32_t>(bottom.tuple_element(1)), ElementsAre(1, 2));
  Literal ints = Eval(Module(R"(
  x = u8[5] constant({7, 200, 7, 0, 200})
  ROOT t = (u8[3], s32[3]) topk(x), k=3)"));
  EXPECT_THAT(Values<uint8_t>(ints.tuple_element(0)), ElementsAre(200, 200, 7));
  EXPECT_THAT(Values<int32_t>(ints.tuple_element(1)), ElementsAre(1, 4, 0));
}

// --- cholesky

TEST(EvaluatorNumericOpsTest, CholeskyLowerAndUpperOfABatch) {
  // Batch 0 is positive definite; batch 1 has a negative pivot; batch 2 a zero last pivot.
  const std::string text = Module(R"(
  a = f32[3,3,3] constant({ { {4, 100, 200}, {12, 37, 300}, {-16, -43, 98} },
                            { {4, 12, -16}, {-50, 37, -43}, {-60, -70, 98} },
                            { {1, 1, 0}, {1, 2, 0}, {0, 0, 0} } })
  ROOT c = f32[3,3,3] cholesky(a), lower=true)");
  Literal lower = Eval(text);
  // lower=true reads only the lower triangle and leaves zeros above the diagonal.
  ExpectRealNear(lower, {2, 0, 0, 6, 1, 0, -8, 5, 3,
                         kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN,
                         1, 0, 0, 1, 1, 0, 0, 0, kNaN});
  std::string upper_text = text;
  upper_text.replace(upper_text.find("lower=true"), 10, "lower=false");
  Literal upper = Eval(upper_text);
  // Upper reads the upper triangle: batch 0's is not positive definite, batch 1's is.
  ExpectRealNear(upper, {kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN, kNaN,
                         2, 6, -8, 0, 1, 5, 0, 0, 3,
                         1, 1, 0, 0, 1, 0, 0, 0, kNaN});
}

TEST(EvaluatorNumericOpsTest, CholeskyOfComplexKeepsTheDiagonalsImaginaryPart) {
  Literal result = Eval(Module(R"(
  a = c64[2,2] constant({ {(4,1), (5,7)}, {(2,2), (3,0.5)} })
  ROOT c = c64[2,2] cholesky(a), lower=true)"));
  ExpectComplexNear(result, {{2, 0.5}, {0, 0}, {1, 1}, {1, 0.5}});
  Literal failed = Eval(Module(R"(
  a = c64[2,2] constant({ {(-1,0), (0,0)}, {(0,0), (1,0)} })
  ROOT c = c64[2,2] cholesky(a), lower=true)"));
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_TRUE(std::isnan(failed.GetAsComplex(i).real()));
    EXPECT_EQ(failed.GetAsComplex(i).imag(), 0);
  }
}

// --- batch norm

TEST(EvaluatorNumericOpsTest, BatchNormTrainingReturnsTheBiasedVariance) {
  Literal result = Eval(Module(R"(
  x = f32[2,2,1,2] constant({ { { {1, 2} }, { {3, 4} } }, { { {5, 6} }, { {7, 8} } } })
  scale = f32[2] constant({2, 3})
  offset = f32[2] constant({1, 2})
  ROOT bn = (f32[2,2,1,2], f32[2], f32[2]) batch-norm-training(x, scale, offset), epsilon=0.001, feature_index=3)"));
  // Feature 0 holds {1,3,5,7}, feature 1 {2,4,6,8}: means 4 and 5, variances 5 (divided by 4).
  ExpectRealNear(result.tuple_element(1), {4, 5});
  ExpectRealNear(result.tuple_element(2), {5, 5});
  const double r = 1 / std::sqrt(5.001);
  ExpectRealNear(result.tuple_element(0),
                 {1 - 6 * r, 2 - 9 * r, 1 - 2 * r, 2 - 3 * r, 1 + 2 * r, 2 + 3 * r, 1 + 6 * r,
                  2 + 9 * r});
}

TEST(EvaluatorNumericOpsTest, BatchNormInferenceWithTheFeatureFirst) {
  Literal result = Eval(Module(R"(
  x = f32[2,2] constant({ {2, 4}, {6, 8} })
  scale = f32[2] constant({2, 1})
  offset = f32[2] constant({1, 0})
  mean = f32[2] constant({1, 2})
  var = f32[2] constant({3.75, 0.75})
  ROOT bn = f32[2,2] batch-norm-inference(x, scale, offset, mean, var), epsilon=0.25, feature_index=0)"));
  // Row 0: scale 2 * rsqrt(4) = 1, shift 1 - 1 = 0; row 1: scale 1, shift 0 - 2 = -2.
  ExpectRealNear(result, {2, 4, 4, 6});
}

TEST(EvaluatorNumericOpsTest, BatchNormGrad) {
  Literal result = Eval(Module(R"(
  x = f32[3,1] constant({ {0}, {1}, {5} })
  scale = f32[1] constant({2})
  mean = f32[1] constant({2})
  var = f32[1] constant({1})
  dy = f32[3,1] constant({ {1}, {0}, {0} })
  ROOT bn = (f32[3,1], f32[1], f32[1]) batch-norm-grad(x, scale, mean, var, dy), epsilon=0, feature_index=1)"));
  // centered = {-2,-1,3}; sum(dy) = 1; g = sum(dy * centered) = -2;
  // grad_x = (2/3) (3 dy - 1 - centered * g).
  ExpectRealNear(result.tuple_element(0), {-4.0 / 3, -2, 10.0 / 3});
  ExpectRealNear(result.tuple_element(1), {-2});
  ExpectRealNear(result.tuple_element(2), {1});
}

// --- shape inference, as the verifier applies it

std::string ParseError(const std::string& body) {
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(Module(body));
  return module.ok() ? "parsed" : module.status().message();
}

TEST(EvaluatorNumericOpsTest, WrongShapesAndAttributesAreRefused) {
  EXPECT_THAT(ParseError(R"(
  x = c64[8,30] parameter(0)
  ROOT f = c64[8,30] fft(x), fft_type=FFT, fft_length={32})"),
              HasSubstr("fft_length={32}"));
  EXPECT_THAT(ParseError(R"(
  x = f32[8,32] parameter(0)
  ROOT f = c64[8,32] fft(x), fft_type=RFFT, fft_length={32})"),
              HasSubstr("attributes give c64[8,17]"));
  EXPECT_THAT(ParseError(R"(
  x = c64[8,16] parameter(0)
  ROOT f = f32[8,32] fft(x), fft_type=IRFFT, fft_length={32})"),
              HasSubstr("17 (fft_length/2+1)"));
  EXPECT_THAT(ParseError(R"(
  x = f32[4,6] parameter(0)
  ROOT t = (f32[4,7], s32[4,7]) topk(x), k=7, largest=true)"),
              HasSubstr("k=7 is larger than the operand's last dimension"));
  EXPECT_THAT(ParseError(R"(
  x = f32[4,6] parameter(0)
  ROOT t = (f32[4,2], s32[4,3]) topk(x), k=2)"),
              HasSubstr("attributes give (f32[4,2], s32[4,2])"));
  EXPECT_THAT(ParseError(R"(
  x = f32[3,4] parameter(0)
  ROOT c = f32[3,4] cholesky(x), lower=true)"),
              HasSubstr("square matrices"));
  EXPECT_THAT(ParseError(R"(
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  ROOT bn = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.1, feature_index=2)"),
              HasSubstr("feature_index=2 is out of range"));
  EXPECT_THAT(ParseError(R"(
  x = f32[2,3] parameter(0)
  s = f32[2] parameter(1)
  ROOT bn = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, s), epsilon=0.1, feature_index=1)"),
              HasSubstr("the scale must be f32[3]"));
  EXPECT_THAT(ParseError(R"(
  x = f32[2,3] parameter(0)
  s = f32[3] parameter(1)
  ROOT bn = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, s), feature_index=1)"),
              HasSubstr("needs the attribute epsilon="));
  EXPECT_EQ(ParseError(R"(
  x = c64[2,5,4] parameter(0)
  ROOT f = f32[2,5,6] fft(x), fft_type=IRFFT, fft_length={5,6})"),
            "parsed");
}

}  // namespace
}  // namespace xlens
