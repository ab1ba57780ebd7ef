// The inline f32 transcendentals (compiler/codegen/fast_math.h) against the reference evaluator
// (the C library) over the whole float range: every sign and binade, denormals (flushed to zero,
// as XLA's CPU runtime does), the overflow and underflow edges, infinities and NaN. Each function has a stated tolerance in ulp; special
// values must match exactly. A second test checks that the loop around them vectorizes with no
// call left in it.
#include "compiler/codegen/fast_math.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "codegen_test_util.h"

namespace xlens {
namespace {

// Floats at ulp distance d apart are d apart in this ordering (-0 and +0 coincide).
int64_t OrderedBits(float f) {
  const int32_t i = std::bit_cast<int32_t>(f);
  return i >= 0 ? int64_t{i} : -int64_t{i & 0x7fffffff};
}

// A subnormal as the flushing runtime sees it: a zero of its sign.
float Flush(float f) { return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(0.0f, f) : f; }

// Inputs: special values, every binade of both signs sampled densely, and a fine sweep of
// [-lo, hi] where the function changes most.
std::vector<float> Inputs(float lo, float hi) {
  const float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), 1.0f, -1.0f, 88.72283f, 88.72284f,
                          -87.33654f, -103.27893f, -103.97208f, -104.0f, 9.0f, 0.625f, -0.625f,
                          2.0f, -2.0f};
  // Every 4097th bit pattern of the positive floats, and its negation: all binades, denormals
  // included.
  for (uint32_t bits = 1; bits < 0x7f800000u; bits += 4097) {
    const float f = std::bit_cast<float>(bits);
    v.push_back(f);
    v.push_back(-f);
  }
  const int kSweep = 200000;
  for (int i = 0; i <= kSweep; ++i) v.push_back(lo + (hi - lo) * static_cast<float>(i) / kSweep);
  return v;
}

struct Case {
  const char* opcode;
  float lo, hi;       // the fine sweep
  int64_t max_ulp;    // the tolerance against the C library
};

class FastMathTest : public ::testing::TestWithParam<Case> {};

TEST_P(FastMathTest, WithinTheStatedUlpOfTheEvaluatorEverywhere) {
  const Case c = GetParam();
  const std::vector<float> inputs = Inputs(c.lo, c.hi);
  const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  p = f32[{0}] parameter(0)
  ROOT r = f32[{0}] {1}(p)
}})", inputs.size(), c.opcode);
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, inputs));
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  // Compiled code runs as under XLA's CPU runtime, with subnormal inputs read as zero and
  // subnormal results written as zero (compiler/support/float_environment.h): the evaluator's
  // answer is taken under the same rule.
  std::vector<float> flushed = inputs;
  for (float& f : flushed) f = Flush(f);
  std::vector<Literal> flushed_args;
  flushed_args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, flushed));
  auto expected = EvaluateModule(**module, flushed_args);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto actual = testing::CompileAndRun(text, args);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  std::vector<float> want(expected->data<float>().begin(), expected->data<float>().end());
  for (float& f : want) f = Flush(f);
  auto got = actual->data<float>();
  int64_t worst = 0;
  float worst_input = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (std::isnan(want[i]) || std::isnan(got[i])) {
      ASSERT_EQ(std::isnan(want[i]), std::isnan(got[i]))
          << c.opcode << "(" << inputs[i] << "): evaluator " << want[i] << ", compiled " << got[i];
      continue;
    }
    if (std::isinf(want[i]) || std::isinf(got[i])) {
      ASSERT_EQ(want[i], got[i]) << c.opcode << "(" << inputs[i] << ")";
      continue;
    }
    const int64_t ulp = std::abs(OrderedBits(want[i]) - OrderedBits(got[i]));
    if (ulp > worst) {
      worst = ulp;
      worst_input = inputs[i];
    }
  }
  EXPECT_LE(worst, c.max_ulp) << c.opcode << ": " << worst << " ulp at x = " << worst_input;
  std::printf("%s: at most %lld ulp from the C library over %zu inputs\n", c.opcode,
              static_cast<long long>(worst), inputs.size());
}

