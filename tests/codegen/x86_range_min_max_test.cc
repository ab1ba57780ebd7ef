// HLO's maximum and minimum of float vectors as AVX-512DQ's range instruction
// (compiler/codegen/cpu/x86_range_min_max.cc): which calls the rewrite takes, and that compiled
// loops give the evaluator's result, bit for bit (the sign of a zero included), for every pair
// of special values in f32 and f64, in the vectorized body and its remainder.
#include "compiler/codegen/cpu/x86_range_min_max.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "compiler/codegen/kernel_emitter.h"

namespace xlens::codegen {
namespace {

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(X86RangeMinMaxTest, RewritesVectorsWhereTheFeaturesHaveTheInstruction) {
  // dq: 512-bit vectors only (128 and 256 bits need VL); dqvl: all three widths; none: nothing;
  // scalars never.
  const std::string text = R"(
define <16 x float> @dq(<16 x float> %a, <16 x float> %b, <8 x float> %c, <8 x float> %d) #0 {
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %a, <16 x float> %b)
  %n = call <8 x float> @llvm.minimum.v8f32(<8 x float> %c, <8 x float> %d)
  ret <16 x float> %m
}
define <8 x double> @dqvl(<8 x double> %a, <8 x double> %b, <4 x float> %c, <4 x double> %d, double %e) #1 {
  %m = call <8 x double> @llvm.minimum.v8f64(<8 x double> %a, <8 x double> %b)
  %n = call <4 x float> @llvm.maximum.v4f32(<4 x float> %c, <4 x float> %c)
  %o = call <4 x double> @llvm.maximum.v4f64(<4 x double> %d, <4 x double> %d)
  %s = call double @llvm.maximum.f64(double %e, double %e)
  ret <8 x double> %m
}
define <16 x float> @none(<16 x float> %a, <16 x float> %b) #2 {
  %m = call <16 x float> @llvm.maximum.v16f32(<16 x float> %a, <16 x float> %b)
  ret <16 x float> %m
}
declare <16 x float> @llvm.maximum.v16f32(<16 x float>, <16 x float>)
declare <8 x float> @llvm.minimum.v8f32(<8 x float>, <8 x float>)
declare <8 x double> @llvm.minimum.v8f64(<8 x double>, <8 x double>)
declare <4 x float> @llvm.maximum.v4f32(<4 x float>, <4 x float>)
declare <4 x double> @llvm.maximum.v4f64(<4 x double>, <4 x double>)
declare double @llvm.maximum.f64(double, double)
attributes #0 = { "target-features"="+avx512f,+avx512dq" }
attributes #1 = { "target-features"="+avx512f,+avx512dq,+avx512vl" }
attributes #2 = { "target-features"="+avx512f,+avx2" }
)";
  llvm::LLVMContext context;
  llvm::SMDiagnostic error;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(text, error, context);
  ASSERT_NE(module, nullptr) << error.getMessage().str();
  EXPECT_TRUE(cpu::LowerVectorMinMaxToRange(*module));
  std::string ir;
  llvm::raw_string_ostream os(ir);
  EXPECT_FALSE(llvm::verifyModule(*module, &os)) << ir;
  module->print(os, nullptr);
  EXPECT_EQ(Count(ir, "call <16 x float> @llvm.x86.avx512.mask.range.ps.512("), 1);
  EXPECT_EQ(Count(ir, "i32 5, <16 x float> %a, i16 -1, i32 4)"), 1);  // maximum: imm 0b0101
  EXPECT_EQ(Count(ir, "call <8 x double> @llvm.x86.avx512.mask.range.pd.512("), 1);
  EXPECT_EQ(Count(ir, "i32 4, <8 x double> %a, i8 -1, i32 4)"), 1);  // minimum: imm 0b0100
  EXPECT_EQ(Count(ir, "call <4 x float> @llvm.x86.avx512.mask.range.ps.128("), 1);
  EXPECT_EQ(Count(ir, "i8 15)"), 2);  // four lanes of float and of double
  EXPECT_EQ(Count(ir, "call <4 x double> @llvm.x86.avx512.mask.range.pd.256("), 1);
  EXPECT_EQ(Count(ir, "fcmp uno"), 4);
  // Left to LLVM: the 256-bit one without VL, the scalar, and every one without DQ.
  EXPECT_EQ(Count(ir, "call <8 x float> @llvm.minimum.v8f32("), 1);
  EXPECT_EQ(Count(ir, "call double @llvm.maximum.f64("), 1);
  EXPECT_EQ(Count(ir, "call <16 x float> @llvm.maximum.v16f32("), 1);
  EXPECT_FALSE(cpu::LowerVectorMinMaxToRange(*module));
}

