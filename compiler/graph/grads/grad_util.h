// What the per-op gradient functions share: static shapes and constant values as Python's
// gradient code sees them (tensor.shape, tensor_util.constant_value), and the small builders
// that name their nodes as Python's array_ops/math_ops wrappers do.
#pragma once

#include <optional>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/scope.h"

namespace xlens::graph::grad {

// The static shape of `t`: what shape inference knows, refined by the shapes the gradient
// algorithm set on gradient tensors (Python's in_grad.set_shape(t_in.get_shape())).
PartialShape StaticShape(const Scope& scope, const Output& t);
// Records that gradient tensor `t` has the shape of the tensor it is the gradient of.
void RefineShape(const Output& t, const PartialShape& shape);
// The value of `t` when its node is a Const.
std::optional<Tensor> ConstantValue(const Output& t);
// Whether `t` is a zeros tensor the gradient algorithm made for a missing output gradient.
bool IsZerosTensor(const Output& t);

// array_ops.shape(x): a Const named "Shape" when the static shape is fully known, else Shape.
Output ShapeOf(const Scope& scope, const Output& x);
// array_ops.size(x) (a Const "Size" when known).
Output SizeOf(const Scope& scope, const Output& x);
// math_ops.reduce_sum(x, axes, keepdims) with Python's constant axes ("Sum/reduction_indices").
Output ReduceSum(const Scope& scope, const Output& x, const ops::Input& axes, bool keep_dims);
// math_ops._ReductionDims(x, axis=None): every axis of `x`, as a Const "Const" when the rank is
// known and not 0, else range(0, rank(x)) ("Rank" folded to a Const when known, "range").
Output ReductionDims(const Scope& scope, const Output& x);
// math_ops.cast: no node when the type already matches.
Output CastTo(const Scope& scope, const Output& x, DataType dtype);
// Python's operators (x * y is "mul", x + y "add", x - y "sub", -x "Neg", x / y "truediv").
Output MulOp(const Scope& scope, const ops::Input& x, const ops::Input& y);
Output AddOp(const Scope& scope, const ops::Input& x, const ops::Input& y);
Output SubOp(const Scope& scope, const ops::Input& x, const ops::Input& y);
Output TrueDivOp(const Scope& scope, const ops::Input& x, const ops::Input& y);
// An int32 vector constant input.
ops::Input Int32s(const std::vector<int64_t>& values);
// math_ops.reduced_shape(input_shape, axes): input_shape with the reduced axes set to 1.
Output ReducedShape(const Scope& scope, const Output& input_shape, const Output& axes);
// Python's array_ops.zeros_like / zeros for a gradient tensor.
Output ZerosLikeOf(const Scope& scope, const Output& x);

// Input i / output i of a node, as an Output.
Output In(const Node& op, int i);
Output Out(const Node& op, int i);
// SetGradient for an op the registry has; others are skipped.
void Set(OpRegistry& registry, const std::string& op, GradFn fn);

// A gradient's result for op inputs that have none (Python's None).
inline Output NoGradient() { return Output(); }

void RegisterMathGradients(OpRegistry& registry);
void RegisterArrayGradients(OpRegistry& registry);
void RegisterNnGradients(OpRegistry& registry);
// Einsum, Erf/Erfc/Erfinv/Ndtri/Lgamma, the resizes (model_grad.cc).
void RegisterModelGradients(OpRegistry& registry);
void RegisterListGradients(OpRegistry& registry);  // TensorList and TensorArray
void RegisterWhileGradients(OpRegistry& registry);  // While, StatelessWhile (while_grad.cc)

}  // namespace xlens::graph::grad
