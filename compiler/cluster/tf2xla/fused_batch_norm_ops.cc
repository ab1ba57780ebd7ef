// FusedBatchNorm, V2, V3 and their gradients, and _FusedBatchNormEx (grappler's FusedBatchNorm +
// side input + activation), as TensorFlow's XLA kernels (batch_norm_op.cc) compile them: the
// normalization over every dimension but the channel's, in f32, the side input added, then Relu
// (or Identity). In training the batch statistics are reduced from the input and the variance
// output is the unbiased one blended into the running average by exponential_avg_factor; in
// inference the mean and variance inputs are used and passed through. The gradient is the
// closed form TensorFlow's CPU kernel computes.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

StatusOr<std::string> StringAttr(const XlaOpKernelContext& ctx, const char* name) {
  auto v = graph::GetStringAttr(ctx.attrs(), name, ctx.name());
  if (!v.ok()) return ctx.Error(v.status().message());
  return *v;
}

// The channel axis of an input of `dims` and the axes the statistics reduce.
struct Axes {
  int64_t channel = 0;
  std::vector<int64_t> reduce;
  int64_t count = 1;  // elements per channel
};

StatusOr<Axes> ChannelAxes(const XlaOpKernelContext& ctx, const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(std::string format, StringAttr(ctx, "data_format"));
  const bool five = format == "NDHWC" || format == "NCDHW";
  if (dims.size() != (five ? 5u : 4u)) {
    return ctx.Error(fmt::format("input must be {}-dimensional for data_format {}",
                                 five ? 5 : 4, format));
  }
  Axes a;
  a.channel = (format == "NCHW" || format == "NCDHW") ? 1 : static_cast<int64_t>(dims.size()) - 1;
  for (int64_t d = 0; d < static_cast<int64_t>(dims.size()); ++d) {
    if (d == a.channel) continue;
    a.reduce.push_back(d);
    a.count *= dims[d];
  }
  return a;
}

