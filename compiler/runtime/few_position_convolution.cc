#include "compiler/runtime/few_position_convolution.h"

#include "compiler/support/cpu_features.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <atomic>
#include <cstring>

namespace xlens::runtime {
namespace {

// 64 positions: an 8x8 image at batch 1. Measured on DenseNet121 (AVX-512, under load): its 3x3
// layers ran 2.3x faster in this form on 2x2 images, 1.6x on 4x4 and 1.15x on 8x8 ones; on its
// 16x16 ones (256 positions) 6% slower than oneDNN's blocked kernels, whose one reorder of the
// weights is shared among more positions.
std::atomic<int64_t> few_position_limit{CpuHasAvx512F() ? 64 : 0};

int64_t Product(const std::vector<int64_t>& v) {
  int64_t p = 1;
  for (int64_t x : v) p *= x;
  return p;
}

// Row `origin` of the windows times the weights' columns [j0, j1) of group g, into `out`.
void RowScalar(const FewPositionConvolution& c, const float* origin, const float* b, float* out, int64_t j0,
               int64_t j1) {
  const int64_t inputs = c.input_channels / c.groups, n = c.output_channels;
  std::fill(out + j0, out + j1, 0.f);
  for (size_t t = 0; t < c.tap_offsets.size(); ++t) {
    for (int64_t p = 0; p < inputs; ++p) {
      const float x = origin[c.tap_offsets[t] + p];
      const float* w = b + (static_cast<int64_t>(t) * inputs + p) * n;
      for (int64_t j = j0; j < j1; ++j) out[j] += x * w[j];
    }
  }
}

#if defined(__x86_64__)
// R positions by up to 16 V columns (the masks say which) over the whole window, kept in R V
// registers; each weight row of the block is loaded once for the R positions, whose windows
// start at `origins` and whose taps lie `taps` apart there. With `packed`, the block's weights
// are also stored there, 16 V to a row, for the next positions to read contiguously: rows of the
// weights that lie a power of two apart (2 KB for 512 outputs) fall into few cache sets, and a
// block read from them is evicted before the next group of positions comes back to it.
template <int R, int V>
__attribute__((target("avx512f"))) void BlockAvx512(int64_t tap_count, const int64_t* taps, int64_t inputs,
                                                    const float* const* origins, const float* b, int64_t ldb,
                                                    float* c, int64_t ldc, const __mmask16* masks, float* packed) {
  __m512 acc[R][V];
  const float* row[R];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) acc[r][v] = _mm512_setzero_ps();
  }
  const float* w = b;
  for (int64_t t = 0; t < tap_count; ++t) {
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) row[r] = origins[r] + taps[t];
    for (int64_t p = 0; p < inputs; ++p, w += ldb) {
      __m512 wv[V];
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) wv[v] = _mm512_maskz_loadu_ps(masks[v], w + 16 * v);
      if (packed != nullptr) {
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) _mm512_storeu_ps(packed + 16 * v, wv[v]);
        packed += 16 * V;
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const __m512 x = _mm512_set1_ps(row[r][p]);
#pragma GCC unroll 4
        for (int v = 0; v < V; ++v) acc[r][v] = _mm512_fmadd_ps(x, wv[v], acc[r][v]);
      }
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, masks[v], acc[r][v]);
  }
}

using BlockFn = void (*)(int64_t, const int64_t*, int64_t, const float* const*, const float*, int64_t, float*,
                         int64_t, const __mmask16*, float*);
// Blocks of 32 columns by up to 8 positions, or of 64 by up to 6 (24 of the 32 registers hold
// sums either way). The wider block reads each weight row in longer runs, which the prefetchers
// follow better from memory: measured on DenseNet121's 1x1 layers' shapes with their weights
// cold (16x640x128 and 4x800x128 products), 22-35% faster than 32 columns.
constexpr int kNarrowRows = 8, kWideRows = 6;
constexpr BlockFn kNarrowBlocks[kNarrowRows + 1] = {
    nullptr,           BlockAvx512<1, 2>, BlockAvx512<2, 2>, BlockAvx512<3, 2>, BlockAvx512<4, 2>,
    BlockAvx512<5, 2>, BlockAvx512<6, 2>, BlockAvx512<7, 2>, BlockAvx512<8, 2>};
