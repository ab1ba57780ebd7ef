// jax's LAPACK custom calls compiled for the CPU (LapackThunk): known factors in row-major as well
// as jax's column-major layouts, the info and pivots jaxlib returns, and one-line refusals.
#include "compiler/runtime/lapack_thunk.h"

#include <cmath>
#include <complex>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/hlo/custom_call_targets.h"

namespace xlens::runtime {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pointwise;

template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto d = literal.data<T>();
  return std::vector<T>(d.begin(), d.end());
}

template <typename T>
Literal Make(PrimitiveType type, std::vector<int64_t> dims, const std::vector<T>& values) {
  Literal literal{Shape(type, std::move(dims))};
  std::copy(values.begin(), values.end(), literal.data<T>().begin());
  return literal;
}

TEST(LapackThunkTest, PotrfFactorsEachMatrixAndReportsTheFailedPivot) {
  // A = L L^T with L = [[1,0,0],[2,4,0],[3,5,6]]; the second matrix fails at its second pivot.
  // The upper triangle is the input's, as LAPACK leaves it.
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {2, 3, 3},
                              {1, 2, 3, 2, 20, 26, 3, 26, 70, 1, 2, 0, 2, 1, 0, 0, 0, 1}));
  for (const char* layout : {"{2,1,0}", "{1,2,0}"}) {
    // The operand row-major, the factor in `layout`, copied back to row-major to be read.
    auto out = testing::CompileAndRun(fmt::format(R"(HloModule m
ENTRY e {{
  a = f64[2,3,3]{{2,1,0}} parameter(0)
  c = (f64[2,3,3]{0}, s32[2]{{0}}) custom-call(a), custom_call_target="lapack_dpotrf_ffi", output_to_operand_aliasing={{{{0}}: (0, {{}})}}, api_version=API_VERSION_TYPED_FFI, frontend_attributes={{num_batch_dims="1"}}, backend_config={{uplo = 76 : ui8}}
  f = f64[2,3,3]{0} get-tuple-element(c), index=0
  r = f64[2,3,3]{{2,1,0}} copy(f)
  i = s32[2]{{0}} get-tuple-element(c), index=1
  ROOT t = (f64[2,3,3]{{2,1,0}}, s32[2]{{0}}) tuple(r, i)
}})", layout), args);
    ASSERT_TRUE(out.ok()) << out.status().message();
    std::vector<double> factor = Values<double>(out->tuple_element(0));
    factor.resize(9);
    EXPECT_THAT(factor,
                Pointwise(DoubleNear(1e-14), std::vector<double>{1, 2, 3, 2, 4, 26, 3, 5, 6}))
        << layout;
    EXPECT_THAT(Values<int32_t>(out->tuple_element(1)), ElementsAre(0, 2)) << layout;
  }
}

