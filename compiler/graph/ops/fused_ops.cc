// Grappler's fused ops, as its remapper writes them into TensorFlow's runtime graphs:
// _FusedConv2D and _FusedMatMul (a Conv2D or MatMul followed by BiasAdd or FusedBatchNorm, an
// optional Add of a side input and an optional activation, in the order of the fused_ops attr)
// and _FusedBatchNormEx (FusedBatchNorm, an optional side input, then Identity or Relu, whose
// kernel is in batch_norm_ops.cc with the batch norms it extends). The
// convolution and the product are the Conv2D and MatMul kernels of the registry, called on the
// same node (the fused op has their attrs); the epilogue runs over their output in place, in
// float for the 16-bit types, as TensorFlow's CPU kernels compute it. With oneDNN on, grappler also
// writes _MklSwish, _MklFusedMish and _MklLayerNorm, which run here too.
#include <algorithm>
#include <cmath>
#include <string>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/fused_conv.h"
#include "compiler/graph/ops/onednn_kernels.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using cwise::ComputeType;
using cwise::Data;
using cwise::Dispatch;
using cwise::MutableData;

// The activations fused_ops may end with (named once when parsed, not per element).
enum class Activation {
  kNone, kRelu, kRelu6, kElu, kLeakyRelu, kTanh, kSigmoid, kGeluExact, kGeluApproximate,
  kHardSwish, kSwish
};

Activation ActivationNamed(const std::string& op) {
  static const std::pair<const char*, Activation> kNames[] = {
      {"Relu", Activation::kRelu},          {"Relu6", Activation::kRelu6},
      {"Elu", Activation::kElu},            {"LeakyRelu", Activation::kLeakyRelu},
      {"Tanh", Activation::kTanh},          {"Sigmoid", Activation::kSigmoid},
      {"GeluExact", Activation::kGeluExact}, {"GeluApproximate", Activation::kGeluApproximate},
      {"_FusedHardSwish", Activation::kHardSwish}, {"_FusedSwish", Activation::kSwish},
      {"_MklSwish", Activation::kSwish}};
  for (const auto& [name, a] : kNames)
    if (op == name) return a;
  return Activation::kNone;
}

// One step of the epilogue over the output's channels (its last dimension).
struct Epilogue {
  enum class Kind { kBias, kBatchNorm, kAdd, kActivation };
  Kind kind;
  Activation activation = Activation::kNone;
  int first_arg = 0;  // index among the node's inputs
};

// Reads fused_ops into steps; `first_arg` is the node input of args[0].
StatusOr<std::vector<Epilogue>> ParseFusedOps(const OpKernelContext& ctx, int first_arg,
                                              bool allow_batch_norm) {
  std::vector<std::string> ops;
  if (const AttrValue* v = FindAttr(ctx.attrs(), "fused_ops"); v != nullptr) ops = v->list().s;
  std::vector<Epilogue> steps;
  int arg = first_arg;
  auto describe = [&] {
    std::string s;
    for (const std::string& op : ops) s += (s.empty() ? "" : ", ") + op;
    return "[" + s + "]";
  };
  for (size_t i = 0; i < ops.size(); ++i) {
    const std::string& op = ops[i];
    if (i == 0 && op == "BiasAdd") {
      steps.push_back({Epilogue::Kind::kBias, Activation::kNone, arg++});
    } else if (i == 0 && op == "FusedBatchNorm" && allow_batch_norm) {
      steps.push_back({Epilogue::Kind::kBatchNorm, Activation::kNone, arg});
      arg += 4;
    } else if (i > 0 && op == "Add" && steps.back().kind != Epilogue::Kind::kActivation) {
      steps.push_back({Epilogue::Kind::kAdd, Activation::kNone, arg++});
    } else if (i > 0 && i + 1 == ops.size() && ActivationNamed(op) != Activation::kNone) {
      steps.push_back({Epilogue::Kind::kActivation, ActivationNamed(op), 0});
    } else {
      return ctx.Error("Unsupported fusion: fused_ops " + describe() +
                       " (xlens runs BiasAdd" + (allow_batch_norm ? " or FusedBatchNorm" : "") +
                       ", then an optional Add, then an optional activation)");
    }
  }
  if (steps.empty()) return ctx.Error("Fusion is not implemented: fused_ops is empty");
  if (arg != ctx.num_inputs()) {
    return ctx.Error("fused_ops " + describe() + " take " + std::to_string(arg - first_arg) +
                     " args, the node has " + std::to_string(ctx.num_inputs() - first_arg));
  }
  return steps;
}

