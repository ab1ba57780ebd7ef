// Complex arithmetic and integer powers on the GPU backend (emitted inline for the GPU, their
// math calls libdevice's) against the reference evaluator (std::complex, glibc, libgcc), on the
// GPU simulator: ordinary values and the edge values the evaluator defines (zeros of either
// sign, infinities, NaN, values near the top and bottom of the range).
#include <cmath>
#include <complex>
#include <cstring>
#include <limits>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "gpu_sim_test_util.h"

namespace xlens::runtime {
namespace {

using testing::RunOnSimulatorAndEvaluator;

std::unique_ptr<GpuSimDevice> OpenDevice() {
  auto device = OpenSimulatedGpuDevice();
  return device.ok() ? std::move(*device) : nullptr;
}

template <typename C>
Literal ComplexLiteral(PrimitiveType type, const std::vector<C>& values) {
  Literal literal(Shape(type, {static_cast<int64_t>(values.size())}));
  std::memcpy(literal.untyped_data(), values.data(), values.size() * sizeof(C));
  return literal;
}

// Ordinary values, then edge values, as (re, im) pairs of doubles; `huge` and `tiny` are near
// the top and bottom of the type's range.
std::vector<std::pair<double, double>> Values(double huge, double tiny) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  return {{1.5, -2.25}, {-0.75, 0.5}, {3, 4}, {-2, -1e-3}, {0.1, 10}, {1e-3, 1e-3}, {-5, 0},
          {0, -3}, {0.5, 0.25}, {-1.25, -3.5}, {2, 0}, {1, 1e-7},
          // edges
          {0, 0}, {-0.0, 0}, {0, -0.0}, {inf, 0}, {-inf, 0}, {inf, 1}, {-inf, 1}, {1, inf},
          {nan, 0}, {nan, 1}, {1, nan}, {huge, huge}, {-huge, tiny}, {tiny, tiny}, {tiny, -huge}};
}

template <typename C>
std::vector<C> As(const std::vector<std::pair<double, double>>& values) {
  std::vector<C> out;
  for (auto [re, im] : values) {
    out.emplace_back(static_cast<typename C::value_type>(re), static_cast<typename C::value_type>(im));
  }
  return out;
}

// Every complex unary operation of the GPU backend, one module; its tuple's outputs in order.
std::string UnaryModule(const std::string& c, const std::string& f, int64_t n) {
  const std::string shape = fmt::format("{}[{}]", c, n);
  return fmt::format(R"(
HloModule complex_unary
ENTRY e {{
  z = {0} parameter(0)
  exp = {0} exponential(z)
  expm1 = {0} exponential-minus-one(z)
  log = {0} log(z)
  log1p = {0} log-plus-one(z)
  sqrt = {0} sqrt(z)
  rsqrt = {0} rsqrt(z)
  tanh = {0} tanh(z)
  logistic = {0} logistic(z)
  sin = {0} sine(z)
  cos = {0} cosine(z)
  sign = {0} sign(z)
  abs = {1}[{2}] abs(z)
  ROOT t = ({0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {0}, {1}[{2}]) tuple(exp, expm1, log, log1p, sqrt, rsqrt, tanh, logistic, sin, cos, sign, abs)
}}
)", shape, f, n);
}

std::string BinaryModule(const std::string& c, int64_t n) {
  return fmt::format(R"(
HloModule complex_binary
ENTRY e {{
  a = {0}[{1}] parameter(0)
  b = {0}[{1}] parameter(1)
  m = {0}[{1}] multiply(a, b)
  d = {0}[{1}] divide(a, b)
  ROOT t = ({0}[{1}], {0}[{1}]) tuple(m, d)
}}
)", c, n);
}

const char* const kUnaryNames[] = {"exp", "expm1", "log", "log1p", "sqrt", "rsqrt", "tanh",
                                   "logistic", "sin", "cos", "sign", "abs"};

template <typename C>
void CheckUnary(PrimitiveType type, const std::string& c, const std::string& f, double huge,
                double tiny, double tolerance) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  const std::vector<C> values = As<C>(Values(huge, tiny));
  std::vector<Literal> args;
  args.push_back(ComplexLiteral(type, values));
  auto both = RunOnSimulatorAndEvaluator(UnaryModule(c, f, values.size()), args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  for (int64_t i = 0; i < 12; ++i) {
    Status match = ExpectLiteralNear(both->expected.tuple_element(i), both->actual.tuple_element(i),
                                     ErrorSpec{tolerance, tolerance});
    EXPECT_TRUE(match.ok()) << kUnaryNames[i] << ": " << match.message();
  }
}

TEST(GpuSimComplexTest, UnaryComplex64MatchesTheEvaluator) {
  CheckUnary<std::complex<float>>(PrimitiveType::C64, "c64", "f32", 1e37, 1e-37, 1e-5);
}

TEST(GpuSimComplexTest, UnaryComplex128MatchesTheEvaluator) {
  CheckUnary<std::complex<double>>(PrimitiveType::C128, "c128", "f64", 1e307, 1e-307, 1e-12);
}

template <typename C>
void CheckBinary(PrimitiveType type, const std::string& c, double huge, double tiny, double tolerance) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  // Every value against every other: all the Annex G cases of multiply and divide.
  const std::vector<C> values = As<C>(Values(huge, tiny));
  std::vector<C> lhs, rhs;
  for (const C& a : values) {
    for (const C& b : values) {
      lhs.push_back(a);
      rhs.push_back(b);
    }
  }
  std::vector<Literal> args;
  args.push_back(ComplexLiteral(type, lhs));
  args.push_back(ComplexLiteral(type, rhs));
  auto both = RunOnSimulatorAndEvaluator(BinaryModule(c, lhs.size()), args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  for (int64_t i = 0; i < 2; ++i) {
    Status match = ExpectLiteralNear(both->expected.tuple_element(i), both->actual.tuple_element(i),
                                     ErrorSpec{tolerance, tolerance});
    EXPECT_TRUE(match.ok()) << (i == 0 ? "multiply: " : "divide: ") << match.message();
  }
}

TEST(GpuSimComplexTest, MultiplyAndDivideComplex64MatchTheEvaluator) {
  CheckBinary<std::complex<float>>(PrimitiveType::C64, "c64", 1e37, 1e-37, 1e-6);
}

TEST(GpuSimComplexTest, MultiplyAndDivideComplex128MatchTheEvaluator) {
  CheckBinary<std::complex<double>>(PrimitiveType::C128, "c128", 1e307, 1e-307, 1e-14);
}

TEST(GpuSimComplexTest, PowerMatchesTheEvaluator) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  using C = std::complex<double>;
  // x^0 is 1 for every x, zero included; the others are exp(y log x).
  const std::vector<C> x = {{1.5, -2.25}, {-0.75, 0.5}, {3, 4}, {0.1, 10}, {-2, 0}, {0, 0}, {2, 1}, {1e3, -1}};
  const std::vector<C> y = {{2, 0}, {0.5, 0.5}, {-1, 0.25}, {0, 0}, {0.5, 0}, {0, 0}, {-0.0, 0}, {1.5, 2}};
  std::vector<Literal> args;
  args.push_back(ComplexLiteral(PrimitiveType::C128, x));
  args.push_back(ComplexLiteral(PrimitiveType::C128, y));
  auto both = RunOnSimulatorAndEvaluator(R"(
HloModule complex_power
ENTRY e {
  x = c128[8] parameter(0)
  y = c128[8] parameter(1)
  p = c128[8] power(x, y)
  c = c64[8] convert(p)
  ROOT t = (c128[8], c64[8]) tuple(p, c)
}
)", args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  EXPECT_TRUE(ExpectLiteralNear(both->expected, both->actual, ErrorSpec{1e-12, 1e-12}).ok());
  args.clear();
  std::vector<std::complex<float>> xf(x.begin(), x.end()), yf(y.begin(), y.end());
  args.push_back(ComplexLiteral(PrimitiveType::C64, xf));
  args.push_back(ComplexLiteral(PrimitiveType::C64, yf));
  both = RunOnSimulatorAndEvaluator(R"(
HloModule complex_power_c64
ENTRY e {
  x = c64[8] parameter(0)
  y = c64[8] parameter(1)
  ROOT p = c64[8] power(x, y)
}
)", args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  Status match = ExpectLiteralNear(both->expected, both->actual, ErrorSpec{1e-5, 1e-5});
  EXPECT_TRUE(match.ok()) << match.message();
}

TEST(GpuSimComplexTest, IntegerPowerMatchesTheEvaluator) {
  std::unique_ptr<GpuSimDevice> device = OpenDevice();
  if (device == nullptr) GTEST_SKIP() << OpenSimulatedGpuDevice().status().message();
  // Negative exponents (0 except for bases 1 and -1), wrapping products, zero to the zero.
  const std::vector<int64_t> base = {2, -3, 1, -1, -1, 0, 0, 7, 3, -2, 5, 2, std::numeric_limits<int64_t>::min(), 10};
  const std::vector<int64_t> exponent = {10, 5, -7, -3, -4, 0, 3, -1, 40, 63, 27, 64, 2, 19};
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1(PrimitiveType::S64, base));
  args.push_back(Literal::CreateR1(PrimitiveType::S64, exponent));
  auto both = RunOnSimulatorAndEvaluator(R"(
HloModule integer_power
ENTRY e {
  x = s64[14] parameter(0)
  y = s64[14] parameter(1)
  p64 = s64[14] power(x, y)
  x32 = s32[14] convert(x)
  y32 = s32[14] convert(y)
  p32 = s32[14] power(x32, y32)
  x8 = s8[14] convert(x)
  y8 = s8[14] convert(y)
  p8 = s8[14] power(x8, y8)
  ux = u32[14] convert(x)
  uy = u32[14] convert(y)
  pu = u32[14] power(ux, uy)
  ux64 = u64[14] convert(x)
  uy64 = u64[14] convert(y)
  pu64 = u64[14] power(ux64, uy64)
  ROOT t = (s64[14], s32[14], s8[14], u32[14], u64[14]) tuple(p64, p32, p8, pu, pu64)
}
)", args, *device);
  ASSERT_TRUE(both.ok()) << both.status().message();
  Status match = ExpectLiteralNear(both->expected, both->actual, ErrorSpec{0, 0});
  EXPECT_TRUE(match.ok()) << match.message();
}

}  // namespace
}  // namespace xlens::runtime
