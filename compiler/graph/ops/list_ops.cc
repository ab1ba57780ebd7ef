// TensorFlow's TensorList ops (list_ops.cc, list_kernels.h): a list is a scalar DT_VARIANT
// holding a TensorList (tensor_list.h). Keras's RNN layers carry their inputs and outputs through
// the functional While as lists (TensorListFromTensor before the loop, GetItem/SetItem in the
// body, TensorListStack after it), and their gradients keep per-iteration values in lists
// (PushBack in the forward loop, PopBack in the backward one). Signatures, shapes and messages are
// TensorFlow 2.21's; XLA_CPU_JIT compiles every one of them (tf2xla/tensor_list_ops.cc).
#include <algorithm>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/graph/tensor_list.h"

namespace xlens::graph {
namespace {

// ---- shapes ---------------------------------------------------------------------------------

// A shape input (element_shape) as shape inference knows it: scalar -1 is an unknown rank.
PartialShape ShapeInput(const InferenceContext& c, int i) {
  if (const Tensor* t = c.input_tensor(i)) {
    StatusOr<PartialShape> s = PartialShapeFromTensor(*t);
    if (s.ok()) return *s;
  }
  const PartialShape& s = c.input(i);
  if (s.rank() == 1 && s.dim(0) >= 0) return PartialShape::UnknownOfRank(s.dim(0));
  return PartialShape::UnknownRank();
}

// The element shape input i's list carries, when shape inference knows it.
PartialShape HandleElementShape(const InferenceContext& c, int i) {
  const auto& h = c.input_handle_shape(i);
  return h ? h->first : PartialShape::UnknownRank();
}

DataType ElementDtypeAttr(const InferenceContext& c) {
  const AttrValue* v = FindAttr(c.attrs(), "element_dtype");
  return v && v->kind() == AttrValue::Kind::kType ? v->type() : DT_INVALID;
}

PartialShape MergeOrFirst(const PartialShape& a, const PartialShape& b) {
  if (a.unknown_rank()) return b;
  if (b.unknown_rank() || !a.IsCompatibleWith(b)) return a;
  return a.Merge(b);
}

// A new list from an element_shape input.
Status NewListShape(InferenceContext& c, int shape_input) {
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, ShapeInput(c, shape_input), ElementDtypeAttr(c));
  return OkStatus();
}

// The list output 0 carries on the list of input 0.
Status ForwardListShape(InferenceContext& c) {
  c.set_output(0, PartialShape::Scalar());
  if (c.input_handle_shape(0)) {
    c.set_output_handle_shape(0, c.input_handle_shape(0)->first, c.input_handle_shape(0)->second);
  }
  return OkStatus();
}

Status FromTensorShape(InferenceContext& c) {
  PartialShape element = ShapeInput(c, 1);
  const PartialShape& t = c.input(0);
  if (!t.unknown_rank() && t.rank() >= 1) {
    element = MergeOrFirst(element, PartialShape(std::vector<int64_t>(t.dims().begin() + 1,
                                                                      t.dims().end())));
  }
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, element, ElementDtypeAttr(c));
  return OkStatus();
}

Status GetItemShape(InferenceContext& c) {
  c.set_output(0, MergeOrFirst(ShapeInput(c, 2), HandleElementShape(c, 0)));
  return OkStatus();
}

Status SetItemShape(InferenceContext& c) {
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, MergeOrFirst(HandleElementShape(c, 0), c.input(2)),
                            ElementDtypeAttr(c));
  return OkStatus();
}

Status PushBackShape(InferenceContext& c) {
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, MergeOrFirst(HandleElementShape(c, 0), c.input(1)),
                            ElementDtypeAttr(c));
  return OkStatus();
}

Status PopBackShape(InferenceContext& c) {
  RETURN_IF_ERROR(ForwardListShape(c));
  c.set_output(1, MergeOrFirst(ShapeInput(c, 1), HandleElementShape(c, 0)));
  return OkStatus();
}

