// Array ops that move elements (TensorFlow's array_ops.cc): Transpose, ConcatV2, Pack, Unpack,
// Tile, BroadcastTo, StridedSlice, Slice, GatherV2, Split, SplitV, Pad, PadV2, ReverseV2. Each
// kernel computes a strided view and hands it to StridedCopy (a memcpy per contiguous run).
#include <algorithm>
#include <cstring>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/array_ops.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/strided_copy.h"
#include "compiler/graph/ops/strided_slice.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

// ---- Transpose ------------------------------------------------------------------------------

StatusOr<std::vector<int64_t>> CheckPermutation(const std::vector<int64_t>& perm, int64_t rank) {
  if (static_cast<int64_t>(perm.size()) != rank) {
    return Status::Error("transpose expects a vector of size " + std::to_string(rank) +
                         ". But input(1) is a vector of size " + std::to_string(perm.size()));
  }
  std::vector<bool> seen(rank, false);
  std::vector<int64_t> out(perm);
  for (int64_t& p : out) {
    if (p < -rank || p >= rank) {
      return Status::Error(std::to_string(p) + " is out of range [0 .. " +
                           std::to_string(rank) + ")");
    }
    if (p < 0) p += rank;
    if (seen[p]) return Status::Error(std::to_string(p) + " is duplicated in perm");
    seen[p] = true;
  }
  return out;
}

Status TransposeShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* perm = c.input_tensor(1);
  int64_t rank = in.rank();
  if (rank < 0 && c.input(1).rank() == 1 && c.input(1).dim(0) >= 0) rank = c.input(1).dim(0);
  if (rank < 0) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (perm == nullptr || in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return OkStatus();
  }
  auto p = CheckPermutation(perm->AsInt64Vector(), rank);
  if (!p.ok()) return c.Error(p.status().message());
  std::vector<int64_t> dims(rank);
  for (int64_t i = 0; i < rank; ++i) dims[i] = in.dim((*p)[i]);
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status TransposeKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 1) return c.Error("perm must be rank 1, got shape " +
                                             DimsToString(c.input(1).dims()));
  auto perm = CheckPermutation(c.input(1).AsInt64Vector(), x.rank());
  if (!perm.ok()) return c.Error(perm.status().message());
  const std::vector<int64_t> in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> dims(x.rank()), src_strides(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    dims[i] = x.dim((*perm)[i]);
    src_strides[i] = in_strides[(*perm)[i]];
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  StridedCopy(x, 0, src_strides, *out, 0, RowMajorStrides(dims), dims);
  return OkStatus();
}

// ---- ConcatV2, Pack, Unpack -----------------------------------------------------------------

