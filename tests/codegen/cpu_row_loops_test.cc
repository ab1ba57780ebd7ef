// The loops of the CPU row kernel (compiler/codegen/cpu/cpu_row_loops.h): the reductions of a
// level share one interleaved loop that also fills the row caches, divisions by a per-row value
// become multiplications by its reciprocal only where that reciprocal is a normal number, and
// the results match the reference evaluator on the rows that break careless kernels (one
// element, odd lengths, -inf and NaN rows, masked rows, subnormal and infinite sums).
#include <cmath>
#include <limits>
#include <random>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "fused_kernel_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"

namespace xlens::codegen {
namespace {

using testing::IrOfRoot;
using testing::Count;

// The loops of the IR: blocks named <loop>.header, numbered or not where names repeat.
int Loops(const std::string& ir) {
  const std::regex header(R"(\n[A-Za-z0-9_.]*\.header[0-9]*:)");
  return std::distance(std::sregex_iterator(ir.begin(), ir.end(), header), std::sregex_iterator());
}

constexpr const char* kReducers = R"(
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
)";

// The fused computation's first lines over s = f32[rows, n] (r = f32[rows]): the rows' maximum m,
// d = x - m, e = exp(d), and sb, the broadcast sum of e over each row.
std::string MaxShiftedExpSum(const std::string& s, const std::string& r) {
  return "fused {\n  x = " + s + " parameter(0)\n  lo = f32[] constant(-inf)\n  m = " + r +
         " reduce(x, lo), dimensions={1}, to_apply=max\n  mb = " + s +
         " broadcast(m), dimensions={0}\n  d = " + s + " subtract(x, mb)\n  e = " + s +
         " exponential(d)\n  z = f32[] constant(0)\n  sum = " + r +
         " reduce(e, z), dimensions={1}, to_apply=add\n  sb = " + s + " broadcast(sum), dimensions={0}\n";
}

// softmax over rows of `n` elements of f32[rows, n].
std::string Softmax(int rows, int n) {
  const std::string s = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  return std::string("HloModule m\n") + kReducers + MaxShiftedExpSum(s, r) + "  ROOT o = " + s +
         " divide(e, sb)\n}\nENTRY e {\n  x = " + s + " parameter(0)\n  ROOT f = " + s +
         " fusion(x), kind=kInput, calls=fused\n}\n";
}

// log_softmax over rows of `n` elements of f32[rows, n]: d - log(sum of e).
std::string LogSoftmax(int rows, int n) {
  const std::string s = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  return std::string("HloModule m\n") + kReducers + MaxShiftedExpSum(s, r) + "  l = " + r +
         " log(sum)\n  lb = " + s + " broadcast(l), dimensions={0}\n  ROOT o = " + s +
         " subtract(d, lb)\n}\nENTRY e {\n  x = " + s + " parameter(0)\n  ROOT f = " + s +
         " fusion(x), kind=kInput, calls=fused\n}\n";
}

// Softmax (or with `log`, log_softmax) of f32[rows, n] shifted by m, the rows' reduce-max from
// `init`, and with `floor` by maximum(m, floor) instead: the shifts of ExpOfShiftByMaximum that
// are at least, but not always, each row's own maximum.
std::string ShiftedSoftmax(int rows, int n, const std::string& init, const std::string& floor, bool log) {
  const std::string s = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  std::string text = std::string("HloModule m\n") + kReducers + "fused {\n  x = " + s +
                     " parameter(0)\n  lo = f32[] constant(" + init + ")\n  m0 = " + r +
                     " reduce(x, lo), dimensions={1}, to_apply=max\n";
  if (!floor.empty()) {
    text += "  c = f32[] constant(" + floor + ")\n  cb = " + r + " broadcast(c), dimensions={}\n  m = " + r +
            " maximum(m0, cb)\n";
  }
  text += "  mb = " + s + " broadcast(" + std::string(floor.empty() ? "m0" : "m") + "), dimensions={0}\n  d = " + s +
          " subtract(x, mb)\n  e = " + s + " exponential(d)\n  z = f32[] constant(0)\n  sum = " + r +
          " reduce(e, z), dimensions={1}, to_apply=add\n  sb = " + s + " broadcast(sum), dimensions={0}\n";
  if (log) {
    text += "  l = " + r + " log(sum)\n  lb = " + s + " broadcast(l), dimensions={0}\n  ROOT o = " + s +
            " subtract(d, lb)\n";
  } else {
    text += "  ROOT o = " + s + " divide(e, sb)\n";
  }
  return text + "}\nENTRY e {\n  x = " + s + " parameter(0)\n  ROOT f = " + s +
         " fusion(x), kind=kInput, calls=fused\n}\n";
}

Literal Rows(int rows, int n, uint64_t seed) {
  Literal x(Shape(PrimitiveType::F32, {rows, n}));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
  for (float& v : x.data<float>()) v = uniform(rng);
  return x;
}

TEST(CpuRowLoopsTest, SoftmaxSumsTheCacheAsItFillsItWithInterleavedAccumulators) {
  const std::string ir = IrOfRoot(Softmax(37, 129));
  // The max runs a row ahead: a task's first row takes it in a loop of its own (and a
  // NaN-semantics loop for a row with a NaN) before the loop over rows; inside it, the loop
  // that stores and sums exp(x - max) takes the next row's max too (and its NaN loop after it),
  // then the output loop in its multiplying and dividing versions: seven loops, none of them
  // the elemental emitter's one-reduction loop.
  EXPECT_EQ(Loops(ir), 7) << ir;
  EXPECT_EQ(Count(ir, "row.first.then:"), 1) << ir;
  EXPECT_EQ(Count(ir, "reduce.0.header"), 0) << ir;
  // The reduction loops ask for several accumulators (the property is one uniqued node): four
  // for the maximum's, two for the exponentials'.
  EXPECT_EQ(Count(ir, "!\"llvm.loop.interleave.count\", i32 4"), 1) << ir;
  EXPECT_EQ(Count(ir, "!\"llvm.loop.interleave.count\", i32 2"), 1) << ir;
  EXPECT_EQ(Count(ir, "!llvm.loop"), 6) << ir;
  // The maximum ignores the sign of zero, and in its first loop over a row NaNs too (one
  // instruction a vector instead of three): the first row's, and the next row's in the sum's.
  EXPECT_EQ(Count(ir, "call nnan nsz float @llvm.maxnum.f32"), 2) << ir;
  EXPECT_EQ(Count(ir, "call reassoc nsz float @llvm.maximum.f32"), 2) << ir;
  // One reciprocal per row, and the multiplying loop guarded by its being normal.
  EXPECT_EQ(Count(ir, "%row.reciprocal = fdiv float 1.000000e+00"), 1) << ir;
  EXPECT_GE(Count(ir, "row.multiply.then:"), 1) << ir;
  EXPECT_GE(Count(ir, "row.divide.then:"), 1) << ir;
  testing::ExpectMatchesEvaluator(Softmax(37, 129), {}, {1e-6, 1e-5});
}

TEST(CpuRowLoopsTest, ReductionLoopsOverLongRowsAreNotUnrolled) {
  // 1000 elements: both reduction loops stay loops. Their loop ids are the ones with three
  // properties besides themselves: parallel accesses, interleave, no unrolling.
  const std::string ir = IrOfRoot(Softmax(4, 1000));
  EXPECT_EQ(Count(ir, "!{!\"llvm.loop.unroll.disable\"}"), 1) << ir;
  const std::regex three_properties(R"(\n!([0-9]+) = distinct !\{!\1, ![0-9]+, ![0-9]+, ![0-9]+\})");
  EXPECT_EQ(std::distance(std::sregex_iterator(ir.begin(), ir.end(), three_properties),
                          std::sregex_iterator()),
            2)
      << ir;
  // 129 elements: short enough to unroll.
  EXPECT_EQ(Count(IrOfRoot(Softmax(37, 129)), "llvm.loop.unroll.disable"), 0);
  testing::ExpectMatchesEvaluator(Softmax(4, 1000), {}, {1e-6, 1e-5});
}

TEST(CpuRowLoopsTest, ShortRowsAreOneMaskedVectorEach) {
  // A classifier's rows of 10 logits, fewer than computed across rows (kAcrossRowsMinRows): each
  // loop over a row (the first row's maximum, the sum's loop with the next row's maximum, the
  // output loop in its multiplying and dividing versions) asks for one vector of 16 lanes under
  // a mask, with no interleaved accumulators; unrolled whole, it was scalar code.
  const std::string ir = IrOfRoot(Softmax(37, 10));
  const std::string predicated = "!\"llvm.loop.vectorize.predicate.enable\", i1 true}";
  ASSERT_EQ(Count(ir, predicated), 1) << ir;
  std::smatch hint;
  ASSERT_TRUE(std::regex_search(ir, hint, std::regex(R"(\n(![0-9]+) = !\{!"llvm.loop.vectorize.predicate.enable")")));
  const std::regex loop_with_hint("distinct !\\{[^\n]*" + hint.str(1) + "[,}]");
  EXPECT_EQ(std::distance(std::sregex_iterator(ir.begin(), ir.end(), loop_with_hint), std::sregex_iterator()), 4)
      << ir;
  EXPECT_EQ(Count(ir, "!\"llvm.loop.vectorize.width\", i32 16}"), 1) << ir;
  EXPECT_EQ(Count(ir, "llvm.loop.interleave.count\", i32 2"), 0) << ir;
  EXPECT_EQ(Count(ir, "llvm.loop.interleave.count\", i32 4"), 0) << ir;
  // Rows of 3 take a vector of 4 lanes; rows of 17 are long rows.
  EXPECT_EQ(Count(IrOfRoot(Softmax(5, 3)), "!\"llvm.loop.vectorize.width\", i32 4}"), 1);
  EXPECT_EQ(Count(IrOfRoot(Softmax(5, 17)), "llvm.loop.vectorize.predicate.enable"), 0);
  testing::ExpectMatchesEvaluator(Softmax(37, 10), {}, {1e-6, 1e-5});
}

TEST(CpuRowLoopsTest, ShortRowsNarrowerThanTheirVectorVisitEvenRowsFirst) {
  // Rows of 10 in 16 lanes are visited the even rows of each block of 16 first, so that a row's
  // masked loads never follow the masked stores of the row just before it (which overlap its
  // first 24 bytes when the kernel writes over its operand); rows of exactly 16 lanes and long
  // rows keep their order. (From 64 rows on, such rows are computed across rows instead.) Every
  // row is still computed once: blocks of 16, a last block of odd and of even length, and
  // single rows against the evaluator, in both the softmax's (a sum taken a row ahead) and the
  // log-softmax's forms.
  // The rows visited: the row, and the next one whose maximum its last loop takes.
  auto visited = [](const std::string& ir) {
    const std::regex defined(R"(%row\.visited[0-9]* = )");
    return std::distance(std::sregex_iterator(ir.begin(), ir.end(), defined), std::sregex_iterator());
  };
  EXPECT_EQ(visited(IrOfRoot(Softmax(37, 10))), 2);
  EXPECT_EQ(visited(IrOfRoot(LogSoftmax(37, 10))), 2);
  EXPECT_EQ(visited(IrOfRoot(Softmax(5, 3))), 2);
  EXPECT_EQ(visited(IrOfRoot(Softmax(37, 16))), 0);
  EXPECT_EQ(visited(IrOfRoot(Softmax(37, 17))), 0);
  for (int rows : {1, 2, 3, 16, 17, 37, 40}) {
    SCOPED_TRACE(rows);
    testing::ExpectMatchesEvaluator(Softmax(rows, 10), {}, {1e-6, 1e-5});
    testing::ExpectMatchesEvaluator(LogSoftmax(rows, 10), {}, {1e-6, 1e-5});
    testing::ExpectMatchesEvaluator(Softmax(rows, 3), {}, {1e-6, 1e-5});
  }
}

// A fusion over x = <type>[rows, n] of `body` (whose root is o), reduced by `reducers`.
std::string RowFusion(const std::string& type, int rows, int n, const std::string& reducers, const std::string& body) {
  const std::string s = type + "[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  return "HloModule m\n" + reducers + "fused {\n  x = " + s + " parameter(0)\n" + body + "}\nENTRY e {\n  x = " + s +
         " parameter(0)\n  ROOT f = " + s + " fusion(x), kind=kInput, calls=fused\n}\n";
}

// x minus its row's sum, in `type`.
std::string SumShifted(const std::string& type, int rows, int n) {
  const std::string s = type + "[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = type + "[" + std::to_string(rows) + "]";
  return RowFusion(type, rows, n,
                   "sum { a = " + type + "[] parameter(0)  b = " + type + "[] parameter(1)  ROOT r = " + type +
                       "[] add(a, b) }\n",
                   "  z = " + type + "[] constant(0)\n  r = " + r + " reduce(x, z), dimensions={1}, to_apply=sum\n  rb = " +
                       s + " broadcast(r), dimensions={0}\n  ROOT o = " + s + " subtract(x, rb)\n");
}

TEST(CpuRowLoopsTest, ShortRowsTheVectorizerCannotTakeStayUnrolledWhole) {
  // A variadic argmax over rows of 10 (x minus the row's value at its argmax), sums of bf16 and
  // f8 over rows of 10 and an f32 sum over a few rows of 2: asked for one masked vector, the
  // loop vectorizer refused each ("loop not vectorized" on every compile) and left the loop
  // rolled. None is asked; each loop keeps the interleave hint alone, under which it is
  // unrolled whole. (64 rows of 2 or more are computed across rows.)
  const std::string argmax = RowFusion(
      "f32", 37, 10, testing::kArgmax,
      "  i = s32[37,10] iota(), iota_dimension=1\n  lo = f32[] constant(-inf)\n  z = s32[] constant(0)\n"
      "  r = (f32[37], s32[37]) reduce(x, i, lo, z), dimensions={1}, to_apply=argmax\n"
      "  v = f32[37] get-tuple-element(r), index=0\n  vb = f32[37,10] broadcast(v), dimensions={0}\n"
      "  ROOT o = f32[37,10] subtract(x, vb)\n");
  for (const std::string& text : {argmax, SumShifted("bf16", 37, 10), SumShifted("f8e4m3fn", 37, 10),
                                  SumShifted("f32", 63, 2)}) {
    SCOPED_TRACE(text);
    const std::string ir = IrOfRoot(text);
    EXPECT_EQ(Count(ir, "llvm.loop.vectorize.enable"), 0) << ir;
    EXPECT_EQ(Count(ir, "llvm.loop.unroll.disable"), 0) << ir;
    EXPECT_GT(Count(ir, "llvm.loop.interleave.count"), 0) << ir;
    ::testing::internal::CaptureStderr();
    testing::ExpectMatchesEvaluator(text, {}, {1e-6, 1e-5});
    const std::string diagnostics = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(Count(diagnostics, "not vectorized"), 0) << diagnostics;
  }
  // f32, s32 and f64 rows of 10, 3 and 16 are still one masked vector each.
  for (const std::string& text : {SumShifted("f32", 37, 10), SumShifted("s32", 37, 3), SumShifted("f64", 37, 16)}) {
    SCOPED_TRACE(text);
    EXPECT_GT(Count(IrOfRoot(text), "llvm.loop.vectorize.predicate.enable"), 0);
  }
  // f16 rows of 10 over 4096 rows, unrolled whole, each element added into a lane of 8 (the
  // power of two at or below 10) and the lanes summed as one tree from -0 (kShortHalfSumMinLength):
  // reassociated as f32's are, the sums stay within a few of f16's roundings (2^-11) of the
  // evaluator's in-order ones, and the row is still not asked for a masked vector. (A sum's adds
  // keep the sign of zero, so the SLP vectorizer would leave the unrolled adds in order:
  // reduction_signed_zero_test.) Rows of 16 are one vector of 16 lanes.
  const std::string f16 =
      "HloModule m\nsum { a = f16[] parameter(0)  b = f16[] parameter(1)  ROOT r = f16[] add(a, b) }\n"
      "ENTRY e {\n  x = f16[4096,10] parameter(0)\n  z = f16[] constant(0)\n"
      "  ROOT r = f16[4096] reduce(x, z), dimensions={1}, to_apply=sum\n}\n";
  const std::string ir = IrOfRoot(f16);
  EXPECT_EQ(Count(ir, "@llvm.vector.reduce.fadd.v8f16(half 0xH8000"), 1) << ir;
  EXPECT_EQ(Count(ir, "llvm.loop.vectorize.enable"), 0) << ir;
  testing::ExpectMatchesEvaluator(f16, {}, {1e-2, 1e-2});
  std::string f16_16 = f16;
  f16_16.replace(f16_16.find("f16[4096,10]"), 12, "f16[4096,16]");
  EXPECT_EQ(Count(IrOfRoot(f16_16), "@llvm.vector.reduce.fadd.v16f16(half 0xH8000"), 1);
  testing::ExpectMatchesEvaluator(f16_16, {}, {1e-2, 1e-2});
  // Rows of 64: past the short rows, the sum is kept rolled for the loop vectorizer, which the
  // SLP vectorizer (a sum's adds keeping the sign of zero) would leave as a chain of scalar adds.
  std::string f16_64 = f16;
  f16_64.replace(f16_64.find("f16[4096,10]"), 12, "f16[4096,64]");
  EXPECT_GT(Count(IrOfRoot(f16_64), "llvm.loop.unroll.disable"), 0);
  testing::ExpectMatchesEvaluator(f16_64, {}, {5e-2, 1e-2});
}

std::string ShiftByRowMax(int rows, int n, const std::string& init);

// The MNIST step's log-softmax gradient over logits x and labels y of f32[rows, n] (as its
// fusion computes it): y * c + exp(x - max) * (-(sum of y) * c / sum of exp(x - max)), c = -0.01.
std::string LogSoftmaxGradient(int rows, int n) {
  const std::string s = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  return std::string("HloModule m\n") + kReducers + MaxShiftedExpSum(s, r) + "  y = " + s +
         " parameter(1)\n  ys = " + r + " reduce(y, z), dimensions={1}, to_apply=add\n  c = f32[] constant(-0.01)\n"
         "  cr = " + r + " broadcast(c), dimensions={}\n  t = " + r + " multiply(ys, cr)\n  nt = " + r +
         " negate(t)\n  q = " + r + " divide(nt, sum)\n  qb = " + s + " broadcast(q), dimensions={0}\n  p = " + s +
         " multiply(qb, e)\n  cs = " + s + " broadcast(c), dimensions={}\n  yc = " + s + " multiply(y, cs)\n  ROOT o = " +
         s + " add(yc, p)\n}\nENTRY e {\n  x = " + s + " parameter(0)\n  y = " + s + " parameter(1)\n  ROOT f = " + s +
         " fusion(x, y), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, RowsNarrowerThanAVectorAreComputedAcrossRows) {
  // From 64 rows on, rows narrower than a vector of 32-bit elements are computed 16 at a time:
  // the row loop is the one loop left (each row's loops unrolled as they are emitted), asked for
  // vectors of 16 rows without a mask; rows whose loops compute an exponential at every length
  // below 16, light rows (a sum) up to 7.
  auto across = [](const std::string& ir) {
    return Loops(ir) == 1 && Count(ir, "!\"llvm.loop.vectorize.width\", i32 16}") == 1 &&
           Count(ir, "llvm.loop.vectorize.predicate.enable") == 0;
  };
  for (const std::string& text : {Softmax(64, 10), Softmax(64, 1), LogSoftmax(100, 15), LogSoftmaxGradient(100, 10),
                                  SumShifted("f32", 79, 7), SumShifted("s32", 64, 2)}) {
    SCOPED_TRACE(text);
    const std::string ir = IrOfRoot(text);
    EXPECT_TRUE(across(ir)) << ir;
  }
  // Fewer rows, a whole vector along the row, a light row of 8, 64-bit and bf16 elements.
  for (const std::string& text : {Softmax(63, 10), Softmax(64, 16), SumShifted("f32", 64, 8), SumShifted("f64", 64, 10),
                                  SumShifted("bf16", 64, 10)}) {
    SCOPED_TRACE(text);
    const std::string ir = IrOfRoot(text);
    EXPECT_FALSE(across(ir)) << ir;
  }
  // Against the evaluator: row lengths 1-33 around the rules' limits, whole steps and row counts
  // that are not a multiple of the step (15 scalar rows after the last step), and rows of
  // -inf (NaN out), an infinity, a NaN, -0 and the top of f32.
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {1, 2, 3, 7, 8, 10, 15, 16, 17, 33}) {
    for (int rows : {64, 79}) {
      SCOPED_TRACE("f32[" + std::to_string(rows) + "," + std::to_string(n) + "]");
      Literal x = Rows(rows, n, 7 * n + rows);
      auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
      for (float& v : row(0)) v = -inf;
      row(3)[n / 2] = inf;
      row(5)[n - 1] = nan;
      for (float& v : row(8)) v = -0.0f;
      for (float& v : row(11)) v = 3.0e38f;
      row(rows - 1)[0] = nan;
      for (const std::string& text : {Softmax(rows, n), LogSoftmax(rows, n), ShiftByRowMax(rows, n, "-inf")}) {
        std::vector<Literal> args;
        args.push_back(x);
        testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 1e-5});
      }
      // x minus its row's sum: the sum's order is free, and a result near 0 keeps the sum's
      // rounding (33 terms of up to 8: within 2e-5).
      std::vector<Literal> shifted;
      shifted.push_back(x);
      testing::ExpectMatchesEvaluator(SumShifted("f32", rows, n), std::move(shifted), {3e-5, 1e-5});
      std::vector<Literal> args;
      args.push_back(x);
      args.push_back(Rows(rows, n, n + 1));
      testing::ExpectMatchesEvaluator(LogSoftmaxGradient(rows, n), std::move(args), {1e-6, 1e-5});
    }
  }
  // Written over its logits, as the MNIST step's is (the product's output buffer, which the
  // buffer assignment gives the gradient): a step's stores land on rows its loads have read.
  std::string in_place = LogSoftmaxGradient(100, 10);
  in_place.replace(in_place.find("  x = f32[100,10] parameter(0)\n  y = f32[100,10] parameter(1)\n  ROOT f"),
                   std::string("  x = f32[100,10] parameter(0)\n  y = f32[100,10] parameter(1)\n  ROOT f").size(),
                   "  a = f32[100,64] parameter(0)\n  w = f32[64,10] parameter(2)\n  x = f32[100,10] dot(a, w), "
                   "lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  y = f32[100,10] parameter(1)\n  ROOT f");
  testing::ExpectMatchesEvaluator(in_place, {}, {1e-6, 1e-5});
  // s32 sums wrap alike, and bf16 rows keep the rows' own loops.
  testing::ExpectMatchesEvaluator(SumShifted("s32", 100, 5), {}, {0, 0});
  testing::ExpectMatchesEvaluator(SumShifted("bf16", 100, 10), {}, {1e-2, 1e-2});
}

