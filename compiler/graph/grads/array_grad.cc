// Gradients of the array ops, after tensorflow/python/ops/array_grad.py.
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

Status IdentityGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  out->assign(op.num_inputs(), NoGradient());
  (*out)[0] = g[0];
  return s.status();
}

// _ReshapeToInput: the gradient reshaped to the input's shape (Reshape, ExpandDims, Squeeze).
Status ReshapeToInputGrad(const Scope& s, const Node& op, const GradOutputs& g,
                          GradOutputs* out) {
  Output shape = ShapeOf(s, In(op, 0));
  out->assign(op.num_inputs(), NoGradient());
  (*out)[0] = ops::Reshape(s, g[0], shape);
  return s.status();
}

Status TransposeGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output inverse = ops::InvertPermutation(s, In(op, 1));
  *out = {ops::Transpose(s, g[0], inverse), NoGradient()};
  return s.status();
}

Status PackGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  int64_t axis = 0;
  if (const AttrValue* v = FindAttr(op.attrs(), "axis")) axis = v->i();
  *out = ops::Unpack(s, g[0], op.num_inputs(), axis);
  return s.status();
}

Status UnpackGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  int64_t axis = 0;
  if (const AttrValue* v = FindAttr(op.attrs(), "axis")) axis = v->i();
  std::vector<ops::Input> values(g.begin(), g.end());
  *out = {ops::Pack(s, values, axis)};
  return s.status();
}

// ConcatV2: each input's slice of the gradient, at the offset the inputs before it take up
// along the axis.
Status ConcatV2Grad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const int n = op.num_inputs() - 1;
  Output axis = In(op, n);
  Output grad = g[0];
  Output rank = ops::Rank(s, grad);
  Output norm_axis = ops::FloorMod(s, ops::Add(s, axis, rank), rank);
  // One-hot of the axis over the dimensions, to place an offset in a begin vector.
  Output onehot = ops::Cast(
      s, ops::Equal(s, ops::Range(s, ops::Input(0), rank, ops::Input(1)), norm_axis), DT_INT32);
  Output offset = ops::Const(s, 0);
  out->clear();
  for (int i = 0; i < n; ++i) {
    Output shape = ops::Shape(s, In(op, i));
    Output begin = ops::Mul(s, onehot, offset);
    out->push_back(ops::Slice(s, grad, begin, shape));
    offset = ops::Add(s, offset, ops::GatherV2(s, shape, norm_axis, ops::Input(0)));
  }
  out->push_back(NoGradient());
  return s.status();
}

// Split(split_dim, value) and SplitV(value, size_splits, split_dim): the pieces' gradients
// concatenated back along the axis (missing ones arrive as zeros).
Status SplitGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  std::vector<ops::Input> pieces(g.begin(), g.end());
  *out = {NoGradient(), ops::ConcatV2(s, pieces, In(op, 0))};
  return s.status();
}

Status SplitVGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  std::vector<ops::Input> pieces(g.begin(), g.end());
  *out = {ops::ConcatV2(s, pieces, In(op, 2)), NoGradient(), NoGradient()};
  return s.status();
}

// Pad and PadV2: the gradient cut back to the input at the padding's leading edge.
Status PadGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output paddings = In(op, 1);
  const DataType index_type = paddings.type();
  Output pad_before = ops::Slice(
      s, paddings, ops::ShapeConst(s, {0, 0}, index_type),
      ops::Pack(s, {ops::Cast(s, ops::Rank(s, x), index_type), ops::Cast(s, ops::Const(s, 1), index_type)}));
  Output begin = ops::Reshape(s, pad_before, ops::ShapeConst(s, {-1}, index_type));
  *out = {ops::Slice(s, g[0], begin, ops::Shape(s, x, index_type)), NoGradient()};
  if (op.num_inputs() == 3) out->push_back(NoGradient());  // PadV2's constant_values
  return s.status();
}

// Slice: the gradient padded out to the input, `begin` before and the rest after.
Status SliceGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output x = In(op, 0);
  Output begin = In(op, 1);
  const DataType index_type = begin.type();
  Output column = ops::Pack(s, {ops::Cast(s, ops::Rank(s, x), index_type),
                                ops::Cast(s, ops::Const(s, 1), index_type)});
  Output after = ops::Sub(s, ops::Sub(s, ops::Shape(s, x, index_type),
                                      ops::Shape(s, Out(op, 0), index_type)), begin);
  Output paddings = ops::ConcatV2(
      s, {ops::Reshape(s, begin, column), ops::Reshape(s, after, column)}, ops::Input(1));
  *out = {ops::Pad(s, g[0], paddings), NoGradient(), NoGradient()};
  return s.status();
}

Status FillGrad(const Scope& s, const Node&, const GradOutputs& g, GradOutputs* out) {
  // math_ops.reduce_sum(grad): every axis.
  *out = {NoGradient(), ops::Sum(s, g[0], ReductionDims(s, g[0]))};
  return s.status();
}

