#include "compiler/runtime/narrow_product.h"

#include "compiler/runtime/avx512_transpose.h"
#include "compiler/runtime/transposed_copy.h"
#include "compiler/support/cpu_features.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace xlens::runtime {
namespace {

// NarrowProduct's loops take any n, in groups of at most 6 columns; NarrowProductTransposedLhs and
// ShortKProduct keep a column (or an element of k) per vector lane, in masks of 16 bits, and
// would read and write past a wider one. All keep the limit the thunks choose them under
// (kNarrowOutputColumns), and so does PackNarrowRhs (TransposedCopy takes any n), so that a
// caller's bug stops here rather than in the loops.
void CheckNarrowColumns(int64_t n, const char* function) {
  if (n >= 1 && n <= kNarrowProductMaxColumns) return;
  std::fprintf(stderr, "xlens: %s of %lld columns (1 to %lld)\n", function, static_cast<long long>(n),
               static_cast<long long>(kNarrowProductMaxColumns));
  std::abort();
}

}  // namespace

// The rhs's rows transposed in 16x16 tiles, each row a masked load of its n elements, by the
// routine that packs a transposed lhs for oneDNN. The loop it replaces (the same shuffles, its
// n stores a loop of run-time length) took 1.09-1.19 us for the MNIST step's [784,10] on one
// core, TransposedCopy 0.64-0.72 ([128,10]: 0.162 -> 0.112 us; best of 20 rounds of 1000).
void PackNarrowRhs(const float* rhs, int64_t k, int64_t n, float* packed, int64_t ldb) {
  CheckNarrowColumns(n, "PackNarrowRhs");
  TransposedCopy(rhs, k, n, n, packed, ldb);
}

void NarrowProductScalar(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs_transposed,
                         int64_t ldb, float* out) {
  CheckNarrowColumns(n, "NarrowProduct");
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += lhs[i * lda + p] * rhs_transposed[j * ldb + p];
      out[i * n + j] = sum;
    }
  }
}

void NarrowProductTransposedLhsScalar(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda,
                                      const float* rhs, float* out, const NarrowOutputUpdate& update) {
  CheckNarrowColumns(n, "NarrowProductTransposedLhs");
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += lhs[p * lda + i] * rhs[p * n + j];
      if (update.linear) sum = std::fma(update.alpha, sum, update.beta);
      if (update.addend != nullptr) sum += update.addend[i * n + j];
      out[i * n + j] = sum;
    }
  }
}

void ShortKProductScalar(int64_t m, int64_t k, int64_t n, const float* lhs, const float* rhs, float* out,
                         int64_t ldc) {
  CheckNarrowColumns(k, "ShortKProduct");
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      float sum = 0;
      for (int64_t p = 0; p < k; ++p) sum += lhs[i * k + p] * rhs[j * k + p];
      out[i * ldc + j] = sum;
    }
  }
}

#if defined(__x86_64__)
// GCC 12 takes the undefined vector that some intrinsics pass to their builtins (the unused
// merge source) for a read of an uninitialized one.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
namespace {

#define XLENS_AVX512 __attribute__((target("avx512f")))

// 16 accumulators summed across their lanes into one vector: element 4q + e holds the sum of
// accumulator q + 4 * {0, 2, 1, 3}[e] (kNarrowSumLane below). A shuffle tree, 45 instructions
// for the 16 sums, where reducing each alone takes 8.
XLENS_AVX512 inline __m512 NarrowSumEachOf16(const __m512* v) {
  __m512 s[8];
#pragma GCC unroll 8
  for (int i = 0; i < 8; ++i) {  // s[i], 128-bit lane q: halves of v[2i] (q < 2), v[2i + 1]
    const __m512 x = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2));
    s[i] = _mm512_add_ps(x, y);
  }
  __m512 t[4];
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {  // t[i], 128-bit lane q: quarter sums of v[4i + q]
    const __m512 x = _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0));
    const __m512 y = _mm512_shuffle_f32x4(s[2 * i], s[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1));
    t[i] = _mm512_add_ps(x, y);
  }
  __m512 u[2];
