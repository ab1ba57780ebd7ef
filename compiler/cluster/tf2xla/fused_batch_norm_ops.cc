// _FusedBatchNormEx, grappler's FusedBatchNorm + side input + activation, which TensorFlow's XLA
// kernel (batch_norm_op.cc, FusedBatchNormOpEx) compiles: the normalization over N, H and W of an
// NHWC input in f32, the side input added, then Relu (or Identity). In training the batch
// statistics are reduced from the input and the variance output is the unbiased one blended
// into the running average by exponential_avg_factor; in inference the mean and variance inputs
// are used and passed through.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

Status LowerFusedBatchNormEx(XlaOpKernelContext& ctx) {
  auto string_attr = [&](const char* name) -> StatusOr<std::string> {
    auto v = graph::GetStringAttr(ctx.attrs(), name, ctx.name());
    if (!v.ok()) return ctx.Error(v.status().message());
    return *v;
  };
  ASSIGN_OR_RETURN(std::string format, string_attr("data_format"));
  ASSIGN_OR_RETURN(std::string activation, string_attr("activation_mode"));
  ASSIGN_OR_RETURN(bool training, ctx.GetBoolAttr("is_training"));
  ASSIGN_OR_RETURN(float epsilon, ctx.GetFloatAttr("epsilon"));
  ASSIGN_OR_RETURN(float factor, ctx.GetFloatAttr("exponential_avg_factor"));
  if (format != "NHWC") return ctx.Error("xlens compiles _FusedBatchNormEx in NHWC only");
  if (activation != "Identity" && activation != "Relu") {
    return ctx.Error("Unsupported activation_mode '" + activation + "'");
  }
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(HloInstruction * x_in, ctx.Input(0));
  if (x_in->shape().rank() != 4) return ctx.Error("input must be 4-dimensional");
  const PrimitiveType type = x_in->shape().element_type();
  const std::vector<int64_t> dims = x_in->shape().dimensions();
  const int64_t channels = dims[3];
  const int64_t rows = dims[0] * dims[1] * dims[2];
  const PrimitiveType f32 = PrimitiveType::F32;
  LOWER_OR_RETURN(HloInstruction * x, ctx, b.Convert(x_in, f32));
  auto per_channel = [&](HloInstruction* v) { return b.Broadcast(v, dims, {3}); };
  auto scalar = [&](double v) { return b.FullConstant(f32, v, {channels}); };
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(f32, 0));
  HloInstruction* mean = nullptr;
  HloInstruction* var = nullptr;
  if (training) {
    LOWER_OR_RETURN(HloInstruction * count, ctx, scalar(static_cast<double>(rows)));
    LOWER_OR_RETURN(HloInstruction * sum, ctx, b.Reduce(x, zero, {0, 1, 2}, HloOpcode::kAdd));
    LOWER_OR_RETURN(mean, ctx, b.Binary(HloOpcode::kDivide, sum, count));
    LOWER_OR_RETURN(HloInstruction * mean_b, ctx, per_channel(mean));
    LOWER_OR_RETURN(HloInstruction * centered, ctx, b.Binary(HloOpcode::kSubtract, x, mean_b));
    LOWER_OR_RETURN(HloInstruction * sq, ctx,
                    b.Binary(HloOpcode::kMultiply, centered, centered));
    LOWER_OR_RETURN(HloInstruction * sq_sum, ctx,
                    b.Reduce(sq, zero, {0, 1, 2}, HloOpcode::kAdd));
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
  ctx.SetConstantOutput(5, graph::Tensor(graph::DT_FLOAT, {0}));
  return OkStatus();
}

}  // namespace

void RegisterFusedBatchNormXlaOps(XlaOpRegistry& registry) {
  registry.Register("_FusedBatchNormEx", LowerFusedBatchNormEx);
}

}  // namespace xlens::cluster
