// Depthwise and 3-D convolutions with their backprops, as TensorFlow's conv_ops.cc and
// conv_op_helpers.cc lower them: one HLO convolution each. A depthwise filter [kh, kw, c, m]
// becomes [kh, kw, 1, c*m] with c feature groups. The input backprop convolves out_backprop,
// dilated by the strides, with the spatially reversed filter whose in/out features are exchanged
// (per group). The filter backprop convolves the input with out_backprop as the kernel, batch as
// the contracted feature; for the depthwise filter each channel is its own group, so the input
// is laid out [1, spatial..., c*n] (TensorFlow uses batch_group_count, which our HLO builder
// leaves out: the two are the same convolution). All paddings (SAME, VALID, EXPLICIT), strides,
// dilations and both data formats.
#include <fmt/format.h>

#include <numeric>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

// A convolution's attrs in terms of the operands' dimensions.
struct ConvAttrs {
  int spatial = 2;
  int64_t batch_dim = 0, feature_dim = 3;
  std::vector<int64_t> spatial_dims;             // of the input / output, in order
  std::vector<int64_t> strides, dilations;       // per spatial dimension
  std::string padding;
  std::vector<int64_t> explicit_low, explicit_high;
};

StatusOr<ConvAttrs> GetConvAttrs(const XlaOpKernelContext& ctx, int spatial) {
  ConvAttrs a;
  a.spatial = spatial;
  const int rank = spatial + 2;
  std::string format = spatial == 2 ? "NHWC" : "NDHWC";
  if (const graph::AttrValue* f = graph::FindAttr(ctx.attrs(), "data_format")) format = f->s();
  const bool channels_first = format == "NCHW" || format == "NCDHW";
  if (!channels_first && format != "NHWC" && format != "NDHWC")
    return ctx.Error(fmt::format("data_format '{}' is not supported", format));
  a.feature_dim = channels_first ? 1 : rank - 1;
  for (int i = 0; i < spatial; ++i) a.spatial_dims.push_back(channels_first ? 2 + i : 1 + i);
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.GetIntListAttr("strides"));
  std::vector<int64_t> dilations(rank, 1);
  if (graph::FindAttr(ctx.attrs(), "dilations") != nullptr) {
    ASSIGN_OR_RETURN(dilations, ctx.GetIntListAttr("dilations"));
  }
  if (static_cast<int>(strides.size()) != rank || static_cast<int>(dilations.size()) != rank)
    return ctx.Error(fmt::format("strides and dilations must have {} elements", rank));
  if (strides[0] != 1 || strides[a.feature_dim] != 1 || dilations[0] != 1 ||
      dilations[a.feature_dim] != 1) {
    return ctx.Error("strides and dilations in the batch and depth dimensions must be 1");
  }
  ASSIGN_OR_RETURN(a.padding, graph::GetStringAttr(ctx.attrs(), "padding", ctx.name()));
  std::vector<int64_t> explicit_paddings;
  if (a.padding == "EXPLICIT") {
    ASSIGN_OR_RETURN(explicit_paddings, ctx.GetIntListAttr("explicit_paddings"));
    if (static_cast<int>(explicit_paddings.size()) != 2 * rank)
      return ctx.Error(fmt::format("explicit_paddings must have {} elements", 2 * rank));
  } else if (a.padding != "SAME" && a.padding != "VALID") {
    return ctx.Error(fmt::format("padding '{}' is not supported", a.padding));
  }
  constexpr int64_t kLimit = int64_t{1} << 32;
  for (int64_t d : a.spatial_dims) {
    if (strides[d] < 1 || strides[d] > kLimit || dilations[d] < 1 || dilations[d] > kLimit)
      return ctx.Error("strides and dilations must be in [1, 2^32]");
    if (!explicit_paddings.empty() &&
        (explicit_paddings[2 * d] < 0 || explicit_paddings[2 * d] > kLimit ||
         explicit_paddings[2 * d + 1] < 0 || explicit_paddings[2 * d + 1] > kLimit))
      return ctx.Error("explicit_paddings must be in [0, 2^32]");
    a.strides.push_back(strides[d]);
    a.dilations.push_back(dilations[d]);
    a.explicit_low.push_back(explicit_paddings.empty() ? 0 : explicit_paddings[2 * d]);
    a.explicit_high.push_back(explicit_paddings.empty() ? 0 : explicit_paddings[2 * d + 1]);
  }
  return a;
}

struct Pad {
  int64_t low = 0, high = 0;
};

