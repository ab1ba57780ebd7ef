// Float sums keep the sign of zero: a sum of -0 elements from an initial value of -0 is -0, as
// the evaluator, XLA and NumPy give it. The CPU reduction kernels may reassociate a sum (its
// order is not part of reduce's semantics), but a vectorized sum whose lanes start at +0 (what
// LLVM picks when the adds say the sign of zero does not matter) turns that -0 into +0. Every
// kernel that reduces (the row loops, long and short rows; the streamed row kernel's next-row
// sums, by lines and by stretches; column reductions, sliced and not; multi-output reductions;
// f16, bf16, f32, f64) is compared with the evaluator bit for bit.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"
#include "fused_kernel_test_util.h"

namespace xlens::codegen {
namespace {

using testing::InInputFusion;
using testing::IrOfRoot;

std::string Reducers(const std::string& type) {
  return "add { a = " + type + "[] parameter(0)  b = " + type + "[] parameter(1)  ROOT r = " + type +
         "[] add(a, b) }\n";
}

// An array of `shape` whose every element is -0 (or `value`).
Literal Filled(const Shape& shape, double value = -0.0) {
  Literal x(shape);
  for (int64_t i = 0; i < x.element_count(); ++i) x.SetFromDouble(i, value);
  return x;
}

// The bytes of every array of `x` (a tuple's elements in order).
std::string Bytes(const Literal& x) {
  if (x.shape().IsTuple()) {
    std::string bytes;
    for (const Literal& e : x.tuple_elements()) bytes += Bytes(e);
    return bytes;
  }
  return std::string(reinterpret_cast<const char*>(x.untyped_data()), x.size_bytes());
}

// `text` run on arguments of -0 (each parameter's shape) compiled for the CPU and by the evaluator:
// equal values (ExpectMatchesEvaluator) and equal bits, signs of zero included.
void ExpectSameBitsAsEvaluator(const std::string& text, const runtime::CompileOptions& options = {}) {
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok()) << module.status().message();
  std::vector<Literal> arguments;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    arguments.push_back(Filled(p->shape()));
  }
  auto expected = EvaluateModule(**module, arguments);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto actual = testing::CompileAndRun(text, arguments, options);
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  Status match = ExpectLiteralNear(*expected, *actual, {0, 0});
  EXPECT_TRUE(match.ok()) << match.message();
  const std::string want = Bytes(*expected), got = Bytes(*actual);
  ASSERT_EQ(want.size(), got.size());
  int64_t differ = 0, first = -1;
  for (size_t i = 0; i < want.size(); ++i) {
    if (want[i] == got[i]) continue;
    ++differ;
    if (first < 0) first = static_cast<int64_t>(i);
  }
  EXPECT_EQ(differ, 0) << "bytes differ from the evaluator's, the first at byte " << first;
}

// x of `type`[rows,n] reduced over `dims` from `init` (a kInput fusion, as the compiler fuses it).
std::string SumOf(const std::string& type, int rows, int n, const std::string& dims, const std::string& out,
                  const std::string& init = "-0") {
  const std::string shape = type + "[" + std::to_string(rows) + "," + std::to_string(n) + "]";
  return InInputFusion(Reducers(type), "  x = " + shape + " parameter(0)\n  z = " + type + "[] constant(" + init +
                                           ")\n  ROOT r = " + out + " reduce(x, z), dimensions={" + dims +
                                           "}, to_apply=add\n");
}

TEST(ReductionSignedZeroTest, RowSumsOfNegativeZerosAreNegativeZero) {
  // Rows long enough to be vectorized (1024), short rows (20: one masked vector) and odd ones.
  for (int n : {1024, 20, 67}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    ExpectSameBitsAsEvaluator(SumOf("f32", 256, n, "1", "f32[256]"));
  }
}

TEST(ReductionSignedZeroTest, RowSumsOfEveryFloatTypeKeepTheSign) {
  for (const char* type : {"f16", "bf16", "f64"}) {
    SCOPED_TRACE(type);
    ExpectSameBitsAsEvaluator(SumOf(type, 64, 1024, "1", std::string(type) + "[64]"));
    ExpectSameBitsAsEvaluator(SumOf(type, 64, 20, "1", std::string(type) + "[64]"));
  }
}

TEST(ReductionSignedZeroTest, SumsOfNegativeZerosFromPositiveZeroArePositiveZero) {
  // -0 + +0 is +0: a sum may not drop its initial value as an additive identity. Rows the
  // vectorizers take whole (f16 and f32 rows of 10 and 2) and long rows.
  for (const char* type : {"f16", "bf16", "f32", "f64"}) {
    SCOPED_TRACE(type);
    for (int n : {2, 10, 1024}) {
      SCOPED_TRACE("row length " + std::to_string(n));
      ExpectSameBitsAsEvaluator(SumOf(type, 64, n, "1", std::string(type) + "[64]", "0"));
    }
    ExpectSameBitsAsEvaluator(SumOf(type, 4096, 16, "0", std::string(type) + "[16]", "0"));
  }
}

