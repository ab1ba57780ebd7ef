// Array ops (TensorFlow's array_ops.cc): constants, placeholders, identities, shape queries,
// reshapes, and the array ops that compute their elements (Fill, Range, Where, Unique, OneHot,
// Cumsum, ...). Ops that move elements are in array_copy_ops.cc.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_map>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/array_ops.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/ops/strided_copy.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

using shape_fn::UnchangedShape;

Status ForwardInput(OpKernelContext& c) {
  c.set_output(0, c.input(0));
  return OkStatus();
}

Status ForwardAllInputs(OpKernelContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) c.set_output(i, c.input(i));
  return OkStatus();
}

Status AllInputsUnchanged(InferenceContext& c) {
  for (int i = 0; i < c.num_inputs(); ++i) c.set_output(i, c.input(i));
  return OkStatus();
}

// ---- Const, Placeholder ---------------------------------------------------------------------

Status ConstShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(Tensor value, GetTensorAttr(c.attrs(), "value", c.node_name()));
  c.set_output(0, value.shape());
  return OkStatus();
}

Status ConstKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(Tensor value, GetTensorAttr(c.attrs(), "value", c.name()));
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  if (value.dtype() != dtype) {
    return c.Error("Type mismatch between value (" + DataTypeName(value.dtype()) +
                   ") and dtype (" + DataTypeName(dtype) + ")");
  }
  c.set_output(0, std::move(value));
  return OkStatus();
}

Status PlaceholderShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.node_name()));
  c.set_output(0, shape);
  return OkStatus();
}

// Runs only when nothing was fed: the executor replaces fed placeholders.
Status PlaceholderKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(DataType dtype, GetTypeAttr(c.attrs(), "dtype", c.name()));
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.name()));
  std::string message = "You must feed a value for placeholder tensor '" + c.name() +
                        "' with dtype " + DataTypeName(dtype);
  if (!shape.unknown_rank()) message += " and shape " + shape.ToString();
  return c.Error(message);
}

Status PlaceholderWithDefaultShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, GetShapeAttr(c.attrs(), "shape", c.node_name()));
  if (!shape.IsCompatibleWith(c.input(0))) {
    return c.Error("Incompatible shapes: input " + c.input(0).ToString() + " vs. attr shape " +
                   shape.ToString());
  }
  c.set_output(0, shape.Merge(c.input(0)));
  return OkStatus();
}

// ---- Shape, ShapeN, Size, Rank --------------------------------------------------------------

Status ShapeShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) {
    c.set_output(i, c.input(i).unknown_rank() ? PartialShape::UnknownOfRank(1)
                                              : PartialShape({c.input(i).rank()}));
  }
  return OkStatus();
}

Status ShapeKernel(OpKernelContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) {
    const Tensor& in = c.input(i);
    DataType out = c.node().output_type(i);
    if (out == DT_INT32) {
      for (int64_t d : in.dims()) {
        if (d > INT32_MAX) return c.Error("Shape output type is 32-bit but dim " +
                                          std::to_string(d) + " is too large");
      }
    }
    c.set_output(i, IntTensor(out, in.dims(), {in.rank()}));
  }
  return OkStatus();
}

Status SizeKernel(OpKernelContext& c) {
  const int64_t n = c.input(0).num_elements();
  DataType out = c.node().output_type(0);
  if (out == DT_INT32 && n > INT32_MAX) {
    return c.Error("Number of elements was larger than representable by 32-bit output type");
  }
  c.set_output(0, IntTensor(out, {n}, {}));
  return OkStatus();
}

Status RankKernel(OpKernelContext& c) {
  c.set_output(0, IntTensor(DT_INT32, {c.input(0).rank()}, {}));
  return OkStatus();
}

// ---- ZerosLike, OnesLike, Fill --------------------------------------------------------------

Status ZerosLikeKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, c.input(0).dims()));
  (void)out;  // allocated zero-filled (strings empty)
  return OkStatus();
}

Status OnesLikeKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, c.input(0).dims()));
  FillWithScalar(*out, NumericScalar(c.input(0).dtype(), 1.0));
  return OkStatus();
}

Status FillShape(InferenceContext& c) {
  if (c.input(1).rank() > 0) return c.Error("value must be a scalar, got " +
                                            c.input(1).ToString());
  ASSIGN_OR_RETURN(PartialShape shape, c.MakeShapeFromShapeTensor(0));
  c.set_output(0, shape);
  return OkStatus();
}

Status FillKernel(OpKernelContext& c) {
  const Tensor& dims = c.input(0);
  const Tensor& value = c.input(1);
  if (dims.rank() != 1) return c.Error("dims must be a vector, got shape " +
                                       DimsToString(dims.dims()));
  if (value.rank() != 0) return c.Error("value must be a scalar, got shape " +
                                        DimsToString(value.dims()));
  std::vector<int64_t> shape = dims.AsInt64Vector();
  for (int64_t d : shape) {
    if (d < 0) return c.Error("dims must be non-negative, got " + DimsToString(shape));
  }
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, shape));
  FillWithScalar(*out, value);
  return OkStatus();
}

