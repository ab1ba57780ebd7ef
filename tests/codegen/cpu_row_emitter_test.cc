// The CPU row kernel (compiler/codegen/cpu/cpu_row_emitter.cc): which fusions become one phase of
// one task per row, and that what it computes matches the reference evaluator for row fusions of
// every form it accepts (several reductions in sequence, per-row and per-element outputs, several
// kept and several reduced dimensions, non-default layouts, variadic reducers, a whole-array
// reduction).
#include <gtest/gtest.h>

#include "codegen_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "fused_kernel_test_util.h"

namespace xlens::codegen {
namespace {

using testing::InInputFusion;
using testing::SpecOfRoot;

constexpr const char* kReducers = R"(
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
)";

TEST(CpuRowEmitterTest, LogSoftmaxIsOnePhaseOfOneTaskPerRow) {
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[37,129] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[37] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[37,129] broadcast(m), dimensions={0}
  s = f32[37,129] subtract(x, mb)
  e = f32[37,129] exponential(s)
  z = f32[] constant(0)
  sum = f32[37] reduce(e, z), dimensions={1}, to_apply=add
  l = f32[37] log(sum)
  lb = f32[37,129] broadcast(l), dimensions={0}
  ROOT d = f32[37,129] subtract(s, lb)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 37);
  // Two reduction passes and the output pass over 129 elements.
  EXPECT_EQ(spec.phases[0].work_per_task, 3 * 129);
  EXPECT_EQ(spec.scratch_bytes, 0);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
}

TEST(CpuRowEmitterTest, LayerNormWithPerRowAndPerElementOutputs) {
  // Two kept dimensions, a per-row operand read through a broadcast, per-row outputs (the mean
  // and the inverse deviation) beside the normalised rows.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[3,5,70] parameter(0)
  g = f32[70] parameter(1)
  shift = f32[3,5] parameter(2)
  z = f32[] constant(0)
  seventy = f32[] constant(70)
  n = f32[3,5] broadcast(seventy), dimensions={}
  sum = f32[3,5] reduce(x, z), dimensions={2}, to_apply=add
  mean = f32[3,5] divide(sum, n)
  meanb = f32[3,5,70] broadcast(mean), dimensions={0,1}
  c = f32[3,5,70] subtract(x, meanb)
  sq = f32[3,5,70] multiply(c, c)
  sqsum = f32[3,5] reduce(sq, z), dimensions={2}, to_apply=add
  var = f32[3,5] divide(sqsum, n)
  eps = f32[] constant(1e-5)
  epsb = f32[3,5] broadcast(eps), dimensions={}
  vare = f32[3,5] add(var, epsb)
  inv = f32[3,5] rsqrt(vare)
  invb = f32[3,5,70] broadcast(inv), dimensions={0,1}
  y = f32[3,5,70] multiply(c, invb)
  gb = f32[3,5,70] broadcast(g), dimensions={2}
  yg = f32[3,5,70] multiply(y, gb)
  shiftb = f32[3,5,70] broadcast(shift), dimensions={0,1}
  out = f32[3,5,70] add(yg, shiftb)
  ROOT t = (f32[3,5,70], f32[3,5], f32[3,5]) tuple(out, mean, inv)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 15);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-4});
}

TEST(CpuRowEmitterTest, TwoReducedDimensionsInAColumnMajorLayout) {
  // Dimensions 0 and 1 are minor-most in this layout: they are the row, dimension 2 the row's
  // index; the output loop nests over both reduced dimensions.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[6,20,9]{1,0,2} parameter(0)
  lo = f32[] constant(-inf)
  m = f32[9] reduce(x, lo), dimensions={0,1}, to_apply=max
  mb = f32[6,20,9]{1,0,2} broadcast(m), dimensions={2}
  ROOT d = f32[6,20,9]{1,0,2} subtract(x, mb)
)");
  KernelSpec spec = SpecOfRoot(text);
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 9);
  testing::ExpectMatchesEvaluator(text);
}

TEST(CpuRowEmitterTest, VariadicArgmaxPerRowAndAWholeArrayReduction) {
  const std::string argmax = InInputFusion(testing::kArgmax, R"(
  x = f32[16,45] parameter(0)
  i = s32[16,45] iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[16], s32[16]) reduce(x, i, lo, z), dimensions={1}, to_apply=argmax
)");
  KernelSpec spec = SpecOfRoot(argmax);
  ASSERT_EQ(spec.phases.size(), 1u);
  EXPECT_EQ(spec.phases[0].tasks, 16);
  testing::ExpectMatchesEvaluator(argmax);
  // A reduction of everything: one row; the mean is subtracted from every element.
  const std::string centre = InInputFusion(kReducers, R"(
  x = f32[1000] parameter(0)
  z = f32[] constant(0)
  s = f32[] reduce(x, z), dimensions={0}, to_apply=add
  n = f32[] constant(1000)
  mean = f32[] divide(s, n)
  mb = f32[1000] broadcast(mean), dimensions={}
  ROOT d = f32[1000] subtract(x, mb)
)");
  KernelSpec whole = SpecOfRoot(centre);
  ASSERT_EQ(whole.phases.size(), 1u);
  EXPECT_EQ(whole.phases[0].tasks, 1);
  testing::ExpectMatchesEvaluator(centre, {}, {1e-5, 1e-5});
}

TEST(CpuRowEmitterTest, AReductionOverTheMajorDimensionKeepsThePhasedForm) {
  // Not a row fusion: the reduced dimension is not minor-most.
  const std::string text = InInputFusion(kReducers, R"(
  x = f32[40,30] parameter(0)
  z = f32[] constant(0)
  s = f32[30] reduce(x, z), dimensions={0}, to_apply=add
  sb = f32[40,30] broadcast(s), dimensions={1}
  ROOT d = f32[40,30] divide(x, sb)
)");
  KernelSpec spec = SpecOfRoot(text);
  EXPECT_EQ(spec.phases.size(), 2u);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
}

}  // namespace
}  // namespace xlens::codegen
