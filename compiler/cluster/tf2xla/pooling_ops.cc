// Pooling and 2-D convolutions with their gradients, as TensorFlow's pooling_ops.cc and
// conv_ops.cc lower them. The poolings are one lowering for both ranks (MaxPool over rank 4,
// MaxPool3D over rank 5, ...): MaxPool and AvgPool are reduce-windows (AvgPool divides by the
// number of input elements each window covers, so SAME padding does not count), MaxPoolGrad a
// select-and-scatter (the first maximum of a window gets its gradient), AvgPoolGrad the transpose
// of the averaging reduce-window, MaxPool3DGradGrad a pair of packed reduce-windows. Conv2D is one
// convolution, and its two gradients convolutions with the roles of the operands exchanged.
#include <fmt/format.h>

#include <limits>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

struct Padding {
  int64_t low = 0, high = 0;
};

// TensorFlow's GetWindowedOutputSize padding for one dimension: VALID pads nothing; SAME pads so
// that the output has ceil(in / stride) elements, the odd element at the end.
StatusOr<Padding> WindowPadding(const std::string& padding, int64_t in, int64_t window,
                                int64_t stride, int64_t dilation) {
  const int64_t effective = (window - 1) * dilation + 1;
  if (padding == "VALID") return Padding{};
  if (padding == "SAME") {
    const int64_t out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((out - 1) * stride + effective - in, 0);
    return Padding{total / 2, total - total / 2};
  }
  return Error(fmt::format("padding '{}' is not supported by this lowering", padding));
}

struct Layout2D {
  int64_t batch, feature, spatial[2];
};

StatusOr<Layout2D> DataLayout(const XlaOpKernelContext& ctx) {
  std::string format = "NHWC";
  if (const graph::AttrValue* a = graph::FindAttr(ctx.attrs(), "data_format")) format = a->s();
  if (format == "NHWC") return Layout2D{0, 3, {1, 2}};
  if (format == "NCHW") return Layout2D{0, 1, {2, 3}};
  return ctx.Error(fmt::format("data_format '{}' is not supported", format));
}

StatusOr<std::string> PaddingAttr(const XlaOpKernelContext& ctx) {
  return graph::GetStringAttr(ctx.attrs(), "padding", ctx.name());
}

// The window of a pooling op over an input of `dims` (rank 4, or 5 for the 3-D poolings): ksize
// and strides are given in the input's own layout, so either data format is one window.
StatusOr<Window> PoolWindow(const XlaOpKernelContext& ctx, const std::vector<int64_t>& dims,
                            size_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> ksize, ctx.GetIntListAttr("ksize"));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.GetIntListAttr("strides"));
  ASSIGN_OR_RETURN(std::string padding, PaddingAttr(ctx));
  if (dims.size() != rank || ksize.size() != rank || strides.size() != rank) {
    return ctx.Error(fmt::format("{}pooling needs a rank-{} input and {} ksize and strides",
                                 rank == 5 ? "3-D " : "", rank, rank));
  }
  Window window;
  for (size_t i = 0; i < rank; ++i) {
    if (ksize[i] <= 0 || strides[i] <= 0 || ksize[i] > (int64_t{1} << 32) ||
        strides[i] > (int64_t{1} << 32)) {
      return ctx.Error("ksize and strides must be in [1, 2^32]");
    }
    WindowDimension d;
    d.size = ksize[i];
    d.stride = strides[i];
    auto p = WindowPadding(padding, dims[i], ksize[i], strides[i], 1);
    if (!p.ok()) return ctx.Error(p.status().message());
    d.padding_low = p->low;
    d.padding_high = p->high;
    window.dimensions.push_back(d);
  }
  return window;
}

double LowestValue(PrimitiveType type) {
  if (IsFloatingPointType(type)) return -std::numeric_limits<double>::infinity();
  if (IsSignedIntegralType(type)) return -std::ldexp(1.0, BitWidth(type) - 1);
  return 0;
}

Status LowerMaxPool(XlaOpKernelContext& ctx, size_t rank) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(Window window, PoolWindow(ctx, x->shape().dimensions(), rank));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * init, ctx, b.ScalarConstant(type, LowestValue(type)));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.ReduceWindow(x, init, window, HloOpcode::kMaximum));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// How many input elements each window covers (padding excluded), as an array of `dims`' windows;
// `zero` is a scalar 0 of the element type.
StatusOr<HloInstruction*> WindowCounts(HloBuilder& b, HloInstruction* zero,
                                       const std::vector<int64_t>& dims, const Window& window) {
  ASSIGN_OR_RETURN(HloInstruction * ones, b.FullConstant(zero->shape().element_type(), 1, dims));
  return b.ReduceWindow(ones, zero, window, HloOpcode::kAdd);
}