// o[i] = f(o[i]) computed in C.
template <typename T, typename C, typename F>
void MapInPlace(T* o, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) o[i] = T(f(static_cast<C>(o[i])));
}

template <typename T, typename C>
void Activate(Activation a, T* o, int64_t n, C alpha) {
  switch (a) {
    case Activation::kRelu:
      return MapInPlace<T, C>(o, n, [](C x) { return x > C(0) ? x : C(0); });
    case Activation::kRelu6:
      return MapInPlace<T, C>(o, n, [](C x) { return std::min(std::max(x, C(0)), C(6)); });
    case Activation::kElu:
      return MapInPlace<T, C>(o, n, [](C x) { return x < C(0) ? std::exp(x) - C(1) : x; });
    case Activation::kLeakyRelu:
      return MapInPlace<T, C>(o, n, [alpha](C x) { return x > C(0) ? x : x * alpha; });
    case Activation::kTanh:
      return MapInPlace<T, C>(o, n, [](C x) { return std::tanh(x); });
    case Activation::kSigmoid:
      return MapInPlace<T, C>(o, n, [](C x) { return C(1) / (C(1) + std::exp(-x)); });
    case Activation::kGeluExact:
      return MapInPlace<T, C>(
          o, n, [](C x) { return C(0.5) * x * std::erfc(-x / std::sqrt(C(2))); });
    case Activation::kGeluApproximate:
      return MapInPlace<T, C>(o, n, [](C x) {
        const C k = std::sqrt(C(2) / C(3.14159265358979323846));
        return C(0.5) * x * (C(1) + std::tanh(k * (x + C(0.044715) * x * x * x)));
      });
    case Activation::kHardSwish:
      return MapInPlace<T, C>(
          o, n, [](C x) { return x * std::min(std::max(x + C(3), C(0)), C(6)) / C(6); });
    case Activation::kSwish:
      return MapInPlace<T, C>(o, n, [](C x) { return x / (C(1) + std::exp(-x)); });
    case Activation::kNone:
      return;
  }
}

// _MklSwish (x * sigmoid(x)) and _MklFusedMish (x * tanh(softplus(x))): grappler's oneDNN
// activation fusions.
template <bool kMish>
Status MklActivationKernel(OpKernelContext& ctx) {
  return Dispatch<cwise::kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    return cwise::UnaryOp<T, T>(ctx, [](T v) {
      const C x = static_cast<C>(v);
      if constexpr (kMish) return T(x * std::tanh(std::log1p(std::exp(x))));
      return T(x / (C(1) + std::exp(-x)));
    });
  });
}

// _MklLayerNorm: normalization over the last dimension (biased variance), then scale and
// offset over it, as grappler fuses Keras' LayerNormalization.
Status MklLayerNormKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(float epsilon, ctx.GetAttr<float>("epsilon"));
  if (x.rank() < 1) return ctx.Error("input must have rank >= 1, got a scalar");
  const int64_t depth = x.dim(x.rank() - 1);
  for (int i = 1; i <= 2; ++i) {
    if (ctx.input(i).rank() != 1 || ctx.input(i).dim(0) != depth) {
      return ctx.Error(std::string(i == 1 ? "scale" : "offset") + " must have shape [" +
                       std::to_string(depth) + "], got " + DimsToString(ctx.input(i).dims()));
    }
  }
  ASSIGN_OR_RETURN(Tensor * y, ctx.allocate_output(0, x.dims()));
  return Dispatch<cwise::kFloating>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* in = Data<T>(x);
    const T* scale = Data<T>(ctx.input(1));
    const T* offset = Data<T>(ctx.input(2));
    T* o = MutableData<T>(*y);
    const int64_t rows = depth == 0 ? 0 : x.num_elements() / depth;
    for (int64_t r = 0; r < rows; ++r) {
      const T* row = in + r * depth;
      double mean = 0, var = 0;
      for (int64_t c = 0; c < depth; ++c) mean += static_cast<float>(row[c]);
      mean /= depth;
      for (int64_t c = 0; c < depth; ++c) {
        const double d = static_cast<float>(row[c]) - mean;
        var += d * d;
      }
      var /= depth;
      const float inv = 1.0f / std::sqrt(static_cast<float>(var) + epsilon);
      for (int64_t c = 0; c < depth; ++c) {
        const float v = (static_cast<float>(row[c]) - static_cast<float>(mean)) * inv;
        o[r * depth + c] = T(v * static_cast<float>(scale[c]) + static_cast<float>(offset[c]));
      }
    }
    return OkStatus();
  });
}