Status LowerBatchNorm(XlaOpKernelContext& ctx) {
  std::string activation = "Identity";
  if (graph::FindAttr(ctx.attrs(), "activation_mode") != nullptr) {
    ASSIGN_OR_RETURN(activation, StringAttr(ctx, "activation_mode"));
  }
  ASSIGN_OR_RETURN(bool training, ctx.GetBoolAttr("is_training"));
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloatAttr("epsilon"));
  float factor = 1.0f;
  if (graph::FindAttr(ctx.attrs(), "exponential_avg_factor") != nullptr) {
    ASSIGN_OR_RETURN(factor, ctx.GetFloatAttr("exponential_avg_factor"));
  }
  if (activation != "Identity" && activation != "Relu") {
    return ctx.Error("Unsupported activation_mode '" + activation + "'");
  }
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(HloInstruction * x_in, ctx.Input(0));
  const PrimitiveType type = x_in->shape().element_type();
  const std::vector<int64_t> dims = x_in->shape().dimensions();
  ASSIGN_OR_RETURN(Axes axes, ChannelAxes(ctx, dims));
  const int64_t channels = dims[axes.channel];
  const int64_t rows = axes.count;
  const PrimitiveType f32 = PrimitiveType::F32;
  LOWER_OR_RETURN(HloInstruction * x, ctx, b.Convert(x_in, f32));
  auto per_channel = [&](HloInstruction* v) { return b.Broadcast(v, dims, {axes.channel}); };
  auto scalar = [&](double v) { return b.FullConstant(f32, v, {channels}); };
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(f32, 0));
  HloInstruction* mean = nullptr;
  HloInstruction* var = nullptr;
  if (training) {
    LOWER_OR_RETURN(HloInstruction * count, ctx, scalar(static_cast<double>(rows)));
    LOWER_OR_RETURN(HloInstruction * sum, ctx, b.Reduce(x, zero, axes.reduce, HloOpcode::kAdd));
    LOWER_OR_RETURN(mean, ctx, b.Binary(HloOpcode::kDivide, sum, count));
    LOWER_OR_RETURN(HloInstruction * mean_b, ctx, per_channel(mean));
    LOWER_OR_RETURN(HloInstruction * centered, ctx, b.Binary(HloOpcode::kSubtract, x, mean_b));
    LOWER_OR_RETURN(HloInstruction * sq, ctx,
                    b.Binary(HloOpcode::kMultiply, centered, centered));
    LOWER_OR_RETURN(HloInstruction * sq_sum, ctx,
                    b.Reduce(sq, zero, axes.reduce, HloOpcode::kAdd));
    LOWER_OR_RETURN(var, ctx, b.Binary(HloOpcode::kDivide, sq_sum, count));
  } else {
    ASSIGN_OR_RETURN(mean, ctx.Input(3));
    ASSIGN_OR_RETURN(var, ctx.Input(4));
  }
  ASSIGN_OR_RETURN(HloInstruction * scale, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * offset, ctx.Input(2));
  LOWER_OR_RETURN(HloInstruction * eps, ctx, scalar(epsilon));
  LOWER_OR_RETURN(HloInstruction * var_eps, ctx, b.Binary(HloOpcode::kAdd, var, eps));
  LOWER_OR_RETURN(HloInstruction * rsqrt, ctx, b.Unary(HloOpcode::kRsqrt, var_eps));
  LOWER_OR_RETURN(HloInstruction * mul, ctx, b.Binary(HloOpcode::kMultiply, scale, rsqrt));
  LOWER_OR_RETURN(HloInstruction * mean_b, ctx, per_channel(mean));
  LOWER_OR_RETURN(HloInstruction * mul_b, ctx, per_channel(mul));
  LOWER_OR_RETURN(HloInstruction * offset_b, ctx, per_channel(offset));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Binary(HloOpcode::kSubtract, x, mean_b));
  LOWER_OR_RETURN(y, ctx, b.Binary(HloOpcode::kMultiply, y, mul_b));
  LOWER_OR_RETURN(y, ctx, b.Binary(HloOpcode::kAdd, y, offset_b));
  if (ctx.num_inputs() > 5) {
    ASSIGN_OR_RETURN(HloInstruction * side, ctx.Input(5));
    LOWER_OR_RETURN(side, ctx, b.Convert(side, f32));
    LOWER_OR_RETURN(y, ctx, b.Binary(HloOpcode::kAdd, y, side));
  }
  if (activation == "Relu") {
    LOWER_OR_RETURN(HloInstruction * zeros, ctx, b.FullConstant(f32, 0, dims));
    LOWER_OR_RETURN(y, ctx, b.Binary(HloOpcode::kMaximum, y, zeros));
  }
  LOWER_OR_RETURN(y, ctx, b.Convert(y, type));
  ctx.SetOutput(0, y);
  HloInstruction* out_mean = mean;
  HloInstruction* out_var = var;
  if (training) {
    const double adjust = rows > 1 ? static_cast<double>(rows) / (rows - 1) : 1.0;
    LOWER_OR_RETURN(HloInstruction * adj, ctx, scalar(adjust));
    LOWER_OR_RETURN(out_var, ctx, b.Binary(HloOpcode::kMultiply, var, adj));
    if (factor != 1.0f) {
      ASSIGN_OR_RETURN(HloInstruction * old_mean, ctx.Input(3));
      ASSIGN_OR_RETURN(HloInstruction * old_var, ctx.Input(4));
      LOWER_OR_RETURN(HloInstruction * keep, ctx, scalar(1.0 - factor));
      LOWER_OR_RETURN(HloInstruction * take, ctx, scalar(factor));
      for (auto [out, old] : {std::pair{&out_mean, old_mean}, std::pair{&out_var, old_var}}) {
        LOWER_OR_RETURN(HloInstruction * a, ctx, b.Binary(HloOpcode::kMultiply, old, keep));
        LOWER_OR_RETURN(HloInstruction * c, ctx, b.Binary(HloOpcode::kMultiply, *out, take));
        LOWER_OR_RETURN(*out, ctx, b.Binary(HloOpcode::kAdd, a, c));
      }
    }
  }
  ctx.SetOutput(1, out_mean);
  ctx.SetOutput(2, out_var);
  ctx.SetOutput(3, mean);
  ctx.SetOutput(4, var);
  if (ctx.num_outputs() > 5) ctx.SetConstantOutput(5, graph::Tensor(graph::DT_FLOAT, {0}));
  return OkStatus();
}

