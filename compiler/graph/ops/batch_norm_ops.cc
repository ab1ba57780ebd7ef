// TensorFlow's fused batch normalization (nn_ops.cc's FusedBatchNorm, V2, V3 and their
// gradients) and grappler's _FusedBatchNormEx (the same with a side input and Relu), as the CPU
// kernels compute them: statistics in float over every dimension but the channel's (last for
// NHWC/NDHWC, 1 for NCHW/NCDHW); in training the variance output is the unbiased one, blended
// into the running averages by exponential_avg_factor, and reserve_space_1/2 keep the batch mean
// and the biased variance for the gradient; in inference the given statistics are used and
// passed through.
#include <cmath>
#include <string>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using cwise::Data;
using cwise::Dispatch;
using cwise::MutableData;

// Where the channel dimension lies: element i has channel (i / inner) % channels.
struct ChannelLayout {
  int64_t channels = 0;
  int64_t inner = 1;
  int64_t count = 0;  // elements per channel
};

StatusOr<ChannelLayout> Layout(const OpKernelContext& ctx, const Tensor& x) {
  ASSIGN_OR_RETURN(std::string format, ctx.GetAttr<std::string>("data_format"));
  const bool five = format == "NDHWC" || format == "NCDHW";
  if (x.rank() != (five ? 5 : 4)) {
    return ctx.Error("input must be " + std::string(five ? "5" : "4") +
                     "-dimensional for data_format " + format + ", got " +
                     DimsToString(x.dims()));
  }
  const bool channels_first = format == "NCHW" || format == "NCDHW";
  const int64_t axis = channels_first ? 1 : x.rank() - 1;
  ChannelLayout l;
  l.channels = x.dim(axis);
  for (int64_t d = axis + 1; d < x.rank(); ++d) l.inner *= x.dim(d);
  l.count = l.channels == 0 ? 0 : x.num_elements() / l.channels;
  return l;
}

Status CheckVector(const OpKernelContext& ctx, int input, const char* name, int64_t channels) {
  const Tensor& t = ctx.input(input);
  if (t.rank() != 1 || t.dim(0) != channels) {
    return ctx.Error(std::string(name) + " must have shape [" + std::to_string(channels) +
                     "], got " + DimsToString(t.dims()));
  }
  return OkStatus();
}

