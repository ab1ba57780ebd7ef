// Gradients of the ops Keras models add to the core set, after TensorFlow's Python gradient
// functions: Einsum (_EinsumGrad in linalg_grad.py: an Einsum per operand against the other,
// labels the operand alone had broadcast back, ellipsis broadcasting reduced away), Erf, Erfc,
// Erfinv, Ndtri and Lgamma (math_grad.py), ResizeBilinear and ResizeNearestNeighbor
// (image_grad.py), Digamma, Polygamma and Zeta (math_grad.py), the fused batch norms
// (nn_grad.py).
#include <algorithm>
#include <cmath>
#include <set>

#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

constexpr double kPi = 3.14159265358979323846264338327950288;
const char kEllipsis[] = "...";

Output ScalarLike(const Scope& s, const Output& x, double v) {
  return ops::ScalarConst(s, x.type(), v);
}

Status ErfGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output e = ops::Exp(s, ops::Neg(s, ops::Square(s, x)));
  *out = {MulOp(s, MulOp(s, g[0], ScalarLike(s, x, 2 / std::sqrt(kPi))), e)};
  return s.status();
}

Status ErfcGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output e = ops::Exp(s, ops::Neg(s, ops::Square(s, x)));
  *out = {MulOp(s, MulOp(s, g[0], ScalarLike(s, x, -2 / std::sqrt(kPi))), e)};
  return s.status();
}

Status ErfinvGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output y = Out(op, 0);
  Output e = ops::Exp(s, ops::Square(s, y));
  *out = {MulOp(s, MulOp(s, g[0], ScalarLike(s, y, std::sqrt(kPi) / 2)), e)};
  return s.status();
}

Status NdtriGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output y = Out(op, 0);
  Output e = ops::Exp(s, TrueDivOp(s, ops::Square(s, y), ScalarLike(s, y, 2)));
  *out = {MulOp(s, MulOp(s, g[0], ScalarLike(s, y, std::sqrt(2 * kPi))), e)};
  return s.status();
}

Status LgammaGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output digamma = ops::AsOutput(ops::BuildOp(s, "Digamma", {In(op, 0)}));
  *out = {MulOp(s, g[0], digamma)};
  return s.status();
}

Status DigammaGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output polygamma =
      ops::AsOutput(ops::BuildOp(s, "Polygamma", {ScalarLike(s, x, 1), x}));
  *out = {MulOp(s, g[0], polygamma)};
  return s.status();
}

// Gradients of a broadcasting binary special function with respect to its second input only
// (Python's _PolygammaGrad, _ZetaGrad): the partial, times grad, reduced to that input's shape.
Status SecondInputGrad(const Scope& s, const Node& op, const Output& grad, const Output& partial,
                       GradOutputs* out) {
  Output second = In(op, 1);
  auto args = ops::BroadcastGradientArgsOp(s, ShapeOf(s, In(op, 0)), ShapeOf(s, second));
  Output reduced = ops::Sum(s, MulOp(s, partial, grad), args.r1);
  *out = {NoGradient(), ops::Reshape(s, reduced, ShapeOf(s, second))};
  return s.status();
}

Status PolygammaGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output n = In(op, 0), x = In(op, 1);
  Output partial = ops::AsOutput(
      ops::BuildOp(s, "Polygamma", {AddOp(s, n, ScalarLike(s, n, 1)), x}));
  return SecondInputGrad(s, op, g[0], partial, out);
}

Status ZetaGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), q = In(op, 1);
  Output zeta = ops::AsOutput(ops::BuildOp(s, "Zeta", {AddOp(s, x, ScalarLike(s, x, 1)), q}));
  Output partial = MulOp(s, ops::Neg(s, x), zeta);
  return SecondInputGrad(s, op, g[0], partial, out);
}