constexpr BlockFn kWideBlocks[kWideRows + 1] = {nullptr,           BlockAvx512<1, 4>, BlockAvx512<2, 4>,
                                                BlockAvx512<3, 4>, BlockAvx512<4, 4>, BlockAvx512<5, 4>,
                                                BlockAvx512<6, 4>};

__mmask16 Mask(int64_t lanes) {
  return lanes >= 16 ? static_cast<__mmask16>(0xffff) : lanes <= 0 ? 0 : static_cast<__mmask16>((1u << lanes) - 1);
}
#endif  // __x86_64__

}  // namespace

int64_t FewPositionConvolution::Positions() const { return images * Product(dst_spatial); }
int64_t FewPositionConvolution::Depth() const { return Product(kernel_spatial) * (input_channels / groups); }
int64_t FewPositionConvolution::MultiplyAdds() const { return Positions() * Depth() * output_channels; }

bool FewPositionConvolution::NeedsPadding() const { return padded_spatial != src_spatial; }
int64_t FewPositionConvolution::PaddedSize() const { return images * Product(padded_spatial) * input_channels; }

void FewPositionConvolution::Prepare() {
  const int64_t n = static_cast<int64_t>(dst_spatial.size());
  // The padded input spans every element a window reads, from -padding_low on; a window's
  // corner at output position o is o * stride there.
  padded_spatial.clear();
  for (int64_t d = 0; d < n; ++d) {
    const int64_t reach = (dst_spatial[d] - 1) * strides[d] + (kernel_spatial[d] - 1) * (dilations[d] + 1) + 1;
    padded_spatial.push_back(std::max(reach, padding_low[d] + src_spatial[d]));
  }
  std::vector<int64_t> stride(n);
  int64_t s = input_channels;
  for (int64_t d = n - 1; d >= 0; --d) {
    stride[d] = s;
    s *= padded_spatial[d];
  }
  const int64_t image = s;
  position_offsets.clear();
  std::vector<int64_t> at(n, 0);
  for (int64_t b = 0; b < images; ++b) {
    for (int64_t position = 0; position < Product(dst_spatial); ++position) {
      int64_t offset = b * image;
      for (int64_t d = 0; d < n; ++d) offset += at[d] * strides[d] * stride[d];
      position_offsets.push_back(offset);
      for (int64_t d = n - 1; d >= 0 && ++at[d] == dst_spatial[d]; --d) at[d] = 0;
    }
  }
  tap_offsets.clear();
  std::fill(at.begin(), at.end(), 0);
  for (int64_t t = 0; t < Product(kernel_spatial); ++t) {
    int64_t offset = 0;
    for (int64_t d = 0; d < n; ++d) offset += at[d] * (dilations[d] + 1) * stride[d];
    tap_offsets.push_back(offset);
    for (int64_t d = n - 1; d >= 0 && ++at[d] == kernel_spatial[d]; --d) at[d] = 0;
  }
}

int64_t FewPositionColumnBlock(const FewPositionConvolution& c) {
  return c.output_channels / c.groups > 32 ? 64 : 32;
}

int64_t FewPositionLimit() { return few_position_limit.load(); }
void SetFewPositionLimit(int64_t positions) { few_position_limit.store(positions); }
bool FewPositionProductHasAvx512() { return CpuHasAvx512F(); }

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
  // Weights of a core's L2 or more (ResNet50's late layers, 1-9 MB; Xception's 728-channel 1x1
  // layers, 2 MB) are read from memory in blocks of columns whose rows lie kilobytes apart, an
  // order the prefetchers follow worse than oneDNN's: measured there, ResNet50's 1x1 layers of
  // exactly 1 MiB on 4x4 images 5% slower here, Xception's 2 MB ones 20%.
  if (f.Depth() * f.output_channels * static_cast<int64_t>(sizeof(float)) >= kFewPositionWeightBytes) {
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
  f.Prepare();
  return f;
}

