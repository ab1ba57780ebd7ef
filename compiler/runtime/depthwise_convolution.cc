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
// T output positions from `ow0` by the 16 V channels from `c0` of output row `oh`, S columns of
// the input apart; the bias and activation applied in registers. A channel count that is not a
// multiple of 64 ends its rows with a block of 16, 32 or 48 channels (V of 1-3), the tile's
// positions kept.
template <int T, int V, int S>
__attribute__((target("avx512f"))) void Tile(const DepthwiseConvolution& d, const float* image, const float* weights,
                                             const float* bias, float* out, int64_t oh, int64_t ow0, int64_t c0,
                                             bool stream) {
  const int64_t channels = d.channels;
  __m512 acc[T][V];
#pragma GCC unroll 8
  for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[t][v] = _mm512_setzero_ps();
  }
  for (int64_t kh = 0; kh < d.kernel_height; ++kh) {
    const int64_t ih = oh * d.stride_height - d.pad_top + kh;
    if (ih < 0 || ih >= d.height) continue;
    const float* row = image + ih * d.width * channels + c0;
    const float* w = weights + kh * d.weights_row_stride + c0;
    const int64_t tap = d.weights_tap_stride;
    // Input column j of the window reaches the outputs t with j = S t + kw (taps 0 .. 2).
#pragma GCC unroll 16
    for (int j = 0; j < (T - 1) * S + 3; ++j) {
      const int64_t iw = ow0 * S - d.pad_left + j;
      if (iw < 0 || iw >= d.width) continue;
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        const __m512 x = _mm512_loadu_ps(row + iw * channels + 16 * v);
#pragma GCC unroll 3
        for (int kw = 0; kw < 3; ++kw) {
          if ((j - kw) % S != 0) continue;
          const int t = (j - kw) / S;
          if (j < kw || t >= T) continue;
          acc[t][v] = _mm512_fmadd_ps(x, _mm512_loadu_ps(w + kw * tap + 16 * v), acc[t][v]);
        }
      }
    }
  }
  // The sums start at +0, so none is -0 and adding the bias gives what the separate add would.
  if (d.bias) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) {
      const __m512 b = _mm512_loadu_ps(bias + c0 + 16 * v);
#pragma GCC unroll 8
      for (int t = 0; t < T; ++t) acc[t][v] = _mm512_add_ps(acc[t][v], b);
    }
  }
  if (d.activation != DepthwiseActivation::kNone) {
    // max(x, 0): x where x > 0 or x is a NaN (unordered), else +0 (also for -0); then for ReLU6
    // 6 where x > 6 (ordered: a NaN stays).
    const __m512 zero = _mm512_setzero_ps(), six = _mm512_set1_ps(6.0f);
    const bool relu6 = d.activation == DepthwiseActivation::kRelu6;
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) {
        __m512 x = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(acc[t][v], zero, _CMP_NLE_UQ), acc[t][v]);
        if (relu6) x = _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, six, _CMP_GT_OQ), six);
        acc[t][v] = x;
      }
    }
  }
  float* o = out + (oh * d.out_width + ow0) * channels + c0;
  if (stream) {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) _mm512_stream_ps(o + t * channels + 16 * v, acc[t][v]);
    }
  } else {
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) _mm512_storeu_ps(o + t * channels + 16 * v, acc[t][v]);
    }
  }
}

using TileFn = void (*)(const DepthwiseConvolution&, const float*, const float*, const float*, float*, int64_t,
                        int64_t, int64_t, bool);

// kTiles<V, S>[T]: the tile of T positions (1 .. kTilePositions).
template <int V, int S>
constexpr TileFn kTiles[kTilePositions + 1] = {nullptr,      Tile<1, V, S>, Tile<2, V, S>, Tile<3, V, S>,
                                               Tile<4, V, S>, Tile<5, V, S>, Tile<6, V, S>, Tile<7, V, S>};

template <int S>
TileFn TileFor(int64_t positions, int64_t vectors) {
  switch (vectors) {
    case 1: return kTiles<1, S>[positions];
    case 2: return kTiles<2, S>[positions];
    case 3: return kTiles<3, S>[positions];
    default: return kTiles<kTileVectors, S>[positions];
  }
}

