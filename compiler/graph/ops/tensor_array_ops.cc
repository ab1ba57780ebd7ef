// TensorFlow's v1 TensorArray (data_flow_ops.cc, tensor_array_ops.cc): what tf.compat.v1
// while_loop graphs carry their per-iteration values in. A TensorArrayV3 node makes an array of
// `size` slots and returns a resource handle to it and a "flow" scalar; every write returns a new
// flow, which orders the reads after it. The array lives as long as handles to it do (TensorFlow
// keeps it in the run's step container), so nothing of it outlives the run. Gradient arrays
// (TensorArrayGradV3) hang off the array they are the gradient of, one per source, and sum the
// values written twice to a slot, as TensorFlow's do. The v1 gradient of a while_loop keeps the
// forward loop's values for the backward loop on stacks (StackV2, StackPushV2, StackPopV2),
// which live the same way.
#include <map>
#include <mutex>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/op_util.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

class TensorArray : public VariantValue {
 public:
  struct Slot {
    Tensor value;
    bool written = false;
    bool cleared = false;  // read once with clear_after_read
  };

  std::mutex mu;
  std::string name;
  DataType dtype = DT_INVALID;
  PartialShape element_shape;
  bool dynamic_size = false;
  bool clear_after_read = true;
  bool identical_element_shapes = false;
  bool multiple_writes_aggregate = false;  // a gradient array
  std::vector<Slot> slots;
  std::map<std::string, std::shared_ptr<TensorArray>> grads;  // by source

  std::string TypeName() const override { return "tensorflow::TensorArray"; }
  std::string DebugString() const override {
    return "TensorArray<" + DataTypeName(dtype) + ">[" + std::to_string(slots.size()) + "] " + name;
  }
  std::shared_ptr<VariantValue> Clone() const override {
    auto copy = std::make_shared<TensorArray>();
    copy->name = name;
    copy->dtype = dtype;
    copy->element_shape = element_shape;
    copy->dynamic_size = dynamic_size;
    copy->clear_after_read = clear_after_read;
    copy->identical_element_shapes = identical_element_shapes;
    copy->multiple_writes_aggregate = multiple_writes_aggregate;
    copy->slots = slots;
    return copy;
  }
  bool Identical(const VariantValue& other) const override { return this == &other; }
};

StatusOr<std::shared_ptr<TensorArray>> ArrayOf(const OpKernelContext& c, int i) {
  const Tensor& t = c.input(i);
  if (t.dtype() != DT_RESOURCE || t.num_elements() != 1) {
    return c.Error("input " + std::to_string(i) + " must be a TensorArray handle");
  }
  auto array = std::dynamic_pointer_cast<TensorArray>(t.handle().object);
  if (array == nullptr) {
    return c.Error("the handle '" + t.handle().name + "' does not name a TensorArray of this run");
  }
  return array;
}

Tensor HandleFor(const std::shared_ptr<TensorArray>& array) {
  ResourceHandle h;
  h.container = "_tensor_arrays";
  h.name = array->name;
  h.dtype = array->dtype;
  h.shape = array->element_shape;
  h.object = array;
  return Tensor::ResourceScalar(std::move(h));
}

Tensor Flow(const OpKernelContext& c, int input) {
  if (input < c.num_inputs() && c.input(input).dtype() == DT_FLOAT) return c.input(input);
  return Tensor::Scalar<float>(DT_FLOAT, 0.0f);
}

// ---- writes and reads (the array's lock held) ----------------------------------------------

