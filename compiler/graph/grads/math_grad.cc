// Gradients of the math ops, after tensorflow/python/ops/math_grad.py: the same nodes, in the
// same order and with the same names, including the paths Python takes when static shapes are
// known (no BroadcastGradientArgs when the reduction axes follow from the shapes, a Const for a
// fully known shape).
#include <numeric>

#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

// What SmartBroadcastGradientArgs returns for one argument of a broadcasting binary op.
struct ReduceInfo {
  Output shape;
  std::optional<std::vector<int64_t>> axes;  // known statically
  Output axes_tensor;                        // else from BroadcastGradientArgs
  bool must_reduce = true;
};

// _InferGradientReductionAxes: the axes each argument was broadcast along, when the static
// shapes decide it.
bool InferReductionAxes(const PartialShape& x, const PartialShape& y, std::vector<int64_t>* x_axes,
                        std::vector<int64_t>* y_axes) {
  if (x.unknown_rank() || y.unknown_rank()) return false;
  const int64_t xr = x.rank(), yr = y.rank();
  const int64_t br = std::max(xr, yr);
  for (int64_t axis = 0; axis < br; ++axis) {
    const int64_t xd = axis < br - xr ? 1 : x.dim(axis - (br - xr));
    const int64_t yd = axis < br - yr ? 1 : y.dim(axis - (br - yr));
    if (xd == 1 && yd != 1) {
      x_axes->push_back(axis);
    } else if (yd == 1 && xd != 1) {
      y_axes->push_back(axis);
    } else if (xd < 0 || yd < 0) {
      return false;
    }
  }
  return true;
}

std::pair<ReduceInfo, ReduceInfo> SmartBroadcastGradientArgs(const Scope& s, const Output& x,
                                                             const Output& y) {
  ReduceInfo bx, by;
  bx.shape = ShapeOf(s, x);
  by.shape = ShapeOf(s, y);
  const PartialShape xs = StaticShape(s, x), ys = StaticShape(s, y);
  std::vector<int64_t> xa, ya;
  if (InferReductionAxes(xs, ys, &xa, &ya)) {
    bx.must_reduce = !xa.empty() || xs.rank() < ys.rank();
    by.must_reduce = !ya.empty() || ys.rank() < xs.rank();
    bx.axes = xa;
    by.axes = ya;
  } else {
    auto r = ops::BroadcastGradientArgsOp(s, bx.shape, by.shape);
    bx.axes_tensor = r.r0;
    by.axes_tensor = r.r1;
  }
  return {bx, by};
}

// _ReduceGradientArg.
Output ReduceGradientArg(const Scope& s, Output grad, const ReduceInfo& info) {
  if (!grad.valid() || !info.must_reduce) return grad;
  ops::Input axes = info.axes ? Int32s(*info.axes) : ops::Input(info.axes_tensor);
  grad = ReduceSum(s, grad, axes, /*keep_dims=*/true);
  return ops::Reshape(s, grad, info.shape);
}

// _ReduceGradientArgs.
void ReduceGradientArgs(const Scope& s, const Output& x, const Output& y, Output* gx,
                        Output* gy) {
  if (!gx->valid() && !gy->valid()) return;
  auto [bx, by] = SmartBroadcastGradientArgs(s, x, y);
  *gx = ReduceGradientArg(s, *gx, bx);
  *gy = ReduceGradientArg(s, *gy, by);
}

// _ShapesFullySpecifiedAndEqual.
bool ShapesFullySpecifiedAndEqual(const Scope& s, const Output& x, const Output& y,
                                  const Output& grad) {
  PartialShape xs = StaticShape(s, x), ys = StaticShape(s, y), gs = StaticShape(s, grad);
  return xs == ys && xs == gs && xs.IsFullyDefined();
}

Status AddGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  if (ShapesFullySpecifiedAndEqual(s, x, y, grad)) {
    *out = {grad, grad};
    return OkStatus();
  }
  Output gx = grad, gy = grad;
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

