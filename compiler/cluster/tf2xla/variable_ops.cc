// Resource variables: ReadVariableOp reads the variable's current value (its entry parameter or
// the last value written in this function); AssignVariableOp, AssignAddVariableOp and
// AssignSubVariableOp write it. Every variable written becomes an extra output of the module
// (XlaCompilationResult::resource_updates), as TensorFlow's XlaCompiler returns them.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

Status LowerReadVariable(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("dtype"));
  ASSIGN_OR_RETURN(XlaResource * resource, ctx.InputResource(0));
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.ReadVariableInput(0));
  if (resource->dtype != dtype) {
    return ctx.Error(fmt::format("reads variable '{}' of type {} as {}", resource->name,
                                 graph::DataTypeName(resource->dtype),
                                 graph::DataTypeName(dtype)));
  }
  ctx.SetOutput(0, value);
  return OkStatus();
}

Status LowerAssignVariable(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("dtype"));
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(1));
  return ctx.AssignVariable(0, dtype, value);
}

Status LowerAssignUpdate(XlaOpKernelContext& ctx, HloOpcode opcode) {
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("dtype"));
  ASSIGN_OR_RETURN(HloInstruction * current, ctx.ReadVariableInput(0));
  ASSIGN_OR_RETURN(HloInstruction * delta, ctx.Input(1));
  if (current->shape().dimensions() != delta->shape().dimensions()) {
    return ctx.Error(fmt::format("cannot update variable of shape {} using a tensor of shape {}",
                                 current->shape().ToString(false),
                                 delta->shape().ToString(false)));
  }
  LOWER_OR_RETURN(HloInstruction * updated, ctx, ctx.builder().Binary(opcode, current, delta));
  return ctx.AssignVariable(0, dtype, updated);
}

Status LowerVarIsInitialized(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * resource, ctx.InputResource(0));
  ctx.SetConstantOutput(0, graph::Tensor::Scalar<bool>(graph::DT_BOOL, resource->value != nullptr));
  return OkStatus();
}

Status LowerResourceGather(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * params, ctx.ReadVariableInput(0));
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(1));
  ASSIGN_OR_RETURN(int64_t batch_dims, ctx.GetIntAttr("batch_dims"));
  if (batch_dims != 0) return ctx.Error("batch_dims other than 0 are not supported");
  if (params->shape().rank() == 0) return ctx.Error("params must be at least 1-dimensional");
  LOWER_OR_RETURN(HloInstruction * out, ctx, GatherAlongAxis(ctx.builder(), params, indices, 0));
  ctx.SetOutput(0, out);
  return OkStatus();
}

}  // namespace

void RegisterVariableXlaOps(XlaOpRegistry& registry) {
  registry.Register("ReadVariableOp", LowerReadVariable);
  registry.Register("AssignVariableOp", LowerAssignVariable);
  registry.Register("AssignAddVariableOp",
                    [](XlaOpKernelContext& ctx) { return LowerAssignUpdate(ctx, HloOpcode::kAdd); });
  registry.Register("AssignSubVariableOp", [](XlaOpKernelContext& ctx) {
    return LowerAssignUpdate(ctx, HloOpcode::kSubtract);
  });
  registry.Register("VarIsInitializedOp", LowerVarIsInitialized);
  registry.Register("ResourceGather", LowerResourceGather);
}

}  // namespace xlens::cluster
