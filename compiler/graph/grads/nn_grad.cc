// Gradients of the nn ops, after tensorflow/python/ops/nn_grad.py.
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

Status ReluGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::ReluGrad(s, g[0], Out(op, 0))};
  return s.status();
}

std::string DataFormat(const Node& op) {
  if (const AttrValue* v = FindAttr(op.attrs(), "data_format")) return v->s();
  return "NHWC";
}

Status BiasAddGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {g[0], ops::BiasAddGrad(s, g[0], DataFormat(op))};
  return s.status();
}

Status SoftmaxGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  // (grad - sum(grad * softmax, -1, keepdims)) * softmax.
  Output softmax = Out(op, 0);
  Output sum_channels = ReduceSum(s, MulOp(s, g[0], softmax), ops::Input(-1), true);
  *out = {MulOp(s, SubOp(s, g[0], sum_channels), softmax)};
  return s.status();
}

Status LogSoftmaxGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  // grad - sum(grad, -1, keepdims) * exp(logsoftmax).
  Output softmax = ops::Exp(s, Out(op, 0));
  *out = {SubOp(s, g[0], MulOp(s, ReduceSum(s, g[0], ops::Input(-1), true), softmax))};
  return s.status();
}

// _BroadcastMul: vec[..., None] * mat.
Output BroadcastMul(const Scope& s, const Output& vec, const Output& mat) {
  return MulOp(s, ops::ExpandDims(s, vec, ops::Input(-1)), mat);
}

// The term the second-order gradient (grad_grad, a gradient into the backprop output) adds.
Output GradGradTerm(const Scope& s, const Output& logits, const Output& grad_grad) {
  Output softmax = ops::Softmax(s, logits);
  Output prod = ops::BatchMatMulV2(s, ops::ExpandDims(s, grad_grad, ops::Input(1)),
                                   ops::ExpandDims(s, softmax, ops::Input(2)));
  return MulOp(s, SubOp(s, grad_grad, ops::Squeeze(s, prod, {1})), softmax);
}

Status SoftmaxCrossEntropyGrad(const Scope& s, const Node& op, const GradOutputs& g,
                               GradOutputs* out) {
  Output grad = BroadcastMul(s, g[0], Out(op, 1));
  Output logits = In(op, 0);
  if (g[1].valid() && !IsZerosTensor(g[1])) {
    grad = AddOp(s, grad, GradGradTerm(s, logits, g[1]));
  }
  Output neg_log_softmax = ops::Neg(s, ops::LogSoftmax(s, logits));
  *out = {grad, BroadcastMul(s, g[0], neg_log_softmax)};
  return s.status();
}

Status SparseSoftmaxCrossEntropyGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                     GradOutputs* out) {
  Output grad = BroadcastMul(s, g[0], Out(op, 1));
  if (g[1].valid() && !IsZerosTensor(g[1])) {
    grad = AddOp(s, grad, GradGradTerm(s, In(op, 0), g[1]));
  }
  *out = {grad, NoGradient()};
  return s.status();
}

// The forward op's attrs minus its type, for the backprop ops of Conv2D and MaxPool.
AttrMap BackpropAttrs(const Node& op) {
  AttrMap attrs;
  for (const auto& [name, value] : op.attrs()) {
    if (name != "T" && !name.starts_with("_")) attrs[name] = value;
  }
  return attrs;
}

Status Conv2DGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output shape_0 = ops::Shape(s, In(op, 0));
  Output shape_1 = ops::Shape(s, In(op, 1));
  Output dx = ops::AsOutput(ops::BuildOp(s, "Conv2DBackpropInput", {shape_0, In(op, 1), g[0]},
                                         BackpropAttrs(op)));
  Output dw = ops::AsOutput(ops::BuildOp(s, "Conv2DBackpropFilter", {In(op, 0), shape_1, g[0]},
                                         BackpropAttrs(op)));
  *out = {dx, dw};
  return s.status();
}

Status MaxPoolGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::AsOutput(
      ops::BuildOp(s, "MaxPoolGrad", {In(op, 0), Out(op, 0), g[0]}, BackpropAttrs(op)))};
  return s.status();
}

}  // namespace

void RegisterNnGradients(OpRegistry& r) {
  Set(r, "Relu", ReluGradFn);
  Set(r, "BiasAdd", BiasAddGradFn);
  Set(r, "Softmax", SoftmaxGrad);
  Set(r, "LogSoftmax", LogSoftmaxGrad);
  Set(r, "SoftmaxCrossEntropyWithLogits", SoftmaxCrossEntropyGrad);
  Set(r, "SparseSoftmaxCrossEntropyWithLogits", SparseSoftmaxCrossEntropyGrad);
  Set(r, "Conv2D", Conv2DGrad);
  Set(r, "MaxPool", MaxPoolGradFn);
}

}  // namespace xlens::graph::grad