Status SubGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  if (ShapesFullySpecifiedAndEqual(s, x, y, grad)) {
    *out = {grad, ops::Neg(s, grad)};
    return s.status();
  }
  Output gx = grad, gy = ops::Neg(s, grad);
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

Status MulGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  if (ShapesFullySpecifiedAndEqual(s, x, y, grad) &&
      (grad.type() == DT_INT32 || grad.type() == DT_FLOAT)) {
    *out = {ops::Mul(s, grad, y), ops::Mul(s, grad, x)};
    return s.status();
  }
  Output gx = ops::Mul(s, grad, y);
  Output gy = ops::Mul(s, x, grad);
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

// RealDiv and DivNoNan: gx = grad / y, gy = grad * ((-x / y) / y), with the op's own division.
GradFn DivGrad(const std::string& div_op, const std::string& name) {
  return [div_op, name](const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
    Output x = In(op, 0), y = In(op, 1), grad = g[0];
    auto div = [&](const ops::Input& a, const ops::Input& b) {
      return ops::AsOutput(ops::BuildOp(s, div_op, {a, b}, {}, name));
    };
    Output gx = div(grad, y);
    Output neg_x = ops::Neg(s, x);
    Output gy = MulOp(s, grad, div(div(neg_x, y), y));
    ReduceGradientArgs(s, x, y, &gx, &gy);
    *out = {gx, gy};
    return s.status();
  };
}

Status FloorModGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  Output floor_xy = ops::FloorDiv(s, x, y);
  Output gx = grad;
  Output gy = MulOp(s, grad, ops::Neg(s, floor_xy));
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

// _MaximumMinimumGrad: the gradient goes to the selected argument (x on ties).
GradFn MaximumMinimumGrad(const std::string& selector) {
  return [selector](const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
    Output x = In(op, 0), y = In(op, 1), grad = g[0];
    Output zeros = ZerosLikeOf(s, grad);
    Output xmask = ops::AsOutput(ops::BuildOp(s, selector, {x, y}));
    Output gx = ops::SelectV2(s, xmask, grad, zeros);
    Output gy = ops::SelectV2(s, xmask, zeros, grad);
    ReduceGradientArgs(s, x, y, &gx, &gy);
    *out = {gx, gy};
    return s.status();
  };
}

Status SquaredDifferenceGrad(const Scope& s, const Node& op, const GradOutputs& g,
                             GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  Scope c = s.WithControlDependencies(std::vector<Output>{grad});
  Output two_grad = MulOp(c, ops::Input::Like(2.0), grad);
  Output gx = MulOp(c, two_grad, SubOp(c, x, y));
  Output gy = ops::Neg(s, gx);
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

Status PowGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0), y = In(op, 1), z = Out(op, 0), grad = g[0];
  Output gx = MulOp(s, MulOp(s, grad, y), ops::Pow(s, x, SubOp(s, y, ops::Input::Like(1.0))));
  // log(x) where x > 0, else 0 (the gradient for y is taken as 0 there, as Python does).
  Output mask = ops::Greater(s, x, ops::Input::Like(0.0));
  Output safe_x = ops::SelectV2(s, mask, x, ops::OnesLike(s, x));
  Output log_x = ops::SelectV2(s, mask, ops::Log(s, safe_x), ZerosLikeOf(s, x));
  Output gy = MulOp(s, MulOp(s, grad, z), log_x);
  ReduceGradientArgs(s, x, y, &gx, &gy);
  *out = {gx, gy};
  return s.status();
}

