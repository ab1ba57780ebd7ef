#include "compiler/runtime/depthwise_convolution.h"

#include "compiler/support/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace xlens::runtime {
namespace {

std::atomic<int64_t> depthwise_min_output_elements{kDepthwiseMinOutputElements};

// Output positions and 16-channel vectors a tile keeps in registers: 28 sums, the input vector
// and a weight loaded with each multiply-add. Measured on 8x56x56x128 against 14 positions by 16
// channels and 8 by 32 (one thread's CPU time, per-pair ratios to oneDNN's kernel): 0.76 against
// 1.04 and 0.89; 4 positions by 128 channels, whose weights do not stay in registers, 1.21.
constexpr int kTilePositions = 7, kTileVectors = 4;
constexpr int64_t kTileChannels = 16 * kTileVectors;

#if defined(__x86_64__)
// T output positions from `ow0` by the 64 channels from `c0` of output row `oh`.
template <int T, bool kStream>
__attribute__((target("avx512f"))) void Tile(const DepthwiseConvolution& d, const float* image, const float* weights,
                                             float* out, int64_t oh, int64_t ow0, int64_t c0) {
  constexpr int V = kTileVectors;
  const int64_t channels = d.channels;
  __m512 acc[T][V];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[t][v] = _mm512_setzero_ps();
  }
  for (int64_t kh = 0; kh < d.kernel_height; ++kh) {
    const int64_t ih = oh - d.pad_top + kh;
    if (ih < 0 || ih >= d.height) continue;
    const float* row = image + ih * d.width * channels + c0;
    const float* w = weights + kh * d.weights_row_stride + c0;
    const int64_t tap = d.weights_tap_stride;
    // Input column j of the window reaches outputs j - 2 .. j (taps 2 .. 0).
#pragma GCC unroll 10
    for (int j = 0; j < T + 2; ++j) {
      const int64_t iw = ow0 - d.pad_left + j;
      if (iw < 0 || iw >= d.width) continue;
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const __m512 x = _mm512_loadu_ps(row + iw * channels + 16 * v);
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
          const int t = j - kw;
          if (t < 0 || t >= T) continue;
          acc[t][v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + kw * tap + 16 * v), acc[t][v]);
        }
      }
    }
  }
  float* o = out + (oh * d.out_width + ow0) * channels + c0;
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      if constexpr (kStream) {
        _mm512_stream_ps(o + t * channels + 16 * v, acc[t][v]);
      } else {
        _mm512_storeu_ps(o + t * channels + 16 * v, acc[t][v]);
      }
    }
  }
}

using TileFn = void (*)(const DepthwiseConvolution&, const float*, const float*, float*, int64_t, int64_t, int64_t);

template <bool kStream>
constexpr TileFn kTiles[kTilePositions + 1] = {nullptr,
                                               Tile<1, kStream>,
                                               Tile<2, kStream>,
                                               Tile<3, kStream>,
                                               Tile<4, kStream>,
                                               Tile<5, kStream>,
                                               Tile<6, kStream>,
                                               Tile<7, kStream>};

// Each tile's channels innermost: the 3 input rows of 9 positions it reads (27 KB at 128
// channels) stay in L1 for the next 64 channels.
template <bool kStream>
void Rows(const DepthwiseConvolution& d, const float* image, const float* weights, float* out, int64_t row_begin,
          int64_t row_end) {
  for (int64_t oh = row_begin; oh < row_end; ++oh) {
    for (int64_t ow = 0; ow < d.out_width; ow += kTilePositions) {
      const TileFn tile = kTiles<kStream>[std::min<int64_t>(kTilePositions, d.out_width - ow)];
      for (int64_t c0 = 0; c0 < d.channels; c0 += kTileChannels) tile(d, image, weights, out, oh, ow, c0);
    }
  }
}
#endif  // __x86_64__

}  // namespace

int64_t DepthwiseMinOutputElements() { return depthwise_min_output_elements.load(); }
void SetDepthwiseMinOutputElements(int64_t elements) { depthwise_min_output_elements.store(elements); }

std::optional<DepthwiseConvolution> DepthwiseConvolutionOf(const OneDnnConvolution& c) {
  if (!CpuHasAvx512F() || c.kind != OneDnnConvolution::Kind::kForward) return std::nullopt;
  if (c.groups != c.input_channels || c.output_channels != c.groups || c.groups % kTileChannels != 0) {
    return std::nullopt;
  }
  if (c.src_spatial.size() != 2 || c.kernel_spatial[1] != 3 || c.group_stride != 1) return std::nullopt;
  for (size_t i = 0; i < 2; ++i) {
    if (c.strides[i] != 1 || c.dilations[i] != 0) return std::nullopt;
  }
  DepthwiseConvolution d;
  d.images = c.images;
  d.height = c.src_spatial[0];
  d.width = c.src_spatial[1];
  d.channels = c.input_channels;
  d.out_height = c.dst_spatial[0];
  d.out_width = c.dst_spatial[1];
  d.kernel_height = c.kernel_spatial[0];
  d.pad_top = c.padding_low[0];
  d.pad_left = c.padding_low[1];
  // weights_strides: output in group, input in group, kernel rows, kernel columns.
  d.weights_row_stride = c.weights_strides[2];
  d.weights_tap_stride = c.weights_strides[3];
  if (d.OutputElements() < DepthwiseMinOutputElements()) return std::nullopt;
  return d;
}

void DepthwiseConvolutionRows(const DepthwiseConvolution& d, const float* input, const float* weights, float* output,
                              int64_t image, int64_t row_begin, int64_t row_end) {
#if defined(__x86_64__)
  const float* in = input + image * d.height * d.width * d.channels;
  float* out = output + image * d.out_height * d.out_width * d.channels;
  if (reinterpret_cast<uintptr_t>(output) % 64 == 0) {
    Rows<true>(d, in, weights, out, row_begin, row_end);
    _mm_sfence();  // the streamed lines reach memory before whoever reads them next
  } else {
    Rows<false>(d, in, weights, out, row_begin, row_end);
  }
#endif
}

}  // namespace xlens::runtime
