// Einsum, lowered as XLA's Einsum builds it (xla/hlo/builder/lib/matrix.cc): the diagonal of a
// label repeated in an operand is a select against an iota comparison and a reduce, labels that
// appear in one operand only are reduced away, the two operands meet in one dot_general whose
// batch dimensions are the labels both share with the output and whose contracting dimensions
// are the labels they share without it, and a transpose puts the result in the output's order.
// Ellipsis dimensions of size 1 are broadcast against the other operand first; a label repeated
// in the output is a broadcast masked to its diagonal.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/ops/einsum_equation.h"

namespace xlens::cluster {

namespace {

bool Contains(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

int64_t IndexOf(const std::vector<int>& v, int x) {
  return std::find(v.begin(), v.end(), x) - v.begin();
}

// A value with one label per dimension.
struct Labeled {
  HloInstruction* value;
  std::vector<int> labels;
};

// select(iota(a) == iota(b), x, 0) summed over axis b: the diagonal of axes a and b.
StatusOr<Labeled> Diagonal(HloBuilder& b, Labeled x, int64_t axis_a, int64_t axis_b) {
  const Shape& shape = x.value->shape();
  const std::vector<int64_t>& dims = shape.dimensions();
  const PrimitiveType type = shape.element_type();
  ASSIGN_OR_RETURN(HloInstruction * ia, b.Iota(PrimitiveType::S32, dims, axis_a));
  ASSIGN_OR_RETURN(HloInstruction * ib, b.Iota(PrimitiveType::S32, dims, axis_b));
  ASSIGN_OR_RETURN(HloInstruction * eq, b.Compare(ia, ib, ComparisonDirection::kEq));
  ASSIGN_OR_RETURN(HloInstruction * zeros, b.FullConstant(type, 0, dims));
  ASSIGN_OR_RETURN(HloInstruction * masked, b.Select(eq, x.value, zeros));
  ASSIGN_OR_RETURN(HloInstruction * zero, b.ScalarConstant(type, 0));
  ASSIGN_OR_RETURN(x.value, b.Reduce(masked, zero, {axis_b}, HloOpcode::kAdd));
  x.labels.erase(x.labels.begin() + axis_b);
  return x;
}

// Takes diagonals until every label is distinct, then reduces the labels in `sum`.
StatusOr<Labeled> Prepare(HloBuilder& b, Labeled x, const std::vector<int>& sum) {
  for (bool again = true; again;) {
    again = false;
    for (size_t i = 0; i < x.labels.size() && !again; ++i) {
      for (size_t j = i + 1; j < x.labels.size(); ++j) {
        if (x.labels[i] != x.labels[j]) continue;
        ASSIGN_OR_RETURN(x, Diagonal(b, std::move(x), static_cast<int64_t>(i),
                                     static_cast<int64_t>(j)));
        again = true;
        break;
      }
    }
  }
  std::vector<int64_t> axes;
  std::vector<int> kept;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (Contains(sum, x.labels[i])) axes.push_back(static_cast<int64_t>(i));
    else kept.push_back(x.labels[i]);
  }
  if (!axes.empty()) {
    ASSIGN_OR_RETURN(HloInstruction * zero,
                     b.ScalarConstant(x.value->shape().element_type(), 0));
    ASSIGN_OR_RETURN(x.value, b.Reduce(x.value, zero, axes, HloOpcode::kAdd));
    x.labels = kept;
  }
  return x;
}

// Broadcasts dimensions of size 1 whose label has a larger size (ellipsis broadcasting).
StatusOr<Labeled> BroadcastLabels(HloBuilder& b, Labeled x, const std::vector<int64_t>& size) {
  const std::vector<int64_t> dims = x.value->shape().dimensions();
  std::vector<int64_t> target, kept_dims, kept_axes;
  bool needed = false;
  for (size_t i = 0; i < dims.size(); ++i) {
    target.push_back(size[x.labels[i]]);
    if (dims[i] == 1 && target.back() != 1) {
      needed = true;
    } else {
      kept_dims.push_back(dims[i]);
      kept_axes.push_back(static_cast<int64_t>(i));
    }
  }
  if (!needed) return x;
  ASSIGN_OR_RETURN(HloInstruction * r, b.Reshape(x.value, kept_dims));
  ASSIGN_OR_RETURN(x.value, b.Broadcast(r, target, kept_axes));
  return x;
}

StatusOr<HloInstruction*> TransposeTo(HloBuilder& b, const Labeled& x,
                                      const std::vector<int>& order) {
  std::vector<int64_t> perm;
  for (int l : order) perm.push_back(IndexOf(x.labels, l));
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) identity &= perm[i] == static_cast<int64_t>(i);
  return identity ? x.value : b.Transpose(x.value, perm);
}

Status LowerEinsum(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::string equation, [&]() -> StatusOr<std::string> {
    auto v = graph::GetStringAttr(ctx.attrs(), "equation", ctx.name());
    if (!v.ok()) return ctx.Error(v.status().message());
    return *v;
  }());
  auto parsed = graph::ParseEinsumEquation(equation, ctx.num_inputs());
  if (!parsed.ok()) return ctx.Error(parsed.status().message());
  std::vector<std::vector<int64_t>> dims;
  for (int i = 0; i < ctx.num_inputs(); ++i) dims.push_back(ctx.InputShape(i));
  auto resolved = graph::ResolveEinsum(*parsed, dims);
  if (!resolved.ok()) return ctx.Error(resolved.status().message());
  const graph::EinsumDims& d = *resolved;
  HloBuilder& b = ctx.builder();
  const int n = ctx.num_inputs();
  std::vector<Labeled> operands;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(HloInstruction * v, ctx.Input(i));
    std::vector<int> sum;
    for (int l : d.input_labels[i]) {
      bool elsewhere = Contains(d.output_labels, l);
      for (int j = 0; j < n; ++j) elsewhere |= j != i && Contains(d.input_labels[j], l);
      if (!elsewhere && !Contains(sum, l)) sum.push_back(l);
    }
    LOWER_OR_RETURN(Labeled x, ctx, Prepare(b, Labeled{v, d.input_labels[i]}, sum));
    operands.push_back(std::move(x));
  }
  std::vector<int> distinct_out;
  for (int l : d.output_labels)
    if (!Contains(distinct_out, l)) distinct_out.push_back(l);
  Labeled result;
  if (n == 1) {
    result = operands[0];
  } else {
    Labeled& lhs = operands[0];
    Labeled& rhs = operands[1];
    std::vector<int> batch;
    for (int l : lhs.labels)
      if (Contains(rhs.labels, l) && Contains(d.output_labels, l)) batch.push_back(l);
    // Shared labels broadcast to their full size on both sides.
    for (Labeled* x : {&lhs, &rhs}) {
      LOWER_OR_RETURN(*x, ctx, BroadcastLabels(b, std::move(*x), d.label_size));
    }
    DotDimensionNumbers dnums;
    for (int l : batch) {
      dnums.lhs_batch_dimensions.push_back(IndexOf(lhs.labels, l));
      dnums.rhs_batch_dimensions.push_back(IndexOf(rhs.labels, l));
    }
    std::vector<int> free_lhs, free_rhs;
    for (int l : lhs.labels) {
      if (Contains(batch, l)) continue;
      if (Contains(rhs.labels, l)) {
        dnums.lhs_contracting_dimensions.push_back(IndexOf(lhs.labels, l));
        dnums.rhs_contracting_dimensions.push_back(IndexOf(rhs.labels, l));
      } else {
        free_lhs.push_back(l);
      }
    }
    for (int l : rhs.labels)
      if (!Contains(lhs.labels, l)) free_rhs.push_back(l);
    LOWER_OR_RETURN(result.value, ctx, b.Dot(lhs.value, rhs.value, dnums));
    result.labels = batch;
    result.labels.insert(result.labels.end(), free_lhs.begin(), free_lhs.end());
    result.labels.insert(result.labels.end(), free_rhs.begin(), free_rhs.end());
  }
  LOWER_OR_RETURN(result, ctx, BroadcastLabels(b, std::move(result), d.label_size));
  LOWER_OR_RETURN(HloInstruction * out, ctx, TransposeTo(b, result, distinct_out));
  if (distinct_out.size() != d.output_labels.size()) {
    // A repeated output label: broadcast to every output axis, then keep the diagonal.
    std::vector<int64_t> mapping;
    for (int l : distinct_out) mapping.push_back(IndexOf(d.output_labels, l));
    LOWER_OR_RETURN(out, ctx, b.Broadcast(out, d.output_dims, mapping));
    const PrimitiveType type = out->shape().element_type();
    for (size_t a = 0; a < d.output_labels.size(); ++a) {
      const int64_t first = IndexOf(d.output_labels, d.output_labels[a]);
      if (first == static_cast<int64_t>(a)) continue;
      LOWER_OR_RETURN(HloInstruction * ia, ctx, b.Iota(PrimitiveType::S32, d.output_dims, first));
      LOWER_OR_RETURN(HloInstruction * ib, ctx,
                      b.Iota(PrimitiveType::S32, d.output_dims, static_cast<int64_t>(a)));
      LOWER_OR_RETURN(HloInstruction * eq, ctx, b.Compare(ia, ib, ComparisonDirection::kEq));
      LOWER_OR_RETURN(HloInstruction * zeros, ctx, b.FullConstant(type, 0, d.output_dims));
      LOWER_OR_RETURN(out, ctx, b.Select(eq, out, zeros));
    }
  }
  ctx.SetOutput(0, out);
  return OkStatus();
}

}  // namespace

void RegisterEinsumXlaOps(XlaOpRegistry& registry) { registry.Register("Einsum", LowerEinsum); }

}  // namespace xlens::cluster

namespace xlens::cluster {

void RegisterModelXlaOps(XlaOpRegistry& registry) {
  RegisterEinsumXlaOps(registry);
  RegisterSpecialMathXlaOps(registry);
  RegisterImageResizeXlaOps(registry);
  RegisterShapeHelperXlaOps(registry);
  RegisterFusedBatchNormXlaOps(registry);
}

}  // namespace xlens::cluster
