// MatMul and BatchMatMulV2 as one HLO dot each: the transposes become the choice of contracting
// dimensions, batch dimensions broadcast as TensorFlow's BatchMatMulV2 broadcasts them.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

Status LowerMatMul(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * a, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * b, ctx.Input(1));
  ASSIGN_OR_RETURN(bool transpose_a, ctx.GetBoolAttr("transpose_a"));
  ASSIGN_OR_RETURN(bool transpose_b, ctx.GetBoolAttr("transpose_b"));
  if (a->shape().rank() != 2 || b->shape().rank() != 2) {
    return ctx.Error(fmt::format("MatMul needs matrices, got {} and {}",
                                 a->shape().ToString(false), b->shape().ToString(false)));
  }
  const int64_t ka = transpose_a ? 0 : 1, kb = transpose_b ? 1 : 0;
  if (a->shape().dimensions(ka) != b->shape().dimensions(kb)) {
    return ctx.Error(fmt::format("matrix size-incompatible: In[0]: {}, In[1]: {}",
                                 a->shape().ToString(false), b->shape().ToString(false)));
  }
  DotDimensionNumbers dnums;
  dnums.lhs_contracting_dimensions = {ka};
  dnums.rhs_contracting_dimensions = {kb};
  HloBuilder& builder = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * dot, ctx, builder.Dot(a, b, dnums));
  // dot puts lhs's free dimension first, as MatMul's result has it (transpose_a included).
  ctx.SetOutput(0, dot);
  return OkStatus();
}

Status LowerBatchMatMul(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * y, ctx.Input(1));
  ASSIGN_OR_RETURN(bool adj_x, ctx.GetBoolAttr("adj_x"));
  ASSIGN_OR_RETURN(bool adj_y, ctx.GetBoolAttr("adj_y"));
  const int64_t rx = x->shape().rank(), ry = y->shape().rank();
  if (rx < 2 || ry < 2) return ctx.Error("BatchMatMul needs inputs of rank 2 or more");
  std::vector<int64_t> xd = x->shape().dimensions(), yd = y->shape().dimensions();
  std::vector<int64_t> xb(xd.begin(), xd.end() - 2), yb(yd.begin(), yd.end() - 2);
  ASSIGN_OR_RETURN(std::vector<int64_t> batch, BroadcastShapes(ctx, xb, yb));
  HloBuilder& b = ctx.builder();
  auto with_batch = [&](HloInstruction* v, const std::vector<int64_t>& d) {
    std::vector<int64_t> full = batch;
    full.push_back(d[d.size() - 2]);
    full.push_back(d[d.size() - 1]);
    return b.BroadcastTo(v, full);
  };
  LOWER_OR_RETURN(x, ctx, with_batch(x, xd));
  LOWER_OR_RETURN(y, ctx, with_batch(y, yd));
  const int64_t nb = static_cast<int64_t>(batch.size());
  DotDimensionNumbers dnums;
  for (int64_t i = 0; i < nb; ++i) {
    dnums.lhs_batch_dimensions.push_back(i);
    dnums.rhs_batch_dimensions.push_back(i);
  }
  dnums.lhs_contracting_dimensions = {adj_x ? nb : nb + 1};
  dnums.rhs_contracting_dimensions = {adj_y ? nb + 1 : nb};
  LOWER_OR_RETURN(HloInstruction * dot, ctx, b.Dot(x, y, dnums));
  ctx.SetOutput(0, dot);
  return OkStatus();
}

}  // namespace

void RegisterMatMulXlaOps(XlaOpRegistry& registry) {
  registry.Register("MatMul", LowerMatMul);
  registry.Register("BatchMatMulV2", LowerBatchMatMul);
  registry.Register("BatchMatMulV3", LowerBatchMatMul);
}

}  // namespace xlens::cluster
