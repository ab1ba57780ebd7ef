// The loops small matrix products run on (compiler/runtime/small_product.h) against a product
// summed in double precision, over every remainder of the vector width in both dimensions that
// the loops block (n for a plain rhs, k for a transposed one), both operand orders and several
// batch elements. Canaries around the output catch a masked tail that writes past a row.
// Also the loops of products with narrow output rows (compiler/runtime/narrow_product.h), and
// the transposed copy that packs a transposed lhs's blocks (compiler/runtime/transposed_copy.h).
#include "compiler/runtime/small_product.h"

#include "compiler/runtime/narrow_product.h"
#include "compiler/runtime/transposed_copy.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace xlens::runtime {
namespace {

void ExpectProductMatches(const SmallProductShape& s, uint32_t seed) {
  SCOPED_TRACE(testing::Message() << "batch " << s.batch << " m " << s.m << " k " << s.k << " n " << s.n
                                  << (s.lhs_transposed ? " lhs^T" : "") << (s.rhs_transposed ? " rhs^T" : ""));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> lhs(s.batch * s.m * s.k), rhs(s.batch * s.k * s.n);
  for (float& x : lhs) x = uniform(rng);
  for (float& x : rhs) x = uniform(rng);
  const int64_t size = s.batch * s.m * s.n;
  const float canary = 12345.f;
  std::vector<float> out(size + 16, canary);
  SmallProduct(s, lhs.data(), rhs.data(), out.data() + 8);
  for (int64_t b = 0; b < s.batch; ++b) {
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < s.k; ++p) {
          const float a = s.lhs_transposed ? lhs[b * s.m * s.k + p * s.m + i] : lhs[b * s.m * s.k + i * s.k + p];
          const float w = s.rhs_transposed ? rhs[b * s.k * s.n + j * s.k + p] : rhs[b * s.k * s.n + p * s.n + j];
          sum += static_cast<double>(a) * w;
        }
        const float got = out[8 + (b * s.m + i) * s.n + j];
        ASSERT_NEAR(got, sum, 1e-5 * (1 + s.k)) << "at batch " << b << " row " << i << " column " << j;
      }
    }
  }
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(out[e], canary) << "written before the output";
    EXPECT_EQ(out[8 + size + e], canary) << "written past the output";
  }
}

TEST(SmallProductTest, EveryRemainderAndLayoutMatchesADoublePrecisionSum) {
  uint32_t seed = 1;
  for (bool lhs_t : {false, true}) {
    for (bool rhs_t : {false, true}) {
      for (int64_t n : {1, 3, 7, 8, 9, 16, 31, 32, 33, 40, 64, 71}) {
        for (int64_t k : {1, 5, 8, 15, 16, 17, 33}) {
          ExpectProductMatches({1, 3, k, n, lhs_t, rhs_t}, seed++);
        }
      }
      ExpectProductMatches({3, 5, 12, 20, lhs_t, rhs_t}, seed++);
      ExpectProductMatches({2, 1, 64, 256, lhs_t, rhs_t}, seed++);
    }
  }
}

