// TensorFlow's v1 TensorArrays as tf2xla lowers them (tensor_array_ops.cc): TensorArrayV3 makes a
// resource whose value is one buffer [size, element...], the size a compile-time constant. The
// handle flows through the graph and into loops as a resource, so a functional While carries the
// buffer in its state like a variable's value (and XLA updates it in place); the flow tensor is
// only an ordering token and passes through unchanged.
//   Write / Read: dynamic-update-slice / dynamic-slice of one row at the index.
//   Gather / Scatter: the rows at an index vector (a gather; one update per index).
//   Concat / Split: the buffer reshaped, every element of the same length (as tf2xla requires).
//   Size: the constant size. Close: nothing.
//   GradV3: the gradient array of a source, made once per array and source: zeros of the
//     array's shape, and every write to it adds (several reads of one element in the forward
//     graph give several writes of its gradient, which sum).
// An array whose element shape TensorArrayV3 leaves partial takes it from its first write. A loop
// carries the gradient arrays its body takes (while_resources.h); one taken inside a branch would
// not be carried out of it, so it is refused there with the node named.
#include <fmt/format.h>

#include <memory>
#include <numeric>

#include "compiler/cluster/tf2xla/buffer_rows.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/tensor_list.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/module.h"

namespace xlens::cluster {

namespace {

using graph::DataType;
using graph::Tensor;

StatusOr<XlaResource*> ArrayInput(XlaOpKernelContext& ctx, int i) {
  const XlaExpression& e = ctx.input_expression(i);
  if (e.kind() != XlaExpression::Kind::kResource ||
      e.resource()->kind != XlaResource::Kind::kTensorArray) {
    return ctx.Error(fmt::format("input {} must be a TensorArray handle", i));
  }
  return e.resource();
}

// The buffer with `element` written at `row`, or added to what is there (a gradient array).
StatusOr<HloInstruction*> WriteRow(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                   HloInstruction* row, HloInstruction* element, bool add) {
  if (add) {
    ASSIGN_OR_RETURN(HloInstruction * old, ReadBufferRow(ctx, buffer, row));
    LOWER_OR_RETURN(element, ctx, ctx.builder().Binary(HloOpcode::kAdd, old, element));
  }
  return WriteBufferRow(ctx, buffer, row, element);
}

std::vector<int64_t> ElementDims(const XlaResource& a) {
  const std::vector<int64_t>& dims = a.value->shape().dimensions();
  return std::vector<int64_t>(dims.begin() + 1, dims.end());
}

std::string ShapeWords(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

// The array, given its element shape by a write of `element` dims if it has none yet (tf2xla's
// MaybeInitializeTensorArray); an error when the write does not fit the shape it has.
Status InitializeFor(XlaOpKernelContext& ctx, XlaResource& a, PrimitiveType type,
                     const std::vector<int64_t>& element) {
  if (a.value == nullptr) {
    LOWER_OR_RETURN(a.value, ctx,
                    ctx.builder().FullConstant(type, 0, BufferDims(a.size, element)));
    a.initial_value = a.value;
    return OkStatus();
  }
  if (ElementDims(a) != element || a.value->shape().element_type() != type) {
    return ctx.Error(fmt::format("TensorArray '{}' holds elements of {} {}, not {} {}", a.name,
                                 PrimitiveTypeName(a.value->shape().element_type()),
                                 ShapeWords(ElementDims(a)), PrimitiveTypeName(type),
                                 ShapeWords(element)));
  }
  return OkStatus();
}

Status RequireInitialized(XlaOpKernelContext& ctx, const XlaResource& a) {
  if (a.value != nullptr) return OkStatus();
  return ctx.Error(fmt::format("TensorArray '{}' is read before any write gave its elements a "
                               "shape, which a compiled read needs",
                               a.name));
}

// The flow output: the flow input, unchanged.
void PassFlow(XlaOpKernelContext& ctx, int output, int input) {
  ctx.SetOutputExpression(output, ctx.input_expression(input));
}

Status TensorArrayLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(Tensor size, ctx.ConstantInput(0));
  if (size.num_elements() != 1 || size.GetAsInt64(0) < 0) {
    return ctx.Error("TensorArray size must be a non-negative scalar");
  }
  ASSIGN_OR_RETURN(DataType dtype, ctx.GetTypeAttr("dtype"));
  ASSIGN_OR_RETURN(PrimitiveType type, XlaType(ctx, dtype));
  ASSIGN_OR_RETURN(bool dynamic_size, ctx.GetBoolAttr("dynamic_size"));
  if (dynamic_size) {
    return ctx.Error("a TensorArray of dynamic size cannot be compiled: XLA's buffers have a "
                     "size fixed at compile time");
  }
  auto a = std::make_shared<XlaResource>();
  a->kind = XlaResource::Kind::kTensorArray;
  a->name = ctx.name();
  a->dtype = dtype;
  a->size = size.GetAsInt64(0);
  const graph::AttrValue* shape = graph::FindAttr(ctx.attrs(), "element_shape");
  if (shape != nullptr && shape->kind() == graph::AttrValue::Kind::kShape &&
      shape->shape().IsFullyDefined()) {
    RETURN_IF_ERROR(InitializeFor(ctx, *a, type, shape->shape().dims()));
  }
  ctx.SetOutputExpression(0, XlaExpression::OwnedResource(std::move(a)));
  ctx.SetConstantOutput(1, Tensor::Scalar<float>(graph::DT_FLOAT, 0.0f));
  return OkStatus();
}

Status ArrayWriteLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  ASSIGN_OR_RETURN(HloInstruction * index, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(2));
  RETURN_IF_ERROR(InitializeFor(ctx, *a, value->shape().element_type(), value->shape().dimensions()));
  ASSIGN_OR_RETURN(a->value, WriteRow(ctx, a->value, index, value, a->gradient));
  a->modified = true;
  PassFlow(ctx, 0, 3);
  return OkStatus();
}

Status ArrayReadLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  RETURN_IF_ERROR(RequireInitialized(ctx, *a));
  ASSIGN_OR_RETURN(HloInstruction * index, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * element, ReadBufferRow(ctx, a->value, index));
  ctx.SetOutput(0, element);
  return OkStatus();
}