Status ConcatShape(InferenceContext& c) {
  const int n = c.num_inputs() - 1;
  int64_t rank = -1;
  for (int i = 0; i < n; ++i) {
    if (!c.input(i).unknown_rank()) {
      if (rank >= 0 && rank != c.input(i).rank()) {
        return c.Error("Shape must be rank " + std::to_string(rank) + " but is rank " +
                       std::to_string(c.input(i).rank()));
      }
      rank = c.input(i).rank();
    }
  }
  const Tensor* axis_t = c.input_tensor(n);
  if (rank < 0) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (axis_t == nullptr) {
    // Dimensions other than the (unknown) axis may still disagree; keep only the rank.
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return OkStatus();
  }
  int64_t axis = axis_t->GetAsInt64(0);
  if (axis < -rank || axis >= rank) {
    return c.Error("ConcatOp : Expected concatenating dimensions in the range [" +
                   std::to_string(-rank) + ", " + std::to_string(rank) + "), but got " +
                   std::to_string(axis));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> dims(rank, PartialShape::kUnknownDim);
  int64_t total = 0;
  for (int i = 0; i < n; ++i) {
    const PartialShape& s = c.input(i);
    if (s.unknown_rank()) {
      total = -1;
      continue;
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d == axis) continue;
      if (s.dim(d) >= 0) {
        if (dims[d] >= 0 && dims[d] != s.dim(d)) {
          return c.Error("Dimension " + std::to_string(d) + " in both shapes must be equal, but "
                         "are " + std::to_string(dims[d]) + " and " + std::to_string(s.dim(d)));
        }
        dims[d] = s.dim(d);
      }
    }
    if (total >= 0) total = s.dim(axis) >= 0 ? total + s.dim(axis) : -1;
  }
  dims[axis] = total;
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status ConcatKernel(OpKernelContext& c) {
  const int n = c.num_inputs() - 1;
  const Tensor& first = c.input(0);
  const int64_t rank = first.rank();
  if (c.input(n).num_elements() != 1) {
    return c.Error("Concat dim tensor should be a scalar integer, but got shape " +
                   DimsToString(c.input(n).dims()));
  }
  int64_t axis = c.input(n).GetAsInt64(0);
  if (axis < -rank || axis >= rank || rank == 0) {
    return c.Error("ConcatOp : Expected concatenating dimensions in the range [" +
                   std::to_string(-rank) + ", " + std::to_string(rank) + "), but got " +
                   std::to_string(axis));
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> dims = first.dims();
  dims[axis] = 0;
  for (int i = 0; i < n; ++i) {
    const Tensor& t = c.input(i);
    if (t.rank() != rank) {
      return c.Error("ConcatOp : Ranks of all input tensors should match: shape[0] = " +
                     DimsToString(first.dims()) + " vs. shape[" + std::to_string(i) + "] = " +
                     DimsToString(t.dims()));
    }
    for (int64_t d = 0; d < rank; ++d) {
      if (d != axis && t.dim(d) != first.dim(d)) {
        return c.Error("ConcatOp : Dimension " + std::to_string(d) +
                       " in both shapes must be equal: shape[0] = " + DimsToString(first.dims()) +
                       " vs. shape[" + std::to_string(i) + "] = " + DimsToString(t.dims()));
      }
    }
    dims[axis] += t.dim(axis);
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  std::vector<int64_t> start(rank, 0);
  for (int i = 0; i < n; ++i) {
    CopyIntoBox(c.input(i), *out, start);
    start[axis] += c.input(i).dim(axis);
  }
  return OkStatus();
}

Status PackShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(int64_t axis, IntAttr(c, "axis"));
  PartialShape merged = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (!merged.IsCompatibleWith(c.input(i))) {
      return c.Error("Shapes of all inputs must match: values[0].shape = " + merged.ToString() +
                     " != values[" + std::to_string(i) + "].shape = " + c.input(i).ToString());
    }
    merged = merged.Merge(c.input(i));
  }
  if (merged.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  const int64_t rank = merged.rank() + 1;
  if (axis < -rank || axis >= rank) {
    return c.Error("Invalid axis: " + std::to_string(axis) + "; must be in [" +
                   std::to_string(-rank) + "," + std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  std::vector<int64_t> dims = merged.dims();
  dims.insert(dims.begin() + axis, c.num_inputs());
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status PackKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(int64_t axis, IntAttr(c, "axis"));
  const Tensor& first = c.input(0);
  const int64_t rank = first.rank() + 1;
  if (axis < -rank || axis >= rank) {
    return c.Error("axis = " + std::to_string(axis) + " not in [" + std::to_string(-rank) +
                   ", " + std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  for (int i = 1; i < c.num_inputs(); ++i) {
    if (c.input(i).dims() != first.dims()) {
      return c.Error("Shapes of all inputs must match: values[0].shape = " +
                     DimsToString(first.dims()) + " != values[" + std::to_string(i) +
                     "].shape = " + DimsToString(c.input(i).dims()));
    }
  }
  std::vector<int64_t> dims = first.dims();
  dims.insert(dims.begin() + axis, c.num_inputs());
  std::vector<int64_t> piece = first.dims();
  piece.insert(piece.begin() + axis, 1);
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  std::vector<int64_t> start(rank, 0);
  for (int i = 0; i < c.num_inputs(); ++i) {
    start[axis] = i;
    CopyIntoBox(c.input(i).Reshaped(piece), *out, start);
  }
  return OkStatus();
}

Status UnpackShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(int64_t axis, IntAttr(c, "axis"));
  const PartialShape& in = c.input(0);
  if (in.unknown_rank()) {
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialShape::UnknownRank());
    return OkStatus();
  }
  const int64_t rank = in.rank();
  if (axis < -rank || axis >= rank) {
    return c.Error("Invalid axis: " + std::to_string(axis) + "; must be in [" +
                   std::to_string(-rank) + "," + std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  if (in.dim(axis) >= 0 && in.dim(axis) != c.num_outputs()) {
    return c.Error("Dimension must be " + std::to_string(c.num_outputs()) + " but is " +
                   std::to_string(in.dim(axis)));
  }
  std::vector<int64_t> dims = in.dims();
  dims.erase(dims.begin() + axis);
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, PartialShape(dims));
  return OkStatus();
}

Status UnpackKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(int64_t axis, IntAttr(c, "axis"));
  const Tensor& x = c.input(0);
  const int64_t rank = x.rank();
  if (axis < -rank || axis >= rank) {
    return c.Error("axis = " + std::to_string(axis) + " not in [" + std::to_string(-rank) +
                   ", " + std::to_string(rank) + ")");
  }
  if (axis < 0) axis += rank;
  if (x.dim(axis) != c.num_outputs()) {
    return c.Error("Input shape axis " + std::to_string(axis) + " must equal " +
                   std::to_string(c.num_outputs()) + ", got shape " + DimsToString(x.dims()));
  }
  std::vector<int64_t> piece = x.dims();
  piece[axis] = 1;
  std::vector<int64_t> dims = x.dims();
  dims.erase(dims.begin() + axis);
  std::vector<int64_t> start(rank, 0);
  for (int i = 0; i < c.num_outputs(); ++i) {
    start[axis] = i;
    Tensor out(x.dtype(), piece);
    CopyFromBox(x, start, out);
    c.set_output(i, out.Reshaped(dims));
  }
  return OkStatus();
}

// ---- Tile, BroadcastTo ----------------------------------------------------------------------

Status TileShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* multiples = c.input_tensor(1);
  int64_t rank = in.rank();
  if (rank < 0 && c.input(1).rank() == 1) rank = c.input(1).dim(0);
  if (rank < 0) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (multiples == nullptr || in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return OkStatus();
  }
  std::vector<int64_t> m = multiples->AsInt64Vector();
  if (static_cast<int64_t>(m.size()) != rank) {
    return c.Error("Shape must be rank " + std::to_string(rank) + " but is rank " +
                   std::to_string(m.size()));
  }
  std::vector<int64_t> dims(rank);
  for (int64_t i = 0; i < rank; ++i) dims[i] = in.dim(i) < 0 ? -1 : in.dim(i) * m[i];
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

// Tile is a broadcast: input [d0, d1] with multiples [m0, m1] is the view [m0, d0, m1, d1]
// with strides [0, s0, 0, s1].
Status TileKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  const Tensor& multiples = c.input(1);
  if (multiples.rank() != 1 || multiples.num_elements() != x.rank()) {
    return c.Error("Expected multiples argument to be a vector of length " +
                   std::to_string(x.rank()) + " but got length " +
                   std::to_string(multiples.num_elements()));
  }
  const std::vector<int64_t> m = multiples.AsInt64Vector();
  const std::vector<int64_t> in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> dims(x.rank()), view_dims, view_strides;
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (m[i] < 0) return c.Error("Expected multiples[" + std::to_string(i) + "] >= 0, but got " +
                                 std::to_string(m[i]));
    dims[i] = x.dim(i) * m[i];
    view_dims.insert(view_dims.end(), {m[i], x.dim(i)});
    view_strides.insert(view_strides.end(), {0, in_strides[i]});
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  StridedCopy(x, 0, view_strides, *out, 0, RowMajorStrides(view_dims), view_dims);
  return OkStatus();
}

Status BroadcastToShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape target, c.MakeShapeFromShapeTensor(1));
  const PartialShape& in = c.input(0);
  if (!target.unknown_rank() && !in.unknown_rank()) {
    if (in.rank() > target.rank()) {
      return c.Error("Rank of input (" + std::to_string(in.rank()) +
                     ") must be no greater than rank of output shape (" +
                     std::to_string(target.rank()) + ").");
    }
    for (int64_t i = 0; i < in.rank(); ++i) {
      const int64_t a = in.dim(in.rank() - 1 - i), b = target.dim(target.rank() - 1 - i);
      if (a >= 0 && b >= 0 && a != 1 && a != b) {
        return c.Error("Dimensions must be equal, but are " + std::to_string(a) + " and " +
                       std::to_string(b));
      }
    }
  }
  c.set_output(0, target);
  return OkStatus();
}

Status BroadcastToKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 1) return c.Error("Input 1 must be a vector, got " +
                                             DimsToString(c.input(1).dims()));
  const std::vector<int64_t> dims = c.input(1).AsInt64Vector();
  const int64_t rank = static_cast<int64_t>(dims.size());
  auto incompatible = [&] {
    return c.Error("Incompatible shapes: " + DimsToString(x.dims()) + " vs. " +
                   DimsToString(dims));
  };
  if (x.rank() > rank) return incompatible();
  const std::vector<int64_t> in_strides = RowMajorStrides(x.dims());
  std::vector<int64_t> strides(rank, 0);
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t o = rank - x.rank() + i;
    if (dims[o] < 0) return c.Error("dims must be non-negative, got " + DimsToString(dims));
    if (x.dim(i) == dims[o]) {
      strides[o] = in_strides[i];
    } else if (x.dim(i) != 1) {
      return incompatible();
    }
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  StridedCopy(x, 0, strides, *out, 0, RowMajorStrides(dims), dims);
  return OkStatus();
}