// out = lhs [m, k] x rhs [k, n] by NarrowProduct, the rhs packed by PackNarrowRhs (or given
// transposed), against a double-precision sum; canaries around the output and past the lhs's
// last row (whose masked tail must not be read: a NaN there would reach every sum). The lhs's
// rows lie `lda` apart (k where 0), the elements between them NaN: a part of a product split in
// k reads its stretch of longer rows and nothing past it. The packed rhs's rows lie
// NarrowPackedStride(k) apart, NaN between them too (an rhs given transposed, k apart).
void ExpectNarrowProductMatches(int64_t m, int64_t k, int64_t n, bool rhs_transposed, uint32_t seed,
                                decltype(&NarrowProduct) product = &NarrowProduct, int64_t lda = 0) {
  if (lda == 0) lda = k;
  SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n << " lda " << lda
                                  << (rhs_transposed ? " rhs^T" : ""));
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  const int64_t ldb = rhs_transposed ? k : NarrowPackedStride(k);
  std::vector<float> lhs(m * lda + 16, std::nanf("")), rhs(k * n), packed(ldb * n + 16, std::nanf(""));
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t p = 0; p < k; ++p) lhs[i * lda + p] = uniform(rng);
  }
  for (float& x : rhs) x = uniform(rng);
  auto at = [&](int64_t p, int64_t j) { return rhs_transposed ? rhs[j * k + p] : rhs[p * n + j]; };
  if (rhs_transposed) {
    std::copy(rhs.begin(), rhs.end(), packed.begin());
  } else {
    PackNarrowRhs(rhs.data(), k, n, packed.data(), ldb);
    for (int64_t j = 0; j < n; ++j) {
      for (int64_t p = 0; p < ldb; ++p) {
        if (p < k) {
          ASSERT_EQ(packed[j * ldb + p], rhs[p * n + j]) << "packed at " << p << ", " << j;
        } else {
          ASSERT_TRUE(std::isnan(packed[j * ldb + p])) << "written between the packed rows at " << p << ", " << j;
        }
      }
    }
  }
  const float canary = 12345.f;
  std::vector<float> out(m * n + 16, canary);
  product(m, k, n, lhs.data(), lda, packed.data(), ldb, out.data() + 8);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(lhs[i * lda + p]) * at(p, j);
      ASSERT_NEAR(out[8 + i * n + j], sum, 1e-5 * (1 + k)) << "at row " << i << " column " << j;
    }
  }
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(out[e], canary) << "written before the output";
    EXPECT_EQ(out[8 + m * n + e], canary) << "written past the output";
  }
}

TEST(NarrowProductTest, EveryRemainderMatchesADoublePrecisionSum) {
  // Without AVX-512 this checks the scalar loops NarrowProduct and PackNarrowRhs fall back to.
  uint32_t seed = 1;
  // Rows in blocks of 4 and every remainder, columns in every grouping (groups of at most 6, as
  // even as can be); k in vectors of 16 and every remainder, and rows of the rhs in blocks of 16
  // for the packing.
  for (int64_t n = 1; n <= kNarrowProductMaxColumns; ++n) {
    for (int64_t m : {1, 2, 3, 4, 7}) {
      for (int64_t k : {1, 15, 16, 17, 40}) ExpectNarrowProductMatches(m, k, n, false, seed++);
    }
    ExpectNarrowProductMatches(5, 33, n, true, seed++);
  }
  ExpectNarrowProductMatches(100, 784, 10, false, seed++);  // the MNIST step's logits
  // A stretch of k out of longer rows, as a part of a product split in k reads it (the
  // convolution step's [32,3136]x[3136,10] in two parts of 1568), and a last part's shorter one.
  for (int64_t n : {1, 6, 10, 16}) {
    ExpectNarrowProductMatches(7, 32, n, false, seed++, &NarrowProduct, 48);
    ExpectNarrowProductMatches(5, 17, n, true, seed++, &NarrowProduct, 40);
  }
  ExpectNarrowProductMatches(32, 1568, 10, false, seed++, &NarrowProduct, 3136);
}

TEST(NarrowProductTest, TheScalarLoopMatchesADoublePrecisionSum) {
  // What NarrowProduct runs without AVX-512, checked on any CPU.
  uint32_t seed = 1000;
  for (int64_t n : {1, 3, 12, 16}) {
    ExpectNarrowProductMatches(3, 17, n, false, seed++, &NarrowProductScalar);
    ExpectNarrowProductMatches(5, 33, n, true, seed++, &NarrowProductScalar);
    ExpectNarrowProductMatches(4, 17, n, false, seed++, &NarrowProductScalar, 21);
  }
}

