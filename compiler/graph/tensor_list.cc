#include "compiler/graph/tensor_list.h"

#include "compiler/graph/ops/op_util.h"

namespace xlens::graph {

std::string TensorList::DebugString() const {
  int64_t set = 0;
  for (const Tensor& t : tensors) set += t.IsInitialized() ? 1 : 0;
  return "TensorList<" + DataTypeName(element_dtype) + ">[" + std::to_string(tensors.size()) +
         " of " + element_shape.ToString() + ", " + std::to_string(set) + " set]";
}

std::shared_ptr<VariantValue> TensorList::Clone() const {
  auto copy = std::make_shared<TensorList>(*this);
  for (Tensor& t : copy->tensors) {
    if (t.IsInitialized()) t = t.Clone();
  }
  return copy;
}

bool TensorList::Identical(const VariantValue& other) const {
  const auto* o = dynamic_cast<const TensorList*>(&other);
  if (o == nullptr || o->element_dtype != element_dtype || !(o->element_shape == element_shape) ||
      o->tensors.size() != tensors.size()) {
    return false;
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].IsInitialized() != o->tensors[i].IsInitialized()) return false;
    if (tensors[i].IsInitialized() && !tensors[i].Identical(o->tensors[i])) return false;
  }
  return true;
}

Tensor ListTensor(std::shared_ptr<TensorList> list) {
  Tensor t(DT_VARIANT, {});
  t.variants()[0] = std::move(list);
  return t;
}

namespace {

StatusOr<TensorList*> ListOf(const OpKernelContext& c, const Tensor& t, int i) {
  if (t.dtype() != DT_VARIANT || t.num_elements() != 1) {
    return c.Error("input " + std::to_string(i) + " must be a scalar variant holding a list, got " +
                   DataTypeName(t.dtype()) + " " + DimsToString(t.dims()));
  }
  auto* list = dynamic_cast<TensorList*>(t.variants()[0].get());
  if (list == nullptr) {
    return c.Error("input " + std::to_string(i) + " is not a list: it holds " +
                   (t.variants()[0] ? t.variants()[0]->TypeName() : std::string("nothing")));
  }
  return list;
}

}  // namespace

StatusOr<const TensorList*> InputList(const OpKernelContext& c, int i) {
  ASSIGN_OR_RETURN(TensorList * list, ListOf(c, c.input(i), i));
  return static_cast<const TensorList*>(list);
}

StatusOr<TensorList*> ForwardInputListToOutput(OpKernelContext& c, int input, int output) {
  Tensor& in = c.mutable_input(input);
  ASSIGN_OR_RETURN(TensorList * list, ListOf(c, in, input));
  // The executor moves a value into the last kernel that reads it: when nothing else holds the
  // tensor's vector nor the list, the list is this kernel's to change.
  Tensor out = std::move(in);
  out.MakeUnique();
  std::shared_ptr<VariantValue>& slot = out.variants()[0];
  if (slot.use_count() > 1) slot = std::make_shared<TensorList>(*list);
  TensorList* mine = static_cast<TensorList*>(slot.get());
  c.set_output(output, std::move(out));
  return mine;
}

StatusOr<PartialShape> PartialShapeFromTensor(const Tensor& t) {
  if (t.dtype() != DT_INT32 && t.dtype() != DT_INT64) {
    return Status::Error("a shape must be int32 or int64, not " + DataTypeName(t.dtype()));
  }
  if (t.rank() == 0) {
    if (t.GetAsInt64(0) == -1) return PartialShape::UnknownRank();
    return Status::Error("a scalar shape must be -1 (unknown rank), got " +
                         std::to_string(t.GetAsInt64(0)));
  }
  if (t.rank() != 1) return Status::Error("a shape must be a vector, got rank " +
                                          std::to_string(t.rank()));
  std::vector<int64_t> dims = t.AsInt64Vector();
  for (int64_t d : dims) {
    if (d < -1) return Status::Error("invalid dimension " + std::to_string(d) + " in a shape");
  }
  return PartialShape(std::move(dims));
}