// Sum over each window divided by how many input elements the window covers.
Status LowerAvgPool(XlaOpKernelContext& ctx, size_t rank) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const std::vector<int64_t>& dims = x->shape().dimensions();
  ASSIGN_OR_RETURN(Window window, PoolWindow(ctx, dims, rank));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * sum, ctx, b.ReduceWindow(x, zero, window, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * counts, ctx, WindowCounts(b, zero, dims, window));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Binary(HloOpcode::kDivide, sum, counts));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// The first maximum of each window gets its gradient (MaxPool3DGrad's input may be of another
// float type than the gradient: it is converted).
Status LowerMaxPoolGrad(XlaOpKernelContext& ctx, size_t rank) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(2));
  ASSIGN_OR_RETURN(Window window, PoolWindow(ctx, input->shape().dimensions(), rank));
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(input, ctx, b.Convert(input, grad->shape().element_type()));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(grad->shape().element_type(), 0));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.SelectAndScatter(input, grad, zero, window));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// Each output gradient shared evenly by the input elements its window covered: the gradient
// divided by the window's count, spread back by a sum over windows of the stride-dilated,
// padded gradient (the transpose of the forward reduce-window).
Status LowerAvgPoolGrad(XlaOpKernelContext& ctx, size_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(0));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(1));
  ASSIGN_OR_RETURN(Window window, PoolWindow(ctx, dims, rank));
  const std::vector<int64_t> out = grad->shape().dimensions();
  if (out.size() != rank) return ctx.Error(fmt::format("grad must be {}-dimensional", rank));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = grad->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * counts, ctx, WindowCounts(b, zero, dims, window));
  LOWER_OR_RETURN(HloInstruction * shared, ctx, b.Binary(HloOpcode::kDivide, grad, counts));
  PaddingConfig pad;
  Window spread;
  for (size_t i = 0; i < dims.size(); ++i) {
    const WindowDimension& w = window.dimensions[i];
    const int64_t covered = (out[i] - 1) * w.stride + w.size;
    PaddingDimension p;
    p.interior_padding = w.stride - 1;
    p.edge_padding_low = w.size - 1 - w.padding_low;
    p.edge_padding_high =
        w.size - 1 - w.padding_high + (dims[i] + w.padding_low + w.padding_high - covered);
    pad.dimensions.push_back(p);
    WindowDimension s;
    s.size = w.size;
    spread.dimensions.push_back(s);
  }
  LOWER_OR_RETURN(HloInstruction * padded, ctx, b.Pad(shared, zero, pad));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.ReduceWindow(padded, zero, spread, HloOpcode::kAdd));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// MaxPool3DGradGrad as TensorFlow's XLA lowers it (MaxPoolGradGradOp, float32 only): each output