// TensorFlow's padding of spatial dimension i for an input of `in` elements and a window of `k`.
Pad PaddingOf(const ConvAttrs& a, int i, int64_t in, int64_t k) {
  if (a.padding == "VALID") return {};
  if (a.padding == "EXPLICIT") return {a.explicit_low[i], a.explicit_high[i]};
  const int64_t effective = (k - 1) * a.dilations[i] + 1;
  const int64_t out = (in + a.strides[i] - 1) / a.strides[i];
  const int64_t total = std::max<int64_t>((out - 1) * a.strides[i] + effective - in, 0);
  return {total / 2, total - total / 2};
}

// Whether `out` (out_backprop's dims) is the forward convolution's output for an input of `in`,
// a window of `k` (spatial) and `out_depth` features; an error naming both otherwise.
Status CheckOutBackprop(const XlaOpKernelContext& ctx, const ConvAttrs& a,
                        const std::vector<int64_t>& in, const std::vector<int64_t>& k,
                        int64_t out_depth, const std::vector<int64_t>& out) {
  std::vector<int64_t> want = in;
  want[a.feature_dim] = out_depth;
  for (int i = 0; i < a.spatial; ++i) {
    const int64_t d = a.spatial_dims[i];
    const Pad pad = PaddingOf(a, i, in[d], k[i]);
    const int64_t effective = (k[i] - 1) * a.dilations[i] + 1;
    want[d] = a.padding == "SAME" ? (in[d] + a.strides[i] - 1) / a.strides[i]
                                  : (in[d] + pad.low + pad.high - effective) / a.strides[i] + 1;
  }
  if (want == out) return OkStatus();
  return ctx.Error(fmt::format("out_backprop has shape {}, expected {}", graph::DimsToString(out),
                               graph::DimsToString(want)));
}

// The filter as a grouped convolution's kernel: depthwise [k..., c, m] -> [k..., 1, c*m].
StatusOr<HloInstruction*> GroupedFilter(XlaOpKernelContext& ctx, HloInstruction* filter,
                                        bool depthwise) {
  if (!depthwise) return filter;
  std::vector<int64_t> dims = filter->shape().dimensions();
  const size_t r = dims.size();
  dims[r - 1] *= dims[r - 2];
  dims[r - 2] = 1;
  LOWER_OR_RETURN(HloInstruction * reshaped, ctx, ctx.builder().Reshape(filter, dims));
  return reshaped;
}

Status CheckRanks(const XlaOpKernelContext& ctx, int rank, const std::vector<int64_t>& input,
                  const std::vector<int64_t>& filter, const std::vector<int64_t>* out) {
  if (static_cast<int>(input.size()) != rank || static_cast<int>(filter.size()) != rank ||
      (out != nullptr && static_cast<int>(out->size()) != rank)) {
    return ctx.Error(fmt::format("input, filter and out_backprop must be {}-dimensional", rank));
  }
  return OkStatus();
}

template <int kSpatial, bool kDepthwise>
Status LowerConvForward(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * filter, ctx.Input(1));
  ASSIGN_OR_RETURN(ConvAttrs a, GetConvAttrs(ctx, kSpatial));
  const std::vector<int64_t> in = input->shape().dimensions();
  RETURN_IF_ERROR(CheckRanks(ctx, kSpatial + 2, in, filter->shape().dimensions(), nullptr));
  ASSIGN_OR_RETURN(filter, GroupedFilter(ctx, filter, kDepthwise));
  const std::vector<int64_t>& f = filter->shape().dimensions();
  const int64_t filter_in = f[kSpatial], in_depth = in[a.feature_dim];
  if (filter_in == 0 || in_depth % filter_in != 0) {
    return ctx.Error(fmt::format("input depth {} is not a multiple of the filter depth {}",
                                 in_depth, filter_in));
  }
  Window window;
  ConvolutionDimensionNumbers d;
  d.input_batch_dimension = d.output_batch_dimension = a.batch_dim;
  d.input_feature_dimension = d.output_feature_dimension = a.feature_dim;
  d.input_spatial_dimensions = d.output_spatial_dimensions = a.spatial_dims;
  d.kernel_input_feature_dimension = kSpatial;
  d.kernel_output_feature_dimension = kSpatial + 1;
  for (int i = 0; i < kSpatial; ++i) {
    d.kernel_spatial_dimensions.push_back(i);
    const Pad pad = PaddingOf(a, i, in[a.spatial_dims[i]], f[i]);
    WindowDimension w;
    w.size = f[i];
    w.stride = a.strides[i];
    w.window_dilation = a.dilations[i];
    w.padding_low = pad.low;
    w.padding_high = pad.high;
    window.dimensions.push_back(w);
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx,
                  ctx.builder().Convolution(input, filter, window, d, in_depth / filter_in));
  ctx.SetOutput(0, y);
  return OkStatus();
}

