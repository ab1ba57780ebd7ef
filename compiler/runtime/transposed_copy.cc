#include "compiler/runtime/transposed_copy.h"

#include "compiler/support/cpu_features.h"

#if defined(__x86_64__)
#include "compiler/runtime/avx512_transpose.h"
#endif

namespace xlens::runtime {

void TransposedCopyScalar(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  for (int64_t c = 0; c < cols; ++c) {
    for (int64_t r = 0; r < rows; ++r) dst[c * ldd + r] = src[r * lds + c];
  }
}

#if defined(__x86_64__)
namespace {

#define XLENS_AVX512 __attribute__((target("avx512f")))

// One 16x16 tile: 16 rows loaded (the first `cols` elements of each, the rest zero), transposed
// in registers, its first `cols` rows stored.
XLENS_AVX512 __attribute__((always_inline)) inline void TransposeTile(const float* src, int64_t lds, int cols,
                                                                      float* dst, int64_t ldd) {
  const __mmask16 columns = static_cast<__mmask16>((1u << cols) - 1);
  __m512 r[16], t[16];
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) r[i] = _mm512_maskz_loadu_ps(columns, src + i * lds);
  Transpose16x16(r, t);
#pragma GCC unroll 16
  for (int i = 0; i < 16; ++i) {
    if (i < cols) _mm512_storeu_ps(dst + i * ldd, r[i]);
  }
}

// A band of 16 columns of src at a time (16 rows of dst, each written along its length), tiles
// down the band, the rows past the last whole tile one at a time; the last band, of fewer
// columns, in tiles of masked loads too (a narrow product's rhs, [784,10] in the MNIST step, is
// all one such band).
XLENS_AVX512 void TransposedCopyAvx512(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst,
                                       int64_t ldd) {
  for (int64_t c = 0; c < cols; c += 16) {
    const int band = cols - c < 16 ? static_cast<int>(cols - c) : 16;
    int64_t r = 0;
    if (band == 16) {
      for (; r + 16 <= rows; r += 16) TransposeTile(src + r * lds + c, lds, 16, dst + c * ldd + r, ldd);
    } else {
      for (; r + 16 <= rows; r += 16) TransposeTile(src + r * lds + c, lds, band, dst + c * ldd + r, ldd);
    }
    TransposedCopyScalar(src + r * lds + c, rows - r, band, lds, dst + c * ldd + r, ldd);
  }
}

#undef XLENS_AVX512

}  // namespace

void TransposedCopy(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  if (CpuHasAvx512F()) {
    TransposedCopyAvx512(src, rows, cols, lds, dst, ldd);
    return;
  }
  TransposedCopyScalar(src, rows, cols, lds, dst, ldd);
}

#else

void TransposedCopy(const float* src, int64_t rows, int64_t cols, int64_t lds, float* dst, int64_t ldd) {
  TransposedCopyScalar(src, rows, cols, lds, dst, ldd);
}

#endif

}  // namespace xlens::runtime
