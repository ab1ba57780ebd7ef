// Reductions over compile-time constant axes (Sum, Prod, Max, Min, Mean, All, Any, L2Loss) and
// ArgMax/ArgMin, as TensorFlow's reduction_ops.cc lowers them: one HLO reduce over the axes, a
// reshape back to rank when keep_dims, Mean divides by the number of reduced elements.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

enum class Reduction { kSum, kProd, kMax, kMin, kMean, kAll, kAny };

// The identity of the reduction for `type`.
double InitValue(Reduction r, PrimitiveType type) {
  const bool is_float = IsFloatingPointType(type);
  const int bits = BitWidth(type);
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean:
    case Reduction::kAny:
      return 0;
    case Reduction::kProd:
    case Reduction::kAll:
      return 1;
    case Reduction::kMax:
      if (is_float) return -std::numeric_limits<double>::infinity();
      return IsSignedIntegralType(type) ? -std::ldexp(1.0, bits - 1) : 0;
    case Reduction::kMin:
      if (is_float) return std::numeric_limits<double>::infinity();
      return std::ldexp(1.0, IsSignedIntegralType(type) ? bits - 1 : bits) - 1;
  }
  return 0;
}

HloOpcode Combiner(Reduction r) {
  switch (r) {
    case Reduction::kSum:
    case Reduction::kMean:
      return HloOpcode::kAdd;
    case Reduction::kProd:
      return HloOpcode::kMultiply;
    case Reduction::kMax:
      return HloOpcode::kMaximum;
    case Reduction::kMin:
      return HloOpcode::kMinimum;
    case Reduction::kAll:
      return HloOpcode::kAnd;
    case Reduction::kAny:
      return HloOpcode::kOr;
  }
  return HloOpcode::kAdd;
}

StatusOr<HloInstruction*> ScalarInit(HloBuilder& b, PrimitiveType type, double value) {
  // Integer extremes do not survive a trip through double for 64-bit types: set them exactly.
  if (IsIntegralType(type) && BitWidth(type) == 64 && std::abs(value) > 1e18) {
    Literal literal{Shape::Scalar(type)};
    if (IsSignedIntegralType(type)) {
      literal.SetFromInt64(0, value < 0 ? std::numeric_limits<int64_t>::min()
                                        : std::numeric_limits<int64_t>::max());
    } else {
      literal.data<uint64_t>()[0] = std::numeric_limits<uint64_t>::max();
    }
    return b.Constant(std::move(literal));
  }
  return b.ScalarConstant(type, value);
}

// Normalized, sorted, unique axes of a rank-`rank` input; errors name the node.
StatusOr<std::vector<int64_t>> ReductionAxes(const XlaOpKernelContext& ctx, int input,
                                             int64_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> raw, ctx.ConstantInputAsIntVector(input));
  std::set<int64_t> axes;
  for (int64_t a : raw) {
    if (a < -rank || a >= std::max<int64_t>(rank, 1)) {
      return ctx.Error(fmt::format("invalid reduction dimension ({} for input with {} "
                                   "dimension(s))",
                                   a, rank));
    }
    if (rank > 0) axes.insert(a < 0 ? a + rank : a);
  }
  return std::vector<int64_t>(axes.begin(), axes.end());
}

Status LowerReduction(XlaOpKernelContext& ctx, Reduction r) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const std::vector<int64_t> dims = x->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ReductionAxes(ctx, 1, rank));
  ASSIGN_OR_RETURN(bool keep_dims, ctx.GetBoolAttr("keep_dims"));
  if (axes.empty()) {
    // Nothing to reduce (a gradient's Sum over the dimensions BroadcastGradientArgs found none
    // of): the input itself, with no instruction, as TensorFlow's lowering gives it.
    ctx.SetOutput(0, x);
    return OkStatus();
  }
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  ASSIGN_OR_RETURN(HloInstruction * init, ScalarInit(b, type, InitValue(r, type)));
  auto reduced = b.Reduce(x, init, axes, Combiner(r));
  if (!reduced.ok()) return ctx.Error(reduced.status().message());
  HloInstruction* out = *reduced;
  if (r == Reduction::kMean) {
    int64_t count = 1;
    for (int64_t a : axes) count *= dims[a];
    ASSIGN_OR_RETURN(HloInstruction * divisor,
                     b.FullConstant(type, static_cast<double>(count), out->shape().dimensions()));
    ASSIGN_OR_RETURN(out, b.Binary(HloOpcode::kDivide, out, divisor));
  }
  if (keep_dims) {
    std::vector<int64_t> kept = dims;
    for (int64_t a : axes) kept[a] = 1;
    ASSIGN_OR_RETURN(out, b.Reshape(out, kept));
  }
  ctx.SetOutput(0, out);
  return OkStatus();
}