// takes the second-order gradient at its window's maximum. A reduce-window cannot carry the
// maximum's position, so the input rounded to bfloat16 is packed into the upper 16 bits of a
// 32-bit word and half of the gradient's bits into the lower 16; the window's maximum of the
// packed words (compared as floats) brings that half along, and two passes give both halves.
// Inputs equal at bfloat16 precision within a window are ties, as in TensorFlow's lowering.
Status LowerMaxPool3DGradGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(2));
  if (input->shape().element_type() != PrimitiveType::F32 ||
      grad->shape().element_type() != PrimitiveType::F32) {
    return ctx.Error("MaxPool3DGradGrad compiles for float32 only, as TensorFlow's XLA lowering");
  }
  const std::vector<int64_t>& dims = input->shape().dimensions();
  if (grad->shape().dimensions() != dims) {
    return ctx.Error("the gradient's shape must be the input's");
  }
  ASSIGN_OR_RETURN(Window window, PoolWindow(ctx, dims, 5));
  HloBuilder& b = ctx.builder();
  const auto sixteen = [&](HloInstruction* like) {
    return b.FullConstant(PrimitiveType::S32, 16, like->shape().dimensions());
  };
  LOWER_OR_RETURN(HloInstruction * in_bf16, ctx, b.Convert(input, PrimitiveType::BF16));
  LOWER_OR_RETURN(HloInstruction * in_f32, ctx, b.Convert(in_bf16, PrimitiveType::F32));
  LOWER_OR_RETURN(HloInstruction * in_hi, ctx, b.BitcastConvert(in_f32, PrimitiveType::S32));
  LOWER_OR_RETURN(HloInstruction * bp, ctx, b.BitcastConvert(grad, PrimitiveType::S32));
  LOWER_OR_RETURN(HloInstruction * s16, ctx, sixteen(bp));
  LOWER_OR_RETURN(HloInstruction * bp_hi, ctx, b.Binary(HloOpcode::kShiftRightLogical, bp, s16));
  LOWER_OR_RETURN(HloInstruction * bp_shifted, ctx, b.Binary(HloOpcode::kShiftLeft, bp, s16));
  LOWER_OR_RETURN(HloInstruction * bp_lo, ctx,
                  b.Binary(HloOpcode::kShiftRightLogical, bp_shifted, s16));
  LOWER_OR_RETURN(HloInstruction * init, ctx,
                  b.ScalarConstant(PrimitiveType::F32, -std::numeric_limits<double>::infinity()));
  const auto pooled_half = [&](HloInstruction* half) -> StatusOr<HloInstruction*> {
    ASSIGN_OR_RETURN(HloInstruction * packed, b.Binary(HloOpcode::kAdd, in_hi, half));
    ASSIGN_OR_RETURN(HloInstruction * as_float, b.BitcastConvert(packed, PrimitiveType::F32));
    ASSIGN_OR_RETURN(HloInstruction * pooled,
                     b.ReduceWindow(as_float, init, window, HloOpcode::kMaximum));
    return b.BitcastConvert(pooled, PrimitiveType::S32);
  };
  LOWER_OR_RETURN(HloInstruction * pooled_hi, ctx, pooled_half(bp_hi));
  LOWER_OR_RETURN(HloInstruction * pooled_lo, ctx, pooled_half(bp_lo));
  LOWER_OR_RETURN(HloInstruction * out16, ctx, sixteen(pooled_hi));
  LOWER_OR_RETURN(HloInstruction * grads_hi, ctx,
                  b.Binary(HloOpcode::kShiftLeft, pooled_hi, out16));
  LOWER_OR_RETURN(HloInstruction * lo_shifted, ctx,
                  b.Binary(HloOpcode::kShiftLeft, pooled_lo, out16));
  LOWER_OR_RETURN(HloInstruction * grads_lo, ctx,
                  b.Binary(HloOpcode::kShiftRightLogical, lo_shifted, out16));
  LOWER_OR_RETURN(HloInstruction * grads, ctx, b.Binary(HloOpcode::kAdd, grads_hi, grads_lo));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.BitcastConvert(grads, PrimitiveType::F32));
  ctx.SetOutput(0, y);
  return OkStatus();
}

struct ConvParams {
  Layout2D layout;
  std::vector<int64_t> strides, dilations;
  std::string padding;
};

StatusOr<ConvParams> GetConvParams(const XlaOpKernelContext& ctx) {
  ConvParams p;
  ASSIGN_OR_RETURN(p.layout, DataLayout(ctx));
  ASSIGN_OR_RETURN(p.strides, ctx.GetIntListAttr("strides"));
  ASSIGN_OR_RETURN(p.dilations, ctx.GetIntListAttr("dilations"));
  ASSIGN_OR_RETURN(p.padding, PaddingAttr(ctx));
  if (p.strides.size() != 4 || p.dilations.size() != 4) {
    return ctx.Error("strides and dilations must have 4 elements");
  }
  if (p.strides[p.layout.batch] != 1 || p.strides[p.layout.feature] != 1 ||
      p.dilations[p.layout.batch] != 1 || p.dilations[p.layout.feature] != 1) {
    return ctx.Error("strides and dilations in the batch and depth dimensions must be 1");
  }
  return p;
}

// Input in `layout`, filter HWIO, output in `layout`.
ConvolutionDimensionNumbers ForwardDimensions(const Layout2D& l) {
  ConvolutionDimensionNumbers d;
  d.input_batch_dimension = l.batch;
  d.input_feature_dimension = l.feature;
  d.input_spatial_dimensions = {l.spatial[0], l.spatial[1]};
  d.kernel_spatial_dimensions = {0, 1};
  d.kernel_input_feature_dimension = 2;
  d.kernel_output_feature_dimension = 3;
  d.output_batch_dimension = l.batch;
  d.output_feature_dimension = l.feature;
  d.output_spatial_dimensions = {l.spatial[0], l.spatial[1]};
  return d;
}

