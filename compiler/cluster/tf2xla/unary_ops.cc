// Elementwise unary ops, Cast, and grappler's _UnaryOpsComposition (a chain of them fused into
// one node, attr op_names), lowered to the HLO TensorFlow's unary_ops.cc builds.
#include <fmt/format.h>

#include <map>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

using UnaryFn = std::function<StatusOr<HloInstruction*>(HloBuilder&, HloInstruction*)>;

PrimitiveType TypeOf(const HloInstruction* x) { return x->shape().element_type(); }
const std::vector<int64_t>& DimsOf(const HloInstruction* x) { return x->shape().dimensions(); }

UnaryFn Simple(HloOpcode opcode) {
  return [opcode](HloBuilder& b, HloInstruction* x) { return b.Unary(opcode, x); };
}

StatusOr<HloInstruction*> Full(HloBuilder& b, const HloInstruction* like, double value) {
  return b.FullConstant(TypeOf(like), value, DimsOf(like));
}

StatusOr<HloInstruction*> Relu(HloBuilder& b, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
  return b.Binary(HloOpcode::kMaximum, x, zero);
}

StatusOr<HloInstruction*> Relu6(HloBuilder& b, HloInstruction* x) {
  ASSIGN_OR_RETURN(HloInstruction * relu, Relu(b, x));
  ASSIGN_OR_RETURN(HloInstruction * six, Full(b, x, 6));
  return b.Binary(HloOpcode::kMinimum, relu, six);
}

// x > 0 ? x : scale_neg * expm1(x), times `scale` (Elu: 1, 1; Selu: TF's constants).
StatusOr<HloInstruction*> EluLike(HloBuilder& b, HloInstruction* x, double scale,
                                  double alpha) {
  ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
  ASSIGN_OR_RETURN(HloInstruction * positive, b.Compare(x, zero, ComparisonDirection::kGt));
  ASSIGN_OR_RETURN(HloInstruction * em1, b.Unary(HloOpcode::kExpm1, x));
  HloInstruction* negative = em1;
  if (alpha != 1) {
    ASSIGN_OR_RETURN(HloInstruction * a, Full(b, x, alpha));
    ASSIGN_OR_RETURN(negative, b.Binary(HloOpcode::kMultiply, em1, a));
  }
  ASSIGN_OR_RETURN(HloInstruction * out, b.Select(positive, x, negative));
  if (scale == 1) return out;
  ASSIGN_OR_RETURN(HloInstruction * s, Full(b, x, scale));
  return b.Binary(HloOpcode::kMultiply, out, s);
}

StatusOr<HloInstruction*> Softplus(HloBuilder& b, HloInstruction* x) {
  // log1p(exp(-|x|)) + max(x, 0): no overflow for large |x|.
  ASSIGN_OR_RETURN(HloInstruction * abs, b.Unary(HloOpcode::kAbs, x));
  ASSIGN_OR_RETURN(HloInstruction * neg, b.Unary(HloOpcode::kNegate, abs));
  ASSIGN_OR_RETURN(HloInstruction * exp, b.Unary(HloOpcode::kExp, neg));
  ASSIGN_OR_RETURN(HloInstruction * log1p, b.Unary(HloOpcode::kLog1p, exp));
  ASSIGN_OR_RETURN(HloInstruction * relu, Relu(b, x));
  return b.Binary(HloOpcode::kAdd, log1p, relu);
}

