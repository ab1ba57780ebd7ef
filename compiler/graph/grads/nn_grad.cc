// Gradients of the nn ops, after tensorflow/python/ops/nn_grad.py.
#include <initializer_list>

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

Status AvgPoolGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::AsOutput(ops::BuildOp(s, "AvgPoolGrad", {ops::Shape(s, In(op, 0)), g[0]},
                                     BackpropAttrs(op)))};
  return s.status();
}

// The activations whose backprop op takes the gradient and the forward op's input (Relu6,
// Softplus, LeakyRelu with its alpha) or its output (Elu, Selu), as nn_grad.py passes them.
template <const char* kBackprop, bool kFromOutput>
Status ActivationGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  AttrMap attrs;
  if (const AttrValue* alpha = FindAttr(op.attrs(), "alpha")) attrs["alpha"] = *alpha;
  *out = {ops::AsOutput(ops::BuildOp(s, kBackprop, {g[0], kFromOutput ? Out(op, 0) : In(op, 0)},
                                     std::move(attrs)))};
  return s.status();
}
constexpr char kRelu6Grad[] = "Relu6Grad";
constexpr char kEluGrad[] = "EluGrad";
constexpr char kSeluGrad[] = "SeluGrad";
constexpr char kSoftplusGrad[] = "SoftplusGrad";
constexpr char kLeakyReluGrad[] = "LeakyReluGrad";

Status MaxPoolGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::AsOutput(
      ops::BuildOp(s, "MaxPoolGrad", {In(op, 0), Out(op, 0), g[0]}, BackpropAttrs(op)))};
  return s.status();
}

// The attrs named in `keep` of the forward op, for the ops its gradient builds (the backprops
// of depthwise and 3-D convolutions, the 3-D poolings), as Python passes them one by one.
AttrMap AttrsNamed(const Node& op, std::initializer_list<const char*> keep) {
  AttrMap attrs;
  for (const char* name : keep) {
    if (const AttrValue* v = FindAttr(op.attrs(), name)) attrs[name] = *v;
  }
  return attrs;
}

AttrMap DepthwiseAttrs(const Node& op) {
  return AttrsNamed(op, {"strides", "padding", "explicit_paddings", "data_format", "dilations"});
}
AttrMap Conv3DAttrs(const Node& op) {
  return AttrsNamed(op, {"strides", "padding", "data_format", "dilations"});
}
AttrMap Pool3DAttrs(const Node& op) {
  return AttrsNamed(op, {"ksize", "strides", "padding", "data_format"});
}

Output Build(const Scope& s, const std::string& type, const std::vector<ops::Input>& inputs,
             AttrMap attrs) {
  return ops::AsOutput(ops::BuildOp(s, type, inputs, std::move(attrs)));
}

Status DepthwiseConv2dNativeGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                 GradOutputs* out) {
  *out = {Build(s, "DepthwiseConv2dNativeBackpropInput", {ShapeOf(s, In(op, 0)), In(op, 1), g[0]},
                DepthwiseAttrs(op)),
          Build(s, "DepthwiseConv2dNativeBackpropFilter", {In(op, 0), ShapeOf(s, In(op, 1)), g[0]},
                DepthwiseAttrs(op))};
  return s.status();
}

Status DepthwiseBackpropInputGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                  GradOutputs* out) {
  *out = {NoGradient(),
          Build(s, "DepthwiseConv2dNativeBackpropFilter", {g[0], ShapeOf(s, In(op, 1)), In(op, 2)},
                DepthwiseAttrs(op)),
          Build(s, "DepthwiseConv2dNative", {g[0], In(op, 1)}, DepthwiseAttrs(op))};
  return s.status();
}

Status DepthwiseBackpropFilterGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                   GradOutputs* out) {
  *out = {Build(s, "DepthwiseConv2dNativeBackpropInput", {ShapeOf(s, In(op, 0)), g[0], In(op, 2)},
                DepthwiseAttrs(op)),
          NoGradient(), Build(s, "DepthwiseConv2dNative", {In(op, 0), g[0]}, DepthwiseAttrs(op))};
  return s.status();
}