#pragma GCC unroll 2
  for (int i = 0; i < 2; ++i) {  // u[i], lane q: two partial sums of v[4i + q], two of v[4i + 8 + q]
    const __m512 x = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    const __m512 y = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i] = _mm512_add_ps(x, y);
  }
  const __m512 x = _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(2, 0, 2, 0));
  const __m512 y = _mm512_shuffle_ps(u[0], u[1], _MM_SHUFFLE(3, 1, 3, 1));
  return _mm512_add_ps(x, y);  // lane q: v[q], v[8 + q], v[4 + q], v[12 + q]
}

// Where NarrowSumEachOf16 leaves the sum of accumulator a: element 4 (a % 4) + kNarrowSumLane[a / 4].
constexpr int kNarrowSumLane[4] = {0, 2, 1, 3};

// One step of NarrowBlock: the next 16 elements of k (those under `mask`). The R lhs rows are
// loaded first and each rhs column after them, once for the R multiply-adds that read it, so
// that R x G accumulators, R rows and one column fit the 32 vector registers (29 for 4 x 6).
template <int R, int G>
XLENS_AVX512 __attribute__((always_inline)) inline void NarrowStep(const float* a, int64_t lda, const float* bt,
                                                             int64_t ldb, int64_t p, __mmask16 mask, __m512* acc) {
  __m512 x[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) x[r] = _mm512_maskz_loadu_ps(mask, a + r * lda + p);
#pragma GCC unroll 8
  for (int g = 0; g < G; ++g) {
    const __m512 b = _mm512_maskz_loadu_ps(mask, bt + g * ldb + p);
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[r * G + g] = _mm512_fmadd_ps(x[r], b, acc[r * G + g]);
  }
}

// R rows by G columns of the output (R <= 4, G <= kNarrowGroupColumns), each a dot product over
// k held in one accumulator; the accumulators are summed across their lanes at the end, 16 at a
// time. Per 16 elements of k: R + G loads for R x G multiply-adds.
template <int R, int G>
XLENS_AVX512 void NarrowBlock(const float* a, int64_t lda, const float* bt, int64_t ldb, int64_t k, float* c,
                              int64_t ldc) {
  constexpr int kSums = (R * G + 15) / 16;
  __m512 acc[16 * kSums];
#pragma GCC unroll 32
  for (int i = 0; i < 16 * kSums; ++i) acc[i] = _mm512_setzero_ps();
  int64_t p = 0;
  for (; p + 16 <= k; p += 16) NarrowStep<R, G>(a, lda, bt, ldb, p, 0xffff, acc);
  // The last k % 16 under a mask: nothing past a row is read (it may be another's, or unmapped).
  if (p < k) NarrowStep<R, G>(a, lda, bt, ldb, p, static_cast<__mmask16>((1u << (k - p)) - 1), acc);
  alignas(64) float sums[16 * kSums];
#pragma GCC unroll 2
  for (int s = 0; s < kSums; ++s) _mm512_store_ps(sums + 16 * s, NarrowSumEachOf16(acc + 16 * s));
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 8
    for (int g = 0; g < G; ++g) {
      const int i = r * G + g, q = i % 16;
      c[r * ldc + g] = sums[16 * (i / 16) + 4 * (q % 4) + kNarrowSumLane[q / 4]];
    }
  }
}

// The widest group of columns NarrowBlock takes: 4 rows by 6 columns are 24 accumulators.
constexpr int64_t kNarrowGroupColumns = 6;

