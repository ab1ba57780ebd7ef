// TensorFlow's optimizer update ops (tensorflow/core/ops/training_ops.cc): plain gradient
// descent, momentum and Adam, each on reference variables (Apply*) and on resource variables
// (ResourceApply*).
//
// How a kernel finds the variable it updates. Reference tensors are not pointers here: the
// executor hands a Ref(T) input the variable's current tensor, which a kernel cannot write
// through. So an Apply* kernel walks from its `var` input (and `accum`, `m`, `v`) back to the
// VariableV2 node that produces it, through any Identity in between, and looks the variable up in
// the session's ResourceMgr under ("", that node's name), where VariableV2 keeps it (falling back
// to the node's container and shared_name attrs when those are set). A ResourceApply* kernel gets
// the variable from the handle its resource input carries. Either way the update happens in place
// under the variable's mutex, after MakeUnique, so a tensor read from the variable earlier keeps
// its value; Apply* outputs the updated value, as TensorFlow's `out` ref does.
#include <algorithm>
#include <cmath>
#include <memory>
#include <mutex>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/cwise.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using cwise::Data;
using cwise::Dispatch;
using cwise::MutableData;

// The VariableV2 behind a ref input, through Identity nodes.
StatusOr<std::shared_ptr<Var>> RefVariable(const OpKernelContext& ctx, int input) {
  if (ctx.resources() == nullptr) return ctx.Error("no session resources to find variables in");
  auto [node, slot] = ctx.node().input_node(input);
  while (node != nullptr && (node->type_string() == "Identity" ||
                             node->type_string() == "RefIdentity")) {
    std::tie(node, slot) = node->input_node(0);
  }
  if (node == nullptr)
    return ctx.Error("input " + std::to_string(input) + " is not connected to a variable");
  std::shared_ptr<Var> var = ctx.resources()->Lookup("", node->name());
  if (var == nullptr) {
    const AttrValue* container = FindAttr(node->attrs(), "container");
    const AttrValue* shared = FindAttr(node->attrs(), "shared_name");
    const std::string name = shared && !shared->s().empty() ? shared->s() : node->name();
    var = ctx.resources()->Lookup(container ? container->s() : "", name);
  }
  if (var == nullptr || !var->is_initialized())
    return ctx.Error("Attempting to use uninitialized value " + node->name());
  return var;
}

// The variable a resource input's handle names.
StatusOr<std::shared_ptr<Var>> ResourceVariable(const OpKernelContext& ctx, int input) {
  if (ctx.resources() == nullptr) return ctx.Error("no session resources to find variables in");
  const Tensor& t = ctx.input(input);
  if (t.dtype() != DT_RESOURCE || t.num_elements() != 1)
    return ctx.Error("input " + std::to_string(input) + " is not a resource handle");
  const ResourceHandle& h = t.handle();
  std::shared_ptr<Var> var = ctx.resources()->Lookup(h.container, h.name);
  if (var == nullptr || !var->is_initialized()) {
    return ctx.Error("Error while reading resource variable " + h.name + " from Container: " +
                     (h.container.empty() ? "localhost" : h.container) +
                     ". This could mean that the variable was uninitialized.");
  }
  return var;
}

// The variables an update op writes: `num_vars` leading inputs, by reference or by handle.
StatusOr<std::vector<std::shared_ptr<Var>>> UpdatedVariables(const OpKernelContext& ctx,
                                                                  bool resource, int num_vars) {
  std::vector<std::shared_ptr<Var>> vars;
  for (int i = 0; i < num_vars; ++i) {
    ASSIGN_OR_RETURN(std::shared_ptr<Var> v,
                     resource ? ResourceVariable(ctx, i) : RefVariable(ctx, i));
    vars.push_back(std::move(v));
  }
  return vars;
}

