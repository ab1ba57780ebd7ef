// TensorFlow's neural-network ops (tensorflow/core/ops/nn_ops.cc): activations and their
// gradients, Softmax and LogSoftmax, BiasAdd, the softmax cross-entropy losses, Conv2D and its two
// backprops, max and average pooling with their gradients, L2Loss and InTopKV2. Kernels compute as
// TensorFlow's CPU kernels do: in the element type, 16-bit floats in float; softmax and the
// losses subtract the row maximum first; convolutions are one matrix product per image
// (im2col), and only the NHWC layout runs on the CPU, as in TensorFlow.
#include <algorithm>
#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/remapper.h"
#include "compiler/graph/ops/conv_geometry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/fused_conv.h"
#include "compiler/graph/ops/math_ops_kernels.h"
#include "compiler/graph/ops/onednn_kernels.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/support/thread_pool.h"

namespace xlens::graph {
namespace {

using cwise::ComputeType;
using cwise::Data;
using cwise::Dispatch;
using cwise::LoadAs;
using cwise::MutableData;
using cwise::StoreAs;
using cwise::UnaryOp;

template <typename C>
using Matrix = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

constexpr double kSeluScale = 1.0507009873554804934193349852946;
constexpr double kSeluScaleAlpha = 1.7580993408473768599402175208123;

// ----- Activations ------------------------------------------------------------------------------

// ReluGrad on floats: o = g * (f > 0), where `o` may be g's own buffer (a forwarded input). Two
// loops on __restrict pointers, out of line, with the mask a float made from the comparison: the
// shape GCC vectorises (a single loop with a run-time overlap check takes its scalar version when
// o == g, which a forwarded gradient always is, and the scalar loop's branch on the mask is
// mispredicted half the time: ReluGrad ran at 1.5 ns an element, twelve times Relu's time).
// dy * 1 is dy and dy * 0 is TensorFlow's dy * mask bit for bit (NaN stays NaN, -x gives -0).
__attribute__((noinline)) void ReluGradInPlace(float* __restrict io, const float* __restrict f, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float m = f[i] > 0.f;
    io[i] *= m;
  }
}
__attribute__((noinline)) void ReluGradApart(const float* __restrict g, const float* __restrict f,
                                             float* __restrict o, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float m = f[i] > 0.f;
    o[i] = g[i] * m;
  }
}

// Relu and Relu6 also run on integers.
template <bool kSix>
Status ReluKernel(OpKernelContext& ctx) {
  const DataType dtype = ctx.input(0).dtype();
  if (dtype == DT_FLOAT) {
    // The common case as a loop the compiler vectorises (NaN stays NaN, as in TensorFlow).
    return UnaryOp<float, float>(ctx, [](float x) {
      float r = x > 0.f ? x : (x == x ? 0.f : x);
      if (kSix) r = r < 6.f ? r : 6.f;
      return r;
    });
  }
  if (DataTypeIsFloating(dtype)) return cwise::FloatUnaryKernel(ctx, kSix ? "Relu6" : "Relu");
  return Dispatch<cwise::kIntegers>(ctx, dtype, [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    return UnaryOp<T, T>(ctx, [](T x) {
      T r = x > T(0) ? x : T(0);
      if (kSix && r > T(6)) r = T(6);
      return r;
    });
  });
}

Status LeakyReluKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(float alpha, GetFloatAttr(ctx.attrs(), "alpha", ctx.name()));
  return Dispatch<cwise::kFloating>(ctx, ctx.input(0).dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T a = T(alpha);
    return UnaryOp<T, T>(ctx, [a](T x) { return x > T(0) ? x : x * a; });
  });
}

// The activation gradients: f(gradients, features-or-outputs) of two same-shape operands.
enum class ActGrad { kRelu, kRelu6, kElu, kSelu, kLeakyRelu, kSoftplus };

template <ActGrad kGrad>
Status ActivationGradKernel(OpKernelContext& ctx) {
  const Tensor& g = ctx.input(0);
  const Tensor& f = ctx.input(1);
  if (g.dims() != f.dims()) {
    return ctx.Error("gradients and features must have the same shape: " +
                     DimsToString(g.dims()) + " vs. " + DimsToString(f.dims()));
  }
  float alpha = 0;
  if constexpr (kGrad == ActGrad::kLeakyRelu) {
    ASSIGN_OR_RETURN(alpha, GetFloatAttr(ctx.attrs(), "alpha", ctx.name()));
  }
  constexpr unsigned kSet = kGrad == ActGrad::kRelu || kGrad == ActGrad::kRelu6
                                ? cwise::kReal
                                : cwise::kFloating;
  return Dispatch<kSet>(ctx, g.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.forward_input_or_allocate_output(0, 0, g.dims()));
    const T* gd = Data<T>(g);
    const T* fd = Data<T>(f);
    T* o = MutableData<T>(*out);
    const int64_t n = g.num_elements();
    if constexpr (kGrad == ActGrad::kRelu && std::is_same_v<T, float>) {
      if (o == gd) {
        ReluGradInPlace(o, fd, n);
      } else {
        ReluGradApart(gd, fd, o, n);
      }
      return OkStatus();
    }
    const T a = T(alpha);
    for (int64_t i = 0; i < n; ++i) {
      const T x = fd[i], dy = gd[i];
      // TensorFlow multiplies by the mask rather than selecting, so a NaN or infinite gradient
      // where the unit is off still gives NaN (what a loss scaler's overflow check looks for),
      // and a negative one gives -0.
      if constexpr (kGrad == ActGrad::kRelu) {
        o[i] = dy * (x > T(0) ? T(1) : T(0));
      } else if constexpr (kGrad == ActGrad::kRelu6) {
        o[i] = dy * (x > T(0) && x < T(6) ? T(1) : T(0));
      } else if constexpr (kGrad == ActGrad::kElu) {
        o[i] = x < T(0) ? (x + T(1)) * dy : dy;
      } else if constexpr (kGrad == ActGrad::kSelu) {
        o[i] = x < T(0) ? dy * (x + T(kSeluScaleAlpha)) : dy * T(kSeluScale);
      } else if constexpr (kGrad == ActGrad::kLeakyRelu) {
        o[i] = x > T(0) ? dy : dy * a;
      } else {
        using C = ComputeType<T>;
        o[i] = T(static_cast<C>(dy) / (std::exp(-static_cast<C>(x)) + C(1)));
      }
    }
    return OkStatus();
  });
}

// ----- Softmax and the losses -------------------------------------------------------------------

// Softmax, the losses and AvgPool compute in ComputeType<T> on loaded copies: their math is a
// function of the compute type alone, instantiated once for float (half, bfloat16 and float
// share it) and once for double; only the loads and stores are per element type.

// Softmax (or log-softmax) of each row of `classes` values, in place.
template <bool kLog, typename C>
void SoftmaxRows(std::vector<C>& v, int64_t rows, int64_t classes) {
  for (int64_t r = 0; r < rows; ++r) {
    C* row = v.data() + r * classes;
    const C max = *std::max_element(row, row + classes);
    for (int64_t j = 0; j < classes; ++j) row[j] -= max;
    if constexpr (kLog) {
      std::vector<C> e(classes);
      for (int64_t j = 0; j < classes; ++j) e[j] = std::exp(row[j]);
      const C log_sum = std::log(cwise::PairwiseSum(e.data(), classes));
      for (int64_t j = 0; j < classes; ++j) row[j] -= log_sum;
    } else {
      for (int64_t j = 0; j < classes; ++j) row[j] = std::exp(row[j]);
      // TensorFlow multiplies by the reciprocal of the sum.
      const C inv = C(1) / cwise::PairwiseSum(row, classes);
      for (int64_t j = 0; j < classes; ++j) row[j] *= inv;
    }
  }
}

template <bool kLog>
Status SoftmaxKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.rank() < 1) return ctx.Error("logits must have >= 1 dimension, got " +
                                     DimsToString(x.dims()));
  return Dispatch<cwise::kFloating>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, x.dims()));
    const int64_t classes = x.dim(x.rank() - 1);
    if (classes == 0) return OkStatus();
    std::vector<C> v = LoadAs<C, T>(x);
    SoftmaxRows<kLog>(v, x.num_elements() / classes, classes);
    StoreAs<T>(v, *out);
    return OkStatus();
  });
}

