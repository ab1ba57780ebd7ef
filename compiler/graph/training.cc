#include "compiler/graph/training.h"

#include <cmath>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph {

namespace {

AttrValue Colocate(const std::string& name) {
  AttrListValue list;
  list.s.push_back("loc:@" + name);
  return AttrValue::List(std::move(list));
}

// tf.keras/compat initializers' _compute_fans.
std::pair<double, double> ComputeFans(const std::vector<int64_t>& shape) {
  if (shape.empty()) return {1, 1};
  if (shape.size() == 1) return {double(shape[0]), double(shape[0])};
  if (shape.size() == 2) return {double(shape[0]), double(shape[1])};
  double receptive = 1;
  for (size_t i = 0; i + 2 < shape.size(); ++i) receptive *= double(shape[i]);
  return {double(shape[shape.size() - 2]) * receptive, double(shape.back()) * receptive};
}

void Colocated(Node* node, const std::string& var) {
  if (node != nullptr) node->mutable_attrs()["_class"] = Colocate(var);
}

}  // namespace

Output GraphVariable::Value(const Scope& scope) const {
  if (!is_resource) return read;
  return ops::ReadVariableOp(scope, handle, dtype);
}

StatusOr<GraphVariable> CreateVariable(const Scope& scope, const std::string& name, DataType dtype,
                                  const std::vector<int64_t>& shape,
                                  const VariableOptions& options) {
  RETURN_IF_ERROR(scope.status());
  GraphVariable var;
  var.dtype = dtype;
  var.shape = PartialShape(shape);
  var.is_resource = options.use_resource;
  // The variable's node is named exactly its scope ("weights"); everything else lies inside.
  Scope inner = scope;
  Scope named = scope.WithOpName(name).NewOpScope(name, &inner);
  var.name = inner.name_prefix();
  const Scope init = inner.NewSubScope("Initializer");
  if (options.initial_value) {
    var.initial_value = ops::Const(init.WithOpName("Const"), *options.initial_value);
  } else {
    // random_uniform(shape, -limit, limit): shape, min, max, RandomUniform, sub, mul, and the
    // AddV2 named after the scope.
    auto [fan_in, fan_out] = ComputeFans(shape);
    const double limit = std::sqrt(6.0 / (fan_in + fan_out));
    Scope ru_inner = init;
    Scope ru = init.NewOpScope("random_uniform", &ru_inner);
    Output shape_t = ops::ShapeConst(ru_inner.WithOpName("shape"), shape);
    Output min = ops::ScalarConst(ru_inner.WithOpName("min"), dtype, -limit);
    Output max = ops::ScalarConst(ru_inner.WithOpName("max"), dtype, limit);
    Output rnd = ops::RandomUniform(ru_inner, shape_t, dtype, options.seed, options.seed2);
    Output range = grad::SubOp(ru_inner, max, min);
    Output scaled = grad::MulOp(ru_inner, rnd, range);
    var.initial_value = ops::AsOutput(ru.AddNode("AddV2", {scaled, min}, {}));
    for (const Output& o : {shape_t, min, max, rnd, range, scaled, var.initial_value}) {
      Colocated(o.node, var.name);
    }
  }
  if (Node* n = var.initial_value.node; n != nullptr && options.initial_value) {
    Colocated(n, var.name);
  }
  AttrMap attrs;
  attrs["dtype"] = AttrValue::Type(dtype);
  attrs["shape"] = AttrValue::Shape(var.shape);
  attrs["container"] = AttrValue::String("");
  attrs["shared_name"] = AttrValue::String(options.use_resource ? var.name : "");
  attrs["_class"] = Colocate(var.name);
  if (options.use_resource) {
    var.handle = ops::AsOutput(named.AddNode("VarHandleOp", {}, std::move(attrs)));
    if (scope.graph()->registry().Find("VarIsInitializedOp") != nullptr) {
      ops::BuildOp(inner.NewSubScope("IsInitialized"), "VarIsInitializedOp", {var.handle});
    }
    var.initializer = ops::AssignVariableOp(inner.WithOpName("Assign"), var.handle,
                                            var.initial_value);
    var.read = ops::ReadVariableOp(inner.NewSubScope("Read"), var.handle, dtype);
  } else {
    var.handle = ops::AsOutput(named.AddNode("VariableV2", {}, std::move(attrs)));
    Output assign = ops::Assign(inner.WithOpName("Assign"), var.handle, var.initial_value);
    Colocated(assign.node, var.name);
    var.initializer = assign.node;
    var.read = ops::Identity(inner.WithOpName("read"), var.handle);
    Colocated(var.read.node, var.name);
  }
  RETURN_IF_ERROR(scope.status());
  return var;
}

