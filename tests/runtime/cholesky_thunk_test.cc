// cholesky compiled for the CPU (CholeskyThunk over Eigen's LLT): known factors, L * L^H == A on
// random batches of every type and layout, and what XLA's CPU backend returns for matrices that
// are not positive definite (values taken from jaxlib).
#include "compiler/runtime/cholesky_thunk.h"

#include <cmath>
#include <complex>
#include <cstdlib>
#include <random>
#include <type_traits>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAreArray;
using ::testing::Pointwise;
using C = std::complex<double>;
using CF = std::complex<float>;

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

TEST(CholeskyThunkTest, FactorsOfTheCorpusMatrix) {
  // cholesky_f64: A = L L^T with L = [[1,0,0],[2,4,0],[3,5,6]]; lower=false gives L^T.
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {3, 3}, {1, 2, 3, 2, 20, 26, 3, 26, 70}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[3,3] parameter(0)
  l = f64[3,3] cholesky(a), lower=true
  u = f64[3,3] cholesky(a), lower=false
  ROOT t = (f64[3,3], f64[3,3]) tuple(l, u)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(Values<double>(out->tuple_element(0)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{1, 0, 0, 2, 4, 0, 3, 5, 6}));
  EXPECT_THAT(Values<double>(out->tuple_element(1)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{1, 2, 3, 0, 4, 5, 0, 0, 6}));
}

template <typename S>
S Conj(S v) {
  if constexpr (std::is_arithmetic_v<S>) {
    return v;
  } else {
    return std::conj(v);
  }
}

// A random Hermitian positive definite matrix per batch element (row-major): B B^H + n I.
template <typename S>
std::vector<S> RandomSpd(int64_t batch, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<S> values;
  for (int64_t b = 0; b < batch; ++b) {
    std::vector<S> r(n * n);
    for (S& v : r) {
      if constexpr (std::is_arithmetic_v<S>) {
        v = S(u(rng));
      } else {
        v = S(u(rng), u(rng));
      }
    }
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        S sum = i == j ? S(double(n)) : S(0);
        for (int64_t k = 0; k < n; ++k) sum += r[i * n + k] * Conj(r[j * n + k]);
        values.push_back(sum);
      }
    }
  }
  return values;
}

// Checks that `factor` (row-major batch of n x n) is triangular as asked, with a positive real
// diagonal, and that its product with its adjoint gives back `a`.
template <typename S>
void ExpectFactors(const std::vector<S>& a, const std::vector<S>& factor, int64_t n, bool lower,
                   double tolerance) {
  ASSERT_EQ(a.size(), factor.size());
  for (size_t b = 0; b < a.size() / (n * n); ++b) {
    const S* f = factor.data() + b * n * n;
    const S* expected = a.data() + b * n * n;
    double error = 0, norm = 0;
    for (int64_t r = 0; r < n; ++r) {
      for (int64_t c = 0; c < n; ++c) {
        if (lower ? r < c : r > c) EXPECT_EQ(f[r * n + c], S(0)) << b << " " << r << " " << c;
        // (L L^H)(r, c) or (U^H U)(r, c).
        S sum = 0;
        for (int64_t k = 0; k < n; ++k) {
          sum += lower ? f[r * n + k] * Conj(f[c * n + k]) : Conj(f[k * n + r]) * f[k * n + c];
        }
        error += std::norm(sum - expected[r * n + c]);
        norm += std::norm(expected[r * n + c]);
      }
      EXPECT_GT(std::real(f[r * n + r]), 0);
      EXPECT_EQ(std::imag(f[r * n + r]), 0);
    }
    EXPECT_LT(std::sqrt(error), tolerance * std::sqrt(norm)) << "matrix " << b;
  }
}

template <typename S>
void CheckType(PrimitiveType type, const char* name, double tolerance) {
  SCOPED_TRACE(name);
  const int64_t n = 7;
  std::vector<S> a = RandomSpd<S>(6, n, 5);
  for (const char* lower : {"true", "false"}) {
    // Column-major matrices of a batch that is itself laid out last: the thunk reads and writes
    // layouts as they come.
    for (const char* layout : {"{3,2,1,0}", "{2,3,0,1}"}) {
      const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  a = {0}[2,3,7,7]{2} parameter(0)
  ROOT l = {0}[2,3,7,7]{2} cholesky(a), lower={1}
}})", name, lower, layout);
      std::vector<Literal> args;
      args.push_back(Make<S>(type, {2, 3, n, n}, a));
      auto out = testing::CompileAndRun(text, args);
      ASSERT_TRUE(out.ok()) << out.status().message();
      ExpectFactors(a, Values<S>(*out), n, std::string(lower) == "true", tolerance);
    }
  }
}

TEST(CholeskyThunkTest, FactorsReproduceTheirMatrixInEveryTypeAndLayout) {
  CheckType<float>(PrimitiveType::F32, "f32", 1e-5);
  CheckType<double>(PrimitiveType::F64, "f64", 1e-13);
  CheckType<CF>(PrimitiveType::C64, "c64", 1e-5);
  CheckType<C>(PrimitiveType::C128, "c128", 1e-13);
}