// ---- Reshape, ExpandDims, Squeeze (no copies: the output shares the input's elements) -------

// The dims `requested` (with at most one -1) denotes for a tensor of `num_elements`.
StatusOr<std::vector<int64_t>> ResolveReshape(int64_t num_elements,
                                              std::vector<int64_t> requested) {
  int64_t product = 1;
  int unknown = -1;
  for (size_t i = 0; i < requested.size(); ++i) {
    if (requested[i] == -1) {
      if (unknown != -1) {
        return Status::Error("Only one input size may be -1, not both " +
                             std::to_string(unknown) + " and " + std::to_string(i));
      }
      unknown = static_cast<int>(i);
    } else if (requested[i] < 0) {
      return Status::Error("Size " + std::to_string(i) +
                           " must be non-negative, not " + std::to_string(requested[i]));
    } else {
      product *= requested[i];
    }
  }
  if (unknown != -1) {
    if (product == 0) {
      if (num_elements != 0) {
        return Status::Error("Reshape cannot infer the missing input size for an empty tensor "
                             "unless all specified input sizes are non-zero");
      }
      requested[unknown] = 0;
      return requested;
    }
    if (num_elements % product != 0) {
      return Status::Error("Input to reshape is a tensor with " + std::to_string(num_elements) +
                           " values, but the requested shape requires a multiple of " +
                           std::to_string(product));
    }
    requested[unknown] = num_elements / product;
    return requested;
  }
  if (product != num_elements) {
    return Status::Error("Input to reshape is a tensor with " + std::to_string(num_elements) +
                         " values, but the requested shape has " + std::to_string(product));
  }
  return requested;
}

Status ReshapeShape(InferenceContext& c) {
  const Tensor* shape = c.input_tensor(1);
  if (shape == nullptr) {
    ASSIGN_OR_RETURN(PartialShape out, c.MakeShapeFromShapeTensor(1));
    // One unknown entry is determined when everything else is known.
    const PartialShape& in = c.input(0);
    if (!out.unknown_rank() && in.IsFullyDefined()) {
      int unknown = 0, at = -1;
      int64_t product = 1;
      for (int64_t i = 0; i < out.rank(); ++i) {
        if (out.dim(i) < 0) {
          ++unknown;
          at = static_cast<int>(i);
        } else {
          product *= out.dim(i);
        }
      }
      if (unknown == 1 && product > 0 && in.num_elements() % product == 0) {
        out.set_dim(at, in.num_elements() / product);
      }
    }
    c.set_output(0, out);
    return OkStatus();
  }
  if (shape->rank() > 1) return c.Error("shape must be a vector, got " +
                                        DimsToString(shape->dims()));
  std::vector<int64_t> requested = shape->AsInt64Vector();
  const PartialShape& in = c.input(0);
  if (in.IsFullyDefined()) {
    auto dims = ResolveReshape(in.num_elements(), requested);
    if (!dims.ok()) return c.Error(dims.status().message());
    c.set_output(0, PartialShape(*dims));
    return OkStatus();
  }
  for (int64_t& d : requested) {
    if (d < -1) return c.Error("Size must be non-negative, not " + std::to_string(d));
  }
  c.set_output(0, PartialShape(requested));
  return OkStatus();
}

Status ReshapeKernel(OpKernelContext& c) {
  const Tensor& shape = c.input(1);
  if (shape.rank() > 1) {
    return c.Error("sizes input must be 1-D, not " + DimsToString(shape.dims()));
  }
  auto dims = ResolveReshape(c.input(0).num_elements(), shape.AsInt64Vector());
  if (!dims.ok()) return c.Error(dims.status().message());
  c.set_output(0, c.input(0).Reshaped(*dims));
  return OkStatus();
}

StatusOr<std::vector<int64_t>> ExpandedDims(std::vector<int64_t> dims, int64_t dim) {
  const int64_t rank = static_cast<int64_t>(dims.size());
  if (dim < -1 - rank || dim > rank) {
    return Status::Error("Tried to expand dim index " + std::to_string(dim) + " for tensor with " +
                         std::to_string(rank) + " dimensions.");
  }
  if (dim < 0) dim += rank + 1;
  dims.insert(dims.begin() + dim, 1);
  return dims;
}

