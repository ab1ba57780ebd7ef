// Ops about shapes: Shape, ShapeN, Size and Rank are compile-time constants (every shape is
// static), so gradient graphs (Shape -> BroadcastGradientArgs -> Sum(axes) -> Reshape(shape))
// fold to static HLO; Reshape, ExpandDims, Squeeze, Fill, BroadcastTo, ZerosLike, OnesLike and
// the identities that only forward a value. BroadcastGradientArgs, BroadcastArgs,
// InvertPermutation and Range need every input at compile time and so always fold on the host.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

using graph::Tensor;

Tensor IntVector(graph::DataType dtype, const std::vector<int64_t>& values) {
  Tensor t(dtype, {static_cast<int64_t>(values.size())});
  for (size_t i = 0; i < values.size(); ++i) t.SetFromInt64(static_cast<int64_t>(i), values[i]);
  return t;
}

Tensor IntScalar(graph::DataType dtype, int64_t value) {
  Tensor t(dtype, {});
  t.SetFromInt64(0, value);
  return t;
}

Status LowerShape(XlaOpKernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ctx.SetConstantOutput(i, IntVector(ctx.output_type(i), ctx.InputShape(i)));
  }
  return OkStatus();
}

Status LowerSize(XlaOpKernelContext& ctx) {
  int64_t n = 1;
  for (int64_t d : ctx.InputShape(0)) n *= d;
  ctx.SetConstantOutput(0, IntScalar(ctx.output_type(0), n));
  return OkStatus();
}

Status LowerRank(XlaOpKernelContext& ctx) {
  ctx.SetConstantOutput(0, IntScalar(ctx.output_type(0),
                                     static_cast<int64_t>(ctx.InputShape(0).size())));
  return OkStatus();
}

// Only reached when an input is not constant (constant inputs fold with the CPU kernel); the
// compile-time constant check has rejected that already. Kept so the op is known to lower.
Status LowerConstantOnly(XlaOpKernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) RETURN_IF_ERROR(ctx.ConstantInput(i).status());
  return ctx.Error("expected every input to be a compile-time constant");
}

// Any constant, strings included (an Assert's message): it becomes HLO only where a numeric
// value is needed.
Status LowerConst(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(Tensor value, graph::GetTensorAttr(ctx.attrs(), "value", ctx.name()));
  ctx.SetConstantOutput(0, std::move(value));
  return OkStatus();
}

// Ops with no effect on a compiled computation: NoOp and ControlTrigger only order, and XLA
// does not check assertions (TensorFlow's XLA Assert kernel is empty too).
Status LowerNothing(XlaOpKernelContext& ctx) { return OkStatus(); }

Status LowerIdentity(XlaOpKernelContext& ctx) {
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ctx.SetOutputExpression(i, ctx.input_expression(i));
  }
  return OkStatus();
}

// The shape input of Reshape, with one -1 resolved from the element count.
StatusOr<std::vector<int64_t>> ResolveReshape(const XlaOpKernelContext& ctx,
                                              const std::vector<int64_t>& from,
                                              std::vector<int64_t> to) {
  int64_t known = 1, inferred = -1;
  int64_t count = 1;
  for (int64_t d : from) count *= d;
  for (size_t i = 0; i < to.size(); ++i) {
    if (to[i] == -1) {
      if (inferred >= 0) return ctx.Error("only one input size may be -1");
      inferred = static_cast<int64_t>(i);
    } else if (to[i] < 0) {
      return ctx.Error(fmt::format("size {} must be non-negative, not {}", i, to[i]));
    } else {
      known *= to[i];
    }
  }
  if (inferred >= 0) {
    if (known == 0 || count % known != 0) {
      return ctx.Error(fmt::format("cannot reshape a tensor with {} elements to [{}]", count,
                                   fmt::join(to, ",")));
    }
    to[inferred] = count / known;
  } else if (known != count) {
    return ctx.Error(fmt::format("cannot reshape a tensor with {} elements to shape [{}] ({} "
                                 "elements)",
                                 count, fmt::join(to, ","), known));
  }
  return to;
}

Status SetReshaped(XlaOpKernelContext& ctx, const std::vector<int64_t>& dims) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  auto y = ctx.builder().Reshape(x, dims);
  if (!y.ok()) return ctx.Error(y.status().message());
  ctx.SetOutput(0, *y);
  return OkStatus();
}