// Python takes both shapes with one ShapeN.
Status Conv3DGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Node* shapes = ops::BuildOpWithList(s, "ShapeN", {{In(op, 0), In(op, 1)}});
  if (shapes == nullptr) return s.status();
  *out = {Build(s, "Conv3DBackpropInputV2", {Output(shapes, 0), In(op, 1), g[0]}, Conv3DAttrs(op)),
          Build(s, "Conv3DBackpropFilterV2", {In(op, 0), Output(shapes, 1), g[0]},
                Conv3DAttrs(op))};
  return s.status();
}

Status Conv3DBackpropInputGrad(const Scope& s, const Node& op, const GradOutputs& g,
                               GradOutputs* out) {
  *out = {NoGradient(),
          Build(s, "Conv3DBackpropFilterV2", {g[0], ShapeOf(s, In(op, 1)), In(op, 2)},
                Conv3DAttrs(op)),
          Build(s, "Conv3D", {g[0], In(op, 1)}, Conv3DAttrs(op))};
  return s.status();
}

Status Conv3DBackpropFilterGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                GradOutputs* out) {
  *out = {Build(s, "Conv3DBackpropInputV2", {ShapeOf(s, In(op, 0)), g[0], In(op, 2)},
                Conv3DAttrs(op)),
          NoGradient(), Build(s, "Conv3D", {In(op, 0), g[0]}, Conv3DAttrs(op))};
  return s.status();
}

Status AvgPool3DGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {Build(s, "AvgPool3DGrad", {ShapeOf(s, In(op, 0)), g[0]}, Pool3DAttrs(op))};
  return s.status();
}

Status AvgPool3DGradGradFn(const Scope& s, const Node& op, const GradOutputs& g,
                           GradOutputs* out) {
  *out = {ops::StopGradient(s, In(op, 0)), Build(s, "AvgPool3D", {g[0]}, Pool3DAttrs(op))};
  return s.status();
}

Status MaxPool3DGradFn(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {Build(s, "MaxPool3DGrad", {In(op, 0), Out(op, 0), g[0]}, Pool3DAttrs(op))};
  return s.status();
}

// MaxPool3DGrad and MaxPool3DGradGrad are each other's gradient (`other`); the pooled tensors
// get zeros.
template <const char* kOther>
Status MaxPool3DSecondGrad(const Scope& s, const Node& op, const GradOutputs& g,
                           GradOutputs* out) {
  *out = {ZerosLikeOf(s, In(op, 0)), ZerosLikeOf(s, In(op, 1)),
          Build(s, kOther, {In(op, 0), In(op, 1), g[0]}, Pool3DAttrs(op))};
  return s.status();
}
constexpr char kMaxPool3DGrad[] = "MaxPool3DGrad";
constexpr char kMaxPool3DGradGrad[] = "MaxPool3DGradGrad";

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
  Set(r, "AvgPool", AvgPoolGradFn);
  Set(r, "Relu6", ActivationGrad<kRelu6Grad, false>);
  Set(r, "Softplus", ActivationGrad<kSoftplusGrad, false>);
  Set(r, "LeakyRelu", ActivationGrad<kLeakyReluGrad, false>);
  Set(r, "Elu", ActivationGrad<kEluGrad, true>);
  Set(r, "Selu", ActivationGrad<kSeluGrad, true>);
  Set(r, "DepthwiseConv2dNative", DepthwiseConv2dNativeGrad);
  Set(r, "DepthwiseConv2dNativeBackpropInput", DepthwiseBackpropInputGrad);
  Set(r, "DepthwiseConv2dNativeBackpropFilter", DepthwiseBackpropFilterGrad);
  Set(r, "Conv3D", Conv3DGrad);
  Set(r, "Conv3DBackpropInputV2", Conv3DBackpropInputGrad);
  Set(r, "Conv3DBackpropFilterV2", Conv3DBackpropFilterGrad);
  Set(r, "AvgPool3D", AvgPool3DGradFn);
  Set(r, "AvgPool3DGrad", AvgPool3DGradGradFn);
  Set(r, "MaxPool3D", MaxPool3DGradFn);
  Set(r, "MaxPool3DGrad", MaxPool3DSecondGrad<kMaxPool3DGradGrad>);
  Set(r, "MaxPool3DGradGrad", MaxPool3DSecondGrad<kMaxPool3DGrad>);
}

}  // namespace xlens::graph::grad
