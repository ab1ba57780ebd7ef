// The CPU row kernel (compiler/codegen/cpu/cpu_row_emitter.cc): which fusions become one phase of
// one task per row, and that what it computes matches the reference evaluator for row fusions of
// every form it accepts (several reductions in sequence, per-row and per-element outputs, several
// kept and several reduced dimensions, non-default layouts, variadic reducers, a whole-array
// reduction); and that a kInput fusion whose output lies over an operand dying at it (the CPU's
// in-place row fusions) reduces that operand before it overwrites it, on every kernel it can get.
#include <fmt/format.h>

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
  EXPECT_TRUE(spec.reduces_before_writing);
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
  // The sum is materialized before the output phase: the output may lie over x.
  EXPECT_TRUE(spec.reduces_before_writing);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
  // A root that reads its reduction directly computes it again for each output element (the
  // buffer assignment never places such a fusion over x, and the CPU compiler rejects one).
  const std::string spread = InInputFusion(kReducers, R"(
  x = f32[6,50,33] parameter(0)
  z = f32[] constant(0)
  s = f32[50] reduce(x, z), dimensions={0,2}, to_apply=add
  ROOT sb = f32[6,50,33] broadcast(s), dimensions={1}
)");
  EXPECT_FALSE(SpecOfRoot(spread).reduces_before_writing);
}

// A module whose kInput fusion `body` reads `q`, a product of integer-valued arrays (exact in
// f32, and a call no fusion absorbs) that dies at it: q is f32[m,n], or f32[b,m,n] for b > 0.
// `body` may use z (0) and lo (-inf).
std::string OverAProduct(int64_t b, int64_t m, int64_t k, int64_t n, const std::string& body) {
  const std::string batch = b > 0 ? fmt::format("{},", b) : "";
  const std::string lhs = fmt::format("f32[{}{},{}]", batch, m, k);
  const std::string rhs = fmt::format("f32[{}{},{}]", batch, k, n);
  const std::string dims = b > 0 ? "lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={2}, "
                                   "rhs_contracting_dims={1}"
                                 : "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
  const std::string out = fmt::format("f32[{}{},{}]", batch, m, n);
  return fmt::format(R"(HloModule m
{}fused {{
  q = {} parameter(0)
  z = f32[] constant(0)
  lo = f32[] constant(-inf)
{}}}
ENTRY e {{
  a = {} parameter(0)
  w = {} parameter(1)
  four = f32[] constant(4)
  fa = {} broadcast(four), dimensions={{}}
  fw = {} broadcast(four), dimensions={{}}
  a4 = {} multiply(a, fa)
  w4 = {} multiply(w, fw)
  ai = {} round-nearest-even(a4)
  wi = {} round-nearest-even(w4)
  q = {} dot(ai, wi), {}
  ROOT f = {} fusion(q), kind=kInput, calls=fused
}}
)",
                     kReducers, out, body, lhs, rhs, lhs, rhs, lhs, rhs, lhs, rhs, out, dims, out);
}

// Compiles `text` for the CPU; its result must equal the evaluator's exactly, and its kInput
// fusion must write over its operand (else the case checks nothing).
void ExpectExactInPlace(const std::string& text) {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  const std::vector<Literal> arguments = testing::RandomArguments(text);
  auto expected = EvaluateModule(**module, arguments);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto executable = runtime::CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  const BufferAssignment& buffers = (*executable)->buffer_assignment();
  int in_place = 0;
  for (const HloInstruction* instr : (*executable)->module().entry_computation()->instructions()) {
    if (instr->opcode() != HloOpcode::kFusion || instr->fusion_kind != FusionKind::kInput) continue;
    auto out = buffers.GetSlice(*instr);
    for (const HloInstruction* operand : instr->operands()) {
      auto in = buffers.GetSlice(*operand);
      in_place += out.ok() && in.ok() && out->allocation == in->allocation && out->offset == in->offset;
    }
  }
  EXPECT_EQ(in_place, 1) << (*executable)->module().ToString();
  auto actual = (*executable)->Execute(arguments);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, {0, 0});
  EXPECT_TRUE(match.ok()) << match.message();
}