// ---- StridedSlice, Slice --------------------------------------------------------------------

StatusOr<StridedSliceMasks> MasksOf(const AttrMap& attrs, const std::string& node) {
  StridedSliceMasks m;
  ASSIGN_OR_RETURN(m.begin_mask, GetIntAttr(attrs, "begin_mask", node));
  ASSIGN_OR_RETURN(m.end_mask, GetIntAttr(attrs, "end_mask", node));
  ASSIGN_OR_RETURN(m.ellipsis_mask, GetIntAttr(attrs, "ellipsis_mask", node));
  ASSIGN_OR_RETURN(m.new_axis_mask, GetIntAttr(attrs, "new_axis_mask", node));
  ASSIGN_OR_RETURN(m.shrink_axis_mask, GetIntAttr(attrs, "shrink_axis_mask", node));
  return m;
}

Status StridedSliceShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(StridedSliceMasks masks, MasksOf(c.attrs(), c.node_name()));
  for (int i = 1; i < 4; ++i) {
    if (c.input(i).rank() > 1) return c.Error("Shape must be rank 1 but is rank " +
                                              std::to_string(c.input(i).rank()));
  }
  const Tensor *b = c.input_tensor(1), *e = c.input_tensor(2), *s = c.input_tensor(3);
  const PartialShape& in = c.input(0);
  if (in.unknown_rank() || b == nullptr || e == nullptr || s == nullptr) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  auto spec = ValidateStridedSlice(in, b->AsInt64Vector(), e->AsInt64Vector(),
                                   s->AsInt64Vector(), masks);
  if (!spec.ok()) return c.Error(spec.status().message());
  c.set_output(0, spec->final_shape);
  return OkStatus();
}

