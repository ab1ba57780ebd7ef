// The sliding-window geometry that the depthwise, 3-D convolution and 3-D pooling kernels share:
// their attrs (strides, dilations, ksize, padding, data_format) read and checked as TensorFlow
// checks them, and the output sizes and paddings of TensorFlow's GetWindowedOutputSizeVerbose.
// Every geometry has three spatial dimensions, channels last: a 2-D op gets a leading depth of
// one, so that one set of loops serves both ranks. Channels-first tensors (NCHW, NCDHW) are
// transposed to channels last around the kernels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/support/status.h"

namespace xlens::graph::conv {

constexpr int kMaxSpatial = 3;

// The attrs of one op, spatial entries in (depth, rows, cols) order, padded to three.
struct WindowAttrs {
  int spatial = 2;              // the op's own number of spatial dimensions (2 or 3)
  bool channels_first = false;  // NCHW / NCDHW
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t ksize[kMaxSpatial] = {1, 1, 1};  // pooling only
  std::string padding;                     // SAME, VALID or EXPLICIT
  int64_t explicit_before[kMaxSpatial] = {0, 0, 0};
  int64_t explicit_after[kMaxSpatial] = {0, 0, 0};
};

// Reads strides, dilations (when present), ksize (`pooling`), padding, explicit_paddings and
// data_format of a `spatial`-d op. Errors are TensorFlow's sentences, without the node.
StatusOr<WindowAttrs> GetWindowAttrs(const AttrMap& attrs, const std::string& node, int spatial,
                                     bool pooling);

// One geometry, channels last: input [batch, in[0..2], in_depth], window k[0..2], output
// [batch, out[0..2], out_depth]. Unknown sizes (-1) give unknown outputs (shape functions).
struct WindowGeometry {
  int64_t batch = 0, in_depth = 0, out_depth = 0;
  int64_t in[kMaxSpatial] = {1, 1, 1};
  int64_t k[kMaxSpatial] = {1, 1, 1};
  int64_t out[kMaxSpatial] = {1, 1, 1};
  int64_t stride[kMaxSpatial] = {1, 1, 1};
  int64_t dilation[kMaxSpatial] = {1, 1, 1};
  int64_t pad_before[kMaxSpatial] = {0, 0, 0};
  int64_t pad_after[kMaxSpatial] = {0, 0, 0};

  int64_t in_positions() const { return in[0] * in[1] * in[2]; }
  int64_t out_positions() const { return out[0] * out[1] * out[2]; }
  int64_t window_size() const { return k[0] * k[1] * k[2]; }
};

// The geometry of `attrs` over an input of `input_dims` (the op's layout, rank spatial + 2) with
// the spatial window `window` (spatial entries in the op's order: the filter's or ksize's).
StatusOr<WindowGeometry> ComputeGeometry(const WindowAttrs& attrs,
                                         const std::vector<int64_t>& input_dims,
                                         const std::vector<int64_t>& window, int64_t out_depth);

// `dims` of the op's layout reordered to channels last (and back).
std::vector<int64_t> ToChannelsLast(const std::vector<int64_t>& dims, bool channels_first);
std::vector<int64_t> FromChannelsLast(const std::vector<int64_t>& dims, bool channels_first);
// The output dims [batch, spatial..., depth] of a geometry in the op's layout and rank.
std::vector<int64_t> OutputDims(const WindowAttrs& attrs, const WindowGeometry& g);

// The passes of a convolution kernel, by their operands: kForward (input, filter),
// kBackpropInput (input_sizes, filter, out_backprop), kBackpropFilter (input, filter_sizes,
// out_backprop).
enum class Pass { kForward, kBackpropInput, kBackpropFilter };

// A convolution's operands checked as TensorFlow's kernels check them: the attrs, the input and
// filter dims (read from input_sizes or filter_sizes in a backprop), the geometry, and the output
// dims (which out_backprop must have). The filter is [k..., in_depth, m] in the op's spatial
// order: m output channels, or in_depth * m for a depthwise convolution.
struct ConvOperands {
  WindowAttrs attrs;
  WindowGeometry g;
  std::vector<int64_t> input_dims, filter_dims, out_dims;
};
StatusOr<ConvOperands> GetConvOperands(const OpKernelContext& ctx, Pass pass, int spatial,
                                       bool depthwise);

// The shape function of a `spatial`-d convolution (filter as in GetConvOperands).
Status ConvShape(InferenceContext& c, int spatial, bool depthwise);

// The shape function of a backprop: its output shape is the value of its shape input
// (input_sizes, filter_sizes, orig_input_shape) when that is known.
Status ShapeFromSizesInput(InferenceContext& c, int input);

// Moves the channel dimension of a row-major [outer, channels, inner] array to the end
// ([outer, inner, channels]) or back; `n` elements in all.
template <typename C>
void ChannelsToLast(const C* src, C* dst, int64_t outer, int64_t channels, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const C* s = src + (o * channels + c) * inner;
      C* d = dst + o * inner * channels + c;
      for (int64_t i = 0; i < inner; ++i) d[i * channels] = s[i];
    }
}
template <typename C>
void ChannelsToFirst(const C* src, C* dst, int64_t outer, int64_t channels, int64_t inner) {
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const C* s = src + o * inner * channels + c;
      C* d = dst + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) d[i] = s[i * channels];
    }
}

}  // namespace xlens::graph::conv
