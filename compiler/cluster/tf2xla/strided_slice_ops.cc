// StridedSlice and StridedSliceGrad. The sparse slice spec (begin/end/strides with the five
// masks: an ellipsis standing for the dimensions not named, new axes of size 1, dimensions
// shrunk away) is first made dense, one entry per input dimension, as TensorFlow's
// ValidateStridedSliceOp does; then the slice is a reverse (negative strides), a slice and a
// reshape to the final shape, and its gradient a reshape, a pad (interior padding for the
// strides) and the same reverse.
#include <fmt/format.h>

#include <algorithm>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

struct SliceMasks {
  int64_t begin = 0, end = 0, ellipsis = 0, new_axis = 0, shrink = 0;
};

// One entry per input dimension, in the coordinates of the input reversed along `reversed`.
struct DenseSlice {
  std::vector<int64_t> starts, limits, steps;
  std::vector<int64_t> reversed;
  std::vector<int64_t> sliced_dims;  // per input dimension (a shrunk one: 1)
  std::vector<int64_t> final_dims;   // the op's output shape (new axes in, shrunk ones out)
};

StatusOr<SliceMasks> GetMasks(const XlaOpKernelContext& ctx) {
  SliceMasks m;
  ASSIGN_OR_RETURN(m.begin, ctx.GetIntAttr("begin_mask"));
  ASSIGN_OR_RETURN(m.end, ctx.GetIntAttr("end_mask"));
  ASSIGN_OR_RETURN(m.ellipsis, ctx.GetIntAttr("ellipsis_mask"));
  ASSIGN_OR_RETURN(m.new_axis, ctx.GetIntAttr("new_axis_mask"));
  ASSIGN_OR_RETURN(m.shrink, ctx.GetIntAttr("shrink_axis_mask"));
  return m;
}

StatusOr<DenseSlice> MakeDense(const XlaOpKernelContext& ctx, const std::vector<int64_t>& dims,
                               const std::vector<int64_t>& begin, const std::vector<int64_t>& end,
                               const std::vector<int64_t>& strides, SliceMasks m) {
  const int64_t n = static_cast<int64_t>(begin.size());
  if (static_cast<int64_t>(end.size()) != n || static_cast<int64_t>(strides.size()) != n) {
    return ctx.Error("begin, end and strides must have the same length");
  }
  if ((m.ellipsis & (m.ellipsis - 1)) != 0) return ctx.Error("multiple ellipses in slice spec");
  auto bit = [](int64_t mask, int64_t i) { return ((mask >> i) & 1) != 0; };
  // Without an ellipsis, one is implied after the last entry.
  int64_t spec_len = n;
  if (m.ellipsis == 0) {
    m.ellipsis = int64_t{1} << n;
    spec_len = n + 1;
  }
  const int64_t rank = static_cast<int64_t>(dims.size());
  int64_t ellipsis_at = 0;
  while (!bit(m.ellipsis, ellipsis_at)) ++ellipsis_at;
  int64_t new_axes_after = 0;
  for (int64_t i = ellipsis_at + 1; i < n; ++i) new_axes_after += bit(m.new_axis, i);

  DenseSlice d;
  d.starts.assign(rank, 0);
  d.limits = dims;
  d.steps.assign(rank, 1);
  d.sliced_dims = dims;
  int64_t full = 0;
  for (int64_t i = 0; i < spec_len; ++i) {
    if (bit(m.ellipsis, i)) {
      const int64_t next = std::min(rank - (spec_len - i) + 1 + new_axes_after, rank);
      for (; full < next; ++full) d.final_dims.push_back(dims[full]);
      continue;
    }
    if (bit(m.new_axis, i)) {
      d.final_dims.push_back(1);
      continue;
    }
    if (full >= rank) {
      return ctx.Error(fmt::format("index {} of the slice spec is past the input's rank {}", i,
                                   rank));
    }
    const int64_t dim = dims[full];
    const int64_t s = strides[i];
    if (s == 0) return ctx.Error(fmt::format("strides[{}] must be non-zero", i));
    auto norm = [dim](int64_t v) { return v < 0 ? v + dim : v; };
    int64_t b = norm(begin[i]), e = norm(end[i]);
    int64_t start = 0, limit = 0, step = 1;
    const bool shrink = bit(m.shrink, i);
    if (shrink) {
      if (s != 1) return ctx.Error("only stride 1 allowed on non-range indexing");
      if (b < 0 || b >= dim) {
        return ctx.Error(fmt::format("slice index {} of dimension {} out of bounds", begin[i],
                                     full));
      }
      start = b;
      limit = b + 1;
    } else if (s > 0) {
      start = bit(m.begin, i) ? 0 : std::clamp<int64_t>(b, 0, dim);
      limit = std::max(start, bit(m.end, i) ? dim : std::clamp<int64_t>(e, 0, dim));
      step = s;
    } else {
      b = bit(m.begin, i) ? dim - 1 : std::clamp<int64_t>(b, -1, dim - 1);
      e = bit(m.end, i) ? -1 : std::clamp<int64_t>(e, -1, dim - 1);
      // Index j of the reversed dimension is dim - 1 - j here.
      start = dim - 1 - b;
      limit = std::max(start, dim - 1 - e);
      step = -s;
      d.reversed.push_back(full);
    }
    d.starts[full] = start;
    d.limits[full] = limit;
    d.steps[full] = step;
    d.sliced_dims[full] = (limit - start + step - 1) / step;
    if (!shrink) d.final_dims.push_back(d.sliced_dims[full]);
    ++full;
  }
  return d;
}