Status Write(const OpKernelContext& c, TensorArray& a, int64_t index, Tensor value) {
  if (value.dtype() != a.dtype) {
    return c.Error("TensorArray dtype is " + DataTypeName(a.dtype) +
                   " but Op is trying to write dtype " + DataTypeName(value.dtype()) + ".");
  }
  if (index < 0) {
    return c.Error("Tried to write to index " + std::to_string(index) +
                   " but array size is: " + std::to_string(a.slots.size()));
  }
  if (index >= static_cast<int64_t>(a.slots.size())) {
    if (!a.dynamic_size) {
      return c.Error("Tried to write to index " + std::to_string(index) +
                     " but array is not resizeable and size is: " + std::to_string(a.slots.size()));
    }
    if (index >= c.max_tensor_bytes() / 64) return c.Error("index past the executor's limit");
    a.slots.resize(index + 1);
  }
  if (!a.element_shape.IsCompatibleWith(value.dims())) {
    return c.Error("Could not write to TensorArray index " + std::to_string(index) +
                   " because the value shape is " + DimsToString(value.dims()) +
                   " which is incompatible with the TensorArray's inferred element shape: " +
                   a.element_shape.ToString() + " (consider setting infer_shape=False).");
  }
  if (a.identical_element_shapes) a.element_shape = PartialShape(value.dims());
  TensorArray::Slot& slot = a.slots[index];
  if (slot.cleared) {
    return c.Error("Could not write to TensorArray index " + std::to_string(index) +
                   " because it has already been read and cleared.");
  }
  if (slot.written) {
    if (!a.multiple_writes_aggregate) {
      return c.Error("Could not write to TensorArray index " + std::to_string(index) +
                     " because it has already been written to.");
    }
    if (slot.value.dims() != value.dims()) {
      return c.Error("Could not aggregate to TensorArray index " + std::to_string(index) +
                     " because the existing shape is " + DimsToString(slot.value.dims()) +
                     " but the new input shape is " + DimsToString(value.dims()));
    }
    Tensor sum(value.dtype(), value.dims());
    for (int64_t k = 0; k < sum.num_elements(); ++k) {
      sum.SetFromDouble(k, slot.value.GetAsDouble(k) + value.GetAsDouble(k));
    }
    slot.value = std::move(sum);
    return OkStatus();
  }
  slot.value = std::move(value);
  slot.written = true;
  return OkStatus();
}

StatusOr<Tensor> Read(const OpKernelContext& c, TensorArray& a, int64_t index) {
  if (index < 0 || index >= static_cast<int64_t>(a.slots.size())) {
    return c.Error("Tried to read from index " + std::to_string(index) +
                   " but array size is: " + std::to_string(a.slots.size()));
  }
  TensorArray::Slot& slot = a.slots[index];
  if (slot.cleared) {
    return c.Error("Could not read index " + std::to_string(index) +
                   " twice because it was cleared after a previous read (perhaps try setting "
                   "clear_after_read = false?).");
  }
  if (!slot.written) {
    // An unwritten slot of a known shape reads as zeros (a gradient nothing flowed into).
    if (!a.element_shape.IsFullyDefined()) {
      return c.Error("Could not read from TensorArray index " + std::to_string(index) +
                     " because it has not yet been written to.");
    }
    return Tensor::Create(a.dtype, a.element_shape.dims(), c.max_tensor_bytes());
  }
  Tensor value = slot.value;
  if (a.clear_after_read && !a.multiple_writes_aggregate) {
    slot.value = Tensor();
    slot.cleared = true;
  }
  return value;
}

// ---- kernels --------------------------------------------------------------------------------

Status TensorArrayKernel(OpKernelContext& c) {
  const Tensor& size = c.input(0);
  if (size.num_elements() != 1) return c.Error("TensorArray size must be scalar");
  const int64_t n = size.GetAsInt64(0);
  if (n < 0) return c.Error("Size should be >= 0.");
  if (n > c.max_tensor_bytes() / 64) return c.Error("a TensorArray of " + std::to_string(n) +
                                                    " elements is past the executor's limit");
  auto a = std::make_shared<TensorArray>();
  ASSIGN_OR_RETURN(a->dtype, c.GetAttr<DataType>("dtype"));
  ASSIGN_OR_RETURN(a->element_shape, c.GetAttr<PartialShape>("element_shape"));
  ASSIGN_OR_RETURN(a->dynamic_size, c.GetAttr<bool>("dynamic_size"));
  ASSIGN_OR_RETURN(a->clear_after_read, c.GetAttr<bool>("clear_after_read"));
  ASSIGN_OR_RETURN(a->identical_element_shapes, c.GetAttr<bool>("identical_element_shapes"));
  ASSIGN_OR_RETURN(std::string name, c.GetAttr<std::string>("tensor_array_name"));
  a->name = name.empty() ? c.name() : name;
  a->slots.resize(n);
  c.set_output(0, HandleFor(a));
  c.set_output(1, Tensor::Scalar<float>(DT_FLOAT, 0.0f));
  return OkStatus();
}