template <int kSpatial, bool kDepthwise>
Status LowerConvBackpropInput(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> in, ctx.ConstantInputAsIntVector(0));
  ASSIGN_OR_RETURN(HloInstruction * filter, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(2));
  ASSIGN_OR_RETURN(ConvAttrs a, GetConvAttrs(ctx, kSpatial));
  const std::vector<int64_t> out = dy->shape().dimensions();
  RETURN_IF_ERROR(CheckRanks(ctx, kSpatial + 2, in, filter->shape().dimensions(), &out));
  ASSIGN_OR_RETURN(filter, GroupedFilter(ctx, filter, kDepthwise));
  std::vector<int64_t> f = filter->shape().dimensions();
  const int64_t filter_in = f[kSpatial], filter_out = f[kSpatial + 1];
  const int64_t in_depth = in[a.feature_dim];
  if (filter_in == 0 || in_depth % filter_in != 0) {
    return ctx.Error(fmt::format("input depth {} is not a multiple of the filter depth {}",
                                 in_depth, filter_in));
  }
  const int64_t groups = in_depth / filter_in;
  RETURN_IF_ERROR(CheckOutBackprop(ctx, a, in, std::vector<int64_t>(f.begin(), f.begin() + kSpatial),
                                   filter_out, out));
  HloBuilder& b = ctx.builder();
  if (groups > 1) {
    // [k..., fin, out] -> [k..., fin, G, out/G] -> [k..., G, fin, out/G] -> [k..., G*fin, out/G]:
    // each group's slice of output features becomes that group's kernel input features.
    std::vector<int64_t> split(f.begin(), f.begin() + kSpatial);
    split.insert(split.end(), {filter_in, groups, filter_out / groups});
    LOWER_OR_RETURN(filter, ctx, b.Reshape(filter, split));
    std::vector<int64_t> perm(kSpatial);
    std::iota(perm.begin(), perm.end(), 0);
    perm.insert(perm.end(), {kSpatial + 1, kSpatial, kSpatial + 2});
    LOWER_OR_RETURN(filter, ctx, b.Transpose(filter, perm));
    std::vector<int64_t> merged(f.begin(), f.begin() + kSpatial);
    merged.insert(merged.end(), {groups * filter_in, filter_out / groups});
    LOWER_OR_RETURN(filter, ctx, b.Reshape(filter, merged));
  }
  Window window;
  for (int i = 0; i < kSpatial; ++i) {
    const int64_t dim = a.spatial_dims[i];
    const int64_t stride = a.strides[i], dilation = a.dilations[i];
    const int64_t effective = (f[i] - 1) * dilation + 1;
    const Pad pad = PaddingOf(a, i, in[dim], f[i]);
    WindowDimension w;
    w.size = f[i];
    w.window_dilation = dilation;
    w.base_dilation = stride;
    w.padding_low = effective - 1 - pad.low;
    // Whatever the forward convolution's last window left out of the input gets no gradient.
    const int64_t covered = (out[dim] - 1) * stride + effective;
    w.padding_high = effective - 1 - pad.high + (in[dim] + pad.low + pad.high - covered);
    window.dimensions.push_back(w);
  }
  std::vector<int64_t> spatial(kSpatial);
  std::iota(spatial.begin(), spatial.end(), 0);
  LOWER_OR_RETURN(HloInstruction * flipped, ctx, b.Reverse(filter, spatial));
  ConvolutionDimensionNumbers d;
  d.input_batch_dimension = d.output_batch_dimension = a.batch_dim;
  d.input_feature_dimension = d.output_feature_dimension = a.feature_dim;
  d.input_spatial_dimensions = d.output_spatial_dimensions = a.spatial_dims;
  d.kernel_spatial_dimensions = spatial;
  d.kernel_input_feature_dimension = kSpatial + 1;
  d.kernel_output_feature_dimension = kSpatial;
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Convolution(dy, flipped, window, d, groups));
  ctx.SetOutput(0, y);
  return OkStatus();
}