// Each tile's channels innermost: the 3 input rows of 9 positions it reads (27 KB at 128
// channels; 15 at stride 2) stay in L1 for the next 64 channels.
void Rows(const DepthwiseConvolution& d, const float* image, const float* weights, const float* bias, float* out,
          int64_t row_begin, int64_t row_end, bool stream) {
  for (int64_t oh = row_begin; oh < row_end; ++oh) {
    for (int64_t ow = 0; ow < d.out_width; ow += kTilePositions) {
      const int64_t positions = std::min<int64_t>(kTilePositions, d.out_width - ow);
      for (int64_t c0 = 0; c0 < d.channels; c0 += kTileChannels) {
        const int64_t vectors = std::min<int64_t>(kTileVectors, (d.channels - c0) / 16);
        const TileFn tile = d.stride_width == 1 ? TileFor<1>(positions, vectors) : TileFor<2>(positions, vectors);
        tile(d, image, weights, bias, out, oh, ow, c0, stream);
      }
    }
  }
}
#endif  // __x86_64__

}  // namespace

int64_t DepthwiseMinOutputElements() { return depthwise_min_output_elements.load(); }
void SetDepthwiseMinOutputElements(int64_t elements) { depthwise_min_output_elements.store(elements); }

std::optional<DepthwiseConvolution> DepthwiseConvolutionOf(const OneDnnConvolution& c,
                                                           const std::vector<OneDnnPostOp>& post_ops) {
  if (!CpuHasAvx512F() || c.kind != OneDnnConvolution::Kind::kForward) return std::nullopt;
  if (c.groups != c.input_channels || c.output_channels != c.groups || c.groups % 16 != 0) return std::nullopt;
  if (c.src_spatial.size() != 2 || c.kernel_spatial[1] != 3 || c.group_stride != 1) return std::nullopt;
  if (c.strides[1] != 1 && c.strides[1] != 2) return std::nullopt;
  if (c.dilations[0] != 0 || c.dilations[1] != 0) return std::nullopt;
  DepthwiseConvolution d;
  size_t next = 0;
  if (next < post_ops.size() && post_ops[next].kind == OneDnnPostOp::Kind::kAdd &&
      post_ops[next].addend == OneDnnPostOp::Addend::kLastDimension) {
    d.bias = true;
    ++next;
  }
  if (next < post_ops.size() && post_ops[next].kind == OneDnnPostOp::Kind::kRelu) {
    d.activation = DepthwiseActivation::kRelu;
    ++next;
  } else if (next < post_ops.size() && post_ops[next].kind == OneDnnPostOp::Kind::kRelu6) {
    d.activation = DepthwiseActivation::kRelu6;
    ++next;
  }
  if (next != post_ops.size()) return std::nullopt;
  d.images = c.images;
  d.height = c.src_spatial[0];
  d.width = c.src_spatial[1];
  d.channels = c.input_channels;
  d.out_height = c.dst_spatial[0];
  d.out_width = c.dst_spatial[1];
  d.kernel_height = c.kernel_spatial[0];
  d.stride_height = c.strides[0];
  d.stride_width = c.strides[1];
  d.pad_top = c.padding_low[0];
  d.pad_left = c.padding_low[1];
  // weights_strides: output in group, input in group, kernel rows, kernel columns.
  d.weights_row_stride = c.weights_strides[2];
  d.weights_tap_stride = c.weights_strides[3];
  d.stream = d.OutputElements() >= DepthwiseMinOutputElements();
  if (!d.stream && d.activation == DepthwiseActivation::kNone) return std::nullopt;
  return d;
}

void DepthwiseConvolutionRows(const DepthwiseConvolution& d, const float* input, const float* weights,
                              const float* bias, float* output, int64_t image, int64_t row_begin, int64_t row_end) {
#if defined(__x86_64__)
  const float* in = input + image * d.height * d.width * d.channels;
  float* out = output + image * d.out_height * d.out_width * d.channels;
  const bool stream = d.stream && reinterpret_cast<uintptr_t>(output) % 64 == 0;
  Rows(d, in, weights, bias, out, row_begin, row_end, stream);
  if (stream) _mm_sfence();  // the streamed lines reach memory before whoever reads them next
#endif
}

}  // namespace xlens::runtime
