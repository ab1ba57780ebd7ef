// Ops that move data without arithmetic: Transpose, Tile, Pack, Unpack, ConcatV2, Slice, Pad,
// ReverseV2, Split, SplitV, GatherV2, OneHot, Select, SelectV2 and UnsortedSegmentSum
// (StridedSlice has its own file).
// Their index arguments are compile-time constants (TensorFlow's compile_time_const_inputs), so
// each lowers to static HLO (slice, concatenate, broadcast + reshape, gather, ...).
#include <fmt/format.h>

#include <algorithm>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

StatusOr<int64_t> NormalizeAxis(const XlaOpKernelContext& ctx, int64_t axis, int64_t rank) {
  if (axis < -rank || axis >= rank) {
    return ctx.Error(fmt::format("axis {} is out of range for rank {}", axis, rank));
  }
  return axis < 0 ? axis + rank : axis;
}

StatusOr<int64_t> ScalarAxisInput(const XlaOpKernelContext& ctx, int input, int64_t rank) {
  ASSIGN_OR_RETURN(std::vector<int64_t> axis, ctx.ConstantInputAsIntVector(input));
  if (axis.size() != 1) return ctx.Error("the axis must be a scalar");
  return NormalizeAxis(ctx, axis[0], rank);
}

Status LowerTranspose(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> perm, ctx.ConstantInputAsIntVector(1));
  const int64_t rank = x->shape().rank();
  if (static_cast<int64_t>(perm.size()) != rank) {
    return ctx.Error(fmt::format("transpose expects a vector of size {}, but perm has {}", rank,
                                 perm.size()));
  }
  for (int64_t& p : perm) {
    ASSIGN_OR_RETURN(p, NormalizeAxis(ctx, p, rank));
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Transpose(x, perm));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerTile(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> multiples, ctx.ConstantInputAsIntVector(1));
  const std::vector<int64_t> dims = x->shape().dimensions();
  if (multiples.size() != dims.size()) {
    return ctx.Error(fmt::format("expected multiples argument to be a vector of length {} but "
                                 "got length {}",
                                 dims.size(), multiples.size()));
  }
  // Broadcast [d0, d1] to [m0, d0, m1, d1], then merge each (m, d) pair.
  std::vector<int64_t> broadcast_dims, mapping, out_dims;
  for (size_t i = 0; i < dims.size(); ++i) {
    if (multiples[i] < 0) return ctx.Error("multiples must be non-negative");
    broadcast_dims.push_back(multiples[i]);
    broadcast_dims.push_back(dims[i]);
    mapping.push_back(static_cast<int64_t>(2 * i + 1));
    out_dims.push_back(multiples[i] * dims[i]);
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * bx, ctx, b.Broadcast(x, broadcast_dims, mapping));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Reshape(bx, out_dims));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerConcat(XlaOpKernelContext& ctx) {
  const int n = ctx.num_inputs() - 1;
  const int64_t rank = static_cast<int64_t>(ctx.InputShape(0).size());
  ASSIGN_OR_RETURN(int64_t axis, ScalarAxisInput(ctx, n, rank));
  std::vector<HloInstruction*> values;
  for (int i = 0; i < n; ++i) {
    ASSIGN_OR_RETURN(HloInstruction * v, ctx.Input(i));
    values.push_back(v);
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Concatenate(values, axis));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerPack(XlaOpKernelContext& ctx) {
  const int64_t rank = static_cast<int64_t>(ctx.InputShape(0).size());
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetIntAttr("axis"));
  ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, rank + 1));
  std::vector<HloInstruction*> values;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    ASSIGN_OR_RETURN(HloInstruction * v, ctx.Input(i));
    std::vector<int64_t> dims = v->shape().dimensions();
    dims.insert(dims.begin() + axis, 1);
    LOWER_OR_RETURN(HloInstruction * r, ctx, ctx.builder().Reshape(v, dims));
    values.push_back(r);
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Concatenate(values, axis));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerUnpack(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  const std::vector<int64_t> dims = x->shape().dimensions();
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetIntAttr("axis"));
  ASSIGN_OR_RETURN(axis, NormalizeAxis(ctx, axis, static_cast<int64_t>(dims.size())));
  if (dims[axis] != ctx.num_outputs()) {
    return ctx.Error(fmt::format("input dimension {} is {}, not num={}", axis, dims[axis],
                                 ctx.num_outputs()));
  }
  std::vector<int64_t> starts(dims.size(), 0), limits = dims, strides(dims.size(), 1);
  std::vector<int64_t> out_dims = dims;
  out_dims.erase(out_dims.begin() + axis);
  for (int i = 0; i < ctx.num_outputs(); ++i) {
    starts[axis] = i;
    limits[axis] = i + 1;
    LOWER_OR_RETURN(HloInstruction * s, ctx, ctx.builder().Slice(x, starts, limits, strides));
    LOWER_OR_RETURN(HloInstruction * r, ctx, ctx.builder().Reshape(s, out_dims));
    ctx.SetOutput(i, r);
  }
  return OkStatus();
}