// The forward pass; `side` is the side input's index (-1: none), `relu` the activation.
Status BatchNormForward(OpKernelContext& ctx, int side, bool relu) {
  ASSIGN_OR_RETURN(bool training, ctx.GetAttr<bool>("is_training"));
  ASSIGN_OR_RETURN(float epsilon, ctx.GetAttr<float>("epsilon"));
  float factor = 1.0f;
  if (FindAttr(ctx.attrs(), "exponential_avg_factor") != nullptr) {
    ASSIGN_OR_RETURN(factor, ctx.GetAttr<float>("exponential_avg_factor"));
  }
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(ChannelLayout l, Layout(ctx, x));
  const int64_t channels = l.channels;
  RETURN_IF_ERROR(CheckVector(ctx, 1, "scale", channels));
  RETURN_IF_ERROR(CheckVector(ctx, 2, "offset", channels));
  // In training the running statistics may be empty (nothing to blend) when the factor is 1.
  const bool stats_needed = !training || factor != 1.0f;
  if (stats_needed || ctx.input(3).num_elements() != 0) {
    RETURN_IF_ERROR(CheckVector(ctx, 3, "mean", channels));
    RETURN_IF_ERROR(CheckVector(ctx, 4, "variance", channels));
  }
  if (side >= 0 && ctx.input(side).dims() != x.dims()) {
    return ctx.Error("side_input shape " + DimsToString(ctx.input(side).dims()) +
                     " must equal the input's " + DimsToString(x.dims()));
  }
  if (ctx.input(1).dtype() != DT_FLOAT) {
    return ctx.Error("scale, offset, mean and variance must be float on the CPU, got " +
                     DataTypeName(ctx.input(1).dtype()));
  }
  const float* scale = Data<float>(ctx.input(1));
  const float* offset = Data<float>(ctx.input(2));
  std::vector<float> mean(channels, 0.f), var(channels, 0.f);
  const int64_t n = x.num_elements();
  auto channel = [&](int64_t i) { return (i / l.inner) % channels; };
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dims()));
  RETURN_IF_ERROR(Dispatch<cwise::kFloating>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* in = Data<T>(x);
    if (training) {
      std::vector<double> sum(channels, 0), sq(channels, 0);
      for (int64_t i = 0; i < n; ++i) sum[channel(i)] += static_cast<float>(in[i]);
      for (int64_t c = 0; c < channels; ++c) mean[c] = l.count ? float(sum[c] / l.count) : 0.f;
      for (int64_t i = 0; i < n; ++i) {
        const double d = static_cast<float>(in[i]) - mean[channel(i)];
        sq[channel(i)] += d * d;
      }
      for (int64_t c = 0; c < channels; ++c) var[c] = l.count ? float(sq[c] / l.count) : 0.f;
    } else {
      std::copy_n(Data<float>(ctx.input(3)), channels, mean.begin());
      std::copy_n(Data<float>(ctx.input(4)), channels, var.begin());
    }
    std::vector<float> mul(channels);
    for (int64_t c = 0; c < channels; ++c) mul[c] = scale[c] / std::sqrt(var[c] + epsilon);
    const T* s = side >= 0 ? Data<T>(ctx.input(side)) : nullptr;
    T* o = MutableData<T>(*y);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = channel(i);
      float v = (static_cast<float>(in[i]) - mean[c]) * mul[c] + offset[c];
      if (s != nullptr) v += static_cast<float>(s[i]);
      if (relu) v = v > 0.f ? v : 0.f;
      o[i] = T(v);
    }
    return OkStatus();
  }));
  std::vector<float> out_mean = mean, out_var = var;
  if (training) {
    const float adjust = l.count > 1 ? static_cast<float>(l.count) / (l.count - 1) : 1.f;
    for (int64_t c = 0; c < channels; ++c) {
      out_var[c] = var[c] * adjust;
      if (factor != 1.0f) {
        out_mean[c] = (1 - factor) * Data<float>(ctx.input(3))[c] + factor * mean[c];
        out_var[c] = (1 - factor) * Data<float>(ctx.input(4))[c] + factor * out_var[c];
      }
    }
  }
  auto put = [&](int i, const std::vector<float>& v) -> Status {
    ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(i, {static_cast<int64_t>(v.size())}));
    std::copy(v.begin(), v.end(), MutableData<float>(*t));
    return OkStatus();
  };
  RETURN_IF_ERROR(put(1, out_mean));
  RETURN_IF_ERROR(put(2, out_var));
  RETURN_IF_ERROR(put(3, mean));
  RETURN_IF_ERROR(put(4, var));
  if (ctx.num_outputs() > 5) RETURN_IF_ERROR(put(5, {}));
  return OkStatus();
}

Status FusedBatchNormKernel(OpKernelContext& ctx) { return BatchNormForward(ctx, -1, false); }

Status FusedBatchNormExKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::string activation, ctx.GetAttr<std::string>("activation_mode"));
  if (activation != "Identity" && activation != "Relu") {
    return ctx.Error("Unsupported activation_mode '" + activation +
                     "' (the CPU kernel takes Identity and Relu)");
  }
  return BatchNormForward(ctx, ctx.num_inputs() > 5 ? 5 : -1, activation == "Relu");
}