TEST(CpuRowLoopsTest, AVocabularySizedRowKeepsItsExpInTheRowCache) {
  // 50257 floats (196 KiB) a row: past L1, but reading exp back from L2 beats computing it again.
  const std::string ir = IrOfRoot(Softmax(2, 50257));
  EXPECT_EQ(Count(ir, "alloca [50257 x float]"), 1);
  testing::ExpectMatchesEvaluator(Softmax(2, 50257), {}, {1e-6, 1e-5});
}

TEST(CpuRowLoopsTest, SoftmaxOnOneElementOddLengthAndExtremeRows) {
  for (int n : {1, 3, 10, 16, 17, 67, 1001}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    const int rows = 9;
    Literal x = Rows(rows, n, n);
    auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
    const float inf = std::numeric_limits<float>::infinity();
    for (float& v : row(0)) v = -inf;                                  // max -inf: NaN row
    row(1)[n / 2] = inf;                                               // an infinite element
    row(2)[n - 1] = std::numeric_limits<float>::quiet_NaN();           // a NaN element
    for (float& v : row(3)) v = 3.0e38f;                               // max at the top of f32
    for (float& v : row(4)) v = -1.0e9f;                               // all masked
    row(5)[0] = -inf;                                                  // one masked element
    for (int i = 0; i < n; ++i) row(6)[i] = i % 2 ? -1.0e9f : 50.0f;   // half masked
    std::vector<Literal> args;
    args.push_back(std::move(x));
    testing::ExpectMatchesEvaluator(Softmax(rows, n), std::move(args), {1e-6, 1e-5});
  }
}

