// Elementwise binary ops with TensorFlow's (NumPy's) broadcasting: both operands are broadcast to
// the result shape (an HLO broadcast with dimensions, after a reshape that drops stretched
// size-1 dimensions), then one elementwise computation. The *Grad ops of activations are here
// too: they are binary elementwise functions of (y or x, dy).
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

using BinaryFn =
    std::function<StatusOr<HloInstruction*>(HloBuilder&, HloInstruction*, HloInstruction*)>;

PrimitiveType TypeOf(const HloInstruction* x) { return x->shape().element_type(); }

StatusOr<HloInstruction*> Full(HloBuilder& b, const HloInstruction* like, double value) {
  return b.FullConstant(TypeOf(like), value, like->shape().dimensions());
}

BinaryFn Simple(HloOpcode opcode) {
  return [opcode](HloBuilder& b, HloInstruction* x, HloInstruction* y) {
    return b.Binary(opcode, x, y);
  };
}

BinaryFn Comparison(ComparisonDirection direction) {
  return [direction](HloBuilder& b, HloInstruction* x, HloInstruction* y) {
    return b.Compare(x, y, direction);
  };
}

StatusOr<HloInstruction*> Mul(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  return b.Binary(HloOpcode::kMultiply, x, y);
}

// (x < 0) != (y < 0), elementwise (for the sign corrections of floor division and modulo).
StatusOr<HloInstruction*> SignsDiffer(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
  ASSIGN_OR_RETURN(HloInstruction * xneg, b.Compare(x, zero, ComparisonDirection::kLt));
  ASSIGN_OR_RETURN(HloInstruction * yneg, b.Compare(y, zero, ComparisonDirection::kLt));
  return b.Compare(xneg, yneg, ComparisonDirection::kNe);
}

StatusOr<HloInstruction*> FloorDiv(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * q, b.Binary(HloOpcode::kDivide, x, y));
  if (IsFloatingPointType(TypeOf(x))) return b.Unary(HloOpcode::kFloor, q);
  if (IsUnsignedIntegralType(TypeOf(x))) return q;
  // Truncating division rounds towards zero; floor division needs one less when the remainder
  // is non-zero and the signs differ.
  ASSIGN_OR_RETURN(HloInstruction * r, b.Binary(HloOpcode::kRemainder, x, y));
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
  ASSIGN_OR_RETURN(HloInstruction * inexact, b.Compare(r, zero, ComparisonDirection::kNe));
  ASSIGN_OR_RETURN(HloInstruction * differ, SignsDiffer(b, x, y));
  ASSIGN_OR_RETURN(HloInstruction * adjust, b.Binary(HloOpcode::kAnd, inexact, differ));
  ASSIGN_OR_RETURN(HloInstruction * one, Full(b, x, 1));
  ASSIGN_OR_RETURN(HloInstruction * q1, b.Binary(HloOpcode::kSubtract, q, one));
  return b.Select(adjust, q1, q);
}

StatusOr<HloInstruction*> FloorMod(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * r, b.Binary(HloOpcode::kRemainder, x, y));
  if (IsUnsignedIntegralType(TypeOf(x))) return r;
  // The remainder takes the dividend's sign; the modulo takes the divisor's.
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
  ASSIGN_OR_RETURN(HloInstruction * nonzero, b.Compare(r, zero, ComparisonDirection::kNe));
  ASSIGN_OR_RETURN(HloInstruction * differ, SignsDiffer(b, r, y));
  ASSIGN_OR_RETURN(HloInstruction * adjust, b.Binary(HloOpcode::kAnd, nonzero, differ));
  ASSIGN_OR_RETURN(HloInstruction * shifted, b.Binary(HloOpcode::kAdd, r, y));
  return b.Select(adjust, shifted, r);
}

StatusOr<HloInstruction*> DivNoNan(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, y, 0));
  ASSIGN_OR_RETURN(HloInstruction * y_zero, b.Compare(y, zero, ComparisonDirection::kEq));
  ASSIGN_OR_RETURN(HloInstruction * q, b.Binary(HloOpcode::kDivide, x, y));
  return b.Select(y_zero, zero, q);
}

StatusOr<HloInstruction*> MulNoNan(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, y, 0));
  ASSIGN_OR_RETURN(HloInstruction * y_zero, b.Compare(y, zero, ComparisonDirection::kEq));
  ASSIGN_OR_RETURN(HloInstruction * p, Mul(b, x, y));
  return b.Select(y_zero, zero, p);
}

StatusOr<HloInstruction*> SquaredDifference(HloBuilder& b, HloInstruction* x, HloInstruction* y) {
  ASSIGN_OR_RETURN(HloInstruction * d, b.Binary(HloOpcode::kSubtract, x, y));
  return Mul(b, d, d);
}