const std::map<std::string, UnaryFn>& UnaryFunctions() {
  static const auto* table = new std::map<std::string, UnaryFn>{
      {"Abs", Simple(HloOpcode::kAbs)},
      {"Neg", Simple(HloOpcode::kNegate)},
      {"Exp", Simple(HloOpcode::kExp)},
      {"Expm1", Simple(HloOpcode::kExpm1)},
      {"Log", Simple(HloOpcode::kLog)},
      {"Log1p", Simple(HloOpcode::kLog1p)},
      {"Sqrt", Simple(HloOpcode::kSqrt)},
      {"Rsqrt", Simple(HloOpcode::kRsqrt)},
      {"Sin", Simple(HloOpcode::kSin)},
      {"Cos", Simple(HloOpcode::kCos)},
      {"Tan", Simple(HloOpcode::kTan)},
      {"Tanh", Simple(HloOpcode::kTanh)},
      {"Sigmoid", Simple(HloOpcode::kLogistic)},
      {"Floor", Simple(HloOpcode::kFloor)},
      {"Ceil", Simple(HloOpcode::kCeil)},
      {"Sign", Simple(HloOpcode::kSign)},
      {"Erf", Simple(HloOpcode::kErf)},
      {"IsFinite", Simple(HloOpcode::kIsFinite)},
      {"LogicalNot", Simple(HloOpcode::kNot)},
      {"Round",
       [](HloBuilder& b, HloInstruction* x) -> StatusOr<HloInstruction*> {
         if (!IsFloatingPointType(TypeOf(x))) return x;
         return b.Unary(HloOpcode::kRoundNearestEven, x);
       }},
      {"Rint",
       [](HloBuilder& b, HloInstruction* x) { return b.Unary(HloOpcode::kRoundNearestEven, x); }},
      {"IsNan",
       [](HloBuilder& b, HloInstruction* x) { return b.Compare(x, x, ComparisonDirection::kNe); }},
      {"IsInf",
       [](HloBuilder& b, HloInstruction* x) -> StatusOr<HloInstruction*> {
         ASSIGN_OR_RETURN(HloInstruction * abs, b.Unary(HloOpcode::kAbs, x));
         ASSIGN_OR_RETURN(HloInstruction * inf,
                          Full(b, x, std::numeric_limits<double>::infinity()));
         return b.Compare(abs, inf, ComparisonDirection::kEq);
       }},
      {"Square",
       [](HloBuilder& b, HloInstruction* x) { return b.Binary(HloOpcode::kMultiply, x, x); }},
      {"Reciprocal",
       [](HloBuilder& b, HloInstruction* x) -> StatusOr<HloInstruction*> {
         ASSIGN_OR_RETURN(HloInstruction * one, Full(b, x, 1));
         return b.Binary(HloOpcode::kDivide, one, x);
       }},
      {"Relu", Relu},
      {"Relu6", Relu6},
      {"Elu", [](HloBuilder& b, HloInstruction* x) { return EluLike(b, x, 1, 1); }},
      {"Selu",
       [](HloBuilder& b, HloInstruction* x) {
         return EluLike(b, x, 1.0507009873554804934193349852946,
                        1.6732632423543772848170429916717);
       }},
      {"Softplus", Softplus},
      {"Softsign",
       [](HloBuilder& b, HloInstruction* x) -> StatusOr<HloInstruction*> {
         ASSIGN_OR_RETURN(HloInstruction * abs, b.Unary(HloOpcode::kAbs, x));
         ASSIGN_OR_RETURN(HloInstruction * one, Full(b, x, 1));
         ASSIGN_OR_RETURN(HloInstruction * den, b.Binary(HloOpcode::kAdd, abs, one));
         return b.Binary(HloOpcode::kDivide, x, den);
       }},
  };
  return *table;
}

Status LowerUnary(XlaOpKernelContext& ctx, const UnaryFn& fn) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  auto y = fn(ctx.builder(), x);
  if (!y.ok()) return ctx.Error(y.status().message());
  ctx.SetOutput(0, *y);
  return OkStatus();
}

Status LowerCast(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(graph::DataType dst, ctx.GetTypeAttr("DstT"));
  ASSIGN_OR_RETURN(PrimitiveType to, XlaType(ctx, dst));
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  HloBuilder& b = ctx.builder();
  HloInstruction* y = nullptr;
  if (to == PrimitiveType::PRED && TypeOf(x) != PrimitiveType::PRED) {
    // A cast to bool is `x != 0`, as TensorFlow's CPU kernel computes it.
    ASSIGN_OR_RETURN(HloInstruction * zero, Full(b, x, 0));
    ASSIGN_OR_RETURN(y, b.Compare(x, zero, ComparisonDirection::kNe));
  } else {
    ASSIGN_OR_RETURN(y, b.Convert(x, to));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerUnaryOpsComposition(XlaOpKernelContext& ctx) {
  const graph::AttrValue* names = graph::FindAttr(ctx.attrs(), "op_names");
  if (names == nullptr || names->kind() != graph::AttrValue::Kind::kList) {
    return ctx.Error("attr 'op_names' is missing");
  }
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  for (const std::string& op : names->list().s) {
    auto it = UnaryFunctions().find(op);
    if (it == UnaryFunctions().end()) {
      return ctx.Error(fmt::format("no XLA lowering for op '{}' in op_names", op));
    }
    auto y = it->second(ctx.builder(), x);
    if (!y.ok()) return ctx.Error(y.status().message());
    x = *y;
  }
  ctx.SetOutput(0, x);
  return OkStatus();
}

// x > 0 ? x : alpha * x
Status LowerLeakyRelu(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(float alpha, ctx.GetFloatAttr("alpha"));
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, Full(b, x, 0));
  LOWER_OR_RETURN(HloInstruction * a, ctx, Full(b, x, alpha));
  LOWER_OR_RETURN(HloInstruction * positive, ctx, b.Compare(x, zero, ComparisonDirection::kGt));
  LOWER_OR_RETURN(HloInstruction * scaled, ctx, b.Binary(HloOpcode::kMultiply, x, a));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Select(positive, x, scaled));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterUnaryXlaOps(XlaOpRegistry& registry) {
  for (const auto& [op, fn] : UnaryFunctions()) {
    UnaryFn f = fn;
    registry.Register(op, [f](XlaOpKernelContext& ctx) { return LowerUnary(ctx, f); });
  }
  registry.Register("Cast", LowerCast);
  registry.Register("_UnaryOpsComposition", LowerUnaryOpsComposition);
  registry.Register("LeakyRelu", LowerLeakyRelu);
}

}  // namespace xlens::cluster
