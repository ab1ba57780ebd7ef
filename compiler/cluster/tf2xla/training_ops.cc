// The resource-variable optimizer updates (ResourceApplyGradientDescent, ResourceApplyMomentum,
// ResourceApplyAdam) as elementwise HLO on the variables' current values; the new values are
// written back to the variables, hence module outputs. Formulas as TensorFlow's training_ops.cc.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

// Elementwise arithmetic on values of one shape, scalars broadcast to it.
class Arith {
 public:
  Arith(XlaOpKernelContext& ctx, std::vector<int64_t> dims) : ctx_(ctx), dims_(std::move(dims)) {}

  StatusOr<HloInstruction*> Full(HloInstruction* x) {
    if (x->shape().dimensions() == dims_) return x;
    if (x->shape().rank() != 0) {
      return ctx_.Error(fmt::format("expected a scalar or a value of the variable's shape, got {}",
                                    x->shape().ToString(false)));
    }
    return ctx_.builder().Broadcast(x, dims_, {});
  }
  StatusOr<HloInstruction*> Op(HloOpcode opcode, HloInstruction* a, HloInstruction* b) {
    ASSIGN_OR_RETURN(a, Full(a));
    ASSIGN_OR_RETURN(b, Full(b));
    return ctx_.builder().Binary(opcode, a, b);
  }
  StatusOr<HloInstruction*> Constant(PrimitiveType type, double v) {
    return ctx_.builder().FullConstant(type, v, dims_);
  }

 private:
  XlaOpKernelContext& ctx_;
  std::vector<int64_t> dims_;
};

// var -= alpha * delta
Status LowerApplyGradientDescent(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * var, ctx.ReadVariableInput(0));
  ASSIGN_OR_RETURN(HloInstruction * alpha, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * delta, ctx.Input(2));
  if (delta->shape().dimensions() != var->shape().dimensions()) {
    return ctx.Error(fmt::format("var and delta do not have the same shape: {} {}",
                                 var->shape().ToString(false), delta->shape().ToString(false)));
  }
  Arith a(ctx, var->shape().dimensions());
  LOWER_OR_RETURN(HloInstruction * step, ctx, a.Op(HloOpcode::kMultiply, alpha, delta));
  LOWER_OR_RETURN(HloInstruction * updated, ctx, a.Op(HloOpcode::kSubtract, var, step));
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("T"));
  return ctx.AssignVariable(0, dtype, updated);
}

// accum = accum * momentum + grad;
// var -= use_nesterov ? grad * lr + accum * momentum * lr : accum * lr
Status LowerApplyMomentum(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * var, ctx.ReadVariableInput(0));
  ASSIGN_OR_RETURN(HloInstruction * accum, ctx.ReadVariableInput(1));
  ASSIGN_OR_RETURN(HloInstruction * lr, ctx.Input(2));
  ASSIGN_OR_RETURN(HloInstruction * grad, ctx.Input(3));
  ASSIGN_OR_RETURN(HloInstruction * momentum, ctx.Input(4));
  ASSIGN_OR_RETURN(bool nesterov, ctx.GetBoolAttr("use_nesterov"));
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("T"));
  Arith a(ctx, var->shape().dimensions());
  LOWER_OR_RETURN(HloInstruction * am, ctx, a.Op(HloOpcode::kMultiply, accum, momentum));
  LOWER_OR_RETURN(HloInstruction * new_accum, ctx, a.Op(HloOpcode::kAdd, am, grad));
  HloInstruction* step = nullptr;
  if (nesterov) {
    LOWER_OR_RETURN(HloInstruction * gl, ctx, a.Op(HloOpcode::kMultiply, grad, lr));
    LOWER_OR_RETURN(HloInstruction * nm, ctx, a.Op(HloOpcode::kMultiply, new_accum, momentum));
    LOWER_OR_RETURN(HloInstruction * nml, ctx, a.Op(HloOpcode::kMultiply, nm, lr));
    LOWER_OR_RETURN(step, ctx, a.Op(HloOpcode::kAdd, gl, nml));
  } else {
    LOWER_OR_RETURN(step, ctx, a.Op(HloOpcode::kMultiply, new_accum, lr));
  }
  LOWER_OR_RETURN(HloInstruction * new_var, ctx, a.Op(HloOpcode::kSubtract, var, step));
  RETURN_IF_ERROR(ctx.AssignVariable(1, dtype, new_accum));
  return ctx.AssignVariable(0, dtype, new_var);
}