// Locks the variables' mutexes in address order (no deadlock between two updates).
std::vector<std::unique_lock<std::mutex>> LockAll(std::vector<std::shared_ptr<Var>> vars) {
  std::sort(vars.begin(), vars.end());
  vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
  std::vector<std::unique_lock<std::mutex>> locks;
  for (const auto& v : vars) locks.emplace_back(v->mu);
  return locks;
}

enum class Optimizer { kGradientDescent, kMomentum, kAdam };

// Inputs after the variables: GradientDescent (alpha, delta), Momentum (lr, grad, momentum),
// Adam (beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad).
template <Optimizer kOpt>
Status ApplyKernel(OpKernelContext& ctx, bool resource) {
  constexpr int kNumVars = kOpt == Optimizer::kGradientDescent ? 1
                           : kOpt == Optimizer::kMomentum      ? 2
                                                               : 3;
  constexpr int kGradInput = kOpt == Optimizer::kGradientDescent ? 2
                             : kOpt == Optimizer::kMomentum      ? 3
                                                                 : 9;
  ASSIGN_OR_RETURN(auto vars, UpdatedVariables(ctx, resource, kNumVars));
  bool nesterov = false;
  if constexpr (kOpt != Optimizer::kGradientDescent) {
    ASSIGN_OR_RETURN(nesterov, GetBoolAttr(ctx.attrs(), "use_nesterov", ctx.name()));
  }
  for (int i = kNumVars; i < ctx.num_inputs(); ++i) {
    if (i != kGradInput && ctx.input(i).num_elements() != 1) {
      return ctx.Error(ctx.node().op_def().input_arg[i].name + " is not a scalar: " +
                       DimsToString(ctx.input(i).dims()));
    }
  }
  auto locks = LockAll(vars);
  const Tensor& grad = ctx.input(kGradInput);
  const std::string grad_name = ctx.node().op_def().input_arg[kGradInput].name;
  for (int i = 0; i < kNumVars; ++i) {
    if (vars[i]->value.dims() != grad.dims()) {
      return ctx.Error(ctx.node().op_def().input_arg[i].name + " and " + grad_name +
                       " do not have the same shape" + DimsToString(vars[i]->value.dims()) +
                       " " + DimsToString(grad.dims()));
    }
    if (vars[i]->value.dtype() != grad.dtype()) {
      return ctx.Error("variable of type " + DataTypeName(vars[i]->value.dtype()) +
                       " updated with " + DataTypeName(grad.dtype()));
    }
    vars[i]->value.MakeUnique();
  }
  RETURN_IF_ERROR(Dispatch<cwise::kFloating>(ctx, grad.dtype(), [&](auto tag) -> Status {
    using T = typename decltype(tag)::type;
    auto scalar = [&](int i) { return Data<T>(ctx.input(i))[0]; };
    T* var = MutableData<T>(vars[0]->value);
    const T* g = Data<T>(grad);
    const int64_t n = grad.num_elements();
    if constexpr (kOpt == Optimizer::kGradientDescent) {
      const T alpha = scalar(1);
      for (int64_t i = 0; i < n; ++i) var[i] -= g[i] * alpha;
    } else if constexpr (kOpt == Optimizer::kMomentum) {
      T* accum = MutableData<T>(vars[1]->value);
      const T lr = scalar(2), momentum = scalar(4);
      for (int64_t i = 0; i < n; ++i) {
        accum[i] = accum[i] * momentum + g[i];
        if (nesterov) var[i] -= g[i] * lr + accum[i] * momentum * lr;
        else var[i] -= accum[i] * lr;
      }
    } else {
      T* m = MutableData<T>(vars[1]->value);
      T* v = MutableData<T>(vars[2]->value);
      const T beta1_power = scalar(3), beta2_power = scalar(4), lr = scalar(5);
      const T beta1 = scalar(6), beta2 = scalar(7), epsilon = scalar(8);
      using C = cwise::ComputeType<T>;
      const T alpha = T(static_cast<C>(lr) * std::sqrt(C(1) - static_cast<C>(beta2_power)) /
                        (C(1) - static_cast<C>(beta1_power)));
      for (int64_t i = 0; i < n; ++i) {
        m[i] += (g[i] - m[i]) * (T(1) - beta1);
        v[i] += (g[i] * g[i] - v[i]) * (T(1) - beta2);
        const T denom = T(std::sqrt(static_cast<C>(v[i]))) + epsilon;
        if (nesterov) var[i] -= ((g[i] * (T(1) - beta1) + beta1 * m[i]) * alpha) / denom;
        else var[i] -= (m[i] * alpha) / denom;
      }
    }
    return OkStatus();
  }));
  if (!resource) ctx.set_output(0, vars[0]->value);
  return OkStatus();
}