Status StridedSliceKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(StridedSliceMasks masks, MasksOf(c.attrs(), c.name()));
  const Tensor& x = c.input(0);
  for (int i = 1; i < 4; ++i) {
    if (c.input(i).rank() != 1) {
      return c.Error("Expected begin, end, and strides to be 1D equal size tensors, but got "
                     "shapes " + DimsToString(c.input(1).dims()) + ", " +
                     DimsToString(c.input(2).dims()) + ", and " +
                     DimsToString(c.input(3).dims()) + " instead.");
    }
  }
  auto spec = ValidateStridedSlice(x.shape(), c.input(1).AsInt64Vector(),
                                   c.input(2).AsInt64Vector(), c.input(3).AsInt64Vector(), masks);
  if (!spec.ok()) return c.Error(spec.status().message());
  const std::vector<int64_t> in_strides = RowMajorStrides(x.dims());
  const std::vector<int64_t>& view = spec->processing_shape.dims();
  std::vector<int64_t> strides(x.rank());
  int64_t offset = 0;
  for (int64_t i = 0; i < x.rank(); ++i) {
    strides[i] = spec->strides[i] * in_strides[i];
    if (view[i] > 0) offset += spec->begin[i] * in_strides[i];
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, spec->final_shape.dims()));
  StridedCopy(x, offset, strides, *out, 0, RowMajorStrides(view), view);
  return OkStatus();
}

// StridedSliceGrad: dy scattered into zeros of `shape` at the elements StridedSlice of that
// shape with the same spec reads (the gradient of StridedSlice).
Status StridedSliceGradShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, c.MakeShapeFromShapeTensor(0));
  c.set_output(0, shape);
  return OkStatus();
}

Status StridedSliceGradKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(StridedSliceMasks masks, MasksOf(c.attrs(), c.name()));
  const Tensor& shape_t = c.input(0);
  if (shape_t.rank() != 1) {
    return c.Error("shape must be a vector, got shape " + DimsToString(shape_t.dims()));
  }
  const std::vector<int64_t> dims = shape_t.AsInt64Vector();
  for (int64_t d : dims) {
    if (d < 0) return c.Error("shape " + DimsToString(dims) + " has a negative dimension");
  }
  auto spec = ValidateStridedSlice(PartialShape(dims), c.input(1).AsInt64Vector(),
                                   c.input(2).AsInt64Vector(), c.input(3).AsInt64Vector(), masks);
  if (!spec.ok()) return c.Error(spec.status().message());
  const Tensor& dy = c.input(4);
  if (dy.dims() != spec->final_shape.dims()) {
    return c.Error("shape of dy was " + DimsToString(dy.dims()) + " instead of " +
                   spec->final_shape.ToString());
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));  // zeros
  const std::vector<int64_t> out_strides = RowMajorStrides(dims);
  const std::vector<int64_t>& view = spec->processing_shape.dims();
  std::vector<int64_t> strides(dims.size());
  int64_t offset = 0;
  for (size_t i = 0; i < dims.size(); ++i) {
    strides[i] = spec->strides[i] * out_strides[i];
    if (view[i] > 0) offset += spec->begin[i] * out_strides[i];
  }
  StridedCopy(dy, 0, RowMajorStrides(view), *out, offset, strides, view);
  return OkStatus();
}

Status SliceShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor *b = c.input_tensor(1), *s = c.input_tensor(2);
  int64_t rank = in.rank();
  if (rank < 0 && c.input(1).rank() == 1) rank = c.input(1).dim(0);
  if (rank < 0) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (s == nullptr) {
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return OkStatus();
  }
  std::vector<int64_t> size = s->AsInt64Vector();
  if (static_cast<int64_t>(size.size()) != rank) {
    return c.Error("Shape must be rank " + std::to_string(rank) + " but is rank " +
                   std::to_string(size.size()));
  }
  std::vector<int64_t> begin = b ? b->AsInt64Vector() : std::vector<int64_t>();
  for (int64_t i = 0; i < rank; ++i) {
    if (size[i] == -1) {
      size[i] = (b != nullptr && !in.unknown_rank() && in.dim(i) >= 0) ? in.dim(i) - begin[i]
                                                                      : -1;
    } else if (size[i] < -1) {
      return c.Error("size[" + std::to_string(i) + "] must be >= -1, got " +
                     std::to_string(size[i]));
    }
  }
  c.set_output(0, PartialShape(size));
  return OkStatus();
}

