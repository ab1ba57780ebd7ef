#include "compiler/runtime/small_product.h"

#include "compiler/support/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cmath>
#include <vector>

namespace xlens::runtime {
namespace {

// One output row from a contiguous lhs row `a` of k elements.
void RowScalar(const SmallProductShape& s, const float* a, const float* rhs, float* c) {
  if (s.rhs_transposed) {
    for (int64_t j = 0; j < s.n; ++j) {
      const float* b = rhs + j * s.k;
      float sum = 0;
      for (int64_t p = 0; p < s.k; ++p) sum += a[p] * b[p];
      c[j] = sum;
    }
    return;
  }
  std::fill(c, c + s.n, 0.f);
  for (int64_t p = 0; p < s.k; ++p) {
    const float x = a[p];
    const float* b = rhs + p * s.n;
    for (int64_t j = 0; j < s.n; ++j) c[j] += x * b[j];
  }
}

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) float HorizontalSum(__m256 v) {
  __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  x = _mm_add_ps(x, _mm_movehl_ps(x, x));
  x = _mm_add_ss(x, _mm_shuffle_ps(x, x, 1));
  return _mm_cvtss_f32(x);
}

__attribute__((target("avx2,fma"))) void RowAvx2(const SmallProductShape& s, const float* a, const float* rhs,
                                                 float* c) {
  const int64_t k = s.k, n = s.n;
  if (s.rhs_transposed) {
    // Each output is a dot product of two contiguous rows of k.
    for (int64_t j = 0; j < n; ++j) {
      const float* b = rhs + j * k;
      __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
      int64_t p = 0;
      for (; p + 16 <= k; p += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p + 8), _mm256_loadu_ps(b + p + 8), acc1);
      }
      for (; p + 8 <= k; p += 8) acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + p), _mm256_loadu_ps(b + p), acc0);
      float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
      for (; p < k; ++p) sum += a[p] * b[p];
      c[j] = sum;
    }
    return;
  }
  // A block of 32 (or 8) outputs kept in registers over the whole of k, each lhs element
  // broadcast against a row of the rhs.
  int64_t j = 0;
  for (; j + 32 <= n; j += 32) {
    __m256 c0 = _mm256_setzero_ps(), c1 = c0, c2 = c0, c3 = c0;
    for (int64_t p = 0; p < k; ++p) {
      const __m256 x = _mm256_broadcast_ss(a + p);
      const float* b = rhs + p * n + j;
      c0 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b), c0);
      c1 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 8), c1);
      c2 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 16), c2);
      c3 = _mm256_fmadd_ps(x, _mm256_loadu_ps(b + 24), c3);
    }
    _mm256_storeu_ps(c + j, c0);
    _mm256_storeu_ps(c + j + 8, c1);
    _mm256_storeu_ps(c + j + 16, c2);
    _mm256_storeu_ps(c + j + 24, c3);
  }
  for (; j + 8 <= n; j += 8) {
    __m256 c0 = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + p), _mm256_loadu_ps(rhs + p * n + j), c0);
    _mm256_storeu_ps(c + j, c0);
  }
  if (j < n) {
    // The last n % 8 columns under a mask: no element past the rhs row or the output row is read
    // or written.
    alignas(32) int32_t lanes[8];
    for (int l = 0; l < 8; ++l) lanes[l] = j + l < n ? -1 : 0;
    const __m256i mask = _mm256_load_si256(reinterpret_cast<const __m256i*>(lanes));
    __m256 c0 = _mm256_setzero_ps();
    for (int64_t p = 0; p < k; ++p) {
      c0 = _mm256_fmadd_ps(_mm256_broadcast_ss(a + p), _mm256_maskload_ps(rhs + p * n + j, mask), c0);
    }
    _mm256_maskstore_ps(c + j, mask, c0);
  }
}

#endif  // __x86_64__

