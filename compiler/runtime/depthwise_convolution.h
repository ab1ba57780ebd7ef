// Forward depthwise convolutions (one group per channel, one output per group) over large
// channels-last images as a vectorized stencil over the channels, instead of oneDNN's call. Each
// output channel is the window of its own input channel times its own 3-wide kernel: the loops
// keep 7 output positions by 64 channels in registers, read each input vector once per kernel
// row for the 3 outputs it reaches, take the weights (spatial..., 1, channels, as HWIO lies) from
// L1 as they lie, and write the output with streaming stores, which do not read its lines first.
// Such a call is bound by its bytes (a MobileNet layer of 8x56x56x128 moves 25.7 MB for 29M
// multiply-adds, 41% of the FMA peak at oneDNN's best); measured on that layer beside other work
// (per-pair ratios of one thread's CPU time, 100 alternating pairs in one process): oneDNN's
// brdgmm_dw 1.00, these loops with plain stores 1.19, with streaming stores 0.76.
#pragma once

#include <cstdint>
#include <optional>

#include "compiler/passes/onednn_convolution.h"

namespace xlens::runtime {

// A 2-D forward depthwise convolution over channels-last images: stride 1, no dilation, a
// kernel 3 wide and `kernel_height` high.
struct DepthwiseConvolution {
  int64_t images = 0, height = 0, width = 0, channels = 0;
  int64_t out_height = 0, out_width = 0, kernel_height = 0;
  int64_t pad_top = 0, pad_left = 0;
  // Elements between the weights of consecutive kernel rows and of consecutive taps in a row;
  // a tap's channels lie next to each other.
  int64_t weights_row_stride = 0, weights_tap_stride = 0;

  int64_t OutputElements() const { return images * out_height * out_width * channels; }
};

// Output elements from which a depthwise convolution runs in these loops: below them its images
// stay in the caches from one call to the next, where oneDNN's kernel keeps them and streaming
// stores would send the output to memory. Measured beside other work (xlens run, best of 300, 4
// alternating pairs against oneDNN's kernel): a 4 MiB output (8x32x32x128) 0.142 -> 0.161 ms,
// 6.1 MiB outputs 0.21-0.44 -> 0.25 ms (4x56x56x128) and 0.24-0.47 -> 0.25-0.36 ms
// (8x28x28x256). 0 takes every convolution the loops can run; tests lower it.
inline constexpr int64_t kDepthwiseMinOutputElements = int64_t{3} << 19;  // 6 MiB of f32
int64_t DepthwiseMinOutputElements();
void SetDepthwiseMinOutputElements(int64_t elements);

// The form of `c` the loops run: a forward convolution, one input and one output channel per
// group, channels a multiple of 64, two spatial dimensions, stride 1, no dilation, a kernel 3
// wide whose groups lie next to each other, and at least DepthwiseMinOutputElements outputs;
// nullopt otherwise, and on a CPU without AVX-512.
std::optional<DepthwiseConvolution> DepthwiseConvolutionOf(const OneDnnConvolution& c);

// Output rows [row_begin, row_end) of image `image`, all columns and channels. `output` must not
// overlap `input`. Streaming stores where `output` is 64-byte aligned (then fenced at the end).
void DepthwiseConvolutionRows(const DepthwiseConvolution& d, const float* input, const float* weights, float* output,
                              int64_t image, int64_t row_begin, int64_t row_end);

}  // namespace xlens::runtime