Status ExpandDimsShape(InferenceContext& c) {
  const Tensor* dim = c.input_tensor(1);
  const PartialShape& in = c.input(0);
  if (in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  if (dim == nullptr) {
    c.set_output(0, PartialShape::UnknownOfRank(in.rank() + 1));
    return OkStatus();
  }
  if (dim->num_elements() != 1) {
    return c.Error("'dim' input must be a tensor with a single value");
  }
  auto dims = ExpandedDims(in.dims(), dim->GetAsInt64(0));
  if (!dims.ok()) return c.Error(dims.status().message());
  c.set_output(0, PartialShape(*dims));
  return OkStatus();
}

Status ExpandDimsKernel(OpKernelContext& c) {
  if (c.input(1).num_elements() != 1) {
    return c.Error("'dim' must be a tensor with a single value");
  }
  auto dims = ExpandedDims(c.input(0).dims(), c.input(1).GetAsInt64(0));
  if (!dims.ok()) return c.Error(dims.status().message());
  c.set_output(0, c.input(0).Reshaped(*dims));
  return OkStatus();
}

// Squeezes `in` (dims may be unknown, -1); `squeeze` empty means every dimension of size 1.
StatusOr<PartialShape> SqueezedShape(const PartialShape& in, const std::vector<int64_t>& squeeze) {
  if (in.unknown_rank()) return PartialShape::UnknownRank();
  const int64_t rank = in.rank();
  std::vector<bool> wanted(rank, false);
  for (int64_t d : squeeze) {
    if (d < -rank || d >= rank) {
      return Status::Error("Tried to squeeze dim index " + std::to_string(d) +
                           " for tensor with " + std::to_string(rank) + " dimensions.");
    }
    wanted[d < 0 ? d + rank : d] = true;
  }
  std::vector<int64_t> out;
  for (int64_t i = 0; i < rank; ++i) {
    const int64_t d = in.dim(i);
    if (squeeze.empty()) {
      if (d == PartialShape::kUnknownDim) return PartialShape::UnknownRank();
      if (d != 1) out.push_back(d);
    } else if (wanted[i]) {
      if (d != 1 && d != PartialShape::kUnknownDim) {
        return Status::Error("Can not squeeze dim[" + std::to_string(i) +
                             "], expected a dimension of 1, got " + std::to_string(d));
      }
    } else {
      out.push_back(d);
    }
  }
  return PartialShape(std::move(out));
}

Status SqueezeShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(std::vector<int64_t> squeeze,
                   GetIntListAttr(c.attrs(), "squeeze_dims", c.node_name()));
  auto out = SqueezedShape(c.input(0), squeeze);
  if (!out.ok()) return c.Error(out.status().message());
  c.set_output(0, *out);
  return OkStatus();
}

Status SqueezeKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::vector<int64_t> squeeze,
                   GetIntListAttr(c.attrs(), "squeeze_dims", c.name()));
  auto out = SqueezedShape(c.input(0).shape(), squeeze);
  if (!out.ok()) return c.Error(out.status().message());
  c.set_output(0, c.input(0).Reshaped(out->dims()));
  return OkStatus();
}

// ---- Range ----------------------------------------------------------------------------------

// TensorFlow's element count of a range; the values are start + i * delta.
StatusOr<int64_t> RangeSize(DataType type, double start, double limit, double delta) {
  if (delta == 0) return Status::Error("Requires delta != 0: 0");
  // TensorFlow prints the bounds as the op's type does.
  auto num = [type](double v) {
    if (DataTypeIsInteger(type)) return std::to_string(static_cast<int64_t>(v));
    char buf[32];
    std::snprintf(buf, sizeof(buf), "%g", v);
    return std::string(buf);
  };
  if (delta > 0 && start > limit) {
    return Status::Error("Requires start <= limit when delta > 0: " + num(start) + "/" +
                         num(limit));
  }
  if (delta < 0 && start < limit) {
    return Status::Error("Requires start >= limit when delta < 0: " + num(start) + "/" +
                         num(limit));
  }
  if (DataTypeIsInteger(type)) {
    const int64_t s = static_cast<int64_t>(start), l = static_cast<int64_t>(limit),
                  d = static_cast<int64_t>(delta);
    return (std::abs(l - s) + std::abs(d) - 1) / std::abs(d);
  }
  return static_cast<int64_t>(std::ceil(std::abs((limit - start) / delta)));
}

Status RangeShape(InferenceContext& c) {
  for (int i = 0; i < 3; ++i) {
    if (c.input(i).rank() > 0) return c.Error("Range inputs must be scalars, input " +
                                              std::to_string(i) + " has shape " +
                                              c.input(i).ToString());
  }
  const Tensor *s = c.input_tensor(0), *l = c.input_tensor(1), *d = c.input_tensor(2);
  if (s == nullptr || l == nullptr || d == nullptr) {
    c.set_output(0, PartialShape::UnknownOfRank(1));
    return OkStatus();
  }
  auto n = RangeSize(c.output_type(0), s->GetAsDouble(0), l->GetAsDouble(0), d->GetAsDouble(0));
  if (!n.ok()) return c.Error(n.status().message());
  c.set_output(0, PartialShape({*n}));
  return OkStatus();
}

template <typename T>
void FillRange(Tensor& out, T start, T delta) {
  auto flat = out.flat<T>();
  for (size_t i = 0; i < flat.size(); ++i) flat[i] = start + static_cast<T>(i) * delta;
}