// Unary ops.
Status NegGrad(const Scope& s, const Node&, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::Neg(s, g[0])};
  return s.status();
}
Status SquareGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  Output two = ops::ScalarConst(c, RemoveRefType(In(op, 0).type()), 2.0);
  *out = {ops::Mul(c, g[0], ops::Mul(c, In(op, 0), two))};
  return s.status();
}
Status SqrtGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::SqrtGrad(s, Out(op, 0), g[0])};
  return s.status();
}
Status RsqrtGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {ops::RsqrtGrad(s, Out(op, 0), g[0])};
  return s.status();
}
Status ExpGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {MulOp(s, g[0], Out(op, 0))};
  return s.status();
}
Status LogGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  *out = {MulOp(c, g[0], ops::Reciprocal(c, In(op, 0)))};
  return s.status();
}
Status TanhGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  *out = {ops::TanhGrad(c, Out(op, 0), g[0])};
  return s.status();
}
Status SigmoidGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  *out = {ops::SigmoidGrad(c, Out(op, 0), g[0])};
  return s.status();
}
Status SinGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  *out = {MulOp(c, g[0], ops::Cos(c, In(op, 0)))};
  return s.status();
}
Status CosGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Scope c = s.WithControlDependencies(std::vector<Output>{g[0]});
  Output neg = ops::Neg(c, g[0]);
  *out = {MulOp(c, neg, ops::Sin(c, In(op, 0)))};
  return s.status();
}
Status AbsGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {MulOp(s, g[0], ops::Sign(s, In(op, 0)))};
  return s.status();
}
Status ReciprocalGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  // d(1/x) = -y^2 dx.
  Output y = Out(op, 0);
  *out = {MulOp(s, ops::Neg(s, g[0]), MulOp(s, y, y))};
  return s.status();
}
Status ZeroGrad(const Scope& s, const Node& op, const GradOutputs&, GradOutputs* out) {
  // Piecewise constant ops (Sign, Floor): the gradient is zero, not absent.
  *out = {ZerosLikeOf(s, In(op, 0))};
  return s.status();
}

Status CastGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType src = RemoveRefType(In(op, 0).type());
  const DataType dst = RemoveRefType(g[0].type());
  if (DataTypeIsFloating(src) && DataTypeIsFloating(dst)) {
    *out = {ops::Cast(s, g[0], src)};
  } else {
    *out = {NoGradient()};
  }
  return s.status();
}

Status SelectGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output c = In(op, 0), x = In(op, 1), grad = g[0];
  Output zeros = ZerosLikeOf(s, x);
  *out = {NoGradient(), ops::Select(s, c, grad, zeros), ops::Select(s, c, zeros, grad)};
  return s.status();
}

Status SelectV2Grad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output c = In(op, 0), x = In(op, 1), y = In(op, 2), grad = g[0];
  Output zeros = ops::ScalarConst(s.WithOpName("zeros"), RemoveRefType(grad.type()), 0.0);
  Output gx = ops::SelectV2(s, c, grad, zeros);
  Output gy = ops::SelectV2(s, c, zeros, grad);
  // Each of x and y may have been broadcast to the output's shape.
  Output out_shape = ShapeOf(s, Out(op, 0));
  Output x_shape = ShapeOf(s, x);
  auto rx = ops::BroadcastGradientArgsOp(s, x_shape, out_shape);
  gx = ops::Reshape(s, ReduceSum(s, gx, rx.r0, true), x_shape);
  Output y_shape = ShapeOf(s, y);
  auto ry = ops::BroadcastGradientArgsOp(s, y_shape, out_shape);
  gy = ops::Reshape(s, ReduceSum(s, gy, ry.r0, true), y_shape);
  *out = {NoGradient(), gx, gy};
  return s.status();
}