// x_backprop = scale inv (dy - mean(dy) - xhat mean(dy xhat)) in training, dy scale inv in
// inference; scale_backprop = sum(dy xhat), offset_backprop = sum(dy).
Status LowerBatchNormGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(bool training, ctx.GetBoolAttr("is_training"));
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloatAttr("epsilon"));
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(HloInstruction * dy_in, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * x_in, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * scale, ctx.Input(2));
  ASSIGN_OR_RETURN(HloInstruction * mean, ctx.Input(3));
  ASSIGN_OR_RETURN(HloInstruction * var, ctx.Input(4));
  const PrimitiveType type = x_in->shape().element_type();
  const std::vector<int64_t> dims = x_in->shape().dimensions();
  ASSIGN_OR_RETURN(Axes axes, ChannelAxes(ctx, dims));
  const int64_t channels = dims[axes.channel];
  const PrimitiveType f32 = PrimitiveType::F32;
  auto per_channel = [&](HloInstruction* v) { return b.Broadcast(v, dims, {axes.channel}); };
  LOWER_OR_RETURN(HloInstruction * x, ctx, b.Convert(x_in, f32));
  LOWER_OR_RETURN(HloInstruction * dy, ctx, b.Convert(dy_in, f32));
  LOWER_OR_RETURN(HloInstruction * eps, ctx, b.FullConstant(f32, epsilon, {channels}));
  LOWER_OR_RETURN(HloInstruction * var_eps, ctx, b.Binary(HloOpcode::kAdd, var, eps));
  LOWER_OR_RETURN(HloInstruction * inv, ctx, b.Unary(HloOpcode::kRsqrt, var_eps));
  LOWER_OR_RETURN(HloInstruction * mean_b, ctx, per_channel(mean));
  LOWER_OR_RETURN(HloInstruction * inv_b, ctx, per_channel(inv));
  LOWER_OR_RETURN(HloInstruction * centered, ctx, b.Binary(HloOpcode::kSubtract, x, mean_b));
  LOWER_OR_RETURN(HloInstruction * xhat, ctx, b.Binary(HloOpcode::kMultiply, centered, inv_b));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(f32, 0));
  LOWER_OR_RETURN(HloInstruction * sum_dy, ctx, b.Reduce(dy, zero, axes.reduce, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * dy_xhat, ctx, b.Binary(HloOpcode::kMultiply, dy, xhat));
  LOWER_OR_RETURN(HloInstruction * sum_dy_xhat, ctx,
                  b.Reduce(dy_xhat, zero, axes.reduce, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * scale_inv, ctx, b.Binary(HloOpcode::kMultiply, scale, inv));
  LOWER_OR_RETURN(HloInstruction * scale_inv_b, ctx, per_channel(scale_inv));
  HloInstruction* dx = nullptr;
  if (training) {
    LOWER_OR_RETURN(HloInstruction * count, ctx,
                    b.FullConstant(f32, static_cast<double>(axes.count), {channels}));
    LOWER_OR_RETURN(HloInstruction * mean_dy, ctx, b.Binary(HloOpcode::kDivide, sum_dy, count));
    LOWER_OR_RETURN(HloInstruction * mean_dy_xhat, ctx,
                    b.Binary(HloOpcode::kDivide, sum_dy_xhat, count));
    LOWER_OR_RETURN(HloInstruction * mean_dy_b, ctx, per_channel(mean_dy));
    LOWER_OR_RETURN(HloInstruction * mean_dy_xhat_b, ctx, per_channel(mean_dy_xhat));
    LOWER_OR_RETURN(HloInstruction * t, ctx, b.Binary(HloOpcode::kSubtract, dy, mean_dy_b));
    LOWER_OR_RETURN(HloInstruction * u, ctx,
                    b.Binary(HloOpcode::kMultiply, xhat, mean_dy_xhat_b));
    LOWER_OR_RETURN(t, ctx, b.Binary(HloOpcode::kSubtract, t, u));
    LOWER_OR_RETURN(dx, ctx, b.Binary(HloOpcode::kMultiply, t, scale_inv_b));
  } else {
    LOWER_OR_RETURN(dx, ctx, b.Binary(HloOpcode::kMultiply, dy, scale_inv_b));
  }
  LOWER_OR_RETURN(dx, ctx, b.Convert(dx, type));
  ctx.SetOutput(0, dx);
  ctx.SetOutput(1, sum_dy_xhat);
  ctx.SetOutput(2, sum_dy);
  ctx.SetConstantOutput(3, graph::Tensor(graph::DT_FLOAT, {0}));
  ctx.SetConstantOutput(4, graph::Tensor(graph::DT_FLOAT, {0}));
  return OkStatus();
}

}  // namespace

void RegisterFusedBatchNormXlaOps(XlaOpRegistry& registry) {
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
                         "_FusedBatchNormEx"}) {
    registry.Register(op, LowerBatchNorm);
  }
  for (const char* op : {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}) {
    registry.Register(op, LowerBatchNormGrad);
  }
}

}  // namespace xlens::cluster
