// StridedSlice and StridedSliceGrad. The sparse slice spec (begin/end/strides with the five
// masks: an ellipsis standing for the dimensions not named, new axes of size 1, dimensions
// shrunk away) is first made dense, one entry per input dimension, as TensorFlow's
// ValidateStridedSliceOp does; then the slice is a reverse (negative strides), a slice and a
// reshape to the final shape, and its gradient a reshape, a pad (interior padding for the
// strides) and the same reverse.
// A begin known only at run time (x[i] in a loop) is lowered as tf2xla does when the slice's
// size does not depend on it: every entry a single index (shrunk) or the whole dimension, stride
// 1; the slice is then a dynamic-slice at the begin (negative indices from the end), and its
// gradient a dynamic-update-slice into zeros.
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
  std::vector<int64_t> spec_index;   // per input dimension, its slice spec entry (-1: ellipsis)
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
  d.spec_index.assign(rank, -1);
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
    d.spec_index[full] = i;
    d.starts[full] = start;
    d.limits[full] = limit;
    d.steps[full] = step;
    d.sliced_dims[full] = (limit - start + step - 1) / step;
    if (!shrink) d.final_dims.push_back(d.sliced_dims[full]);
    ++full;
  }
  return d;
}

// The dynamic-slice starts of a slice whose begin (input `begin_input`) is known only at run
// time, for input dimensions `dims`; an error when the slice's size would depend on it.
StatusOr<std::vector<HloInstruction*>> DynamicStarts(XlaOpKernelContext& ctx, int begin_input,
                                                     const std::vector<int64_t>& dims,
                                                     const std::vector<int64_t>& strides,
                                                     const SliceMasks& masks, DenseSlice* d) {
  const std::vector<int64_t> zeros(strides.size(), 0);
  std::vector<int64_t> end(strides.size(), 0);
  if (ctx.input_expression(begin_input + 1).kind() == XlaExpression::Kind::kConstant) {
    ASSIGN_OR_RETURN(end, ctx.ConstantInputAsIntVector(begin_input + 1));
  }
  ASSIGN_OR_RETURN(*d, MakeDense(ctx, dims, zeros, end, strides, masks));
  auto bit = [](int64_t mask, int64_t i) { return ((mask >> i) & 1) != 0; };
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(HloInstruction * begin, ctx.Input(begin_input));
  std::vector<HloInstruction*> starts;
  for (size_t k = 0; k < dims.size(); ++k) {
    const int64_t i = d->spec_index[k];
    const bool whole = i < 0 || (bit(masks.begin, i) && bit(masks.end, i) && strides[i] == 1);
    if (whole) {
      LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(PrimitiveType::S32, 0));
      starts.push_back(zero);
      continue;
    }
    if (!bit(masks.shrink, i)) {
      return ctx.Error(fmt::format("input 1 ('begin') must be a compile-time constant: entry {} "
                                   "of the slice is a range, whose size would depend on it",
                                   i));
    }
    LOWER_OR_RETURN(HloInstruction * one, ctx, b.Slice(begin, {i}, {i + 1}, {1}));
    LOWER_OR_RETURN(HloInstruction * index, ctx, b.Reshape(one, {}));
    LOWER_OR_RETURN(index, ctx, b.Convert(index, PrimitiveType::S32));
    LOWER_OR_RETURN(HloInstruction * zero, ctx, b.ScalarConstant(PrimitiveType::S32, 0));
    LOWER_OR_RETURN(HloInstruction * size, ctx,
                    b.ScalarConstant(PrimitiveType::S32, static_cast<double>(dims[k])));
    LOWER_OR_RETURN(HloInstruction * negative, ctx,
                    b.Compare(index, zero, ComparisonDirection::kLt));
    LOWER_OR_RETURN(HloInstruction * wrapped, ctx, b.Binary(HloOpcode::kAdd, index, size));
    LOWER_OR_RETURN(index, ctx, b.Select(negative, wrapped, index));
    d->starts[k] = 0;
    d->sliced_dims[k] = 1;
    starts.push_back(index);
  }
  return starts;
}

Status LowerStridedSlice(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.ConstantInputAsIntVector(3));
  ASSIGN_OR_RETURN(SliceMasks masks, GetMasks(ctx));
  HloBuilder& b = ctx.builder();
  if (ctx.input_expression(1).kind() != XlaExpression::Kind::kConstant) {
    DenseSlice d;
    ASSIGN_OR_RETURN(std::vector<HloInstruction*> starts,
                     DynamicStarts(ctx, 1, x->shape().dimensions(), strides, masks, &d));
    auto slice = std::make_unique<HloInstruction>(HloOpcode::kDynamicSlice, Shape());
    slice->AppendOperand(x);
    for (HloInstruction* start : starts) slice->AppendOperand(start);
    slice->dynamic_slice_sizes_attr = d.sliced_dims;
    LOWER_OR_RETURN(HloInstruction * sliced, ctx, b.Add(std::move(slice)));
    LOWER_OR_RETURN(HloInstruction * y, ctx, b.Reshape(sliced, d.final_dims));
    ctx.SetOutput(0, y);
    return OkStatus();
  }
  ASSIGN_OR_RETURN(std::vector<int64_t> begin, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> end, ctx.ConstantInputAsIntVector(2));
  ASSIGN_OR_RETURN(DenseSlice d,
                   MakeDense(ctx, x->shape().dimensions(), begin, end, strides, masks));
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
  if (ctx.input_expression(1).kind() != XlaExpression::Kind::kConstant) {
    ASSIGN_OR_RETURN(std::vector<int64_t> strides, ctx.ConstantInputAsIntVector(3));
    ASSIGN_OR_RETURN(HloInstruction * dy, ctx.Input(4));
    ASSIGN_OR_RETURN(SliceMasks masks, GetMasks(ctx));
    DenseSlice d;
    ASSIGN_OR_RETURN(std::vector<HloInstruction*> starts,
                     DynamicStarts(ctx, 1, dims, strides, masks, &d));
    HloBuilder& b = ctx.builder();
    LOWER_OR_RETURN(HloInstruction * update, ctx, b.Reshape(dy, d.sliced_dims));
    LOWER_OR_RETURN(HloInstruction * zeros, ctx,
                    b.FullConstant(dy->shape().element_type(), 0, dims));
    auto dus = std::make_unique<HloInstruction>(HloOpcode::kDynamicUpdateSlice, Shape());
    dus->AppendOperand(zeros);
    dus->AppendOperand(update);
    for (HloInstruction* start : starts) dus->AppendOperand(start);
    LOWER_OR_RETURN(HloInstruction * y, ctx, b.Add(std::move(dus)));
    ctx.SetOutput(0, y);
    return OkStatus();
  }
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
  // Where begin is known only at run time the size may not depend on begin or end (for x[i],
  // end is i + 1): both may come at run time; with a constant begin, end must be one too.
  for (const char* op : {"StridedSlice", "StridedSliceGrad"}) {
    registry.AcceptRuntimeInput(op, "begin");
    registry.AcceptRuntimeInput(op, "end");
  }
}

}  // namespace xlens::cluster