Status WriteKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  std::lock_guard<std::mutex> lock(a->mu);
  RETURN_IF_ERROR(Write(c, *a, c.input(1).GetAsInt64(0), c.input(2)));
  c.set_output(0, Flow(c, 3));
  return OkStatus();
}

Status ReadKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, c.GetAttr<DataType>("dtype"));
  std::lock_guard<std::mutex> lock(a->mu);
  if (dtype != a->dtype) {
    return c.Error("TensorArray dtype is " + DataTypeName(a->dtype) +
                   " but Op requested dtype " + DataTypeName(dtype) + ".");
  }
  ASSIGN_OR_RETURN(Tensor value, Read(c, *a, c.input(1).GetAsInt64(0)));
  c.set_output(0, std::move(value));
  return OkStatus();
}

Status GatherKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  ASSIGN_OR_RETURN(DataType dtype, c.GetAttr<DataType>("dtype"));
  ASSIGN_OR_RETURN(PartialShape attr_shape, c.GetAttr<PartialShape>("element_shape"));
  std::lock_guard<std::mutex> lock(a->mu);
  if (dtype != a->dtype) {
    return c.Error("TensorArray dtype is " + DataTypeName(a->dtype) +
                   " but Op requested dtype " + DataTypeName(dtype) + ".");
  }
  std::vector<int64_t> indices = c.input(1).AsInt64Vector();
  std::vector<Tensor> values;
  for (int64_t i : indices) {
    ASSIGN_OR_RETURN(Tensor v, Read(c, *a, i));
    if (!values.empty() && v.dims() != values[0].dims()) {
      return c.Error("TensorArray has inconsistent shapes.  Index 0 has shape: " +
                     DimsToString(values[0].dims()) + " but index " +
                     std::to_string(values.size()) + " has shape: " + DimsToString(v.dims()));
    }
    values.push_back(std::move(v));
  }
  std::vector<int64_t> element;
  if (!values.empty()) {
    element = values[0].dims();
  } else {
    PartialShape s = a->element_shape.unknown_rank() ? attr_shape : a->element_shape;
    if (!s.IsFullyDefined()) {
      return c.Error("TensorArray has size zero, but element shape " + s.ToString() +
                     " is not fully defined. Currently only static shapes are supported when "
                     "packing zero-size TensorArrays.");
    }
    element = s.dims();
  }
  std::vector<int64_t> dims{static_cast<int64_t>(values.size())};
  dims.insert(dims.end(), element.begin(), element.end());
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  const int64_t step = NumElements(element);
  for (size_t k = 0; k < values.size(); ++k) {
    CopyElements(values[k], 0, *out, static_cast<int64_t>(k) * step, step);
  }
  return OkStatus();
}

Status ScatterKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  const Tensor& value = c.input(2);
  std::vector<int64_t> indices = c.input(1).AsInt64Vector();
  if (value.rank() < 1 || value.dim(0) != static_cast<int64_t>(indices.size())) {
    return c.Error("Expected len(indices) == values.shape[0], but saw: " +
                   std::to_string(indices.size()) + " vs. " +
                   (value.rank() < 1 ? std::string("a scalar") : std::to_string(value.dim(0))));
  }
  std::vector<int64_t> element(value.dims().begin() + 1, value.dims().end());
  const int64_t step = NumElements(element);
  std::lock_guard<std::mutex> lock(a->mu);
  for (size_t k = 0; k < indices.size(); ++k) {
    Tensor e(value.dtype(), element);
    CopyElements(value, static_cast<int64_t>(k) * step, e, 0, step);
    RETURN_IF_ERROR(Write(c, *a, indices[k], std::move(e)));
  }
  c.set_output(0, Flow(c, 3));
  return OkStatus();
}