Tensor PartialShapeToTensor(const PartialShape& shape, DataType dtype) {
  if (shape.unknown_rank()) return IntTensor(dtype, {-1}, {});
  return IntTensor(dtype, shape.dims(), {shape.rank()});
}

Status CheckElement(const OpKernelContext& c, const TensorList& list, const Tensor& t) {
  if (t.dtype() != list.element_dtype) {
    return c.Error("Invalid data types; list elements " + DataTypeName(list.element_dtype) +
                   " but tried to append " + DataTypeName(t.dtype()));
  }
  if (!list.element_shape.IsCompatibleWith(t.dims())) {
    return c.Error("Tried to set a tensor with incompatible shape at a list index. Item element "
                   "shape: " + DimsToString(t.dims()) +
                   " list shape: " + list.element_shape.ToString());
  }
  return OkStatus();
}

StatusOr<Tensor> ListElementOrZeros(const OpKernelContext& c, const TensorList& list, int64_t i,
                                    const PartialShape& shape) {
  const Tensor& t = list.tensors[i];
  if (t.IsInitialized()) return t;
  if (!list.element_shape.IsCompatibleWith(shape)) {
    return c.Error("Incompatible shapes: the list's element shape is " +
                   list.element_shape.ToString() + ", the op asks for " + shape.ToString());
  }
  PartialShape merged = list.element_shape.Merge(shape);
  if (merged.unknown_rank()) merged = shape;
  if (!merged.IsFullyDefined()) {
    // TensorFlow takes the shape from another element that is set.
    for (const Tensor& other : list.tensors) {
      if (other.IsInitialized() && merged.IsCompatibleWith(other.dims())) {
        merged = PartialShape(other.dims());
        break;
      }
    }
  }
  if (!merged.IsFullyDefined()) {
    return c.Error("Trying to read an uninitialized tensor but element_shape is not fully "
                   "defined: " + merged.ToString() + " and no list element is set.");
  }
  return Tensor::Create(list.element_dtype, merged.dims(), c.max_tensor_bytes());
}

std::shared_ptr<TensorList> ZerosLikeList(const TensorList& list) {
  auto out = std::make_shared<TensorList>();
  out->element_dtype = list.element_dtype;
  out->element_shape = list.element_shape;
  out->max_num_elements = list.max_num_elements;
  out->tensors.resize(list.tensors.size());
  for (size_t i = 0; i < list.tensors.size(); ++i) {
    if (list.tensors[i].IsInitialized()) {
      out->tensors[i] = Tensor(list.tensors[i].dtype(), list.tensors[i].dims());
    }
  }
  return out;
}

StatusOr<std::shared_ptr<TensorList>> AddLists(const TensorList& a, const TensorList& b) {
  if (a.element_dtype != b.element_dtype) {
    return Status::Error("cannot add lists of " + DataTypeName(a.element_dtype) + " and " +
                         DataTypeName(b.element_dtype) + " elements");
  }
  if (a.tensors.size() != b.tensors.size()) {
    return Status::Error("cannot add lists of different sizes (" + std::to_string(a.tensors.size()) +
                         " and " + std::to_string(b.tensors.size()) + ")");
  }
  auto out = std::make_shared<TensorList>();
  out->element_dtype = a.element_dtype;
  out->element_shape = a.element_shape.Merge(b.element_shape);
  out->max_num_elements = a.max_num_elements;
  out->tensors.resize(a.tensors.size());
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const Tensor& x = a.tensors[i];
    const Tensor& y = b.tensors[i];
    if (!x.IsInitialized() || !y.IsInitialized()) {
      out->tensors[i] = x.IsInitialized() ? x : y;
      continue;
    }
    if (x.dims() != y.dims()) {
      return Status::Error("cannot add list elements of shapes " + DimsToString(x.dims()) +
                           " and " + DimsToString(y.dims()));
    }
    Tensor sum(x.dtype(), x.dims());
    for (int64_t k = 0; k < x.num_elements(); ++k) {
      sum.SetFromDouble(k, x.GetAsDouble(k) + y.GetAsDouble(k));
    }
    out->tensors[i] = std::move(sum);
  }
  return out;
}

}  // namespace xlens::graph
