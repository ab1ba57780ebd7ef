// Forward depthwise convolutions (one group per channel, one output per group) over large
// channels-last images as a vectorized stencil over the channels, instead of oneDNN's call. Each
// output channel is the window of its own input channel times its own 3-wide kernel: the loops
// keep 7 output positions by 64 channels in registers (by 16, 32 or 48 at the end of a row whose
// channels are not a multiple of 64), read each input vector once per kernel row for the 3
// outputs it reaches (at stride 2, for the 1 or 2 it reaches), take the weights (spatial..., 1,
// channels, as HWIO lies) from L1 as they lie, add the bias and apply MobileNet's ReLU or ReLU6
// in registers, and write the output with streaming stores, which do not read its lines first.
// Such a call is bound by its bytes (a MobileNet layer of 8x56x56x128 moves 25.7 MB for 29M
// multiply-adds, 41% of the FMA peak at oneDNN's best); measured on that layer beside other work
// (per-pair ratios of one thread's CPU time, 100 alternating pairs in one process): oneDNN's
// brdgmm_dw 1.00, these loops with plain stores 1.19, with streaming stores 0.76.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/passes/onednn_convolution.h"
#include "compiler/passes/onednn_rewriter.h"

namespace xlens::runtime {

// What the loops apply to each output in registers before storing it, in this order: a bias
// (one value per channel) and an activation. ReLU and ReLU6 keep a NaN and give +0 for -0, as
// XLA's maximum and minimum (and the reference evaluator) do: min(max(x, 0), 6).
enum class DepthwiseActivation { kNone, kRelu, kRelu6 };

// A 2-D forward depthwise convolution over channels-last images: no dilation, a kernel 3 wide
// and `kernel_height` high, columns 1 or 2 apart (stride_width), rows any stride apart.
struct DepthwiseConvolution {
  int64_t images = 0, height = 0, width = 0, channels = 0;
  int64_t out_height = 0, out_width = 0, kernel_height = 0;
  int64_t stride_height = 1, stride_width = 1;
  int64_t pad_top = 0, pad_left = 0;
  // Elements between the weights of consecutive kernel rows and of consecutive taps in a row;
  // a tap's channels lie next to each other.
  int64_t weights_row_stride = 0, weights_tap_stride = 0;
  bool bias = false;  // a bias of `channels` values is added
  DepthwiseActivation activation = DepthwiseActivation::kNone;
  // Streaming stores (where the output is 64-byte aligned) rather than plain ones: for outputs of
  // DepthwiseMinOutputElements or more (see there).
  bool stream = true;

  int64_t OutputElements() const { return images * out_height * out_width * channels; }
};

// Output elements from which a depthwise convolution runs in these loops whatever its post-ops,
// with streaming stores; below them only one with a ReLU or ReLU6, with plain stores. Below them
// the images stay in the caches from one call to the next, where oneDNN's kernel keeps them and
// streaming stores would send the output to memory: measured beside other work (xlens run, best
// of 300, 4 alternating pairs against oneDNN's kernel), a 4 MiB output (8x32x32x128) 0.142 ->
// 0.161 ms, 6.1 MiB outputs 0.21-0.44 -> 0.25 ms (4x56x56x128) and 0.24-0.47 -> 0.25-0.36 ms
// (8x28x28x256). With plain stores the loops only tie oneDNN's kernel there (xlens run, 6
// alternating pairs of 100 runs, load 17: 8x32x32x128 median 0.352 -> 0.347 ms, lower in 3 of 6;
// 8x28x28x192 0.406 -> 0.410, 2 of 6), but where the call ends in an activation, which oneDNN's
// call leaves to a pass of the thunk's own after it (onednn_thunks.cc: no post-op of oneDNN's
// keeps a NaN), the loops apply it in registers and win every pair (JAX's depthwise + bias +
// ReLU6, 6 pairs of 60-100 runs, load 14-17: 1x7x7x960 0.021 -> 0.013 ms, 1x14x14x576 0.050 ->
// 0.034, 8x14x14x576 0.498 -> 0.350, 8x28x28x192 0.778 -> 0.460, 8x56x56x144 at stride 2 1.374
// -> 1.191, MobileNet v2's 28x28 block of 32 -> 192 -> 32 channels 10.2 -> 7.3 ms, 5 of 6). At
// 6 MiB and more, plain stores gained nothing where the next layer reads the output (MobileNet
// v2's blocks, 8 pairs of 30 runs: 14.5 MB 25.4 -> 26.1 ms, 9.6 MB 53.3 -> 56.8 ms). 0 takes
// every convolution the loops can run, with streaming stores; tests lower it.
inline constexpr int64_t kDepthwiseMinOutputElements = int64_t{3} << 19;  // 6 MiB of f32
int64_t DepthwiseMinOutputElements();
void SetDepthwiseMinOutputElements(int64_t elements);

// The form of `c` with the post-ops `post_ops` the loops run: a forward convolution, one input
// and one output channel per group, channels a multiple of 16, two spatial dimensions, stride 1
// or 2 across (any down), no dilation, a kernel 3 wide whose groups lie next to each other,
// post-ops that are a bias (an addend along the channels) and then a ReLU or ReLU6, either or
// both or none, and outputs enough (DepthwiseMinOutputElements); nullopt otherwise, and on a CPU
// without AVX-512. Each against oneDNN's brdgmm_dw with the bias as its post-op and the ReLU6 the
// thunk's pass after it, JAX's depthwise + bias + ReLU6 (xlens run, alternating pairs of 40-60
// runs, load 11-14), medians of the runs' medians and bests: 8x56x56x128 6.9 -> 2.1 ms (best
// 1.62 -> 0.87, lower in 8 of 8 pairs); 144 channels (8x56x56) 7.7 -> 3.9 (2.13 -> 1.04, 8 of
// 8); 32 channels (8x112x112) 10.8 -> 1.4 (1.93 -> 0.71, 8 of 8); stride 2, 96 channels
// (8x112x112 -> 56x56) 11.5 -> 8.1 (2.10 -> 1.59, 10 of 12).
std::optional<DepthwiseConvolution> DepthwiseConvolutionOf(const OneDnnConvolution& c,
                                                           const std::vector<OneDnnPostOp>& post_ops);

// Output rows [row_begin, row_end) of image `image`, all columns and channels, with the bias
// (`bias`, d.channels values, where d.bias) and the activation applied. `output` must not
// overlap `input`, `weights` or `bias`. Streaming stores where `output` is 64-byte aligned (then
// fenced at the end).
void DepthwiseConvolutionRows(const DepthwiseConvolution& d, const float* input, const float* weights,
                              const float* bias, float* output, int64_t image, int64_t row_begin, int64_t row_end);

}  // namespace xlens::runtime