// Splits `x` along `axis` into pieces of `sizes`.
Status SplitInto(XlaOpKernelContext& ctx, HloInstruction* x, int64_t axis,
                 const std::vector<int64_t>& sizes) {
  const std::vector<int64_t>& dims = x->shape().dimensions();
  std::vector<int64_t> starts(dims.size(), 0), limits = dims, strides(dims.size(), 1);
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    starts[axis] = offset;
    limits[axis] = offset + sizes[i];
    offset += sizes[i];
    LOWER_OR_RETURN(HloInstruction * s, ctx, ctx.builder().Slice(x, starts, limits, strides));
    ctx.SetOutput(static_cast<int>(i), s);
  }
  return OkStatus();
}

Status LowerSplit(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(1));
  ASSIGN_OR_RETURN(int64_t axis, ScalarAxisInput(ctx, 0, x->shape().rank()));
  const int64_t n = ctx.num_outputs();
  const int64_t d = x->shape().dimensions(axis);
  if (d % n != 0) {
    return ctx.Error(fmt::format("number of ways to split should evenly divide the split "
                                 "dimension, but got split_dim {} (size = {}) and num_split {}",
                                 axis, d, n));
  }
  return SplitInto(ctx, x, axis, std::vector<int64_t>(n, d / n));
}

Status LowerSplitV(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> sizes, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(int64_t axis, ScalarAxisInput(ctx, 2, x->shape().rank()));
  const int64_t d = x->shape().dimensions(axis);
  int64_t known = 0, inferred = -1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (inferred >= 0) return ctx.Error("only one size may be -1");
      inferred = static_cast<int64_t>(i);
    } else {
      known += sizes[i];
    }
  }
  if (inferred >= 0) sizes[inferred] = d - known;
  int64_t total = 0;
  for (int64_t s : sizes) total += s;
  if (total != d) {
    return ctx.Error(fmt::format("determined shape must either match input shape along "
                                 "split_dim exactly if fully specified, or be less than the size "
                                 "of the input along split_dim if not fully specified. Got: {}",
                                 total));
  }
  return SplitInto(ctx, x, axis, sizes);
}

Status LowerSlice(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> begin, ctx.ConstantInputAsIntVector(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> size, ctx.ConstantInputAsIntVector(2));
  const std::vector<int64_t>& dims = x->shape().dimensions();
  if (begin.size() != dims.size() || size.size() != dims.size()) {
    return ctx.Error("begin and size must have one element per input dimension");
  }
  std::vector<int64_t> limits(dims.size()), strides(dims.size(), 1);
  for (size_t i = 0; i < dims.size(); ++i) {
    if (size[i] == -1) size[i] = dims[i] - begin[i];
    limits[i] = begin[i] + size[i];
    if (begin[i] < 0 || size[i] < 0 || limits[i] > dims[i]) {
      return ctx.Error(fmt::format("expected begin[{}] = {} and size[{}] = {} to fit in a "
                                   "dimension of {}",
                                   i, begin[i], i, size[i], dims[i]));
    }
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Slice(x, begin, limits, strides));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerPad(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> paddings, ctx.ConstantInputAsIntVector(1));
  const int64_t rank = x->shape().rank();
  if (static_cast<int64_t>(paddings.size()) != 2 * rank) {
    return ctx.Error(fmt::format("paddings must be of shape [{}, 2]", rank));
  }
  PaddingConfig config;
  for (int64_t i = 0; i < rank; ++i) {
    if (paddings[2 * i] < 0 || paddings[2 * i + 1] < 0) {
      return ctx.Error("paddings must be non-negative");
    }
    config.dimensions.push_back({paddings[2 * i], paddings[2 * i + 1], 0});
  }
  HloInstruction* value = nullptr;
  if (ctx.num_inputs() > 2) {
    ASSIGN_OR_RETURN(value, ctx.Input(2));
  } else {
    LOWER_OR_RETURN(value, ctx, ctx.builder().ScalarConstant(x->shape().element_type(), 0));
  }
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Pad(x, value, config));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerReverse(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * x, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> axes, ctx.ConstantInputAsIntVector(1));
  for (int64_t& a : axes) {
    ASSIGN_OR_RETURN(a, NormalizeAxis(ctx, a, x->shape().rank()));
  }
  std::sort(axes.begin(), axes.end());
  LOWER_OR_RETURN(HloInstruction * y, ctx, ctx.builder().Reverse(x, axes));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