// _BaseFusedBatchNormGrad: the matching FusedBatchNormGrad op on the saved batch statistics in
// training, on the population ones in inference (NCHW transposed to NHWC around it there, as
// Python does).
Status FusedBatchNormGradFn(const Scope& s, const Node& op, const GradOutputs& g,
                            GradOutputs* out) {
  const std::string type = op.type_string();
  const std::string grad_op = type == "FusedBatchNorm"     ? "FusedBatchNormGrad"
                              : type == "FusedBatchNormV2" ? "FusedBatchNormGradV2"
                                                           : "FusedBatchNormGradV3";
  const bool v3 = type == "FusedBatchNormV3";
  bool training = true;
  if (const AttrValue* v = FindAttr(op.attrs(), "is_training")) training = v->b();
  std::string format = "NHWC";
  if (const AttrValue* v = FindAttr(op.attrs(), "data_format")) format = v->s();
  AttrMap attrs;
  for (const char* name : {"epsilon", "is_training"}) {
    if (const AttrValue* v = FindAttr(op.attrs(), name)) attrs[name] = *v;
  }
  Output grad_y = g[0], x = In(op, 0);
  std::vector<ops::Input> inputs;
  const bool transpose = !training && (format == "NCHW" || format == "NCDHW");
  const bool five = format == "NCDHW" || format == "NDHWC";
  if (transpose) {
    const std::vector<int32_t> to_last =
        five ? std::vector<int32_t>{0, 2, 3, 4, 1} : std::vector<int32_t>{0, 2, 3, 1};
    grad_y = ops::Transpose(s, grad_y, ops::Const(s, to_last));
    x = ops::Transpose(s, x, ops::Const(s, to_last));
    format = five ? "NDHWC" : "NHWC";
  }
  attrs["data_format"] = AttrValue::String(format);
  inputs = {grad_y, x, In(op, 1)};
  if (training) {
    inputs.push_back(Out(op, 3));
    inputs.push_back(Out(op, 4));
  } else {
    inputs.push_back(In(op, 3));
    inputs.push_back(In(op, 4));
  }
  if (v3) inputs.push_back(Out(op, 5));
  Node* node = ops::BuildOp(s, grad_op, inputs, attrs);
  Output dx = ops::AsOutput(node);
  if (transpose) {
    const std::vector<int32_t> to_first =
        five ? std::vector<int32_t>{0, 4, 1, 2, 3} : std::vector<int32_t>{0, 3, 1, 2};
    dx = ops::Transpose(s, dx, ops::Const(s, to_first));
  }
  if (node == nullptr) return s.status();
  *out = {dx, Output(node, 1), Output(node, 2), NoGradient(), NoGradient()};
  return s.status();
}

AttrMap ResizeAttrs(const Node& op) {
  AttrMap attrs;
  for (const char* name : {"align_corners", "half_pixel_centers"}) {
    if (const AttrValue* v = FindAttr(op.attrs(), name)) attrs[name] = *v;
  }
  return attrs;
}

Status ResizeBilinearGrad(const Scope& s, const Node& op, const GradOutputs& g,
                          GradOutputs* out) {
  *out = {ops::AsOutput(ops::BuildOp(s, "ResizeBilinearGrad", {g[0], In(op, 0)}, ResizeAttrs(op))),
          NoGradient()};
  return s.status();
}

Status ResizeNearestNeighborGrad(const Scope& s, const Node& op, const GradOutputs& g,
                                 GradOutputs* out) {
  Output image = In(op, 0);
  const PartialShape shape = StaticShape(s, image);
  Output size;
  if (!shape.unknown_rank() && shape.rank() == 4 && shape.dim(1) >= 0 && shape.dim(2) >= 0) {
    size = ops::ShapeConst(s, {shape.dim(1), shape.dim(2)});
  } else {
    size = ops::StridedSlice(s, ops::Shape(s, image), ops::Input({1}), ops::Input({3}),
                             ops::Input({1}));
  }
  *out = {ops::AsOutput(
              ops::BuildOp(s, "ResizeNearestNeighborGrad", {g[0], size}, ResizeAttrs(op))),
          NoGradient()};
  return s.status();
}

// ----- Einsum ------------------------------------------------------------------------------------

Output Einsum(const Scope& s, const std::vector<ops::Input>& inputs, const std::string& eq) {
  return ops::AsOutput(
      ops::BuildOpWithList(s, "Einsum", {inputs}, {{"equation", AttrValue::String(eq)}}));
}