// The loss and backprop of each row of the softmax cross-entropy.
template <typename C>
void SoftmaxXentRows(const std::vector<C>& logits, const std::vector<C>& labels, int64_t batch,
                     int64_t classes, std::vector<C>& loss, std::vector<C>& backprop) {
  std::vector<C> terms(classes);
  for (int64_t b = 0; b < batch && classes > 0; ++b) {
    const C* row = logits.data() + b * classes;
    const C* y = labels.data() + b * classes;
    C* bp = backprop.data() + b * classes;
    const C max = *std::max_element(row, row + classes);
    for (int64_t j = 0; j < classes; ++j) bp[j] = row[j] - max;
    for (int64_t j = 0; j < classes; ++j) terms[j] = std::exp(bp[j]);
    const C sum = cwise::PairwiseSum(terms.data(), classes);
    const C log_sum = std::log(sum);
    // loss = sum(labels * (log(sum(exp(shifted))) - shifted)), as TensorFlow's xent functor.
    for (int64_t j = 0; j < classes; ++j) terms[j] = y[j] * (log_sum - bp[j]);
    loss[b] = cwise::PairwiseSum(terms.data(), classes);
    for (int64_t j = 0; j < classes; ++j) bp[j] = std::exp(bp[j]) / sum - y[j];
  }
}

Status SoftmaxXentKernel(OpKernelContext& ctx) {
  const Tensor& logits_in = ctx.input(0);
  const Tensor& labels_in = ctx.input(1);
  // Logits and labels broadcast against each other (both rank 2 after broadcasting).
  auto bc = cwise::MakeBroadcast({logits_in.dims(), labels_in.dims()});
  if (!bc.ok() || bc->out_dims.size() != 2 || logits_in.rank() > 2 || labels_in.rank() > 2) {
    return ctx.Error("logits and labels must be broadcastable to a 2-D shape: logits_size=" +
                     DimsToString(logits_in.dims()) + " labels_size=" +
                     DimsToString(labels_in.dims()));
  }
  const int64_t batch = bc->out_dims[0], classes = bc->out_dims[1];
  return Dispatch<cwise::kFloating>(ctx, logits_in.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<C> logits(batch * classes), labels(batch * classes);
    const T* ld = Data<T>(logits_in);
    const T* yd = Data<T>(labels_in);
    cwise::ForEachBroadcast<2>(*bc, [&](int64_t i, const std::array<int64_t, 2>& off) {
      logits[i] = static_cast<C>(ld[off[0]]);
      labels[i] = static_cast<C>(yd[off[1]]);
    });
    ASSIGN_OR_RETURN(Tensor * loss_t, ctx.allocate_output(0, {batch}));
    std::vector<C> loss(batch), backprop(batch * classes);
    SoftmaxXentRows(logits, labels, batch, classes, loss, backprop);
    StoreAs<T>(loss, *loss_t);
    ASSIGN_OR_RETURN(Tensor * bp_t, ctx.allocate_output(1, {batch, classes}));
    StoreAs<T>(backprop, *bp_t);
    return OkStatus();
  });
}

// The loss of each row of logits against its label, and the backprop in place of the logits.
template <typename C>
void SparseSoftmaxXentRows(std::vector<C>& bp, const std::vector<int64_t>& labels, int64_t batch,
                           int64_t classes, std::vector<C>& loss) {
  std::vector<C> terms(classes);
  for (int64_t b = 0; b < batch; ++b) {
    C* row = bp.data() + b * classes;
    const C max = *std::max_element(row, row + classes);
    for (int64_t j = 0; j < classes; ++j) row[j] -= max;
    for (int64_t j = 0; j < classes; ++j) terms[j] = std::exp(row[j]);
    const C sum = cwise::PairwiseSum(terms.data(), classes);
    loss[b] = std::log(sum) - row[labels[b]];
    for (int64_t j = 0; j < classes; ++j)
      row[j] = std::exp(row[j]) / sum - (j == labels[b] ? C(1) : C(0));
  }
}

Status SparseSoftmaxXentKernel(OpKernelContext& ctx) {
  const Tensor& logits_in = ctx.input(0);
  const Tensor& labels_in = ctx.input(1);
  if (logits_in.rank() != 2)
    return ctx.Error("logits must be 2-D, but got shape " + DimsToString(logits_in.dims()));
  if (labels_in.rank() != 1)
    return ctx.Error("labels must be 1-D, but got shape " + DimsToString(labels_in.dims()));
  const int64_t batch = logits_in.dim(0), classes = logits_in.dim(1);
  if (labels_in.dim(0) != batch) {
    return ctx.Error("logits and labels must have the same first dimension, got logits shape " +
                     DimsToString(logits_in.dims()) + " and labels shape " +
                     DimsToString(labels_in.dims()));
  }
  if (classes == 0 && batch > 0)
    return ctx.Error("Must have at least one class, but got logits shape " +
                     DimsToString(logits_in.dims()));
  const std::vector<int64_t> labels = labels_in.AsInt64Vector();
  for (int64_t label : labels) {
    if (label < 0 || label >= classes) {
      std::string values;
      for (int64_t l : labels) values += (values.empty() ? "" : " ") + std::to_string(l);
      return ctx.Error("Received a label value of " + std::to_string(label) +
                       " which is outside the valid range of [0, " + std::to_string(classes) +
                       ").  Label values: " + values);
    }
  }
  return Dispatch<cwise::kFloating>(ctx, logits_in.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    std::vector<C> bp = LoadAs<C, T>(logits_in);
    std::vector<C> loss(batch);
    SparseSoftmaxXentRows(bp, labels, batch, classes, loss);
    ASSIGN_OR_RETURN(Tensor * loss_t, ctx.allocate_output(0, {batch}));
    StoreAs<T>(loss, *loss_t);
    ASSIGN_OR_RETURN(Tensor * bp_t, ctx.allocate_output(1, {batch, classes}));
    StoreAs<T>(bp, *bp_t);
    return OkStatus();
  });
}

// ----- BiasAdd ---------------------------------------------------------------------------------

// The channel axis of a data_format ("NHWC": last, "NCHW": 1 for rank >= 3).
StatusOr<int64_t> ChannelAxis(const AttrMap& attrs, const std::string& node, int64_t rank) {
  ASSIGN_OR_RETURN(std::string format, GetStringAttr(attrs, "data_format", node));
  if (format == "NCHW" && rank >= 3) return int64_t{1};
  return rank - 1;
}

Status BiasAddKernel(OpKernelContext& ctx) {
  const Tensor& value = ctx.input(0);
  const Tensor& bias = ctx.input(1);
  if (value.rank() < 2)
    return ctx.Error("Input tensor must be at least 2D: " + DimsToString(value.dims()));
  if (bias.rank() != 1) return ctx.Error("Biases must be 1D: " + DimsToString(bias.dims()));
  ASSIGN_OR_RETURN(int64_t axis, ChannelAxis(ctx.attrs(), ctx.name(), value.rank()));
  const int64_t channels = value.dim(axis);
  if (bias.dim(0) != channels) {
    return ctx.Error("Must provide as many biases as the channel dimension of the input tensor: " +
                     DimsToString(bias.dims()) + " vs. " + DimsToString(value.dims()));
  }
  int64_t inner = 1;
  for (int64_t d = axis + 1; d < value.rank(); ++d) inner *= value.dim(d);
  return Dispatch<cwise::kNumeric>(ctx, value.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.forward_input_or_allocate_output(0, 0, value.dims()));
    const T* v = Data<T>(value);
    const T* b = Data<T>(bias);
    T* o = MutableData<T>(*out);
    if (inner == 1 && channels > 0) {
      // Channels last (NHWC): one pass per row of `channels`, vectorised.
      for (int64_t row = 0, rows = value.num_elements() / channels; row < rows; ++row) {
        const T* vr = v + row * channels;
        T* orow = o + row * channels;
        for (int64_t c = 0; c < channels; ++c) orow[c] = vr[c] + b[c];
      }
      return OkStatus();
    }
    for (int64_t i = 0; i < value.num_elements(); ++i) o[i] = v[i] + b[(i / inner) % channels];
    return OkStatus();
  });
}

