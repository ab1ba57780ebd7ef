// The inline f32 transcendentals (compiler/codegen/fast_math.h) compiled as the CPU backend
// compiles them (a loop the JIT vectorizes at the host's width) and run with subnormals kept,
// as code compiled ahead of time runs in a process that never flushes them: each function
// against a double-precision reference rounded once to f32, over every binade of both signs,
// subnormal inputs and results, the overflow and underflow edges, infinities and NaN. A second
// test counts what the vectorized exp loop does per vector, so that a slower form cannot come
// back unnoticed.
#include "compiler/codegen/fast_math.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/TargetParser/Host.h>

#include "compiler/codegen/cpu/cpu_jit.h"

namespace xlens::codegen {
namespace {

using Emitter = UnaryF32Emitter;
using Kernel = void (*)(const float*, float*, int64_t);

struct Compiled {
  std::unique_ptr<CpuJit> jit;
  Kernel kernel = nullptr;
  std::string optimized_ir;
};

// The loop of `fn` alone (EmitUnaryF32Loop) as `f`, compiled for the host.
Compiled Compile(Emitter fn) {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("fast_math", *context);
  module->setTargetTriple(llvm::sys::getProcessTriple());
  EmitUnaryF32Loop(*module, "f", fn);
  Compiled compiled;
  auto jit = CpuJit::Create();
  EXPECT_TRUE(jit.ok()) << jit.status().message();
  if (!jit.ok()) return compiled;
  compiled.jit = std::move(*jit);
  auto ir = compiled.jit->AddModule(std::move(module), std::move(context), /*keep_ir=*/true);
  EXPECT_TRUE(ir.ok()) << ir.status().message();
  if (!ir.ok()) return compiled;
  compiled.optimized_ir = ir->ir_with_opt;
  auto address = compiled.jit->Lookup("f");
  EXPECT_TRUE(address.ok()) << address.status().message();
  if (address.ok()) compiled.kernel = reinterpret_cast<Kernel>(*address);
  return compiled;
}

// Floats at ulp distance d apart are d apart in this ordering (-0 and +0 coincide); subnormals
// are one ulp apart as any other neighbours.
int64_t OrderedBits(float f) {
  const int32_t i = std::bit_cast<int32_t>(f);
  return i >= 0 ? int64_t{i} : -int64_t{i & 0x7fffffff};
}

std::vector<float> Inputs(float lo, float hi) {
  const float kInf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f, -0.0f, kInf, -kInf, std::numeric_limits<float>::quiet_NaN(),
                          -std::numeric_limits<float>::quiet_NaN(),
                          std::numeric_limits<float>::denorm_min(),
                          -std::numeric_limits<float>::denorm_min(),
                          std::numeric_limits<float>::min(), std::numeric_limits<float>::max(),
                          -std::numeric_limits<float>::max(), 88.3762626f, 88.72283f, 88.72284f,
                          89.0f, -87.33654f, -88.0f, -100.0f, -103.27893f, -103.97208f,
                          -103.97209f, -110.0f, 1e30f, -1e30f,
                          // erfc's worst found by a sweep of every float in [0.5, 9.19): 6 ulp.
                          0.8135692f, 1.0940963f, 2.0459797f};
  // Every 4097th bit pattern of the positive floats and its negation: all binades, subnormals
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
  const char* name;
  Emitter emit;
  double (*reference)(double);
  float lo, hi;     // the fine sweep
  int64_t max_ulp;  // against the double-precision reference rounded to f32
};

// 1 / (1 + e^-x) as XLA computes it, in f32: where e^-x overflows (x below -88.72) the result is
// 0, not the subnormal e^x.
double Logistic(double x) {
  return std::exp(-x) > std::numeric_limits<float>::max() ? 0.0 : 1.0 / (1.0 + std::exp(-x));
}
double Log(double x) { return std::log(x); }
double Exp(double x) { return std::exp(x); }
double Tanh(double x) { return std::tanh(x); }
double Erf(double x) { return std::erf(x); }
double Erfc(double x) { return std::erfc(x); }
// e^(-x x), the square rounded to f32 first as the compiled code rounds it.
double Gaussian(double x) {
  const float f = static_cast<float>(x);
  return std::exp(static_cast<double>(-f * f));
}
// exp of an argument that cannot be positive, which it clamps below only.
llvm::Value* EmitGaussian(llvm::IRBuilder<>& b, llvm::Value* x) {
  return EmitFastExpF32(b, b.CreateFMul(b.CreateFNeg(x), x));
}
llvm::Value* EmitExp(llvm::IRBuilder<>& b, llvm::Value* x) { return EmitFastExpF32(b, x); }
// exp(-|x|) told that its argument cannot be positive (as a softmax's x minus its maximum is
// not): one constant scaling by 2^n instead of a choice.
double ExpOfMinusAbs(double x) { return std::exp(-std::fabs(x)); }
llvm::Value* EmitExpNotPositive(llvm::IRBuilder<>& b, llvm::Value* x) {
  llvm::Value* a = b.CreateIntrinsic(llvm::Intrinsic::fabs, {b.getFloatTy()}, {x});
  return EmitFastExpF32(b, b.CreateFNeg(a), /*not_positive=*/true);
}

class FastMathAccuracyTest : public ::testing::TestWithParam<Case> {};

TEST_P(FastMathAccuracyTest, WithinTheStatedUlpOfDoublePrecisionWithSubnormalsKept) {
  const Case c = GetParam();
  Compiled compiled = Compile(c.emit);
  ASSERT_NE(compiled.kernel, nullptr);
  const std::vector<float> inputs = Inputs(c.lo, c.hi);
  std::vector<float> got(inputs.size());
  compiled.kernel(inputs.data(), got.data(), static_cast<int64_t>(inputs.size()));
  int64_t worst = 0;
  float worst_input = 0;
  int subnormal_results = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const float want = static_cast<float>(c.reference(static_cast<double>(inputs[i])));
    if (std::isnan(want) || std::isnan(got[i])) {
      ASSERT_EQ(std::isnan(want), std::isnan(got[i]))
          << c.name << "(" << inputs[i] << "): reference " << want << ", compiled " << got[i];
      continue;
    }
    if (std::isinf(want) || std::isinf(got[i])) {
      ASSERT_EQ(want, got[i]) << c.name << "(" << inputs[i] << ")";
      continue;
    }
    if (want == 0.0f) {
      // exp's underflow and the signed zeros of tanh and erf: exact.
      ASSERT_EQ(got[i], 0.0f) << c.name << "(" << inputs[i] << ")";
      ASSERT_EQ(std::signbit(want), std::signbit(got[i])) << c.name << "(" << inputs[i] << ")";
      continue;
    }
    if (std::fpclassify(want) == FP_SUBNORMAL) ++subnormal_results;
    const int64_t ulp = std::abs(OrderedBits(want) - OrderedBits(got[i]));
    if (ulp > worst) {
      worst = ulp;
      worst_input = inputs[i];
    }
  }
  EXPECT_LE(worst, c.max_ulp) << c.name << ": " << worst << " ulp at x = " << worst_input;
  std::printf("%s: at most %lld ulp from double precision over %zu inputs (%d subnormal "
              "results)\n",
              c.name, static_cast<long long>(worst), inputs.size(), subnormal_results);
}