// _GetAxisFromLabel: the label's axis, negative when it follows the ellipsis.
std::optional<int64_t> AxisFromLabel(const std::string& subscripts, char label) {
  const size_t e = subscripts.find(kEllipsis);
  const std::string before = subscripts.substr(0, e);
  if (size_t i = before.find(label); i != std::string::npos) return static_cast<int64_t>(i);
  if (e == std::string::npos) return std::nullopt;
  const std::string after = subscripts.substr(e + 3);
  if (size_t i = after.find(label); i != std::string::npos) {
    return static_cast<int64_t>(i) - static_cast<int64_t>(after.size());
  }
  return std::nullopt;
}

std::set<char> Labels(const std::string& subscripts) {
  std::set<char> out;
  for (char c : subscripts)
    if (c != '.') out.insert(c);
  return out;
}

// _GetGradReduced: the gradient of an operand from the gradient of its reduced form.
Output GradReduced(const Scope& s, const Output& output_grad, const std::string& output_subs,
                   const std::string& input_subs, const Output& input, const Output& input_shape,
                   const std::string& reduced) {
  std::vector<int32_t> axes;
  for (char c : reduced) axes.push_back(static_cast<int32_t>(*AxisFromLabel(input_subs, c)));
  std::string without;
  for (char c : input_subs)
    if (reduced.find(c) == std::string::npos) without += c;
  // Python's test: len(set(input_subs)) + len(set(output_subs)) < len(input_subs) +
  // len(output_subs), characters as written (an ellipsis counts as repeated dots).
  const bool repeated =
      std::set<char>(input_subs.begin(), input_subs.end()).size() +
          std::set<char>(output_subs.begin(), output_subs.end()).size() <
      input_subs.size() + output_subs.size();
  if (!repeated && without == output_subs) {
    Output reduced_shape = ReducedShape(s, input_shape, ops::Const(s, axes));
    return ops::AsOutput(ops::BuildOp(
        s, "BroadcastTo", {ops::Reshape(s, output_grad, reduced_shape), input_shape}));
  }
  Output reduced_dims = ops::GatherV2(s, input_shape, ops::Const(s, axes), ops::Input(0));
  Output grad_shape = ops::Shape(s, output_grad);
  Output with_reduced = ops::ConcatV2(s, {reduced_dims, grad_shape}, ops::Input(0));
  std::vector<int32_t> ones(reduced.size(), 1);
  Output reduced_shape = ops::ConcatV2(s, {ops::Const(s, ones), grad_shape}, ops::Input(0));
  Output broadcast = ops::AsOutput(ops::BuildOp(
      s, "BroadcastTo", {ops::Reshape(s, output_grad, reduced_shape), with_reduced}));
  (void)input;
  return Einsum(s, {broadcast}, reduced + output_subs + "->" + input_subs);
}

// _GetGradWrt.
Output GradWrt(const Scope& s, const Output& output_grad, const Output& other,
               const Output& input, const std::string& input_subs, const std::string& other_subs,
               const std::string& output_subs) {
  std::string reduced;
  const std::set<char> keep = [&] {
    std::set<char> k = Labels(output_subs + other_subs);
    return k;
  }();
  for (char c : Labels(input_subs))
    if (!keep.count(c)) reduced += c;
  std::string left;
  for (size_t i = 0; i < input_subs.size(); ++i) {
    if (input_subs.compare(i, 3, kEllipsis) == 0) {
      left += kEllipsis;
      i += 2;
    } else if (reduced.find(input_subs[i]) == std::string::npos) {
      left += input_subs[i];
    }
  }
  Output grad_reduced =
      Einsum(s, {output_grad, other}, output_subs + "," + other_subs + "->" + left);
  if (reduced.empty()) return grad_reduced;
  return GradReduced(s, grad_reduced, left, input_subs, input, ShapeOf(s, input), reduced);
}