// out = lhs^T x rhs by NarrowProductTransposedLhs (or `product`), the lhs [k, m] read as columns
// `first`.. of a [k, lda] array and the rhs [k, n], against a double-precision sum; canaries
// around the output, NaN in the lhs's columns outside the m read and past its last row.
void ExpectNarrowTransposedMatches(int64_t m, int64_t k, int64_t n, uint32_t seed,
                                   decltype(&NarrowProductTransposedLhs) product = &NarrowProductTransposedLhs) {
  SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n);
  const int64_t first = 3, lda = m + 5;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> lhs(k * lda + 16, std::nanf("")), rhs(k * n);
  for (int64_t p = 0; p < k; ++p) {
    for (int64_t i = 0; i < m; ++i) lhs[p * lda + first + i] = uniform(rng);
  }
  for (float& x : rhs) x = uniform(rng);
  const float canary = 12345.f;
  std::vector<float> out(m * n + 16, canary);
  product(m, k, n, lhs.data() + first, lda, rhs.data(), out.data() + 8, {});
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(lhs[p * lda + first + i]) * rhs[p * n + j];
      ASSERT_NEAR(out[8 + i * n + j], sum, 1e-5 * (1 + k)) << "at row " << i << " column " << j;
    }
  }
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(out[e], canary) << "written before the output";
    EXPECT_EQ(out[8 + m * n + e], canary) << "written past the output";
  }
}

TEST(NarrowProductTest, TheTransposedLhsMatchesADoublePrecisionSum) {
  // Rows in blocks of 32 (two vectors), a last block of one vector (at most 16 rows) or two, and
  // every width. Without AVX-512 this checks the scalar loop.
  uint32_t seed = 2000;
  for (int64_t n = 1; n <= kNarrowProductMaxColumns; ++n) {
    for (int64_t m : {1, 15, 16, 17, 32, 33, 48, 50}) ExpectNarrowTransposedMatches(m, 7, n, seed++);
  }
  ExpectNarrowTransposedMatches(784, 100, 10, seed++);  // the MNIST step's weight gradient
  for (int64_t n : {1, 10, 16}) ExpectNarrowTransposedMatches(19, 9, n, seed++, &NarrowProductTransposedLhsScalar);
}

// A weight update w - 0.05 x^T g applied in NarrowProductTransposedLhs's store is the post-ops'
// pass after it, bit for bit (-0, NaN and the infinities among w's elements, and in x), for every
// width and the row blocks' remainders; the output's neighbours are left alone.
TEST(NarrowProductTest, TheTransposedLhsUpdatedInItsStoreIsThePostOpsPass) {
  std::vector<OneDnnPostOp> ops(2);
  ops[0].kind = OneDnnPostOp::Kind::kLinear;
  ops[0].alpha = -0.05;
  ops[1].kind = OneDnnPostOp::Kind::kAdd;
  ops[1].addend = OneDnnPostOp::Addend::kFull;
  const float specials[] = {-0.f, std::nanf(""), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity()};
  uint32_t seed = 3000;
  for (int64_t n : {1, 10, 16}) {
    for (int64_t m : {1, 16, 17, 33, 392}) {
      for (int64_t k : {7, 32}) {
        SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n);
        std::mt19937 rng(seed++);
        std::uniform_real_distribution<float> uniform(-1.f, 1.f);
        std::vector<float> x(k * m), g(k * n), w(m * n);
        for (float& v : x) v = uniform(rng);
        for (float& v : g) v = uniform(rng);
        for (float& v : w) v = uniform(rng);
        for (size_t e = 0; e < w.size(); e += 7) w[e] = specials[e / 7 % 4];
        x[k * m / 2] = std::nanf("");  // a NaN in one output row
        const float canary = 12345.f;
        std::vector<float> passes(m * n + 32, canary), stored(m * n + 32, canary);
        NarrowProductTransposedLhs(m, k, n, x.data(), m, g.data(), passes.data() + 16);
        ApplySmallProductPostOps(ops, {w.data()}, m, n, passes.data() + 16);
        NarrowOutputUpdate update;
        ASSERT_TRUE(NarrowOutputUpdateOf(ops, {w.data()}, &update));
        NarrowProductTransposedLhs(m, k, n, x.data(), m, g.data(), stored.data() + 16, update);
        int64_t nans = 0;
        for (size_t e = 0; e < stored.size(); ++e) {
          nans += std::isnan(stored[e]);
          ASSERT_EQ(std::bit_cast<uint32_t>(stored[e]), std::bit_cast<uint32_t>(passes[e])) << "at element " << e;
        }
        EXPECT_GT(nans, 0);
      }
    }
  }
}