Status BiasAddGradKernel(OpKernelContext& ctx) {
  const Tensor& dy = ctx.input(0);
  if (dy.rank() < 2)
    return ctx.Error("Input tensor must be at least 2D: " + DimsToString(dy.dims()));
  ASSIGN_OR_RETURN(int64_t axis, ChannelAxis(ctx.attrs(), ctx.name(), dy.rank()));
  if (dy.dtype() == DT_FLOAT && axis == dy.rank() - 1 && dy.dim(axis) > 0) {
    // Channels last: every row of `channels` added into per-channel sums, in double (closer to
    // the exact sum than TensorFlow's float tree), one vectorised pass.
    const int64_t channels = dy.dim(axis), rows = dy.num_elements() / channels;
    std::vector<double> sum(channels, 0.0);
    const float* v = Data<float>(dy);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < channels; ++c) sum[c] += v[r * channels + c];
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {channels}));
    float* o = MutableData<float>(*out);
    for (int64_t c = 0; c < channels; ++c) o[c] = static_cast<float>(sum[c]);
    return OkStatus();
  }
  std::vector<int64_t> axes;
  for (int64_t d = 0; d < dy.rank(); ++d)
    if (d != axis) axes.push_back(d);
  ASSIGN_OR_RETURN(cwise::Reduction r, cwise::MakeReduction(dy.dims(), axes));
  return Dispatch<cwise::kNumeric>(ctx, dy.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {dy.dim(axis)}));
    T* o = MutableData<T>(*out);
    cwise::ForEachReduction(r, Data<T>(dy), [&](int64_t i, const T* v, int64_t n) {
      if constexpr (cwise::kIsHalf<T>) {
        std::vector<float> f(n);
        for (int64_t k = 0; k < n; ++k) f[k] = static_cast<float>(v[k]);
        o[i] = T(cwise::PairwiseSum(f.data(), n));
      } else {
        o[i] = cwise::PairwiseSum(v, n);
      }
    });
    return OkStatus();
  });
}

// ----- Convolution and pooling geometry -----------------------------------------------------------

// One spatial dimension of a sliding window: TensorFlow's GetWindowedOutputSizeVerbose. Unknown
// input sizes (-1) give an unknown output size.
struct Window {
  int64_t out = -1, pad_before = 0, pad_after = 0;
};

StatusOr<Window> WindowedOutputSize(int64_t in, int64_t k, int64_t dilation, int64_t stride,
                                    const std::string& padding, int64_t explicit_before,
                                    int64_t explicit_after) {
  if (stride <= 0) return Status::Error("Stride must be > 0, but got " + std::to_string(stride));
  if (dilation <= 0)
    return Status::Error("Dilation rate must be >= 1, but got " + std::to_string(dilation));
  Window w;
  if (in < 0 || k < 0) return w;
  const int64_t effective = (k - 1) * dilation + 1;
  if (padding == "VALID") {
    w.out = (in - effective + stride) / stride;
  } else if (padding == "SAME") {
    w.out = (in + stride - 1) / stride;
    const int64_t needed = std::max<int64_t>(0, (w.out - 1) * stride + effective - in);
    w.pad_before = needed / 2;
    w.pad_after = needed - w.pad_before;
  } else {
    w.out = (in + explicit_before + explicit_after - effective + stride) / stride;
    w.pad_before = explicit_before;
    w.pad_after = explicit_after;
  }
  if (w.out < 0) {
    return Status::Error("Computed output size would be negative: " + std::to_string(w.out) +
                         " [input_size: " + std::to_string(in) +
                         ", effective_filter_size: " + std::to_string(effective) +
                         ", stride: " + std::to_string(stride) + "]");
  }
  return w;
}

// The attrs of a 2-D convolution or pooling in NHWC, checked as TensorFlow checks them.
struct Conv2DParams {
  int64_t stride_rows = 1, stride_cols = 1, dil_rows = 1, dil_cols = 1;
  int64_t ksize_rows = 1, ksize_cols = 1;  // pooling only
  std::string padding;
  std::vector<int64_t> explicit_paddings;
};

StatusOr<Conv2DParams> GetConv2DParams(const AttrMap& attrs, const std::string& node,
                                       bool pooling) {
  Conv2DParams p;
  ASSIGN_OR_RETURN(std::string format, GetStringAttr(attrs, "data_format", node));
  if (format != "NHWC") {
    return Status::Error("only the NHWC data_format runs on the CPU (as in TensorFlow), got " +
                         format);
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, GetIntListAttr(attrs, "strides", node));
  if (strides.size() != 4)
    return Status::Error("Sliding window strides field must specify 4 dimensions");
  if (strides[0] != 1 || strides[3] != 1) {
    return Status::Error(
        "Current implementation does not yet support strides in the batch and depth "
        "dimensions.");
  }
  p.stride_rows = strides[1];
  p.stride_cols = strides[2];
  if (pooling) {
    ASSIGN_OR_RETURN(std::vector<int64_t> ksize, GetIntListAttr(attrs, "ksize", node));
    if (ksize.size() != 4)
      return Status::Error("Sliding window ksize field must specify 4 dimensions");
    if (ksize[0] != 1 || ksize[3] != 1)
      return Status::Error("Pooling is not yet supported on the batch nor depth dimension.");
    p.ksize_rows = ksize[1];
    p.ksize_cols = ksize[2];
    for (int64_t k : ksize)
      if (k <= 0) return Status::Error("Sliding window ksize must be positive.");
  } else if (FindAttr(attrs, "dilations") != nullptr) {
    ASSIGN_OR_RETURN(std::vector<int64_t> dilations, GetIntListAttr(attrs, "dilations", node));
    if (dilations.size() != 4)
      return Status::Error("Sliding window dilations field must specify 4 dimensions");
    if (dilations[0] != 1 || dilations[3] != 1) {
      return Status::Error(
          "Current implementation does not yet support dilations in the batch and depth "
          "dimensions.");
    }
    p.dil_rows = dilations[1];
    p.dil_cols = dilations[2];
  }
  ASSIGN_OR_RETURN(p.padding, GetStringAttr(attrs, "padding", node));
  if (p.padding == "EXPLICIT") {
    ASSIGN_OR_RETURN(p.explicit_paddings, GetIntListAttr(attrs, "explicit_paddings", node));
    if (p.explicit_paddings.size() != 8) {
      return Status::Error("explicit_paddings attribute must contain 8 values, but got: " +
                           std::to_string(p.explicit_paddings.size()));
    }
    for (int64_t v : p.explicit_paddings)
      if (v < 0) return Status::Error("All elements of explicit_paddings must be nonnegative");
  } else {
    p.explicit_paddings.assign(8, 0);
  }
  return p;
}

// The full geometry of one convolution or pooling: NHWC input, HWIO filter. A grouped
// convolution (TensorFlow's Conv2D with an input depth a multiple of the filter's) has `groups`
// blocks of in_depth / groups input channels, each convolved with its block of out_depth / groups
// filters.
struct Conv2DDims {
  int64_t batch, in_rows, in_cols, in_depth;
  int64_t k_rows, k_cols, out_depth;
  Window rows, cols;
  int64_t groups = 1;
};

StatusOr<Conv2DDims> ComputeConv2DDims(const Conv2DParams& p, const std::vector<int64_t>& input,
                                       int64_t k_rows, int64_t k_cols, int64_t out_depth) {
  if (input.size() != 4)
    return Status::Error("input must be 4-dimensional " + DimsToString(input));
  Conv2DDims d{input[0], input[1], input[2], input[3], k_rows, k_cols, out_depth, {}, {}};
  ASSIGN_OR_RETURN(d.rows, WindowedOutputSize(d.in_rows, k_rows, p.dil_rows, p.stride_rows,
                                              p.padding, p.explicit_paddings[2],
                                              p.explicit_paddings[3]));
  ASSIGN_OR_RETURN(d.cols, WindowedOutputSize(d.in_cols, k_cols, p.dil_cols, p.stride_cols,
                                              p.padding, p.explicit_paddings[4],
                                              p.explicit_paddings[5]));
  return d;
}

StatusOr<Conv2DDims> ConvDimsFromFilter(const Conv2DParams& p, const std::vector<int64_t>& input,
                                        const std::vector<int64_t>& filter) {
  if (filter.size() != 4)
    return Status::Error("filter must be 4-dimensional: " + DimsToString(filter));
  int64_t groups = 1;
  if (input.size() == 4 && !(filter[2] == 0 && input[3] == 0)) {
    if (filter[2] <= 0 || input[3] % filter[2] != 0) {
      return Status::Error("input depth must be evenly divisible by filter depth: " +
                           std::to_string(input[3]) + " vs " + std::to_string(filter[2]));
    }
    groups = input[3] / filter[2];
    if (filter[3] % groups != 0) {
      return Status::Error("output depth must be evenly divisible by the number of groups: " +
                           std::to_string(filter[3]) + " vs " + std::to_string(groups));
    }
  }
  ASSIGN_OR_RETURN(Conv2DDims d, ComputeConv2DDims(p, input, filter[0], filter[1], filter[3]));
  d.groups = groups;
  return d;
}