Status SliceKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  const std::vector<int64_t> begin = c.input(1).AsInt64Vector();
  std::vector<int64_t> size = c.input(2).AsInt64Vector();
  if (c.input(1).rank() != 1 || c.input(2).rank() != 1 ||
      static_cast<int64_t>(begin.size()) != x.rank() ||
      static_cast<int64_t>(size.size()) != x.rank()) {
    return c.Error("Expected begin and size arguments to be 1-D tensors of size " +
                   std::to_string(x.rank()) + ", but got shapes " +
                   DimsToString(c.input(1).dims()) + " and " + DimsToString(c.input(2).dims()) +
                   " instead.");
  }
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (size[i] == -1) size[i] = x.dim(i) - begin[i];
    if (begin[i] < 0 || begin[i] > x.dim(i)) {
      return c.Error("Expected begin[" + std::to_string(i) + "] in [0, " +
                     std::to_string(x.dim(i)) + "], but got " + std::to_string(begin[i]));
    }
    if (size[i] < 0 || begin[i] + size[i] > x.dim(i)) {
      return c.Error("Expected size[" + std::to_string(i) + "] in [0, " +
                     std::to_string(x.dim(i) - begin[i]) + "], but got " +
                     std::to_string(size[i]));
    }
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, size));
  CopyFromBox(x, begin, *out);
  return OkStatus();
}

// ---- GatherV2 -------------------------------------------------------------------------------

struct GatherDims {
  int64_t axis = 0, batch_dims = 0;
};

StatusOr<GatherDims> CheckGather(int64_t axis, int64_t batch_dims, int64_t params_rank,
                                 int64_t indices_rank) {
  if (axis < -params_rank || axis >= params_rank) {
    return Status::Error("Expected axis in the range [" + std::to_string(-params_rank) + ", " +
                         std::to_string(params_rank) + "), but got " + std::to_string(axis));
  }
  if (axis < 0) axis += params_rank;
  if (batch_dims < 0) batch_dims += indices_rank;
  if (batch_dims < 0 || (indices_rank > 0 && batch_dims > indices_rank) ||
      (indices_rank == 0 && batch_dims != 0)) {
    return Status::Error("Expected batch_dims in the range [" + std::to_string(-indices_rank) +
                         ", " + std::to_string(indices_rank) + "], but got " +
                         std::to_string(batch_dims));
  }
  if (batch_dims >= params_rank) {
    return Status::Error("batch_dims (" + std::to_string(batch_dims) +
                         ") must be less than rank(params) (" + std::to_string(params_rank) +
                         ").");
  }
  if (axis < batch_dims) {
    return Status::Error("batch_dims (" + std::to_string(batch_dims) +
                         ") must be less than or equal to axis (" + std::to_string(axis) + ").");
  }
  return GatherDims{axis, batch_dims};
}

// params[:axis] + indices[batch_dims:] + params[axis+1:].
std::vector<int64_t> GatherOutputDims(const std::vector<int64_t>& params,
                                      const std::vector<int64_t>& indices, GatherDims g) {
  std::vector<int64_t> dims(params.begin(), params.begin() + g.axis);
  dims.insert(dims.end(), indices.begin() + g.batch_dims, indices.end());
  dims.insert(dims.end(), params.begin() + g.axis + 1, params.end());
  return dims;
}

Status GatherShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(int64_t batch_dims, IntAttr(c, "batch_dims"));
  const PartialShape &params = c.input(0), &indices = c.input(1);
  const Tensor* axis_t = c.input_tensor(2);
  if (params.unknown_rank() || indices.unknown_rank() || axis_t == nullptr) {
    if (!params.unknown_rank() && !indices.unknown_rank() && batch_dims >= 0) {
      c.set_output(0, PartialShape::UnknownOfRank(params.rank() + indices.rank() - 1 -
                                                  batch_dims));
    } else {
      c.set_output(0, PartialShape::UnknownRank());
    }
    return OkStatus();
  }
  auto g = CheckGather(axis_t->GetAsInt64(0), batch_dims, params.rank(), indices.rank());
  if (!g.ok()) return c.Error(g.status().message());
  c.set_output(0, PartialShape(GatherOutputDims(params.dims(), indices.dims(), *g)));
  return OkStatus();
}

}  // namespace

// Shared with ResourceGather (state_ops.cc).
Status GatherInto(OpKernelContext& c, const Tensor& params, const Tensor& indices, int64_t axis,
                  int64_t batch_dims) {
  auto g = CheckGather(axis, batch_dims, params.rank(), indices.rank());
  if (!g.ok()) return c.Error(g.status().message());
  for (int64_t i = 0; i < g->batch_dims; ++i) {
    if (params.dim(i) != indices.dim(i)) {
      return c.Error("params.shape[" + std::to_string(i) + "]: " +
                     std::to_string(params.dim(i)) + " should be equal to indices.shape[" +
                     std::to_string(i) + "]: " + std::to_string(indices.dim(i)));
    }
  }
  // params as [batch, outer, limit, inner]; indices as [batch, per_batch].
  int64_t batch = 1, outer = 1, inner = 1;
  for (int64_t i = 0; i < g->batch_dims; ++i) batch *= params.dim(i);
  for (int64_t i = g->batch_dims; i < g->axis; ++i) outer *= params.dim(i);
  for (int64_t i = g->axis + 1; i < params.rank(); ++i) inner *= params.dim(i);
  const int64_t limit = params.dim(g->axis);
  const int64_t per_batch = batch == 0 ? 0 : indices.num_elements() / batch;
  ASSIGN_OR_RETURN(Tensor * out,
                   c.allocate_output(0, GatherOutputDims(params.dims(), indices.dims(), *g)));
  const std::vector<int64_t> idx = indices.AsInt64Vector();
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t k = 0; k < per_batch; ++k) {
        const int64_t at = b * per_batch + k;
        const int64_t j = idx[at];
        if (j < 0 || j >= limit) {
          std::vector<int64_t> pos(indices.rank());
          int64_t rest = at;
          for (int64_t d = indices.rank() - 1; d >= 0; --d) {
            pos[d] = rest % indices.dim(d);
            rest /= indices.dim(d);
          }
          std::string where;
          for (size_t d = 0; d < pos.size(); ++d) where += (d ? "," : "") + std::to_string(pos[d]);
          return c.Error("indices[" + where + "] = " + std::to_string(j) + " is not in [0, " +
                         std::to_string(limit) + ")");
        }
        CopyElements(params, ((b * outer + o) * limit + j) * inner, *out,
                     ((b * outer + o) * per_batch + k) * inner, inner);
      }
    }
  }
  return OkStatus();
}