Status MatMulGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  bool ta = false, tb = false;
  if (const AttrValue* v = FindAttr(op.attrs(), "transpose_a")) ta = v->b();
  if (const AttrValue* v = FindAttr(op.attrs(), "transpose_b")) tb = v->b();
  Output a = In(op, 0), b = In(op, 1), grad = g[0];
  using A = ops::MatMulAttrs;
  Output ga, gb;
  if (!ta && !tb) {
    ga = ops::MatMul(s, grad, b, A{}.TransposeB(true));
    gb = ops::MatMul(s, a, grad, A{}.TransposeA(true));
  } else if (!ta && tb) {
    ga = ops::MatMul(s, grad, b);
    gb = ops::MatMul(s, grad, a, A{}.TransposeA(true));
  } else if (ta && !tb) {
    ga = ops::MatMul(s, b, grad, A{}.TransposeB(true));
    gb = ops::MatMul(s, a, grad);
  } else {
    ga = ops::MatMul(s, b, grad, A{}.TransposeA(true).TransposeB(true));
    gb = ops::MatMul(s, grad, a, A{}.TransposeA(true).TransposeB(true));
  }
  *out = {ga, gb};
  return s.status();
}

Status BatchMatMulV2Grad(const Scope& s, const Node& op, const GradOutputs& g,
                         GradOutputs* out) {
  bool adj_x = false, adj_y = false;
  if (const AttrValue* v = FindAttr(op.attrs(), "adj_x")) adj_x = v->b();
  if (const AttrValue* v = FindAttr(op.attrs(), "adj_y")) adj_y = v->b();
  Output x = In(op, 0), y = In(op, 1), grad = g[0];
  auto mm = [&](const Output& a, const Output& b, bool aa, bool ab) {
    return ops::BatchMatMulV2(s, a, b, ops::BatchMatMulAttrs{aa, ab});
  };
  Output gx, gy;
  if (!adj_x) {
    if (!adj_y) {
      gx = mm(grad, y, false, true);
      gy = mm(x, grad, true, false);
    } else {
      gx = mm(grad, y, false, false);
      gy = mm(grad, x, true, false);
    }
  } else {
    if (!adj_y) {
      gx = mm(y, grad, false, true);
      gy = mm(x, grad, false, false);
    } else {
      gx = mm(y, grad, true, true);
      gy = mm(grad, x, true, true);
    }
  }
  // Reduce over the batch dimensions that were broadcast, unless they are known to agree.
  PartialShape xs = StaticShape(s, x), ys = StaticShape(s, y);
  auto batch = [](const PartialShape& p) {
    return std::vector<int64_t>(p.dims().begin(), p.dims().end() - 2);
  };
  const bool may_have_batch = xs.unknown_rank() || ys.unknown_rank() || xs.rank() > 2 ||
                              ys.rank() > 2;
  bool batch_match = !xs.unknown_rank() && !ys.unknown_rank() &&
                     PartialShape(batch(xs)).IsFullyDefined() &&
                     PartialShape(batch(ys)).IsFullyDefined() && batch(xs) == batch(ys);
  if (may_have_batch && !batch_match) {
    Output sx = ops::Shape(s, x), sy = ops::Shape(s, y);
    ops::StridedSliceAttrs all_but_two;
    all_but_two.begin_mask = 1;
    Output bx = ops::StridedSlice(s, sx, ops::Input({0}), ops::Input({-2}), ops::Input({1}),
                                  all_but_two);
    Output by = ops::StridedSlice(s, sy, ops::Input({0}), ops::Input({-2}), ops::Input({1}),
                                  all_but_two);
    auto r = ops::BroadcastGradientArgsOp(s, bx, by);
    gx = ops::Reshape(s, ReduceSum(s, gx, r.r0, false), sx);
    gy = ops::Reshape(s, ReduceSum(s, gy, r.r1, false), sy);
  }
  *out = {gx, gy};
  return s.status();
}

