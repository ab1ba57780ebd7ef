// Two shape ops that gradients and variables use: ConcatOffset (where each input of a concat
// starts along its axis: the gradient of ConcatV2 slices its incoming gradient there) and
// VariableShape (the shape of a resource variable's value without reading it).
#include <string>

#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

// TensorFlow's ConcatOffsetOp, with its messages.
Status ConcatOffsetKernel(OpKernelContext& ctx) {
  const Tensor& concat_dim = ctx.input(0);
  if (concat_dim.num_elements() != 1 || concat_dim.rank() != 0) {
    return ctx.Error("Concat dim tensor should be a scalar integer, but got shape " +
                     DimsToString(concat_dim.dims()));
  }
  const int n = ctx.num_inputs() - 1;
  for (int i = 0; i < n; ++i) {
    if (ctx.input(1 + i).rank() != 1) {
      return ctx.Error("input " + std::to_string(i) + " should be a vector, but got shape " +
                       DimsToString(ctx.input(1 + i).dims()));
    }
  }
  const std::vector<int64_t> first = ctx.input(1).AsInt64Vector();
  const int64_t dims = static_cast<int64_t>(first.size());
  const int64_t cdim_orig = concat_dim.GetAsInt64(0);
  const int64_t cdim = cdim_orig < 0 ? cdim_orig + dims : cdim_orig;
  if (cdim < 0 || cdim >= dims) {
    return ctx.Error("Concat dim is out of range: " + std::to_string(cdim_orig) + " vs. " +
                     std::to_string(dims));
  }
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    const std::vector<int64_t> shape = ctx.input(1 + i).AsInt64Vector();
    if (static_cast<int64_t>(shape.size()) != dims) {
      return ctx.Error("input " + std::to_string(i) + " should contain " + std::to_string(dims) +
                       " elements, but got " + std::to_string(shape.size()));
    }
    std::vector<int64_t> out(dims, 0);
    for (int64_t j = 0; j < dims; ++j) {
      if (j == cdim) {
        out[j] = offset;
        offset += shape[j];
      } else if (shape[j] != first[j]) {
        return ctx.Error("All dimensions except " + std::to_string(cdim) +
                         " must match. Input " + std::to_string(i) + " has shape " +
                         DimsToString(shape) + " and doesn't match input 0 with shape " +
                         DimsToString(first) + ".");
      }
    }
    ctx.set_output(i, IntTensor(ctx.node().output_type(i), out, {dims}));
  }
  return OkStatus();
}

Status ConcatOffsetShape(InferenceContext& c) {
  for (int i = 1; i < c.num_inputs(); ++i) c.set_output(i - 1, c.input(i));
  return OkStatus();
}

Status VariableShapeKernel(OpKernelContext& ctx) {
  const Tensor& t = ctx.input(0);
  if (t.dtype() != DT_RESOURCE || t.num_elements() != 1) {
    return ctx.Error("expected a scalar resource handle as input 0, got " +
                     DataTypeName(t.dtype()) + " " + DimsToString(t.dims()));
  }
  if (ctx.resources() == nullptr) return ctx.Error("no resource manager to hold variables");
  const ResourceHandle& h = t.handle();
  std::shared_ptr<Var> var = ctx.resources()->Lookup(h.container, h.name);
  if (var == nullptr || !var->is_initialized()) {
    return ctx.Error("Could not find variable " + h.name +
                     ". This could mean that the variable has been deleted. In TF1, it can "
                     "also mean the variable is uninitialized.");
  }
  std::vector<int64_t> dims;
  {
    std::lock_guard<std::mutex> lock(var->mu);
    dims = var->value.dims();
  }
  const DataType out_type = ctx.node().output_type(0);
  if (out_type == DT_INT32) {
    for (int64_t d : dims) {
      if (d > INT32_MAX) {
        return ctx.Error("Shape has dimension " + std::to_string(d) +
                         " which is too large to represent in int32; use out_type int64");
      }
    }
  }
  ctx.set_output(0, IntTensor(out_type, dims, {static_cast<int64_t>(dims.size())}));
  return OkStatus();
}

Status VariableShapeShape(InferenceContext& c) {
  const auto& handle = c.input_handle_shape(0);
  if (handle && !handle->first.unknown_rank()) {
    c.set_output(0, PartialShape({handle->first.rank()}));
  } else {
    c.set_output(0, PartialShape::UnknownOfRank(1));
  }
  return OkStatus();
}

}  // namespace

void RegisterShapeHelperOps(OpRegistry& r) {
  REGISTER_OP(r, "ConcatOffset")
      .Input("concat_dim: int32")
      .Input("shape: N * shape_type")
      .Output("offset: N * shape_type")
      .Attr("N: int >= 2")
      .Attr("shape_type: {int32, int64} = DT_INT32")
      .SetShapeFn(ConcatOffsetShape)
      .SetKernel(ConcatOffsetKernel)
      .CompileTimeConstInput("concat_dim")
      .CompileTimeConstInput("shape");
  REGISTER_OP(r, "VariableShape")
      .Input("input: resource")
      .Output("output: out_type")
      .Attr("out_type: {int32, int64} = DT_INT32")
      .SetIsStateful()
      .SetShapeFn(VariableShapeShape)
      .SetKernel(VariableShapeKernel);
}

}  // namespace xlens::graph
