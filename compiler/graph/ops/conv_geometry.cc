#include "compiler/graph/ops/conv_geometry.h"

#include <algorithm>

#include "compiler/graph/partial_shape.h"

namespace xlens::graph::conv {

namespace {

std::string Str(int64_t v) { return std::to_string(v); }

// TensorFlow's GetWindowedOutputSizeVerbose for one dimension.
Status WindowedOutputSize(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                          const std::string& padding, int64_t explicit_before,
                          int64_t explicit_after, int64_t* out, int64_t* before,
                          int64_t* after) {
  *out = -1;
  *before = *after = 0;
  if (in < 0 || k < 0) return OkStatus();
  // Sizes from a graph are anything: refuse what int64 arithmetic below cannot hold.
  constexpr int64_t kLimit = int64_t{1} << 48;
  if (in > kLimit || k > kLimit || dilation > kLimit || stride > kLimit ||
      explicit_before > kLimit || explicit_after > kLimit ||
      (k > 1 && dilation > kLimit / (k - 1))) {
    return Status::Error("Window sizes out of range: input " + Str(in) + ", window " + Str(k) +
                         ", dilation " + Str(dilation) + ", stride " + Str(stride));
  }
  const int64_t effective = (k - 1) * dilation + 1;
  if (padding == "VALID") {
    *out = (in - effective + stride) / stride;
  } else if (padding == "SAME") {
    *out = (in + stride - 1) / stride;
    const int64_t needed = std::max<int64_t>(0, (*out - 1) * stride + effective - in);
    *before = needed / 2;
    *after = needed - *before;
  } else {
    *out = (in + explicit_before + explicit_after - effective + stride) / stride;
    *before = explicit_before;
    *after = explicit_after;
  }
  if (*out < 0) {
    return Status::Error("Computed output size would be negative: " + Str(*out) +
                         " [input_size: " + Str(in) + ", effective_filter_size: " +
                         Str(effective) + ", stride: " + Str(stride) + "]");
  }
  return OkStatus();
}

}  // namespace

StatusOr<WindowAttrs> GetWindowAttrs(const AttrMap& attrs, const std::string& node, int spatial,
                                     bool pooling) {
  WindowAttrs a;
  a.spatial = spatial;
  const int rank = spatial + 2;
  const int offset = kMaxSpatial - spatial;  // 2-D ops leave depth at 1
  if (const AttrValue* f = FindAttr(attrs, "data_format")) {
    const std::string& format = f->s();
    a.channels_first = format == "NCHW" || format == "NCDHW";
    if (!a.channels_first && format != "NHWC" && format != "NDHWC")
      return Status::Error("Invalid data format: " + format);
  }
  // Position of spatial dimension i (0-based among the op's own) in the op's layout.
  auto axis = [&](int i) { return a.channels_first ? 2 + i : 1 + i; };
  const int channel_axis = a.channels_first ? 1 : rank - 1;
  const std::string dim_word = spatial == 2 ? "4" : "5";

  ASSIGN_OR_RETURN(std::vector<int64_t> strides, GetIntListAttr(attrs, "strides", node));
  if (static_cast<int>(strides.size()) != rank)
    return Status::Error("Sliding window strides field must specify " + dim_word + " dimensions");
  if (strides[0] != 1 || strides[channel_axis] != 1) {
    return Status::Error(
        "Current implementation does not yet support strides in the batch and depth "
        "dimensions.");
  }
  for (int i = 0; i < spatial; ++i) {
    a.stride[offset + i] = strides[axis(i)];
    if (a.stride[offset + i] <= 0)
      return Status::Error("Stride must be > 0, but got " + Str(a.stride[offset + i]));
  }
  if (pooling) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ksize, GetIntListAttr(attrs, "ksize", node));
    if (static_cast<int>(ksize.size()) != rank)
      return Status::Error("Sliding window ksize field must specify " + dim_word + " dimensions");
    if (ksize[0] != 1) return Status::Error("Pooling is not yet supported on the batch dimension.");
    if (ksize[channel_axis] != 1)
      return Status::Error("Pooling is not yet supported on the depth dimension.");
    for (int i = 0; i < spatial; ++i) {
      a.ksize[offset + i] = ksize[axis(i)];
      if (a.ksize[offset + i] <= 0) return Status::Error("Sliding window ksize must be positive.");
    }
  }
  if (FindAttr(attrs, "dilations") != nullptr) {
    ASSIGN_OR_RETURN(std::vector<int64_t> dilations, GetIntListAttr(attrs, "dilations", node));
    if (static_cast<int>(dilations.size()) != rank) {
      return Status::Error("Sliding window dilations field must specify " + dim_word +
                           " dimensions");
    }
    if (dilations[0] != 1 || dilations[channel_axis] != 1) {
      return Status::Error(
          "Current implementation does not yet support dilations in the batch and depth "
          "dimensions.");
    }
    for (int i = 0; i < spatial; ++i) {
      a.dilation[offset + i] = dilations[axis(i)];
      if (a.dilation[offset + i] <= 0)
        return Status::Error("Dilated rates should be larger than 0.");
    }
  }
  ASSIGN_OR_RETURN(a.padding, GetStringAttr(attrs, "padding", node));
  if (a.padding == "EXPLICIT") {
    ASSIGN_OR_RETURN(std::vector<int64_t> p, GetIntListAttr(attrs, "explicit_paddings", node));
    if (static_cast<int>(p.size()) != 2 * rank) {
      return Status::Error("explicit_paddings attribute must contain " + Str(2 * rank) +
                           " values, but got: " + Str(static_cast<int64_t>(p.size())));
    }
    for (int64_t v : p)
      if (v < 0) return Status::Error("All elements of explicit_paddings must be nonnegative");
    if (p[0] != 0 || p[1] != 0 || p[2 * channel_axis] != 0 || p[2 * channel_axis + 1] != 0)
      return Status::Error("Nonzero explicit padding in the batch or depth dimensions is not supported");
    for (int i = 0; i < spatial; ++i) {
      a.explicit_before[offset + i] = p[2 * axis(i)];
      a.explicit_after[offset + i] = p[2 * axis(i) + 1];
    }
  } else if (a.padding != "SAME" && a.padding != "VALID") {
    return Status::Error("Invalid padding: " + a.padding);
  }
  return a;
}