// Applies `steps` to `out` ([..., channels]) in place.
Status RunEpilogue(OpKernelContext& ctx, const std::vector<Epilogue>& steps, Tensor& out) {
  const int64_t channels = out.rank() == 0 ? 1 : out.dim(out.rank() - 1);
  const int64_t n = out.num_elements();
  ASSIGN_OR_RETURN(float epsilon, GetFloatAttr(ctx.attrs(), "epsilon", ctx.name()));
  ASSIGN_OR_RETURN(float alpha, GetFloatAttr(ctx.attrs(), "leakyrelu_alpha", ctx.name()));
  for (const Epilogue& step : steps) {
    const int args = step.kind == Epilogue::Kind::kBatchNorm ? 4
                     : step.kind == Epilogue::Kind::kActivation ? 0
                                                                : 1;
    for (int a = 0; a < args; ++a) {
      const Tensor& t = ctx.input(step.first_arg + a);
      const bool ok = step.kind == Epilogue::Kind::kAdd
                          ? t.dims() == out.dims()
                          : t.rank() == 1 && t.dim(0) == channels;
      if (!ok) {
        return ctx.Error("fused arg " + std::to_string(step.first_arg + a) + " has shape " +
                         DimsToString(t.dims()) + ", expected " +
                         (step.kind == Epilogue::Kind::kAdd ? DimsToString(out.dims())
                                                            : DimsToString({channels})));
      }
      if (t.dtype() != out.dtype()) {
        return ctx.Error("fused arg " + std::to_string(step.first_arg + a) + " is " +
                         DataTypeName(t.dtype()) + ", the output " + DataTypeName(out.dtype()));
      }
    }
  }
  return Dispatch<cwise::kFloating>(ctx, out.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    T* o = MutableData<T>(out);
    auto arg = [&](int i) { return Data<T>(ctx.input(i)); };
    for (const Epilogue& step : steps) {
      switch (step.kind) {
        case Epilogue::Kind::kBias: {
          const T* bias = arg(step.first_arg);
          for (int64_t i = 0; i < n; ++i)
            o[i] = T(static_cast<C>(o[i]) + static_cast<C>(bias[i % channels]));
          break;
        }
        case Epilogue::Kind::kBatchNorm: {
          const T* scale = arg(step.first_arg);
          const T* offset = arg(step.first_arg + 1);
          const T* mean = arg(step.first_arg + 2);
          const T* variance = arg(step.first_arg + 3);
          std::vector<C> factor(channels);
          for (int64_t c = 0; c < channels; ++c) {
            factor[c] = static_cast<C>(scale[c]) /
                        std::sqrt(static_cast<C>(variance[c]) + static_cast<C>(epsilon));
          }
          for (int64_t i = 0; i < n; ++i) {
            const int64_t c = i % channels;
            o[i] = T((static_cast<C>(o[i]) - static_cast<C>(mean[c])) * factor[c] +
                     static_cast<C>(offset[c]));
          }
          break;
        }
        case Epilogue::Kind::kAdd: {
          const T* side = arg(step.first_arg);
          for (int64_t i = 0; i < n; ++i)
            o[i] = T(static_cast<C>(o[i]) + static_cast<C>(side[i]));
          break;
        }
        case Epilogue::Kind::kActivation:
          Activate<T, C>(step.activation, o, n, C(alpha));
          break;
      }
    }
    return OkStatus();
  });
}

// Runs the kernel of `op` (Conv2D, MatMul; AddV2) on this node with `inputs` (default: its
// first two).
StatusOr<Tensor> RunBaseKernel(OpKernelContext& ctx, const char* op, std::vector<Tensor> inputs = {}) {
  const OpRegistration* reg = OpRegistry::Global().Find(op);
  if (reg == nullptr || !reg->kernel) return ctx.Error(std::string("no kernel for ") + op);
  if (inputs.empty()) inputs = {ctx.input(0), ctx.input(1)};
  // The node's state: the convolution keeps its packed constant filter there.
  OpKernelContext base(ctx.node(), std::move(inputs), {}, ctx.resources(), ctx.state(), ctx.pool());
  base.set_max_tensor_bytes(ctx.max_tensor_bytes());
  base.set_graph(ctx.graph());
  RETURN_IF_ERROR(reg->kernel(base));
  return base.output(0);
}