TEST(LapackThunkTest, GetrfGivesOneBasedPivotsAndInfoOfASingularMatrix) {
  std::vector<Literal> args;
  args.push_back(Make<float>(PrimitiveType::F32, {3, 3}, {1, 2, 3, 2, 4, 6, 1, 0, 1}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[3,3] parameter(0)
  ROOT lu = (f32[3,3]{0,1}, s32[3]{0}, s32[]) custom-call(a), custom_call_target="lapack_sgetrf_ffi", operand_layout_constraints={f32[3,3]{0,1}}, api_version=API_VERSION_TYPED_FFI, backend_config={}
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  // Row 2 (pivot 2, 1-based) first; then row 3 (of the swapped matrix); U(3,3) is 0: info 3.
  EXPECT_THAT(Values<int32_t>(out->tuple_element(1)), ElementsAre(2, 3, 3));
  EXPECT_THAT(Values<int32_t>(out->tuple_element(2)), ElementsAre(3));
}

TEST(LapackThunkTest, TrsmSolvesFromTheRightWithTheTransposeAndAUnitDiagonal) {
  // X * A^T = B with A = [[1,0],[3,1]] (unit lower; the diagonal given is ignored).
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {2, 2}, {5, 0, 3, 7}));
  args.push_back(Make<double>(PrimitiveType::F64, {1, 2}, {1, 5}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[2,2] parameter(0)
  b = f64[1,2] parameter(1)
  ROOT x = f64[1,2]{0,1} custom-call(a, b), custom_call_target="lapack_dtrsm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 85 : ui8, side = 82 : ui8, trans_x = 84 : ui8, uplo = 76 : ui8}
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  // [x0, x1] [[1,3],[0,1]] = [1, 5]: x0 = 1, 3 x0 + x1 = 5.
  EXPECT_THAT(Values<double>(*out), Pointwise(DoubleNear(1e-14), std::vector<double>{1, 2}));
}

TEST(LapackThunkTest, TrsmTakesAlphaAsAThirdOperand) {
  // A X = alpha B with A = [[2,0],[1,1]], alpha 3, B = [1,1]: X = [1.5, 1.5].
  std::vector<Literal> args;
  args.push_back(Make<float>(PrimitiveType::F32, {2, 2}, {2, 0, 1, 1}));
  args.push_back(Make<float>(PrimitiveType::F32, {2, 1}, {1, 1}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  b = f32[2,1] parameter(1)
  alpha = f32[] constant(3)
  ROOT x = f32[2,1]{0,1} custom-call(a, b, alpha), custom_call_target="lapack_strsm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(Values<float>(*out), ElementsAre(1.5f, 1.5f));
}

TEST(LapackThunkTest, GeevOfAMatrixWithNaNIsNotFactored) {
  std::vector<Literal> args;
  args.push_back(Make<float>(PrimitiveType::F32, {2, 2}, {1, NAN, 0, 1}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  g = (c64[2]{0}, c64[2,2]{0,1}, c64[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_cgeev_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_left = 78 : ui8, compute_right = 78 : ui8}
  ROOT i = s32[] get-tuple-element(g), index=3
})", args);
  ASSERT_FALSE(out.ok());  // the operand must be c64
  EXPECT_THAT(out.status().message(), HasSubstr("operand 0"));
  auto real = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  g = (f32[2]{0}, f32[2]{0}, c64[2,2]{0,1}, c64[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_sgeev_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_left = 78 : ui8, compute_right = 86 : ui8}
  ROOT i = s32[] get-tuple-element(g), index=4
})", args);
  ASSERT_TRUE(real.ok()) << real.status().message();
  EXPECT_THAT(Values<int32_t>(*real), ElementsAre(-4));
}

TEST(LapackThunkTest, GesddWithoutVectorsGivesTheSingularValues) {
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {3, 2}, {0, 2, 3, 0, 0, 0}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[3,2] parameter(0)
  ROOT s = (f64[3,2]{0,1}, f64[2]{0}, f64[3,3]{0,1}, f64[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_dgesdd_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={mode = 78 : ui8}
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(Values<double>(out->tuple_element(1)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{3, 2}));
  EXPECT_THAT(Values<int32_t>(out->tuple_element(4)), ElementsAre(0));
}

TEST(LapackThunkTest, GeevOfARealMatrixGivesComplexEigenvectorPairs) {
  // [[0,-2],[2,0]]: eigenvalues 2i and -2i, eigenvectors conjugate to each other.
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {2, 2}, {0, -2, 2, 0}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[2,2] parameter(0)
  g = (f64[2]{0}, f64[2]{0}, c128[2,2]{0,1}, c128[2,2]{0,1}, s32[]) custom-call(a), custom_call_target="lapack_dgeev_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={compute_left = 78 : ui8, compute_right = 86 : ui8}
  vr = c128[2,2]{0,1} get-tuple-element(g), index=3
  v = c128[2,2]{1,0} copy(vr)
  wr = f64[2]{0} get-tuple-element(g), index=0
  wi = f64[2]{0} get-tuple-element(g), index=1
  ROOT t = (f64[2]{0}, f64[2]{0}, c128[2,2]{1,0}) tuple(wr, wi, v)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(Values<double>(out->tuple_element(0)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{0, 0}));
  EXPECT_THAT(Values<double>(out->tuple_element(1)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{2, -2}));
  using C = std::complex<double>;
  std::vector<C> v = Values<C>(out->tuple_element(2));  // row-major: v[i * 2 + j]
  for (int j = 0; j < 2; ++j) {
    const C lambda(0, j == 0 ? 2 : -2);
    // A v_j = lambda v_j.
    EXPECT_NEAR(std::abs(-2.0 * v[2 + j] - lambda * v[j]), 0, 1e-12);
    EXPECT_NEAR(std::abs(2.0 * v[j] - lambda * v[2 + j]), 0, 1e-12);
  }
  EXPECT_NEAR(std::abs(v[1] - std::conj(v[0])) + std::abs(v[3] - std::conj(v[2])), 0, 1e-14);
  EXPECT_GT(std::abs(v[0]), 0.5);
}

TEST(LapackThunkTest, RefusesInOneLineWhatItDoesNotRun) {
  std::vector<Literal> args;
  args.push_back(Make<float>(PrimitiveType::F32, {2, 2}, {1, 0, 0, 1}));
  auto geev = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT g = (f32[2,2], s32[]) custom-call(a), custom_call_target="lapack_sgees_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={}
})", args);
  ASSERT_FALSE(geev.ok());
  EXPECT_THAT(geev.status().message(), HasSubstr("lapack_sgees_ffi"));
  EXPECT_THAT(geev.status().message(), HasSubstr("does not run"));
  auto no_uplo = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f32[2,2] parameter(0)
  ROOT c = (f32[2,2], s32[]) custom-call(a), custom_call_target="lapack_spotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={}
})", args);
  ASSERT_FALSE(no_uplo.ok());
  EXPECT_THAT(no_uplo.status().message(), HasSubstr("backend_config has no uplo"));
  EXPECT_EQ(no_uplo.status().message().find('\n'), std::string::npos);
}

TEST(LapackThunkTest, TheEvaluatorSaysTheyRunCompiled) {
  EXPECT_THAT(WhyCustomCallCannotRunOnCpu("lapack_dpotrf_ffi"), HasSubstr("runs compiled"));
  EXPECT_TRUE(IsLapackCustomCallTarget("lapack_zheevd_ffi"));
  EXPECT_FALSE(IsLapackCustomCallTarget("lapack_qpotrf_ffi"));
  EXPECT_FALSE(IsLapackCustomCallTarget("__cublas$gemm"));
}

}  // namespace
}  // namespace xlens::runtime