// Patches of channels [c0, c0 + cn) of one image: row (oy, ox), column (ky, kx, c); zero where
// the window is in padding.
template <typename C>
void Im2Col(const Conv2DDims& d, const Conv2DParams& p, const C* image, C* cols, int64_t c0,
            int64_t cn) {
  const int64_t patch = d.k_rows * d.k_cols * cn;
  for (int64_t oy = 0; oy < d.rows.out; ++oy) {
    for (int64_t ox = 0; ox < d.cols.out; ++ox) {
      C* row = cols + (oy * d.cols.out + ox) * patch;
      for (int64_t ky = 0; ky < d.k_rows; ++ky) {
        const int64_t iy = oy * p.stride_rows + ky * p.dil_rows - d.rows.pad_before;
        for (int64_t kx = 0; kx < d.k_cols; ++kx, row += cn) {
          const int64_t ix = ox * p.stride_cols + kx * p.dil_cols - d.cols.pad_before;
          if (iy < 0 || iy >= d.in_rows || ix < 0 || ix >= d.in_cols) {
            std::fill(row, row + cn, C(0));
          } else {
            std::copy_n(image + (iy * d.in_cols + ix) * d.in_depth + c0, cn, row);
          }
        }
      }
    }
  }
}

// The inverse scatter: adds each patch element back onto the image position it came from.
template <typename C>
void Col2ImAdd(const Conv2DDims& d, const Conv2DParams& p, const C* cols, C* image, int64_t c0,
               int64_t cn) {
  const int64_t patch = d.k_rows * d.k_cols * cn;
  for (int64_t oy = 0; oy < d.rows.out; ++oy) {
    for (int64_t ox = 0; ox < d.cols.out; ++ox) {
      const C* row = cols + (oy * d.cols.out + ox) * patch;
      for (int64_t ky = 0; ky < d.k_rows; ++ky) {
        const int64_t iy = oy * p.stride_rows + ky * p.dil_rows - d.rows.pad_before;
        for (int64_t kx = 0; kx < d.k_cols; ++kx, row += cn) {
          const int64_t ix = ox * p.stride_cols + kx * p.dil_cols - d.cols.pad_before;
          if (iy < 0 || iy >= d.in_rows || ix < 0 || ix >= d.in_cols) continue;
          C* dst = image + (iy * d.in_cols + ix) * d.in_depth + c0;
          for (int64_t c = 0; c < cn; ++c) dst[c] += row[c];
        }
      }
    }
  }
}

enum class ConvPass { kForward, kBackpropInput, kBackpropFilter };

// A node's packed filter and whether its filter input is a constant (a frozen graph's weights,
// or weights a batch norm's constant scale was folded into): decided at the first run.
struct FilterState {
  bool constant = false;
  onednn::PackedFilter packed;
};

// The node's packed filter, kept in its state across runs, when its filter (input `i`) is a
// constant, which a kernel may prepare once and keep; null otherwise.
onednn::PackedFilter* PackedFilterOf(OpKernelContext& ctx, int i) {
  if (ctx.state() == nullptr) return nullptr;
  std::any& v = ctx.state()->value;
  if (!v.has_value()) {
    auto made = std::make_shared<FilterState>();
    const Node* src = ctx.node().input_node(i).first;
    made->constant = src != nullptr && ComputesConstant(*src);
    v = std::move(made);
  }
  auto* state = std::any_cast<std::shared_ptr<FilterState>>(&v);
  return state != nullptr && (*state)->constant ? &(*state)->packed : nullptr;
}

// The input gradient of a convolution whose input has one channel (a grayscale image's first
// layer): oneDNN's backward-data kernels vectorise over input channels, so with one they ran at
// 4 GFLOP/s (a CNN training step's slowest op, 1 ms for 32 28x28 images). Instead one product
// gives every window tap's contribution, cols[tap, position] = w[tap, :] . dy[position, :], and
// the taps are added into dx row by row, contiguous in the image's columns at stride 1.
Status SingleChannelBackwardData(const onednn::ConvGeometry& g, const float* w, const float* dy,
                                 float* dx, ThreadPool* pool) {
  const int64_t taps = g.k_rows * g.k_cols;
  const int64_t positions = g.batch * g.out_rows * g.out_cols;
  std::vector<float> cols(static_cast<size_t>(taps * positions));
  RETURN_IF_ERROR(onednn::MatMul(w, false, dy, true, taps, g.out_depth, positions, nullptr,
                                 cols.data(), pool));
  std::fill(dx, dx + g.batch * g.in_rows * g.in_cols, 0.0f);
  for (int64_t ky = 0; ky < g.k_rows; ++ky) {
    for (int64_t kx = 0; kx < g.k_cols; ++kx) {
      const float* tap = cols.data() + (ky * g.k_cols + kx) * positions;
      // The output columns whose input column ox * stride - pad_left + kx * dil is in the image.
      const int64_t shift = kx * g.dil_cols - g.pad_left;
      int64_t ox0 = 0;
      while (ox0 < g.out_cols && ox0 * g.stride_cols + shift < 0) ++ox0;
      int64_t ox1 = g.out_cols;
      while (ox1 > ox0 && (ox1 - 1) * g.stride_cols + shift >= g.in_cols) --ox1;
      for (int64_t n = 0; n < g.batch; ++n) {
        for (int64_t oy = 0; oy < g.out_rows; ++oy) {
          const int64_t iy = oy * g.stride_rows - g.pad_top + ky * g.dil_rows;
          if (iy < 0 || iy >= g.in_rows) continue;
          const float* src = tap + (n * g.out_rows + oy) * g.out_cols;
          float* row = dx + (n * g.in_rows + iy) * g.in_cols;
          if (g.stride_cols == 1) {
            float* to = row + ox0 + shift;
            const float* from = src + ox0;
            for (int64_t i = 0; i < ox1 - ox0; ++i) to[i] += from[i];
          } else {
            for (int64_t ox = ox0; ox < ox1; ++ox) row[ox * g.stride_cols + shift] += src[ox];
          }
        }
      }
    }
  }
  return OkStatus();
}

// The f32 convolutions through oneDNN (its kernels for this CPU), as TensorFlow runs them.
// Returns false (nothing done) where oneDNN does not apply: other types, empty tensors.
// With kForward, `bias`, `side` (input indices, or -1) and `post` are the fused epilogue of a
// _FusedConv2D: the side input's buffer becomes the output where nothing else holds it.
template <ConvPass kPass>
StatusOr<bool> Conv2DOneDnn(OpKernelContext& ctx, const Conv2DParams& p, const Conv2DDims& d,
                            const std::vector<int64_t>& input_dims,
                            const std::vector<int64_t>& filter_dims, int bias = -1, int side = -1,
                            const onednn::PostOps& post = {}) {
  const int typed_input = kPass == ConvPass::kBackpropInput ? 1 : 0;
  if (!onednn::Available() || ctx.input(typed_input).dtype() != DT_FLOAT) return false;
  if (d.batch <= 0 || d.in_rows <= 0 || d.in_cols <= 0 || d.in_depth <= 0 || d.out_depth <= 0 ||
      d.rows.out <= 0 || d.cols.out <= 0 || d.k_rows <= 0 || d.k_cols <= 0) {
    return false;
  }
  onednn::ConvGeometry g;
  g.batch = d.batch;
  g.in_rows = d.in_rows;
  g.in_cols = d.in_cols;
  g.in_depth = d.in_depth;
  g.out_rows = d.rows.out;
  g.out_cols = d.cols.out;
  g.out_depth = d.out_depth;
  g.k_rows = d.k_rows;
  g.k_cols = d.k_cols;
  g.stride_rows = p.stride_rows;
  g.stride_cols = p.stride_cols;
  g.dil_rows = p.dil_rows;
  g.dil_cols = p.dil_cols;
  g.pad_top = d.rows.pad_before;
  g.pad_bottom = d.rows.pad_after;
  g.pad_left = d.cols.pad_before;
  g.pad_right = d.cols.pad_after;
  g.groups = d.groups;
  ThreadPool* threads = ctx.pool();
  Status status;
  if constexpr (kPass == ConvPass::kForward) {
    const std::vector<int64_t> out_dims = {d.batch, d.rows.out, d.cols.out, d.out_depth};
    Tensor* out = nullptr;
    if (side >= 0) {
      // A side input that broadcasts is added by the caller's own path.
      if (ctx.input(side).dims() != out_dims || ctx.input(side).dtype() != DT_FLOAT) return false;
      ASSIGN_OR_RETURN(out, ctx.forward_input_or_allocate_output(side, 0, out_dims));
      if (out->raw_data() != ctx.input(side).raw_data()) {
        std::copy_n(Data<float>(ctx.input(side)), out->num_elements(), MutableData<float>(*out));
      }
    } else {
      ASSIGN_OR_RETURN(out, ctx.allocate_output(0, out_dims));
    }
    status = onednn::Conv2DForward(g, Data<float>(ctx.input(0)), Data<float>(ctx.input(1)),
                                   bias >= 0 ? Data<float>(ctx.input(bias)) : nullptr, post,
                                   MutableData<float>(*out), threads, PackedFilterOf(ctx, 1));
  } else if constexpr (kPass == ConvPass::kBackpropInput) {
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, input_dims));
    if (d.in_depth == 1 && d.groups == 1) {
      status = SingleChannelBackwardData(g, Data<float>(ctx.input(1)), Data<float>(ctx.input(2)),
                                         MutableData<float>(*out), threads);
      if (!status.ok()) return ctx.Error(status.message());
      return true;
    }
    status = onednn::Conv2DBackwardData(g, Data<float>(ctx.input(1)), Data<float>(ctx.input(2)),
                                        MutableData<float>(*out), threads, PackedFilterOf(ctx, 1));
  } else {
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, filter_dims));
    status = onednn::Conv2DBackwardWeights(g, Data<float>(ctx.input(0)), Data<float>(ctx.input(2)),
                                           MutableData<float>(*out), threads);
  }
  if (!status.ok()) return ctx.Error(status.message());
  return true;
}