// Rows of `n` (64 of them) in eight kinds, each summing exactly in any order, so that every
// reassociated sum must give the evaluator's bits: -0s; +0s; +0 and -0 in turn; 1.5 and -0.25
// among -0s; a NaN among -0s; +inf among +0s; +inf and -inf (NaN); 2 and -2 among -0s (+0).
Literal SpecialRows(PrimitiveType type, int64_t n) {
  Literal x(Shape(type, {64, n}));
  for (int64_t row = 0; row < 64; ++row) {
    for (int64_t i = 0; i < n; ++i) {
      const bool first = i == 0, last = i == n - 1;
      double v = -0.0;
      switch (row % 8) {
        case 1: v = 0.0; break;
        case 2: v = i % 2 ? -0.0 : 0.0; break;
        case 3: v = first ? 1.5 : last ? -0.25 : -0.0; break;
        case 4: v = i == n / 2 ? NAN : -0.0; break;
        case 5: v = last ? INFINITY : 0.0; break;
        case 6: v = first ? INFINITY : last ? -INFINITY : 0.0; break;
        case 7: v = last ? -2.0 : first ? 2.0 : -0.0; break;
      }
      x.SetFromDouble(row * n + i, v);
    }
  }
  return x;
}

TEST(ReductionSignedZeroTest, RowSumsOfEveryLengthMatchTheEvaluatorBitForBit) {
  // Rows of 1 to 33 and 1024: unrolled whole, one masked vector, an f16 row's lanes summed as a
  // tree (10 to 16), the loop vectorizer's; from -0 and from +0.
  std::vector<int64_t> lengths = {1024};
  for (int64_t n = 1; n <= 33; ++n) lengths.push_back(n);
  for (const char* type : {"f16", "bf16", "f32"}) {
    for (int64_t n : lengths) {
      for (const char* init : {"-0", "0"}) {
        SCOPED_TRACE(std::string(type) + " rows of " + std::to_string(n) + " from " + init);
        const std::string text = SumOf(type, 64, static_cast<int>(n), "1", std::string(type) + "[64]", init);
        std::vector<Literal> arguments;
        arguments.push_back(SpecialRows(*ParsePrimitiveType(type), n));
        auto expected = EvaluateModule(**ParseHloModule(text), arguments);
        ASSERT_TRUE(expected.ok()) << expected.status().message();
        auto actual = testing::CompileAndRun(text, arguments);
        ASSERT_TRUE(actual.ok()) << actual.status().message();
        for (int64_t row = 0; row < 64; ++row) {
          const double want = expected->GetAsDouble(row), got = actual->GetAsDouble(row);
          const bool same = std::isnan(want) ? std::isnan(got)
                                             : got == want && std::signbit(got) == std::signbit(want);
          EXPECT_TRUE(same) << "row " << row << ": " << got << " where the evaluator gives " << want;
        }
      }
    }
  }
}

TEST(ReductionSignedZeroTest, ColumnSumsOfNegativeZerosAreNegativeZero) {
  // Over many rows (sliced across tasks, the partials combined) and over few.
  for (const char* type : {"f32", "f16", "bf16", "f64"}) {
    SCOPED_TRACE(type);
    ExpectSameBitsAsEvaluator(SumOf(type, 4096, 256, "0", std::string(type) + "[256]"));
    ExpectSameBitsAsEvaluator(SumOf(type, 7, 100, "0", std::string(type) + "[100]"));
  }
}

TEST(ReductionSignedZeroTest, MultiOutputRowStatisticsKeepTheSign) {
  // A sum and a sum of squares of one row in one loop, and the row shifted by its sum.
  const std::string text = InInputFusion(Reducers("f32"), R"(  x = f32[128,1024] parameter(0)
  z = f32[] constant(-0)
  s = f32[128] reduce(x, z), dimensions={1}, to_apply=add
  q = f32[128,1024] multiply(x, x)
  n = f32[] constant(-0)
  nq = f32[128,1024] negate(q)
  sq = f32[128] reduce(nq, n), dimensions={1}, to_apply=add
  sb = f32[128,1024] broadcast(s), dimensions={0}
  y = f32[128,1024] add(x, sb)
  ROOT t = (f32[128], f32[128], f32[128,1024]) tuple(s, sq, y)
)");
  ExpectSameBitsAsEvaluator(text);
}

// x + sum(x) a row, with the sum an output too: with its outputs streamed, the row kernel takes
// the next row's sum in the output loop.
std::string ShiftedBySum(int rows, int n) {
  const std::string r = std::to_string(rows), m = r + "," + std::to_string(n);
  return InInputFusion(Reducers("f32"), "  x = f32[" + m + "] parameter(0)\n  z = f32[] constant(-0)\n"
                                        "  s = f32[" + r + "] reduce(x, z), dimensions={1}, to_apply=add\n"
                                        "  sb = f32[" + m + "] broadcast(s), dimensions={0}\n"
                                        "  y = f32[" + m + "] add(x, sb)\n"
                                        "  ROOT t = (f32[" + r + "], f32[" + m + "]) tuple(s, y)\n");
}

TEST(ReductionSignedZeroTest, TheStreamedRowKernelsNextRowSumsKeepTheSign) {
  runtime::CompileOptions streamed;
  streamed.cpu_streaming_store_bytes = 1;
  // Rows of whole lines (a line of partial sums a sum) and rows of stretches (a variable a sum).
  for (int n : {1024, 20}) {
    SCOPED_TRACE("row length " + std::to_string(n));
    const std::string text = ShiftedBySum(64, n);
    EXPECT_NE(IrOfRoot(text, 1).find("row.next_sum"), std::string::npos) << "the next row's sums are not taken along";
    ExpectSameBitsAsEvaluator(text, streamed);
    ExpectSameBitsAsEvaluator(text);
  }
  EXPECT_NE(IrOfRoot(ShiftedBySum(64, 1024), 1).find("row.next_lanes"), std::string::npos);
}

}  // namespace
}  // namespace xlens::codegen