namespace {

Status GatherKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(int64_t batch_dims, IntAttr(c, "batch_dims"));
  if (c.input(2).num_elements() != 1) {
    return c.Error("axis must be scalar, got shape " + DimsToString(c.input(2).dims()));
  }
  return GatherInto(c, c.input(0), c.input(1), c.input(2).GetAsInt64(0), batch_dims);
}

// ---- Split, SplitV --------------------------------------------------------------------------

Status SplitAlong(OpKernelContext& c, const Tensor& x, int64_t axis,
                  const std::vector<int64_t>& sizes) {
  std::vector<int64_t> start(x.rank(), 0);
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<int64_t> dims = x.dims();
    dims[axis] = sizes[i];
    ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(static_cast<int>(i), dims));
    CopyFromBox(x, start, *out);
    start[axis] += sizes[i];
  }
  return OkStatus();
}

StatusOr<int64_t> SplitAxis(const Tensor& dim, int64_t rank) {
  if (dim.num_elements() != 1) return Status::Error("split_dim must be a scalar");
  int64_t axis = dim.GetAsInt64(0);
  if (axis < -rank || axis >= rank) {
    return Status::Error("-input rank(-" + std::to_string(rank) + ") <= split_dim < input rank (" +
                         std::to_string(rank) + "), but got " + std::to_string(axis));
  }
  return axis < 0 ? axis + rank : axis;
}

Status SplitKernel(OpKernelContext& c) {
  const Tensor& x = c.input(1);
  auto axis = SplitAxis(c.input(0), x.rank());
  if (!axis.ok()) return c.Error(axis.status().message());
  const int64_t n = c.num_outputs();
  if (x.dim(*axis) % n != 0) {
    return c.Error("Number of ways to split should evenly divide the split dimension, but got "
                   "split_dim " + std::to_string(*axis) + " (size = " +
                   std::to_string(x.dim(*axis)) + ") and num_split " + std::to_string(n));
  }
  return SplitAlong(c, x, *axis, std::vector<int64_t>(n, x.dim(*axis) / n));
}

Status SplitVKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  auto axis = SplitAxis(c.input(2), x.rank());
  if (!axis.ok()) return c.Error(axis.status().message());
  std::vector<int64_t> sizes = c.input(1).AsInt64Vector();
  if (static_cast<int64_t>(sizes.size()) != c.num_outputs()) {
    return c.Error("Number of split sizes (" + std::to_string(sizes.size()) +
                   ") must equal num_split (" + std::to_string(c.num_outputs()) + ")");
  }
  int unknown = -1;
  int64_t known = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] == -1) {
      if (unknown != -1) return c.Error("Only one dimensions can have a value of-1. Second one "
                                        "found at dimension " + std::to_string(i));
      unknown = static_cast<int>(i);
    } else {
      known += sizes[i];
    }
  }
  const int64_t dim = x.dim(*axis);
  if (unknown == -1 ? known != dim : known > dim) {
    return c.Error("Determined shape must either match input shape along split_dim exactly if "
                   "fully specified, or be less than the size of the input along split_dim if "
                   "not fully specified.  Got: " + std::to_string(known));
  }
  if (unknown != -1) sizes[unknown] = dim - known;
  for (int64_t s : sizes) {
    if (s < 0) return c.Error("Split size must be non-negative, got " + std::to_string(s));
  }
  return SplitAlong(c, x, *axis, sizes);
}