TEST(CpuRowLoopsTest, LogSoftmaxScalesItsSumOfExponentialsOnceARow) {
  // Log-softmax reads its exponentials only in their sum: each term stops before the
  // exponential's last multiply (by 2^-34), which the row's sum takes once after its loop.
  // Softmax, whose quotients cancel it, takes it nowhere (below).
  const std::string scale = "0x3DD0000000000000";
  const std::regex once(R"(= load float, ptr %row\.acc[0-9]*, align 4\n  %[0-9]+ = fmul float %[0-9]+, 0x3DD0000000000000)");
  const std::string cpu = "x86_64-unknown-linux-gnu";
  const std::string ir = IrOfRoot(LogSoftmax(37, 129), 0, cpu);
  EXPECT_EQ(Count(ir, scale), 1) << ir;
  EXPECT_EQ(std::distance(std::sregex_iterator(ir.begin(), ir.end(), once), std::sregex_iterator()), 1) << ir;
  const std::string softmax = IrOfRoot(Softmax(37, 129), 0, cpu);
  EXPECT_EQ(Count(softmax, scale), 0) << softmax;
  EXPECT_EQ(std::distance(std::sregex_iterator(softmax.begin(), softmax.end(), once), std::sregex_iterator()), 0);
  // The extreme rows: subnormal terms (half masked, all masked), an infinity, NaN.
  for (int n : {3, 17, 1001}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    const int rows = 8;
    Literal x = Rows(rows, n, n);
    auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
    const float inf = std::numeric_limits<float>::infinity();
    for (float& v : row(0)) v = -inf;
    row(1)[n / 2] = inf;
    row(2)[n - 1] = std::numeric_limits<float>::quiet_NaN();
    for (float& v : row(3)) v = 3.0e38f;
    for (int i = 0; i < n; ++i) row(4)[i] = i % 2 ? -95.0f : 0.0f;  // terms e^-95, subnormal
    for (int i = 0; i < n; ++i) row(5)[i] = i % 2 ? -1.0e9f : 50.0f;
    std::vector<Literal> args;
    args.push_back(std::move(x));
    testing::ExpectMatchesEvaluator(LogSoftmax(rows, n), std::move(args), {1e-6, 1e-5});
  }
  // Only a shift by each row's own maximum has a sum of 1 or more, against which the terms the
  // multiply would flush count for nothing (SoftmaxDividesItsExponentialsBeforeTheirLastMultiply):
  // JAX's maximum(reduce_max(x), -inf) scales once, a shift from 200 term by term.
  EXPECT_EQ(Count(IrOfRoot(ShiftedSoftmax(37, 129, "-inf", "-inf", true), 0, cpu), scale), 1);
  const std::string above = IrOfRoot(ShiftedSoftmax(37, 129, "200", "", true), 0, cpu);
  EXPECT_EQ(std::distance(std::sregex_iterator(above.begin(), above.end(), once), std::sregex_iterator()), 0) << above;
}