Status RangeKernel(OpKernelContext& c) {
  for (int i = 0; i < 3; ++i) {
    if (c.input(i).num_elements() != 1) {
      return c.Error(std::string(i == 0 ? "start" : i == 1 ? "limit" : "delta") +
                     " must be a scalar, not shape " + DimsToString(c.input(i).dims()));
    }
  }
  const DataType type = c.input(0).dtype();
  auto n = RangeSize(type, c.input(0).GetAsDouble(0), c.input(1).GetAsDouble(0),
                     c.input(2).GetAsDouble(0));
  if (!n.ok()) return c.Error(n.status().message());
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, {*n}));
  switch (type) {
    case DT_FLOAT:
      FillRange<float>(*out, c.input(0).flat<float>()[0], c.input(2).flat<float>()[0]);
      break;
    case DT_DOUBLE:
      FillRange<double>(*out, c.input(0).flat<double>()[0], c.input(2).flat<double>()[0]);
      break;
    case DT_INT32:
      FillRange<int32_t>(*out, c.input(0).flat<int32_t>()[0], c.input(2).flat<int32_t>()[0]);
      break;
    case DT_INT64:
      FillRange<int64_t>(*out, c.input(0).flat<int64_t>()[0], c.input(2).flat<int64_t>()[0]);
      break;
    default:
      for (int64_t i = 0; i < *n; ++i) {
        if (DataTypeIsInteger(type)) {
          out->SetFromInt64(i, c.input(0).GetAsInt64(0) + i * c.input(2).GetAsInt64(0));
        } else {
          out->SetFromDouble(i, c.input(0).GetAsDouble(0) + i * c.input(2).GetAsDouble(0));
        }
      }
  }
  return OkStatus();
}

// ---- Where, Unique --------------------------------------------------------------------------

Status WhereShape(InferenceContext& c) {
  const PartialShape& in = c.input(0);
  c.set_output(0, PartialShape({PartialShape::kUnknownDim, in.rank()}));
  return OkStatus();
}

Status WhereKernel(OpKernelContext& c) {
  const Tensor& in = c.input(0);
  const int64_t rank = in.rank();
  std::vector<int64_t> coords;
  const std::vector<int64_t> strides = RowMajorStrides(in.dims());
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    if (!ElementIsTrue(in, i)) continue;
    int64_t rest = i;
    for (int64_t d = 0; d < rank; ++d) {
      coords.push_back(rest / strides[d]);
      rest %= strides[d];
    }
  }
  const int64_t found = rank == 0 ? (in.num_elements() && ElementIsTrue(in, 0) ? 1 : 0)
                                  : static_cast<int64_t>(coords.size()) / rank;
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, {found, rank}));
  std::copy(coords.begin(), coords.end(), out->flat<int64_t>().begin());
  return OkStatus();
}

Status UniqueShape(InferenceContext& c) {
  PartialShape in;
  RETURN_IF_ERROR(c.WithRank(0, 1, &in));
  c.set_output(0, PartialShape::UnknownOfRank(1));
  c.set_output(1, in);
  if (c.num_outputs() > 2) c.set_output(2, PartialShape::UnknownOfRank(1));
  return OkStatus();
}

// Unique in order of first occurrence. Elements compare by value as TensorFlow's hash map does
// (so 0.0 == -0.0, and every NaN is its own element).
template <typename Key, typename GetKey>
std::vector<int64_t> UniqueIds(int64_t n, GetKey key, std::vector<int64_t>* first) {
  std::unordered_map<Key, int64_t> ids;
  std::vector<int64_t> idx(n);
  for (int64_t i = 0; i < n; ++i) {
    auto [it, inserted] = ids.emplace(key(i), static_cast<int64_t>(first->size()));
    if (inserted) first->push_back(i);
    idx[i] = it->second;
  }
  return idx;
}

Status UniqueKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 1) return c.Error("unique expects a 1D vector.");
  const int64_t n = x.num_elements();
  std::vector<int64_t> first, idx;
  if (x.dtype() == DT_STRING) {
    idx = UniqueIds<std::string>(n, [&](int64_t i) { return x.strings()[i]; }, &first);
  } else if (DataTypeIsFloating(x.dtype())) {
    idx = UniqueIds<double>(n, [&](int64_t i) { return x.GetAsDouble(i); }, &first);
  } else if (DataTypeIsComplex(x.dtype())) {
    auto key = [&](int64_t i) {
      complex128 v = x.literal().GetAsComplex(i);
      return std::to_string(v.real()) + "," + std::to_string(v.imag());
    };
    idx = UniqueIds<std::string>(n, key, &first);
  } else if (x.dtype() == DT_BOOL || DataTypeIsInteger(x.dtype())) {
    idx = UniqueIds<int64_t>(n, [&](int64_t i) { return x.GetAsInt64(i); }, &first);
  } else {
    return c.Error("Unique does not support " + DataTypeName(x.dtype()));
  }
  const int64_t unique = static_cast<int64_t>(first.size());
  ASSIGN_OR_RETURN(Tensor * y, c.allocate_output(0, {unique}));
  for (int64_t j = 0; j < unique; ++j) CopyElements(x, first[j], *y, j, 1);
  c.set_output(1, IntTensor(c.node().output_type(1), idx, {n}));
  if (c.num_outputs() > 2) {
    std::vector<int64_t> count(unique, 0);
    for (int64_t id : idx) ++count[id];
    c.set_output(2, IntTensor(c.node().output_type(2), count, {unique}));
  }
  return OkStatus();
}

// ---- OneHot ---------------------------------------------------------------------------------