// XLA's maximum(x, 0): a NaN kept (std::max(x, 0.f) keeps it too, but gives -0 for -0, which
// XLA's maximum and the evaluator order below +0).
inline float Relu(float x) { return !(x <= 0.f) ? x : 0.f; }
// XLA's minimum(maximum(x, 0), 6), as clamp(0, x, 6) is defined: a NaN kept, +0 for -0.
inline float Relu6(float x) { return !(x <= 0.f) ? (x > 6.f ? 6.f : x) : 0.f; }

#if defined(__x86_64__)
// The widest rows ApplyPostOpsAvx2 takes eight at a time (an addend along them repeated into 256
// floats at most).
constexpr int64_t kRowsOfEightMaxColumns = 32;

// ApplySmallProductPostOps where every post-op is an add, a linear map or a ReLU: all of them in
// one pass over the output, 8 elements at a time, computed as the scalar loops compute them (a
// linear map as one fused multiply-add in both: the compiler contracted the vector form's multiply
// and add into one, and not the scalar form's). One scalar pass per post-op took the MNIST step's weight
// gradient w - 0.5 x^T g, f32[784,10] from NarrowProductTransposedLhs, 6.4 of its 22 us on one
// core.
__attribute__((target("avx2,fma"))) bool ApplyPostOpsAvx2(const std::vector<OneDnnPostOp>& ops,
                                                          const std::vector<const float*>& addends, int64_t rows,
                                                          int64_t n, float* out) {
  bool last_dimension = false;
  for (const OneDnnPostOp& op : ops) {
    if (op.kind != OneDnnPostOp::Kind::kAdd && op.kind != OneDnnPostOp::Kind::kLinear &&
        op.kind != OneDnnPostOp::Kind::kRelu && op.kind != OneDnnPostOp::Kind::kRelu6) {
      return false;
    }
    last_dimension |= op.kind == OneDnnPostOp::Kind::kAdd && op.addend == OneDnnPostOp::Addend::kLastDimension;
  }
  // Without an addend along the rows the output is one run of elements.
  if (!last_dimension) {
    n *= rows;
    rows = 1;
  } else if (n % 8 != 0 && n <= kRowsOfEightMaxColumns && rows >= 8) {
    // With one, rows whose length is not whole vectors each took a vector loop and a scalar tail
    // of their own: the MNIST step's bias on its logits [100,10], 1.75 us on the caller, 5 ns a
    // column. Eight rows are whole vectors: they go as one row of 8n, each addend along the rows
    // repeated 8 times, and the last rows % 8 one by one as before.
    constexpr int64_t kGroup = 8;
    const int64_t grouped_rows = rows / kGroup * kGroup;
    thread_local std::vector<float> repeated;
    thread_local std::vector<const float*> grouped, rest;
    grouped = rest = addends;
    repeated.resize(addends.size() * kGroup * n);
    size_t next = 0;
    for (const OneDnnPostOp& op : ops) {
      if (op.kind != OneDnnPostOp::Kind::kAdd) continue;
      const float* a = addends[next];
      if (op.addend == OneDnnPostOp::Addend::kLastDimension) {
        float* row = repeated.data() + next * kGroup * n;
        for (int64_t c = 0; c < kGroup * n; ++c) row[c] = a[c % n];
        grouped[next] = row;
      } else if (op.addend == OneDnnPostOp::Addend::kFull) {
        rest[next] = a + grouped_rows * n;
      }
      ++next;
    }
    ApplyPostOpsAvx2(ops, grouped, grouped_rows / kGroup, kGroup * n, out);
    if (grouped_rows < rows) ApplyPostOpsAvx2(ops, rest, rows - grouped_rows, n, out + grouped_rows * n);
    return true;
  }
  // Blocks of whole vectors, each post-op a loop over the block in L1, then a row's last n % 8
  // elements one at a time (masked loads and stores are slow on AMD's cores: 4.5 us of the 20
  // above with every vector masked; one vector at a time through every post-op, 1.8 us).
  constexpr int64_t kBlock = 256;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t whole = n / 8 * 8;
    for (int64_t c0 = 0; c0 < whole; c0 += kBlock) {
      const int64_t c1 = std::min(whole, c0 + kBlock);
      float* o = out + r * n;
      size_t next = 0;
      for (const OneDnnPostOp& op : ops) {
        switch (op.kind) {
          case OneDnnPostOp::Kind::kAdd: {
            const float* a = addends[next++];
            if (op.addend == OneDnnPostOp::Addend::kFull) {
              for (int64_t c = c0; c < c1; c += 8) {
                _mm256_storeu_ps(o + c, _mm256_add_ps(_mm256_loadu_ps(o + c), _mm256_loadu_ps(a + r * n + c)));
              }
            } else if (op.addend == OneDnnPostOp::Addend::kLastDimension) {
              for (int64_t c = c0; c < c1; c += 8) {
                _mm256_storeu_ps(o + c, _mm256_add_ps(_mm256_loadu_ps(o + c), _mm256_loadu_ps(a + c)));
              }
            } else {
              const __m256 x = _mm256_set1_ps(a[0]);
              for (int64_t c = c0; c < c1; c += 8) _mm256_storeu_ps(o + c, _mm256_add_ps(_mm256_loadu_ps(o + c), x));
            }
            break;
          }
          case OneDnnPostOp::Kind::kLinear: {
            const __m256 alpha = _mm256_set1_ps(static_cast<float>(op.alpha));
            const __m256 beta = _mm256_set1_ps(LinearPostOpBeta(op));
            for (int64_t c = c0; c < c1; c += 8) {
              _mm256_storeu_ps(o + c, _mm256_fmadd_ps(alpha, _mm256_loadu_ps(o + c), beta));
            }
            break;
          }
          case OneDnnPostOp::Kind::kRelu6:  // as Relu6 below: vminps gives its second operand's NaN
            for (int64_t c = c0; c < c1; c += 8) {
              const __m256 x = _mm256_loadu_ps(o + c);
              const __m256 r = _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NLE_UQ), x);
              _mm256_storeu_ps(o + c, _mm256_min_ps(_mm256_set1_ps(6.f), r));
            }
            break;
          default:  // kRelu: as Relu below, x where x > 0 or x is a NaN, else +0
            for (int64_t c = c0; c < c1; c += 8) {
              const __m256 x = _mm256_loadu_ps(o + c);
              _mm256_storeu_ps(o + c, _mm256_and_ps(_mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_NLE_UQ), x));
            }
            break;
        }
      }
    }
    for (int64_t c = whole; c < n; ++c) {
      const int64_t e = r * n + c;
      float x = out[e];
      size_t next = 0;
      for (const OneDnnPostOp& op : ops) {
        switch (op.kind) {
          case OneDnnPostOp::Kind::kAdd: {
            const float* a = addends[next++];
            x += op.addend == OneDnnPostOp::Addend::kFull            ? a[e]
                 : op.addend == OneDnnPostOp::Addend::kLastDimension ? a[c]
                                                                      : a[0];
            break;
          }
          case OneDnnPostOp::Kind::kLinear:
            x = std::fma(static_cast<float>(op.alpha), x, LinearPostOpBeta(op));
            break;
          case OneDnnPostOp::Kind::kRelu6:
            x = Relu6(x);
            break;
          default:
            x = Relu(x);
            break;
        }
      }
      out[e] = x;
    }
  }
  return true;
}
#endif

