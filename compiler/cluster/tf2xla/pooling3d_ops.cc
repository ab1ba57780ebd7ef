// The 3-D poolings and their gradients, as TensorFlow's pooling_ops.cc lowers them for any rank:
// MaxPool3D and AvgPool3D are reduce-windows over the five dimensions (AvgPool3D divides by the
// number of input elements each window covers, so SAME padding is not counted), MaxPool3DGrad a
// select-and-scatter (the first maximum of a window gets its gradient), AvgPool3DGrad the
// transpose of the averaging reduce-window, MaxPool3DGradGrad a pair of packed reduce-windows.
#include <fmt/format.h>

#include <limits>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

// The window of a 3-D pooling over an input of `dims` (either data format: ksize and strides are
// given in the input's own layout).
StatusOr<Window> Pool3DWindow(const XlaOpKernelContext& ctx, const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(std::vector<int64_t> ksize, ctx.GetIntListAttr("ksize"));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.GetIntListAttr("strides"));
  ASSIGN_OR_RETURN(std::string padding, graph::GetStringAttr(ctx.attrs(), "padding", ctx.name()));
  if (dims.size() != 5 || ksize.size() != 5 || strides.size() != 5)
    return ctx.Error("3-D pooling needs a rank-5 input and 5 ksize and strides");
  if (padding != "SAME" && padding != "VALID")
    return ctx.Error(fmt::format("padding '{}' is not supported", padding));
  Window window;
  for (int i = 0; i < 5; ++i) {
    if (ksize[i] <= 0 || strides[i] <= 0 || ksize[i] > (int64_t{1} << 32) ||
        strides[i] > (int64_t{1} << 32))
      return ctx.Error("ksize and strides must be in [1, 2^32]");
    WindowDimension d;
    d.size = ksize[i];
    d.stride = strides[i];
    if (padding == "SAME") {
      const int64_t out = (dims[i] + strides[i] - 1) / strides[i];
      const int64_t total = std::max<int64_t>((out - 1) * strides[i] + ksize[i] - dims[i], 0);
      d.padding_low = total / 2;
      d.padding_high = total - total / 2;
    }
    window.dimensions.push_back(d);
  }
  return window;
}

Status LowerMaxPool3D(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(Window window, Pool3DWindow(ctx, x->shape().dimensions()));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * init, ctx,
                  b.ScalarConstant(type, -std::numeric_limits<double>::infinity()));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.ReduceWindow(x, init, window, HloOpcode::kMaximum));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// How many input elements each window covers (padding excluded), as an array of `dims`' windows.
StatusOr<HloInstruction*> WindowCounts(HloBuilder& b, PrimitiveType type,
                                       const std::vector<int64_t>& dims, const Window& window) {
  ASSIGN_OR_RETURN(HloInstruction * zero, b.ScalarConstant(type, 0));
  ASSIGN_OR_RETURN(HloInstruction * ones, b.FullConstant(type, 1, dims));
  return b.ReduceWindow(ones, zero, window, HloOpcode::kAdd);
}

Status LowerAvgPool3D(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const std::vector<int64_t>& dims = x->shape().dimensions();
  ASSIGN_OR_RETURN(Window window, Pool3DWindow(ctx, dims));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * sum, ctx, b.ReduceWindow(x, zero, window, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * counts, ctx, WindowCounts(b, type, dims, window));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Binary(HloOpcode::kDivide, sum, counts));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerMaxPool3DGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * input, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(2));
  ASSIGN_OR_RETURN(Window window, Pool3DWindow(ctx, input->shape().dimensions()));
  HloBuilder& b = ctx.builder();
  if (input->shape().element_type() != grad->shape().element_type()) {
    LOWER_OR_RETURN(input, ctx, b.Convert(input, grad->shape().element_type()));
  }
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(grad->shape().element_type(), 0));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.SelectAndScatter(input, grad, zero, window));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// Each output gradient shared evenly by the input elements its window covered, spread back by
// a sum over windows of the stride-dilated, padded gradient.
Status LowerAvgPool3DGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(0));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(1));
  ASSIGN_OR_RETURN(Window window, Pool3DWindow(ctx, dims));
  const std::vector<int64_t> out = grad->shape().dimensions();
  if (out.size() != 5) return ctx.Error("grad must be 5-dimensional");
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = grad->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * counts, ctx, WindowCounts(b, type, dims, window));
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

}  // namespace

StatusOr<HloInstruction*> BitcastTo(HloBuilder& b, HloInstruction* x, PrimitiveType type) {
  auto cast = std::make_unique<HloInstruction>(HloOpcode::kBitcastConvert,
                                               Shape(type, x->shape().dimensions()));
  cast->AppendOperand(x);
  return b.Add(std::move(cast));
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
  ASSIGN_OR_RETURN(Window window, Pool3DWindow(ctx, dims));
  HloBuilder& b = ctx.builder();
  const auto sixteen = [&](HloInstruction* like) {
    return b.FullConstant(PrimitiveType::S32, 16, like->shape().dimensions());
  };
  LOWER_OR_RETURN(HloInstruction * in_bf16, ctx, b.Convert(input, PrimitiveType::BF16));
  LOWER_OR_RETURN(HloInstruction * in_f32, ctx, b.Convert(in_bf16, PrimitiveType::F32));
  LOWER_OR_RETURN(HloInstruction * in_hi, ctx, BitcastTo(b, in_f32, PrimitiveType::S32));
  LOWER_OR_RETURN(HloInstruction * bp, ctx, BitcastTo(b, grad, PrimitiveType::S32));
  LOWER_OR_RETURN(HloInstruction * s16, ctx, sixteen(bp));
  LOWER_OR_RETURN(HloInstruction * bp_hi, ctx, b.Binary(HloOpcode::kShiftRightLogical, bp, s16));
  LOWER_OR_RETURN(HloInstruction * bp_shifted, ctx, b.Binary(HloOpcode::kShiftLeft, bp, s16));
  LOWER_OR_RETURN(HloInstruction * bp_lo, ctx,
                  b.Binary(HloOpcode::kShiftRightLogical, bp_shifted, s16));
  LOWER_OR_RETURN(HloInstruction * init, ctx,
                  b.ScalarConstant(PrimitiveType::F32, -std::numeric_limits<double>::infinity()));
  const auto pooled_half = [&](HloInstruction* half) -> StatusOr<HloInstruction*> {
    ASSIGN_OR_RETURN(HloInstruction * packed, b.Binary(HloOpcode::kAdd, in_hi, half));
    ASSIGN_OR_RETURN(HloInstruction * as_float, BitcastTo(b, packed, PrimitiveType::F32));
    ASSIGN_OR_RETURN(HloInstruction * pooled,
                     b.ReduceWindow(as_float, init, window, HloOpcode::kMaximum));
    return BitcastTo(b, pooled, PrimitiveType::S32);
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
  LOWER_OR_RETURN(HloInstruction * y, ctx, BitcastTo(b, grads, PrimitiveType::F32));
  ctx.SetOutput(0, y);
  return OkStatus();
}

void RegisterPooling3DXlaOps(XlaOpRegistry& registry) {
  registry.Register("MaxPool3D", LowerMaxPool3D);
  registry.Register("AvgPool3D", LowerAvgPool3D);
  registry.Register("MaxPool3DGrad", LowerMaxPool3DGrad);
  registry.Register("MaxPool3DGradGrad", LowerMaxPool3DGradGrad);
  registry.Register("AvgPool3DGrad", LowerAvgPool3DGrad);
}

}  // namespace xlens::cluster