// FusedBatchNormGrad*: (y_backprop, x, scale, reserve_space_1, reserve_space_2[, _3]) ->
// x_backprop, scale_backprop, offset_backprop and two empty reserve spaces. reserve_space_1/2
// are the batch mean and biased variance in training, the population ones in inference.
Status FusedBatchNormGradKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(bool training, ctx.GetAttr<bool>("is_training"));
  ASSIGN_OR_RETURN(float epsilon, ctx.GetAttr<float>("epsilon"));
  const Tensor& dy = ctx.input(0);
  const Tensor& x = ctx.input(1);
  if (dy.dims() != x.dims()) {
    return ctx.Error("x and y_backprop must have same shape, but x has shape " +
                     DimsToString(x.dims()) + " and y_backprop has shape " +
                     DimsToString(dy.dims()));
  }
  ASSIGN_OR_RETURN(ChannelLayout l, Layout(ctx, x));
  const int64_t channels = l.channels;
  RETURN_IF_ERROR(CheckVector(ctx, 2, "scale", channels));
  RETURN_IF_ERROR(CheckVector(ctx, 3, "reserve_space_1", channels));
  RETURN_IF_ERROR(CheckVector(ctx, 4, "reserve_space_2", channels));
  const float* scale = Data<float>(ctx.input(2));
  const float* mean = Data<float>(ctx.input(3));
  const float* var = Data<float>(ctx.input(4));
  const int64_t n = x.num_elements();
  auto channel = [&](int64_t i) { return (i / l.inner) % channels; };
  std::vector<float> inv(channels);
  for (int64_t c = 0; c < channels; ++c) inv[c] = 1.0f / std::sqrt(var[c] + epsilon);
  std::vector<double> sum_dy(channels, 0), sum_dy_xhat(channels, 0);
  ASSIGN_OR_RETURN(Tensor * dx, ctx.allocate_output(0, x.dims()));
  RETURN_IF_ERROR(Dispatch<cwise::kFloating>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* g = Data<T>(dy);
    const T* in = Data<T>(x);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = channel(i);
      const float xhat = (static_cast<float>(in[i]) - mean[c]) * inv[c];
      sum_dy[c] += static_cast<float>(g[i]);
      sum_dy_xhat[c] += static_cast<float>(g[i]) * xhat;
    }
    T* o = MutableData<T>(*dx);
    for (int64_t i = 0; i < n; ++i) {
      const int64_t c = channel(i);
      const float gi = static_cast<float>(g[i]);
      if (!training) {
        o[i] = T(gi * scale[c] * inv[c]);
        continue;
      }
      const float xhat = (static_cast<float>(in[i]) - mean[c]) * inv[c];
      const float mean_dy = l.count ? static_cast<float>(sum_dy[c] / l.count) : 0.f;
      const float mean_dy_xhat = l.count ? static_cast<float>(sum_dy_xhat[c] / l.count) : 0.f;
      o[i] = T(scale[c] * inv[c] * (gi - mean_dy - xhat * mean_dy_xhat));
    }
    return OkStatus();
  }));
  auto put = [&](int i, const std::vector<double>& v) -> Status {
    ASSIGN_OR_RETURN(Tensor * t, ctx.allocate_output(i, {static_cast<int64_t>(v.size())}));
    for (size_t k = 0; k < v.size(); ++k) MutableData<float>(*t)[k] = static_cast<float>(v[k]);
    return OkStatus();
  };
  RETURN_IF_ERROR(put(1, sum_dy_xhat));
  RETURN_IF_ERROR(put(2, sum_dy));
  RETURN_IF_ERROR(put(3, {}));
  return put(4, {});
}

Status BatchNormShape(InferenceContext& c) {
  const PartialShape& x = c.input(0);
  c.set_output(0, x);
  int64_t channels = -1;
  if (!x.unknown_rank() && x.rank() >= 2) {
    ASSIGN_OR_RETURN(std::string format, c.GetAttr<std::string>("data_format"));
    channels = x.dim(format == "NCHW" || format == "NCDHW" ? 1 : x.rank() - 1);
  }
  for (int i = 1; i < c.num_outputs(); ++i) c.set_output(i, PartialShape({channels}));
  if (c.num_outputs() > 5) c.set_output(5, PartialShape::UnknownOfRank(1));
  return OkStatus();
}