Status ConcatKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  ASSIGN_OR_RETURN(PartialShape except0, c.GetAttr<PartialShape>("element_shape_except0"));
  std::lock_guard<std::mutex> lock(a->mu);
  std::vector<Tensor> values;
  std::vector<int64_t> lengths;
  std::vector<int64_t> inner;
  bool have_inner = false;
  for (size_t i = 0; i < a->slots.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor v, Read(c, *a, static_cast<int64_t>(i)));
    if (v.rank() < 1) {
      return c.Error("Concat saw a scalar shape at index " + std::to_string(i) +
                     " but requires at least vectors.");
    }
    std::vector<int64_t> d(v.dims().begin() + 1, v.dims().end());
    if (have_inner && d != inner) {
      return c.Error("TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) "
                     "shape: " + DimsToString(inner) + " but index " + std::to_string(i) +
                     " has (excepting dimension 0) shape: " + DimsToString(d));
    }
    inner = d;
    have_inner = true;
    lengths.push_back(v.dim(0));
    values.push_back(std::move(v));
  }
  if (!have_inner) {
    if (!except0.IsFullyDefined()) {
      return c.Error("TensorArray has size zero, but element_shape_except0 " + except0.ToString() +
                     " is not fully defined. Currently only static shapes are supported when "
                     "concatenating zero-size TensorArrays.");
    }
    inner = except0.dims();
  }
  int64_t total = 0;
  for (int64_t l : lengths) total += l;
  std::vector<int64_t> dims{total};
  dims.insert(dims.end(), inner.begin(), inner.end());
  ASSIGN_OR_RETURN(Tensor * out, c.allocate_output(0, dims));
  const int64_t row = NumElements(inner);
  int64_t at = 0;
  for (size_t i = 0; i < values.size(); ++i) {
    CopyElements(values[i], 0, *out, at * row, lengths[i] * row);
    at += lengths[i];
  }
  c.set_output(1, IntTensor(DT_INT64, lengths, {static_cast<int64_t>(lengths.size())}));
  return OkStatus();
}

Status SplitKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  const Tensor& value = c.input(1);
  std::vector<int64_t> lengths = c.input(2).AsInt64Vector();
  if (value.rank() < 1) return c.Error("Expected value to be at least a vector, but received shape: " +
                                       DimsToString(value.dims()));
  const int64_t row = value.num_elements() / std::max<int64_t>(1, value.dim(0));
  int64_t start = 0;
  std::lock_guard<std::mutex> lock(a->mu);
  for (size_t i = 0; i < lengths.size(); ++i) {
    if (lengths[i] < 0 || start + lengths[i] > value.dim(0)) {
      return c.Error("Expected sum of lengths to be equal to values.shape[0], but sum of lengths "
                     "is past " + std::to_string(value.dim(0)));
    }
    std::vector<int64_t> dims = value.dims();
    dims[0] = lengths[i];
    Tensor e(value.dtype(), dims);
    CopyElements(value, start * row, e, 0, lengths[i] * row);
    RETURN_IF_ERROR(Write(c, *a, static_cast<int64_t>(i), std::move(e)));
    start += lengths[i];
  }
  if (start != value.dim(0)) {
    return c.Error("Expected sum of lengths to be equal to values.shape[0], but sum of lengths "
                   "is: " + std::to_string(start) + " and value's shape is: " +
                   DimsToString(value.dims()));
  }
  c.set_output(0, Flow(c, 3));
  return OkStatus();
}

Status SizeKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  std::lock_guard<std::mutex> lock(a->mu);
  c.set_output(0, Tensor::Scalar<int32_t>(DT_INT32, static_cast<int32_t>(a->slots.size())));
  return OkStatus();
}