// What the store takes: a linear map, a full addend, or the one then the other; nothing else.
TEST(NarrowProductTest, TheUpdateInTheStoreTakesALinearMapThenAFullAddend) {
  OneDnnPostOp linear, add, row_add, relu;
  linear.kind = OneDnnPostOp::Kind::kLinear;
  linear.alpha = 2;
  linear.beta = 0;
  add.kind = row_add.kind = OneDnnPostOp::Kind::kAdd;
  row_add.addend = OneDnnPostOp::Addend::kLastDimension;
  relu.kind = OneDnnPostOp::Kind::kRelu;
  const float addend = 1;
  NarrowOutputUpdate update;
  ASSERT_TRUE(NarrowOutputUpdateOf({linear, add}, {&addend}, &update));
  EXPECT_TRUE(update.linear);
  EXPECT_EQ(update.alpha, 2.f);
  EXPECT_TRUE(std::signbit(update.beta)) << "a zero beta adds -0";
  EXPECT_EQ(update.addend, &addend);
  ASSERT_TRUE(NarrowOutputUpdateOf({add}, {&addend}, &update));
  EXPECT_FALSE(update.linear);
  EXPECT_EQ(update.addend, &addend);
  for (const std::vector<OneDnnPostOp>& ops : std::vector<std::vector<OneDnnPostOp>>{
           {add, linear}, {linear, linear}, {relu}, {linear, relu}, {row_add}, {linear, add, add}}) {
    NarrowOutputUpdate untouched;
    untouched.alpha = 7;
    EXPECT_FALSE(NarrowOutputUpdateOf(ops, {&addend, &addend}, &untouched)) << ops.size() << " post-ops";
    EXPECT_EQ(untouched.alpha, 7.f);
  }
}

// out = lhs [m, k] x rhs^T, the rhs stored [n, k], by ShortKProduct (or `product`) into rows ldc
// apart, against a double-precision sum; the elements between the rows and past the last are
// left alone, and NaN past the rhs's last row is never read.
void ExpectShortKMatches(int64_t m, int64_t k, int64_t n, uint32_t seed,
                         decltype(&ShortKProduct) product = &ShortKProduct) {
  SCOPED_TRACE(testing::Message() << "m " << m << " k " << k << " n " << n);
  const int64_t ldc = n + 3;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  std::vector<float> lhs(m * k), rhs(n * k + 16, std::nanf(""));
  for (float& x : lhs) x = uniform(rng);
  for (int64_t e = 0; e < n * k; ++e) rhs[e] = uniform(rng);
  const float canary = 12345.f;
  std::vector<float> out(m * ldc + 16, canary);
  product(m, k, n, lhs.data(), rhs.data(), out.data(), ldc);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < ldc; ++j) {
      if (j >= n) {
        ASSERT_EQ(out[i * ldc + j], canary) << "written past row " << i;
        continue;
      }
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += static_cast<double>(lhs[i * k + p]) * rhs[j * k + p];
      ASSERT_NEAR(out[i * ldc + j], sum, 1e-5 * (1 + k)) << "at row " << i << " column " << j;
    }
  }
  for (int e = 0; e < 16; ++e) EXPECT_EQ(out[m * ldc + e], canary) << "written past the output";
}

