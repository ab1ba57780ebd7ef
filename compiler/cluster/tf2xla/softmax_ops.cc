// Softmax, LogSoftmax, the two cross-entropy losses (both outputs: the loss per row and its
// gradient, as TensorFlow's kernels give them), BiasAdd and BiasAddGrad. The softmaxes subtract
// the row maximum first, as TensorFlow's softmax_op.cc does, so large logits do not overflow.
#include <fmt/format.h>

#include <limits>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

// The pieces every softmax needs, along the last dimension of `logits` [.., C]:
// shifted = logits - max, and log(sum(exp(shifted))) broadcast back.
struct SoftmaxParts {
  HloInstruction* shifted = nullptr;
  HloInstruction* exp_shifted = nullptr;
  HloInstruction* sum = nullptr;          // reduced shape
  HloInstruction* sum_broadcast = nullptr;  // logits shape
};

StatusOr<SoftmaxParts> BuildSoftmaxParts(HloBuilder& b, HloInstruction* logits) {
  const std::vector<int64_t> dims = logits->shape().dimensions();
  if (dims.empty()) return Error("logits must have at least one dimension");
  const int64_t last = static_cast<int64_t>(dims.size()) - 1;
  const PrimitiveType type = logits->shape().element_type();
  std::vector<int64_t> batch_dims;
  for (int64_t i = 0; i < last; ++i) batch_dims.push_back(i);
  ASSIGN_OR_RETURN(HloInstruction * neg_inf,
                   b.ScalarConstant(type, -std::numeric_limits<double>::infinity()));
  ASSIGN_OR_RETURN(HloInstruction * max, b.Reduce(logits, neg_inf, {last}, HloOpcode::kMaximum));
  ASSIGN_OR_RETURN(HloInstruction * max_b, b.Broadcast(max, dims, batch_dims));
  SoftmaxParts parts;
  ASSIGN_OR_RETURN(parts.shifted, b.Binary(HloOpcode::kSubtract, logits, max_b));
  ASSIGN_OR_RETURN(parts.exp_shifted, b.Unary(HloOpcode::kExp, parts.shifted));
  ASSIGN_OR_RETURN(HloInstruction * zero, b.ScalarConstant(type, 0));
  ASSIGN_OR_RETURN(parts.sum, b.Reduce(parts.exp_shifted, zero, {last}, HloOpcode::kAdd));
  ASSIGN_OR_RETURN(parts.sum_broadcast, b.Broadcast(parts.sum, dims, batch_dims));
  return parts;
}

Status LowerSoftmax(XlaOpKernelContext& ctx, bool log) {
  ASSIGN_OR_RETURN(HloInstruction * logits, ctx.Input(0));
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(SoftmaxParts p, ctx, BuildSoftmaxParts(b, logits));
  HloInstruction* out = nullptr;
  if (log) {
    LOWER_OR_RETURN(HloInstruction * log_sum, ctx, b.Unary(HloOpcode::kLog, p.sum_broadcast));
    LOWER_OR_RETURN(out, ctx, b.Binary(HloOpcode::kSubtract, p.shifted, log_sum));
  } else {
    LOWER_OR_RETURN(out, ctx, b.Binary(HloOpcode::kDivide, p.exp_shifted, p.sum_broadcast));
  }
  ctx.SetOutput(0, out);
  return OkStatus();
}

// loss = -sum(labels * log_softmax), backprop = softmax - labels, for [B, C] features.
Status CrossEntropy(XlaOpKernelContext& ctx, HloInstruction* features, HloInstruction* labels) {
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = features->shape().element_type();
  LOWER_OR_RETURN(SoftmaxParts p, ctx, BuildSoftmaxParts(b, features));
  LOWER_OR_RETURN(HloInstruction * log_sum, ctx, b.Unary(HloOpcode::kLog, p.sum_broadcast));
  LOWER_OR_RETURN(HloInstruction * log_softmax, ctx,
                  b.Binary(HloOpcode::kSubtract, p.shifted, log_sum));
  LOWER_OR_RETURN(HloInstruction * weighted, ctx,
                  b.Binary(HloOpcode::kMultiply, labels, log_softmax));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * sum, ctx, b.Reduce(weighted, zero, {1}, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * loss, ctx, b.Unary(HloOpcode::kNegate, sum));
  LOWER_OR_RETURN(HloInstruction * softmax, ctx,
                  b.Binary(HloOpcode::kDivide, p.exp_shifted, p.sum_broadcast));
  LOWER_OR_RETURN(HloInstruction * backprop, ctx,
                  b.Binary(HloOpcode::kSubtract, softmax, labels));
  ctx.SetOutput(0, loss);
  ctx.SetOutput(1, backprop);
  return OkStatus();
}