Status LowerConv2D(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * filter, ctx.Input(1));
  ASSIGN_OR_RETURN(ConvParams p, GetConvParams(ctx));
  const std::vector<int64_t>& in = input->shape().dimensions();
  const std::vector<int64_t>& f = filter->shape().dimensions();
  if (in.size() != 4 || f.size() != 4) return ctx.Error("input and filter must be 4-dimensional");
  if (f[2] == 0 || in[p.layout.feature] % f[2] != 0) {
    return ctx.Error(fmt::format("input depth {} is not a multiple of the filter depth {}",
                                 in[p.layout.feature], f[2]));
  }
  Window window;
  for (int i = 0; i < 2; ++i) {
    const int64_t dim = p.layout.spatial[i];
    WindowDimension w;
    w.size = f[i];
    w.stride = p.strides[dim];
    w.window_dilation = p.dilations[dim];
    auto pad = WindowPadding(p.padding, in[dim], f[i], p.strides[dim], p.dilations[dim]);
    if (!pad.ok()) return ctx.Error(pad.status().message());
    w.padding_low = pad->low;
    w.padding_high = pad->high;
    window.dimensions.push_back(w);
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx,
                  ctx.builder().Convolution(input, filter, window, ForwardDimensions(p.layout),
                                            in[p.layout.feature] / f[2]));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// d(input) = the convolution of out_backprop, dilated by the strides, with the filter flipped