TEST(CholeskyThunkTest, OnlyTheNamedTriangleIsRead) {
  // Garbage in the other triangle changes nothing.
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {3, 3}, {1, 99, -7, 2, 20, 1e9, 3, 26, 70}));
  args.push_back(Make<double>(PrimitiveType::F64, {3, 3}, {1, 2, 3, -5, 20, 26, 1e9, 8, 70}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[3,3] parameter(0)
  b = f64[3,3] parameter(1)
  l = f64[3,3] cholesky(a), lower=true
  u = f64[3,3] cholesky(b), lower=false
  ROOT t = (f64[3,3], f64[3,3]) tuple(l, u)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(Values<double>(out->tuple_element(0)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{1, 0, 0, 2, 4, 0, 3, 5, 6}));
  EXPECT_THAT(Values<double>(out->tuple_element(1)),
              Pointwise(DoubleNear(1e-14), std::vector<double>{1, 2, 3, 0, 4, 5, 0, 0, 6}));
}

TEST(CholeskyThunkTest, NotPositiveDefiniteIsWhatXlaReturns) {
  // XLA:CPU (jaxlib 0.10) on these: a negative pivot makes its matrix NaN (NaN + 0i for
  // complex) and leaves the others of the batch alone; a zero last pivot is 0/0 = NaN (NaN +
  // NaN i) on that diagonal element only; a 1 x 1 zero is its square root, 0.
  std::vector<Literal> args;
  args.push_back(Make<double>(PrimitiveType::F64, {3, 3, 3},
                              {4, 2, 0.4, 99, 5, 1, 77, 66, 3,  // lower not PD, upper PD
                               1, 2, 3, 2, 1, 0, 3, 0, 5,       // neither
                               1, 0, 0, 0, 1, 0, 0, 0, 0}));    // last pivot 0
  args.push_back(Make<CF>(PrimitiveType::C64, {3, 2, 2},
                          {{4, 0}, {2, -1}, {2, 1}, {3, 0},
                           {1, 0}, {0, 0}, {0, 0}, {0, 0},
                           {1, 0}, {0, 5}, {0, 5}, {-1, 0}}));
  args.push_back(Make<float>(PrimitiveType::F32, {1, 1}, {0}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = f64[3,3,3] parameter(0)
  c = c64[3,2,2] parameter(1)
  z = f32[1,1] parameter(2)
  l = f64[3,3,3] cholesky(a), lower=true
  u = f64[3,3,3] cholesky(a), lower=false
  cl = c64[3,2,2] cholesky(c), lower=true
  zl = f32[1,1] cholesky(z), lower=true
  ROOT t = (f64[3,3,3], f64[3,3,3], c64[3,2,2], f32[1,1]) tuple(l, u, cl, zl)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  std::vector<double> l = Values<double>(out->tuple_element(0));
  std::vector<double> u = Values<double>(out->tuple_element(1));
  for (int i = 0; i < 18; ++i) EXPECT_TRUE(std::isnan(l[i])) << i;
  EXPECT_THAT(std::vector<double>(l.begin() + 18, l.begin() + 26),
              ElementsAreArray({1., 0., 0., 0., 1., 0., 0., 0.}));
  EXPECT_TRUE(std::isnan(l[26]));
  EXPECT_THAT(std::vector<double>(u.begin(), u.begin() + 9),
              Pointwise(DoubleNear(1e-7), std::vector<double>{2, 1, 0.2, 0, 2, 0.4, 0, 0, 1.67332005}));
  for (int i = 9; i < 18; ++i) EXPECT_TRUE(std::isnan(u[i])) << i;
  EXPECT_TRUE(std::isnan(u[26]));
  std::vector<CF> cl = Values<CF>(out->tuple_element(2));
  EXPECT_NEAR(std::abs(cl[2] - CF(1, 0.5)), 0, 1e-6);
  EXPECT_NEAR(std::abs(cl[3] - CF(1.3228757f, 0)), 0, 1e-6);
  EXPECT_TRUE(std::isnan(cl[7].real()) && std::isnan(cl[7].imag()));
  EXPECT_EQ(cl[6], CF(0, 0));
  for (int i = 8; i < 12; ++i) {
    EXPECT_TRUE(std::isnan(cl[i].real())) << i;
    EXPECT_EQ(cl[i].imag(), 0) << i;
  }
  EXPECT_EQ(Values<float>(out->tuple_element(3))[0], 0);
}

TEST(CholeskyThunkTest, RefusesWhatXlaRefuses) {
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  a = s32[2,2] parameter(0)
  ROOT l = s32[2,2] cholesky(a), lower=true
})", {Make<int32_t>(PrimitiveType::S32, {2, 2}, {1, 0, 0, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("cholesky"));
}

}  // namespace
}  // namespace xlens::runtime