Status LowerSoftmaxCrossEntropy(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * features, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * labels, ctx.Input(1));
  if (features->shape().rank() != 2) return ctx.Error("logits must be 2-dimensional");
  LOWER_OR_RETURN(labels, ctx, ctx.builder().BroadcastTo(labels, features->shape().dimensions()));
  return CrossEntropy(ctx, features, labels);
}

Status LowerSparseSoftmaxCrossEntropy(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * features, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * labels, ctx.Input(1));
  const std::vector<int64_t> dims = features->shape().dimensions();
  if (dims.size() != 2) return ctx.Error("logits must be 2-dimensional");
  if (labels->shape().rank() != 1 || labels->shape().dimensions(0) != dims[0]) {
    return ctx.Error(fmt::format("logits and labels must have the same first dimension, got "
                                 "logits shape {} and labels shape {}",
                                 features->shape().ToString(false),
                                 labels->shape().ToString(false)));
  }
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = features->shape().element_type();
  const PrimitiveType index_type = labels->shape().element_type();
  // One-hot labels; a label outside [0, C) makes its row NaN, as TensorFlow's XLA kernel does.
  LOWER_OR_RETURN(HloInstruction * labels_b, ctx, b.Broadcast(labels, dims, {0}));
  LOWER_OR_RETURN(HloInstruction * iota, ctx, b.Iota(index_type, dims, 1));
  LOWER_OR_RETURN(HloInstruction * hit, ctx, b.Compare(labels_b, iota, ComparisonDirection::kEq));
  LOWER_OR_RETURN(HloInstruction * ones, ctx, b.FullConstant(type, 1, dims));
  LOWER_OR_RETURN(HloInstruction * zeros, ctx, b.FullConstant(type, 0, dims));
  LOWER_OR_RETURN(HloInstruction * onehot, ctx, b.Select(hit, ones, zeros));
  LOWER_OR_RETURN(HloInstruction * lo, ctx, b.FullConstant(index_type, 0, {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * hi, ctx,
                  b.FullConstant(index_type, static_cast<double>(dims[1]), {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * ge, ctx, b.Compare(lo, labels, ComparisonDirection::kLe));
  LOWER_OR_RETURN(HloInstruction * lt, ctx, b.Compare(labels, hi, ComparisonDirection::kLt));
  LOWER_OR_RETURN(HloInstruction * valid, ctx, b.Binary(HloOpcode::kAnd, ge, lt));
  LOWER_OR_RETURN(HloInstruction * row_zero, ctx, b.FullConstant(type, 0, {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * row_nan, ctx,
                  b.FullConstant(type, std::numeric_limits<double>::quiet_NaN(), {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * row_offset, ctx, b.Select(valid, row_zero, row_nan));
  LOWER_OR_RETURN(HloInstruction * offset_b, ctx, b.Broadcast(row_offset, dims, {0}));
  LOWER_OR_RETURN(HloInstruction * labels_f, ctx, b.Binary(HloOpcode::kAdd, onehot, offset_b));
  return CrossEntropy(ctx, features, labels_f);
}

// The bias's dimension in `value`: the last (NHWC) or the channel dimension (NCHW).
StatusOr<int64_t> BiasDimension(const XlaOpKernelContext& ctx, int64_t rank) {
  std::string format = "NHWC";
  if (const graph::AttrValue* a = graph::FindAttr(ctx.attrs(), "data_format")) format = a->s();
  if (rank < 2) return ctx.Error("input must be at least 2-dimensional");
  return format == "NCHW" ? 1 : rank - 1;
}

Status LowerBiasAdd(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * bias, ctx.Input(1));
  const std::vector<int64_t> dims = value->shape().dimensions();
  ASSIGN_OR_RETURN(int64_t dim, BiasDimension(ctx, static_cast<int64_t>(dims.size())));
  if (bias->shape().rank() != 1 || bias->shape().dimensions(0) != dims[dim]) {
    return ctx.Error(fmt::format("must provide as many biases as the feature dimension of the "
                                 "input: {} vs. {}",
                                 bias->shape().ToString(false), dims[dim]));
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * bias_b, ctx, b.Broadcast(bias, dims, {dim}));
  LOWER_OR_RETURN(HloInstruction * out, ctx, b.Binary(HloOpcode::kAdd, value, bias_b));
  ctx.SetOutput(0, out);
  return OkStatus();
}

Status LowerBiasAddGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(0));
  const int64_t rank = grad->shape().rank();
  ASSIGN_OR_RETURN(int64_t dim, BiasDimension(ctx, rank));
  std::vector<int64_t> axes;
  for (int64_t i = 0; i < rank; ++i) {
    if (i != dim) axes.push_back(i);
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(grad->shape().element_type(), 0));
  LOWER_OR_RETURN(HloInstruction * out, ctx, b.Reduce(grad, zero, axes, HloOpcode::kAdd));
  ctx.SetOutput(0, out);
  return OkStatus();
}

// Whether each row's target class is among its k largest predictions: fewer than k classes
// score strictly higher than the target (ties count in its favour, as TensorFlow's kernel
// counts them), and the target's score is finite and the target in range.
Status LowerInTopK(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * predictions, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * targets, ctx.Input(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> k, ctx.ConstantInputAsIntVector(2));
  if (k.size() != 1) return ctx.Error("k must be a scalar");
  const std::vector<int64_t> dims = predictions->shape().dimensions();
  if (dims.size() != 2 || targets->shape().rank() != 1 ||
      targets->shape().dimensions(0) != dims[0]) {
    return ctx.Error("predictions must be [batch, classes] and targets [batch]");
  }
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = predictions->shape().element_type();
  const PrimitiveType index_type = targets->shape().element_type();
  LOWER_OR_RETURN(HloInstruction * targets_b, ctx, b.Broadcast(targets, dims, {0}));
  LOWER_OR_RETURN(HloInstruction * iota, ctx, b.Iota(index_type, dims, 1));
  LOWER_OR_RETURN(HloInstruction * is_target, ctx,
                  b.Compare(targets_b, iota, ComparisonDirection::kEq));
  LOWER_OR_RETURN(HloInstruction * zeros, ctx, b.FullConstant(type, 0, dims));
  LOWER_OR_RETURN(HloInstruction * masked, ctx, b.Select(is_target, predictions, zeros));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(type, 0));
  LOWER_OR_RETURN(HloInstruction * target_score, ctx,
                  b.Reduce(masked, zero, {1}, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * score_b, ctx, b.Broadcast(target_score, dims, {0}));
  LOWER_OR_RETURN(HloInstruction * higher, ctx,
                  b.Compare(predictions, score_b, ComparisonDirection::kGt));
  LOWER_OR_RETURN(HloInstruction * one_i, ctx, b.FullConstant(PrimitiveType::S32, 1, dims));
  LOWER_OR_RETURN(HloInstruction * zero_i, ctx, b.FullConstant(PrimitiveType::S32, 0, dims));
  LOWER_OR_RETURN(HloInstruction * counts, ctx, b.Select(higher, one_i, zero_i));
  LOWER_OR_RETURN(HloInstruction * zero_s, ctx, b.ScalarConstant(PrimitiveType::S32, 0));
  LOWER_OR_RETURN(HloInstruction * rank, ctx, b.Reduce(counts, zero_s, {1}, HloOpcode::kAdd));
  LOWER_OR_RETURN(HloInstruction * kk, ctx,
                  b.FullConstant(PrimitiveType::S32, static_cast<double>(k[0]), {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * in_top, ctx, b.Compare(rank, kk, ComparisonDirection::kLt));
  LOWER_OR_RETURN(HloInstruction * finite, ctx, b.Unary(HloOpcode::kIsFinite, target_score));
  LOWER_OR_RETURN(HloInstruction * lo, ctx, b.FullConstant(index_type, 0, {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * hi, ctx,
                  b.FullConstant(index_type, static_cast<double>(dims[1]), {dims[0]}));
  LOWER_OR_RETURN(HloInstruction * ge, ctx, b.Compare(targets, lo, ComparisonDirection::kGe));
  LOWER_OR_RETURN(HloInstruction * lt, ctx, b.Compare(targets, hi, ComparisonDirection::kLt));
  LOWER_OR_RETURN(HloInstruction * valid, ctx, b.Binary(HloOpcode::kAnd, ge, lt));
  LOWER_OR_RETURN(HloInstruction * ok, ctx, b.Binary(HloOpcode::kAnd, in_top, finite));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Binary(HloOpcode::kAnd, ok, valid));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterNnXlaOps(XlaOpRegistry& registry) {
  registry.Register("Softmax", [](XlaOpKernelContext& ctx) { return LowerSoftmax(ctx, false); });
  registry.Register("LogSoftmax", [](XlaOpKernelContext& ctx) { return LowerSoftmax(ctx, true); });
  registry.Register("SoftmaxCrossEntropyWithLogits", LowerSoftmaxCrossEntropy);
  registry.Register("SparseSoftmaxCrossEntropyWithLogits", LowerSparseSoftmaxCrossEntropy);
  registry.Register("BiasAdd", LowerBiasAdd);
  registry.Register("BiasAddV1", LowerBiasAdd);
  registry.Register("BiasAddGrad", LowerBiasAddGrad);
  registry.Register("InTopKV2", LowerInTopK);
}

}  // namespace xlens::cluster