TEST(CpuRowLoopsTest, SoftmaxDividesItsExponentialsBeforeTheirLastMultiply) {
  // Softmax reads its exponentials only in their sum and in their quotients by it: the row cache
  // and the sum both hold them before their last multiply (by 2^-34), which cancels, so no
  // element and no row takes it. Where the exponentials are read otherwise too, each keeps it.
  const std::string scale = "0x3DD0000000000000";
  const std::string cpu = "x86_64-unknown-linux-gnu";
  const std::string softmax = IrOfRoot(Softmax(37, 129), 0, cpu);
  EXPECT_EQ(Count(softmax, scale), 0) << softmax;
  EXPECT_EQ(Count(softmax, "alloca [129 x float]"), 1) << softmax;
  const std::string s = "f32[37,129]", r = "f32[37]";
  const std::string plus_e = std::string("HloModule m\n") + kReducers + MaxShiftedExpSum(s, r) + "  q = " + s +
                             " divide(e, sb)\n  ROOT o = " + s + " add(q, e)\n}\nENTRY e {\n  x = " + s +
                             " parameter(0)\n  ROOT f = " + s + " fusion(x), kind=kInput, calls=fused\n}\n";
  EXPECT_GE(Count(IrOfRoot(plus_e, 0, cpu), scale), 1);
  // Terms 2^34 larger neither overflow nor flush elsewhere than before: large spreads (terms
  // e^-95 and e^-87, subnormal and normal after the multiply), all and half masked rows.
  for (int n : {3, 17, 1001}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    const int rows = 6;
    Literal x = Rows(rows, n, n);
    auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
    for (int i = 0; i < n; ++i) row(0)[i] = i % 2 ? -95.0f : 0.0f;
    for (int i = 0; i < n; ++i) row(1)[i] = i % 2 ? -87.0f : 0.0f;
    for (int i = 0; i < n; ++i) row(2)[i] = i == 0 ? 0.0f : -20.0f - static_cast<float>(i % 90);
    for (float& v : row(3)) v = -1.0e9f;
    for (int i = 0; i < n; ++i) row(4)[i] = i % 2 ? -1.0e9f : 50.0f;
    std::vector<Literal> args;
    args.push_back(std::move(x));
    testing::ExpectMatchesEvaluator(Softmax(rows, n), std::move(args), {1e-6, 1e-5});
  }
  // Only a shift by each row's own maximum has a term e^0 a row: from -inf, maximum'd with -inf
  // (JAX's), the multiply still cancels; from 200, or maximum'd with 200, every term of these rows
  // is below e^-110, where the exponential clamps, and only the multiply flushes the clamped
  // e^-110 2^34 to 0 (0 / 0: NaN, as the evaluator's). Without it the row [0, -1, ..., -7] was a
  // uniform 1/8, and [100, 99, 85 x 3998] 0.645 for e^-1 / (1 + e^-1) with 0.730 as the evaluator
  // computes (its e^-100 is subnormal). From the lowest float, a row all -inf has that maximum,
  // and each x - lowest is -inf: a uniform 1/8 again without the multiply, NaN with it.
  EXPECT_EQ(Count(IrOfRoot(ShiftedSoftmax(37, 129, "-inf", "-inf", false), 0, cpu), scale), 0);
  EXPECT_GE(Count(IrOfRoot(ShiftedSoftmax(37, 129, "-3.40282347e+38", "", false), 0, cpu), scale), 1);
  EXPECT_GE(Count(IrOfRoot(ShiftedSoftmax(37, 129, "-inf", "-3.40282347e+38", false), 0, cpu), scale), 1);
  EXPECT_GE(Count(IrOfRoot(ShiftedSoftmax(1, 4000, "200", "", false), 0, cpu), scale), 1);
  EXPECT_GE(Count(IrOfRoot(ShiftedSoftmax(37, 129, "-inf", "200", false), 0, cpu), scale), 1);
  const std::pair<const char*, const char*> shifts[] = {
      {"200", ""}, {"-inf", "200"}, {"-3.40282347e+38", ""}, {"-inf", "-3.40282347e+38"}};
  for (const auto& [init, floor] : shifts) {
    SCOPED_TRACE(std::string("init ") + init + ", floor " + floor);
    const int rows = 4, n = 8;
    Literal x(Shape(PrimitiveType::F32, {rows, n}));
    auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
    for (int i = 0; i < n; ++i) row(0)[i] = -static_cast<float>(i);
    for (float& v : row(1)) v = 0.0f;
    for (int i = 0; i < n; ++i) row(2)[i] = i == 0 ? 20.0f : -1.0e9f;
    for (float& v : row(3)) v = -std::numeric_limits<float>::infinity();
    std::vector<Literal> args;
    args.push_back(std::move(x));
    testing::ExpectMatchesEvaluator(ShiftedSoftmax(rows, n, init, floor, false), std::move(args), {1e-6, 1e-5});
  }
}

TEST(CpuRowLoopsTest, DivisionByAHugeOrInfiniteRowSumDivides) {
  // x / sum(x) per row: a sum above 2^126 has a subnormal reciprocal (flushed to zero where the
  // kernel runs with subnormals flushed), an infinite one a zero reciprocal, a NaN one a NaN:
  // each of those rows must divide, not multiply.
  const std::string text = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[4,3] parameter(0)
  z = f32[] constant(0)
  s = f32[4] reduce(x, z), dimensions={1}, to_apply=add
  sb = f32[4,3] broadcast(s), dimensions={0}
  ROOT o = f32[4,3] divide(x, sb)
}
ENTRY e {
  x = f32[4,3] parameter(0)
  ROOT f = f32[4,3] fusion(x), kind=kInput, calls=fused
})";
  Literal x(Shape(PrimitiveType::F32, {4, 3}));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> values = {1e38f, 1e38f, 1e38f,  // sum 3e38: 1/sum is subnormal
                                     3e38f, 3e38f, 1.0f,   // sum inf: 3e38/inf = 0
                                     1.0f,  2.0f,  5.0f,   // ordinary: multiplies
                                     1.0f,  nan,   2.0f};  // NaN
  std::copy(values.begin(), values.end(), x.data<float>().begin());
  std::vector<Literal> args;
  args.push_back(std::move(x));
  Literal got = testing::ExpectMatchesEvaluator(text, std::move(args), {0, 2e-7});
  if (got.element_count() == 12) {
    EXPECT_NEAR(got.data<float>()[0], 1.0f / 3.0f, 1e-7);
    EXPECT_EQ(got.data<float>()[3], 0.0f);
    EXPECT_NEAR(got.data<float>()[8], 0.625f, 1e-7);
  }
}

TEST(CpuRowLoopsTest, CausalMaskedSoftmaxMatchesTheEvaluator) {
  // The masked softmax of causal attention: an iota comparison selects the scores or -1e9.
  const std::string text = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[2,7,7] parameter(0)
  big = f32[] constant(-1e+09)
  bigb = f32[2,7,7] broadcast(big), dimensions={}
  i = s32[7] iota(), iota_dimension=0
  col = s32[7,7] broadcast(i), dimensions={1}
  row = s32[7,7] broadcast(i), dimensions={0}
  keep = pred[7,7] compare(row, col), direction=GE
  keepb = pred[2,7,7] broadcast(keep), dimensions={1,2}
  s = f32[2,7,7] select(keepb, x, bigb)
  lo = f32[] constant(-inf)
  m = f32[2,7] reduce(s, lo), dimensions={2}, to_apply=max
  mb = f32[2,7,7] broadcast(m), dimensions={0,1}
  d = f32[2,7,7] subtract(s, mb)
  e = f32[2,7,7] exponential(d)
  z = f32[] constant(0)
  sum = f32[2,7] reduce(e, z), dimensions={2}, to_apply=add
  sb = f32[2,7,7] broadcast(sum), dimensions={0,1}
  ROOT o = f32[2,7,7] divide(e, sb)
}
ENTRY e {
  x = f32[2,7,7] parameter(0)
  ROOT f = f32[2,7,7] fusion(x), kind=kInput, calls=fused
})";
  Literal got = testing::ExpectMatchesEvaluator(text, {}, {1e-6, 1e-5});
  // The first row of each head keeps one element: its weight is exactly 1, the rest 0.
  if (got.element_count() == 98) {
    EXPECT_EQ(got.data<float>()[0], 1.0f);
    EXPECT_EQ(got.data<float>()[1], 0.0f);
  }
}