template <Optimizer kOpt, bool kResource>
Status ApplyKernelFn(OpKernelContext& ctx) {
  return ApplyKernel<kOpt>(ctx, kResource);
}

// Apply*: `out` has the variable's shape, merged with the shapes of the other tensors of its
// shape (accumulators and the gradient).
Status ApplyShape(InferenceContext& c, std::vector<int> same_shape) {
  PartialShape s = c.input(0);
  for (int i : same_shape) {
    if (!s.IsCompatibleWith(c.input(i))) {
      return c.Error("Shapes must be equal, but are " + s.ToString() + " and " +
                     c.input(i).ToString());
    }
    s = s.Merge(c.input(i));
  }
  c.set_output(0, s);
  return OkStatus();
}

}  // namespace

void RegisterTrainingOps(OpRegistry& r) {
  REGISTER_OP(r, "ApplyGradientDescent")
      .Input("var: Ref(T)")
      .Input("alpha: T")
      .Input("delta: T")
      .Output("out: Ref(T)")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {2}); })
      .SetKernel(ApplyKernelFn<Optimizer::kGradientDescent, false>);
  REGISTER_OP(r, "ResourceApplyGradientDescent")
      .Input("var: resource")
      .Input("alpha: T")
      .Input("delta: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(ApplyKernelFn<Optimizer::kGradientDescent, true>);
  REGISTER_OP(r, "ApplyMomentum")
      .Input("var: Ref(T)")
      .Input("accum: Ref(T)")
      .Input("lr: T")
      .Input("grad: T")
      .Input("momentum: T")
      .Output("out: Ref(T)")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .Attr("use_nesterov: bool = false")
      .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {1, 3}); })
      .SetKernel(ApplyKernelFn<Optimizer::kMomentum, false>);
  REGISTER_OP(r, "ResourceApplyMomentum")
      .Input("var: resource")
      .Input("accum: resource")
      .Input("lr: T")
      .Input("grad: T")
      .Input("momentum: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .Attr("use_nesterov: bool = false")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(ApplyKernelFn<Optimizer::kMomentum, true>);
  REGISTER_OP(r, "ApplyAdam")
      .Input("var: Ref(T)")
      .Input("m: Ref(T)")
      .Input("v: Ref(T)")
      .Input("beta1_power: T")
      .Input("beta2_power: T")
      .Input("lr: T")
      .Input("beta1: T")
      .Input("beta2: T")
      .Input("epsilon: T")
      .Input("grad: T")
      .Output("out: Ref(T)")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .Attr("use_nesterov: bool = false")
      .SetShapeFn([](InferenceContext& c) { return ApplyShape(c, {1, 2, 9}); })
      .SetKernel(ApplyKernelFn<Optimizer::kAdam, false>);
  REGISTER_OP(r, "ResourceApplyAdam")
      .Input("var: resource")
      .Input("m: resource")
      .Input("v: resource")
      .Input("beta1_power: T")
      .Input("beta2_power: T")
      .Input("lr: T")
      .Input("beta1: T")
      .Input("beta2: T")
      .Input("epsilon: T")
      .Input("grad: T")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("use_locking: bool = false")
      .Attr("use_nesterov: bool = false")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(ApplyKernelFn<Optimizer::kAdam, true>);
}

}  // namespace xlens::graph