Status CloseKernel(OpKernelContext& c) {
  // The array goes with its last handle; closing frees its values now.
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  std::lock_guard<std::mutex> lock(a->mu);
  for (TensorArray::Slot& s : a->slots) s.value = Tensor();
  return OkStatus();
}

Status GradKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<TensorArray> a, ArrayOf(c, 0));
  ASSIGN_OR_RETURN(std::string source, c.GetAttr<std::string>("source"));
  std::vector<int64_t> prepend;
  if (c.op() == "TensorArrayGradWithShape") prepend = c.input(2).AsInt64Vector();
  std::lock_guard<std::mutex> lock(a->mu);
  std::shared_ptr<TensorArray>& grad = a->grads[source];
  if (grad == nullptr) {
    grad = std::make_shared<TensorArray>();
    grad->name = a->name + "@" + source;
    grad->dtype = a->dtype;
    grad->element_shape = a->element_shape;
    if (!prepend.empty() && !a->element_shape.unknown_rank()) {
      std::vector<int64_t> dims = prepend;
      dims.insert(dims.end(), a->element_shape.dims().begin(), a->element_shape.dims().end());
      grad->element_shape = PartialShape(dims);
    }
    grad->clear_after_read = a->clear_after_read;
    grad->identical_element_shapes = a->identical_element_shapes;
    grad->multiple_writes_aggregate = true;
    grad->slots.resize(a->slots.size());
    // Written slots of the forward array fix the gradient's element shape where it is unknown.
    for (const TensorArray::Slot& s : a->slots) {
      if (s.written && s.value.IsInitialized() && !grad->element_shape.IsFullyDefined() &&
          prepend.empty()) {
        grad->element_shape = PartialShape(s.value.dims());
        break;
      }
    }
  }
  c.set_output(0, HandleFor(grad));
  c.set_output(1, Flow(c, 1));
  return OkStatus();
}

// ---- stacks --------------------------------------------------------------------------------

class Stack : public VariantValue {
 public:
  std::mutex mu;
  std::string name;
  DataType dtype = DT_INVALID;
  int64_t max_size = -1;  // negative: unbounded
  std::vector<Tensor> values;

  std::string TypeName() const override { return "tensorflow::Stack"; }
  std::string DebugString() const override {
    return "Stack<" + DataTypeName(dtype) + ">[" + std::to_string(values.size()) + "] " + name;
  }
  std::shared_ptr<VariantValue> Clone() const override {
    auto copy = std::make_shared<Stack>();
    copy->name = name;
    copy->dtype = dtype;
    copy->max_size = max_size;
    copy->values = values;
    return copy;
  }
  bool Identical(const VariantValue& other) const override { return this == &other; }
};

StatusOr<std::shared_ptr<Stack>> StackOf(const OpKernelContext& c) {
  const Tensor& t = c.input(0);
  std::shared_ptr<Stack> stack;
  if (t.dtype() == DT_RESOURCE && t.num_elements() == 1) {
    stack = std::dynamic_pointer_cast<Stack>(t.handle().object);
  }
  if (stack == nullptr) return c.Error("input 0 is not a stack handle of this run");
  return stack;
}

Status StackKernel(OpKernelContext& c) {
  auto stack = std::make_shared<Stack>();
  ASSIGN_OR_RETURN(stack->dtype, c.GetAttr<DataType>("elem_type"));
  ASSIGN_OR_RETURN(std::string name, c.GetAttr<std::string>("stack_name"));
  stack->name = name.empty() ? c.name() : name;
  stack->max_size = c.input(0).GetAsInt64(0);
  ResourceHandle h;
  h.container = "_stacks";
  h.name = stack->name;
  h.dtype = stack->dtype;
  h.object = stack;
  c.set_output(0, Tensor::ResourceScalar(std::move(h)));
  return OkStatus();
}

