// TensorFlow's training ops that plain gradient descent needs: ResourceApplyGradientDescent
// (var -= alpha * delta on a resource variable, what TF1's GradientDescentOptimizer emits for
// resource variables) and the signature of ApplyGradientDescent (its reference-variable form).
#include <mutex>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {

namespace {

template <typename T>
void Descend(Tensor& var, const Tensor& alpha, const Tensor& delta) {
  // In T, as TensorFlow's kernel computes it: var - alpha * delta.
  const T a = alpha.flat<T>()[0];
  auto v = var.flat<T>();
  auto d = delta.flat<T>();
  for (size_t i = 0; i < v.size(); ++i) v[i] -= a * d[i];
}

Status ResourceApplyGradientDescentKernel(OpKernelContext& c) {
  const Tensor& handle_t = c.input(0);
  if (handle_t.dtype() != DT_RESOURCE || handle_t.num_elements() != 1) {
    return c.Error("var must be a scalar resource handle");
  }
  const ResourceHandle& h = handle_t.handle();
  const Tensor& alpha = c.input(1);
  const Tensor& delta = c.input(2);
  if (alpha.num_elements() != 1) return c.Error("alpha is not a scalar: " + alpha.shape().ToString());
  std::shared_ptr<Variable> var = c.resources()->Lookup(h.container, h.name);
  if (var == nullptr || !var->is_initialized()) {
    return c.Error("Resource " + h.container + "/" + h.name +
                   " does not exist or is not initialized (run the variable's initializer)");
  }
  std::lock_guard<std::mutex> lock(var->mu);
  if (var->value.dtype() != delta.dtype() || var->value.dtype() != alpha.dtype()) {
    return c.Error("var, alpha and delta must have one type: " + DataTypeName(var->value.dtype()) +
                   ", " + DataTypeName(alpha.dtype()) + ", " + DataTypeName(delta.dtype()));
  }
  if (var->value.dims() != delta.dims()) {
    return c.Error("var and delta do not have the same shape: " +
                   DimsToString(var->value.dims()) + " " + DimsToString(delta.dims()));
  }
  // Readers holding the old value keep it.
  var->value.MakeUnique();
  switch (delta.dtype()) {
    case DT_FLOAT:
      Descend<float>(var->value, alpha, delta);
      break;
    case DT_DOUBLE:
      Descend<double>(var->value, alpha, delta);
      break;
    default:
      return c.Error("unsupported type " + DataTypeName(delta.dtype()));
  }
  return OkStatus();
}

}  // namespace

void RegisterTrainingOps(OpRegistry& r) {
  REGISTER_OP(r, "ResourceApplyGradientDescent")
      .Input("var: resource")
      .Input("alpha: T")
      .Input("delta: T")
      .Attr("T: {float, double}")
      .Attr("use_locking: bool = false")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(ResourceApplyGradientDescentKernel);
  REGISTER_OP(r, "ApplyGradientDescent")
      .Input("var: Ref(T)")
      .Input("alpha: T")
      .Input("delta: T")
      .Output("out: Ref(T)")
      .Attr("T: {float, double}")
      .Attr("use_locking: bool = false")
      .SetShapeFn(shape_fn::UnchangedShape)
      .NoXlaKernel();
}

}  // namespace xlens::graph