StatusOr<int64_t> OneHotAxis(int64_t axis, int64_t indices_rank) {
  if (axis < -1 || axis > indices_rank) {
    return Status::Error("Expected axis to be -1 or between [0, " +
                         std::to_string(indices_rank + 1) + ").  But received: " +
                         std::to_string(axis));
  }
  return axis == -1 ? indices_rank : axis;
}

Status OneHotShape(InferenceContext& c) {
  ASSIGN_OR_RETURN(int64_t axis, IntAttr(c, "axis"));
  const PartialShape& in = c.input(0);
  if (in.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  auto a = OneHotAxis(axis, in.rank());
  if (!a.ok()) return c.Error(a.status().message());
  int64_t depth = PartialShape::kUnknownDim;
  if (const Tensor* d = c.input_tensor(1)) {
    depth = d->GetAsInt64(0);
    if (depth < 0) return c.Error("depth must be non-negative, got: " + std::to_string(depth));
  }
  std::vector<int64_t> dims = in.dims();
  dims.insert(dims.begin() + *a, depth);
  c.set_output(0, PartialShape(dims));
  return OkStatus();
}

Status OneHotKernel(OpKernelContext& c) {
  const Tensor& indices = c.input(0);
  ASSIGN_OR_RETURN(int64_t axis_attr, IntAttr(c, "axis"));
  auto axis = OneHotAxis(axis_attr, indices.rank());
  if (!axis.ok()) return c.Error(axis.status().message());
  if (c.input(1).rank() != 0) return c.Error("depth must be a scalar, but got: " +
                                             DimsToString(c.input(1).dims()));
  if (c.input(2).rank() != 0) return c.Error("on_value must be a scalar, but got: " +
                                             DimsToString(c.input(2).dims()));
  if (c.input(3).rank() != 0) return c.Error("off_value must be a scalar, but got: " +
                                             DimsToString(c.input(3).dims()));
  const int64_t depth = c.input(1).GetAsInt64(0);
  if (depth < 0) return c.Error("indices must be non-negative, got: " + std::to_string(depth));
  std::vector<int64_t> dims = indices.dims();
  dims.insert(dims.begin() + *axis, depth);
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  FillWithScalar(*out, c.input(3));
  // indices viewed as [prefix, suffix] around the axis; output [prefix, depth, suffix].
  int64_t prefix = 1, suffix = 1;
  for (int64_t i = 0; i < *axis; ++i) prefix *= indices.dim(i);
  for (int64_t i = *axis; i < indices.rank(); ++i) suffix *= indices.dim(i);
  for (int64_t p = 0; p < prefix; ++p) {
    for (int64_t s = 0; s < suffix; ++s) {
      const int64_t k = indices.GetAsInt64(p * suffix + s);
      if (k >= 0 && k < depth) CopyElements(c.input(2), 0, *out, (p * depth + k) * suffix + s, 1);
    }
  }
  return OkStatus();
}

// ---- Cumsum ---------------------------------------------------------------------------------

template <typename T>
void CumsumTyped(const Tensor& x, Tensor& out, int64_t outer, int64_t n, int64_t inner,
                 bool exclusive, bool reverse) {
  auto in = x.flat<T>();
  auto o = out.flat<T>();
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      T sum = T(0);
      for (int64_t k = 0; k < n; ++k) {
        const int64_t j = reverse ? n - 1 - k : k;
        const int64_t pos = (a * n + j) * inner + b;
        if (exclusive) {
          o[pos] = sum;
          sum += in[pos];
        } else {
          sum += in[pos];
          o[pos] = sum;
        }
      }
    }
  }
}

Status CumsumShape(InferenceContext& c) {
  if (c.input(1).rank() > 0) return c.Error("axis must be a scalar, got " +
                                            c.input(1).ToString());
  c.set_output(0, c.input(0));
  return OkStatus();
}

Status CumsumKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (c.input(1).rank() != 0) return c.Error("ScanOp: axis must be a scalar, not " +
                                             DimsToString(c.input(1).dims()));
  ASSIGN_OR_RETURN(bool exclusive, GetBoolAttr(c.attrs(), "exclusive", c.name()));
  ASSIGN_OR_RETURN(bool reverse, GetBoolAttr(c.attrs(), "reverse", c.name()));
  int64_t axis = c.input(1).GetAsInt64(0);
  if (axis < -x.rank() || axis >= x.rank()) {
    return c.Error("ScanOp: Expected scan axis in the range [" + std::to_string(-x.rank()) +
                   ", " + std::to_string(x.rank()) + "), but got " + std::to_string(axis));
  }
  if (axis < 0) axis += x.rank();
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= x.dim(i);
  for (int64_t i = axis + 1; i < x.rank(); ++i) inner *= x.dim(i);
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, x.dims()));
  const int64_t n = x.dim(axis);
  switch (x.dtype()) {
    case DT_FLOAT: CumsumTyped<float>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_DOUBLE: CumsumTyped<double>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_INT32: CumsumTyped<int32_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_INT64: CumsumTyped<int64_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_INT8: CumsumTyped<int8_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_UINT8: CumsumTyped<uint8_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_INT16: CumsumTyped<int16_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_UINT16: CumsumTyped<uint16_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_UINT32: CumsumTyped<uint32_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    case DT_UINT64: CumsumTyped<uint64_t>(x, *out, outer, n, inner, exclusive, reverse); break;
    default:
      return c.Error("Cumsum is not implemented for " + DataTypeName(x.dtype()) +
                     " on the CPU executor");
  }
  return OkStatus();
}