// Causal attention's masked softmax over f32[heads, n, n]: keep = compare(lhs, rhs) of the
// row and column iotas (`lhs` and `rhs` each "row" or "col"), through select(keep, true, false)
// as JAX's jnp.tril leaves it where `tril`.
std::string MaskedSoftmax(int heads, int n, const std::string& lhs, const std::string& direction,
                          const std::string& rhs, bool tril, const std::string& fill = "-1e+09") {
  const std::string s = "f32[" + std::to_string(heads) + "," + std::to_string(n) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(heads) + "," + std::to_string(n) + "]";
  const std::string p = "pred[" + std::to_string(n) + "," + std::to_string(n) + "]";
  const std::string i = "s32[" + std::to_string(n) + "," + std::to_string(n) + "]";
  std::string text = std::string("HloModule m\n") + kReducers + "fused {\n  x = " + s +
                     " parameter(0)\n  big = f32[] constant(" + fill + ")\n  bigb = " + s +
                     " broadcast(big), dimensions={}\n  i = s32[" + std::to_string(n) +
                     "] iota(), iota_dimension=0\n  col = " + i + " broadcast(i), dimensions={1}\n  row = " + i +
                     " broadcast(i), dimensions={0}\n  " + (tril ? "keep0" : "keep") + " = " + p + " compare(" + lhs +
                     ", " + rhs + "), direction=" + direction + "\n";
  if (tril) {
    text += "  t = pred[] constant(true)\n  tb = " + p + " broadcast(t), dimensions={}\n  f = pred[] constant(false)\n  fb = " +
            p + " broadcast(f), dimensions={}\n  keep = " + p + " select(keep0, tb, fb)\n";
  }
  return text + "  keepb = pred[" + std::to_string(heads) + "," + std::to_string(n) + "," + std::to_string(n) +
         "] broadcast(keep), dimensions={1,2}\n  s = " + s + " select(keepb, x, bigb)\n  lo = f32[] constant(-inf)\n  m = " +
         r + " reduce(s, lo), dimensions={2}, to_apply=max\n  mb = " + s + " broadcast(m), dimensions={0,1}\n  d = " + s +
         " subtract(s, mb)\n  e = " + s + " exponential(d)\n  z = f32[] constant(0)\n  sum = " + r +
         " reduce(e, z), dimensions={2}, to_apply=add\n  sb = " + s + " broadcast(sum), dimensions={0,1}\n  ROOT o = " + s +
         " divide(e, sb)\n}\nENTRY e {\n  x = " + s + " parameter(0)\n  ROOT f = " + s +
         " fusion(x), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, APrefixMaskSplitsTheReductionsLoopWhereItTurnsFalse) {
  // A causal mask keeps a prefix of each row: the loop of the maximum and the exponentials runs
  // with the mask true up to the last multiple of 32 inside the prefix (of this row and of the
  // next one, whose maximum it takes along), computing the mask from there to the first multiple
  // of 32 past it, and on with the mask false (its exponential of -1e9 - max computed once a
  // row), so there are two more loops than where the mask keeps no prefix (NE), for the task's
  // first row's maximum and for each row's level, and for the loops that take a row with a NaN
  // again.
  const int n = 100;
  const int plain = Loops(IrOfRoot(MaskedSoftmax(3, n, "row", "NE", "col", true)));
  EXPECT_EQ(Loops(IrOfRoot(MaskedSoftmax(3, n, "row", "GE", "col", true))), plain + 8);
  EXPECT_EQ(Loops(IrOfRoot(MaskedSoftmax(3, n, "col", "LT", "row", false))), plain + 8);
  // A suffix is not a prefix: kept where the column is at least the row.
  EXPECT_EQ(Loops(IrOfRoot(MaskedSoftmax(3, n, "col", "GE", "row", true))), plain);
  // Each form matches the evaluator, and a masked element's weight is exactly 0 (rows of 100:
  // splits at 32, 64, 96 and the row's end; the rows are several tasks, each row's maximum taken
  // a row ahead).
  struct Case {
    const char* lhs;
    const char* direction;
    const char* rhs;
    int offset;  // kept: column <= row + offset
  };
  for (const Case& c : {Case{"row", "GE", "col", 0}, Case{"row", "GT", "col", -1}, Case{"col", "LE", "row", 0},
                        Case{"col", "LT", "row", -1}}) {
    SCOPED_TRACE(std::string(c.lhs) + " " + c.direction + " " + c.rhs);
    Literal got =
        testing::ExpectMatchesEvaluator(MaskedSoftmax(3, n, c.lhs, c.direction, c.rhs, true), {}, {1e-6, 1e-5});
    if (got.element_count() != 3 * n * n) continue;
    for (int h = 0; h < 3; ++h) {
      for (int r = -c.offset; r < n; ++r) {  // a row that keeps nothing weighs all alike
        for (int j = r + c.offset + 1; j < n; ++j) {
          ASSERT_EQ(got.data<float>()[(h * n + r) * n + j], 0.0f) << h << " " << r << " " << j;
        }
      }
    }
  }
}

TEST(CpuRowLoopsTest, APrefixMaskTakesItsKeptHeadAsKeptWithNaNsAndInfinities) {
  // The columns that both a row and the next one keep, up to a multiple of 32, run without the
  // mask: a NaN or an infinity there, in the stretch where the mask is computed, or past it
  // (discarded by the select) gives what the evaluator gives. A head's last row takes along the
  // maximum of the next head's first row, which keeps one column (or none, GT), so its kept
  // head is the shorter one, 0.
  const int heads = 3, n = 100;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (const char* direction : {"GE", "GT"}) {
    SCOPED_TRACE(direction);
    Literal x(Shape(PrimitiveType::F32, {heads, n, n}));
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<float> uniform(-8.0f, 8.0f);
    for (float& v : x.data<float>()) v = uniform(rng);
    auto at = [&](int h, int r, int j) -> float& { return x.data<float>()[(h * n + r) * n + j]; };
    at(0, 40, 5) = nan;    // in row 40's head (columns 0-31 kept by rows 40 and 41)
    at(0, 50, 33) = inf;   // in its computed stretch
    at(0, 10, 90) = nan;   // masked: discarded
    at(0, 63, 31) = -inf;  // the last column of a head
    at(1, 99, 0) = nan;    // a head's last row, whose next row keeps at most column 0
    at(1, 70, 64) = -inf;  // the first column after a head
    at(2, 64, 10) = inf;   // the row's maximum is inf: inf - inf in its exponentials
    for (int j = 0; j < n; ++j) at(2, 96, j) = -inf;  // a row of -inf only: the mask's -1e9 is its maximum
    std::vector<Literal> args;
    args.push_back(x);
    Literal got = testing::ExpectMatchesEvaluator(MaskedSoftmax(heads, n, "row", direction, "col", true),
                                                  std::move(args), {1e-6, 1e-5});
    if (got.element_count() != heads * n * n) continue;
    EXPECT_TRUE(std::isnan(got.data<float>()[(0 * n + 40) * n + 0]));
    EXPECT_TRUE(std::isnan(got.data<float>()[(1 * n + 99) * n + 99]));
    EXPECT_EQ(got.data<float>()[(0 * n + 10) * n + 90], 0.0f);
    EXPECT_EQ(got.data<float>()[(1 * n + 70) * n + 64], 0.0f);
  }
}

// A row statistic under a causal mask over f32[heads, n, n] that fills the dropped columns with
// `fill` (HLO text of an f32 scalar, or "row" for a parameter per row): `kind` "sum" outputs the
// masked scores times their row's sum (the sum counts every dropped column), "max" the masked
// scores less their row's maximum.
std::string MaskedStatistic(int heads, int n, const std::string& fill, const std::string& kind) {
  const std::string h = std::to_string(heads), w = std::to_string(n);
  const std::string s = "f32[" + h + "," + w + "," + w + "]", r = "f32[" + h + "," + w + "]";
  const std::string i = "s32[" + w + "," + w + "]";
  std::string text = std::string("HloModule m\n") + kReducers + "fused {\n  x = " + s + " parameter(0)\n";
  if (fill == "row") {
    text += "  v = " + r + " parameter(1)\n  fb = " + s + " broadcast(v), dimensions={0,1}\n";
  } else {
    text += "  v = f32[] constant(" + fill + ")\n  fb = " + s + " broadcast(v), dimensions={}\n";
  }
  text += "  i = s32[" + w + "] iota(), iota_dimension=0\n  col = " + i + " broadcast(i), dimensions={1}\n  row = " + i +
          " broadcast(i), dimensions={0}\n  keep = pred[" + w + "," + w + "] compare(row, col), direction=GE\n  keepb = pred[" +
          h + "," + w + "," + w + "] broadcast(keep), dimensions={1,2}\n  sc = " + s + " select(keepb, x, fb)\n";
  if (kind == "sum") {
    text += "  z = f32[] constant(0)\n  t = " + r + " reduce(sc, z), dimensions={2}, to_apply=add\n  tb = " + s +
            " broadcast(t), dimensions={0,1}\n  ROOT o = " + s + " multiply(sc, tb)\n";
  } else {
    text += "  lo = f32[] constant(-inf)\n  t = " + r + " reduce(sc, lo), dimensions={2}, to_apply=max\n  tb = " + s +
            " broadcast(t), dimensions={0,1}\n  ROOT o = " + s + " subtract(sc, tb)\n";
  }
  const std::string params = fill == "row" ? "x = " + s + " parameter(0)\n  v = " + r + " parameter(1)\n  " : "x = " + s + " parameter(0)\n  ";
  return text + "}\nENTRY e {\n  " + params + "ROOT f = " + s + " fusion(" + (fill == "row" ? "x, v" : "x") +
         "), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, APrefixMaskTakesTheColumnsPastItInClosedForm) {
  // Past a causal mask every value of softmax's loops is one value a row (exp(-1e9 - max) and
  // its quotient by the sum): the reductions take those columns in closed form (a sum their
  // number times it, a maximum it once) and the output stores its one value there, so only the
  // kept columns are looped over. Not where the mask keeps no prefix (NE).
  EXPECT_GT(Count(IrOfRoot(MaskedSoftmax(3, 100, "row", "GE", "col", true)), "row.uniform"), 0);
  EXPECT_EQ(Count(IrOfRoot(MaskedSoftmax(3, 100, "row", "NE", "col", true)), "row.uniform"), 0);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  // Fills that make the closed forms' edge cases: exp(-inf - max) = 0; a row that keeps nothing
  // (GT's first) has -inf as its maximum and NaN weights; NaN and +inf fills make every row that
  // drops a column NaN; a fill above every score is the maximum of every row that drops one.
  // A fill among the scores (-3.5) makes the sum mostly dropped columns: the evaluator adds them
  // one at a time in f32 (up to about n 2^-24 off), the closed form multiplies once, so the
  // tolerance is 5e-5 there (a count one off would be 1/n, 3e-3, off).
  for (const char* fill : {"-1e+09", "-inf", "nan", "inf", "20", "-3.5"}) {
    for (const char* direction : {"GE", "GT"}) {
      // Rows of 300 (splits past 256) for the fill that zeroes the dropped columns and the one
      // among the scores.
      const bool long_rows = (std::string(fill) == "-1e+09" || std::string(fill) == "-3.5") && direction[1] == 'E';
      for (int n : long_rows ? std::vector<int>{77, 300} : std::vector<int>{77}) {
        SCOPED_TRACE(std::string(fill) + " " + direction + " " + std::to_string(n));
        const int heads = 2;
        Literal x = Rows(heads * n, n, n);
        x.data<float>()[(0 * n + n - 1) * n + 3] = nan;  // a kept NaN in a head's last row
        std::vector<Literal> args;
        args.push_back(Literal(Shape(PrimitiveType::F32, {heads, n, n})));
        std::copy(x.data<float>().begin(), x.data<float>().end(), args.back().data<float>().begin());
        testing::ExpectMatchesEvaluator(MaskedSoftmax(heads, n, "row", direction, "col", true, fill), std::move(args),
                                        {1e-6, 5e-5});
      }
    }
  }
  // The sum counts every dropped column (a fill of 1.5, and one per row from a parameter, with
  // its NaN and infinite rows), the maximum takes the fill once; short rows (10) and rows of
  // one vector step (32) too.
  for (const char* kind : {"sum", "max"}) {
    for (const char* fill : {"1.5", "row", "-inf"}) {
      for (int n : {10, 32, 77}) {
        SCOPED_TRACE(std::string(kind) + " " + fill + " " + std::to_string(n));
        const std::string text = MaskedStatistic(2, n, fill, kind);
        std::vector<Literal> args = testing::RandomArguments(text, n);
        if (args.size() == 2) {
          args[1].data<float>()[1] = nan;
          args[1].data<float>()[2] = std::numeric_limits<float>::infinity();
          args[1].data<float>()[n + 5] = -std::numeric_limits<float>::infinity();
        }
        testing::ExpectMatchesEvaluator(text, std::move(args), {1e-5, 1e-5});
      }
    }
  }
}

