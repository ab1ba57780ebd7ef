#include "compiler/runtime/few_position_convolution.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>

namespace xlens::runtime {
namespace {

bool HasAvx512() {
#if defined(__x86_64__)
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
#else
  return false;
#endif
}

// 64 positions: an 8x8 image at batch 1. Measured on DenseNet121 (AVX-512, one core): its 3x3
// layers ran 2-3x faster in this form on 4x4 and 2x2 images and no slower on 8x8 ones; past that
// oneDNN's blocked kernels, with the weights' reorder shared among more positions, are faster.
std::atomic<int64_t> few_position_limit{HasAvx512() ? 64 : 0};

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

void RowsScalar(int64_t rows, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                int64_t ldc, int64_t j0, int64_t j1) {
  for (int64_t i = 0; i < rows; ++i) {
    float* out = c + i * ldc;
    std::fill(out + j0, out + j1, 0.f);
    for (int64_t p = 0; p < k; ++p) {
      const float x = a[i * lda + p];
      const float* w = b + p * ldb;
      for (int64_t j = j0; j < j1; ++j) out[j] += x * w[j];
    }
  }
}

#if defined(__x86_64__)
// R rows by up to 32 columns (the masks say which) over the whole depth, kept in 2R registers;
// each weight row of the block is loaded once for the R rows. With `packed`, the block's weights
// are also stored there, 32 to a row, for the next rows to read contiguously: rows of the weights
// that lie a power of two apart (2 KB for 512 outputs) fall into few cache sets, and a block read
// from them is evicted before the next group of rows comes back to it.
template <int R>
__attribute__((target("avx512f"))) void BlockAvx512(int64_t k, const float* a, int64_t lda, const float* b,
                                                    int64_t ldb, float* c, int64_t ldc, __mmask16 m0,
                                                    __mmask16 m1, float* packed) {
  __m512 lo[R], hi[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) lo[r] = hi[r] = _mm512_setzero_ps();
  for (int64_t p = 0; p < k; ++p) {
    const float* w = b + p * ldb;
    const __m512 w0 = _mm512_maskz_loadu_ps(m0, w);
    const __m512 w1 = _mm512_maskz_loadu_ps(m1, w + 16);
    if (packed != nullptr) {
      _mm512_storeu_ps(packed + p * 32, w0);
      _mm512_storeu_ps(packed + p * 32 + 16, w1);
    }
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + p]);
      lo[r] = _mm512_fmadd_ps(x, w0, lo[r]);
      hi[r] = _mm512_fmadd_ps(x, w1, hi[r]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(c + r * ldc, m0, lo[r]);
    _mm512_mask_storeu_ps(c + r * ldc + 16, m1, hi[r]);
  }
}

using BlockFn = void (*)(int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t, __mmask16,
                         __mmask16, float*);
constexpr int kRowsPerBlock = 8;
constexpr BlockFn kBlocks[kRowsPerBlock + 1] = {nullptr,          BlockAvx512<1>, BlockAvx512<2>,
                                                BlockAvx512<3>, BlockAvx512<4>, BlockAvx512<5>,
                                                BlockAvx512<6>, BlockAvx512<7>, BlockAvx512<8>};

__mmask16 Mask(int64_t lanes) {
  return lanes >= 16 ? static_cast<__mmask16>(0xffff) : lanes <= 0 ? 0 : static_cast<__mmask16>((1u << lanes) - 1);
}
#endif  // __x86_64__

}  // namespace

int64_t FewPositionConvolution::Positions() const { return images * Product(dst_spatial); }
int64_t FewPositionConvolution::Depth() const { return Product(kernel_spatial) * (input_channels / groups); }
int64_t FewPositionConvolution::MultiplyAdds() const { return Positions() * Depth() * output_channels; }

bool FewPositionConvolution::ReadsInputInPlace() const {
  for (size_t d = 0; d < kernel_spatial.size(); ++d) {
    if (kernel_spatial[d] != 1 || strides[d] != 1 || padding_low[d] != 0 || src_spatial[d] != dst_spatial[d]) {
      return false;
    }
  }
  return groups == 1;
}

int64_t FewPositionLimit() { return few_position_limit.load(); }
void SetFewPositionLimit(int64_t positions) { few_position_limit.store(positions); }
bool FewPositionProductHasAvx512() { return HasAvx512(); }