// dy * (1 - y * y)
StatusOr<HloInstruction*> TanhGrad(HloBuilder& b, HloInstruction* y, HloInstruction* dy) {
  ASSIGN_OR_RETURN(HloInstruction * y2, Mul(b, y, y));
  ASSIGN_OR_RETURN(HloInstruction * one, Full(b, y, 1));
  ASSIGN_OR_RETURN(HloInstruction * d, b.Binary(HloOpcode::kSubtract, one, y2));
  return Mul(b, dy, d);
}

// dy * y * (1 - y)
StatusOr<HloInstruction*> SigmoidGrad(HloBuilder& b, HloInstruction* y, HloInstruction* dy) {
  ASSIGN_OR_RETURN(HloInstruction * one, Full(b, y, 1));
  ASSIGN_OR_RETURN(HloInstruction * d, b.Binary(HloOpcode::kSubtract, one, y));
  ASSIGN_OR_RETURN(HloInstruction * yd, Mul(b, y, d));
  return Mul(b, dy, yd);
}

// dy * 0.5 / y
StatusOr<HloInstruction*> SqrtGrad(HloBuilder& b, HloInstruction* y, HloInstruction* dy) {
  ASSIGN_OR_RETURN(HloInstruction * half, Full(b, y, 0.5));
  ASSIGN_OR_RETURN(HloInstruction * h, Mul(b, dy, half));
  return b.Binary(HloOpcode::kDivide, h, y);
}

// dy * -0.5 * y^3
StatusOr<HloInstruction*> RsqrtGrad(HloBuilder& b, HloInstruction* y, HloInstruction* dy) {
  ASSIGN_OR_RETURN(HloInstruction * y2, Mul(b, y, y));
  ASSIGN_OR_RETURN(HloInstruction * y3, Mul(b, y2, y));
  ASSIGN_OR_RETURN(HloInstruction * c, Full(b, y, -0.5));
  ASSIGN_OR_RETURN(HloInstruction * s, Mul(b, y3, c));
  return Mul(b, dy, s);
}

// -dy * y * y
StatusOr<HloInstruction*> ReciprocalGrad(HloBuilder& b, HloInstruction* y, HloInstruction* dy) {
  ASSIGN_OR_RETURN(HloInstruction * y2, Mul(b, y, y));
  ASSIGN_OR_RETURN(HloInstruction * p, Mul(b, dy, y2));
  return b.Unary(HloOpcode::kNegate, p);
}

// features > 0 ? gradients : 0
StatusOr<HloInstruction*> ReluGrad(HloBuilder& b, HloInstruction* g, HloInstruction* f) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, f, 0));
  ASSIGN_OR_RETURN(HloInstruction * positive, b.Compare(f, zero, ComparisonDirection::kGt));
  return b.Select(positive, g, zero);
}

// 0 < features < 6 ? gradients : 0
StatusOr<HloInstruction*> Relu6Grad(HloBuilder& b, HloInstruction* g, HloInstruction* f) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, f, 0));
  ASSIGN_OR_RETURN(HloInstruction * six, Full(b, f, 6));
  ASSIGN_OR_RETURN(HloInstruction * gt0, b.Compare(f, zero, ComparisonDirection::kGt));
  ASSIGN_OR_RETURN(HloInstruction * lt6, b.Compare(f, six, ComparisonDirection::kLt));
  ASSIGN_OR_RETURN(HloInstruction * in, b.Binary(HloOpcode::kAnd, gt0, lt6));
  return b.Select(in, g, zero);
}

// outputs > 0 ? gradients : gradients * (outputs + 1)
StatusOr<HloInstruction*> EluGrad(HloBuilder& b, HloInstruction* g, HloInstruction* out) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, out, 0));
  ASSIGN_OR_RETURN(HloInstruction * one, Full(b, out, 1));
  ASSIGN_OR_RETURN(HloInstruction * positive, b.Compare(out, zero, ComparisonDirection::kGt));
  ASSIGN_OR_RETURN(HloInstruction * o1, b.Binary(HloOpcode::kAdd, out, one));
  ASSIGN_OR_RETURN(HloInstruction * gn, Mul(b, g, o1));
  return b.Select(positive, g, gn);
}

// gradients * sigmoid(features)
StatusOr<HloInstruction*> SoftplusGrad(HloBuilder& b, HloInstruction* g, HloInstruction* f) {
  ASSIGN_OR_RETURN(HloInstruction * s, b.Unary(HloOpcode::kLogistic, f));
  return Mul(b, g, s);
}

// outputs > 0 ? gradients * scale : gradients * (outputs + scale * alpha)
StatusOr<HloInstruction*> SeluGrad(HloBuilder& b, HloInstruction* g, HloInstruction* out) {
  constexpr double kScale = 1.0507009873554804934193349852946;
  constexpr double kScaleAlpha = 1.7580993408473768599402175208123;
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, out, 0));
  ASSIGN_OR_RETURN(HloInstruction * scale, Full(b, out, kScale));
  ASSIGN_OR_RETURN(HloInstruction * scale_alpha, Full(b, out, kScaleAlpha));
  ASSIGN_OR_RETURN(HloInstruction * positive, b.Compare(out, zero, ComparisonDirection::kGt));
  ASSIGN_OR_RETURN(HloInstruction * gs, Mul(b, g, scale));
  ASSIGN_OR_RETURN(HloInstruction * shifted, b.Binary(HloOpcode::kAdd, out, scale_alpha));
  ASSIGN_OR_RETURN(HloInstruction * gn, Mul(b, g, shifted));
  return b.Select(positive, gs, gn);
}

