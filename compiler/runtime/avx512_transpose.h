// A 16x16 tile of floats transposed in AVX-512 registers, for the runtime's loops that move rows
// into columns: TransposedCopy's tiles (a transposed lhs packed for oneDNN, a narrow product's
// rhs), a narrow weight gradient's accumulators written out as rows, a short-k product's rhs
// turned into columns (narrow_product.cc). Only for x86-64 code compiled for AVX-512F, or called
// from a function that is (target("avx512f")): it is inlined there, the tile kept in registers.
#pragma once

#if defined(__x86_64__)
#include <immintrin.h>

namespace xlens::runtime {

// r[j] lane i becomes r[i] lane j, for the 16 vectors r (t is scratch): four rounds of 16
// shuffles (pairs of elements, pairs of pairs, then 128-bit lanes twice). The loops are unrolled
// so that the tile stays in registers: at -O2 GCC kept the arrays in memory and took 2.5 times
// as long. GCC 12 takes the undefined vector that the unpacks and the 128-bit lane shuffles pass
// to their builtins (the unused merge source) for a read of an uninitialized one: ten warnings
// from avx512fintrin.h per use, all within these rounds.
__attribute__((target("avx512f"), always_inline)) inline void Transpose16x16(__m512* r, __m512* t) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC unroll 8
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], 0x44);
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], 0xEE);
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 8] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
  }
#pragma GCC unroll 4
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 4], 0x88);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 8], t[i + 12], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 4], 0xDD);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 8], t[i + 12], 0xDD);
  }
#pragma GCC diagnostic pop
}

}  // namespace xlens::runtime

#endif