// [num_elements] + element shape (TensorListStack, TensorListGather).
Status StackShape(InferenceContext& c) {
  PartialShape element = MergeOrFirst(ShapeInput(c, 1), HandleElementShape(c, 0));
  int64_t n = PartialShape::kUnknownDim;
  if (const AttrValue* v = FindAttr(c.attrs(), "num_elements");
      v && v->kind() == AttrValue::Kind::kInt && v->i() >= 0) {
    n = v->i();
  }
  if (element.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  c.set_output(0, PartialShape(std::move(dims)));
  return OkStatus();
}

Status GatherShape(InferenceContext& c) {
  PartialShape element = MergeOrFirst(ShapeInput(c, 2), HandleElementShape(c, 0));
  const PartialShape& idx = c.input(1);
  int64_t n = idx.rank() == 1 ? idx.dim(0) : PartialShape::kUnknownDim;
  if (element.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  std::vector<int64_t> dims{n};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  c.set_output(0, PartialShape(std::move(dims)));
  return OkStatus();
}

Status ElementShapeShape(InferenceContext& c) {
  PartialShape element = HandleElementShape(c, 0);
  c.set_output(0, element.unknown_rank() ? PartialShape::UnknownOfRank(1)
                                         : PartialShape({element.rank()}));
  return OkStatus();
}

Status ScatterShape(InferenceContext& c) {
  PartialShape element = ShapeInput(c, 2);
  const PartialShape& t = c.input(0);
  if (!t.unknown_rank() && t.rank() >= 1) {
    element = MergeOrFirst(element, PartialShape(std::vector<int64_t>(t.dims().begin() + 1,
                                                                      t.dims().end())));
  }
  c.set_output(0, PartialShape::Scalar());
  c.set_output_handle_shape(0, element, ElementDtypeAttr(c));
  return OkStatus();
}

Status ConcatShape(InferenceContext& c) {
  c.set_output(0, PartialShape::UnknownRank());
  c.set_output(1, PartialShape::UnknownOfRank(1));
  return OkStatus();
}

// ---- kernels --------------------------------------------------------------------------------

StatusOr<DataType> ElementDtype(const OpKernelContext& c) {
  return c.GetAttr<DataType>("element_dtype");
}

StatusOr<PartialShape> ShapeArg(const OpKernelContext& c, int i) {
  StatusOr<PartialShape> s = PartialShapeFromTensor(c.input(i));
  if (!s.ok()) return c.Error("element_shape: " + s.status().message());
  return s;
}

Status CheckDtype(const OpKernelContext& c, const TensorList& list, DataType want) {
  if (list.element_dtype != want) {
    return c.Error("Invalid data types; op elements " + DataTypeName(want) +
                   " but list elements " + DataTypeName(list.element_dtype));
  }
  return OkStatus();
}

StatusOr<int64_t> ListIndex(const OpKernelContext& c, const TensorList& list, int input) {
  int64_t index = c.input(input).GetAsInt64(0);
  if (index < 0 || index >= static_cast<int64_t>(list.tensors.size())) {
    return c.Error("Trying to access element " + std::to_string(index) + " in a list with " +
                   std::to_string(list.tensors.size()) + " elements.");
  }
  return index;
}

Status EmptyTensorListKernel(OpKernelContext& c) {
  auto list = std::make_shared<TensorList>();
  ASSIGN_OR_RETURN(list->element_dtype, ElementDtype(c));
  ASSIGN_OR_RETURN(list->element_shape, ShapeArg(c, 0));
  const Tensor& max = c.input(1);
  if (max.num_elements() != 1) return c.Error("max_num_elements expected to be a scalar");
  list->max_num_elements = max.GetAsInt64(0);
  if (list->max_num_elements < -1) {
    return c.Error("max_num_elements must be -1 or nonnegative, got " +
                   std::to_string(list->max_num_elements));
  }
  c.set_output(0, ListTensor(std::move(list)));
  return OkStatus();
}

Status ReserveKernel(OpKernelContext& c) {
  auto list = std::make_shared<TensorList>();
  ASSIGN_OR_RETURN(list->element_dtype, ElementDtype(c));
  ASSIGN_OR_RETURN(list->element_shape, ShapeArg(c, 0));
  if (c.input(1).num_elements() != 1) return c.Error("num_elements expected to be a scalar");
  int64_t n = c.input(1).GetAsInt64(0);
  if (n < 0) {
    return c.Error("The num_elements to reserve must be a non negative number, but got " +
                   std::to_string(n));
  }
  if (n > c.max_tensor_bytes() / 64) {
    return c.Error("a list of " + std::to_string(n) + " elements is past the executor's limit");
  }
  list->tensors.resize(n);
  c.set_output(0, ListTensor(std::move(list)));
  return OkStatus();
}

Status FromTensorKernel(OpKernelContext& c) {
  const Tensor& t = c.input(0);
  auto list = std::make_shared<TensorList>();
  ASSIGN_OR_RETURN(list->element_dtype, ElementDtype(c));
  ASSIGN_OR_RETURN(list->element_shape, ShapeArg(c, 1));
  if (t.rank() < 1) {
    return c.Error("Tensor must be at least a vector, but saw shape: " + DimsToString(t.dims()));
  }
  std::vector<int64_t> element_dims(t.dims().begin() + 1, t.dims().end());
  if (!list->element_shape.IsCompatibleWith(element_dims)) {
    return c.Error("Specified a list with shape " + list->element_shape.ToString() +
                   " from a tensor with shape " + DimsToString(t.dims()));
  }
  const int64_t n = t.dim(0);
  const int64_t step = NumElements(element_dims);
  list->tensors.reserve(n);
  for (int64_t i = 0; i < n; ++i) {
    Tensor e(t.dtype(), element_dims);
    CopyElements(t, i * step, e, 0, step);
    list->tensors.push_back(std::move(e));
  }
  c.set_output(0, ListTensor(std::move(list)));
  return OkStatus();
}

Status GetItemKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  ASSIGN_OR_RETURN(int64_t index, ListIndex(c, *list, 1));
  ASSIGN_OR_RETURN(PartialShape shape, ShapeArg(c, 2));
  ASSIGN_OR_RETURN(Tensor item, ListElementOrZeros(c, *list, index, shape));
  c.set_output(0, std::move(item));
  return OkStatus();
}

Status SetItemKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(bool resize, c.GetAttr<bool>("resize_if_index_out_of_bounds"));
  Tensor item = c.input(2);
  const int64_t index = c.input(1).GetAsInt64(0);
  ASSIGN_OR_RETURN(TensorList * list, ForwardInputListToOutput(c, 0, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  const int64_t size = static_cast<int64_t>(list->tensors.size());
  if (resize && index >= size && index < c.max_tensor_bytes() / 64) {
    list->tensors.resize(index + 1);
  } else if (index < 0 || index >= size) {
    return c.Error("Trying to modify element " + std::to_string(index) + " in a list with " +
                   std::to_string(size) + " elements.");
  }
  RETURN_IF_ERROR(CheckElement(c, *list, item));
  list->tensors[index] = std::move(item);
  return OkStatus();
}

// The elements at `indices` stacked along a new first dimension (Stack and Gather).
Status StackElements(OpKernelContext& c, const TensorList& list, const std::vector<int64_t>& indices,
                     const PartialShape& requested) {
  if (!list.element_shape.IsCompatibleWith(requested)) {
    return c.Error("Incompatible shapes: the list's element shape is " +
                   list.element_shape.ToString() + ", the op asks for " + requested.ToString());
  }
  PartialShape shape = MergeOrFirst(list.element_shape, requested);
  // The shape of the elements that are set decides what is not known.
  for (int64_t i : indices) {
    const Tensor& t = list.tensors[i];
    if (!t.IsInitialized()) continue;
    if (!shape.IsCompatibleWith(t.dims())) {
      return c.Error("Incompatible shapes during merge: " + shape.ToString() + " vs. " +
                     DimsToString(t.dims()));
    }
    shape = PartialShape(t.dims());
    break;
  }
  if (!shape.IsFullyDefined()) {
    return c.Error("Tried to stack elements of an empty list with non-fully-defined "
                   "element_shape: " + shape.ToString());
  }
  std::vector<int64_t> dims{static_cast<int64_t>(indices.size())};
  dims.insert(dims.end(), shape.dims().begin(), shape.dims().end());
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  const int64_t step = shape.num_elements();
  for (size_t k = 0; k < indices.size(); ++k) {
    const Tensor& t = list.tensors[indices[k]];
    if (!t.IsInitialized()) continue;  // zeros
    if (t.dims() != shape.dims()) {
      return c.Error("Incompatible shapes during merge: " + shape.ToString() + " vs. " +
                     DimsToString(t.dims()));
    }
    CopyElements(t, 0, *out, static_cast<int64_t>(k) * step, step);
  }
  return OkStatus();
}

Status StackKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  ASSIGN_OR_RETURN(int64_t num_elements, c.GetAttr<int64_t>("num_elements"));
  const int64_t size = static_cast<int64_t>(list->tensors.size());
  if (num_elements != -1 && num_elements != size) {
    return c.Error("Operation expected a list with " + std::to_string(num_elements) +
                   " elements but got a list with " + std::to_string(size) + " elements.");
  }
  ASSIGN_OR_RETURN(PartialShape shape, ShapeArg(c, 1));
  std::vector<int64_t> all(size);
  for (int64_t i = 0; i < size; ++i) all[i] = i;
  return StackElements(c, *list, all, shape);
}

Status GatherKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  std::vector<int64_t> indices = c.input(1).AsInt64Vector();
  for (int64_t i : indices) {
    if (i < 0 || i >= static_cast<int64_t>(list->tensors.size())) {
      return c.Error("Trying to gather element " + std::to_string(i) + " in a list with " +
                     std::to_string(list->tensors.size()) + " elements.");
    }
  }
  ASSIGN_OR_RETURN(PartialShape shape, ShapeArg(c, 2));
  return StackElements(c, *list, indices, shape);
}