Status SplitShapeImpl(InferenceContext& c, int value_input, int dim_input, int sizes_input) {
  const PartialShape& in = c.input(value_input);
  const Tensor* dim_t = c.input_tensor(dim_input);
  const int n = c.num_outputs();
  if (in.unknown_rank() || dim_t == nullptr) {
    const PartialShape out = in.unknown_rank() ? PartialShape::UnknownRank()
                                               : PartialShape::UnknownOfRank(in.rank());
    for (int i = 0; i < n; ++i) c.set_output(i, out);
    return OkStatus();
  }
  auto axis = SplitAxis(*dim_t, in.rank());
  if (!axis.ok()) return c.Error(axis.status().message());
  std::vector<int64_t> sizes(n, -1);
  const int64_t d = in.dim(*axis);
  if (sizes_input < 0) {
    if (d >= 0) {
      if (d % n != 0) return c.Error("Dimension size must be evenly divisible by " +
                                     std::to_string(n) + " but is " + std::to_string(d));
      sizes.assign(n, d / n);
    }
  } else if (const Tensor* s = c.input_tensor(sizes_input)) {
    sizes = s->AsInt64Vector();
    int64_t known = 0;
    int unknown = -1;
    for (int i = 0; i < static_cast<int>(sizes.size()); ++i) {
      if (sizes[i] == -1) unknown = i; else known += sizes[i];
    }
    if (unknown >= 0) sizes[unknown] = d >= 0 ? d - known : -1;
  }
  for (int i = 0; i < n; ++i) {
    std::vector<int64_t> dims = in.dims();
    dims[*axis] = i < static_cast<int>(sizes.size()) ? sizes[i] : -1;
    c.set_output(i, PartialShape(dims));
  }
  return OkStatus();
}

// ---- Pad, PadV2, ReverseV2 ------------------------------------------------------------------

StatusOr<std::vector<int64_t>> Paddings(const Tensor& p, int64_t rank) {
  if (p.rank() != 2 || p.dim(0) != rank || p.dim(1) != 2) {
    return Status::Error("paddings must be a matrix with 2 columns and " + std::to_string(rank) +
                         " rows: " + DimsToString(p.dims()));
  }
  return p.AsInt64Vector();
}

Status PadShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  const Tensor* p = c.input_tensor(1);
  int64_t rank = in.rank();
  if (rank < 0 && c.input(1).rank() == 2) rank = c.input(1).dim(0);
  if (rank < 0) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (p == nullptr || in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownOfRank(rank));
    return OkStatus();
  }
  auto pads = Paddings(*p, rank);
  if (!pads.ok()) return c.Error(pads.status().message());
  std::vector<int64_t> dims(rank);
  for (int64_t i = 0; i < rank; ++i) {
    dims[i] = in.dim(i) < 0 ? -1 : in.dim(i) + (*pads)[2 * i] + (*pads)[2 * i + 1];
  }
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status PadKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  auto pads = Paddings(c.input(1), x.rank());
  if (!pads.ok()) return c.Error(pads.status().message());
  std::vector<int64_t> dims(x.rank()), start(x.rank());
  for (int64_t i = 0; i < x.rank(); ++i) {
    const int64_t before = (*pads)[2 * i], after = (*pads)[2 * i + 1];
    if (before < 0 || after < 0) {
      return c.Error("Paddings must be non-negative: " + std::to_string(before) + " " +
                     std::to_string(after));
    }
    dims[i] = x.dim(i) + before + after;
    start[i] = before;
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  if (c.num_inputs() > 2) {
    if (c.input(2).num_elements() != 1) {
      return c.Error("constant_values must be a scalar. Found: " +
                     DimsToString(c.input(2).dims()));
    }
    FillWithScalar(*out, c.input(2).Reshaped({}));
  }
  CopyIntoBox(x, *out, start);
  return OkStatus();
}

Status ReverseKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 1) return c.Error("'dims' must be 1-dimension, not " +
                                             std::to_string(c.input(1).rank()));
  std::vector<int64_t> strides = RowMajorStrides(x.dims());
  std::vector<bool> reversed(x.rank(), false);
  int64_t offset = 0;
  for (int64_t a : c.input(1).AsInt64Vector()) {
    if (a < -x.rank() || a >= x.rank()) {
      return c.Error("'axis'[" + std::to_string(a) + "] = " + std::to_string(a) +
                     " is out of valid range [0, " + std::to_string(x.rank() - 1));
    }
    if (a < 0) a += x.rank();
    if (reversed[a]) return c.Error("axis " + std::to_string(a) + " specified more than once.");
    reversed[a] = true;
  }
  for (int64_t i = 0; i < x.rank(); ++i) {
    if (!reversed[i] || x.dim(i) == 0) continue;
    offset += (x.dim(i) - 1) * strides[i];
    strides[i] = -strides[i];
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, x.dims()));
  StridedCopy(x, offset, strides, *out, 0, RowMajorStrides(x.dims()), x.dims());
  return OkStatus();
}

}  // namespace