// A float convolution whose epilogue is a bias, an optional side input and an optional
// activation that oneDNN has: the whole node as one oneDNN call, the epilogue as its post-ops
// (applied to each block of the output while it is in cache). False where that does not apply.
StatusOr<bool> FusedConvOneDnn(OpKernelContext& ctx, const std::vector<Epilogue>& steps) {
  if (steps.empty() || steps[0].kind != Epilogue::Kind::kBias) return false;
  onednn::PostOps post;
  int side = -1;
  for (size_t i = 1; i < steps.size(); ++i) {
    if (steps[i].kind == Epilogue::Kind::kAdd) {
      post.sum = true;
      side = steps[i].first_arg;
    } else if (steps[i].kind == Epilogue::Kind::kActivation) {
      switch (steps[i].activation) {
        case Activation::kRelu: post.eltwise = onednn::Eltwise::kRelu; break;
        case Activation::kRelu6: post.eltwise = onednn::Eltwise::kRelu6; break;
        case Activation::kElu: post.eltwise = onednn::Eltwise::kElu; break;
        case Activation::kLeakyRelu: {
          ASSIGN_OR_RETURN(float alpha, GetFloatAttr(ctx.attrs(), "leakyrelu_alpha", ctx.name()));
          post.eltwise = onednn::Eltwise::kLeakyRelu;
          post.alpha = alpha;
          break;
        }
        case Activation::kTanh: post.eltwise = onednn::Eltwise::kTanh; break;
        case Activation::kSigmoid: post.eltwise = onednn::Eltwise::kSigmoid; break;
        default: return false;
      }
    } else {
      return false;
    }
  }
  return FusedConv2DOneDnn(ctx, steps[0].first_arg, side, post);
}

// RunEpilogue, where a side input that broadcasts (the graph's Add was fused where the shapes
// were not all known) is added by the Add's own kernel between the steps before and after it.
Status RunEpilogueBroadcasting(OpKernelContext& ctx, std::vector<Epilogue> steps, Tensor& out) {
  auto add = std::find_if(steps.begin(), steps.end(), [&](const Epilogue& e) {
    return e.kind == Epilogue::Kind::kAdd && ctx.input(e.first_arg).dims() != out.dims();
  });
  if (add != steps.end()) {
    RETURN_IF_ERROR(RunEpilogue(ctx, std::vector<Epilogue>(steps.begin(), add), out));
    ASSIGN_OR_RETURN(out, RunBaseKernel(ctx, "AddV2", {out, ctx.input(add->first_arg)}));
    steps.erase(steps.begin(), add + 1);
  }
  return RunEpilogue(ctx, steps, out);
}

// A float product of matrices with a bias first: one oneDNN call with the bias, the rest of the
// epilogue after. False where
// that does not apply.
StatusOr<bool> FusedMatMulOneDnn(OpKernelContext& ctx, std::vector<Epilogue>& steps) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  if (!onednn::Available() || a.dtype() != DT_FLOAT || b.dtype() != DT_FLOAT || a.rank() != 2 ||
      b.rank() != 2 || steps.empty() || steps[0].kind != Epilogue::Kind::kBias) {
    return false;
  }
  ASSIGN_OR_RETURN(bool ta, ctx.GetAttr<bool>("transpose_a"));
  ASSIGN_OR_RETURN(bool tb, ctx.GetAttr<bool>("transpose_b"));
  const int64_t m = ta ? a.dim(1) : a.dim(0), k = ta ? a.dim(0) : a.dim(1);
  const int64_t n = tb ? b.dim(0) : b.dim(1);
  const Tensor& bias = ctx.input(steps[0].first_arg);
  if ((tb ? b.dim(1) : b.dim(0)) != k || m == 0 || n == 0 || k == 0 || bias.dtype() != DT_FLOAT ||
      bias.dims() != std::vector<int64_t>{n}) {
    return false;
  }
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {m, n}));
  Status status = onednn::MatMul(Data<float>(a), ta, Data<float>(b), tb, m, k, n, Data<float>(bias),
                                 MutableData<float>(*out), ctx.pool());
  if (!status.ok()) return ctx.Error(status.message());
  steps.erase(steps.begin());
  return true;
}