INSTANTIATE_TEST_SUITE_P(
    Functions, FastMathAccuracyTest,
    ::testing::Values(Case{"exp", EmitExp, Exp, -104.0f, 89.0f, 1},
                      Case{"exp_not_positive", EmitExpNotPositive, ExpOfMinusAbs, -104.0f, 104.0f, 1},
                      Case{"log", EmitFastLogF32, Log, 0.0f, 4.0f, 1},
                      Case{"tanh", EmitFastTanhF32, Tanh, -10.0f, 10.0f, 4},
                      Case{"logistic", EmitFastLogisticF32, Logistic, -104.0f, 30.0f, 2},
                      Case{"erf", EmitFastErfF32, Erf, -5.0f, 5.0f, 2},
                      Case{"erfc", EmitFastErfcF32, Erfc, -11.0f, 11.0f, 6},
                      Case{"gaussian", EmitGaussian, Gaussian, -11.0f, 11.0f, 1}),
    [](const auto& info) { return std::string(info.param.name); });

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// exp is the inner cost of softmax, sigmoid, GELU and every loop that JAX expands erfc into:
// per vector it may take one fused multiply-add to scale and round x, two for the reduction,
// five and a square for the polynomial's tree, one fused multiply-add and one multiply to scale
// by 2^n, and one compare to choose that scaling by x's sign. No round instruction, no
// float-to-int conversion and no NaN compare: the clamps pass NaN through by themselves.
TEST(FastMathExpCostTest, TheVectorLoopRoundsByAddingAndEvaluatesAShallowTree) {
  Compiled compiled = Compile(EmitExp);
  const std::string& ir = compiled.optimized_ir;
  ASSERT_NE(ir.find("x float>"), std::string::npos) << "the loop did not vectorize:\n" << ir;
  // The vector body alone (the scalar remainder loop repeats it).
  const size_t body = ir.find("vector.body:");
  ASSERT_NE(body, std::string::npos) << ir;
  const std::string vector_body = ir.substr(body, ir.find("\n\n", body) - body);
  EXPECT_EQ(Count(vector_body, "llvm.roundeven"), 0u) << vector_body;
  EXPECT_EQ(Count(vector_body, "fptosi"), 0u) << vector_body;
  EXPECT_EQ(Count(vector_body, "fcmp uno"), 0u) << vector_body;
  EXPECT_EQ(Count(vector_body, "@llvm.fmuladd."), 9u) << vector_body;
  EXPECT_EQ(Count(vector_body, " = fmul "), 2u) << vector_body;
  EXPECT_EQ(Count(vector_body, "fcmp"), 3u) << vector_body;
  // 2^n: one add and one shift of the rounded sum's bits (no halving of n into two powers).
  EXPECT_EQ(Count(vector_body, " = ashr "), 0u) << vector_body;
  EXPECT_EQ(Count(vector_body, " = shl "), 1u) << vector_body;
}