std::optional<FewPositionConvolution> FewPositionConvolutionOf(const OneDnnConvolution& c) {
  if (c.kind != OneDnnConvolution::Kind::kForward || c.groups < 1 || c.input_channels % c.groups != 0 ||
      c.output_channels % c.groups != 0 || c.output_channels / c.groups < 8 ||
      c.weights_strides.size() != c.kernel_spatial.size() + 2) {
    return std::nullopt;
  }
  FewPositionConvolution f;
  f.images = c.images;
  f.input_channels = c.input_channels;
  f.output_channels = c.output_channels;
  f.groups = c.groups;
  f.src_spatial = c.src_spatial;
  f.dst_spatial = c.dst_spatial;
  f.kernel_spatial = c.kernel_spatial;
  f.strides = c.strides;
  f.dilations = c.dilations;
  f.padding_low = c.padding_low;
  if (f.Positions() > FewPositionLimit() || f.Positions() < 1) return std::nullopt;
  // Weights past a core's L2 (ResNet50's late layers, 1-9 MB) are read from memory in blocks of
  // columns whose rows lie kilobytes apart, an order the prefetchers follow worse than oneDNN's:
  // measured there, its 1x1 and 3x3 layers on 2x2 and 4x4 images ran 10-30% slower here.
  if (f.Depth() * f.output_channels * static_cast<int64_t>(sizeof(float)) > kFewPositionWeightBytes) {
    return std::nullopt;
  }
  // The weights must be the row-major array (spatial..., input in group, output): output stride
  // 1, input stride the outputs, each spatial dimension the product of those inside it; a
  // dimension of size 1 may have any stride. The groups lie side by side in the outputs.
  const int64_t inputs = c.input_channels / c.groups, outputs = c.output_channels / c.groups;
  if (c.weights_strides[0] != 1) return std::nullopt;
  if (inputs > 1 && c.weights_strides[1] != c.output_channels) return std::nullopt;
  int64_t expected = inputs * c.output_channels;
  for (int64_t d = static_cast<int64_t>(c.kernel_spatial.size()) - 1; d >= 0; --d) {
    if (c.kernel_spatial[d] > 1 && c.weights_strides[d + 2] != expected) return std::nullopt;
    expected *= c.kernel_spatial[d];
  }
  if (c.groups > 1 && c.group_stride != outputs) return std::nullopt;
  return f;
}

void GatherWindows(const FewPositionConvolution& c, const float* input, float* windows) {
  const int64_t n = static_cast<int64_t>(c.dst_spatial.size());
  const int64_t inputs = c.input_channels / c.groups, taps = Product(c.kernel_spatial);
  const int64_t depth = taps * inputs, row = c.groups * depth;
  // Element strides of the input's spatial dimensions (channels-last).
  std::vector<int64_t> stride(n);
  int64_t s = c.input_channels;
  for (int64_t d = n - 1; d >= 0; --d) {
    stride[d] = s;
    s *= c.src_spatial[d];
  }
  const int64_t image_size = s;
  std::vector<int64_t> out(n, 0), tap(n, 0);
  float* w = windows;
  for (int64_t b = 0; b < c.images; ++b) {
    const float* image = input + b * image_size;
    std::fill(out.begin(), out.end(), 0);
    for (int64_t position = 0; position < c.Positions() / c.images; ++position, w += row) {
      std::fill(tap.begin(), tap.end(), 0);
      for (int64_t t = 0; t < taps; ++t) {
        int64_t offset = 0;
        bool inside = true;
        for (int64_t d = 0; d < n; ++d) {
          const int64_t x = out[d] * c.strides[d] - c.padding_low[d] + tap[d] * (c.dilations[d] + 1);
          inside &= x >= 0 && x < c.src_spatial[d];
          offset += x * stride[d];
        }
        for (int64_t g = 0; g < c.groups; ++g) {
          float* to = w + g * depth + t * inputs;
          if (inside) {
            std::memcpy(to, image + offset + g * inputs, inputs * sizeof(float));
          } else {
            std::fill(to, to + inputs, 0.f);
          }
        }
        for (int64_t d = n - 1; d >= 0 && ++tap[d] == c.kernel_spatial[d]; --d) tap[d] = 0;
      }
      for (int64_t d = n - 1; d >= 0 && ++out[d] == c.dst_spatial[d]; --d) out[d] = 0;
    }
  }
}

void FewRowProduct(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                   int64_t ldc, int64_t column_begin, int64_t column_end) {
#if defined(__x86_64__)
  if (HasAvx512()) {
    // Block by block of 32 columns; within a block every group of rows reads the block's
    // weights, which the first group brought into cache. Where the weights' rows lie 1 KB or
    // more apart, the first group packs them for the others (measured: 20% off a 16x1024x512
    // product; no gain on rows 512 bytes apart, a loss on dense ones).
    thread_local std::vector<float> packed;
    const bool pack = m > kRowsPerBlock && ldb >= 256;
    if (pack && static_cast<int64_t>(packed.size()) < k * 32) packed.resize(k * 32);
    for (int64_t j = column_begin; j < column_end; j += 32) {
      const int64_t width = std::min<int64_t>(32, column_end - j);
      const __mmask16 m0 = Mask(width), m1 = Mask(width - 16);
      for (int64_t i = 0; i < m; i += kRowsPerBlock) {
        const int64_t rows = std::min<int64_t>(kRowsPerBlock, m - i);
        if (i > 0 && pack) {
          kBlocks[rows](k, a + i * lda, lda, packed.data(), 32, c + i * ldc + j, ldc, m0, m1, nullptr);
        } else {
          kBlocks[rows](k, a + i * lda, lda, b + j, ldb, c + i * ldc + j, ldc, m0, m1,
                        pack ? packed.data() : nullptr);
        }
      }
    }
    return;
  }
#endif
  RowsScalar(m, k, a, lda, b, ldb, c, ldc, column_begin, column_end);
}

}  // namespace xlens::runtime