// _SumGrad: the gradient broadcast back over the reduced axes.
Output SumGradOf(const Scope& s, const Node& op, const Output& grad_in) {
  Output input = In(op, 0);
  Output grad = grad_in;
  const PartialShape in_shape = StaticShape(s, input);
  if (!in_shape.unknown_rank()) {
    if (auto axes = ConstantValue(In(op, 1))) {
      const int64_t rank = in_shape.rank();
      std::vector<int64_t> a = axes->AsInt64Vector();
      std::vector<int64_t> all(rank);
      std::iota(all.begin(), all.end(), 0);
      if (a == all) {  // Reduce all dims: Reshape to ones and Tile.
        if (rank == 0) {
          // reshape(grad, []): Python converts the empty list first as a float tensor, which
          // Reshape's Tshape rejects, leaving that Const "Reshape/shape" behind, and then as
          // int32 ("Reshape/shape_1").
          Scope consts = s;
          Scope reshape = s.NewOpScope("Reshape", &consts);
          (void)ops::Const(consts.WithOpName("shape"), Tensor(DT_FLOAT, {0}));
          Output shape = ops::Const(consts.WithOpName("shape_1"), Tensor(DT_INT32, {0}));
          grad = ops::AsOutput(reshape.AddNode("Reshape", {grad, shape}, {}));
        } else {
          grad = ops::Reshape(s, grad, Int32s(std::vector<int64_t>(rank, 1)));
        }
        Output input_shape;
        if (in_shape.IsFullyDefined()) {
          input_shape = ops::ShapeConst(s.WithOpName("Const"), in_shape.dims());
        } else {
          input_shape = ShapeOf(s, input);
        }
        return ops::Tile(s, grad, input_shape);
      }
      if (in_shape.IsFullyDefined()) {
        // Static reduced shape and tile multiples.
        std::vector<int64_t> kept = in_shape.dims(), scaling(rank, 1);
        for (int64_t ax : a) {
          const int64_t k = ax < 0 ? ax + rank : ax;
          if (k >= 0 && k < rank) kept[k] = 1;
        }
        for (int64_t i = 0; i < rank; ++i) scaling[i] = in_shape.dim(i) / std::max<int64_t>(kept[i], 1);
        grad = ops::Reshape(s, grad, Int32s(kept));
        return ops::Tile(s, grad, Int32s(scaling));
      }
    }
  }
  Output input_shape = ShapeOf(s, input);
  Output kept = ReducedShape(s, input_shape, In(op, 1));
  bool keep_dims = false;
  if (const AttrValue* v = FindAttr(op.attrs(), "keep_dims")) keep_dims = v->b();
  if (!keep_dims) grad = ops::Reshape(s, grad, kept);
  // broadcast_to(grad, input_shape) as Tile(grad, input_shape / max(kept, 1)).
  Output scaling = ops::FloorDiv(s, input_shape, ops::Maximum(s, kept, ops::Input(1)));
  return ops::Tile(s, grad, scaling);
}

Status SumGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  *out = {SumGradOf(s, op, g[0]), NoGradient()};
  return s.status();
}

Status MeanGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output sum_grad = SumGradOf(s, op, g[0]);
  const PartialShape in_shape = StaticShape(s, In(op, 0));
  const PartialShape out_shape = StaticShape(s, Out(op, 0));
  const DataType dtype = RemoveRefType(sum_grad.type());
  Output factor;
  if (in_shape.IsFullyDefined() && out_shape.IsFullyDefined()) {
    const int64_t f = in_shape.num_elements() / std::max<int64_t>(out_shape.num_elements(), 1);
    factor = ops::ScalarConst(s.WithOpName("Const"), dtype, static_cast<double>(f));
  } else {
    Output input_shape = ShapeOf(s, In(op, 0));
    Output input_rank = SizeOf(s, input_shape);
    Output axes = CastTo(s, In(op, 1), input_rank.type());
    axes = ops::FloorMod(s.WithOpName("mod"), AddOp(s, axes, input_rank), input_rank);
    Output gathered = ops::GatherV2(s, input_shape, axes, ops::Input(0));
    // reduce_prod with axis=None.
    Output all_axes = ReductionDims(s, gathered);
    factor = ops::Prod(s, gathered, all_axes);
  }
  *out = {TrueDivOp(s, sum_grad, CastTo(s, factor, dtype)), NoGradient()};
  return s.status();
}