#if defined(__x86_64__)
// The tanh GELU 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), as x / (1 + exp(-2u)):
// the same function (0.5 (1 + tanh(u)) is the logistic of 2u), one exponential and a reciprocal
// instead of a tanh, and no cancellation in 1 + tanh(u) where u is very negative. The
// exponential is Cephes' expf (2^n times a degree-7 polynomial of the remainder, 1-2 ulp), the
// reciprocal rcp14 with one Newton step (2^-28). 16 elements a step, a masked step for the last
// few. Where -2u passes 18 (u below -9, x below about -5.15), tanh(u) rounds to -1 in f32 (and
// XLA's tanh is -1 from there): the result is x * 0, the -0 (or the NaN of -inf) that the tanh
// form gives, not x times a logistic of 1e-8 or less; 1 + exp(-2u) then never leaves rcp14's
// range either.
__attribute__((target("avx512f"), always_inline)) inline __m512 GeluTanh16(__m512 x) {
  const __m512 c1 = _mm512_set1_ps(-2.f * 0.7978845608f), c3 = _mm512_set1_ps(-2.f * 0.7978845608f * 0.044715f);
  const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
  const __m512 ln2_hi = _mm512_set1_ps(0.693359375f), ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
  const __m512 lo = _mm512_set1_ps(-104.f), hi = _mm512_set1_ps(18.f), one = _mm512_set1_ps(1.f);
  const __m512 p0 = _mm512_set1_ps(1.9875691500e-4f), p1 = _mm512_set1_ps(1.3981999507e-3f),
             p2 = _mm512_set1_ps(8.3334519073e-3f), p3 = _mm512_set1_ps(4.1665795894e-2f),
             p4 = _mm512_set1_ps(1.6666665459e-1f), p5 = _mm512_set1_ps(5.0000001201e-1f);
  const __m512 x2 = _mm512_mul_ps(x, x);
  // t = -2u = x (c1 + c3 x^2)
  const __m512 t = _mm512_mul_ps(x, _mm512_fmadd_ps(c3, x2, c1));
  const __mmask16 beyond = _mm512_cmp_ps_mask(t, hi, _CMP_GT_OQ);
  const __m512 tc = _mm512_max_ps(_mm512_min_ps(t, hi), lo);
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(tc, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, ln2_hi, tc);
  r = _mm512_fnmadd_ps(n, ln2_lo, r);
  __m512 p = _mm512_fmadd_ps(p0, r, p1);
  p = _mm512_fmadd_ps(p, r, p2);
  p = _mm512_fmadd_ps(p, r, p3);
  p = _mm512_fmadd_ps(p, r, p4);
  p = _mm512_fmadd_ps(p, r, p5);
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, one));
  const __m512 d = _mm512_add_ps(one, _mm512_scalef_ps(p, n));
  __m512 y = _mm512_rcp14_ps(d);
  y = _mm512_fmadd_ps(y, _mm512_fnmadd_ps(d, y, one), y);
  return _mm512_mul_ps(x, _mm512_mask_mov_ps(y, beyond, _mm512_setzero_ps()));
}