// lr_t = lr * sqrt(1 - beta2_power) / (1 - beta1_power)
// m += (grad - m) * (1 - beta1); v += (grad^2 - v) * (1 - beta2)
// var -= lr_t * (use_nesterov ? m * beta1 + (1 - beta1) * grad : m) / (sqrt(v) + epsilon)
Status LowerApplyAdam(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * var, ctx.ReadVariableInput(0));
  ASSIGN_OR_RETURN(HloInstruction * m, ctx.ReadVariableInput(1));
  ASSIGN_OR_RETURN(HloInstruction * v, ctx.ReadVariableInput(2));
  std::vector<HloInstruction*> in(10, nullptr);
  for (int i = 3; i < 10; ++i) {
    ASSIGN_OR_RETURN(in[i], ctx.Input(i));
  }
  HloInstruction *beta1_power = in[3], *beta2_power = in[4], *lr = in[5], *beta1 = in[6],
                 *beta2 = in[7], *epsilon = in[8], *grad = in[9];
  ASSIGN_OR_RETURN(bool nesterov, ctx.GetBoolAttr("use_nesterov"));
  ASSIGN_OR_RETURN(graph::DataType dtype, ctx.GetTypeAttr("T"));
  const PrimitiveType type = var->shape().element_type();
  Arith a(ctx, var->shape().dimensions());
  LOWER_OR_RETURN(HloInstruction * one, ctx, a.Constant(type, 1));
  LOWER_OR_RETURN(HloInstruction * one_b2p, ctx, a.Op(HloOpcode::kSubtract, one, beta2_power));
  LOWER_OR_RETURN(HloInstruction * sqrt_b2p, ctx, ctx.builder().Unary(HloOpcode::kSqrt, one_b2p));
  LOWER_OR_RETURN(HloInstruction * one_b1p, ctx, a.Op(HloOpcode::kSubtract, one, beta1_power));
  LOWER_OR_RETURN(HloInstruction * ratio, ctx, a.Op(HloOpcode::kDivide, sqrt_b2p, one_b1p));
  LOWER_OR_RETURN(HloInstruction * lr_t, ctx, a.Op(HloOpcode::kMultiply, lr, ratio));
  LOWER_OR_RETURN(HloInstruction * one_b1, ctx, a.Op(HloOpcode::kSubtract, one, beta1));
  LOWER_OR_RETURN(HloInstruction * one_b2, ctx, a.Op(HloOpcode::kSubtract, one, beta2));
  LOWER_OR_RETURN(HloInstruction * gm, ctx, a.Op(HloOpcode::kSubtract, grad, m));
  LOWER_OR_RETURN(HloInstruction * gm1, ctx, a.Op(HloOpcode::kMultiply, gm, one_b1));
  LOWER_OR_RETURN(HloInstruction * new_m, ctx, a.Op(HloOpcode::kAdd, m, gm1));
  LOWER_OR_RETURN(HloInstruction * g2, ctx, a.Op(HloOpcode::kMultiply, grad, grad));
  LOWER_OR_RETURN(HloInstruction * g2v, ctx, a.Op(HloOpcode::kSubtract, g2, v));
  LOWER_OR_RETURN(HloInstruction * g2v2, ctx, a.Op(HloOpcode::kMultiply, g2v, one_b2));
  LOWER_OR_RETURN(HloInstruction * new_v, ctx, a.Op(HloOpcode::kAdd, v, g2v2));
  HloInstruction* direction = new_m;
  if (nesterov) {
    LOWER_OR_RETURN(HloInstruction * mb1, ctx, a.Op(HloOpcode::kMultiply, new_m, beta1));
    LOWER_OR_RETURN(HloInstruction * gb1, ctx, a.Op(HloOpcode::kMultiply, grad, one_b1));
    LOWER_OR_RETURN(direction, ctx, a.Op(HloOpcode::kAdd, mb1, gb1));
  }
  LOWER_OR_RETURN(HloInstruction * sqrt_v, ctx, ctx.builder().Unary(HloOpcode::kSqrt, new_v));
  LOWER_OR_RETURN(HloInstruction * den, ctx, a.Op(HloOpcode::kAdd, sqrt_v, epsilon));
  LOWER_OR_RETURN(HloInstruction * num, ctx, a.Op(HloOpcode::kMultiply, lr_t, direction));
  LOWER_OR_RETURN(HloInstruction * step, ctx, a.Op(HloOpcode::kDivide, num, den));
  LOWER_OR_RETURN(HloInstruction * new_var, ctx, a.Op(HloOpcode::kSubtract, var, step));
  RETURN_IF_ERROR(ctx.AssignVariable(1, dtype, new_m));
  RETURN_IF_ERROR(ctx.AssignVariable(2, dtype, new_v));
  return ctx.AssignVariable(0, dtype, new_var);
}

}  // namespace

void RegisterTrainingXlaOps(XlaOpRegistry& registry) {
  registry.Register("ResourceApplyGradientDescent", LowerApplyGradientDescent);
  registry.Register("ResourceApplyMomentum", LowerApplyMomentum);
  registry.Register("ResourceApplyAdam", LowerApplyAdam);
}

}  // namespace xlens::cluster