// _MinOrMaxGrad: the gradient shared among the elements equal to the extreme.
Status MinOrMaxGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output input_shape = ShapeOf(s, In(op, 0));
  Output y = Out(op, 0), grad = g[0];
  bool keep_dims = false;
  if (const AttrValue* v = FindAttr(op.attrs(), "keep_dims")) keep_dims = v->b();
  Output kept;
  if (!keep_dims) {
    kept = ReducedShape(s, input_shape, In(op, 1));
    y = ops::Reshape(s, y, kept);
    grad = ops::Reshape(s, grad, kept);
  } else {
    kept = ShapeOf(s, y);
  }
  Output indicators = ops::Cast(s, ops::Equal(s, y, In(op, 0)), RemoveRefType(grad.type()));
  Output num_selected = ops::Reshape(s, ReduceSum(s, indicators, In(op, 1), false), kept);
  *out = {MulOp(s, TrueDivOp(s, indicators, num_selected), grad), NoGradient()};
  return s.status();
}

// Prod: grad * prod / x, valid where no reduced element is zero (Python's cumprod form, which
// also covers zeros, needs Cumprod, which the op set does not have).
Status ProdGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output input_shape = ShapeOf(s, x);
  bool keep_dims = false;
  if (const AttrValue* v = FindAttr(op.attrs(), "keep_dims")) keep_dims = v->b();
  Output y = Out(op, 0), grad = g[0];
  if (!keep_dims) {
    Output kept = ReducedShape(s, input_shape, In(op, 1));
    y = ops::Reshape(s, y, kept);
    grad = ops::Reshape(s, grad, kept);
  }
  *out = {MulOp(s, grad, TrueDivOp(s, y, x)), NoGradient()};
  return s.status();
}

Status AddNGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  out->assign(op.num_inputs(), g[0]);
  return s.status();
}

}  // namespace

void RegisterMathGradients(OpRegistry& r) {
  Set(r, "Add", AddGrad);
  Set(r, "AddV2", AddGrad);
  Set(r, "Sub", SubGrad);
  Set(r, "Mul", MulGrad);
  Set(r, "RealDiv", DivGrad("RealDiv", "RealDiv"));
  Set(r, "DivNoNan", DivGrad("DivNoNan", "div_no_nan"));
  Set(r, "FloorMod", FloorModGrad);
  Set(r, "Maximum", MaximumMinimumGrad("GreaterEqual"));
  Set(r, "Minimum", MaximumMinimumGrad("LessEqual"));
  Set(r, "SquaredDifference", SquaredDifferenceGrad);
  Set(r, "Pow", PowGrad);
  Set(r, "Neg", NegGrad);
  Set(r, "Square", SquareGrad);
  Set(r, "Sqrt", SqrtGrad);
  Set(r, "Rsqrt", RsqrtGrad);
  Set(r, "Exp", ExpGrad);
  Set(r, "Log", LogGrad);
  Set(r, "Tanh", TanhGrad);
  Set(r, "Sigmoid", SigmoidGrad);
  Set(r, "Sin", SinGrad);
  Set(r, "Cos", CosGrad);
  Set(r, "Abs", AbsGrad);
  Set(r, "Reciprocal", ReciprocalGrad);
  Set(r, "Sign", ZeroGrad);
  Set(r, "Floor", ZeroGrad);
  Set(r, "Cast", CastGrad);
  Set(r, "Select", SelectGrad);
  Set(r, "SelectV2", SelectV2Grad);
  Set(r, "MatMul", MatMulGrad);
  Set(r, "BatchMatMulV2", BatchMatMulV2Grad);
  Set(r, "Sum", SumGrad);
  Set(r, "Mean", MeanGrad);
  Set(r, "Max", MinOrMaxGrad);
  Set(r, "Min", MinOrMaxGrad);
  Set(r, "Prod", ProdGrad);
  Set(r, "AddN", AddNGrad);
}

}  // namespace xlens::graph::grad