INSTANTIATE_TEST_SUITE_P(Functions, FastMathTest,
                         ::testing::Values(Case{"exponential", -104.0f, 89.0f, 1},
                                           Case{"log", 0.0f, 4.0f, 2},
                                           // XLA's CPU tanh, the same rational function.
                                           Case{"tanh", -10.0f, 10.0f, 4},
                                           Case{"logistic", -104.0f, 30.0f, 4},
                                           Case{"erf", -5.0f, 5.0f, 4}),
                         [](const auto& info) { return std::string(info.param.opcode); });

// (Large enough to be compiled at the full optimization level: smaller kernels get O1.)
TEST(FastMathVectorTest, SoftmaxAndGeluLoopsVectorizeWithoutCalls) {
  const char* text = R"(HloModule m
ENTRY e {
  p = f32[65536] parameter(0)
  e = f32[65536] exponential(p)
  t = f32[65536] tanh(e)
  s = f32[65536] logistic(t)
  l = f32[65536] log(s)
  ROOT r = f32[65536] erf(l)
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  runtime::CompileOptions options;
  options.keep_llvm_ir = true;
  auto executable = runtime::CompileForCpu(std::move(*module), options);
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  const std::string& ir = (*executable)->llvm_ir().ir_with_opt;
  for (const char* fn : {"expf", "logf", "tanhf", "erff", "llvm.exp.", "llvm.log.", "_ZGV"}) {
    EXPECT_EQ(ir.find(fn), std::string::npos) << fn << " is still called:\n" << ir;
  }
  EXPECT_NE(ir.find("x float>"), std::string::npos) << "the loop did not vectorize:\n" << ir;
  testing::ExpectMatchesEvaluator(text, {}, ErrorSpec{1e-5, 1e-5});
}

// JAX's sigmoid(x) * tanh(x) + exp(-x * x), as jax lowers it (the sigmoid a divide of exp), over
// [-100, 100] and the special values: two exps, a tanh and two divides per element in one
// vectorized loop (large enough for the full optimization level), close to the evaluator.
TEST(FastMathVectorTest, SigmoidTanhExpLoopMatchesTheEvaluator) {
  const char* text = R"(HloModule m
ENTRY e {
  x = f32[65536] parameter(0)
  one = f32[] constant(1)
  ones = f32[65536] broadcast(one), dimensions={}
  nx = f32[65536] negate(x)
  ex = f32[65536] exponential(nx)
  den = f32[65536] add(ex, ones)
  sig = f32[65536] divide(ones, den)
  th = f32[65536] tanh(x)
  st = f32[65536] multiply(sig, th)
  sq = f32[65536] multiply(nx, x)
  g = f32[65536] exponential(sq)
  ROOT r = f32[65536] add(st, g)
})";
  std::vector<float> x(65536);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -100.0f + 200.0f * static_cast<float>(i) / 65535;
  const float kInf = std::numeric_limits<float>::infinity();
  x[0] = -kInf;
  x[1] = kInf;
  x[2] = -0.0f;
  x[3] = std::numeric_limits<float>::quiet_NaN();
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, x));
  testing::ExpectMatchesEvaluator(text, std::move(args), ErrorSpec{1e-6, 1e-6});
}

// The optimized IR of `text`'s kernels.
std::string OptimizedIr(const char* text) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok());
  if (!module.ok()) return "";
  runtime::CompileOptions options;
  options.keep_llvm_ir = true;
  auto executable = runtime::CompileForCpu(std::move(*module), options);
  EXPECT_TRUE(executable.ok()) << executable.status().message();
  return executable.ok() ? (*executable)->llvm_ir().ir_with_opt : "";
}