std::vector<int64_t> ToChannelsLast(const std::vector<int64_t>& dims, bool channels_first) {
  if (!channels_first || dims.size() < 3) return dims;
  std::vector<int64_t> r = {dims[0]};
  r.insert(r.end(), dims.begin() + 2, dims.end());
  r.push_back(dims[1]);
  return r;
}

std::vector<int64_t> FromChannelsLast(const std::vector<int64_t>& dims, bool channels_first) {
  if (!channels_first || dims.size() < 3) return dims;
  std::vector<int64_t> r = {dims[0], dims.back()};
  r.insert(r.end(), dims.begin() + 1, dims.end() - 1);
  return r;
}

StatusOr<WindowGeometry> ComputeGeometry(const WindowAttrs& attrs,
                                         const std::vector<int64_t>& input_dims,
                                         const std::vector<int64_t>& window, int64_t out_depth) {
  const int spatial = attrs.spatial;
  const int offset = kMaxSpatial - spatial;
  if (static_cast<int>(input_dims.size()) != spatial + 2) {
    return Status::Error("input must be " + Str(spatial + 2) + "-dimensional: " +
                         DimsToString(input_dims));
  }
  if (static_cast<int>(window.size()) != spatial)
    return Status::Error("the window must have " + Str(spatial) + " dimensions");
  const std::vector<int64_t> in = ToChannelsLast(input_dims, attrs.channels_first);
  WindowGeometry g;
  g.batch = in[0];
  g.in_depth = in[spatial + 1];
  g.out_depth = out_depth;
  for (int i = 0; i < kMaxSpatial; ++i) {
    g.stride[i] = attrs.stride[i];
    g.dilation[i] = attrs.dilation[i];
  }
  for (int i = 0; i < spatial; ++i) {
    const int d = offset + i;
    g.in[d] = in[1 + i];
    g.k[d] = window[i];
    RETURN_IF_ERROR(WindowedOutputSize(g.in[d], g.k[d], g.dilation[d], g.stride[d],
                                       attrs.padding, attrs.explicit_before[d],
                                       attrs.explicit_after[d], &g.out[d], &g.pad_before[d],
                                       &g.pad_after[d]));
  }
  return g;
}

std::vector<int64_t> OutputDims(const WindowAttrs& attrs, const WindowGeometry& g) {
  std::vector<int64_t> dims = {g.batch};
  for (int i = kMaxSpatial - attrs.spatial; i < kMaxSpatial; ++i) dims.push_back(g.out[i]);
  dims.push_back(g.out_depth);
  return FromChannelsLast(dims, attrs.channels_first);
}