TEST(NarrowProductTest, AShortKMatchesADoublePrecisionSum) {
  // Every k; rows in blocks of 4 and every remainder; columns in vectors of 16 and a remainder.
  // Without AVX-512 this checks the scalar loop.
  uint32_t seed = 3000;
  for (int64_t k = 1; k <= kNarrowProductMaxColumns; ++k) {
    for (int64_t m : {1, 3, 4, 5}) ExpectShortKMatches(m, k, 37, seed++);
  }
  ExpectShortKMatches(32, 10, 3136, seed++);  // the convolution step's gradient through its classifier
  ExpectShortKMatches(6, 10, 21, seed++, &ShortKProductScalar);
}

// ApplySmallProductPostOps over [rows, n] against the post-ops' formula element by element.
void ExpectPostOpsMatchTheirScalarForm(int64_t rows, int64_t n) {
  std::vector<float> out(rows * n), full(rows * n), last(n), last_after(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  for (float& x : out) x = uniform(rng);
  for (float& x : full) x = uniform(rng);
  for (float& x : last) x = uniform(rng);
  for (float& x : last_after) x = uniform(rng);
  out[std::min<int64_t>(3, rows * n - 1)] = std::nanf("");
  const float scalar = 0.25f;
  OneDnnPostOp add_full, add_last, add_scalar, linear, relu;
  add_full.kind = add_last.kind = add_scalar.kind = OneDnnPostOp::Kind::kAdd;
  add_last.addend = OneDnnPostOp::Addend::kLastDimension;
  add_scalar.addend = OneDnnPostOp::Addend::kScalar;
  linear.alpha = 0.1;
  linear.beta = 0.3;
  relu.kind = OneDnnPostOp::Kind::kRelu;
  for (bool by_rows : {true, false}) {
    SCOPED_TRACE(by_rows ? "an addend along the rows" : "one run");
    std::vector<OneDnnPostOp> ops = {linear, add_full, add_scalar, relu};
    std::vector<const float*> addends = {full.data(), &scalar};
    if (by_rows) {
      // One along the rows before the ReLU, one after it.
      ops.insert(ops.begin() + 2, add_last);
      addends.insert(addends.begin() + 1, last.data());
      ops.push_back(add_last);
      addends.push_back(last_after.data());
    }
    const float canary = 12345.f;
    std::vector<float> got = out;
    got.resize(rows * n + 16, canary);
    ApplySmallProductPostOps(ops, addends, rows, n, got.data());
    for (int64_t e = rows * n; e < rows * n + 16; ++e) EXPECT_EQ(got[e], canary) << "past the end: " << e;
    for (int64_t e = 0; e < rows * n; ++e) {
      float x = std::fma(0.1f, out[e], 0.3f);
      x += full[e];
      if (by_rows) x += last[e % n];
      x += scalar;
      x = std::max(x, 0.f);
      if (by_rows) x += last_after[e % n];
      if (std::isnan(x)) {
        EXPECT_TRUE(std::isnan(got[e])) << e;
      } else {
        EXPECT_EQ(got[e], x) << e;
      }
    }
  }
}

TEST(NarrowProductTest, PostOpsInOnePassMatchTheirScalarForm) {
  // Adds of every kind, a linear map and a ReLU (a NaN kept) over rows of 10 (a vector of 8 and
  // 2 elements past it), and over the rows as one run of elements. The linear map is one fused
  // multiply-add in the vector loop, its tail and the scalar loops alike: alpha = 0.1 and beta =
  // 0.3 are not exact, so a multiply rounded before the add differs in the last bit for many
  // elements. From 8 rows of fewer than 32 columns (not whole vectors), eight rows go as one
  // with the addend along them repeated, and the last rows % 8 one by one: every count of those,
  // rows of 3 (shorter than a vector), 10, 12 (a vector and a half) and 32; 33 stays row by row.
  for (const auto& [rows, n] : std::vector<std::pair<int64_t, int64_t>>{
           {7, 10}, {8, 10}, {100, 10}, {19, 3}, {13, 12}, {27, 31}, {9, 32}, {17, 33}}) {
    SCOPED_TRACE(testing::Message() << rows << " rows of " << n);
    ExpectPostOpsMatchTheirScalarForm(rows, n);
  }
}

TEST(NarrowProductTest, ReluKeepsANaNAndGivesPlusZeroForMinusZero) {
  // XLA's maximum(x, 0): a NaN and +inf kept, -inf and -0 to +0; in the vector loop (the first 8
  // of each row of 10) and its tail, and in the scalar loops (a GELU first sends them there).
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {nan, -0.f, inf, -inf, -1.f, 2.f, 0.f, 3.f, nan, -0.f};
  std::vector<float> out(2 * in.size());
  std::copy(in.begin(), in.end(), out.begin());
  std::copy(in.begin(), in.end(), out.begin() + in.size());
  OneDnnPostOp relu, gelu;
  relu.kind = OneDnnPostOp::Kind::kRelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluErf;
  ApplySmallProductPostOps({relu}, {}, 2, in.size(), out.data());
  for (size_t e = 0; e < out.size(); ++e) {
    const float x = in[e % in.size()];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(out[e])) << e;
    } else {
      EXPECT_EQ(out[e], x > 0 ? x : 0.f) << e;
      EXPECT_FALSE(std::signbit(out[e])) << e;
    }
  }
  // The GELU gives -0 for -0 (0.5 * -0 * 1) and keeps the NaN.
  std::vector<float> scalar = {nan, -0.f, -1.f};
  ApplySmallProductPostOps({gelu, relu}, {}, 1, 3, scalar.data());
  EXPECT_TRUE(std::isnan(scalar[0]));
  EXPECT_EQ(scalar[1], 0.f);
  EXPECT_FALSE(std::signbit(scalar[1]));
  EXPECT_EQ(scalar[2], 0.f);
  EXPECT_FALSE(std::signbit(scalar[2]));
}