template <ConvPass kPass>
Status Conv2DKernel(OpKernelContext& ctx) {
  auto params = GetConv2DParams(ctx.attrs(), ctx.name(), /*pooling=*/false);
  if (!params.ok()) return ctx.Error(params.status().message());
  const Conv2DParams& p = *params;
  std::vector<int64_t> input_dims, filter_dims;
  const Tensor* input = nullptr;
  const Tensor* filter = nullptr;
  const Tensor* dy = nullptr;
  if constexpr (kPass == ConvPass::kForward) {
    input = &ctx.input(0);
    filter = &ctx.input(1);
    input_dims = input->dims();
    filter_dims = filter->dims();
  } else if constexpr (kPass == ConvPass::kBackpropInput) {
    input_dims = ctx.input(0).AsInt64Vector();
    filter = &ctx.input(1);
    filter_dims = filter->dims();
    dy = &ctx.input(2);
  } else {
    input = &ctx.input(0);
    input_dims = input->dims();
    filter_dims = ctx.input(1).AsInt64Vector();
    dy = &ctx.input(2);
  }
  auto dims = ConvDimsFromFilter(p, input_dims, filter_dims);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  const Conv2DDims& d = *dims;
  const std::vector<int64_t> out_dims = {d.batch, d.rows.out, d.cols.out, d.out_depth};
  if (dy != nullptr && dy->dims() != out_dims) {
    return ctx.Error("out_backprop has shape " + DimsToString(dy->dims()) + ", expected " +
                     DimsToString(out_dims));
  }
  ASSIGN_OR_RETURN(bool ran, Conv2DOneDnn<kPass>(ctx, p, d, input_dims, filter_dims));
  if (ran) return OkStatus();
  // Without oneDNN (or for other types): im2col and a product per image and group; group g's
  // filters are columns [g * og, (g + 1) * og) of the HWIO filter seen as [patch, out_depth].
  const int64_t ig = d.in_depth / d.groups, og = d.out_depth / d.groups;
  const int64_t patch = d.k_rows * d.k_cols * ig;
  const int64_t positions = d.rows.out * d.cols.out;
  const int64_t image_size = d.in_rows * d.in_cols * d.in_depth;
  return Dispatch<cwise::kFloating | cwise::kSignedTypes>(
      ctx, ctx.input(kPass == ConvPass::kBackpropInput ? 1 : 0).dtype(), [&](auto tag) -> Status {
        using T = typename decltype(tag)::type;
        using C = cwise::ProductType<T>;
        std::vector<C> cols(positions * patch);
        Eigen::Map<Matrix<C>> col_m(cols.data(), positions, patch);
        if constexpr (kPass == ConvPass::kForward) {
          std::vector<C> x = LoadAs<C, T>(*input), f = LoadAs<C, T>(*filter);
          std::vector<C> y(d.batch * positions * d.out_depth);
          Eigen::Map<const Matrix<C>> f_m(f.data(), patch, d.out_depth);
          for (int64_t n = 0; n < d.batch; ++n) {
            Eigen::Map<Matrix<C>> y_m(y.data() + n * positions * d.out_depth, positions,
                                      d.out_depth);
            for (int64_t g = 0; g < d.groups; ++g) {
              Im2Col(d, p, x.data() + n * image_size, cols.data(), g * ig, ig);
              y_m.middleCols(g * og, og).noalias() = col_m * f_m.middleCols(g * og, og);
            }
          }
          ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, out_dims));
          StoreAs<T>(y, *out);
        } else if constexpr (kPass == ConvPass::kBackpropInput) {
          std::vector<C> f = LoadAs<C, T>(*filter), g = LoadAs<C, T>(*dy);
          std::vector<C> dx(d.batch * image_size, C(0));
          Eigen::Map<const Matrix<C>> f_m(f.data(), patch, d.out_depth);
          for (int64_t n = 0; n < d.batch; ++n) {
            Eigen::Map<const Matrix<C>> g_m(g.data() + n * positions * d.out_depth, positions,
                                            d.out_depth);
            for (int64_t k = 0; k < d.groups; ++k) {
              col_m.noalias() = g_m.middleCols(k * og, og) * f_m.middleCols(k * og, og).transpose();
              Col2ImAdd(d, p, cols.data(), dx.data() + n * image_size, k * ig, ig);
            }
          }
          ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, input_dims));
          StoreAs<T>(dx, *out);
        } else {
          std::vector<C> x = LoadAs<C, T>(*input), g = LoadAs<C, T>(*dy);
          Matrix<C> df = Matrix<C>::Zero(patch, d.out_depth);
          for (int64_t n = 0; n < d.batch; ++n) {
            Eigen::Map<const Matrix<C>> g_m(g.data() + n * positions * d.out_depth, positions,
                                            d.out_depth);
            for (int64_t k = 0; k < d.groups; ++k) {
              Im2Col(d, p, x.data() + n * image_size, cols.data(), k * ig, ig);
              df.middleCols(k * og, og).noalias() += col_m.transpose() * g_m.middleCols(k * og, og);
            }
          }
          ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, filter_dims));
          StoreAs<T>(std::vector<C>(df.data(), df.data() + df.size()), *out);
        }
        return OkStatus();
      });
}

// Calls fn(n, oy, ox, y0, y1, x0, x1) for every pooling window, clipped to the image.
template <typename Fn>
void ForEachPoolWindow(const Conv2DDims& d, const Conv2DParams& p, Fn&& fn) {
  for (int64_t n = 0; n < d.batch; ++n)
    for (int64_t oy = 0; oy < d.rows.out; ++oy)
      for (int64_t ox = 0; ox < d.cols.out; ++ox) {
        const int64_t ys = oy * p.stride_rows - d.rows.pad_before;
        const int64_t xs = ox * p.stride_cols - d.cols.pad_before;
        fn(n, oy, ox, std::max<int64_t>(ys, 0), std::min(ys + p.ksize_rows, d.in_rows),
           std::max<int64_t>(xs, 0), std::min(xs + p.ksize_cols, d.in_cols));
      }
}

StatusOr<std::pair<Conv2DParams, Conv2DDims>> PoolGeometry(const OpKernelContext& ctx,
                                                          const std::vector<int64_t>& input) {
  auto params = GetConv2DParams(ctx.attrs(), ctx.name(), /*pooling=*/true);
  if (!params.ok()) return ctx.Error(params.status().message());
  if (input.size() != 4)
    return ctx.Error("input must be 4-dimensional " + DimsToString(input));
  auto dims = ComputeConv2DDims(*params, input, params->ksize_rows, params->ksize_cols, input[3]);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  return std::make_pair(*params, *dims);
}