Status StackPushKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, StackOf(c));
  std::lock_guard<std::mutex> lock(stack->mu);
  if (c.input(1).dtype() != stack->dtype) {
    return c.Error("Stack[" + stack->name + "] holds " + DataTypeName(stack->dtype) +
                   ", not " + DataTypeName(c.input(1).dtype()));
  }
  if (stack->max_size >= 0 && static_cast<int64_t>(stack->values.size()) >= stack->max_size) {
    return c.Error("Stack[" + stack->name + "] overflowed its max_size (" +
                   std::to_string(stack->max_size) + ")");
  }
  stack->values.push_back(c.input(1));
  c.set_output(0, c.input(1));
  return OkStatus();
}

Status StackPopKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, StackOf(c));
  std::lock_guard<std::mutex> lock(stack->mu);
  if (stack->values.empty()) return c.Error("Stack[" + stack->name + "] is empty.");
  c.set_output(0, std::move(stack->values.back()));
  stack->values.pop_back();
  return OkStatus();
}

Status StackCloseKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(std::shared_ptr<Stack> stack, StackOf(c));
  std::lock_guard<std::mutex> lock(stack->mu);
  stack->values.clear();
  return OkStatus();
}

// ---- shapes ---------------------------------------------------------------------------------

Status TensorArrayShape(InferenceContext& c) {
  c.set_output(0, PartialShape({2}));
  c.set_output(1, PartialShape::Scalar());
  const AttrValue* shape = FindAttr(c.attrs(), "element_shape");
  const AttrValue* dtype = FindAttr(c.attrs(), "dtype");
  if (shape && dtype && shape->kind() == AttrValue::Kind::kShape) {
    c.set_output_handle_shape(0, shape->shape(), dtype->type());
  }
  return OkStatus();
}

Status ReadShape(InferenceContext& c) {
  const auto& h = c.input_handle_shape(0);
  c.set_output(0, h ? h->first : PartialShape::UnknownRank());
  return OkStatus();
}

Status GatherShape(InferenceContext& c) {
  PartialShape element = PartialShape::UnknownRank();
  if (const AttrValue* s = FindAttr(c.attrs(), "element_shape");
      s && s->kind() == AttrValue::Kind::kShape) {
    element = s->shape();
  }
  if (element.unknown_rank() && c.input_handle_shape(0)) element = c.input_handle_shape(0)->first;
  if (element.unknown_rank()) {
    c.set_output(0, PartialShape::UnknownRank());
    return OkStatus();
  }
  const PartialShape& idx = c.input(1);
  std::vector<int64_t> dims{idx.rank() == 1 ? idx.dim(0) : PartialShape::kUnknownDim};
  dims.insert(dims.end(), element.dims().begin(), element.dims().end());
  c.set_output(0, PartialShape(std::move(dims)));
  return OkStatus();
}

Status GradShape(InferenceContext& c) {
  c.set_output(0, PartialShape({2}));
  c.set_output(1, PartialShape::Scalar());
  if (c.input_handle_shape(0)) {
    c.set_output_handle_shape(0, c.input_handle_shape(0)->first, c.input_handle_shape(0)->second);
  }
  return OkStatus();
}

}  // namespace

