#include "compiler/graph/grads/grad_util.h"

#include <map>

#include "compiler/graph/gradients.h"

namespace xlens::graph::grad {

namespace {
// Shapes the running gradient computation set on gradient tensors; see RefineShape.
thread_local std::map<std::pair<const Node*, int>, PartialShape>* refined_shapes = nullptr;
}  // namespace

// Installed by AddSymbolicGradients for the length of one call; returns the table it replaces,
// which a While's gradient (a gradient computed inside a gradient) puts back when it is done.
std::map<std::pair<const Node*, int>, PartialShape>* SetRefinedShapeTable(
    std::map<std::pair<const Node*, int>, PartialShape>* table) {
  auto* previous = refined_shapes;
  refined_shapes = table;
  return previous;
}

PartialShape StaticShape(const Scope& scope, const Output& t) {
  if (!t.valid()) return PartialShape();
  if (t.node->output_shapes().size() <= static_cast<size_t>(t.index)) {
    // Nodes added since shape inference last ran: run it again (errors leave shapes unknown).
    (void)scope.graph()->InferShapes();
  }
  PartialShape shape;
  if (t.node->output_shapes().size() > static_cast<size_t>(t.index)) {
    shape = t.node->output_shapes()[t.index];
  }
  if (shape.unknown_rank() && t.node->type_string() == "ReadVariableOp") {
    // The value of a resource variable has the variable's declared shape.
    auto [handle, unused] = t.node->input_node(0);
    if (handle != nullptr && handle->type_string() == "VarHandleOp") {
      if (const AttrValue* v = FindAttr(handle->attrs(), "shape")) shape = v->shape();
    }
  }
  if (refined_shapes != nullptr) {
    auto it = refined_shapes->find({t.node, t.index});
    if (it != refined_shapes->end() && it->second.IsCompatibleWith(shape)) {
      shape = it->second.Merge(shape);
    }
  }
  return shape;
}

void RefineShape(const Output& t, const PartialShape& shape) {
  if (refined_shapes == nullptr || !t.valid()) return;
  auto [it, inserted] = refined_shapes->emplace(std::make_pair(t.node, t.index), shape);
  if (!inserted && it->second.IsCompatibleWith(shape)) it->second = it->second.Merge(shape);
}

std::optional<Tensor> ConstantValue(const Output& t) {
  // tensor_util.constant_value: a Const's value, and what Python folds from constants and
  // static shapes (Shape, Size, Rank, Range, Cast, Identity).
  if (!t.valid()) return std::nullopt;
  const Node& n = *t.node;
  const std::string& op = n.type_string();
  if (op == "Const") {
    const AttrValue* v = FindAttr(n.attrs(), "value");
    if (v == nullptr || v->kind() != AttrValue::Kind::kTensor) return std::nullopt;
    return v->tensor();
  }
  if (op == "Identity" || op == "StopGradient") return ConstantValue(In(n, 0));
  const DataType out = RemoveRefType(n.output_type(0));
  if (op == "Shape" || op == "Size" || op == "Rank") {
    const Output in = In(n, 0);
    PartialShape shape;
    if (in.valid() && static_cast<size_t>(in.index) < in.node->output_shapes().size()) {
      shape = in.node->output_shapes()[in.index];
    }
    if (op == "Rank") {
      if (shape.unknown_rank()) return std::nullopt;
      Tensor r(out, {});
      r.SetFromInt64(0, shape.rank());
      return r;
    }
    if (!shape.IsFullyDefined()) return std::nullopt;
    if (op == "Size") {
      Tensor r(out, {});
      r.SetFromInt64(0, shape.num_elements());
      return r;
    }
    Tensor r(out, {shape.rank()});
    for (int64_t i = 0; i < shape.rank(); ++i) r.SetFromInt64(i, shape.dim(i));
    return r;
  }
  if (op == "Range") {
    auto start = ConstantValue(In(n, 0)), limit = ConstantValue(In(n, 1)),
         delta = ConstantValue(In(n, 2));
    if (!start || !limit || !delta || !DataTypeIsInteger(out)) return std::nullopt;
    const int64_t a = start->GetAsInt64(0), b = limit->GetAsInt64(0), d = delta->GetAsInt64(0);
    if (d == 0) return std::nullopt;
    std::vector<int64_t> values;
    for (int64_t v = a; d > 0 ? v < b : v > b; v += d) values.push_back(v);
    Tensor r(out, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) r.SetFromInt64(static_cast<int64_t>(i), values[i]);
    return r;
  }
  if (op == "Cast" && DataTypeIsInteger(out)) {
    auto in = ConstantValue(In(n, 0));
    if (!in || !DataTypeIsInteger(in->dtype())) return std::nullopt;
    Tensor r(out, in->dims());
    for (int64_t i = 0; i < in->num_elements(); ++i) r.SetFromInt64(i, in->GetAsInt64(i));
    return r;
  }
  return std::nullopt;
}

bool IsZerosTensor(const Output& t) {
  if (!t.valid()) return false;
  const std::string& op = t.node->type_string();
  if (op == "ZerosLike") return true;
  if (op == "Const" && t.node->name().ends_with("zeros")) {
    auto value = ConstantValue(t);
    if (!value) return false;
    for (int64_t i = 0; i < value->num_elements(); ++i) {
      if (value->GetAsDouble(i) != 0) return false;
    }
    return true;
  }
  return false;
}

Output ShapeOf(const Scope& scope, const Output& x) {
  PartialShape shape = StaticShape(scope, x);
  if (shape.IsFullyDefined()) return ops::ShapeConst(scope.WithOpName("Shape"), shape.dims());
  return ops::Shape(scope, x);
}

Output SizeOf(const Scope& scope, const Output& x) {
  PartialShape shape = StaticShape(scope, x);
  if (shape.IsFullyDefined()) {
    return ops::Const(scope.WithOpName("Size"), static_cast<int32_t>(shape.num_elements()));
  }
  return ops::Size(scope, x);
}

Output ReduceSum(const Scope& scope, const Output& x, const ops::Input& axes, bool keep_dims) {
  return ops::Sum(scope, x, axes, keep_dims);
}

Output ReductionDims(const Scope& scope, const Output& x) {
  const PartialShape shape = StaticShape(scope, x);
  if (!shape.unknown_rank() && shape.rank() > 0) {
    std::vector<int32_t> all(shape.rank());
    for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int32_t>(i);
    return ops::Const(scope.WithOpName("Const"), all);
  }
  // Python's fast path tests `if x_rank:`, so a scalar takes the Range path too.
  Output rank = shape.unknown_rank() ? ops::Rank(scope, x)
                                     : ops::Const(scope.WithOpName("Rank"), int32_t{0});
  return ops::AsOutput(
      ops::BuildOp(scope, "Range", {ops::Input(0), rank, ops::Input(1)}, {}, "range"));
}

Output CastTo(const Scope& scope, const Output& x, DataType dtype) {
  if (x.valid() && RemoveRefType(x.type()) == dtype) return x;
  return ops::Cast(scope, x, dtype);
}

namespace {
Output Named(Node* n) { return n == nullptr ? Output() : Output(n, 0); }
}  // namespace

Output MulOp(const Scope& s, const ops::Input& x, const ops::Input& y) {
  return Named(ops::BuildOp(s, "Mul", {x, y}, {}, "mul"));
}
Output AddOp(const Scope& s, const ops::Input& x, const ops::Input& y) {
  return Named(ops::BuildOp(s, "AddV2", {x, y}, {}, "add"));
}
Output SubOp(const Scope& s, const ops::Input& x, const ops::Input& y) {
  return Named(ops::BuildOp(s, "Sub", {x, y}, {}, "sub"));
}
Output TrueDivOp(const Scope& s, const ops::Input& x, const ops::Input& y) {
  return Named(ops::BuildOp(s, "RealDiv", {x, y}, {}, "truediv"));
}

ops::Input Int32s(const std::vector<int64_t>& values) {
  Tensor t(DT_INT32, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.SetFromInt64(static_cast<int64_t>(i), values[i]);
  return ops::Input(t);
}

Output ReducedShape(const Scope& scope, const Output& input_shape, const Output& axes) {
  // math_ops.reduced_shape: DynamicStitch([range(rank), axes], [input_shape, ones]). Without
  // DynamicStitch in the op set, the same vector is built as
  //   input_shape * (1 - sum_k onehot(axes_k mod rank)) + sum_k onehot(...)
  // i.e. input_shape where no axis is reduced, 1 where one is.
  Scope s = scope.NewSubScope("reduced_shape");
  Output shape = CastTo(s, input_shape, DT_INT32);
  Output rank = ops::Size(s, shape);
  Output ax = ops::Reshape(s, CastTo(s, axes, DT_INT32), ops::Input({-1}));
  ax = ops::FloorMod(s, ops::Add(s, ax, rank), rank);
  Output positions = ops::Range(s, ops::Input(0), rank, ops::Input(1));
  // [num_axes, rank] matches, summed into a per-dimension "reduced" mask.
  Output eq = ops::Equal(s, ops::ExpandDims(s, ax, ops::Input(1)),
                         ops::ExpandDims(s, positions, ops::Input(0)));
  Output mask = ops::Minimum(s, ops::Sum(s, ops::Cast(s, eq, DT_INT32), ops::Input(0)),
                             ops::Input(1));
  Output one_minus = ops::Sub(s, ops::Input(1), mask);
  return ops::Add(s, ops::Mul(s, shape, one_minus), mask);
}

Output ZerosLikeOf(const Scope& scope, const Output& x) {
  // array_ops.zeros_like: a constant when the shape is known (and small), else ZerosLike.
  PartialShape shape = StaticShape(scope, x);
  if (shape.IsFullyDefined() && shape.num_elements() < 1000) {
    return ops::Const(scope.WithOpName("zeros_like"), Tensor(RemoveRefType(x.type()), shape.dims()));
  }
  return ops::AsOutput(ops::BuildOp(scope, "ZerosLike", {x}, {}, "zeros_like"));
}

Output In(const Node& op, int i) {
  auto [node, index] = op.input_node(i);
  return Output(node, index);
}
Output Out(const Node& op, int i) { return Output(const_cast<Node*>(&op), i); }

void Set(OpRegistry& registry, const std::string& op, GradFn fn) {
  // Ops another family has not registered (yet) simply have no gradient.
  if (registry.Find(op) != nullptr) SetGradient(registry, op, std::move(fn));
}

}  // namespace xlens::graph::grad