StatusOr<HloInstruction*> GatherAlongAxis(HloBuilder& b, HloInstruction* params,
                                          HloInstruction* indices, int64_t axis) {
  const std::vector<int64_t>& pdims = params->shape().dimensions();
  const int64_t index_rank = indices->shape().rank();
  GatherDimensionNumbers dnums;
  const int64_t out_rank = static_cast<int64_t>(pdims.size()) - 1 + index_rank;
  for (int64_t i = 0; i < out_rank; ++i) {
    if (i < axis || i >= axis + index_rank) dnums.offset_dims.push_back(i);
  }
  dnums.collapsed_slice_dims = {axis};
  dnums.start_index_map = {axis};
  dnums.index_vector_dim = index_rank;
  std::vector<int64_t> slice_sizes = pdims;
  slice_sizes[axis] = 1;
  return b.Gather(params, indices, dnums, slice_sizes);
}

namespace {

Status LowerGatherV2(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * params, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(1));
  ASSIGN_OR_RETURN(int64_t axis, ScalarAxisInput(ctx, 2, params->shape().rank()));
  ASSIGN_OR_RETURN(int64_t batch_dims, ctx.GetIntAttr("batch_dims"));
  if (batch_dims != 0) return ctx.Error("batch_dims other than 0 are not supported");
  LOWER_OR_RETURN(HloInstruction * y, ctx,
                  GatherAlongAxis(ctx.builder(), params, indices, axis));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerOneHot(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(0));
  ASSIGN_OR_RETURN(std::vector<int64_t> depth_v, ctx.ConstantInputAsIntVector(1));
  if (depth_v.size() != 1 || depth_v[0] < 0) return ctx.Error("depth must be a non-negative scalar");
  ASSIGN_OR_RETURN(HloInstruction * on, ctx.Input(2));
  ASSIGN_OR_RETURN(HloInstruction * off, ctx.Input(3));
  ASSIGN_OR_RETURN(int64_t axis, ctx.GetIntAttr("axis"));
  std::vector<int64_t> dims = indices->shape().dimensions();
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (axis == -1) axis = rank;
  if (axis < 0 || axis > rank) return ctx.Error(fmt::format("axis {} is out of range", axis));
  std::vector<int64_t> out_dims = dims;
  out_dims.insert(out_dims.begin() + axis, depth_v[0]);
  std::vector<int64_t> mapping;
  for (int64_t i = 0; i <= rank; ++i) {
    if (i != axis) mapping.push_back(i);
  }
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * bi, ctx, b.Broadcast(indices, out_dims, mapping));
  LOWER_OR_RETURN(HloInstruction * iota, ctx,
                  b.Iota(indices->shape().element_type(), out_dims, axis));
  LOWER_OR_RETURN(HloInstruction * hit, ctx, b.Compare(bi, iota, ComparisonDirection::kEq));
  LOWER_OR_RETURN(HloInstruction * bon, ctx, b.Broadcast(on, out_dims, {}));
  LOWER_OR_RETURN(HloInstruction * boff, ctx, b.Broadcast(off, out_dims, {}));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Select(hit, bon, boff));
  ctx.SetOutput(0, y);
  return OkStatus();
}