// MaxPool (kGrad false) and MaxPoolGrad: the gradient goes to the first maximum of each window
// in row-major order, as TensorFlow's CPU kernel picks it.
template <bool kGrad>
Status MaxPoolKernel(OpKernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  ASSIGN_OR_RETURN(auto geometry, PoolGeometry(ctx, x.dims()));
  const auto& [p, d] = geometry;
  const std::vector<int64_t> out_dims = {d.batch, d.rows.out, d.cols.out, d.in_depth};
  if (kGrad && ctx.input(2).dims() != out_dims) {
    return ctx.Error("grad has shape " + DimsToString(ctx.input(2).dims()) + ", expected " +
                     DimsToString(out_dims));
  }
  if (d.in_rows * d.in_cols > std::numeric_limits<int32_t>::max()) {
    // The maximum's position is kept as a 32-bit pixel index within its image.
    return ctx.Error("images of more than 2^31 - 1 pixels are not supported: " + DimsToString(x.dims()));
  }
  return Dispatch<cwise::kReal>(ctx, x.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    const T* in = Data<T>(x);
    const int64_t depth = d.in_depth;
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, kGrad ? x.dims() : out_dims));
    T* o = MutableData<T>(*out);
    const T* g = kGrad ? Data<T>(ctx.input(2)) : nullptr;
    // Windows that do not overlap (a stride as large as the window, the usual 2x2 pooling): the
    // gradient is written pixel by pixel instead of added at each maximum (the output is
    // zero-filled when made, which covers the pixels no window reaches).
    const bool disjoint = p.stride_rows >= p.ksize_rows && p.stride_cols >= p.ksize_cols;
    // Windows one image row of outputs at a time, channels innermost (contiguous in NHWC, so
    // the comparisons vectorise); rows of outputs in parallel, whole images for the gradient
    // (whose windows of one image add into the same input elements).
    auto rows = [&](int64_t begin, int64_t end) {
      std::vector<T> best(depth);
      std::vector<int32_t> arg(kGrad ? depth : 0);  // the maximum's pixel in its image
      for (int64_t row = begin; row < end; ++row) {
        const int64_t n = row / d.rows.out, oy = row % d.rows.out;
        const int64_t ys = oy * p.stride_rows - d.rows.pad_before;
        const int64_t y0 = std::max<int64_t>(ys, 0), y1 = std::min(ys + p.ksize_rows, d.in_rows);
        const T* image = in + n * d.in_rows * d.in_cols * depth;
        for (int64_t ox = 0; ox < d.cols.out; ++ox) {
          const int64_t xs = ox * p.stride_cols - d.cols.pad_before;
          const int64_t x0 = std::max<int64_t>(xs, 0), x1 = std::min(xs + p.ksize_cols, d.in_cols);
          const int64_t out_base = ((n * d.rows.out + oy) * d.cols.out + ox) * depth;
          if (y0 >= y1 || x0 >= x1) {
            if constexpr (!kGrad) std::fill(o + out_base, o + out_base + depth, Eigen::NumTraits<T>::lowest());
            continue;
          }
          // The maximum: the first in row-major order; the first NaN wins and stays. Bitwise
          // operators, not short-circuit ones: straight-line code the compiler vectorises.
          T* __restrict b = best.data();
          int32_t* __restrict a = arg.data();
          std::copy_n(image + (y0 * d.in_cols + x0) * depth, depth, b);
          if constexpr (kGrad) std::fill(arg.begin(), arg.end(), static_cast<int32_t>(y0 * d.in_cols + x0));
          for (int64_t iy = y0; iy < y1; ++iy)
            for (int64_t ix = iy == y0 ? x0 + 1 : x0; ix < x1; ++ix) {
              const int32_t pixel = static_cast<int32_t>(iy * d.in_cols + ix);
              const T* __restrict v = image + pixel * depth;
              for (int64_t c = 0; c < depth; ++c) {
                const bool take = (v[c] > b[c]) | ((v[c] != v[c]) & (b[c] == b[c]));
                b[c] = take ? v[c] : b[c];
                if constexpr (kGrad) a[c] = take ? pixel : a[c];
              }
            }
          if constexpr (!kGrad) {
            std::copy_n(b, depth, o + out_base);
          } else if (disjoint) {
            // No other window holds these pixels: each is written once, the gradient where it
            // is the maximum and 0 elsewhere, a select over contiguous channels (no scatter).
            const T* __restrict gw = g + out_base;
            for (int64_t iy = y0; iy < y1; ++iy)
              for (int64_t ix = x0; ix < x1; ++ix) {
                const int32_t pixel = static_cast<int32_t>(iy * d.in_cols + ix);
                T* __restrict to = o + (n * d.in_rows * d.in_cols + pixel) * depth;
                for (int64_t c = 0; c < depth; ++c) to[c] = a[c] == pixel ? gw[c] : T(0);
              }
          } else {
            T* image_grad = o + n * d.in_rows * d.in_cols * depth;
            for (int64_t c = 0; c < depth; ++c) image_grad[a[c] * depth + c] += g[out_base + c];
          }
        }
      }
    };
    const int64_t total_rows = d.batch * d.rows.out;
    const int64_t work = total_rows * d.cols.out * depth * p.ksize_rows * p.ksize_cols;
    if (ctx.pool() == nullptr || work < (int64_t{1} << 16) || total_rows < 2) {
      rows(0, total_rows);
    } else if constexpr (kGrad) {
      ctx.pool()->ParallelFor(d.batch, 1, [&](int64_t b, int64_t e) { rows(b * d.rows.out, e * d.rows.out); });
    } else {
      ctx.pool()->ParallelFor(total_rows, 1, rows);
    }
    return OkStatus();
  });
}

// AvgPool and AvgPoolGrad: windows average over their elements inside the image (padding is not
// counted), as TensorFlow's SAME padding does.
template <bool kGrad, typename C>
std::vector<C> AvgPoolValues(const Conv2DDims& d, const Conv2DParams& p,
                             const std::vector<C>& in) {
  const int64_t depth = d.in_depth;
  std::vector<C> result(kGrad ? d.batch * d.in_rows * d.in_cols * depth
                              : d.batch * d.rows.out * d.cols.out * depth,
                        C(0));
  ForEachPoolWindow(d, p, [&](int64_t n, int64_t oy, int64_t ox, int64_t y0, int64_t y1,
                              int64_t x0, int64_t x1) {
    const int64_t out_base = ((n * d.rows.out + oy) * d.cols.out + ox) * depth;
    const C count = C((y1 - y0) * (x1 - x0));
    for (int64_t iy = y0; iy < y1; ++iy)
      for (int64_t ix = x0; ix < x1; ++ix) {
        const int64_t in_base = ((n * d.in_rows + iy) * d.in_cols + ix) * depth;
        for (int64_t c = 0; c < depth; ++c) {
          if constexpr (kGrad) result[in_base + c] += in[out_base + c] / count;
          else result[out_base + c] += in[in_base + c];
        }
      }
    if constexpr (!kGrad)
      for (int64_t c = 0; c < depth; ++c) result[out_base + c] /= count;
  });
  return result;
}

template <bool kGrad>
Status AvgPoolKernel(OpKernelContext& ctx) {
  const std::vector<int64_t> in_dims =
      kGrad ? ctx.input(0).AsInt64Vector() : ctx.input(0).dims();
  const Tensor& src = ctx.input(kGrad ? 1 : 0);
  ASSIGN_OR_RETURN(auto geometry, PoolGeometry(ctx, in_dims));
  const auto& [p, d] = geometry;
  const std::vector<int64_t> out_dims = {d.batch, d.rows.out, d.cols.out, d.in_depth};
  if (kGrad && src.dims() != out_dims) {
    return ctx.Error("grad has shape " + DimsToString(src.dims()) + ", expected " +
                     DimsToString(out_dims));
  }
  return Dispatch<cwise::kFloating>(ctx, src.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    const std::vector<C> result = AvgPoolValues<kGrad>(d, p, LoadAs<C, T>(src));
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, kGrad ? in_dims : out_dims));
    StoreAs<T>(result, *out);
    return OkStatus();
  });
}