template <bool kConv>
Status FusedKernel(OpKernelContext& ctx) {
  if constexpr (kConv) {
    ASSIGN_OR_RETURN(int64_t host_args, IntAttr(ctx, "num_host_args"));
    if (host_args != 0) {
      return ctx.Error("host_args (the int8 convolution's scales) are not supported on the CPU");
    }
  }
  ASSIGN_OR_RETURN(std::vector<Epilogue> steps, ParseFusedOps(ctx, 2, /*allow_batch_norm=*/kConv));
  if constexpr (kConv) {
    ASSIGN_OR_RETURN(bool ran, FusedConvOneDnn(ctx, steps));
    if (ran) return OkStatus();
  } else {
    ASSIGN_OR_RETURN(bool ran, FusedMatMulOneDnn(ctx, steps));
    if (ran) {
      // The rest of the epilogue (a side input, an activation) over the product.
      Tensor out = ctx.output(0);
      RETURN_IF_ERROR(RunEpilogueBroadcasting(ctx, std::move(steps), out));
      ctx.set_output(0, std::move(out));
      return OkStatus();
    }
  }
  ASSIGN_OR_RETURN(Tensor out, RunBaseKernel(ctx, kConv ? "Conv2D" : "MatMul"));
  RETURN_IF_ERROR(RunEpilogueBroadcasting(ctx, std::move(steps), out));
  ctx.set_output(0, std::move(out));
  return OkStatus();
}

Status FusedConv2DShape(InferenceContext& c) {
  const OpRegistration* conv = OpRegistry::Global().Find("Conv2D");
  return conv->shape_fn(c);
}

Status FusedMatMulShape(InferenceContext& c) {
  const OpRegistration* matmul = OpRegistry::Global().Find("MatMul");
  return matmul->shape_fn(c);
}

}  // namespace

void RegisterFusedOps(OpRegistry& r) {
  for (const char* name : {"_MklSwish", "_MklFusedMish"}) {
    const bool mish = std::string(name) == "_MklFusedMish";
    REGISTER_OP(r, name)
        .Input("features: T")
        .Output("activations: T")
        .Attr(mish ? "T: {bfloat16, float, half}" : "T: {float, bfloat16, half} = DT_FLOAT")
        .SetShapeFn(shape_fn::UnchangedShape)
        .SetKernel(mish ? MklActivationKernel<true> : MklActivationKernel<false>)
        .NoXlaKernel();
  }
  REGISTER_OP(r, "_MklLayerNorm")
      .Input("x: T")
      .Input("scale: T")
      .Input("offset: T")
      .Output("y: T")
      .Attr("T: {float, bfloat16, half}")
      .Attr("epsilon: float = 0.001")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(MklLayerNormKernel)
      .NoXlaKernel();
  // TensorFlow's XLA kernel for _FusedConv2D takes int8 and qint8 only (cuDNN's int8
  // convolutions): a float one is not clustered, and xlens has no lowering for it.
  REGISTER_OP(r, "_FusedConv2D")
      .Input("input: T")
      .Input("filter: T")
      .Input("args: TArgs")
      .Input("host_args: num_host_args * float")
      .Output("output: T")
      .Attr("T: {half, float, double, int8, qint8}")
      .Attr("TArgs: list(type) >= 1")
      .Attr("num_args: int >= 0")
      .Attr("num_host_args: int >= 0 = 0")
      .Attr("strides: list(int)")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
      .Attr("filter_format: {'HWIO', 'OIHW', 'OIHW_VECT_I'} = 'HWIO'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]")
      .Attr("use_cudnn_on_gpu: bool = true")
      .Attr("fused_ops: list(string) = []")
      .Attr("epsilon: float = 0.0001")
      .Attr("leakyrelu_alpha: float = 0.2")
      .SetShapeFn(FusedConv2DShape)
      .SetKernel(FusedKernel<true>)
      .NoXlaKernel();
  REGISTER_OP(r, "_FusedMatMul")
      .Input("a: T")
      .Input("b: T")
      .Input("args: num_args * T")
      .Output("product: T")
      .Attr("transpose_a: bool = false")
      .Attr("transpose_b: bool = false")
      .Attr("T: {bfloat16, half, float}")
      .Attr("num_args: int >= 0")
      .Attr("fused_ops: list(string) = []")
      .Attr("epsilon: float = 0.0001")
      .Attr("leakyrelu_alpha: float = 0.2")
      .SetShapeFn(FusedMatMulShape)
      .SetKernel(FusedKernel<false>)
      .NoXlaKernel();
  // _FusedBatchNormEx lives with the batch norms it extends (batch_norm_ops.cc).
  RegisterBatchNormOps(r);
}

}  // namespace xlens::graph