TEST(NarrowProductTest, TanhGeluMatchesItsFormulaInDoublePrecision) {
  // 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) in double against the post-op (on a CPU with
  // AVX-512 x / (1 + exp(-2u)), 16 at a time with a masked tail; else the float formula), over
  // [-12, 12] and every tail length; then the values where the two forms could part: -0 stays
  // -0, a large negative x gives -0 (the formula's 1 + tanh(u) is 0 there), a NaN stays NaN,
  // +inf stays +inf and -inf gives the formula's NaN (-inf * 0).
  OneDnnPostOp gelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluTanh;
  auto formula = [](double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); };
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> uniform(-12.f, 12.f);
  for (int64_t n : {1, 7, 15, 16, 17, 31, 33, 1000}) {
    SCOPED_TRACE(n);
    std::vector<float> in(n + 1), out;
    for (float& x : in) x = uniform(rng);
    out = in;
    ApplySmallProductPostOps({gelu}, {}, 1, n, out.data());
    for (int64_t e = 0; e < n; ++e) {
      const double want = formula(in[e]);
      EXPECT_NEAR(out[e], want, 4e-7 * std::abs(want) + 3e-7) << "x = " << in[e];
    }
    EXPECT_EQ(out[n], in[n]);  // past the end: untouched
  }
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  std::vector<float> special = {-0.f, -9.5f, -20.f, -1e30f, nan, inf, -inf, 1e30f, 0.f};
  ApplySmallProductPostOps({gelu}, {}, 1, special.size(), special.data());
  for (int e : {0, 1, 2, 3}) {
    EXPECT_EQ(special[e], 0.f) << e;
    EXPECT_TRUE(std::signbit(special[e])) << e;
  }
  EXPECT_TRUE(std::isnan(special[4]));
  EXPECT_EQ(special[5], inf);
  EXPECT_TRUE(std::isnan(special[6]));
  EXPECT_EQ(special[7], 1e30f);
  EXPECT_EQ(special[8], 0.f);
  EXPECT_FALSE(std::signbit(special[8]));
}