// The output's n columns in as few groups of at most kNarrowGroupColumns as there can be, of
// widths that differ by one at most (10: 5 and 5, 16: 6, 5 and 5), each row block's lhs rows
// read once per group. Groups of at most 4 (10 as 4, 4 and 2) read the MNIST step's lhs three
// times, and a group of 2 does 8 multiply-adds for 6 loads: on one core, best of 3000 calls,
// 100x784x10 13.1 -> 10.8 us, 64x256x10 3.18 -> 2.77, 16x3136x10 10.6 -> 8.4 (more in the commit).
template <int R>
XLENS_AVX512 void NarrowRows(const float* a, int64_t lda, int64_t k, const float* bt, int64_t ldb, int64_t n,
                             float* c) {
  const int64_t groups = (n + kNarrowGroupColumns - 1) / kNarrowGroupColumns;
  int64_t j = 0;
  for (int64_t group = 0; group < groups; ++group) {
    const int64_t width = (n - j) / (groups - group) + ((n - j) % (groups - group) != 0 ? 1 : 0);
    switch (width) {
#define XLENS_NARROW_GROUP(G) \
  case G: NarrowBlock<R, G>(a, lda, bt + j * ldb, ldb, k, c + j, n); break;
      XLENS_NARROW_GROUP(1) XLENS_NARROW_GROUP(2) XLENS_NARROW_GROUP(3) XLENS_NARROW_GROUP(4) XLENS_NARROW_GROUP(5)
      XLENS_NARROW_GROUP(6)
#undef XLENS_NARROW_GROUP
      default: break;
    }
    j += width;
  }
}

XLENS_AVX512 void NarrowProductAvx512(int64_t m, int64_t k, int64_t n, const float* a, int64_t lda, const float* bt,
                                      int64_t ldb, float* c) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) NarrowRows<4>(a + i * lda, lda, k, bt, ldb, n, c + i * n);
  switch (m - i) {
    case 3: NarrowRows<3>(a + i * lda, lda, k, bt, ldb, n, c + i * n); break;
    case 2: NarrowRows<2>(a + i * lda, lda, k, bt, ldb, n, c + i * n); break;
    case 1: NarrowRows<1>(a + i * lda, lda, k, bt, ldb, n, c + i * n); break;
    default: break;
  }
}

// 16 V rows of the output of NarrowProductTransposedLhs (those under `rows`, 16 a vector), N
// columns: per k, the lhs row's 16 V elements times each of the rhs row's N, broadcast once for
// the V vectors; an accumulator a column per vector, transposed in registers into the rows at the
// end (V N + V + 1 of the 32 vector registers), and each row updated there as it is stored. The
// loop over k is unrolled 4 times: on one core, best of 20000 calls, the MNIST step's part of 392
// rows (k 100, n 10) 5.16-5.18 -> 4.89-4.90 us.
template <int N, int V>
XLENS_AVX512 void NarrowTransposedBlock(int64_t k, const float* a, int64_t lda, const float* b, __mmask32 rows,
                                        float* c, const NarrowOutputUpdate& update) {
  static_assert(V == 1 || V == 2);
  const __mmask16 mask[2] = {static_cast<__mmask16>(rows), static_cast<__mmask16>(rows >> 16)};
  __m512 acc[V][N];
#pragma GCC unroll 2
  for (int v = 0; v < V; ++v) {
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) acc[v][j] = _mm512_setzero_ps();
  }
#pragma GCC unroll 4
  for (int64_t p = 0; p < k; ++p) {
    __m512 x[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) {
      // The next block's 32 columns of this row into L1 (a prefetch past the array's end reads
      // nothing and cannot fault). A block reads its k rows lda apart, two lines from each: the
      // convolution step's x [32,3136], 32 rows 12.5 KB apart, which the hardware's prefetchers
      // left to miss L1 on every row. 6 alternating processes of 3000 runs of 8 such weight
      // updates: median 22 -> 14.7 us a product (lower in 6 of 6); in the step 18.5 -> 14.5 us
      // (6 of 6). The MNIST step's (k 100) unchanged.
      _mm_prefetch(reinterpret_cast<const char*>(a + p * lda + 16 * v + 32), _MM_HINT_T0);
      x[v] = _mm512_maskz_loadu_ps(mask[v], a + p * lda + 16 * v);
    }
#pragma GCC unroll 16
    for (int j = 0; j < N; ++j) {
      const __m512 y = _mm512_set1_ps(b[p * N + j]);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) acc[v][j] = _mm512_fmadd_ps(x[v], y, acc[v][j]);
    }
  }
  const __mmask16 columns = static_cast<__mmask16>((1u << N) - 1);
  const __m512 alpha = _mm512_set1_ps(update.alpha), beta = _mm512_set1_ps(update.beta);
