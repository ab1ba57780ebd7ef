// fft compiled for the CPU (FftThunk over Eigen's FFT): values numpy computes, a direct DFT on
// random inputs, inverse round trips, layouts, and the refusals.
#include "compiler/runtime/fft_thunk.h"

#include <complex>
#include <cmath>
#include <random>

#include <fmt/format.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"

namespace xlens::runtime {
namespace {

using C = std::complex<double>;

template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto d = literal.data<T>();
  return std::vector<T>(d.begin(), d.end());
}

Literal ComplexLiteral(PrimitiveType type, std::vector<int64_t> dims, const std::vector<C>& values) {
  Literal literal{Shape(type, std::move(dims))};
  for (size_t i = 0; i < values.size(); ++i) {
    if (type == PrimitiveType::C64) {
      literal.data<std::complex<float>>()[i] = std::complex<float>(values[i]);
    } else {
      literal.data<C>()[i] = values[i];
    }
  }
  return literal;
}

std::vector<C> RandomComplex(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<C> v(n);
  for (C& c : v) c = C(u(rng), u(rng));
  return v;
}

// The direct DFT of each row of `x` (rows of n), the reference the library must meet.
std::vector<C> Dft(const std::vector<C>& x, int64_t n, bool inverse) {
  std::vector<C> out(x.size());
  const double sign = inverse ? 1 : -1;
  for (size_t row = 0; row < x.size() / n; ++row) {
    for (int64_t k = 0; k < n; ++k) {
      C sum = 0;
      for (int64_t j = 0; j < n; ++j) {
        sum += x[row * n + j] * std::polar(1.0, sign * 2 * M_PI * double(j * k % n) / double(n));
      }
      out[row * n + k] = inverse ? sum / double(n) : sum;
    }
  }
  return out;
}

void ExpectNear(const std::vector<C>& actual, const std::vector<C>& expected, double tolerance) {
  ASSERT_EQ(actual.size(), expected.size());
  for (size_t i = 0; i < actual.size(); ++i) {
    EXPECT_NEAR(actual[i].real(), expected[i].real(), tolerance) << "element " << i;
    EXPECT_NEAR(actual[i].imag(), expected[i].imag(), tolerance) << "element " << i;
  }
}

std::vector<C> ToDouble(const std::vector<std::complex<float>>& v) {
  return std::vector<C>(v.begin(), v.end());
}

TEST(FftThunkTest, ForwardAndInverseMatchTheDirectTransform) {
  // Lengths of every kind kissfft plans: powers of two, mixed radices, a prime.
  for (int64_t n : {1, 2, 8, 12, 15, 17, 64}) {
    SCOPED_TRACE(n);
    std::vector<C> x = RandomComplex(3 * n, n);
    for (const char* type : {"FFT", "IFFT"}) {
      const std::string text = fmt::format(R"(HloModule m
ENTRY e {{
  x = c128[3,{0}] parameter(0)
  ROOT f = c128[3,{0}] fft(x), fft_type={1}, fft_length={{{0}}}
}})", n, type);
      std::vector<Literal> args;
      args.push_back(ComplexLiteral(PrimitiveType::C128, {3, n}, x));
      auto out = testing::CompileAndRun(text, args);
      ASSERT_TRUE(out.ok()) << out.status().message();
      ExpectNear(Values<C>(*out), Dft(x, n, std::string(type) == "IFFT"), 1e-12 * n);
    }
  }
}

TEST(FftThunkTest, ComplexFftOfRowsIsNumpys) {
  // numpy.fft.fft(x) for x[b][j] = (j + 1 + b) + ((j % 3) - b)i, j < 8.
  std::vector<C> x;
  for (int b = 0; b < 2; ++b) {
    for (int j = 0; j < 8; ++j) x.push_back(C(j + 1 + b, (j % 3) - b));
  }
  std::vector<Literal> args;
  args.push_back(ComplexLiteral(PrimitiveType::C64, {2, 8}, x));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  x = c64[2,8] parameter(0)
  ROOT f = c64[2,8] fft(x), fft_type=FFT, fft_length={8}
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const std::vector<C> row = {{-3.414214, 8.656854}, {-2, 3}, {-7.414214, 0.656854}, {-4, -1},
                              {-0.585786, -2.656854}, {-6, -5}, {-4.585786, -10.656854}};
  std::vector<C> expected = {{36, 7}};
  expected.insert(expected.end(), row.begin(), row.end());
  expected.push_back({44, -1});
  expected.insert(expected.end(), row.begin(), row.end());
  ExpectNear(ToDouble(Values<std::complex<float>>(*out)), expected, 1e-5);
}

TEST(FftThunkTest, RealTransformsAreNumpys) {
  Literal r{Shape(PrimitiveType::F64, {6})};
  const std::vector<double> rv = {1, -2, 0.5, 4, 3, -1};
  std::copy(rv.begin(), rv.end(), r.data<double>().begin());
  std::vector<Literal> args;
  args.push_back(std::move(r));
  // numpy.fft.rfft2 of arange(12).reshape(3, 4) ** 1.5.
  Literal r2{Shape(PrimitiveType::F64, {3, 4})};
  for (int i = 0; i < 12; ++i) r2.data<double>()[i] = std::pow(double(i), 1.5);
  args.push_back(std::move(r2));
  // numpy.fft.irfft(h, 6) and irfft(h5, 5): the imaginary parts of the zero and Nyquist bins
  // are not part of a Hermitian spectrum and are ignored.
  args.push_back(ComplexLiteral(PrimitiveType::C128, {4}, {{1, 2}, {3, -1}, {-2, 0.5}, {4, 7}}));
  args.push_back(ComplexLiteral(PrimitiveType::C128, {3}, {{1, 2}, {3, -1}, {-2, 0.5}}));
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  r = f64[6] parameter(0)
  r2 = f64[3,4] parameter(1)
  h = c128[4] parameter(2)
  h5 = c128[3] parameter(3)
  a = c128[4] fft(r), fft_type=RFFT, fft_length={6}
  b = c128[3,3] fft(r2), fft_type=RFFT, fft_length={3,4}
  c = f64[6] fft(h), fft_type=IRFFT, fft_length={6}
  d = f64[5] fft(h5), fft_type=IRFFT, fft_length={5}
  ROOT t = (c128[4], c128[3,3], f64[6], f64[5]) tuple(a, b, c, d)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectNear(Values<C>(out->tuple_element(0)), {{5.5, 0}, {-6.25, 3.0310889132},
                                                {4.75, -1.2990381057}, {3.5, 0}}, 1e-9);
  ExpectNear(Values<C>(out->tuple_element(1)),
             {{179.1551833627, 0}, {-18.5207251852, 21.0189444066}, {-19.6040650005, 0},
              {-76.0407223602, 56.5822276862}, {3.1618698185, -6.2057346711},
              {4.7504445533, -1.9303866344}, {-76.0407223602, -56.5822276862},
              {6.8735739924, -2.2247524673}, {4.7504445533, 1.9303866344}},
             1e-9);
  EXPECT_THAT(Values<double>(out->tuple_element(2)),
              ::testing::Pointwise(::testing::DoubleNear(1e-9),
                                   {1.1666666667, 0.4776709006, 1.0996793686, -2.1666666667,
                                    0.2336539648, 0.188995766}));
  EXPECT_THAT(Values<double>(out->tuple_element(3)),
              ::testing::Pointwise(::testing::DoubleNear(1e-9),
                                   {0.6, 1.4808995448, -0.5927085846, -1.4433593929,
                                    0.9551684327}));
}

TEST(FftThunkTest, InversesUndoTheTransformsInEveryRankAndLength) {
  // Three-dimensional transforms of a batch, and real ones with even and odd last lengths.
  const std::vector<C> x = RandomComplex(2 * 3 * 5 * 4, 7);
  Literal real{Shape(PrimitiveType::F32, {2, 4, 5})};
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : real.data<float>()) v = u(rng);
  std::vector<Literal> args;
  args.push_back(ComplexLiteral(PrimitiveType::C128, {2, 3, 5, 4}, x));
  args.push_back(real);
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  x = c128[2,3,5,4] parameter(0)
  f = c128[2,3,5,4] fft(x), fft_type=FFT, fft_length={3,5,4}
  i = c128[2,3,5,4] fft(f), fft_type=IFFT, fft_length={3,5,4}
  r = f32[2,4,5] parameter(1)
  rf = c64[2,4,3] fft(r), fft_type=RFFT, fft_length={4,5}
  ri = f32[2,4,5] fft(rf), fft_type=IRFFT, fft_length={4,5}
  ROOT t = (c128[2,3,5,4], f32[2,4,5]) tuple(i, ri)
})", args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectNear(Values<C>(out->tuple_element(0)), x, 1e-12);
  EXPECT_THAT(Values<float>(out->tuple_element(1)),
              ::testing::Pointwise(::testing::FloatNear(1e-5), Values<float>(real)));
}