StatusOr<ConvOperands> GetConvOperands(const OpKernelContext& ctx, Pass pass, int spatial,
                                       bool depthwise) {
  ConvOperands ops;
  auto attrs = GetWindowAttrs(ctx.attrs(), ctx.name(), spatial, /*pooling=*/false);
  if (!attrs.ok()) return ctx.Error(attrs.status().message());
  ops.attrs = *attrs;
  for (int i : {0, 1}) {
    const bool is_sizes =
        (i == 0 && pass == Pass::kBackpropInput) || (i == 1 && pass == Pass::kBackpropFilter);
    if (is_sizes && ctx.input(i).rank() != 1) {
      return ctx.Error(std::string(i == 0 ? "input_sizes" : "filter_sizes") +
                       " must be 1-dimensional, got " + DimsToString(ctx.input(i).dims()));
    }
    (i == 0 ? ops.input_dims : ops.filter_dims) =
        is_sizes ? ctx.input(i).AsInt64Vector() : ctx.input(i).dims();
  }
  const size_t rank = static_cast<size_t>(spatial) + 2;
  if (ops.input_dims.size() != rank)
    return ctx.Error("input must be " + Str(rank) + "-dimensional" + DimsToString(ops.input_dims));
  if (ops.filter_dims.size() != rank) {
    return ctx.Error("filter must be " + Str(rank) + "-dimensional: " +
                     DimsToString(ops.filter_dims));
  }
  const std::vector<int64_t>& f = ops.filter_dims;
  const int64_t in_depth = ops.input_dims[ops.attrs.channels_first ? 1 : spatial + 1];
  if (in_depth != f[spatial]) {
    return ctx.Error("input and filter must have the same depth: " + Str(in_depth) + " vs " +
                     Str(f[spatial]));
  }
  const std::vector<int64_t> window(f.begin(), f.begin() + spatial);
  auto g = ComputeGeometry(ops.attrs, ops.input_dims, window,
                           depthwise ? f[spatial] * f[spatial + 1] : f[spatial + 1]);
  if (!g.ok()) return ctx.Error(g.status().message());
  ops.g = *g;
  ops.out_dims = OutputDims(ops.attrs, ops.g);
  if (pass != Pass::kForward && ctx.input(2).dims() != ops.out_dims) {
    return ctx.Error("out_backprop has shape " + DimsToString(ctx.input(2).dims()) +
                     ", expected " + DimsToString(ops.out_dims));
  }
  return ops;
}

Status ConvShape(InferenceContext& c, int spatial, bool depthwise) {
  PartialShape in, filter;
  RETURN_IF_ERROR(c.WithRank(0, spatial + 2, &in));
  RETURN_IF_ERROR(c.WithRank(1, spatial + 2, &filter));
  auto attrs = GetWindowAttrs(c.attrs(), c.node_name(), spatial, /*pooling=*/false);
  if (!attrs.ok()) return c.Error(attrs.status().message());
  const int64_t in_depth = in.dim(attrs->channels_first ? 1 : spatial + 1);
  const int64_t filter_depth = filter.dim(spatial), m = filter.dim(spatial + 1);
  if (in_depth >= 0 && filter_depth >= 0 && in_depth != filter_depth) {
    return c.Error("Dimensions must be equal, but are " + Str(in_depth) + " and " +
                   Str(filter_depth));
  }
  // TensorFlow's DepthwiseConv2DNativeShape: output depth in_depth * multiplier.
  const int64_t out_depth = !depthwise ? m : filter_depth >= 0 && m >= 0 ? filter_depth * m : -1;
  std::vector<int64_t> window;
  for (int i = 0; i < spatial; ++i) window.push_back(filter.dim(i));
  auto g = ComputeGeometry(*attrs, in.dims(), window, out_depth);
  if (!g.ok()) return c.Error(g.status().message());
  c.set_output(0, PartialShape(OutputDims(*attrs, *g)));
  return OkStatus();
}

Status ShapeFromSizesInput(InferenceContext& c, int input) {
  auto shape = c.MakeShapeFromShapeTensor(input);
  if (!shape.ok()) return c.Error(shape.status().message());
  c.set_output(0, *shape);
  return OkStatus();
}

}  // namespace xlens::graph::conv