// Softmax over f32[heads, n, n] whose dropped scores are `fill`, kept where `keep` holds:
// HLO lines defining keep (pred[n, n]) from row and col (s32[n, n] iotas) and k (a scalar s32
// constant `k`, kb its broadcast).
std::string SoftmaxUnderMask(int heads, int n, int64_t k, const std::string& keep, const std::string& fill) {
  const std::string w = std::to_string(n), h = std::to_string(heads);
  const std::string s = "f32[" + h + "," + w + "," + w + "]", r = "f32[" + h + "," + w + "]";
  const std::string i = "s32[" + w + "," + w + "]";
  return std::string("HloModule m\n") + kReducers + "fused {\n  x = " + s + " parameter(0)\n  big = f32[] constant(" +
         fill + ")\n  bigb = " + s + " broadcast(big), dimensions={}\n  i = s32[" + w +
         "] iota(), iota_dimension=0\n  col = " + i + " broadcast(i), dimensions={1}\n  row = " + i +
         " broadcast(i), dimensions={0}\n  k = s32[] constant(" + std::to_string(k) + ")\n  kb = " + i +
         " broadcast(k), dimensions={}\n" + keep + "  keepb = pred[" + h + "," + w + "," + w +
         "] broadcast(keep), dimensions={1,2}\n  s = " + s + " select(keepb, x, bigb)\n  lo = f32[] constant(-inf)\n  m = " +
         r + " reduce(s, lo), dimensions={2}, to_apply=max\n  mb = " + s + " broadcast(m), dimensions={0,1}\n  d = " + s +
         " subtract(s, mb)\n  e = " + s + " exponential(d)\n  z = f32[] constant(0)\n  sum = " + r +
         " reduce(e, z), dimensions={2}, to_apply=add\n  sb = " + s + " broadcast(sum), dimensions={0,1}\n  ROOT o = " + s +
         " divide(e, sb)\n}\nENTRY e {\n  x = " + s + " parameter(0)\n  ROOT f = " + s +
         " fusion(x), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, AShiftedCausalMaskIsAPrefixMask) {
  // jnp.tril(x, k) writes its mask as compare(row + k, col), GE; a KV cache's offset, or the
  // indices' difference against a constant, are the same prefix spelled otherwise: each keeps the
  // columns j <= r + c, and takes the columns past it in closed form (row.uniform) as row >= col
  // does. Offsets before the row (every row keeps nothing up to -offset), past its end (every
  // column kept), and the four directions; fills that zero the dropped columns, make a fully
  // masked row's weights NaN (-inf), or every row that drops one NaN.
  const int heads = 2, n = 77;
  const std::string p = "pred[" + std::to_string(n) + "," + std::to_string(n) + "]";
  const std::string i = "s32[" + std::to_string(n) + "," + std::to_string(n) + "]";
  struct Form {
    std::string keep;  // HLO lines defining keep
    int sign;          // kept: j <= r + sign * k + shift
    int shift;
  };
  const std::vector<Form> forms = {
      {"  rk = " + i + " add(row, kb)\n  keep = " + p + " compare(rk, col), direction=GE\n", 1, 0},   // jnp.tril(x, k)
      {"  rk = " + i + " add(kb, row)\n  keep = " + p + " compare(rk, col), direction=GT\n", 1, -1},
      {"  rk = " + i + " add(row, kb)\n  keep = " + p + " compare(col, rk), direction=LE\n", 1, 0},   // a KV cache
      {"  ck = " + i + " subtract(col, kb)\n  keep = " + p + " compare(ck, row), direction=LT\n", 1, -1},
      {"  dif = " + i + " subtract(row, col)\n  keep = " + p + " compare(dif, kb), direction=GE\n", -1, 0},
      {"  nr = " + i + " negate(row)\n  dif = " + i + " add(col, nr)\n  keep = " + p +
           " compare(dif, kb), direction=LE\n", 1, 0},
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (size_t f = 0; f < forms.size(); ++f) {
    // JAX's form at every offset, the others at one before the row, one inside it and one
    // near its end, with the fill that zeroes the dropped columns; the other fills at two.
    for (int64_t k : f == 0 ? std::vector<int64_t>{-80, -77, -5, 0, 3, 76, 200} : std::vector<int64_t>{-5, 3, 70}) {
      for (const char* fill : {"-1e+09", "-inf", "nan"}) {
        const bool zeroes = std::string(fill) == "-1e+09";
        if (!zeroes && (f > 1 || (k != -5 && k != 3))) continue;
        SCOPED_TRACE("form " + std::to_string(f) + " k " + std::to_string(k) + " fill " + fill);
        const std::string text = SoftmaxUnderMask(heads, n, k, forms[f].keep, fill);
        if (zeroes) EXPECT_GT(Count(IrOfRoot(text), "row.uniform"), 0);
        Literal x = Rows(heads * n, n, n);
        x.data<float>()[(0 * n + n - 1) * n + 3] = nan;  // a kept NaN in a head's last row
        x.data<float>()[(1 * n + 10) * n + 70] = nan;    // a NaN that most offsets drop
        std::vector<Literal> args;
        args.push_back(Literal(Shape(PrimitiveType::F32, {heads, n, n})));
        std::copy(x.data<float>().begin(), x.data<float>().end(), args.back().data<float>().begin());
        Literal got = testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 5e-5});
        if (got.element_count() != heads * n * n || !zeroes) continue;
        const int64_t offset = forms[f].sign * k + forms[f].shift;
        for (int h = 0; h < heads; ++h) {
          for (int r = 0; r < n; ++r) {
            if (r + offset < 0) continue;  // a row that keeps nothing weighs all alike
            if ((h == 0 && r == n - 1) || (h == 1 && r == 10)) continue;  // the NaN rows
            for (int64_t j = std::max<int64_t>(r + offset + 1, 0); j < n; ++j) {
              ASSERT_EQ(got.data<float>()[(h * n + r) * n + j], 0.0f) << h << " " << r << " " << j;
            }
          }
        }
      }
    }
  }
  // Not a prefix: a suffix (col - k >= row), twice the row, an index that wraps in s32 (row + k
  // past 2^31 - 1 turns negative for the last rows, which then keep nothing), an unsigned compare.
  const std::vector<std::pair<int64_t, std::string>> others = {
      {3, "  ck = " + i + " subtract(col, kb)\n  keep = " + p + " compare(ck, row), direction=GE\n"},
      {3, "  rr = " + i + " add(row, row)\n  keep = " + p + " compare(rr, col), direction=GE\n"},
      {2147483600, "  rk = " + i + " add(row, kb)\n  keep = " + p + " compare(rk, col), direction=GE\n"},
      {-3, "  rk = " + i + " add(row, kb)\n  keep = " + p + " compare(rk, col), direction=GE, type=UNSIGNED\n"},
  };
  for (const auto& [k, keep] : others) {
    SCOPED_TRACE(keep);
    const std::string text = SoftmaxUnderMask(heads, n, k, keep, "-1e+09");
    EXPECT_EQ(Count(IrOfRoot(text), "row.uniform"), 0);
    testing::ExpectMatchesEvaluator(text, {}, {1e-6, 5e-5});
  }
}