template <int kSpatial, bool kDepthwise>
Status LowerConvBackpropFilter(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> f, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(2));
  ASSIGN_OR_RETURN(ConvAttrs a, GetConvAttrs(ctx, kSpatial));
  const std::vector<int64_t> in = input->shape().dimensions();
  const std::vector<int64_t> out = dy->shape().dimensions();
  RETURN_IF_ERROR(CheckRanks(ctx, kSpatial + 2, in, f, &out));
  const int64_t in_depth = in[a.feature_dim], batch = in[a.batch_dim];
  if (!kDepthwise && f[kSpatial] != in_depth) {
    return ctx.Error(fmt::format("input depth {} differs from the filter depth {}", in_depth,
                                 f[kSpatial]));
  }
  if (kDepthwise && f[kSpatial] != in_depth) {
    return ctx.Error(fmt::format("input depth {} differs from the depthwise filter's {}",
                                 in_depth, f[kSpatial]));
  }
  RETURN_IF_ERROR(CheckOutBackprop(ctx, a, in, std::vector<int64_t>(f.begin(), f.begin() + kSpatial),
                                   kDepthwise ? f[kSpatial] * f[kSpatial + 1] : f[kSpatial + 1],
                                   out));
  Window window;
  for (int i = 0; i < kSpatial; ++i) {
    const int64_t dim = a.spatial_dims[i];
    const int64_t stride = a.strides[i], dilation = a.dilations[i];
    const Pad pad = PaddingOf(a, i, in[dim], f[i]);
    WindowDimension w;
    w.size = out[dim];
    w.stride = dilation;
    w.window_dilation = stride;
    w.padding_low = pad.low;
    // Sized so that exactly f[i] window positions fit: the rest of the input is unused.
    w.padding_high = (f[i] - 1) * dilation + (out[dim] - 1) * stride + 1 - in[dim] - pad.low;
    window.dimensions.push_back(w);
  }
  HloBuilder& b = ctx.builder();
  ConvolutionDimensionNumbers d;
  // out_backprop is the kernel: its batch contracted, its features the output's.
  d.kernel_input_feature_dimension = a.batch_dim;
  d.kernel_output_feature_dimension = a.feature_dim;
  d.kernel_spatial_dimensions = a.spatial_dims;
  for (int i = 0; i < kSpatial; ++i) d.output_spatial_dimensions.push_back(i);
  if (!kDepthwise) {
    d.input_batch_dimension = a.feature_dim;
    d.input_feature_dimension = a.batch_dim;
    d.input_spatial_dimensions = a.spatial_dims;
    d.output_batch_dimension = kSpatial;
    d.output_feature_dimension = kSpatial + 1;
    LOWER_OR_RETURN(HloInstruction * y, ctx, b.Convolution(input, dy, window, d, 1));
    ctx.SetOutput(0, y);
    return OkStatus();
  }
  // The input as [1, spatial..., c*n]: channel c's group is its n images.
  std::vector<int64_t> perm(a.spatial_dims.begin(), a.spatial_dims.end());
  perm.push_back(a.feature_dim);
  perm.push_back(a.batch_dim);
  LOWER_OR_RETURN(HloInstruction * moved, ctx, b.Transpose(input, perm));
  std::vector<int64_t> lhs_dims = {1};
  for (int64_t dim : a.spatial_dims) lhs_dims.push_back(in[dim]);
  lhs_dims.push_back(in_depth * batch);
  LOWER_OR_RETURN(HloInstruction * lhs, ctx, b.Reshape(moved, lhs_dims));
  d.input_batch_dimension = 0;
  d.input_feature_dimension = kSpatial + 1;
  d.input_spatial_dimensions.clear();
  for (int i = 0; i < kSpatial; ++i) d.input_spatial_dimensions.push_back(1 + i);
  d.output_batch_dimension = kSpatial;
  d.output_feature_dimension = kSpatial + 1;
  // Output [k..., 1, c*m] -> [k..., c, m].
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Convolution(lhs, dy, window, d, in_depth));
  LOWER_OR_RETURN(y, ctx, b.Reshape(y, f));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterConvXlaOps(XlaOpRegistry& registry) {
  registry.Register("DepthwiseConv2dNative", LowerConvForward<2, true>);
  registry.Register("DepthwiseConv2dNativeBackpropInput", LowerConvBackpropInput<2, true>);
  registry.Register("DepthwiseConv2dNativeBackpropFilter", LowerConvBackpropFilter<2, true>);
  registry.Register("Conv3D", LowerConvForward<3, false>);
  registry.Register("Conv3DBackpropInputV2", LowerConvBackpropInput<3, false>);
  registry.Register("Conv3DBackpropFilterV2", LowerConvBackpropFilter<3, false>);
}

}  // namespace xlens::cluster