Status LowerArgMinMax(XlaOpKernelContext& ctx, bool is_max) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const int64_t rank = x->shape().rank();
  ASSIGN_OR_RETURN(std::vector<int64_t> axis, ctx.ConstantInputAsIntVector(1));
  if (axis.size() != 1) return ctx.Error("dimension must be a scalar");
  int64_t a = axis[0];
  if (a < -rank || a >= rank) {
    return ctx.Error(fmt::format("expected dimension in the range [{}, {}), but got {}", -rank,
                                 rank, a));
  }
  if (a < 0) a += rank;
  ASSIGN_OR_RETURN(PrimitiveType index_type, XlaType(ctx, ctx.output_type(0)));
  auto out = ctx.builder().ArgMinMax(x, a, index_type, is_max);
  if (!out.ok()) return ctx.Error(out.status().message());
  ctx.SetOutput(0, *out);
  return OkStatus();
}

Status LowerL2Loss(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  HloBuilder& b = ctx.builder();
  const PrimitiveType type = x->shape().element_type();
  ASSIGN_OR_RETURN(HloInstruction * sq, b.Binary(HloOpcode::kMultiply, x, x));
  ASSIGN_OR_RETURN(HloInstruction * zero, b.ScalarConstant(type, 0));
  std::vector<int64_t> all(x->shape().rank());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int64_t>(i);
  ASSIGN_OR_RETURN(HloInstruction * sum, b.Reduce(sq, zero, all, HloOpcode::kAdd));
  ASSIGN_OR_RETURN(HloInstruction * two, b.ScalarConstant(type, 2));
  ASSIGN_OR_RETURN(HloInstruction * out, b.Binary(HloOpcode::kDivide, sum, two));
  ctx.SetOutput(0, out);
  return OkStatus();
}

// A running sum along a constant axis: a reduce-window whose window covers the whole axis,
// padded on the side the sum comes from; `exclusive` shifts it by one element.
Status LowerCumsum(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const std::vector<int64_t> dims = x->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  ASSIGN_OR_RETURN(std::vector<int64_t> axis_v, ctx.ConstantInputAsIntVector(1));
  if (axis_v.size() != 1) return ctx.Error("axis must be a scalar");
  int64_t axis = axis_v[0];
  if (axis < -rank || axis >= rank) {
    return ctx.Error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  if (axis < 0) axis += rank;
  ASSIGN_OR_RETURN(bool exclusive, ctx.GetBoolAttr("exclusive"));
  ASSIGN_OR_RETURN(bool reverse, ctx.GetBoolAttr("reverse"));
  const int64_t n = dims[axis];
  Window window;
  for (int64_t i = 0; i < rank; ++i) {
    WindowDimension d;
    if (i == axis) {
      d.size = n;
      (reverse ? d.padding_high : d.padding_low) = n - 1;
    }
    window.dimensions.push_back(d);
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(x->shape().element_type(), 0));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.ReduceWindow(x, zero, window, HloOpcode::kAdd));
  if (exclusive && n > 0) {
    PaddingConfig pad;
    pad.dimensions.resize(rank);
    (reverse ? pad.dimensions[axis].edge_padding_high : pad.dimensions[axis].edge_padding_low) = 1;
    LOWER_OR_RETURN(HloInstruction * padded, ctx, b.Pad(y, zero, pad));
    std::vector<int64_t> starts(rank, 0), limits = dims, strides(rank, 1);
    if (reverse) {
      starts[axis] = 1;
      limits[axis] = n + 1;
    }
    LOWER_OR_RETURN(y, ctx, b.Slice(padded, starts, limits, strides));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterReductionXlaOps(XlaOpRegistry& registry) {
  const std::vector<std::pair<std::string, Reduction>> ops = {
      {"Sum", Reduction::kSum}, {"Prod", Reduction::kProd}, {"Max", Reduction::kMax},
      {"Min", Reduction::kMin}, {"Mean", Reduction::kMean}, {"All", Reduction::kAll},
      {"Any", Reduction::kAny}};
  for (const auto& [op, r] : ops) {
    Reduction kind = r;
    registry.Register(op, [kind](XlaOpKernelContext& ctx) { return LowerReduction(ctx, kind); });
  }
  registry.Register("ArgMax", [](XlaOpKernelContext& ctx) { return LowerArgMinMax(ctx, true); });
  registry.Register("ArgMin", [](XlaOpKernelContext& ctx) { return LowerArgMinMax(ctx, false); });
  registry.Register("L2Loss", LowerL2Loss);
  registry.Register("Cumsum", LowerCumsum);
}

}  // namespace xlens::cluster