void PadInput(const FewPositionConvolution& c, const float* input, float* padded) {
  const int64_t n = static_cast<int64_t>(c.src_spatial.size());
  std::fill(padded, padded + c.PaddedSize(), 0.f);
  // Input row by input row (its last spatial dimension, all channels), each to where it lies
  // among the padding.
  const int64_t row = c.src_spatial[n - 1] * c.input_channels;
  std::vector<int64_t> stride(n);
  int64_t s = c.input_channels;
  for (int64_t d = n - 1; d >= 0; --d) {
    stride[d] = s;
    s *= c.padded_spatial[d];
  }
  const int64_t rows = c.images * Product(c.src_spatial) / c.src_spatial[n - 1];
  std::vector<int64_t> at(n, 0);
  for (int64_t r = 0, b = 0; r < rows; ++r) {
    int64_t offset = b * s + c.padding_low[n - 1] * stride[n - 1];
    for (int64_t d = 0; d + 1 < n; ++d) offset += (at[d] + c.padding_low[d]) * stride[d];
    std::memcpy(padded + offset, input + r * row, row * sizeof(float));
    int64_t d = n - 2;
    for (; d >= 0 && ++at[d] == c.src_spatial[d]; --d) at[d] = 0;
    if (d < 0) ++b;
  }
}

void FewPositionProduct(const FewPositionConvolution& c, const float* input, const float* weights, float* output,
                        int64_t group, int64_t row_begin, int64_t row_end, int64_t column_begin,
                        int64_t column_end) {
  const int64_t inputs = c.input_channels / c.groups, outputs = c.output_channels / c.groups;
  const int64_t n = c.output_channels;
  const float* b = weights + group * outputs;
  const float* in = input + group * inputs;
  float* out = output + group * outputs;
#if defined(__x86_64__)
  if (CpuHasAvx512F()) {
    // Block by block of columns; within a block every group of positions reads the block's
    // weights, which the first group brought into cache. Where the weights' rows lie 1 KB or
    // more apart, the first group packs them for the others (measured: 20% off a 16x1024x512
    // product; no gain on rows 512 bytes apart, a loss on dense ones).
    const int64_t width = FewPositionColumnBlock(c);
    const int64_t block_rows = width == 64 ? kWideRows : kNarrowRows;
    const BlockFn* blocks = width == 64 ? kWideBlocks : kNarrowBlocks;
    thread_local std::vector<float> packed;
    const bool pack = row_end - row_begin > block_rows && n >= 256;
    if (pack && static_cast<int64_t>(packed.size()) < c.Depth() * width) packed.resize(c.Depth() * width);
    const int64_t tap_count = static_cast<int64_t>(c.tap_offsets.size());
    for (int64_t j = column_begin; j < column_end; j += width) {
      __mmask16 masks[4];
      for (int v = 0; v < 4; ++v) masks[v] = Mask(std::min(width, column_end - j) - 16 * v);
      for (int64_t i = row_begin; i < row_end; i += block_rows) {
        const int rows = static_cast<int>(std::min(block_rows, row_end - i));
        const float* origins[kNarrowRows];
        for (int r = 0; r < rows; ++r) origins[r] = in + c.position_offsets[i + r];
        if (i > row_begin && pack) {
          blocks[rows](tap_count, c.tap_offsets.data(), inputs, origins, packed.data(), width, out + i * n + j, n,
                       masks, nullptr);
        } else {
          blocks[rows](tap_count, c.tap_offsets.data(), inputs, origins, b + j, n, out + i * n + j, n, masks,
                       pack ? packed.data() : nullptr);
        }
      }
    }
    return;
  }
#endif
  for (int64_t i = row_begin; i < row_end; ++i) {
    RowScalar(c, in + c.position_offsets[i], b, out + i * n, column_begin, column_end);
  }
}

}  // namespace xlens::runtime