TEST(CpuRowLoopsTest, HalfPrecisionSoftmaxAccumulatesInF32) {
  // JAX's bf16 softmax: the row in bf16, exp and the sum in f32, the division in bf16 (no
  // reciprocal: only f32 and f64 divisions become multiplications).
  const std::string module = std::string("HloModule m\n") + kReducers + R"(
maxb { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT r = bf16[] maximum(a, b) }
fused {
  x = bf16[5,77] parameter(0)
  lo = bf16[] constant(-inf)
  m = bf16[5] reduce(x, lo), dimensions={1}, to_apply=maxb
  mb = bf16[5,77] broadcast(m), dimensions={0}
  d = bf16[5,77] subtract(x, mb)
  df = f32[5,77] convert(d)
  e = f32[5,77] exponential(df)
  z = f32[] constant(0)
  sum = f32[5] reduce(e, z), dimensions={1}, to_apply=add
  sumh = bf16[5] convert(sum)
  sb = bf16[5,77] broadcast(sumh), dimensions={0}
  eh = bf16[5,77] convert(e)
  ROOT o = bf16[5,77] divide(eh, sb)
}
ENTRY e {
  x = bf16[5,77] parameter(0)
  ROOT f = bf16[5,77] fusion(x), kind=kInput, calls=fused
})";
  const std::string ir = IrOfRoot(module);
  EXPECT_EQ(Count(ir, "row.reciprocal"), 0);
  testing::ExpectMatchesEvaluator(module, {}, {1e-2, 1e-2});
}

// x - max(x) per row, with the maximum's initial value `init` (HLO text).
std::string ShiftByRowMax(int rows, int n, const std::string& init) {
  const std::string s = "f32[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  return std::string("HloModule m\n") + kReducers + "fused {\n  x = " + s +
         " parameter(0)\n  lo = f32[] constant(" + init + ")\n  m = " + r +
         " reduce(x, lo), dimensions={1}, to_apply=max\n  mb = " + s +
         " broadcast(m), dimensions={0}\n  ROOT d = " + s + " subtract(x, mb)\n}\nENTRY e {\n  x = " +
         s + " parameter(0)\n  ROOT f = " + s + " fusion(x), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, ARowMaximumWithoutNaNSemanticsTakesANaNRowAgain) {
  // The maximum's loop is one max instruction a vector (maxnum without NaNs) beside an or of
  // the elements' unordered compares; a row with a NaN is taken again with maximum's NaN
  // semantics (+inf and -inf in a row are no NaN).
  const std::string ir = IrOfRoot(ShiftByRowMax(9, 1001, "-inf"));
  EXPECT_EQ(Count(ir, "call nnan nsz float @llvm.maxnum.f32"), 1) << ir;
  EXPECT_EQ(Count(ir, "call reassoc nsz float @llvm.maximum.f32"), 1) << ir;
  EXPECT_GE(Count(ir, "row.nan.then:"), 1) << ir;
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (int n : {1, 37, 1001}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    const int rows = 9;
    Literal x = Rows(rows, n, n);
    auto row = [&](int r) { return x.data<float>().subspan(r * n, n); };
    row(0)[0] = nan;                                                   // NaN first,
    row(1)[n - 1] = nan;                                               // last,
    row(2)[n / 2] = nan;                                               // in the middle
    row(3)[0] = -inf;                                                  // +inf and -inf:
    row(3)[n - 1] = inf;                                               // max inf
    for (float& v : row(4)) v = -inf;                                  // max -inf
    for (float& v : row(5)) v = 3.0e38f;                               // the top of f32
    for (int i = 0; i < n; ++i) row(6)[i] = i % 2 ? -3.0e38f : 3.0e38f;
    std::vector<Literal> args;
    args.push_back(x);
    Literal got = testing::ExpectMatchesEvaluator(ShiftByRowMax(rows, n, "-inf"), std::move(args));
    if (got.element_count() != rows * n) continue;
    for (int r : {0, 1, 2}) {
      for (int i = 0; i < n; ++i) EXPECT_TRUE(std::isnan(got.data<float>()[r * n + i])) << r << " " << i;
    }
    if (n > 1) {
      EXPECT_EQ(got.data<float>()[3 * n], -inf);
    }
    // A NaN initial value makes every row's maximum NaN.
    std::vector<Literal> again;
    again.push_back(std::move(x));
    Literal all_nan = testing::ExpectMatchesEvaluator(ShiftByRowMax(rows, n, "nan"), std::move(again));
    if (all_nan.element_count() == rows * n) {
      EXPECT_TRUE(std::isnan(all_nan.data<float>()[5 * n]));
    }
  }
}

// The rows' maximum beside (x - max) / sum(exp(x - max)) over f32[rows, 37], one input fusion.
std::string MaximumAndScaledRows(int rows) {
  const std::string s = "f32[" + std::to_string(rows) + ",37]";
  const std::string r = "f32[" + std::to_string(rows) + "]";
  return std::string("HloModule m\n") + kReducers + MaxShiftedExpSum(s, r) + "  o = " + s +
         " divide(d, sb)\n  ROOT t = (" + s + ", " + r + ") tuple(o, m)\n}\nENTRY e {\n  x = " + s +
         " parameter(0)\n  ROOT f = (" + s + ", " + r + ") fusion(x), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, TheFirstLevelRunsARowAheadWithItsNaNRows) {
  // A row's maximum is taken in the loop of the previous row's sum (a task's first row's before
  // the loop over rows), and a row with a NaN is taken again there: the maximum is an output, and
  // the elements (x - max) / sum(exp(x - max)) show it too.
  const std::string text = MaximumAndScaledRows(7);
  EXPECT_EQ(Count(IrOfRoot(text), "row.first.then:"), 1);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int r : {0, 1, 3, 6}) {
    SCOPED_TRACE("NaN in row " + std::to_string(r));
    Literal x = Rows(7, 37, r);
    x.data<float>()[r * 37 + 5] = nan;
    // An infinity of each sign (the next row's NaN test, a sum, is NaN; the maximum is not).
    const int both = (r + 2) % 7;
    x.data<float>()[both * 37 + 3] = inf;
    x.data<float>()[both * 37 + 30] = -inf;
    std::vector<Literal> args;
    args.push_back(std::move(x));
    Literal got = testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 1e-5});
    if (got.tuple_elements().size() == 2) {
      EXPECT_TRUE(std::isnan(got.tuple_elements()[1].data<float>()[r]));
      EXPECT_EQ(got.tuple_elements()[1].data<float>()[both], inf);
    }
  }
}

TEST(CpuRowLoopsTest, ARowAheadStopsAtEachTasksLastRow) {
  // Over 1500 rows the kernel splits into several tasks: each task's last row takes no maximum
  // ahead from the next task's rows (which another thread may be reading), and a NaN or a pair
  // of infinities on either side of a task boundary is taken again in its own row. Every third
  // row has a NaN, every third an infinity of each sign, so each boundary meets both.
  const int rows = 1500, n = 37;
  const std::string text = MaximumAndScaledRows(rows);
  {
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok()) << module.status().message();
    llvm::LLVMContext context;
    llvm::Module llvm_module("test", context);
    auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module,
                           KernelTarget::kCpu, KernelOptions{});
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    ASSERT_GT(spec->phases.back().tasks, 2);
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  Literal x = Rows(rows, n, 7);
  for (int r = 0; r < rows; ++r) {
    if (r % 3 == 0) x.data<float>()[r * n + r % n] = nan;
    if (r % 3 == 1) {
      x.data<float>()[r * n + 2] = inf;
      x.data<float>()[r * n + 33] = -inf;
    }
  }
  std::vector<Literal> args;
  args.push_back(std::move(x));
  Literal got = testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 1e-5});
  ASSERT_EQ(got.tuple_elements().size(), 2u);
  for (int r = 0; r < rows; ++r) {
    const float m = got.tuple_elements()[1].data<float>()[r];
    if (r % 3 == 0) {
      EXPECT_TRUE(std::isnan(m)) << r;
    } else if (r % 3 == 1) {
      EXPECT_EQ(m, inf) << r;
    } else {
      EXPECT_TRUE(std::isfinite(m)) << r;
    }
  }
}