void RegisterTensorArrayOps(OpRegistry& r) {
  REGISTER_OP(r, "TensorArrayV3")
      .Input("size: int32")
      .Output("handle: resource")
      .Output("flow: float")
      .Attr("dtype: type")
      .Attr("element_shape: shape = { unknown_rank: true }")
      .Attr("dynamic_size: bool = false")
      .Attr("clear_after_read: bool = true")
      .Attr("identical_element_shapes: bool = false")
      .Attr("tensor_array_name: string = ''")
      .SetIsStateful()
      .SetShapeFn(TensorArrayShape)
      .SetKernel(TensorArrayKernel);
  REGISTER_OP(r, "TensorArrayWriteV3")
      .Input("handle: resource")
      .Input("index: int32")
      .Input("value: T")
      .Input("flow_in: float")
      .Output("flow_out: float")
      .Attr("T: type")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(WriteKernel);
  REGISTER_OP(r, "TensorArrayReadV3")
      .Input("handle: resource")
      .Input("index: int32")
      .Input("flow_in: float")
      .Output("value: dtype")
      .Attr("dtype: type")
      .SetIsStateful()
      .SetShapeFn(ReadShape)
      .SetKernel(ReadKernel);
  REGISTER_OP(r, "TensorArrayGatherV3")
      .Input("handle: resource")
      .Input("indices: int32")
      .Input("flow_in: float")
      .Output("value: dtype")
      .Attr("dtype: type")
      .Attr("element_shape: shape = { unknown_rank: true }")
      .SetIsStateful()
      .SetShapeFn(GatherShape)
      .SetKernel(GatherKernel);
  REGISTER_OP(r, "TensorArrayScatterV3")
      .Input("handle: resource")
      .Input("indices: int32")
      .Input("value: T")
      .Input("flow_in: float")
      .Output("flow_out: float")
      .Attr("T: type")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(ScatterKernel);
  REGISTER_OP(r, "TensorArrayConcatV3")
      .Input("handle: resource")
      .Input("flow_in: float")
      .Output("value: dtype")
      .Output("lengths: int64")
      .Attr("dtype: type")
      .Attr("element_shape_except0: shape = { unknown_rank: true }")
      .SetIsStateful()
      .SetShapeFn([](InferenceContext& c) {
        c.set_output(0, PartialShape::UnknownRank());
        c.set_output(1, PartialShape::UnknownOfRank(1));
        return OkStatus();
      })
      .SetKernel(ConcatKernel);
  REGISTER_OP(r, "TensorArraySplitV3")
      .Input("handle: resource")
      .Input("value: T")
      .Input("lengths: int64")
      .Input("flow_in: float")
      .Output("flow_out: float")
      .Attr("T: type")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(SplitKernel);
  REGISTER_OP(r, "TensorArraySizeV3")
      .Input("handle: resource")
      .Input("flow_in: float")
      .Output("size: int32")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(SizeKernel);
  REGISTER_OP(r, "TensorArrayCloseV3")
      .Input("handle: resource")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(CloseKernel);
  REGISTER_OP(r, "TensorArrayGradV3")
      .Input("handle: resource")
      .Input("flow_in: float")
      .Output("grad_handle: resource")
      .Output("flow_out: float")
      .Attr("source: string")
      .SetIsStateful()
      .SetShapeFn(GradShape)
      .SetKernel(GradKernel);
  REGISTER_OP(r, "TensorArrayGradWithShape")
      .Input("handle: resource")
      .Input("flow_in: float")
      .Input("shape_to_prepend: int32")
      .Output("grad_handle: resource")
      .Output("flow_out: float")
      .Attr("source: string")
      .SetIsStateful()
      .SetShapeFn(GradShape)
      .SetKernel(GradKernel)
      .NoXlaKernel();

  REGISTER_OP(r, "StackV2")
      .Input("max_size: int32")
      .Output("handle: resource")
      .Attr("elem_type: type")
      .Attr("stack_name: string = ''")
      .SetIsStateful()
      .SetShapeFn(shape_fn::ScalarShape)
      .SetKernel(StackKernel);
  REGISTER_OP(r, "StackPushV2")
      .Input("handle: resource")
      .Input("elem: T")
      .Output("output: T")
      .Attr("T: type")
      .Attr("swap_memory: bool = false")
      .SetIsStateful()
      .SetShapeFn([](InferenceContext& c) {
        c.set_output(0, c.input(1));
        return OkStatus();
      })
      .SetKernel(StackPushKernel);
  REGISTER_OP(r, "StackPopV2")
      .Input("handle: resource")
      .Output("elem: elem_type")
      .Attr("elem_type: type")
      .SetIsStateful()
      .SetShapeFn(shape_fn::UnknownShape)
      .SetKernel(StackPopKernel);
  REGISTER_OP(r, "StackCloseV2")
      .Input("handle: resource")
      .SetIsStateful()
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel(StackCloseKernel);
}

}  // namespace xlens::graph
