// triangular-solve compiled for the CPU (TriangularSolveThunk over BLAS trsm): a known solution,
// and every side, triangle, transposition and type on random batches with non-default layouts
// against the reference evaluator.
#include "compiler/runtime/triangular_solve_thunk.h"

#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::ElementsAre;

TEST(TriangularSolveThunkTest, SolvesAKnownLowerSystem) {
  // [[2,0],[1,4]] x = [2,9] (the 9 above the diagonal is never read): x = [1, 2].
  Literal a{Shape(PrimitiveType::F64, {2, 2})};
  Literal b{Shape(PrimitiveType::F64, {2, 1})};
  const double a_values[] = {2, 9, 1, 4};
  const double b_values[] = {2, 9};
  std::copy(std::begin(a_values), std::end(a_values), a.data<double>().begin());
  std::copy(std::begin(b_values), std::end(b_values), b.data<double>().begin());
  std::vector<Literal> args;
  args.push_back(std::move(a));
  args.push_back(std::move(b));
  auto out = xlens::testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[2,2] parameter(0)
  b = f64[2,1] parameter(1)
  ROOT x = f64[2,1] triangular-solve(a, b), left_side=true, lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  auto x = out->data<double>();
  EXPECT_THAT(std::vector<double>(x.begin(), x.end()), ElementsAre(1.0, 2.0));
}

TEST(TriangularSolveThunkTest, MatchesTheEvaluatorOnEveryVariant) {
  for (const char* type : {"f32", "f64", "c64", "c128"}) {
    for (const char* side : {"true", "false"}) {
      for (const char* lower : {"true", "false"}) {
        for (const char* transpose : {"NO_TRANSPOSE", "TRANSPOSE", "ADJOINT"}) {
          const bool left = side[0] == 't';
          const bool complex = type[0] == 'c';
          // a = random + 4 I keeps the systems well conditioned; b [2,3,2] with layout {1,2,0}.
          const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  x = {0}[2,{1},{1}]{{1,2,0}} parameter(0)
  b = {0}[2,3,2]{{1,2,0}} parameter(1)
  row = s32[2,{1},{1}] iota(), iota_dimension=1
  col = s32[2,{1},{1}] iota(), iota_dimension=2
  d = pred[2,{1},{1}] compare(row, col), direction=EQ
  four = {0}[] constant({5})
  zero = {0}[] constant({6})
  fours = {0}[2,{1},{1}] broadcast(four), dimensions={{}}
  zeros = {0}[2,{1},{1}] broadcast(zero), dimensions={{}}
  shift = {0}[2,{1},{1}] select(d, fours, zeros)
  a = {0}[2,{1},{1}] add(x, shift)
  ROOT s = {0}[2,3,2]{{0,1,2}} triangular-solve(a, b), left_side={2}, lower={3}, unit_diagonal=false, transpose_a={4}
}})",
                                               type, left ? 3 : 2, side, lower, transpose,
                                               complex ? "(4, 0)" : "4", complex ? "(0, 0)" : "0");
          SCOPED_TRACE(text);
          xlens::testing::ExpectMatchesEvaluator(text, {}, ErrorSpec{1e-5, 1e-4});
        }
      }
    }
  }
}

}  // namespace
}  // namespace xlens::runtime