Status ArrayGatherLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  RETURN_IF_ERROR(RequireInitialized(ctx, *a));
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(1));
  if (indices->shape().rank() != 1) return ctx.Error("indices must be a vector");
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, GatherAlongAxis(ctx.builder(), a->value, indices, 0));
  ctx.SetOutput(0, out);
  return OkStatus();
}

Status ArrayScatterLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(2));
  const std::vector<int64_t>& vdims = value->shape().dimensions();
  if (vdims.empty()) return ctx.Error("the value to scatter must be at least a vector");
  const std::vector<int64_t> element(vdims.begin() + 1, vdims.end());
  RETURN_IF_ERROR(InitializeFor(ctx, *a, value->shape().element_type(), element));
  const std::vector<int64_t> idims = ctx.InputShape(1);
  if (idims.size() != 1 || idims[0] != vdims[0]) {
    return ctx.Error(fmt::format("{} indices for a value of {} rows", ShapeWords(idims), vdims[0]));
  }
  const int64_t n = vdims[0];
  // Every row in order into an array of that many: the value is the buffer (tf2xla's fast path).
  if (ctx.input_expression(1).kind() == XlaExpression::Kind::kConstant && n == a->size) {
    ASSIGN_OR_RETURN(std::vector<int64_t> indices, ctx.ConstantInputAsIntVector(1));
    std::vector<int64_t> in_order(n);
    std::iota(in_order.begin(), in_order.end(), 0);
    if (indices == in_order) {
      if (a->gradient) {
        LOWER_OR_RETURN(a->value, ctx, ctx.builder().Binary(HloOpcode::kAdd, a->value, value));
      } else {
        a->value = value;
      }
      a->modified = true;
      PassFlow(ctx, 0, 3);
      return OkStatus();
    }
  }
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(1));
  for (int64_t k = 0; k < n; ++k) {
    HloInstruction* index = nullptr;
    LOWER_OR_RETURN(index, ctx, ctx.builder().Slice(indices, {k}, {k + 1}, {1}));
    std::vector<int64_t> start(vdims.size(), 0), limit = vdims, strides(vdims.size(), 1);
    start[0] = k;
    limit[0] = k + 1;
    HloInstruction* row = nullptr;
    LOWER_OR_RETURN(row, ctx, ctx.builder().Slice(value, start, limit, strides));
    LOWER_OR_RETURN(row, ctx, ctx.builder().Reshape(row, element));
    ASSIGN_OR_RETURN(a->value, WriteRow(ctx, a->value, index, row, a->gradient));
  }
  a->modified = true;
  PassFlow(ctx, 0, 3);
  return OkStatus();
}

Status ArraySizeLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  ctx.SetConstantOutput(0, Tensor::Scalar<int32_t>(graph::DT_INT32, static_cast<int32_t>(a->size)));
  return OkStatus();
}