Status LengthKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  c.set_output(0, Tensor::Scalar<int32_t>(DT_INT32, static_cast<int32_t>(list->tensors.size())));
  return OkStatus();
}

Status ElementShapeKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  ASSIGN_OR_RETURN(DataType type, c.GetAttr<DataType>("shape_type"));
  c.set_output(0, PartialShapeToTensor(list->element_shape, type));
  return OkStatus();
}

Status PushBackKernel(OpKernelContext& c) {
  Tensor item = c.input(1);
  ASSIGN_OR_RETURN(TensorList * list, ForwardInputListToOutput(c, 0, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  RETURN_IF_ERROR(CheckElement(c, *list, item));
  if (list->max_num_elements != -1 &&
      static_cast<int64_t>(list->tensors.size()) >= list->max_num_elements) {
    return c.Error("Tried to push item into a full list list size: " +
                   std::to_string(list->tensors.size()) +
                   " max_num_elements: " + std::to_string(list->max_num_elements));
  }
  list->tensors.push_back(std::move(item));
  return OkStatus();
}

Status PopBackKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(PartialShape shape, ShapeArg(c, 1));
  ASSIGN_OR_RETURN(TensorList * list, ForwardInputListToOutput(c, 0, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  if (list->tensors.empty()) return c.Error("Trying to pop from an empty list.");
  ASSIGN_OR_RETURN(Tensor item,
                   ListElementOrZeros(c, *list, static_cast<int64_t>(list->tensors.size()) - 1,
                                      shape));
  list->tensors.pop_back();
  c.set_output(1, std::move(item));
  return OkStatus();
}

Status ResizeKernel(OpKernelContext& c) {
  const int64_t size = c.input(1).GetAsInt64(0);
  if (size < 0 || size > c.max_tensor_bytes() / 64) {
    return c.Error("TensorListSlice expects size to be non-negative. Got: " + std::to_string(size));
  }
  ASSIGN_OR_RETURN(TensorList * list, ForwardInputListToOutput(c, 0, 0));
  list->tensors.resize(size);
  return OkStatus();
}

// A new list with tensor's slices along dimension 0 at `indices` (Scatter, ScatterV2), or
// into an existing list (ScatterIntoExistingList).
Status ScatterInto(OpKernelContext& c, TensorList& list, const Tensor& t, const Tensor& indices_t) {
  if (t.rank() < 1) {
    return c.Error("Tensor must be at least a vector, but saw shape: " + DimsToString(t.dims()));
  }
  std::vector<int64_t> indices = indices_t.AsInt64Vector();
  if (static_cast<int64_t>(indices.size()) != t.dim(0)) {
    return c.Error("Invalid number of rows in input tensor. Expected: " +
                   std::to_string(indices.size()) + " Actual: " + std::to_string(t.dim(0)));
  }
  std::vector<int64_t> element_dims(t.dims().begin() + 1, t.dims().end());
  const int64_t step = NumElements(element_dims);
  int64_t max_index = -1;
  for (int64_t i : indices) {
    if (i < 0) return c.Error("Indices in TensorListScatter must all be non-negative.");
    max_index = std::max(max_index, i);
  }
  if (max_index >= static_cast<int64_t>(list.tensors.size())) {
    if (max_index >= c.max_tensor_bytes() / 64) return c.Error("index past the executor's limit");
    list.tensors.resize(max_index + 1);
  }
  for (size_t k = 0; k < indices.size(); ++k) {
    Tensor e(t.dtype(), element_dims);
    CopyElements(t, static_cast<int64_t>(k) * step, e, 0, step);
    RETURN_IF_ERROR(CheckElement(c, list, e));
    list.tensors[indices[k]] = std::move(e);
  }
  return OkStatus();
}

Status ScatterKernel(OpKernelContext& c) {
  auto list = std::make_shared<TensorList>();
  ASSIGN_OR_RETURN(list->element_dtype, ElementDtype(c));
  ASSIGN_OR_RETURN(list->element_shape, ShapeArg(c, 2));
  if (c.num_inputs() > 3) {  // ScatterV2's num_elements
    int64_t n = c.input(3).GetAsInt64(0);
    if (n > c.max_tensor_bytes() / 64) return c.Error("num_elements past the executor's limit");
    if (n > 0) list->tensors.resize(n);
  }
  RETURN_IF_ERROR(ScatterInto(c, *list, c.input(0), c.input(1)));
  c.set_output(0, ListTensor(std::move(list)));
  return OkStatus();
}

Status ScatterIntoExistingKernel(OpKernelContext& c) {
  Tensor t = c.input(1);
  Tensor indices = c.input(2);
  ASSIGN_OR_RETURN(TensorList * list, ForwardInputListToOutput(c, 0, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  return ScatterInto(c, *list, t, indices);
}

// TensorListSplit: consecutive row blocks of `lengths` rows each.
Status SplitKernel(OpKernelContext& c) {
  const Tensor& t = c.input(0);
  auto list = std::make_shared<TensorList>();
  ASSIGN_OR_RETURN(list->element_dtype, ElementDtype(c));
  ASSIGN_OR_RETURN(list->element_shape, ShapeArg(c, 1));
  if (t.rank() < 1) {
    return c.Error("Tensor must be at least a vector, but saw shape: " + DimsToString(t.dims()));
  }
  std::vector<int64_t> lengths = c.input(2).AsInt64Vector();
  const int64_t row = t.num_elements() / std::max<int64_t>(1, t.dim(0));
  int64_t start = 0;
  for (int64_t len : lengths) {
    if (len < 0 || start + len > t.dim(0)) {
      return c.Error("Invalid lengths: the lengths must be non-negative and sum to the tensor's "
                     "first dimension " + std::to_string(t.dim(0)));
    }
    std::vector<int64_t> dims = t.dims();
    dims[0] = len;
    Tensor e(t.dtype(), dims);
    CopyElements(t, start * row, e, 0, len * row);
    list->tensors.push_back(std::move(e));
    start += len;
  }
  if (start != t.dim(0)) {
    return c.Error("Unused values in tensor. Length of tensor: " + std::to_string(t.dim(0)) +
                   " Values used: " + std::to_string(start));
  }
  c.set_output(0, ListTensor(std::move(list)));
  return OkStatus();
}

// TensorListConcatV2: the elements concatenated along their first dimension, and their lengths.
Status ConcatKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(const TensorList* list, InputList(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, ElementDtype(c));
  RETURN_IF_ERROR(CheckDtype(c, *list, dtype));
  ASSIGN_OR_RETURN(PartialShape shape, ShapeArg(c, 1));
  shape = MergeOrFirst(list->element_shape, shape);
  std::vector<int64_t> inner;
  bool have_inner = false;
  for (const Tensor& t : list->tensors) {
    if (!t.IsInitialized()) continue;
    if (t.rank() < 1) return c.Error("Concat saw a scalar shape at index 0 but requires at least vectors.");
    std::vector<int64_t> d(t.dims().begin() + 1, t.dims().end());
    if (have_inner && d != inner) {
      return c.Error("Tried to concat tensors with unequal shapes: " + DimsToString(inner) +
                     " vs. " + DimsToString(d));
    }
    inner = d;
    have_inner = true;
  }
  if (!have_inner) {
    const bool inner_known =
        !shape.unknown_rank() && shape.rank() >= 1 &&
        std::all_of(shape.dims().begin() + 1, shape.dims().end(), [](int64_t d) { return d >= 0; });
    if (!inner_known) {
      return c.Error("All except the first dimension must be fully defined when concating an "
                     "empty tensor list. element_shape: " + shape.ToString());
    }
    inner.assign(shape.dims().begin() + 1, shape.dims().end());
  }
  std::vector<int64_t> leading = c.input(2).AsInt64Vector();
  std::vector<int64_t> lengths;
  int64_t total = 0;
  for (size_t i = 0; i < list->tensors.size(); ++i) {
    const Tensor& t = list->tensors[i];
    int64_t len = t.IsInitialized() ? t.dim(0)
                  : i < leading.size() ? leading[i]
                  : (!shape.unknown_rank() && shape.rank() >= 1 ? shape.dim(0) : -1);
    if (len < 0) return c.Error("an unset element's leading dimension is not known");
    lengths.push_back(len);
    total += len;
  }
  std::vector<int64_t> dims{total};
  dims.insert(dims.end(), inner.begin(), inner.end());
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  const int64_t row = NumElements(inner);
  int64_t at = 0;
  for (size_t i = 0; i < list->tensors.size(); ++i) {
    if (list->tensors[i].IsInitialized()) {
      CopyElements(list->tensors[i], 0, *out, at * row, lengths[i] * row);
    }
    at += lengths[i];
  }
  c.set_output(1, IntTensor(DT_INT64, lengths, {static_cast<int64_t>(lengths.size())}));
  return OkStatus();
}

// ZerosLike and AddN of a list: what the gradient algorithm builds for a list whose gradient is
// missing, or reaches it along two paths (TensorFlow registers these as variant unary and binary
// ops of TensorList). The numeric kernels stay as they are.
void ExtendForLists(const OpRegistry& r, const std::string& op) {
  const OpRegistration* reg = r.Find(op);
  if (reg == nullptr || !reg->kernel) return;
  KernelFn numeric = reg->kernel;
  const bool add = op == "AddN";
  SetKernel(r, op, [numeric, add](OpKernelContext& c) -> Status {
    if (c.num_inputs() == 0 || c.input(0).dtype() != DT_VARIANT) return numeric(c);
    ASSIGN_OR_RETURN(const TensorList* first, InputList(c, 0));
    if (!add) {
      c.set_output(0, ListTensor(ZerosLikeList(*first)));
      return OkStatus();
    }
    std::shared_ptr<TensorList> sum = std::make_shared<TensorList>(*first);
    for (int i = 1; i < c.num_inputs(); ++i) {
      ASSIGN_OR_RETURN(const TensorList* next, InputList(c, i));
      StatusOr<std::shared_ptr<TensorList>> added = AddLists(*sum, *next);
      if (!added.ok()) return c.Error(added.status().message());
      sum = *added;
    }
    c.set_output(0, ListTensor(std::move(sum)));
    return OkStatus();
  });
}

}  // namespace

void RegisterListOps(OpRegistry& r) {
  REGISTER_OP(r, "EmptyTensorList")
      .Input("element_shape: shape_type")
      .Input("max_num_elements: int32")
      .Output("handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn([](InferenceContext& c) { return NewListShape(c, 0); })
      .SetKernel(EmptyTensorListKernel)
      .CompileTimeConstInput("element_shape")
      .CompileTimeConstInput("max_num_elements");
  REGISTER_OP(r, "TensorListReserve")
      .Input("element_shape: shape_type")
      .Input("num_elements: int32")
      .Output("handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn([](InferenceContext& c) { return NewListShape(c, 0); })
      .SetKernel(ReserveKernel)
      .CompileTimeConstInput("element_shape")
      .CompileTimeConstInput("num_elements");
  REGISTER_OP(r, "TensorListFromTensor")
      .Input("tensor: element_dtype")
      .Input("element_shape: shape_type")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn(FromTensorShape)
      .SetKernel(FromTensorKernel)
      .CompileTimeConstInput("element_shape");
  REGISTER_OP(r, "TensorListGetItem")
      .Input("input_handle: variant")
      .Input("index: int32")
      .Input("element_shape: Tshape")
      .Output("item: element_dtype")
      .Attr("element_dtype: type")
      .Attr("Tshape: {int32, int64} = DT_INT32")
      .SetShapeFn(GetItemShape)
      .SetKernel(GetItemKernel)
      .CompileTimeConstInput("element_shape");
  REGISTER_OP(r, "TensorListSetItem")
      .Input("input_handle: variant")
      .Input("index: int32")
      .Input("item: element_dtype")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .Attr("resize_if_index_out_of_bounds: bool = false")
      .SetShapeFn(SetItemShape)
      .SetKernel(SetItemKernel);
  REGISTER_OP(r, "TensorListStack")
      .Input("input_handle: variant")
      .Input("element_shape: int32")
      .Output("tensor: element_dtype")
      .Attr("element_dtype: type")
      .Attr("num_elements: int = -1")
      .SetShapeFn(StackShape)
      .SetKernel(StackKernel)
      .CompileTimeConstInput("element_shape");
  REGISTER_OP(r, "TensorListGather")
      .Input("input_handle: variant")
      .Input("indices: int32")
      .Input("element_shape: int32")
      .Output("values: element_dtype")
      .Attr("element_dtype: type")
      .SetShapeFn(GatherShape)
      .SetKernel(GatherKernel)
      .CompileTimeConstInput("element_shape");
  REGISTER_OP(r, "TensorListLength")
      .Input("input_handle: variant")
      .Output("length: int32")
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(LengthKernel);
  REGISTER_OP(r, "TensorListElementShape")
      .Input("input_handle: variant")
      .Output("element_shape: shape_type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn(ElementShapeShape)
      .SetKernel(ElementShapeKernel);
  REGISTER_OP(r, "TensorListPushBack")
      .Input("input_handle: variant")
      .Input("tensor: element_dtype")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .SetShapeFn(PushBackShape)
      .SetKernel(PushBackKernel);
  REGISTER_OP(r, "TensorListPopBack")
      .Input("input_handle: variant")
      .Input("element_shape: int32")
      .Output("output_handle: variant")
      .Output("tensor: element_dtype")
      .Attr("element_dtype: type")
      .SetShapeFn(PopBackShape)
      .SetKernel(PopBackKernel)
      .CompileTimeConstInput("element_shape");
  REGISTER_OP(r, "TensorListResize")
      .Input("input_handle: variant")
      .Input("size: int32")
      .Output("output_handle: variant")
      .SetShapeFn(ForwardListShape)
      .SetKernel(ResizeKernel)
      .NoXlaKernel();
  REGISTER_OP(r, "TensorListScatter")
      .Input("tensor: element_dtype")
      .Input("indices: int32")
      .Input("element_shape: shape_type")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn(ScatterShape)
      .SetKernel(ScatterKernel)
      .NoXlaKernel();
  REGISTER_OP(r, "TensorListScatterV2")
      .Input("tensor: element_dtype")
      .Input("indices: int32")
      .Input("element_shape: shape_type")
      .Input("num_elements: int32")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn(ScatterShape)
      .SetKernel(ScatterKernel)
      .NoXlaKernel();
  REGISTER_OP(r, "TensorListScatterIntoExistingList")
      .Input("input_handle: variant")
      .Input("tensor: element_dtype")
      .Input("indices: int32")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .SetShapeFn(ForwardListShape)
      .SetKernel(ScatterIntoExistingKernel)
      .NoXlaKernel();
  REGISTER_OP(r, "TensorListSplit")
      .Input("tensor: element_dtype")
      .Input("element_shape: shape_type")
      .Input("lengths: int64")
      .Output("output_handle: variant")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn([](InferenceContext& c) { return NewListShape(c, 1); })
      .SetKernel(SplitKernel)
      .CompileTimeConstInput("element_shape")
      .CompileTimeConstInput("lengths");
  REGISTER_OP(r, "TensorListConcatV2")
      .Input("input_handle: variant")
      .Input("element_shape: shape_type")
      .Input("leading_dims: int64")
      .Output("tensor: element_dtype")
      .Output("lengths: int64")
      .Attr("element_dtype: type")
      .Attr("shape_type: {int32, int64}")
      .SetShapeFn(ConcatShape)
      .SetKernel(ConcatKernel)
      .CompileTimeConstInput("element_shape")
      .CompileTimeConstInput("leading_dims");
  ExtendForLists(r, "ZerosLike");
  ExtendForLists(r, "AddN");
}

}  // namespace xlens::graph
