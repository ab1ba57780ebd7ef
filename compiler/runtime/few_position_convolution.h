// Forward convolutions with few output positions (the late layers of a network at batch 1: 8x8,
// 4x4 and 2x2 images) as one product of the windows' inputs by the weights as they lie. A kernel
// laid out spatial..., input, output (TensorFlow's HWIO, JAX's default) is already the row-major
// matrix [taps x inputs, outputs]; each output position's window is a row of the other operand,
// read from the input in place (from a copy with its padding around it where windows reach past
// its edges), tap by tap. oneDNN instead reorders variable weights into its blocked layout on every
// call, reading and writing them once more than the product itself and paying a call's fixed
// cost, which is most of the work on a few positions: measured on DenseNet121's 3x3 layers on
// 4x4 and 2x2 images, 20-25 us a call against 8 us for oneDNN alone on warm blocked weights.
// The loops keep 6 positions by 64 outputs in registers over the whole window and read each
// weight once per call (a block of columns stays in cache while every position is multiplied by
// it), which is what bounds a product of a few positions.
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
  // Set by FewPositionConvolutionOf: the input as the windows read it (with its padding when
  // NeedsPadding), each position's window corner and each tap in elements of it.
  std::vector<int64_t> padded_spatial, position_offsets, tap_offsets;

  // Output positions over all images: the product's rows.
  int64_t Positions() const;
  // Kernel taps times input channels per group: the product's depth.
  int64_t Depth() const;
  // Multiply-adds of one call.
  int64_t MultiplyAdds() const;
  // Whether a window reaches past the input's edges (its padding), so the windows read a padded
  // copy (PadInput) instead of the input itself.
  bool NeedsPadding() const;
  // Elements of the padded input.
  int64_t PaddedSize() const;
  // Fills padded_spatial, position_offsets and tap_offsets from the geometry.
  void Prepare();
};

// The few-position form of `c` when it is a forward convolution whose weights lie spatial...,
// input, output, weigh less than kFewPositionWeightBytes, and that has at most FewPositionLimit()
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

// Copies `input` into `padded` (PaddedSize() elements) with zeros around it where windows reach.
void PadInput(const FewPositionConvolution& c, const float* input, float* padded);

// The columns the loops take at a time: 64, or 32 where a group has at most 32 outputs. Parts
// of a call over the pool begin on such blocks.
int64_t FewPositionColumnBlock(const FewPositionConvolution& c);

// Output rows (positions) [row_begin, row_end) and columns [column_begin, column_end) of group
// `group` (column 0 is the group's first output) from `input` (the padded copy when
// NeedsPadding) and the weights; `output` is [positions, outputs] row-major. Columns are taken in
// blocks of FewPositionColumnBlock, each block's weights read once from memory for every row.
void FewPositionProduct(const FewPositionConvolution& c, const float* input, const float* weights, float* output,
                        int64_t group, int64_t row_begin, int64_t row_end, int64_t column_begin,
                        int64_t column_end);

}  // namespace xlens::runtime