Status BatchNormGradShape(InferenceContext& c) {
  const PartialShape& x = c.input(1);
  c.set_output(0, x);
  int64_t channels = -1;
  if (!x.unknown_rank() && x.rank() >= 2) {
    ASSIGN_OR_RETURN(std::string format, c.GetAttr<std::string>("data_format"));
    channels = x.dim(format == "NCHW" || format == "NCDHW" ? 1 : x.rank() - 1);
  }
  c.set_output(1, PartialShape({channels}));
  c.set_output(2, PartialShape({channels}));
  c.set_output(3, PartialShape::UnknownOfRank(1));
  c.set_output(4, PartialShape::UnknownOfRank(1));
  return OkStatus();
}

}  // namespace

void RegisterBatchNormOps(OpRegistry& r) {
  for (const char* name : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    const std::string op = name;
    const bool v1 = op == "FusedBatchNorm", v3 = op == "FusedBatchNormV3";
    const std::string u = v1 ? "T" : "U";
    OpRegistrationBuilder b(r, op);
    b.Input("x: T").Input("scale: " + u).Input("offset: " + u).Input("mean: " + u)
        .Input("variance: " + u)
        .Output("y: T").Output("batch_mean: " + u).Output("batch_variance: " + u)
        .Output("reserve_space_1: " + u).Output("reserve_space_2: " + u);
    if (v3) b.Output("reserve_space_3: U");
    b.Attr(v1 ? "T: {float}" : "T: {half, bfloat16, float}");
    if (!v1) b.Attr(v3 ? "U: {bfloat16, float}" : "U: {float}");
    b.Attr("epsilon: float = 0.0001").Attr("exponential_avg_factor: float = 1.0");
    b.Attr(v3 ? "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'"
              : "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
    b.Attr("is_training: bool = true").SetShapeFn(BatchNormShape).SetKernel(FusedBatchNormKernel);
  }
  for (const char* name : {"FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}) {
    const std::string op = name;
    const bool v1 = op == "FusedBatchNormGrad", v3 = op == "FusedBatchNormGradV3";
    const std::string u = v1 ? "T" : "U";
    OpRegistrationBuilder b(r, op);
    b.Input("y_backprop: T").Input("x: T").Input(v1 ? "scale: T" : "scale: float")
        .Input("reserve_space_1: " + u).Input("reserve_space_2: " + u);
    if (v3) b.Input("reserve_space_3: U");
    b.Output("x_backprop: T").Output("scale_backprop: " + u).Output("offset_backprop: " + u);
    if (v3) b.Output("reserve_space_4: U").Output("reserve_space_5: U");
    else b.Output("reserve_space_3: " + u).Output("reserve_space_4: " + u);
    b.Attr(v1 ? "T: {float}" : "T: {half, bfloat16, float}");
    if (!v1) b.Attr("U: {float}");
    b.Attr("epsilon: float = 0.0001");
    b.Attr(v3 ? "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'"
              : "data_format: {'NHWC', 'NCHW'} = 'NHWC'");
    b.Attr("is_training: bool = true").SetShapeFn(BatchNormGradShape)
        .SetKernel(FusedBatchNormGradKernel);
  }
  REGISTER_OP(r, "_FusedBatchNormEx")
      .Input("x: T")
      .Input("scale: U")
      .Input("offset: U")
      .Input("mean: U")
      .Input("variance: U")
      .Input("side_input: num_side_inputs * T")
      .Output("y: T")
      .Output("batch_mean: U")
      .Output("batch_variance: U")
      .Output("reserve_space_1: U")
      .Output("reserve_space_2: U")
      .Output("reserve_space_3: U")
      .Attr("T: {half, float, bfloat16}")
      .Attr("U: {float}")
      .Attr("epsilon: float = 0.0001")
      .Attr("exponential_avg_factor: float = 1.0")
      .Attr("num_side_inputs: int >= 0 = 0")
      .Attr("activation_mode: string = 'Identity'")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("is_training: bool = true")
      .SetShapeFn(BatchNormShape)
      .SetKernel(FusedBatchNormExKernel);
}

}  // namespace xlens::graph