// spatially and its in/out features exchanged.
Status LowerConv2DBackpropInput(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> in, ctx.ConstantInputAsIntVector(0));
  ASSIGN_OR_RETURN(HloInstruction * filter, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(2));
  ASSIGN_OR_RETURN(ConvParams p, GetConvParams(ctx));
  const std::vector<int64_t>& f = filter->shape().dimensions();
  const std::vector<int64_t>& out = dy->shape().dimensions();
  if (in.size() != 4 || f.size() != 4 || out.size() != 4) {
    return ctx.Error("input_sizes, filter and out_backprop must describe 4-dimensional tensors");
  }
  const int64_t in_depth = in[p.layout.feature];
  if (f[2] <= 0 || in_depth % f[2] != 0 || f[3] % (in_depth / f[2]) != 0) {
    return ctx.Error(fmt::format("input depth {} is not a multiple of the filter depth {}, or "
                                 "the output depth {} of the number of groups",
                                 in_depth, f[2], f[3]));
  }
  const int64_t groups = in_depth / f[2];
  Window window;
  for (int i = 0; i < 2; ++i) {
    const int64_t dim = p.layout.spatial[i];
    const int64_t stride = p.strides[dim], dilation = p.dilations[dim];
    const int64_t effective = (f[i] - 1) * dilation + 1;
    auto pad = WindowPadding(p.padding, in[dim], f[i], stride, dilation);
    if (!pad.ok()) return ctx.Error(pad.status().message());
    WindowDimension w;
    w.size = f[i];
    w.window_dilation = dilation;
    w.base_dilation = stride;
    w.padding_low = effective - 1 - pad->low;
    // Whatever the forward convolution's last window left out of the input gets no gradient.
    const int64_t covered = (out[dim] - 1) * stride + effective;
    w.padding_high = effective - 1 - pad->high + (in[dim] + pad->low + pad->high - covered);
    window.dimensions.push_back(w);
  }
  HloBuilder& b = ctx.builder();
  if (groups > 1) {
    // Grouped: [kh, kw, fin, G * og] -> [kh, kw, fin, G, og] -> [kh, kw, G, fin, og] ->
    // [kh, kw, G * fin, og], so that group g's output features (og of dy's) are the kernel's
    // input features and its fin input channels the kernel's output features.
    const int64_t og = f[3] / groups;
    LOWER_OR_RETURN(filter, ctx, b.Reshape(filter, {f[0], f[1], f[2], groups, og}));
    LOWER_OR_RETURN(filter, ctx, b.Transpose(filter, {0, 1, 3, 2, 4}));
    LOWER_OR_RETURN(filter, ctx, b.Reshape(filter, {f[0], f[1], groups * f[2], og}));
  }
  LOWER_OR_RETURN(HloInstruction * flipped, ctx, b.Reverse(filter, {0, 1}));
  ConvolutionDimensionNumbers d = ForwardDimensions(p.layout);
  d.kernel_input_feature_dimension = 3;
  d.kernel_output_feature_dimension = 2;
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Convolution(dy, flipped, window, d, groups));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// d(filter) = the convolution of the input (batch as the contracted feature) with out_backprop
// as the kernel, the forward strides becoming the kernel's dilation.
Status LowerConv2DBackpropFilter(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> f, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(2));
  ASSIGN_OR_RETURN(ConvParams p, GetConvParams(ctx));
  const std::vector<int64_t>& in = input->shape().dimensions();
  const std::vector<int64_t>& out = dy->shape().dimensions();
  if (in.size() != 4 || f.size() != 4 || out.size() != 4) {
    return ctx.Error("input, filter_sizes and out_backprop must describe 4-dimensional tensors");
  }
  const int64_t in_depth = in[p.layout.feature];
  if (f[2] <= 0 || in_depth % f[2] != 0 || f[3] % (in_depth / f[2]) != 0 ||
      out[p.layout.feature] != f[3]) {
    return ctx.Error(fmt::format("input depth {} is not a multiple of the filter depth {}, or "
                                 "out_backprop's depth {} is not the filter's output depth {} "
                                 "(a multiple of the number of groups)",
                                 in_depth, f[2], out[p.layout.feature], f[3]));
  }
  const int64_t groups = in_depth / f[2];
  Window window;
  for (int i = 0; i < 2; ++i) {
    const int64_t dim = p.layout.spatial[i];
    const int64_t stride = p.strides[dim], dilation = p.dilations[dim];
    auto pad = WindowPadding(p.padding, in[dim], f[i], stride, dilation);
    if (!pad.ok()) return ctx.Error(pad.status().message());
    WindowDimension w;
    w.size = out[dim];
    w.stride = dilation;
    w.window_dilation = stride;
    w.padding_low = pad->low;
    // Sized so that exactly f[i] window positions fit: the rest of the input is unused.
    w.padding_high = (f[i] - 1) * dilation + (out[dim] - 1) * stride + 1 - in[dim] - pad->low;
    window.dimensions.push_back(w);
  }
  ConvolutionDimensionNumbers d;
  d.input_batch_dimension = p.layout.feature;
  d.input_feature_dimension = p.layout.batch;
  d.input_spatial_dimensions = {p.layout.spatial[0], p.layout.spatial[1]};
  d.kernel_input_feature_dimension = p.layout.batch;
  d.kernel_output_feature_dimension = p.layout.feature;
  d.kernel_spatial_dimensions = {p.layout.spatial[0], p.layout.spatial[1]};
  d.output_batch_dimension = 2;
  d.output_feature_dimension = 3;
  d.output_spatial_dimensions = {0, 1};
  HloBuilder& b = ctx.builder();
  if (groups > 1) {
    // Grouped (TensorFlow uses batch_group_count; this is the same convolution with feature
    // groups): the input as [fin, h, w, G * n], group g's features its n images of channel
    // block g, contracted against dy's batch; group g's output features are dy's block g.
    std::vector<int64_t> split = in;
    const int64_t c = p.layout.feature;
    split[c] = f[2];
    split.insert(split.begin() + c, groups);  // [.., G, fin, ..] in the input's layout
    auto at = [&](int64_t dim) { return dim < c ? dim : dim + 1; };  // a dim of `in` in `split`
    LOWER_OR_RETURN(HloInstruction * grouped, ctx, b.Reshape(input, split));
    LOWER_OR_RETURN(grouped, ctx, b.Transpose(grouped, {c + 1, at(p.layout.spatial[0]),
                                                        at(p.layout.spatial[1]), c,
                                                        at(p.layout.batch)}));
    LOWER_OR_RETURN(input, ctx, b.Reshape(grouped, {f[2], in[p.layout.spatial[0]],
                                                    in[p.layout.spatial[1]],
                                                    groups * in[p.layout.batch]}));
    d.input_batch_dimension = 0;
    d.input_feature_dimension = 3;
    d.input_spatial_dimensions = {1, 2};
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Convolution(input, dy, window, d, groups));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterPoolingXlaOps(XlaOpRegistry& registry) {
  // One lowering per pooling for both ranks: the 2-D ops over rank-4 inputs, the 3-D over rank 5.
  const auto at_rank = [](Status (*lower)(XlaOpKernelContext&, size_t), size_t rank) {
    return [lower, rank](XlaOpKernelContext& ctx) { return lower(ctx, rank); };
  };
  for (size_t rank : {size_t{4}, size_t{5}}) {
    const std::string suffix = rank == 5 ? "3D" : "";
    registry.Register("MaxPool" + suffix, at_rank(LowerMaxPool, rank));
    registry.Register("AvgPool" + suffix, at_rank(LowerAvgPool, rank));
    registry.Register("MaxPool" + suffix + "Grad", at_rank(LowerMaxPoolGrad, rank));
    registry.Register("AvgPool" + suffix + "Grad", at_rank(LowerAvgPoolGrad, rank));
  }
  registry.Register("MaxPool3DGradGrad", LowerMaxPool3DGradGrad);
  registry.Register("Conv2D", LowerConv2D);
  registry.Register("Conv2DBackpropInput", LowerConv2DBackpropInput);
  registry.Register("Conv2DBackpropFilter", LowerConv2DBackpropFilter);
}

}  // namespace xlens::cluster