Status ArrayConcatLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  RETURN_IF_ERROR(RequireInitialized(ctx, *a));
  const std::vector<int64_t> element = ElementDims(*a);
  if (element.empty()) return ctx.Error("Concat of a TensorArray of scalars: no axis to join along");
  std::vector<int64_t> dims = element;
  dims[0] *= a->size;
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, ctx.builder().Reshape(a->value, dims));
  ctx.SetOutput(0, out);
  ctx.SetConstantOutput(1, Tensor::Vector<int64_t>(graph::DT_INT64,
                                                   std::vector<int64_t>(a->size, element[0])));
  return OkStatus();
}

Status ArraySplitLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  ASSIGN_OR_RETURN(HloInstruction * value, ctx.Input(1));
  ASSIGN_OR_RETURN(std::vector<int64_t> lengths, ctx.ConstantInputAsIntVector(2));
  const std::vector<int64_t>& vdims = value->shape().dimensions();
  if (vdims.empty()) return ctx.Error("the value to split must be at least a vector");
  if (static_cast<int64_t>(lengths.size()) != a->size) {
    return ctx.Error(fmt::format("{} lengths to split into TensorArray '{}' of {} elements",
                                 lengths.size(), a->name, a->size));
  }
  int64_t total = 0;
  for (int64_t l : lengths) {
    if (l != lengths[0]) {
      return ctx.Error("a compiled TensorArraySplit needs lengths that are all equal, as "
                       "TensorFlow's XLA does: each element is a row of one buffer");
    }
    total += l;
  }
  if (total != vdims[0]) {
    return ctx.Error(fmt::format("lengths sum to {}, the value has {} rows", total, vdims[0]));
  }
  std::vector<int64_t> element = vdims;
  element[0] = lengths.empty() ? 0 : lengths[0];
  RETURN_IF_ERROR(InitializeFor(ctx, *a, value->shape().element_type(), element));
  HloInstruction* rows = nullptr;
  LOWER_OR_RETURN(rows, ctx, ctx.builder().Reshape(value, BufferDims(a->size, element)));
  if (a->gradient) {
    LOWER_OR_RETURN(a->value, ctx, ctx.builder().Binary(HloOpcode::kAdd, a->value, rows));
  } else {
    a->value = rows;
  }
  a->modified = true;
  PassFlow(ctx, 0, 3);
  return OkStatus();
}

Status ArrayCloseLowering(XlaOpKernelContext&) { return OkStatus(); }

Status ArrayGradLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * a, ArrayInput(ctx, 0));
  RETURN_IF_ERROR(RequireInitialized(ctx, *a));
  const graph::AttrValue* source = graph::FindAttr(ctx.attrs(), "source");
  const std::string key = source != nullptr ? source->s() : "";
  HloBuilder& b = ctx.builder();
  auto found = a->gradients.find(key);
  const bool here = b.computation() == b.module()->entry_computation() || a->make_gradients;
  if ((found == a->gradients.end() && !here) ||
      (found != a->gradients.end() && found->second->value != nullptr &&
       found->second->value->parent() != b.computation())) {
    // A loop carries the gradients its body takes (while_resources.h); a branch does not, and
    // the writes to one made or used there would be lost when it ends.
    return ctx.Error(fmt::format("the gradient of TensorArray '{}' is taken inside a branch, "
                                 "which xlens does not carry out of it yet",
                                 a->name));
  }
  std::shared_ptr<XlaResource>& grad = a->gradients[key];
  if (grad == nullptr) {
    grad = std::make_shared<XlaResource>();
    grad->kind = XlaResource::Kind::kTensorArray;
    grad->name = a->name + "@" + key;
    grad->dtype = a->dtype;
    grad->size = a->size;
    grad->gradient = true;
    LOWER_OR_RETURN(grad->value, ctx,
                    b.FullConstant(a->value->shape().element_type(), 0,
                                   a->value->shape().dimensions()));
    grad->initial_value = grad->value;
  }
  ctx.SetOutputExpression(0, XlaExpression::OwnedResource(grad));
  PassFlow(ctx, 1, 1);
  return OkStatus();
}

}  // namespace

void RegisterTensorArrayXlaOps(XlaOpRegistry& r) {
  r.Register("TensorArrayV3", TensorArrayLowering);
  r.Register("TensorArrayWriteV3", ArrayWriteLowering);
  r.Register("TensorArrayReadV3", ArrayReadLowering);
  r.Register("TensorArrayGatherV3", ArrayGatherLowering);
  r.Register("TensorArrayScatterV3", ArrayScatterLowering);
  r.Register("TensorArraySizeV3", ArraySizeLowering);
  r.Register("TensorArrayConcatV3", ArrayConcatLowering);
  r.Register("TensorArraySplitV3", ArraySplitLowering);
  r.Register("TensorArrayCloseV3", ArrayCloseLowering);
  r.Register("TensorArrayGradV3", ArrayGradLowering);
}

}  // namespace xlens::cluster
