// ConcatOffset and VariableShape: both are compile-time constants in a compiled cluster, as in
// TensorFlow's XLA kernels (ConcatOffset needs constant shapes; a variable's shape is known when
// the cluster is compiled).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/ops/op_util.h"

namespace xlens::cluster {

namespace {

Status LowerConcatOffset(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> axis_value, ctx.ConstantInputAsIntVector(0));
  if (axis_value.size() != 1) return ctx.Error("concat_dim must be a scalar");
  const int n = ctx.num_inputs() - 1;
  ASSIGN_OR_RETURN(std::vector<int64_t> first, ctx.ConstantInputAsIntVector(1));
  const int64_t dims = static_cast<int64_t>(first.size());
  const int64_t axis = axis_value[0] < 0 ? axis_value[0] + dims : axis_value[0];
  if (axis < 0 || axis >= dims) {
    return ctx.Error(fmt::format("Concat dim is out of range: {} vs. {}", axis_value[0], dims));
  }
  int64_t offset = 0;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(std::vector<int64_t> shape, ctx.ConstantInputAsIntVector(1 + i));
    if (static_cast<int64_t>(shape.size()) != dims) {
      return ctx.Error(fmt::format("input {} should contain {} elements, but got {}", i, dims,
                                   shape.size()));
    }
    std::vector<int64_t> out(dims, 0);
    for (int64_t j = 0; j < dims; ++j) {
      if (j == axis) {
        out[j] = offset;
        offset += shape[j];
      } else if (shape[j] != first[j]) {
        return ctx.Error(fmt::format(
            "All dimensions except {} must match. Input {} has shape [{}] and doesn't match "
            "input 0 with shape [{}].",
            axis, i, fmt::join(shape, ","), fmt::join(first, ",")));
      }
    }
    ctx.SetConstantOutput(i, graph::IntTensor(ctx.output_type(i), out, {dims}));
  }
  return OkStatus();
}

Status LowerVariableShape(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * resource, ctx.InputResource(0));
  const std::vector<int64_t>& shape = resource->shape;
  ctx.SetConstantOutput(0, graph::IntTensor(ctx.output_type(0), shape,
                                            {static_cast<int64_t>(shape.size())}));
  return OkStatus();
}

}  // namespace

void RegisterShapeHelperXlaOps(XlaOpRegistry& registry) {
  registry.Register("ConcatOffset", LowerConcatOffset);
  registry.Register("VariableShape", LowerVariableShape);
}

}  // namespace xlens::cluster