Status LowerSelect(XlaOpKernelContext& ctx, bool v2) {
  ASSIGN_OR_RETURN(HloInstruction * c, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * t, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * e, ctx.Input(2));
  HloBuilder& b = ctx.builder();
  std::vector<int64_t> dims;
  if (v2) {
    ASSIGN_OR_RETURN(dims, BroadcastShapes(ctx, t->shape().dimensions(), e->shape().dimensions()));
    ASSIGN_OR_RETURN(dims, BroadcastShapes(ctx, c->shape().dimensions(), dims));
    LOWER_OR_RETURN(c, ctx, b.BroadcastTo(c, dims));
  } else {
    dims = t->shape().dimensions();
    if (e->shape().dimensions() != dims) return ctx.Error("'then' and 'else' must have the same shape");
    if (c->shape().dimensions() != dims) {
      // A vector condition picks whole rows (v1 Select).
      if (c->shape().rank() != 1 || dims.empty() || c->shape().dimensions(0) != dims[0]) {
        return ctx.Error("'condition' must be a scalar, have the shape of 'then', or be a vector "
                         "of its first dimension");
      }
      LOWER_OR_RETURN(c, ctx, b.Broadcast(c, dims, {0}));
    }
    if (c->shape().rank() == 0 && !dims.empty()) {
      LOWER_OR_RETURN(c, ctx, b.Broadcast(c, dims, {}));
    }
  }
  LOWER_OR_RETURN(t, ctx, b.BroadcastTo(t, dims));
  LOWER_OR_RETURN(e, ctx, b.BroadcastTo(e, dims));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Select(c, t, e));
  ctx.SetOutput(0, y);
  return OkStatus();
}

// Sums the rows of `data` into the segments `segment_ids` names (a scatter-add into zeros; ids
// outside [0, num_segments) are dropped, as TensorFlow drops negative ones).
Status LowerUnsortedSegmentSum(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * data, ctx.Input(0));
  ASSIGN_OR_RETURN(HloInstruction * ids, ctx.Input(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> num, ctx.ConstantInputAsIntVector(2));
  if (num.size() != 1 || num[0] < 0) return ctx.Error("num_segments must be a non-negative scalar");
  const std::vector<int64_t>& d = data->shape().dimensions();
  const int64_t id_rank = ids->shape().rank();
  if (id_rank > static_cast<int64_t>(d.size()) ||
      !std::equal(ids->shape().dimensions().begin(), ids->shape().dimensions().end(),
                  d.begin())) {
    return ctx.Error("segment_ids must be a prefix of data's shape");
  }
  std::vector<int64_t> out_dims = {num[0]};
  out_dims.insert(out_dims.end(), d.begin() + id_rank, d.end());
  ScatterDimensionNumbers dnums;
  for (int64_t i = id_rank; i < static_cast<int64_t>(d.size()); ++i) {
    dnums.update_window_dims.push_back(i);
  }
  dnums.inserted_window_dims = {0};
  dnums.scatter_dims_to_operand_dims = {0};
  dnums.index_vector_dim = id_rank;
  HloBuilder& b = ctx.builder();
  LOWER_OR_RETURN(HloInstruction * zeros, ctx,
                  b.FullConstant(data->shape().element_type(), 0, out_dims));
  LOWER_OR_RETURN(HloInstruction * y, ctx, b.Scatter(zeros, ids, data, dnums, HloOpcode::kAdd));
  ctx.SetOutput(0, y);
  return OkStatus();
}

}  // namespace

void RegisterDataMovementXlaOps(XlaOpRegistry& registry) {
  registry.Register("Transpose", LowerTranspose);
  registry.Register("Tile", LowerTile);
  registry.Register("ConcatV2", LowerConcat);
  registry.Register("Pack", LowerPack);
  registry.Register("Unpack", LowerUnpack);
  registry.Register("Split", LowerSplit);
  registry.Register("SplitV", LowerSplitV);
  registry.Register("Slice", LowerSlice);
  registry.Register("Pad", LowerPad);
  registry.Register("PadV2", LowerPad);
  registry.Register("ReverseV2", LowerReverse);
  registry.Register("GatherV2", LowerGatherV2);
  registry.Register("OneHot", LowerOneHot);
  registry.Register("Select", [](XlaOpKernelContext& ctx) { return LowerSelect(ctx, false); });
  registry.Register("SelectV2", [](XlaOpKernelContext& ctx) { return LowerSelect(ctx, true); });
  registry.Register("UnsortedSegmentSum", LowerUnsortedSegmentSum);
}

}  // namespace xlens::cluster