template <typename T>
std::vector<T> Specials() {
  using L = std::numeric_limits<T>;
  return {T(0), -T(0), T(1), T(-1), T(2.5), T(-2.5), L::infinity(), -L::infinity(),
          L::quiet_NaN(), -L::quiet_NaN(), L::signaling_NaN(), L::max(), L::lowest(), L::min(),
          -L::min(), L::denorm_min(), -L::denorm_min(), T(1e-3), T(-1e-3)};
}

// Compiled code reads subnormal inputs as zero (compiler/support/float_environment.h): the
// evaluator is given them so.
template <typename T>
T Flush(T f) {
  return std::fpclassify(f) == FP_SUBNORMAL ? std::copysign(T(0), f) : f;
}

template <typename T>
void ExpectEvaluatorsBits(PrimitiveType type, const char* name) {
  const std::vector<T> specials = Specials<T>();
  // Every ordered pair, as many times as make the kernel large enough for the vectorizer
  // (kCpuSmallKernelBytes: smaller ones compile at O1, scalar), then the first of them again to
  // a length no multiple of any vector (the loop's remainder).
  std::vector<T> x, y;
  for (int copy = 0; copy < 23; ++copy) {
    for (T a : specials) {
      for (T b : specials) {
        x.push_back(a);
        y.push_back(b);
      }
    }
  }
  for (int k = 0; k < 37; ++k) {
    x.push_back(x[k]);
    y.push_back(y[k]);
  }
  const size_t n = x.size();
  ASSERT_GE(static_cast<int64_t>(4 * n * sizeof(T)), kCpuSmallKernelBytes);
  const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  x = {0}[{1}] parameter(0)
  y = {0}[{1}] parameter(1)
  mx = {0}[{1}] maximum(x, y)
  mn = {0}[{1}] minimum(x, y)
  ROOT t = ({0}[{1}], {0}[{1}]) tuple(mx, mn)
}})", name, n);
  std::vector<T> fx = x, fy = y;
  for (T& v : fx) v = Flush(v);
  for (T& v : fy) v = Flush(v);
  std::vector<Literal> flushed;
  flushed.push_back(Literal::CreateR1<T>(type, fx));
  flushed.push_back(Literal::CreateR1<T>(type, fy));
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto expected = EvaluateModule(**module, flushed);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<T>(type, x));
  args.push_back(Literal::CreateR1<T>(type, y));
  auto actual = testing::CompileAndRun(text, args);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  for (int64_t leaf = 0; leaf < 2; ++leaf) {
    const char* op = leaf == 0 ? "maximum" : "minimum";
    std::span<const T> want = expected->tuple_element(leaf).template data<T>();
    std::span<const T> got = actual->tuple_element(leaf).template data<T>();
    ASSERT_EQ(want.size(), n);
    ASSERT_EQ(got.size(), n);
    for (size_t i = 0; i < n; ++i) {
      if (std::isnan(want[i])) {
        EXPECT_TRUE(std::isnan(got[i])) << op << "(" << x[i] << ", " << y[i] << ") = " << got[i];
      } else {
        EXPECT_EQ(std::memcmp(&want[i], &got[i], sizeof(T)), 0)
            << op << "(" << x[i] << ", " << y[i] << "): evaluator " << want[i] << ", compiled " << got[i];
      }
    }
  }
}

TEST(X86RangeMinMaxTest, CompiledLoopsGiveTheEvaluatorsBitsForEveryPairOfSpecials) {
  ExpectEvaluatorsBits<float>(PrimitiveType::F32, "f32");
  ExpectEvaluatorsBits<double>(PrimitiveType::F64, "f64");
}

}  // namespace
}  // namespace xlens::codegen