Status L2LossKernel(OpKernelContext& ctx) {
  const Tensor& t = ctx.input(0);
  return Dispatch<cwise::kFloating>(ctx, t.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    using C = ComputeType<T>;
    // TensorFlow: sum(t * t * 0.5).
    std::vector<C> v = LoadAs<C, T>(t);
    for (C& x : v) x = x * x * C(0.5);
    ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {}));
    MutableData<T>(*out)[0] = T(cwise::PairwiseSum(v.data(), static_cast<int64_t>(v.size())));
    return OkStatus();
  });
}

Status InTopKV2Kernel(OpKernelContext& ctx) {
  const Tensor& predictions = ctx.input(0);
  const Tensor& targets = ctx.input(1);
  const Tensor& k_t = ctx.input(2);
  if (predictions.rank() != 2)
    return ctx.Error("predictions must be 2-dimensional, got " +
                     DimsToString(predictions.dims()));
  if (targets.rank() != 1)
    return ctx.Error("targets must be 1-dimensional, got " + DimsToString(targets.dims()));
  if (predictions.dim(0) != targets.dim(0)) {
    return ctx.Error("First dimension of predictions " + std::to_string(predictions.dim(0)) +
                     " must match length of targets " + std::to_string(targets.dim(0)));
  }
  if (k_t.num_elements() != 1) return ctx.Error("k must be a scalar");
  const int64_t k = k_t.GetAsInt64(0);
  const int64_t batch = predictions.dim(0), classes = predictions.dim(1);
  const float* pred = Data<float>(predictions);
  const std::vector<int64_t> target = targets.AsInt64Vector();
  ASSIGN_OR_RETURN(Tensor * out, ctx.allocate_output(0, {batch}));
  bool* o = MutableData<bool>(*out);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t t = target[b];
    // An out-of-range target, or any non-finite prediction in the row, is never in the top k
    // (TensorFlow "cannot say").
    bool cannot_say = t < 0 || t >= classes;
    int64_t more_probable = 0;
    for (int64_t j = 0; j < classes && !cannot_say; ++j) {
      const float p = pred[b * classes + j];
      if (!std::isfinite(p)) cannot_say = true;
      else if (p > pred[b * classes + t]) ++more_probable;
    }
    o[b] = !cannot_say && more_probable < k;
  }
  return OkStatus();
}

// ----- Shape functions ---------------------------------------------------------------------------

Status BiasAddShape(InferenceContext& c) {
  PartialShape value;
  RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &value));
  if (value.unknown_rank()) {
    c.set_output(0, value);
    return OkStatus();
  }
  ASSIGN_OR_RETURN(int64_t axis, ChannelAxis(c.attrs(), c.node_name(), value.rank()));
  const PartialShape& bias = c.input(1);
  std::vector<int64_t> dims = value.dims();
  if (!bias.unknown_rank()) {
    if (bias.rank() != 1) return c.Error("Biases must be 1D: " + bias.ToString());
    const int64_t b = bias.dim(0);
    if (b >= 0 && dims[axis] >= 0 && b != dims[axis]) {
      return c.Error("Dimensions must be equal, but are " + std::to_string(dims[axis]) +
                     " and " + std::to_string(b) + " for BiasAdd with input shapes: " +
                     value.ToString() + ", " + bias.ToString());
    }
    if (dims[axis] < 0) dims[axis] = b;
  }
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status BiasAddGradShape(InferenceContext& c) {
  PartialShape dy;
  RETURN_IF_ERROR(c.WithRankAtLeast(0, 2, &dy));
  if (dy.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(1));
    return OkStatus();
  }
  ASSIGN_OR_RETURN(int64_t axis, ChannelAxis(c.attrs(), c.node_name(), dy.rank()));
  c.set_output(0, PartialShape({dy.dim(axis)}));
  return OkStatus();
}

// Softmax cross entropy: loss [batch], backprop [batch, classes].
Status XentShape(InferenceContext& c) {
  auto both = shape_fn::BroadcastShapes(c.input(0), c.input(1));
  if (!both.ok()) return c.Error(both.status().message());
  if (both->unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(1));
    c.set_output(1, PartialShape::UnknownOfRank(2));
    return OkStatus();
  }
  if (both->rank() != 2)
    return c.Error("logits and labels must be 2-D, broadcast shape " + both->ToString());
  c.set_output(0, PartialShape({both->dim(0)}));
  c.set_output(1, *both);
  return OkStatus();
}

Status SparseXentShape(InferenceContext& c) {
  PartialShape logits, labels;
  RETURN_IF_ERROR(c.WithRank(0, 2, &logits));
  RETURN_IF_ERROR(c.WithRank(1, 1, &labels));
  int64_t batch = logits.dim(0);
  if (batch >= 0 && labels.dim(0) >= 0 && batch != labels.dim(0)) {
    return c.Error("Dimensions must be equal, but are " + std::to_string(batch) + " and " +
                   std::to_string(labels.dim(0)) + " for SparseSoftmaxCrossEntropyWithLogits");
  }
  if (batch < 0) batch = labels.dim(0);
  c.set_output(0, PartialShape({batch}));
  c.set_output(1, PartialShape({batch, logits.dim(1)}));
  return OkStatus();
}

// Conv2D / pooling output shapes; unknown dims stay unknown.
Status ConvOrPoolShape(InferenceContext& c, bool pooling) {
  PartialShape in;
  RETURN_IF_ERROR(c.WithRank(0, 4, &in));
  auto params = GetConv2DParams(c.attrs(), c.node_name(), pooling);
  if (!params.ok()) return c.Error(params.status().message());
  int64_t k_rows = params->ksize_rows, k_cols = params->ksize_cols, depth = in.dim(3);
  if (!pooling) {
    PartialShape filter;
    RETURN_IF_ERROR(c.WithRank(1, 4, &filter));
    k_rows = filter.dim(0);
    k_cols = filter.dim(1);
    depth = filter.dim(3);
    if (in.dim(3) >= 0 && filter.dim(2) >= 0 &&
        (filter.dim(2) == 0 || in.dim(3) % filter.dim(2) != 0)) {
      return c.Error("Depth of input (" + std::to_string(in.dim(3)) +
                     ") is not a multiple of input depth of filter (" +
                     std::to_string(filter.dim(2)) + ")");
    }
    if (in.dim(3) > 0 && filter.dim(2) > 0 && filter.dim(3) >= 0 &&
        filter.dim(3) % (in.dim(3) / filter.dim(2)) != 0) {
      return c.Error("Depth of output (" + std::to_string(filter.dim(3)) +
                     ") is not a multiple of the number of groups (" +
                     std::to_string(in.dim(3) / filter.dim(2)) + ")");
    }
  }
  auto dims = ComputeConv2DDims(*params, in.dims(), k_rows, k_cols, depth);
  if (!dims.ok()) return c.Error(dims.status().message());
  c.set_output(0, PartialShape({in.dim(0), dims->rows.out, dims->cols.out, depth}));
  return OkStatus();
}
Status Conv2DShape(InferenceContext& c) { return ConvOrPoolShape(c, false); }
Status PoolShape(InferenceContext& c) { return ConvOrPoolShape(c, true); }

Status ShapeFromInput0(InferenceContext& c) { return conv::ShapeFromSizesInput(c, 0); }
Status ShapeFromInput1(InferenceContext& c) { return conv::ShapeFromSizesInput(c, 1); }

Status InTopKShape(InferenceContext& c) {
  PartialShape predictions, targets;
  RETURN_IF_ERROR(c.WithRank(0, 2, &predictions));
  RETURN_IF_ERROR(c.WithRank(1, 1, &targets));
  int64_t batch = predictions.dim(0) >= 0 ? predictions.dim(0) : targets.dim(0);
  c.set_output(0, PartialShape({batch}));
  return OkStatus();
}

Status MergeTwoInputsShape(InferenceContext& c) {
  if (!c.input(0).IsCompatibleWith(c.input(1))) {
    return c.Error("Shapes must be equal, but are " + c.input(0).ToString() + " and " +
                   c.input(1).ToString());
  }
  c.set_output(0, c.input(0).Merge(c.input(1)));
  return OkStatus();
}

Status SoftmaxShape(InferenceContext& c) {
  PartialShape logits;
  RETURN_IF_ERROR(c.WithRankAtLeast(0, 1, &logits));
  c.set_output(0, logits);
  return OkStatus();
}

KernelFn FloatUnary(std::string op) {
  return [op](OpKernelContext& ctx) { return cwise::FloatUnaryKernel(ctx, op); };
}

}  // namespace