// Told that x cannot be positive, exp scales by one constant: no upper clamp, no compare of
// the sign, no select.
TEST(FastMathExpCostTest, ANonPositiveArgumentScalesByAConstant) {
  Compiled compiled = Compile(EmitExpNotPositive);
  const std::string& ir = compiled.optimized_ir;
  const size_t body = ir.find("vector.body:");
  ASSERT_NE(body, std::string::npos) << ir;
  const std::string vector_body = ir.substr(body, ir.find("\n\n", body) - body);
  EXPECT_EQ(Count(vector_body, "fcmp"), 1u) << vector_body;
  EXPECT_EQ(Count(vector_body, " = select "), 1u) << vector_body;
  EXPECT_EQ(Count(vector_body, " = fmul "), 2u) << vector_body;
}

// exp(-a * a) and exp(-(a * a)), as a Gaussian and JAX's erfc take it, cannot overflow: the
// upper clamp is left out.
TEST(FastMathExpCostTest, ANonPositiveArgumentIsClampedBelowOnly) {
  for (Emitter emit : {EmitGaussian, +[](llvm::IRBuilder<>& b, llvm::Value* x) {
                         return EmitFastExpF32(b, b.CreateFNeg(b.CreateFMul(x, x)));
                       }}) {
    Compiled compiled = Compile(emit);
    const std::string& ir = compiled.optimized_ir;
    const size_t body = ir.find("vector.body:");
    ASSERT_NE(body, std::string::npos) << ir;
    const std::string vector_body = ir.substr(body, ir.find("\n\n", body) - body);
    EXPECT_EQ(Count(vector_body, "fcmp"), 1u) << vector_body;
  }
}

// erfc is the exact GELU's whole cost, and a loop of it is bound by the vector ports, so every
// operation shows in its speed: per vector one divide, one polynomial of degree 10 in t, an
// exp of -a^2 whose reduction takes a a unrounded (no separate correction for the square's
// rounding: two fused multiply-adds fewer), and no clamp of exp's (erfc clamps a itself, so two
// compares: that clamp and the sign of x).
TEST(FastMathErfcCostTest, TheVectorLoopTakesTheSquareIntoExpsReduction) {
  Compiled compiled = Compile(EmitFastErfcF32);
  const std::string& ir = compiled.optimized_ir;
  const size_t body = ir.find("vector.body:");
  ASSERT_NE(body, std::string::npos) << ir;
  const std::string vector_body = ir.substr(body, ir.find("\n\n", body) - body);
  EXPECT_EQ(Count(vector_body, " = fdiv "), 1u) << vector_body;
  EXPECT_EQ(Count(vector_body, "fcmp"), 2u) << vector_body;
  // t's denominator, 10 for the polynomial, 3 for exp's rounding of n and its reduction, 5 for
  // e^r - 1 and 1 for its scaling.
  EXPECT_EQ(Count(vector_body, "@llvm.fmuladd."), 20u) << vector_body;
  // a log2(e), n ln2_hi, r^2, t G(t) and the product with the exp.
  EXPECT_EQ(Count(vector_body, " = fmul "), 5u) << vector_body;
}

}  // namespace
}  // namespace xlens::codegen