#pragma GCC unroll 2
  for (int h = 0; h < V; ++h) {
    __m512 r[16], t[16];
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) r[j] = j < N ? acc[h][j] : _mm512_setzero_ps();
    Transpose16x16(r, t);
    if (update.linear) {
#pragma GCC unroll 16
      for (int l = 0; l < 16; ++l) r[l] = _mm512_fmadd_ps(alpha, r[l], beta);
    }
#pragma GCC unroll 16
    for (int l = 0; l < 16; ++l) {
      if (!((rows >> (16 * h + l)) & 1)) continue;
      const int64_t row = 16 * h + l;
      if (update.addend != nullptr) r[l] = _mm512_add_ps(r[l], _mm512_maskz_loadu_ps(columns, update.addend + row * N));
      _mm512_mask_storeu_ps(c + row * N, columns, r[l]);
    }
  }
}

// Blocks of 32 rows, and a last block of at most 16 rows in one vector: a part's last rows (the
// MNIST step's 392 = 12 x 32 + 8) took a whole block's multiply-adds for a quarter of its rows.
template <int N>
XLENS_AVX512 void NarrowTransposedRows(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, float* c,
                                       const NarrowOutputUpdate& update) {
  for (int64_t i = 0; i < m; i += 32) {
    const int64_t count = m - i < 32 ? m - i : 32;
    const __mmask32 rows = count == 32 ? ~__mmask32{0} : static_cast<__mmask32>((1u << count) - 1);
    NarrowOutputUpdate block = update;
    if (block.addend != nullptr) block.addend += i * N;
    if (count <= 16) {
      NarrowTransposedBlock<N, 1>(k, a + i, lda, b, rows, c + i * N, block);
    } else {
      NarrowTransposedBlock<N, 2>(k, a + i, lda, b, rows, c + i * N, block);
    }
  }
}

// The output's columns from 16 rows of the rhs ([n, K] stored): those rows transposed in
// registers into K vectors of 16 columns, then per lhs row K multiply-adds, 4 rows at a time.
template <int K>
XLENS_AVX512 void ShortKColumns(int64_t m, const float* a, const float* b, int64_t columns, float* c, int64_t ldc) {
  const __mmask16 row = static_cast<__mmask16>((1u << K) - 1);
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int l = 0; l < 16; ++l) r[l] = l < columns ? _mm512_maskz_loadu_ps(row, b + l * K) : _mm512_setzero_ps();
  Transpose16x16(r, t);
  const __mmask16 out = columns >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << columns) - 1);
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) {
    __m512 acc[4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) acc[q] = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int p = 0; p < K; ++p) {
#pragma GCC unroll 4
      for (int q = 0; q < 4; ++q) acc[q] = _mm512_fmadd_ps(_mm512_set1_ps(a[(i + q) * K + p]), r[p], acc[q]);
    }
#pragma GCC unroll 4
    for (int q = 0; q < 4; ++q) _mm512_mask_storeu_ps(c + (i + q) * ldc, out, acc[q]);
  }
  for (; i < m; ++i) {
    __m512 acc = _mm512_setzero_ps();
#pragma GCC unroll 16
    for (int p = 0; p < K; ++p) acc = _mm512_fmadd_ps(_mm512_set1_ps(a[i * K + p]), r[p], acc);
    _mm512_mask_storeu_ps(c + i * ldc, out, acc);
  }
}

template <int K>
XLENS_AVX512 void ShortKRows(int64_t m, int64_t n, const float* a, const float* b, float* c, int64_t ldc) {
  for (int64_t j = 0; j < n; j += 16) ShortKColumns<K>(m, a, b + j * K, n - j < 16 ? n - j : 16, c + j, ldc);
}

XLENS_AVX512 void ShortKProductAvx512(int64_t m, int64_t k, int64_t n, const float* a, const float* b, float* c,
                                      int64_t ldc) {
  switch (k) {
#define XLENS_SHORT_K(K) \
  case K: ShortKRows<K>(m, n, a, b, c, ldc); break;
    XLENS_SHORT_K(1) XLENS_SHORT_K(2) XLENS_SHORT_K(3) XLENS_SHORT_K(4) XLENS_SHORT_K(5) XLENS_SHORT_K(6)
    XLENS_SHORT_K(7) XLENS_SHORT_K(8) XLENS_SHORT_K(9) XLENS_SHORT_K(10) XLENS_SHORT_K(11) XLENS_SHORT_K(12)
    XLENS_SHORT_K(13) XLENS_SHORT_K(14) XLENS_SHORT_K(15) XLENS_SHORT_K(16)
#undef XLENS_SHORT_K
    default: break;
  }
}