StatusOr<bool> FusedConv2DOneDnn(OpKernelContext& ctx, int bias, int side,
                                 const onednn::PostOps& post) {
  if (!onednn::Available() || ctx.input(0).dtype() != DT_FLOAT) return false;
  if (const AttrValue* f = FindAttr(ctx.attrs(), "data_format"); f != nullptr && f->s() != "NHWC") {
    return false;
  }
  auto params = GetConv2DParams(ctx.attrs(), ctx.name(), /*pooling=*/false);
  if (!params.ok()) return ctx.Error(params.status().message());
  const std::vector<int64_t> input_dims = ctx.input(0).dims(), filter_dims = ctx.input(1).dims();
  auto dims = ConvDimsFromFilter(*params, input_dims, filter_dims);
  if (!dims.ok()) return ctx.Error(dims.status().message());
  if (bias >= 0 && (ctx.input(bias).dtype() != DT_FLOAT || ctx.input(bias).dims() != std::vector<int64_t>{dims->out_depth})) {
    return false;
  }
  return Conv2DOneDnn<ConvPass::kForward>(ctx, *params, *dims, input_dims, filter_dims, bias, side, post);
}

void RegisterNnOps(OpRegistry& r) {
  REGISTER_OP(r, "Relu")
      .Input("features: T")
      .Output("activations: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64, qint8}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(ReluKernel<false>);
  REGISTER_OP(r, "Relu6")
      .Input("features: T")
      .Output("activations: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(ReluKernel<true>);
  REGISTER_OP(r, "ReluGrad")
      .Input("gradients: T")
      .Input("features: T")
      .Output("backprops: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kRelu>);
  REGISTER_OP(r, "Relu6Grad")
      .Input("gradients: T")
      .Input("features: T")
      .Output("backprops: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64}")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kRelu6>);
  REGISTER_OP(r, "Elu")
      .Input("features: T")
      .Output("activations: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Elu"));
  REGISTER_OP(r, "EluGrad")
      .Input("gradients: T")
      .Input("outputs: T")
      .Output("backprops: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kElu>);
  REGISTER_OP(r, "Selu")
      .Input("features: T")
      .Output("activations: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Selu"));
  REGISTER_OP(r, "SeluGrad")
      .Input("gradients: T")
      .Input("outputs: T")
      .Output("backprops: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kSelu>);
  REGISTER_OP(r, "LeakyRelu")
      .Input("features: T")
      .Output("activations: T")
      .Attr("alpha: float = 0.2")
      .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(LeakyReluKernel);
  REGISTER_OP(r, "LeakyReluGrad")
      .Input("gradients: T")
      .Input("features: T")
      .Output("backprops: T")
      .Attr("alpha: float = 0.2")
      .Attr("T: {half, bfloat16, float, double} = DT_FLOAT")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kLeakyRelu>);
  REGISTER_OP(r, "Softplus")
      .Input("features: T")
      .Output("activations: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(FloatUnary("Softplus"));
  REGISTER_OP(r, "SoftplusGrad")
      .Input("gradients: T")
      .Input("features: T")
      .Output("backprops: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(MergeTwoInputsShape)
      .SetKernel(ActivationGradKernel<ActGrad::kSoftplus>);
  REGISTER_OP(r, "Softmax")
      .Input("logits: T")
      .Output("softmax: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(SoftmaxShape)
      .SetKernel(SoftmaxKernel<false>);
  REGISTER_OP(r, "LogSoftmax")
      .Input("logits: T")
      .Output("logsoftmax: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(SoftmaxShape)
      .SetKernel(SoftmaxKernel<true>);
  REGISTER_OP(r, "BiasAdd")
      .Input("value: T")
      .Input("bias: T")
      .Output("output: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .SetShapeFn(BiasAddShape)
      .SetKernel(BiasAddKernel);
  REGISTER_OP(r, "BiasAddGrad")
      .Input("out_backprop: T")
      .Output("output: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .SetShapeFn(BiasAddGradShape)
      .SetKernel(BiasAddGradKernel);
  REGISTER_OP(r, "SoftmaxCrossEntropyWithLogits")
      .Input("features: T")
      .Input("labels: T")
      .Output("loss: T")
      .Output("backprop: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(XentShape)
      .SetKernel(SoftmaxXentKernel);
  REGISTER_OP(r, "SparseSoftmaxCrossEntropyWithLogits")
      .Input("features: T")
      .Input("labels: Tlabels")
      .Output("loss: T")
      .Output("backprop: T")
      .Attr("T: {half, bfloat16, float, double}")
      .Attr("Tlabels: {int32, int64} = DT_INT64")
      .SetShapeFn(SparseXentShape)
      .SetKernel(SparseSoftmaxXentKernel);
  REGISTER_OP(r, "Conv2D")
      .Input("input: T")
      .Input("filter: T")
      .Output("output: T")
      .Attr("T: {half, bfloat16, float, double, int32}")
      .Attr("strides: list(int)")
      .Attr("use_cudnn_on_gpu: bool = true")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]")
      .SetShapeFn(Conv2DShape)
      .SetKernel(Conv2DKernel<ConvPass::kForward>);
  REGISTER_OP(r, "Conv2DBackpropInput")
      .Input("input_sizes: int32")
      .Input("filter: T")
      .Input("out_backprop: T")
      .Output("output: T")
      .Attr("T: {half, bfloat16, float, double, int32}")
      .Attr("strides: list(int)")
      .Attr("use_cudnn_on_gpu: bool = true")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]")
      .SetShapeFn(ShapeFromInput0)
      .SetKernel(Conv2DKernel<ConvPass::kBackpropInput>)
      .CompileTimeConstInput("input_sizes");
  REGISTER_OP(r, "Conv2DBackpropFilter")
      .Input("input: T")
      .Input("filter_sizes: int32")
      .Input("out_backprop: T")
      .Output("output: T")
      .Attr("T: {half, bfloat16, float, double}")
      .Attr("strides: list(int)")
      .Attr("use_cudnn_on_gpu: bool = true")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("dilations: list(int) = [1, 1, 1, 1]")
      .SetShapeFn(ShapeFromInput1)
      .SetKernel(Conv2DKernel<ConvPass::kBackpropFilter>)
      .CompileTimeConstInput("filter_sizes");
  REGISTER_OP(r, "MaxPool")
      .Input("input: T")
      .Output("output: T")
      .Attr("T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8} = DT_FLOAT")
      .Attr("ksize: list(int) >= 4")
      .Attr("strides: list(int) >= 4")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'")
      .SetShapeFn(PoolShape)
      .SetKernel(MaxPoolKernel<false>);
  REGISTER_OP(r, "MaxPoolGrad")
      .Input("orig_input: T")
      .Input("orig_output: T")
      .Input("grad: T")
      .Output("output: T")
      .Attr("ksize: list(int) >= 4")
      .Attr("strides: list(int) >= 4")
      .Attr("padding: {'SAME', 'VALID', 'EXPLICIT'}")
      .Attr("explicit_paddings: list(int) = []")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, uint64} = DT_FLOAT")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(MaxPoolKernel<true>);
  REGISTER_OP(r, "AvgPool")
      .Input("value: T")
      .Output("output: T")
      .Attr("ksize: list(int) >= 4")
      .Attr("strides: list(int) >= 4")
      .Attr("padding: {'SAME', 'VALID'}")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(PoolShape)
      .SetKernel(AvgPoolKernel<false>);
  REGISTER_OP(r, "AvgPoolGrad")
      .Input("orig_input_shape: int32")
      .Input("grad: T")
      .Output("output: T")
      .Attr("ksize: list(int) >= 4")
      .Attr("strides: list(int) >= 4")
      .Attr("padding: {'SAME', 'VALID'}")
      .Attr("data_format: {'NHWC', 'NCHW'} = 'NHWC'")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(ShapeFromInput0)
      .SetKernel(AvgPoolKernel<true>)
      .CompileTimeConstInput("orig_input_shape");
  REGISTER_OP(r, "L2Loss")
      .Input("t: T")
      .Output("output: T")
      .Attr("T: {half, bfloat16, float, double}")
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(L2LossKernel);
  REGISTER_OP(r, "InTopKV2")
      .Input("predictions: float")
      .Input("targets: T")
      .Input("k: T")
      .Output("precision: bool")
      .Attr("T: {int32, int64} = DT_INT32")
      .SetShapeFn(InTopKShape)
      .SetKernel(InTopKV2Kernel);
}

}  // namespace xlens::graph