void RegisterArrayCopyOps(OpRegistry& r) {
  REGISTER_OP(r, "Transpose")
      .Input("x: T")
      .Input("perm: Tperm")
      .Output("y: T")
      .Attr("T: type")
      .Attr("Tperm: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("perm")
      .SetShapeFn(TransposeShape)
      .SetKernel(TransposeKernel);
  REGISTER_OP(r, "ConcatV2")
      .Input("values: N * T")
      .Input("axis: Tidx")
      .Output("output: T")
      .Attr("N: int >= 2")
      .Attr("T: type")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("axis")
      .SetShapeFn(ConcatShape)
      .SetKernel(ConcatKernel);
  REGISTER_OP(r, "Pack")
      .Input("values: N * T")
      .Output("output: T")
      .Attr("N: int >= 1")
      .Attr("T: type")
      .Attr("axis: int = 0")
      .SetShapeFn(PackShape)
      .SetKernel(PackKernel);
  REGISTER_OP(r, "Unpack")
      .Input("value: T")
      .Output("output: num * T")
      .Attr("num: int >= 0")
      .Attr("T: type")
      .Attr("axis: int = 0")
      .SetShapeFn(UnpackShape)
      .SetKernel(UnpackKernel);
  REGISTER_OP(r, "Tile")
      .Input("input: T")
      .Input("multiples: Tmultiples")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tmultiples: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("multiples")
      .SetShapeFn(TileShape)
      .SetKernel(TileKernel);
  REGISTER_OP(r, "BroadcastTo")
      .Input("input: T")
      .Input("shape: Tidx")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("shape")
      .SetShapeFn(BroadcastToShape)
      .SetKernel(BroadcastToKernel);
  REGISTER_OP(r, "StridedSlice")
      .Input("input: T")
      .Input("begin: Index")
      .Input("end: Index")
      .Input("strides: Index")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Index: {int16, int32, int64}")
      .Attr("begin_mask: int = 0")
      .Attr("end_mask: int = 0")
      .Attr("ellipsis_mask: int = 0")
      .Attr("new_axis_mask: int = 0")
      .Attr("shrink_axis_mask: int = 0")
      .CompileTimeConstInput("begin")
      .CompileTimeConstInput("end")
      .CompileTimeConstInput("strides")
      .SetShapeFn(StridedSliceShape)
      .SetKernel(StridedSliceKernel);
  REGISTER_OP(r, "StridedSliceGrad")
      .Input("shape: Index")
      .Input("begin: Index")
      .Input("end: Index")
      .Input("strides: Index")
      .Input("dy: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Index: {int32, int64}")
      .Attr("begin_mask: int = 0")
      .Attr("end_mask: int = 0")
      .Attr("ellipsis_mask: int = 0")
      .Attr("new_axis_mask: int = 0")
      .Attr("shrink_axis_mask: int = 0")
      .CompileTimeConstInput("shape")
      .CompileTimeConstInput("begin")
      .CompileTimeConstInput("end")
      .CompileTimeConstInput("strides")
      .SetShapeFn(StridedSliceGradShape)
      .SetKernel(StridedSliceGradKernel);
  REGISTER_OP(r, "Slice")
      .Input("input: T")
      .Input("begin: Index")
      .Input("size: Index")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Index: {int32, int64}")
      .CompileTimeConstInput("begin")
      .CompileTimeConstInput("size")
      .SetShapeFn(SliceShape)
      .SetKernel(SliceKernel);
  REGISTER_OP(r, "GatherV2")
      .Input("params: Tparams")
      .Input("indices: Tindices")
      .Input("axis: Taxis")
      .Output("output: Tparams")
      .Attr("batch_dims: int = 0")
      .Attr("Tparams: type")
      .Attr("Tindices: {int16, int32, int64}")
      .Attr("Taxis: {int32, int64}")
      .CompileTimeConstInput("axis")
      .SetShapeFn(GatherShape)
      .SetKernel(GatherKernel);
  REGISTER_OP(r, "Split")
      .Input("split_dim: int32")
      .Input("value: T")
      .Output("output: num_split * T")
      .Attr("num_split: int >= 1")
      .Attr("T: type")
      .CompileTimeConstInput("split_dim")
      .SetShapeFn([](InferenceContext& c) { return SplitShapeImpl(c, 1, 0, -1); })
      .SetKernel(SplitKernel);
  REGISTER_OP(r, "SplitV")
      .Input("value: T")
      .Input("size_splits: Tlen")
      .Input("split_dim: int32")
      .Output("output: num_split * T")
      .Attr("num_split: int >= 1")
      .Attr("T: type")
      .Attr("Tlen: {int8, int32, int64} = DT_INT64")
      .CompileTimeConstInput("size_splits")
      .CompileTimeConstInput("split_dim")
      .SetShapeFn([](InferenceContext& c) { return SplitShapeImpl(c, 0, 2, 1); })
      .SetKernel(SplitVKernel);
  REGISTER_OP(r, "Pad")
      .Input("input: T")
      .Input("paddings: Tpaddings")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tpaddings: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("paddings")
      .SetShapeFn(PadShape)
      .SetKernel(PadKernel);
  REGISTER_OP(r, "PadV2")
      .Input("input: T")
      .Input("paddings: Tpaddings")
      .Input("constant_values: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tpaddings: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("paddings")
      .SetShapeFn(PadShape)
      .SetKernel(PadKernel);
  REGISTER_OP(r, "ReverseV2")
      .Input("tensor: T")
      .Input("axis: Tidx")
      .Output("output: T")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .Attr("T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, "
            "half, float, double, complex64, complex128, string}")
      .CompileTimeConstInput("axis")
      .SetShapeFn(shape_fn::UnchangedShape)
      .SetKernel(ReverseKernel);
}

}  // namespace xlens::graph