TEST(NarrowProductTest, Relu6KeepsANaNAndClampsToPlusZeroAndSix) {
  // XLA's minimum(maximum(x, 0), 6), as clamp(0, x, 6) is: a NaN kept, -0 and -inf to +0, +inf and
  // 6.5 to 6; in the vector loop (the first 8 of each row of 10) and its tail, and in the scalar
  // loops (after a GELU).
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {nan, -0.f, inf, -inf, -1.f, 6.5f, 0.f, 3.f, nan, 7.f};
  auto expected = [](float x) { return x > 6 ? 6.f : x > 0 ? x : 0.f; };
  std::vector<float> out(2 * in.size());
  std::copy(in.begin(), in.end(), out.begin());
  std::copy(in.begin(), in.end(), out.begin() + in.size());
  OneDnnPostOp relu6, gelu;
  relu6.kind = OneDnnPostOp::Kind::kRelu6;
  gelu.kind = OneDnnPostOp::Kind::kGeluErf;
  ApplySmallProductPostOps({relu6}, {}, 2, in.size(), out.data());
  for (size_t e = 0; e < out.size(); ++e) {
    const float x = in[e % in.size()];
    if (std::isnan(x)) {
      EXPECT_TRUE(std::isnan(out[e])) << e;
    } else {
      EXPECT_EQ(out[e], expected(x)) << e;
      EXPECT_FALSE(std::signbit(out[e])) << e;
    }
  }
  std::vector<float> scalar = {nan, -0.f, 100.f};
  ApplySmallProductPostOps({gelu, relu6}, {}, 1, 3, scalar.data());
  EXPECT_TRUE(std::isnan(scalar[0]));
  EXPECT_EQ(scalar[1], 0.f);
  EXPECT_FALSE(std::signbit(scalar[1]));
  EXPECT_EQ(scalar[2], 6.f);
}

TEST(NarrowProductTest, ScalarPostOpsTakeTheLinearMapAsOneFusedMultiplyAdd) {
  // A logistic post-op sends every post-op to the scalar loops, whose linear map (after it) rounds
  // once as the one-pass loops' does (the linear map alone).
  std::vector<float> out(70);
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> uniform(-2.f, 2.f);
  for (float& x : out) x = uniform(rng);
  OneDnnPostOp linear, logistic;
  linear.alpha = 0.1;
  linear.beta = 0.3;
  logistic.kind = OneDnnPostOp::Kind::kLogistic;
  for (bool scalar : {false, true}) {
    SCOPED_TRACE(scalar ? "after a logistic, in the scalar loops" : "alone, in one pass");
    const std::vector<OneDnnPostOp> ops =
        scalar ? std::vector<OneDnnPostOp>{logistic, linear} : std::vector<OneDnnPostOp>{linear};
    std::vector<float> got = out;
    ApplySmallProductPostOps(ops, {}, 7, 10, got.data());
    int rounded_twice_differs = 0;
    for (size_t e = 0; e < out.size(); ++e) {
      const float x = scalar ? 1.f / (1.f + std::exp(-out[e])) : out[e];
      const float fused = std::fma(0.1f, x, 0.3f);
      volatile float product = 0.1f * x;  // rounded before the add, whatever the flags
      rounded_twice_differs += fused != product + 0.3f;
      EXPECT_EQ(got[e], fused) << e;
    }
    EXPECT_GT(rounded_twice_differs, 0);  // the case tells the two roundings apart
  }
}