TEST(CpuRowLoopsTest, RowsBoundByTheirExponentialsStoreThroughTheCache) {
  // Softmax's and log-softmax's rows take their time in their exponentials: written with plain
  // stores at any size (their maximum a row ahead in the exponentials' loop). Layer norm's light
  // rows stream, and its mean, whose next loop is light, waits for the row as its prefetches
  // expect.
  const std::string log_softmax = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[8,301] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[8] reduce(x, lo), dimensions={1}, to_apply=max
  mb = f32[8,301] broadcast(m), dimensions={0}
  d = f32[8,301] subtract(x, mb)
  e = f32[8,301] exponential(d)
  z = f32[] constant(0)
  s = f32[8] reduce(e, z), dimensions={1}, to_apply=add
  l = f32[8] log(s)
  lb = f32[8,301] broadcast(l), dimensions={0}
  ROOT o = f32[8,301] subtract(d, lb)
}
ENTRY e {
  x = f32[8,301] parameter(0)
  ROOT f = f32[8,301] fusion(x), kind=kInput, calls=fused
})";
  const std::string layer_norm = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[8,301] parameter(0)
  z = f32[] constant(0)
  s = f32[8] reduce(x, z), dimensions={1}, to_apply=add
  n = f32[] constant(0.00332225906)
  nb = f32[8] broadcast(n), dimensions={}
  mean = f32[8] multiply(s, nb)
  mb = f32[8,301] broadcast(mean), dimensions={0}
  c = f32[8,301] subtract(x, mb)
  cc = f32[8,301] multiply(c, c)
  v = f32[8] reduce(cc, z), dimensions={1}, to_apply=add
  vb = f32[8,301] broadcast(v), dimensions={0}
  ROOT o = f32[8,301] divide(c, vb)
}
ENTRY e {
  x = f32[8,301] parameter(0)
  ROOT f = f32[8,301] fusion(x), kind=kInput, calls=fused
})";
  for (const std::string& text : {Softmax(8, 301), Softmax(8, 1024), log_softmax}) {
    const std::string ir = IrOfRoot(text, 1);
    EXPECT_EQ(Count(ir, "!nontemporal"), 0);
    EXPECT_EQ(Count(ir, "llvm.x86.sse.sfence"), 0);
    EXPECT_EQ(Count(ir, "row.first.then:"), 1);
  }
  // An activation after the norm makes its rows as heavy.
  std::string layer_norm_tanh = layer_norm;
  layer_norm_tanh.replace(layer_norm_tanh.find("ROOT o = f32[8,301] divide(c, vb)"), 33,
                          "q = f32[8,301] divide(c, vb)\n  ROOT o = f32[8,301] tanh(q)");
  EXPECT_EQ(Count(IrOfRoot(layer_norm_tanh, 1), "!nontemporal"), 0);
  const std::string streamed = IrOfRoot(layer_norm, 1);
  EXPECT_GT(Count(streamed, "!nontemporal"), 0);
  EXPECT_EQ(Count(streamed, "row.first.then:"), 0);
  EXPECT_EQ(Count(IrOfRoot(layer_norm), "row.first.then:"), 1);
  runtime::CompileOptions streaming;
  streaming.cpu_streaming_store_bytes = 1;
  testing::ExpectMatchesEvaluator(log_softmax, {}, {1e-5, 1e-5}, streaming);
  testing::ExpectMatchesEvaluator(layer_norm_tanh, {}, {1e-5, 1e-4}, streaming);
  testing::ExpectMatchesEvaluator(layer_norm, {}, {1e-5, 1e-4}, streaming);
}

TEST(CpuRowLoopsTest, TwoStatisticsOfOneLevelShareOneLoop) {
  // Layer norm from the mean and the mean of squares: both sums are level 1, one loop.
  const std::string text = std::string("HloModule m\n") + kReducers + R"(
fused {
  x = f32[6,301] parameter(0)
  z = f32[] constant(0)
  s = f32[6] reduce(x, z), dimensions={1}, to_apply=add
  xx = f32[6,301] multiply(x, x)
  ss = f32[6] reduce(xx, z), dimensions={1}, to_apply=add
  n = f32[] constant(301)
  nb = f32[6] broadcast(n), dimensions={}
  mean = f32[6] divide(s, nb)
  msq = f32[6] divide(ss, nb)
  m2 = f32[6] multiply(mean, mean)
  var = f32[6] subtract(msq, m2)
  eps = f32[] constant(1e-5)
  epsb = f32[6] broadcast(eps), dimensions={}
  vare = f32[6] add(var, epsb)
  inv = f32[6] rsqrt(vare)
  mb = f32[6,301] broadcast(mean), dimensions={0}
  ib = f32[6,301] broadcast(inv), dimensions={0}
  c = f32[6,301] subtract(x, mb)
  ROOT o = f32[6,301] multiply(c, ib)
}
ENTRY e {
  x = f32[6,301] parameter(0)
  ROOT f = f32[6,301] fusion(x), kind=kInput, calls=fused
})";
  const std::string ir = IrOfRoot(text);
  // The rows, one loop for both sums, the output loop (no division by a per-row value).
  EXPECT_EQ(Loops(ir), 3) << ir;
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-4});
}

// The row sums of x * x in bf16 (a row output) and x minus them (an element output) over
// bf16[rows, n]: the sums' operand is computed in the kernel, and both kinds of output read them.
std::string Bf16SquareSums(int rows, int n) {
  const std::string s = "bf16[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  const std::string r = "bf16[" + std::to_string(rows) + "]";
  return "HloModule m\nsum { a = bf16[] parameter(0)  b = bf16[] parameter(1)  ROOT r = bf16[] add(a, b) }\n"
         "fused {\n  x = " + s + " parameter(0)\n  y = " + s + " multiply(x, x)\n  z = bf16[] constant(-0)\n  r = " + r +
         " reduce(y, z), dimensions={1}, to_apply=sum\n  rb = " + s + " broadcast(r), dimensions={0}\n  o = " + s +
         " subtract(x, rb)\n  ROOT t = (" + s + ", " + r + ") tuple(o, r)\n}\nENTRY e {\n  x = " + s +
         " parameter(0)\n  ROOT f = (" + s + ", " + r + ") fusion(x), kind=kInput, calls=fused\n}\n";
}

TEST(CpuRowLoopsTest, Bf16RowSumsRunAcrossRowsInOrder) {
  // A bf16 sum is folded in order and rounded to bf16 at every add, as the evaluator folds it.
  // From 64 rows of more than 16 elements on, the rows are summed 16 a vector: a block's
  // operands transposed a chunk of columns at a time, then each column added in order to all
  // the block's rows. f32 and f16 sums (reassociated), fewer rows and rows of 16 keep the rows'
  // own loops.
  auto in_order_across = [](const std::string& ir) {
    // The transpose's and the lanes' loops, each asked for vectors of 16 (loop hints on their
    // latches: without them the vectorizer took 32 columns a step, a 512-element shuffle).
    return Count(ir, "\nrow.block.transpose.header:") == 1 && Count(ir, "\nrow.block.lane.header:") == 1 &&
           Count(ir, "br label %row.block.transpose.header, !llvm.loop !") == 1 &&
           Count(ir, "br label %row.block.lane.header, !llvm.loop !") == 1 &&
           Count(ir, "!\"llvm.loop.vectorize.width\", i32 16}") == 1;
  };
  for (const std::string& text : {SumShifted("bf16", 64, 17), SumShifted("bf16", 100, 1024), Bf16SquareSums(79, 33)}) {
    SCOPED_TRACE(text);
    EXPECT_TRUE(in_order_across(IrOfRoot(text)));
  }
  for (const std::string& text : {SumShifted("f32", 64, 1024), SumShifted("f16", 64, 1024), SumShifted("bf16", 63, 1024),
                                  SumShifted("bf16", 64, 16)}) {
    SCOPED_TRACE(text);
    EXPECT_FALSE(in_order_across(IrOfRoot(text)));
  }
  // Against the evaluator, bit for bit: values whose exponents span 2^-8 to 2^8 (every add
  // rounds), and rows of NaN, inf, inf and -inf, -0 and 3e38 (a sum that overflows); lengths
  // around the chunk of 64 columns; row counts that are whole blocks of 32, one vector past
  // them, and 15 rows after the last block; 1000 rows, split between the threads.
  for (const auto& [rows, n] : std::vector<std::pair<int, int>>{
           {64, 17}, {79, 33}, {100, 64}, {64, 65}, {79, 1024}, {1000, 77}}) {
    SCOPED_TRACE("bf16[" + std::to_string(rows) + "," + std::to_string(n) + "]");
    Literal x(Shape(PrimitiveType::BF16, {rows, n}));
    std::mt19937_64 rng(rows * 1000 + n);
    std::uniform_real_distribution<double> mantissa(1.0, 2.0);
    std::uniform_int_distribution<int> exponent(-8, 8), sign(0, 1);
    for (int64_t i = 0; i < x.element_count(); ++i) {
      x.SetFromDouble(i, (sign(rng) ? -1 : 1) * std::ldexp(mantissa(rng), exponent(rng)));
    }
    const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
    x.SetFromDouble(3 * n + n / 2, nan);
    x.SetFromDouble(5 * n, inf);
    x.SetFromDouble(6 * n, inf);
    x.SetFromDouble(6 * n + n - 1, -inf);
    for (int64_t i = 0; i < n; ++i) x.SetFromDouble(9 * n + i, -0.0);
    for (int64_t i = 0; i < n; ++i) x.SetFromDouble(11 * n + i, 3e38);
    x.SetFromDouble(int64_t{rows - 1} * n, nan);
    for (const std::string& text : {SumShifted("bf16", rows, n), Bf16SquareSums(rows, n)}) {
      std::vector<Literal> arguments;
      arguments.push_back(x);
      auto expected = EvaluateModule(**ParseHloModule(text), arguments);
      ASSERT_TRUE(expected.ok()) << expected.status().message();
      auto actual = testing::CompileAndRun(text, arguments);
      ASSERT_TRUE(actual.ok()) << actual.status().message();
      std::vector<const Literal*> want = {&*expected}, got = {&*actual};
      if (expected->shape().IsTuple()) {
        want = {&expected->tuple_elements()[0], &expected->tuple_elements()[1]};
        got = {&actual->tuple_elements()[0], &actual->tuple_elements()[1]};
      }
      for (size_t o = 0; o < want.size(); ++o) {
        const std::span<const uint16_t> a = want[o]->data<uint16_t>(), b = got[o]->data<uint16_t>();
        ASSERT_EQ(a.size(), b.size());
        int64_t differ = 0, first = -1;
        for (size_t i = 0; i < a.size(); ++i) {
          if (a[i] == b[i]) continue;
          if (first < 0) first = static_cast<int64_t>(i);
          ++differ;
        }
        EXPECT_EQ(differ, 0) << "output " << o << ": the first differing element " << first;
      }
    }
  }
}

}  // namespace
}  // namespace xlens::codegen