namespace {

// weights_broadcast_ops.assert_broadcastable for scalar weights: the static shapes and ranks
// of both, then the NoOp "static_scalar_check_success" everything after waits for.
Node* AssertBroadcastableScalar(const Scope& scope, const Output& weights, const Output& values) {
  const Scope s = scope.NewSubScope("assert_broadcastable");
  const Scope w = s.NewSubScope("weights");
  (void)ops::ShapeConst(w.WithOpName("shape"), {});
  (void)ops::Const(w.WithOpName("rank"), int32_t{0});
  const Scope v = s.NewSubScope("values");
  const PartialShape vs = grad::StaticShape(v, values);
  if (vs.IsFullyDefined()) {
    (void)ops::ShapeConst(v.WithOpName("shape"), vs.dims());
  } else {
    (void)ops::Shape(v.WithOpName("shape"), values);
  }
  (void)ops::Const(v.WithOpName("rank"), static_cast<int32_t>(vs.rank()));
  (void)weights;
  return ops::NoOp(s.WithOpName("static_scalar_check_success"));
}

// array_ops.ones_like(x): Fill of the shape (a Const "Shape/shape_as_tensor" when fully known)
// with a Const 1, named "ones_like".
Output OnesLikeOf(const Scope& scope, const Output& x) {
  Scope inner = scope;
  Scope fill = scope.NewOpScope("ones_like", &inner);
  const PartialShape shape = grad::StaticShape(inner, x);
  Output dims = shape.IsFullyDefined()
                    ? ops::ShapeConst(inner.NewSubScope("Shape").WithOpName("shape_as_tensor"),
                                      shape.dims())
                    : ops::Shape(inner, x);
  Output one = ops::ScalarConst(inner.WithOpName("Const"), RemoveRefType(x.type()), 1.0);
  return ops::Fill(fill, dims, one);
}

}  // namespace

StatusOr<Output> SparseSoftmaxCrossEntropyLoss(const Scope& scope, const Output& labels,
                                               const Output& logits) {
  RETURN_IF_ERROR(scope.status());
  const PartialShape label_shape = grad::StaticShape(scope, labels);
  const PartialShape logit_shape = grad::StaticShape(scope, logits);
  if (label_shape.unknown_rank() || logit_shape.unknown_rank() ||
      logit_shape.rank() != label_shape.rank() + 1) {
    return Error("sparse_softmax_cross_entropy: labels " + labels.name() + " and logits " +
                 logits.name() + " need known ranks, the logits' one more than the labels'");
  }
  const Scope s = scope.NewSubScope("sparse_softmax_cross_entropy_loss");
  const DataType dtype = RemoveRefType(logits.type());
  Output weights = ops::ScalarConst(s.WithOpName("Const"), dtype, 1.0);
  // nn.sparse_softmax_cross_entropy_with_logits(name="xentropy").
  const Scope xs = s.NewSubScope("xentropy");
  (void)ops::Shape(xs, labels);
  Output losses = ops::AsOutput(xs.WithOpName("xentropy").AddNode(
      "SparseSoftmaxCrossEntropyWithLogits", {logits, labels}, {}));
  RETURN_IF_ERROR(s.status());

  // compute_weighted_loss, under the static check.
  Node* check = AssertBroadcastableScalar(s, weights, losses);
  const Scope c = s.WithControlDependencies(std::vector<Node*>{check});
  Output weighted = ops::Mul(c, losses, weights);
  Output sum = ops::Sum(c, weighted, grad::ReductionDims(c, weighted));

  // _num_present: how many weights are not 0, broadcast to the losses.
  Scope np_inner = c;
  Scope np = c.NewOpScope("num_present", &np_inner);
  Output is_zero = ops::Equal(np_inner, weights, ops::Input::Like(0.0));
  Output zeros = ops::ScalarConst(np_inner.WithOpName("zeros_like"), dtype, 0.0);
  Output ones = OnesLikeOf(np_inner, weights);
  Output present = ops::Select(np_inner, is_zero, zeros, ones);
  // broadcast_weights(present, losses): the shapes are not both fully known, so it checks
  // and multiplies by ones_like(losses).
  Scope bw_inner = np_inner;
  Scope bw = np_inner.NewOpScope("broadcast_weights", &bw_inner);
  Node* bw_check = AssertBroadcastableScalar(bw_inner, present, losses);
  Output loss_ones =
      OnesLikeOf(bw_inner.WithControlDependencies(std::vector<Node*>{bw_check}), losses);
  // Its inputs were made under both checks, so the product waits for neither directly.
  Output broadcast = ops::Mul(bw, present, loss_ones);
  Output num_present = ops::Sum(np, broadcast, grad::ReductionDims(np_inner, broadcast));

  // _safe_mean.
  Output total = ops::Sum(c, sum, grad::ReductionDims(c, sum));
  Output value = ops::DivNoNan(c.WithOpName("value"), total, num_present);
  RETURN_IF_ERROR(scope.status());
  return value;
}