Status LowerBinary(XlaOpKernelContext& ctx, const BinaryFn& fn) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * y, ctx.Input(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> dims,
                   BroadcastShapes(ctx, x->shape().dimensions(), y->shape().dimensions()));
  HloBuilder& b = ctx.builder();
  auto bx = b.BroadcastTo(x, dims);
  if (!bx.ok()) return ctx.Error(bx.status().message());
  auto by = b.BroadcastTo(y, dims);
  if (!by.ok()) return ctx.Error(by.status().message());
  auto out = fn(b, *bx, *by);
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, *out);
  return OkStatus();
}

// The sum of N tensors of one shape.
Status LowerAddN(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * sum, ctx.Input(0));
  for (int i = 1; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(i));
    LOWER_OR_RETURN(sum, ctx, ctx.builder().Binary(HloOpcode::kAdd, sum, x));
  }
  ctx.SetOutput(0, sum);
  return OkStatus();
}

}  // namespace

void RegisterBinaryXlaOps(XlaOpRegistry& registry) {
  const std::vector<std::pair<std::string, BinaryFn>> ops = {
      {"Add", Simple(HloOpcode::kAdd)},
      {"AddV2", Simple(HloOpcode::kAdd)},
      {"Sub", Simple(HloOpcode::kSubtract)},
      {"Mul", Simple(HloOpcode::kMultiply)},
      {"RealDiv", Simple(HloOpcode::kDivide)},
      {"Div", Simple(HloOpcode::kDivide)},
      {"TruncateDiv", Simple(HloOpcode::kDivide)},
      {"TruncateMod", Simple(HloOpcode::kRemainder)},
      {"Maximum", Simple(HloOpcode::kMaximum)},
      {"Minimum", Simple(HloOpcode::kMinimum)},
      {"Pow", Simple(HloOpcode::kPower)},
      {"Atan2", Simple(HloOpcode::kAtan2)},
      {"LogicalAnd", Simple(HloOpcode::kAnd)},
      {"LogicalOr", Simple(HloOpcode::kOr)},
      {"BitwiseAnd", Simple(HloOpcode::kAnd)},
      {"BitwiseOr", Simple(HloOpcode::kOr)},
      {"BitwiseXor", Simple(HloOpcode::kXor)},
      {"Equal", Comparison(ComparisonDirection::kEq)},
      {"NotEqual", Comparison(ComparisonDirection::kNe)},
      {"Less", Comparison(ComparisonDirection::kLt)},
      {"LessEqual", Comparison(ComparisonDirection::kLe)},
      {"Greater", Comparison(ComparisonDirection::kGt)},
      {"GreaterEqual", Comparison(ComparisonDirection::kGe)},
      {"FloorDiv", FloorDiv},
      {"FloorMod", FloorMod},
      {"DivNoNan", DivNoNan},
      {"MulNoNan", MulNoNan},
      {"SquaredDifference", SquaredDifference},
      {"TanhGrad", TanhGrad},
      {"SigmoidGrad", SigmoidGrad},
      {"SqrtGrad", SqrtGrad},
      {"RsqrtGrad", RsqrtGrad},
      {"ReciprocalGrad", ReciprocalGrad},
      {"ReluGrad", ReluGrad},
      {"Relu6Grad", Relu6Grad},
      {"EluGrad", EluGrad},
      {"SoftplusGrad", SoftplusGrad},
      {"SeluGrad", SeluGrad},
  };
  for (const auto& [op, fn] : ops) {
    BinaryFn f = fn;
    registry.Register(op, [f](XlaOpKernelContext& ctx) { return LowerBinary(ctx, f); });
  }
  registry.Register("AddN", LowerAddN);
  // features > 0 ? gradients : alpha * gradients
  registry.Register("LeakyReluGrad", [](XlaOpKernelContext& ctx) -> Status {
    ASSIGN_OR_RETURN(float alpha, ctx.GetFloatAttr("alpha"));
    return LowerBinary(ctx, [alpha](HloBuilder& b, HloInstruction* g, HloInstruction* f)
                                -> StatusOr<HloInstruction*> {
      ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, f, 0));
      ASSIGN_OR_RETURN(HloInstruction * a, Full(b, g, alpha));
      ASSIGN_OR_RETURN(HloInstruction * positive, b.Compare(f, zero, ComparisonDirection::kGt));
      ASSIGN_OR_RETURN(HloInstruction * scaled, Mul(b, g, a));
      return b.Select(positive, g, scaled);
    });
  });
}

}  // namespace xlens::cluster