Status LowerReshape(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> to, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ResolveReshape(ctx, ctx.InputShape(0), to));
  return SetReshaped(ctx, dims);
}

Status LowerExpandDims(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> axis, ctx.ConstantInputAsIntVector(1));
  if (axis.size() != 1) return ctx.Error("'dim' must be a scalar");
  std::vector<int64_t> dims = ctx.InputShape(0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t a = axis[0];
  if (a < -rank - 1 || a > rank) {
    return ctx.Error(fmt::format("dim {} is out of range for rank {}", a, rank));
  }
  if (a < 0) a += rank + 1;
  dims.insert(dims.begin() + a, 1);
  return SetReshaped(ctx, dims);
}

Status LowerSqueeze(XlaOpKernelContext& ctx) {
  std::vector<int64_t> dims = ctx.InputShape(0);
  const int64_t rank = static_cast<int64_t>(dims.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.GetIntListAttr("squeeze_dims"));
  std::vector<bool> drop(rank, false);
  if (axes.empty()) {
    for (int64_t i = 0; i < rank; ++i) drop[i] = dims[i] == 1;
  }
  for (int64_t a : axes) {
    if (a < -rank || a >= rank) {
      return ctx.Error(fmt::format("squeeze dimension {} is out of range for rank {}", a, rank));
    }
    if (a < 0) a += rank;
    if (dims[a] != 1) {
      return ctx.Error(fmt::format("can not squeeze dim[{}], expected a dimension of 1, got {}",
                                   a, dims[a]));
    }
    drop[a] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    if (!drop[i]) out.push_back(dims[i]);
  }
  return SetReshaped(ctx, out);
}

Status LowerFill(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(0));
  for (int64_t d : dims) {
    if (d < 0) return ctx.Error(fmt::format("dims must be non-negative, got [{}]",
                                            fmt::join(dims, ",")));
  }
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(1));
  if (value->shape().rank() != 0) return ctx.Error("value must be a scalar");
  auto out = ctx.builder().Broadcast(value, dims, {});
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, *out);
  return OkStatus();
}

Status LowerBroadcastTo(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> out_dims,
                   BroadcastShapes(ctx, x->shape().dimensions(), dims));
  if (out_dims != dims) {
    return ctx.Error(fmt::format("cannot broadcast [{}] to [{}]",
                                 fmt::join(x->shape().dimensions(), ","), fmt::join(dims, ",")));
  }
  auto out = ctx.builder().BroadcastTo(x, dims);
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, *out);
  return OkStatus();
}

Status LowerFullLike(XlaOpKernelContext& ctx, double value) {
  ASSIGN_OR_RETURN(PrimitiveType type, XlaType(ctx, ctx.output_type(0)));
  auto out = ctx.builder().FullConstant(type, value, ctx.InputShape(0));
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, *out);
  return OkStatus();
}

}  // namespace

void RegisterShapeXlaOps(XlaOpRegistry& registry) {
  registry.Register("Shape", LowerShape);
  registry.Register("ShapeN", LowerShape);
  registry.Register("Size", LowerSize);
  registry.Register("Rank", LowerRank);
  registry.Register("BroadcastGradientArgs", LowerConstantOnly);
  registry.Register("BroadcastArgs", LowerConstantOnly);
  registry.Register("InvertPermutation", LowerConstantOnly);
  registry.Register("Range", LowerConstantOnly);
  registry.Register("Const", LowerConst);
  registry.Register("NoOp", LowerNothing);
  registry.Register("ControlTrigger", LowerNothing);
  registry.Register("Assert", LowerNothing);
  for (const char* op : {"Identity", "IdentityN", "StopGradient", "Snapshot", "PreventGradient",
                         "PlaceholderWithDefault", "_EagerConst", "CheckNumerics"}) {
    registry.Register(op, LowerIdentity);
  }
  registry.Register("Reshape", LowerReshape);
  registry.Register("ExpandDims", LowerExpandDims);
  registry.Register("Squeeze", LowerSqueeze);
  registry.Register("Fill", LowerFill);
  registry.Register("BroadcastTo", LowerBroadcastTo);
  registry.Register("ZerosLike", [](XlaOpKernelContext& ctx) { return LowerFullLike(ctx, 0); });
  registry.Register("OnesLike", [](XlaOpKernelContext& ctx) { return LowerFullLike(ctx, 1); });
}

}  // namespace xlens::cluster