TEST(NarrowProductTest, AScalingKeepsTheSignOfZero) {
  // A linear map of zero beta is a scaling: 3 * -0 is -0 and -3 * +0 is -0, as the evaluator's
  // multiply gives (fma(3, -0, +0) would give +0). In the one-pass loops (the first 8 of each row
  // of 10) and their tail, and in the scalar loops, which a GELU before it sends them to.
  const float nan = std::nanf(""), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> in = {-0.f, 0.f, -1.f, 2.f, -0.f, inf, nan, 0.f, -0.f, 0.f};
  OneDnnPostOp gelu;
  gelu.kind = OneDnnPostOp::Kind::kGeluErf;  // 0.5 * x * (1 + erf(x / sqrt 2)): keeps each zero
  for (const double alpha : {3.0, -3.0}) {
    OneDnnPostOp scale;
    scale.alpha = alpha;
    for (bool scalar : {false, true}) {
      SCOPED_TRACE(fmt::format("alpha {}, {}", alpha, scalar ? "scalar loops" : "one pass"));
      std::vector<float> out(2 * in.size());
      std::copy(in.begin(), in.end(), out.begin());
      std::copy(in.begin(), in.end(), out.begin() + in.size());
      const std::vector<OneDnnPostOp> ops =
          scalar ? std::vector<OneDnnPostOp>{gelu, scale} : std::vector<OneDnnPostOp>{scale};
      ApplySmallProductPostOps(ops, {}, 2, in.size(), out.data());
      for (size_t e = 0; e < out.size(); ++e) {
        const float x = in[e % in.size()];
        if (x != 0) continue;
        const float expected = static_cast<float>(alpha) * x;
        EXPECT_EQ(out[e], 0.f) << e;
        EXPECT_EQ(std::signbit(out[e]), std::signbit(expected)) << e << ": " << x << " scaled by " << alpha;
      }
    }
  }
}

TEST(NarrowProductTest, MoreColumnsThanLanesAbort) {
  // Past the limit the thunks choose the loops under, a caller's bug stops at once.
  std::vector<float> rhs(4 * 17, 1.f), packed(4 * 17), lhs(4, 1.f), out(17);
  EXPECT_DEATH(PackNarrowRhs(rhs.data(), 4, 17, packed.data(), 4), "PackNarrowRhs of 17 columns");
  EXPECT_DEATH(NarrowProduct(1, 4, 17, lhs.data(), 4, packed.data(), 4, out.data()), "NarrowProduct of 17 columns");
  EXPECT_DEATH(NarrowProductScalar(1, 4, 17, lhs.data(), 4, packed.data(), 4, out.data()),
               "NarrowProduct of 17 columns");
}

// Every remainder of the 16x16 tiles in both dimensions, from a block inside a wider matrix
// (lds > cols) into rows longer than the block's (ldd > rows): each element lands at its
// transposed place, and nothing between or past the rows is written.
TEST(TransposedCopyTest, EveryRemainderLandsTransposedAndNothingElse) {
  const float canary = -777.f;
  for (int64_t rows : {1, 15, 16, 17, 33, 128}) {
    for (int64_t cols : {1, 5, 16, 31, 48, 392}) {
      SCOPED_TRACE(testing::Message() << "rows " << rows << " cols " << cols);
      const int64_t lds = cols + 3, ldd = rows + 2;
      std::vector<float> src(rows * lds);
      for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<float>(i);
      std::vector<float> dst(cols * ldd + 8, canary);
      TransposedCopy(src.data(), rows, cols, lds, dst.data(), ldd);
      for (int64_t c = 0; c < cols; ++c) {
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(dst[c * ldd + r], src[r * lds + c]) << "at row " << c << " column " << r;
        }
        for (int64_t r = rows; r < ldd; ++r) ASSERT_EQ(dst[c * ldd + r], canary) << "written past row " << c;
      }
      for (int64_t e = cols * ldd; e < cols * ldd + 8; ++e) ASSERT_EQ(dst[e], canary) << "written past the output";
    }
  }
}

TEST(SmallProductTest, NamesTheLoopsItRuns) {
  const std::string isa = SmallProductIsa();
  EXPECT_TRUE(isa == "avx2" || isa == "scalar") << isa;
#if defined(__x86_64__)
  EXPECT_EQ(isa == "avx2", __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
#else
  EXPECT_EQ(isa, "scalar");
#endif
}

}  // namespace
}  // namespace xlens::runtime