Status LowerStridedSlice(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> begin, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> end, ctx.ConstantInputAsIntVector(2));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.ConstantInputAsIntVector(3));
  ASSIGN_OR_RETURN(SliceMasks masks, GetMasks(ctx));
  ASSIGN_OR_RETURN(DenseSlice d,
                   MakeDense(ctx, x->shape().dimensions(), begin, end, strides, masks));
  HloBuilder& b = ctx.builder();
  HloInstruction* source = x;
  if (!d.reversed.empty()) {
    LOWER_OR_RETURN(source, ctx, b.Reverse(x, d.reversed));
  }
  LOWER_OR_RETURN(HloInstruction * sliced, ctx, b.Slice(source, d.starts, d.limits, d.steps));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Reshape(sliced, d.final_dims));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// dy placed where the slice took its elements, zeros elsewhere: per dimension a pad of dy with
// the first index as low padding and stride - 1 as interior padding.
Status LowerStridedSliceGrad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(std::vector<int64_t> dims, ctx.ConstantInputAsIntVector(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> begin, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> end, ctx.ConstantInputAsIntVector(2));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.ConstantInputAsIntVector(3));
  ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(4));
  ASSIGN_OR_RETURN(SliceMasks masks, GetMasks(ctx));
  ASSIGN_OR_RETURN(DenseSlice d, MakeDense(ctx, dims, begin, end, strides, masks));
  PaddingConfig pad;
  pad.dimensions.resize(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t n = d.sliced_dims[i];
    if (n == 0) {
      pad.dimensions[i].edge_padding_low = dims[i];
      continue;
    }
    pad.dimensions[i].edge_padding_low = d.starts[i];
    pad.dimensions[i].interior_padding = d.steps[i] - 1;
    pad.dimensions[i].edge_padding_high = dims[i] - (d.starts[i] + (n - 1) * d.steps[i] + 1);
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * full, ctx, b.Reshape(dy, d.sliced_dims));
  LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(dy->shape().element_type(), 0));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Pad(full, zero, pad));
  if (!d.reversed.empty()) {
    LOWER_OR_RETURN(y, ctx, b.Reverse(y, d.reversed));
  }
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterStridedSliceXlaOps(XlaOpRegistry& registry) {
  registry.Register("StridedSlice", LowerStridedSlice);
  registry.Register("StridedSliceGrad", LowerStridedSliceGrad);
}

}  // namespace xlens::cluster