Status EinsumGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const AttrValue* eq_attr = FindAttr(op.attrs(), "equation");
  if (eq_attr == nullptr) return s.status();
  const std::string equation = eq_attr->s();
  const size_t arrow = equation.find("->");
  std::string input_subs = equation.substr(0, arrow);
  const std::string output_subs = equation.substr(arrow + 2);
  if (op.num_inputs() == 1) {
    std::string reduced;
    for (char c : Labels(input_subs))
      if (!Labels(output_subs).count(c)) reduced += c;
    if (reduced.empty()) {
      *out = {Einsum(s, {g[0]}, output_subs + "->" + input_subs)};
    } else {
      *out = {GradReduced(s, g[0], output_subs, input_subs, In(op, 0), ShapeOf(s, In(op, 0)),
                          reduced)};
    }
    return s.status();
  }
  const size_t comma = input_subs.find(',');
  std::string x_subs = input_subs.substr(0, comma), y_subs = input_subs.substr(comma + 1);
  const bool out_ellipsis = output_subs.find(kEllipsis) != std::string::npos;
  if (out_ellipsis) {
    if (x_subs.find(kEllipsis) == std::string::npos) x_subs += kEllipsis;
    if (y_subs.find(kEllipsis) == std::string::npos) y_subs += kEllipsis;
  }
  Output x = In(op, 0), y = In(op, 1);
  Output gx = GradWrt(s, g[0], y, x, x_subs, y_subs, output_subs);
  Output gy = GradWrt(s, g[0], x, y, y_subs, x_subs, output_subs);
  if (!out_ellipsis) {
    *out = {gx, gy};
    return s.status();
  }
  // The ellipsis dimensions each operand broadcast: summed away (_GetBcastSubshape: the
  // ellipsis starts at `start` and ends `remaining` dimensions before the end).
  auto bcast = [](const std::string& subs) {
    const int64_t start = static_cast<int64_t>(subs.find(kEllipsis));
    const int64_t remaining = static_cast<int64_t>(subs.size()) - (start + 3);
    return std::make_pair(start, remaining);
  };
  const auto [bx0, x_rest] = bcast(x_subs);
  const auto [by0, y_rest] = bcast(y_subs);
  const PartialShape xs = StaticShape(s, x), ys = StaticShape(s, y);
  if (xs.IsFullyDefined() && ys.IsFullyDefined()) {
    std::vector<int64_t> xb(xs.dims().begin() + bx0, xs.dims().end() - x_rest);
    std::vector<int64_t> yb(ys.dims().begin() + by0, ys.dims().end() - y_rest);
    if (xb == yb) {
      *out = {gx, gy};
      return s.status();
    }
  }
  // shape[start:end] of each operand, end None when nothing follows the ellipsis.
  auto sub_shape = [&](const Output& v, int64_t start, int64_t rest) {
    ops::StridedSliceAttrs attrs;
    if (rest == 0) attrs.end_mask = 1;
    return ops::StridedSlice(s, ops::Shape(s, v),
                             ops::Input({static_cast<int32_t>(start)}),
                             ops::Input({static_cast<int32_t>(rest == 0 ? 0 : -rest)}),
                             ops::Input({1}), attrs);
  };
  auto args = ops::BroadcastGradientArgsOp(s, sub_shape(x, bx0, x_rest), sub_shape(y, by0, y_rest));
  auto reduce = [&](const Output& grad, int64_t start, const Output& axes, const Output& of) {
    Output shifted = ops::Add(s, axes, ops::Input(static_cast<int32_t>(start)));
    return ops::Reshape(s, ops::Sum(s, grad, shifted), ops::Shape(s, of));
  };
  *out = {reduce(gx, bx0, args.r0, x), reduce(gy, by0, args.r1, y)};
  return s.status();
}

}  // namespace

void RegisterModelGradients(OpRegistry& r) {
  Set(r, "Erf", ErfGrad);
  Set(r, "Erfc", ErfcGrad);
  Set(r, "Erfinv", ErfinvGrad);
  Set(r, "Ndtri", NdtriGrad);
  Set(r, "Lgamma", LgammaGrad);
  Set(r, "Digamma", DigammaGrad);
  Set(r, "Polygamma", PolygammaGrad);
  Set(r, "Zeta", ZetaGrad);
  Set(r, "ResizeBilinear", ResizeBilinearGrad);
  Set(r, "ResizeNearestNeighbor", ResizeNearestNeighborGrad);
  Set(r, "Einsum", EinsumGrad);
  for (const char* op : {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"}) {
    Set(r, op, FusedBatchNormGradFn);
  }
}

}  // namespace xlens::graph::grad