StatusOr<std::vector<Output>> GradientDescentOptimizer::ComputeGradients(
    const Scope& scope, const Output& loss, const std::vector<GraphVariable>& var_list) const {
  std::vector<Output> xs;
  for (const GraphVariable& v : var_list) xs.push_back(v.handle);
  GradientsOptions options;
  options.gate_gradients = true;  // Optimizer.GATE_OP
  std::vector<Output> grads;
  RETURN_IF_ERROR(AddSymbolicGradients(scope, {loss}, xs, {}, options, &grads));
  bool any = false;
  for (const Output& g : grads) any |= g.valid();
  if (!any) {
    std::string names;
    for (const GraphVariable& v : var_list) names += (names.empty() ? "" : ", ") + v.name;
    return Error("No gradients provided for any variable, check your graph for ops that do "
                 "not support gradients, between variables [" + names + "] and loss '" +
                 loss.name() + "'");
  }
  return grads;
}

StatusOr<Node*> GradientDescentOptimizer::ApplyGradients(
    const Scope& scope, const std::vector<Output>& grads,
    const std::vector<GraphVariable>& var_list) const {
  if (grads.size() != var_list.size()) {
    return Error("apply_gradients: " + std::to_string(grads.size()) + " gradients for " +
                 std::to_string(var_list.size()) + " variables");
  }
  Scope inner = scope;
  Scope named = scope.NewOpScope(name_, &inner);
  std::vector<Node*> updates;
  Output lr;
  for (size_t i = 0; i < var_list.size(); ++i) {
    if (!grads[i].valid()) continue;  // variables without a gradient are not updated
    const GraphVariable& v = var_list[i];
    if (!lr.valid()) {
      lr = ops::ScalarConst(inner.WithOpName("learning_rate"), v.dtype, learning_rate_);
    }
    Scope update = inner.NewSubScope("update_" + v.name);
    Node* n = v.is_resource
                  ? ops::ResourceApplyGradientDescent(update, v.handle, lr, grads[i])
                  : ops::ApplyGradientDescent(update, v.handle, lr, grads[i]).node;
    Colocated(n, v.name);
    updates.push_back(n);
  }
  Node* train = ops::NoOp(named.WithControlDependencies(updates));
  RETURN_IF_ERROR(scope.status());
  return train;
}

StatusOr<Node*> GradientDescentOptimizer::Minimize(const Scope& scope, const Output& loss,
                                                   const std::vector<GraphVariable>& var_list) const {
  ASSIGN_OR_RETURN(std::vector<Output> grads, ComputeGradients(scope, loss, var_list));
  return ApplyGradients(scope, grads, var_list);
}

}  // namespace xlens::graph