// A softmax's exp(x - max): every element less its row's maximum is <= 0 (or NaN), so its exp
// has no upper clamp (89) and scales by a constant power of two; rows of infinities and NaN
// come out as the evaluator's.
TEST(FastMathVectorTest, SoftmaxExpOfXLessItsMaximumIsClampedBelowOnly) {
  const char* text = R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[256,1000] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[256] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[256,1000] broadcast(m), dimensions={0}
  s = f32[256,1000] subtract(x, mb)
  e = f32[256,1000] exponential(s)
  z = f32[] constant(0)
  sum = f32[256] reduce(e, z), dimensions={1}, to_apply=add
  sb = f32[256,1000] broadcast(sum), dimensions={0}
  ROOT d = f32[256,1000] divide(e, sb)
})";
  const std::string ir = OptimizedIr(text);
  EXPECT_NE(ir.find("x float>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("-1.100000e+02"), std::string::npos) << ir;
  EXPECT_EQ(ir.find("8.900000e+01"), std::string::npos) << "the upper clamp is still there:\n" << ir;
  std::vector<float> x(256 * 1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -120.0f + 240.0f * static_cast<float>((i * 7919) % 1000) / 1000;
  const float kInf = std::numeric_limits<float>::infinity();
  x[1000] = kInf;                                          // row 1: inf - inf is NaN
  x[2000] = std::numeric_limits<float>::quiet_NaN();       // row 2: NaN throughout
  for (int i = 3000; i < 4000; ++i) x[i] = -kInf;          // row 3: every element -inf
  for (int i = 4000; i < 5000; ++i) x[i] = -100.0f - (i % 7);  // row 4: subnormal terms
  std::vector<Literal> args;
  Literal arg{Shape(PrimitiveType::F32, {256, 1000})};
  std::copy(x.begin(), x.end(), arg.data<float>().begin());
  args.push_back(std::move(arg));
  testing::ExpectMatchesEvaluator(text, std::move(args), ErrorSpec{1e-6, 1e-6});
}

// JAX's log_softmax shifts by max(reduce_max(x), -inf), no less than the row's maximum: its exp
// has no upper clamp either.
TEST(FastMathVectorTest, LogSoftmaxExpOfXLessAMaximumAboveTheRowsIsClampedBelowOnly) {
  const char* text = R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  x = f32[256,1000] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[256] reduce(x, lo), dimensions={1}, to_apply=max
  floor = f32[256] broadcast(lo), dimensions={}
  m2 = f32[256] maximum(m, floor)
  mb = f32[256,1000] broadcast(m2), dimensions={0}
  s = f32[256,1000] subtract(x, mb)
  e = f32[256,1000] exponential(s)
  z = f32[] constant(0)
  sum = f32[256] reduce(e, z), dimensions={1}, to_apply=add
  l = f32[256] log(sum)
  lb = f32[256,1000] broadcast(l), dimensions={0}
  ROOT d = f32[256,1000] subtract(s, lb)
})";
  EXPECT_EQ(OptimizedIr(text).find("8.900000e+01"), std::string::npos);
  testing::ExpectMatchesEvaluator(text, {}, ErrorSpec{1e-5, 1e-5});
}

// x less the maximum of another array may be positive: that exp keeps its upper clamp.
TEST(FastMathVectorTest, ExpOfXLessAnotherMaximumKeepsItsUpperClamp) {
  const char* text = R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
ENTRY e {
  x = f32[256,1000] parameter(0)
  y = f32[256,1000] parameter(1)
  lo = f32[] constant(-inf)
  m = f32[256] reduce(y, lo), dimensions={1}, to_apply=max
  mb = f32[256,1000] broadcast(m), dimensions={0}
  s = f32[256,1000] subtract(x, mb)
  ROOT e = f32[256,1000] exponential(s)
})";
  EXPECT_NE(OptimizedIr(text).find("8.900000e+01"), std::string::npos);
}

}  // namespace
}  // namespace xlens