// ---- InvertPermutation, CheckNumerics -------------------------------------------------------

Status InvertPermutationKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  if (x.rank() != 1) return c.Error("invert_permutation expects a 1D vector.");
  const int64_t n = x.num_elements();
  std::vector<int64_t> y(n, -1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t d = x.GetAsInt64(i);
    if (d < 0 || d >= n) {
      return c.Error(std::to_string(d) + " is not between 0 and " + std::to_string(n));
    }
    if (y[d] != -1) return c.Error(std::to_string(d) + " is duplicated in the input.");
    y[d] = i;
  }
  c.set_output(0, IntTensor(x.dtype(), y, {n}));
  return OkStatus();
}

Status CheckNumericsKernel(OpKernelContext& c) {
  const Tensor& x = c.input(0);
  ASSIGN_OR_RETURN(std::string message, GetStringAttr(c.attrs(), "message", c.name()));
  bool nan = false, inf = false;
  for (int64_t i = 0; i < x.num_elements(); ++i) {
    const double v = x.GetAsDouble(i);
    nan |= std::isnan(v);
    inf |= std::isinf(v);
  }
  if (nan || inf) {
    const char* what = inf && nan ? "Inf and NaN" : (inf ? "Inf" : "NaN");
    return c.Error(message + " : Tensor had " + what + " values");
  }
  c.set_output(0, x);
  return OkStatus();
}

// ---- BroadcastArgs, BroadcastGradientArgs ---------------------------------------------------

Status BroadcastArgsShape(InferenceContext& c) {
  PartialShape s0, s1;
  RETURN_IF_ERROR(c.WithRank(0, 1, &s0));
  RETURN_IF_ERROR(c.WithRank(1, 1, &s1));
  int64_t n = PartialShape::kUnknownDim;
  if (s0.dim(0) >= 0 && s1.dim(0) >= 0) n = std::max(s0.dim(0), s1.dim(0));
  if (c.num_outputs() == 1) {
    c.set_output(0, PartialShape({n}));  // BroadcastArgs: the broadcast shape
  } else {
    // BroadcastGradientArgs: the reduction indices, of data-dependent length.
    c.set_output(0, PartialShape::UnknownOfRank(1));
    c.set_output(1, PartialShape::UnknownOfRank(1));
  }
  return OkStatus();
}

Status IncompatibleShapes(OpKernelContext& c, const std::vector<int64_t>& x,
                          const std::vector<int64_t>& y) {
  return c.Error("Incompatible shapes: " + DimsToString(x) + " vs. " + DimsToString(y));
}

Status BroadcastArgsKernel(OpKernelContext& c) {
  const std::vector<int64_t> x = c.input(0).AsInt64Vector(), y = c.input(1).AsInt64Vector();
  auto out = shape_fn::BroadcastShapes(PartialShape(x), PartialShape(y));
  if (!out.ok()) return IncompatibleShapes(c, x, y);
  c.set_output(0, IntTensor(c.input(0).dtype(), out->dims(), {out->rank()}));
  return OkStatus();
}

// TensorFlow's BCast reduction indices: the output dimensions each input was broadcast along.
Status BroadcastGradientArgsKernel(OpKernelContext& c) {
  if (c.input(0).rank() != 1 || c.input(1).rank() != 1) {
    return c.Error("In[0] and In[1] must be vectors.");
  }
  const std::vector<int64_t> x = c.input(0).AsInt64Vector(), y = c.input(1).AsInt64Vector();
  const size_t n = std::max(x.size(), y.size());
  std::vector<int64_t> rx, ry;
  // Identical shapes reduce nothing (BCast's fast path), even along dimensions of size 1.
  for (size_t i = 0; i < n && x != y; ++i) {
    const int64_t xi = i < n - x.size() ? 1 : x[i - (n - x.size())];
    const int64_t yi = i < n - y.size() ? 1 : y[i - (n - y.size())];
    const int64_t index = static_cast<int64_t>(i);
    if (xi == yi) {
      if (xi == 1) {
        rx.push_back(index);
        ry.push_back(index);
      }
    } else if (xi == 1) {
      rx.push_back(index);
    } else if (yi == 1) {
      ry.push_back(index);
    } else {
      return IncompatibleShapes(c, x, y);
    }
  }
  const DataType t = c.input(0).dtype();
  c.set_output(0, IntTensor(t, rx, {static_cast<int64_t>(rx.size())}));
  c.set_output(1, IntTensor(t, ry, {static_cast<int64_t>(ry.size())}));
  return OkStatus();
}

}  // namespace