// Tile: the gradient reshaped to [m0, d0, m1, d1, ...] and summed over the multiples' axes.
Status TileGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  Output multiples = In(op, 1);
  Output input_shape = ops::Shape(s, In(op, 0), RemoveRefType(multiples.type()));
  Output split_shape = ops::Reshape(
      s, ops::Transpose(s, ops::Pack(s, {multiples, input_shape}), ops::Input({1, 0})),
      ops::Input({-1}));
  Output axes = ops::Range(s, ops::Input(0), ops::Size(s, split_shape), ops::Input(2));
  Output input_grad = ops::Sum(s, ops::Reshape(s, g[0], split_shape), axes);
  *out = {input_grad, NoGradient()};
  return s.status();
}

Status StridedSliceGradFn(const Scope& s, const Node& op, const GradOutputs& g,
                          GradOutputs* out) {
  ops::StridedSliceAttrs a;
  auto get = [&](const char* name, int64_t* v) {
    if (const AttrValue* x = FindAttr(op.attrs(), name)) *v = x->i();
  };
  get("begin_mask", &a.begin_mask);
  get("end_mask", &a.end_mask);
  get("ellipsis_mask", &a.ellipsis_mask);
  get("new_axis_mask", &a.new_axis_mask);
  get("shrink_axis_mask", &a.shrink_axis_mask);
  Output begin = In(op, 1);
  Output shape = ops::Shape(s, In(op, 0), RemoveRefType(begin.type()));
  *out = {ops::StridedSliceGrad(s, shape, begin, In(op, 2), In(op, 3), g[0], a), NoGradient(),
          NoGradient(), NoGradient()};
  return s.status();
}

// _GatherV2Grad along axis 0 (batch_dims 0): Python returns IndexedSlices(values = grad
// reshaped to [size(indices)] + params_shape[1:], indices flattened, params_shape), which it
// makes dense with unsorted_segment_sum(values, indices, params_shape[0]) where a dense tensor
// is needed; without IndexedSlices here, the gradient is made dense at once, the same way.
Status GatherV2Grad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto axis = ConstantValue(In(op, 2));
  int64_t batch_dims = 0;
  if (const AttrValue* v = FindAttr(op.attrs(), "batch_dims")) batch_dims = v->i();
  if (!axis || axis->num_elements() != 1 || axis->GetAsInt64(0) != 0 || batch_dims != 0) {
    return Error("node '" + op.name() +
                 "' (GatherV2): the gradient is only built for a constant axis 0 and "
                 "batch_dims 0");
  }
  Output params = In(op, 0), indices = In(op, 1), grad = g[0];
  Output params_shape = ShapeOf(s, params);
  Output indices_size = ops::ExpandDims(s, SizeOf(s, indices), ops::Input(0));
  ops::StridedSliceAttrs tail_attrs;
  tail_attrs.end_mask = 1;
  Output tail = ops::StridedSlice(s, params_shape, ops::Input({1}), ops::Input({0}),
                                  ops::Input({1}), tail_attrs);
  Output values_shape = ops::ConcatV2(s, {indices_size, tail}, ops::Input(0));
  Output values = ops::Reshape(s, grad, values_shape);
  Output flat_indices = ops::Reshape(s, indices, indices_size);
  ops::StridedSliceAttrs first;
  first.shrink_axis_mask = 1;
  Output rows = ops::StridedSlice(s, params_shape, ops::Input({0}), ops::Input({1}),
                                  ops::Input({1}), first);
  Output dense = ops::AsOutput(
      ops::BuildOp(s, "UnsortedSegmentSum", {values, flat_indices, rows}));
  *out = {dense, NoGradient(), NoGradient()};
  return s.status();
}

}  // namespace

void RegisterArrayGradients(OpRegistry& r) {
  Set(r, "Identity", IdentityGrad);
  Set(r, "ReadVariableOp", IdentityGrad);
  Set(r, "Snapshot", IdentityGrad);
  Set(r, "Reshape", ReshapeToInputGrad);
  Set(r, "ExpandDims", ReshapeToInputGrad);
  Set(r, "Squeeze", ReshapeToInputGrad);
  Set(r, "Transpose", TransposeGrad);
  Set(r, "Pack", PackGrad);
  Set(r, "Unpack", UnpackGrad);
  Set(r, "ConcatV2", ConcatV2Grad);
  Set(r, "Split", SplitGrad);
  Set(r, "SplitV", SplitVGrad);
  Set(r, "Pad", PadGrad);
  Set(r, "PadV2", PadGrad);
  Set(r, "Slice", SliceGrad);
  Set(r, "Fill", FillGrad);
  Set(r, "Tile", TileGrad);
  Set(r, "StridedSlice", StridedSliceGradFn);
  Set(r, "GatherV2", GatherV2Grad);
}

}  // namespace xlens::graph::grad