__attribute__((target("avx512f"))) void GeluTanhAvx512(float* out, int64_t size) {
  int64_t e = 0;
  for (; e + 16 <= size; e += 16) _mm512_storeu_ps(out + e, GeluTanh16(_mm512_loadu_ps(out + e)));
  if (e < size) {
    const __mmask16 m = static_cast<__mmask16>((1u << (size - e)) - 1);
    _mm512_mask_storeu_ps(out + e, m, GeluTanh16(_mm512_maskz_loadu_ps(m, out + e)));
  }
}
#endif

}  // namespace

bool NarrowOutputUpdateOf(const std::vector<OneDnnPostOp>& ops, const std::vector<const float*>& addends,
                          NarrowOutputUpdate* update) {
  NarrowOutputUpdate out;
  size_t next = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const OneDnnPostOp& op = ops[i];
    if (op.kind == OneDnnPostOp::Kind::kLinear && i == 0) {
      out.linear = true;
      out.alpha = static_cast<float>(op.alpha);
      out.beta = LinearPostOpBeta(op);
    } else if (op.kind == OneDnnPostOp::Kind::kAdd && op.addend == OneDnnPostOp::Addend::kFull && i + 1 == ops.size() &&
               next < addends.size()) {
      out.addend = addends[next++];
    } else {
      return false;
    }
  }
  *update = out;
  return true;
}