TEST(CpuRowEmitterTest, AFusionOverItsOperandReducesItBeforeWritingIt) {
  // Every kernel a kInput fusion gets on the CPU, over a product that dies at it: the row kernel
  // (rows, softmax's shape), which reduces a row before it writes it, and the column sweep and
  // the phased form (columns, middle and several dimensions), which materialize the reductions
  // before the output phase. The outputs are exact, so a kernel that wrote an element before a
  // reduction over it read it would show (a row kernel that writes a row's first element before
  // reducing the row fails the four row cases; a phased form that recomputes the reductions per
  // output instead of materializing them fails the other five).
  // x - sum(x) and (x - sum(x)) * sum(x - sum(x)) over the rows (dimension 1) or the columns (0).
  auto centred = [](const std::string& shape, const std::string& reduced, const std::string& dims,
                    const std::string& kept, bool chained) {
    std::string text = fmt::format(R"(  s = {1} reduce(q, z), dimensions={{{2}}}, to_apply=add
  sb = {0} broadcast(s), dimensions={{{3}}}
  c = {0} subtract(q, sb)
)",
                                   shape, reduced, dims, kept);
    if (!chained) return text + fmt::format("  ROOT o = {} negate(c)\n", shape);
    return text + fmt::format(R"(  s2 = {1} reduce(c, z), dimensions={{{2}}}, to_apply=add
  sb2 = {0} broadcast(s2), dimensions={{{3}}}
  ROOT o = {0} multiply(c, sb2)
)",
                              shape, reduced, dims, kept);
  };
  // Rows: odd sizes, chained; rows shorter than a vector; one long row per task.
  ExpectExactInPlace(OverAProduct(0, 37, 24, 129, centred("f32[37,129]", "f32[37]", "1", "0", true)));
  ExpectExactInPlace(OverAProduct(0, 100, 8, 3, centred("f32[100,3]", "f32[100]", "1", "0", true)));
  ExpectExactInPlace(OverAProduct(0, 3, 8, 40000, centred("f32[3,40000]", "f32[3]", "1", "0", false)));
  // Columns (the column sweep, or the phased form): chained, and odd sizes.
  ExpectExactInPlace(OverAProduct(0, 512, 64, 96, centred("f32[512,96]", "f32[96]", "0", "1", true)));
  ExpectExactInPlace(OverAProduct(0, 301, 8, 77, centred("f32[301,77]", "f32[77]", "0", "1", false)));
  // The middle dimension, and several dimensions (the outer two, the outer and the inner).
  ExpectExactInPlace(OverAProduct(6, 50, 8, 33, centred("f32[6,50,33]", "f32[6,33]", "1", "0,2", true)));
  ExpectExactInPlace(OverAProduct(6, 50, 8, 33, centred("f32[6,50,33]", "f32[33]", "0,1", "2", false)));
  ExpectExactInPlace(OverAProduct(6, 50, 8, 33, centred("f32[6,50,33]", "f32[50]", "0,2", "1", true)));
  // Softmax's shape (a max, then a sum of what it shifts), without the exponential's rounding.
  ExpectExactInPlace(OverAProduct(0, 64, 16, 200, R"(  m = f32[64] reduce(q, lo), dimensions={1}, to_apply=max
  mb = f32[64,200] broadcast(m), dimensions={0}
  d = f32[64,200] subtract(q, mb)
  s = f32[64] reduce(d, z), dimensions={1}, to_apply=add
  sb = f32[64,200] broadcast(s), dimensions={0}
  ROOT o = f32[64,200] multiply(d, sb)
)"));
}

}  // namespace
}  // namespace xlens::codegen