XLENS_AVX512 void NarrowProductTransposedLhsAvx512(int64_t m, int64_t k, int64_t n, const float* a, int64_t lda,
                                                   const float* b, float* c, const NarrowOutputUpdate& update) {
  switch (n) {
#define XLENS_NARROW_COLUMNS(N) \
  case N: NarrowTransposedRows<N>(m, k, a, lda, b, c, update); break;
    XLENS_NARROW_COLUMNS(1) XLENS_NARROW_COLUMNS(2) XLENS_NARROW_COLUMNS(3) XLENS_NARROW_COLUMNS(4)
    XLENS_NARROW_COLUMNS(5) XLENS_NARROW_COLUMNS(6) XLENS_NARROW_COLUMNS(7) XLENS_NARROW_COLUMNS(8)
    XLENS_NARROW_COLUMNS(9) XLENS_NARROW_COLUMNS(10) XLENS_NARROW_COLUMNS(11) XLENS_NARROW_COLUMNS(12)
    XLENS_NARROW_COLUMNS(13) XLENS_NARROW_COLUMNS(14) XLENS_NARROW_COLUMNS(15) XLENS_NARROW_COLUMNS(16)
#undef XLENS_NARROW_COLUMNS
    default: break;
  }
}

}  // namespace

#pragma GCC diagnostic pop
#undef XLENS_AVX512

bool NarrowProductAvailable() { return CpuHasAvx512F(); }

void NarrowProduct(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs_transposed,
                   int64_t ldb, float* out) {
  CheckNarrowColumns(n, "NarrowProduct");
  // The thunks never choose the loops without AVX-512; a direct caller gets the product rather
  // than an illegal instruction.
  if (!NarrowProductAvailable()) {
    NarrowProductScalar(m, k, n, lhs, lda, rhs_transposed, ldb, out);
    return;
  }
  NarrowProductAvx512(m, k, n, lhs, lda, rhs_transposed, ldb, out);
}

void NarrowProductTransposedLhs(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs,
                                float* out, const NarrowOutputUpdate& update) {
  CheckNarrowColumns(n, "NarrowProductTransposedLhs");
  if (!NarrowProductAvailable()) {
    NarrowProductTransposedLhsScalar(m, k, n, lhs, lda, rhs, out, update);
    return;
  }
  NarrowProductTransposedLhsAvx512(m, k, n, lhs, lda, rhs, out, update);
}

void ShortKProduct(int64_t m, int64_t k, int64_t n, const float* lhs, const float* rhs, float* out, int64_t ldc) {
  CheckNarrowColumns(k, "ShortKProduct");
  if (!NarrowProductAvailable()) {
    ShortKProductScalar(m, k, n, lhs, rhs, out, ldc);
    return;
  }
  ShortKProductAvx512(m, k, n, lhs, rhs, out, ldc);
}

#else

bool NarrowProductAvailable() { return false; }

void ShortKProduct(int64_t m, int64_t k, int64_t n, const float* lhs, const float* rhs, float* out, int64_t ldc) {
  ShortKProductScalar(m, k, n, lhs, rhs, out, ldc);
}

void NarrowProductTransposedLhs(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs,
                                float* out, const NarrowOutputUpdate& update) {
  NarrowProductTransposedLhsScalar(m, k, n, lhs, lda, rhs, out, update);
}

// The thunks never choose the loops here (NarrowProductAvailable); a direct caller gets the
// product rather than an output left unwritten.
void NarrowProduct(int64_t m, int64_t k, int64_t n, const float* lhs, int64_t lda, const float* rhs_transposed,
                   int64_t ldb, float* out) {
  NarrowProductScalar(m, k, n, lhs, lda, rhs_transposed, ldb, out);
}

#endif

}  // namespace xlens::runtime