TEST(FftThunkTest, OperandAndResultLayoutsAreHonoured) {
  // The same transform with the operand column-major and the result feeding a transpose (the
  // corpus module fft_transpose_c64) computes what the row-major one does.
  const std::vector<C> x = RandomComplex(8 * 32, 11);
  auto run = [&](const char* text) {
    std::vector<Literal> args;
    args.push_back(ComplexLiteral(PrimitiveType::C64, {8, 32}, x));
    auto out = testing::CompileAndRun(text, args);
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? ToDouble(Values<std::complex<float>>(*out)) : std::vector<C>();
  };
  std::vector<C> column_major = run(R"(HloModule m
ENTRY e {
  x = c64[8,32]{0,1} parameter(0)
  f = c64[8,32] fft(x), fft_type=FFT, fft_length={32}
  ROOT t = c64[32,8] transpose(f), dimensions={1,0}
})");
  std::vector<C> expected = Dft(x, 32, false);
  ASSERT_EQ(column_major.size(), expected.size());
  for (int64_t b = 0; b < 8; ++b) {
    for (int64_t k = 0; k < 32; ++k) {
      EXPECT_NEAR(std::abs(column_major[k * 8 + b] - expected[b * 32 + k]), 0, 1e-4);
    }
  }
}

TEST(FftThunkTest, ThunkSequenceNamesTheLibrary) {
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  x = c64[4] parameter(0)
  ROOT f = c64[4] fft(x), fft_type=IFFT, fft_length={4}
})");
  ASSERT_TRUE(module.ok());
  auto executable = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  EXPECT_THAT((*executable)->ThunkSequenceText(), ::testing::HasSubstr("fft f (IFFT {4} c64, Eigen FFT)"));
}

TEST(FftThunkTest, RefusesLengthsThatDoNotMatchTheShape) {
  auto out = testing::CompileAndRun(R"(HloModule m
ENTRY e {
  x = c64[2,8] parameter(0)
  ROOT f = c64[2,8] fft(x), fft_type=FFT, fft_length={4}
})", {});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("fft_length"));
}

}  // namespace
}  // namespace xlens::runtime