void ApplySmallProductPostOps(const std::vector<OneDnnPostOp>& ops, const std::vector<const float*>& addends,
                              int64_t rows, int64_t n, float* out) {
#if defined(__x86_64__)
  if (!ops.empty() && CpuHasAvx2Fma() && ApplyPostOpsAvx2(ops, addends, rows, n, out)) return;
#endif
  const int64_t size = rows * n;
  size_t next = 0;
  for (const OneDnnPostOp& op : ops) {
    switch (op.kind) {
      case OneDnnPostOp::Kind::kAdd: {
        const float* a = addends[next++];
        if (op.addend == OneDnnPostOp::Addend::kFull) {
          for (int64_t e = 0; e < size; ++e) out[e] += a[e];
        } else if (op.addend == OneDnnPostOp::Addend::kLastDimension) {
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t j = 0; j < n; ++j) out[r * n + j] += a[j];
          }
        } else {
          for (int64_t e = 0; e < size; ++e) out[e] += a[0];
        }
        break;
      }
      case OneDnnPostOp::Kind::kRelu:
        for (int64_t e = 0; e < size; ++e) out[e] = Relu(out[e]);
        break;
      case OneDnnPostOp::Kind::kRelu6:
        for (int64_t e = 0; e < size; ++e) out[e] = Relu6(out[e]);
        break;
      case OneDnnPostOp::Kind::kGeluTanh:
#if defined(__x86_64__)
        if (CpuHasAvx512F()) {
          GeluTanhAvx512(out, size);
          break;
        }
#endif
        for (int64_t e = 0; e < size; ++e) {
          const float x = out[e];
          out[e] = 0.5f * x * (1.f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x)));
        }
        break;
      case OneDnnPostOp::Kind::kGeluErf:
        for (int64_t e = 0; e < size; ++e) out[e] = 0.5f * out[e] * (1.f + std::erf(out[e] * 0.70710678f));
        break;
      case OneDnnPostOp::Kind::kLinear: {
        const float alpha = static_cast<float>(op.alpha), beta = LinearPostOpBeta(op);
        // One rounding, as the one-pass loops above and oneDNN's own linear post-op compute it.
        for (int64_t e = 0; e < size; ++e) out[e] = std::fma(alpha, out[e], beta);
        break;
      }
      case OneDnnPostOp::Kind::kLogistic:
        for (int64_t e = 0; e < size; ++e) out[e] = 1.f / (1.f + std::exp(-out[e]));
        break;
    }
  }
}

const char* SmallProductIsa() { return CpuHasAvx2Fma() ? "avx2" : "scalar"; }

void SmallProduct(const SmallProductShape& s, const float* lhs, const float* rhs, float* out) {
  [[maybe_unused]] const bool avx2 = CpuHasAvx2Fma();
  // A transposed lhs's row is a column of what is stored: gathered into a contiguous row first.
  thread_local std::vector<float> row;
  if (s.lhs_transposed && static_cast<int64_t>(row.size()) < s.k) row.resize(s.k);
  for (int64_t b = 0; b < s.batch; ++b) {
    const float* a = lhs + b * s.m * s.k;
    const float* w = rhs + b * s.k * s.n;
    float* c = out + b * s.m * s.n;
    for (int64_t i = 0; i < s.m; ++i) {
      const float* a_row = a + i * s.k;
      if (s.lhs_transposed) {
        for (int64_t p = 0; p < s.k; ++p) row[p] = a[p * s.m + i];
        a_row = row.data();
      }
#if defined(__x86_64__)
      if (avx2) {
        RowAvx2(s, a_row, w, c + i * s.n);
        continue;
      }
#endif
      RowScalar(s, a_row, w, c + i * s.n);
    }
  }
}

}  // namespace xlens::runtime
