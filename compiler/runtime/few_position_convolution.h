// Forward convolutions with few output positions (the late layers of a network at batch 1: 4x4
// and 2x2 images) as one product of the windows' inputs by the weights as they lie. A kernel laid
// out spatial..., input, output (TensorFlow's HWIO, JAX's default) is already the row-major
// matrix [taps x inputs, outputs]; the input's windows, gathered in the same order (im2col), are
// [positions, taps x inputs]. oneDNN instead reorders variable weights into its blocked layout on
// every call, reading and writing them once more than the product itself and paying a call's
// fixed cost, which is most of the work on a few positions: measured on DenseNet121's 3x3 layers
// on 4x4 and 2x2 images, 20-25 us a call against 8 us for oneDNN alone on warm blocked weights.
// The product's loops read each weight once per call (a block of columns stays in L2 while
// every row is multiplied by it), which is what bounds a product of a few rows.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/passes/onednn_convolution.h"

namespace xlens::runtime {

// A forward convolution over channels-last images with weights (spatial..., input in group,
// output) row-major, as a product per group of its windows [positions, depth] by the weights
// [depth, outputs in group].
struct FewPositionConvolution {
  int64_t images = 0, input_channels = 0, output_channels = 0, groups = 1;
  std::vector<int64_t> src_spatial, dst_spatial, kernel_spatial, strides, dilations, padding_low;

  // Output positions over all images: the product's rows.
  int64_t Positions() const;
  // Kernel taps times input channels per group: the product's depth.
  int64_t Depth() const;
  // A 1x1 window of stride 1 without padding or groups reads the input as the product's lhs.
  bool ReadsInputInPlace() const;
  // Multiply-adds of one call.
  int64_t MultiplyAdds() const;
};

// The few-position form of `c` when it is a forward convolution whose weights lie spatial...,
// input, output, weigh at most kFewPositionWeightBytes, and that has at most FewPositionLimit()
// output positions and at least 8 outputs per group (a depthwise convolution has one: a
// matrix-vector loop, which oneDNN runs better).
inline constexpr int64_t kFewPositionWeightBytes = int64_t{1} << 20;
std::optional<FewPositionConvolution> FewPositionConvolutionOf(const OneDnnConvolution& c);

// Output positions up to which a forward convolution runs as a few-position product; read when
// a thunk is made. 0 holds every convolution to oneDNN; tests raise it to reach odd shapes.
int64_t FewPositionLimit();
void SetFewPositionLimit(int64_t positions);

// Whether the product runs on AVX-512 (else plain loops); a convolution takes the few-position
// form by default only with AVX-512.
bool FewPositionProductHasAvx512();

// The windows of every output position, [positions, groups, taps..., inputs in group] row-major,
// zeros where a window reaches into the padding.
void GatherWindows(const FewPositionConvolution& c, const float* input, float* windows);

// c[i, j] = sum_p a[i, p] * b[p, j] for rows [0, m) and columns [column_begin, column_end) of c,
// each matrix row-major with its own row stride (elements). Columns are taken in blocks of 32,
// each block's weights read once from memory for every row.
void FewRowProduct(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                   int64_t ldc, int64_t column_begin, int64_t column_end);

}  // namespace xlens::runtime