namespace {

// An _Arg knows its shape from the `_output_shapes` attr TensorFlow puts on function
// arguments (and its variable's shape and type from `_handle_shapes`/`_handle_dtypes`).
Status ArgShape(InferenceContext& c) {
  c.set_output(0, PartialShape::UnknownRank());
  const AttrValue* shapes = FindAttr(c.attrs(), "_output_shapes");
  if (shapes && shapes->kind() == AttrValue::Kind::kList && shapes->list().shape.size() == 1) {
    c.set_output(0, shapes->list().shape[0]);
  }
  const AttrValue* handle_shapes = FindAttr(c.attrs(), "_handle_shapes");
  const AttrValue* handle_dtypes = FindAttr(c.attrs(), "_handle_dtypes");
  if (handle_shapes && handle_dtypes && handle_shapes->kind() == AttrValue::Kind::kList &&
      handle_dtypes->kind() == AttrValue::Kind::kList && handle_shapes->list().shape.size() == 1 &&
      handle_dtypes->list().type.size() == 1) {
    c.set_output_handle_shape(0, handle_shapes->list().shape[0], handle_dtypes->list().type[0]);
  }
  return OkStatus();
}

}  // namespace

void RegisterArrayOps(OpRegistry& r) {
  REGISTER_OP(r, "Const")
      .Output("output: dtype")
      .Attr("value: tensor")
      .Attr("dtype: type")
      .SetShapeFn(ConstShape)
      .SetKernel(ConstKernel);
  REGISTER_OP(r, "_EagerConst")
      .Input("input: T")
      .Output("output: T")
      .Attr("T: type")
      .SetShapeFn(UnchangedShape)
      .SetKernel(ForwardInput);
  // XLA has no Placeholder kernel: fed values enter a cluster as arguments.
  REGISTER_OP(r, "Placeholder")
      .Output("output: dtype")
      .Attr("dtype: type")
      .Attr("shape: shape = { unknown_rank: true }")
      .NoXlaKernel()
      .SetShapeFn(PlaceholderShape)
      .SetKernel(PlaceholderKernel);
  REGISTER_OP(r, "PlaceholderWithDefault")
      .Input("input: dtype")
      .Output("output: dtype")
      .Attr("dtype: type")
      .Attr("shape: shape")
      .SetShapeFn(PlaceholderWithDefaultShape)
      .SetKernel(ForwardInput);
  for (const char* op : {"Identity", "StopGradient", "Snapshot"}) {
    REGISTER_OP(r, op)
        .Input("input: T")
        .Output("output: T")
        .Attr("T: type")
        .SetShapeFn(UnchangedShape)
        .SetKernel(ForwardInput);
  }
  REGISTER_OP(r, "PreventGradient")
      .Input("input: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("message: string = ''")
      .SetShapeFn(UnchangedShape)
      .SetKernel(ForwardInput);
  REGISTER_OP(r, "IdentityN")
      .Input("input: T")
      .Output("output: T")
      .Attr("T: list(type) >= 1")
      .SetShapeFn(AllInputsUnchanged)
      .SetKernel(ForwardAllInputs);
  REGISTER_OP(r, "NoOp").SetShapeFn(shape_fn::NoOutputs).SetKernel([](OpKernelContext&) {
    return OkStatus();
  });
  // The executor binds _Arg and _Retval to a function's arguments and results itself.
  REGISTER_OP(r, "_Arg")
      .Output("output: T")
      .Attr("T: type")
      .Attr("index: int >= 0")
      .SetIsStateful()
      .SetShapeFn(ArgShape);
  REGISTER_OP(r, "_Retval")
      .Input("input: T")
      .Attr("T: type")
      .Attr("index: int >= 0")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs);
  // A multi-device function's arguments and results that live in device memory (TensorFlow's
  // runtime graphs hold them). Fed and fetched by name like any node; the executor binds only
  // _Arg and _Retval itself.
  REGISTER_OP(r, "_DeviceArg")
      .Output("output: T")
      .Attr("T: type")
      .Attr("index: int >= 0")
      .SetIsStateful()
      .SetShapeFn(ArgShape)
      .NoXlaKernel();
  REGISTER_OP(r, "_DeviceRetval")
      .Input("input: T")
      .Attr("T: type")
      .Attr("index: int >= 0")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .NoXlaKernel();

  REGISTER_OP(r, "Reshape")
      .Input("tensor: T")
      .Input("shape: Tshape")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tshape: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("shape")
      .SetShapeFn(ReshapeShape)
      .SetKernel(ReshapeKernel);
  REGISTER_OP(r, "ExpandDims")
      .Input("input: T")
      .Input("dim: Tdim")
      .Output("output: T")
      .Attr("T: type")
      .Attr("Tdim: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("dim")
      .SetShapeFn(ExpandDimsShape)
      .SetKernel(ExpandDimsKernel);
  REGISTER_OP(r, "Squeeze")
      .Input("input: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("squeeze_dims: list(int) >= 0 = []")
      .SetShapeFn(SqueezeShape)
      .SetKernel(SqueezeKernel);

  REGISTER_OP(r, "Shape")
      .Input("input: T")
      .Output("output: out_type")
      .Attr("T: type")
      .Attr("out_type: {int32, int64} = DT_INT32")
      .SetShapeFn(ShapeShape)
      .SetKernel(ShapeKernel);
  REGISTER_OP(r, "ShapeN")
      .Input("input: N * T")
      .Output("output: N * out_type")
      .Attr("N: int >= 1")
      .Attr("T: type")
      .Attr("out_type: {int32, int64} = DT_INT32")
      .SetShapeFn(ShapeShape)
      .SetKernel(ShapeKernel);
  REGISTER_OP(r, "Size")
      .Input("input: T")
      .Output("output: out_type")
      .Attr("T: type")
      .Attr("out_type: {int32, int64} = DT_INT32")
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(SizeKernel);
  REGISTER_OP(r, "Rank")
      .Input("input: T")
      .Output("output: int32")
      .Attr("T: type")
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(RankKernel);

  REGISTER_OP(r, "ZerosLike")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: type")
      .SetShapeFn(UnchangedShape)
      .SetKernel(ZerosLikeKernel);
  REGISTER_OP(r, "OnesLike")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, "
            "int64, uint64, complex64, complex128, bool}")
      .SetShapeFn(UnchangedShape)
      .SetKernel(OnesLikeKernel);
  REGISTER_OP(r, "Fill")
      .Input("dims: index_type")
      .Input("value: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("index_type: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("dims")
      .SetShapeFn(FillShape)
      .SetKernel(FillKernel);
  REGISTER_OP(r, "Range")
      .Input("start: Tidx")
      .Input("limit: Tidx")
      .Input("delta: Tidx")
      .Output("output: Tidx")
      .Attr("Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32, "
            "uint64} = DT_INT32")
      .CompileTimeConstInput("start")
      .CompileTimeConstInput("limit")
      .CompileTimeConstInput("delta")
      .SetShapeFn(RangeShape)
      .SetKernel(RangeKernel);

  REGISTER_OP(r, "Where")
      .Input("input: T")
      .Output("index: int64")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
            "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, "
            "bool} = DT_BOOL")
      .SetShapeFn(WhereShape)
      .SetKernel(WhereKernel);
  REGISTER_OP(r, "Unique")
      .Input("x: T")
      .Output("y: T")
      .Output("idx: out_idx")
      .Attr("T: type")
      .Attr("out_idx: {int32, int64} = DT_INT32")
      .SetShapeFn(UniqueShape)
      .SetKernel(UniqueKernel);
  REGISTER_OP(r, "UniqueWithCounts")
      .Input("x: T")
      .Output("y: T")
      .Output("idx: out_idx")
      .Output("count: out_idx")
      .Attr("T: type")
      .Attr("out_idx: {int32, int64} = DT_INT32")
      .NoXlaKernel()
      .SetShapeFn(UniqueShape)
      .SetKernel(UniqueKernel);
  REGISTER_OP(r, "OneHot")
      .Input("indices: TI")
      .Input("depth: int32")
      .Input("on_value: T")
      .Input("off_value: T")
      .Output("output: T")
      .Attr("axis: int = -1")
      .Attr("T: type")
      .Attr("TI: {uint8, int8, int32, int64} = DT_INT64")
      .CompileTimeConstInput("depth")
      .SetShapeFn(OneHotShape)
      .SetKernel(OneHotKernel);
  REGISTER_OP(r, "Cumsum")
      .Input("x: T")
      .Input("axis: Tidx")
      .Output("out: T")
      .Attr("exclusive: bool = false")
      .Attr("reverse: bool = false")
      .Attr("T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
            "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}")
      .Attr("Tidx: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("axis")
      .SetShapeFn(CumsumShape)
      .SetKernel(CumsumKernel);
  REGISTER_OP(r, "InvertPermutation")
      .Input("x: T")
      .Output("y: T")
      .Attr("T: {int32, int64} = DT_INT32")
      .SetShapeFn(UnchangedShape)
      .SetKernel(InvertPermutationKernel);
  REGISTER_OP(r, "CheckNumerics")
      .Input("tensor: T")
      .Output("output: T")
      .Attr("T: {bfloat16, half, float, double}")
      .Attr("message: string")
      .SetIsStateful()
      .SetShapeFn(UnchangedShape)
      .SetKernel(CheckNumericsKernel);
  REGISTER_OP(r, "BroadcastArgs")
      .Input("s0: T")
      .Input("s1: T")
      .Output("r0: T")
      .Attr("T: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("s0")
      .CompileTimeConstInput("s1")
      .SetShapeFn(BroadcastArgsShape)
      .SetKernel(BroadcastArgsKernel);
  REGISTER_OP(r, "BroadcastGradientArgs")
      .Input("s0: T")
      .Input("s1: T")
      .Output("r0: T")
      .Output("r1: T")
      .Attr("T: {int32, int64} = DT_INT32")
      .CompileTimeConstInput("s0")
      .CompileTimeConstInput("s1")
      .SetShapeFn(BroadcastArgsShape)
      .SetKernel(BroadcastGradientArgsKernel);

  RegisterArrayCopyOps(r);
}

}  // namespace xlens::graph
