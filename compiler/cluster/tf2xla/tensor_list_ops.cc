// The TensorList ops as tf2xla lowers them (tensor_list_ops.cc, tensor_list_utils.cc): a list of
// known size and element shape is the tuple (buffer, push_index) of HLO values, the buffer
// holding every element along a new leading dimension. GetItem and SetItem become dynamic-slice
// and dynamic-update-slice at the index, PushBack writes at the push index and moves it on,
// Stack is the buffer itself, FromTensor takes the tensor as the buffer. Inside a functional
// While the tuple is one element of the loop state, so the buffer is carried (and updated in
// place by XLA) from iteration to iteration. A list whose element shape is not known yet is
// uninitialized (tf2xla's s32[size] of zeros) until its first write fixes the shape; a While
// carrying one compiles its body twice (functional_ops.cc). A list whose size is not a
// compile-time constant is refused with the node and what is unknown.
//
// A list of lists (what the gradient of a loop inside a loop accumulates: the inner loop's lists,
// one per outer iteration) is tf2xla's nested TensorList: each part of the element list's tuple
// stacked along a new leading dimension, then the outer push index: (buffer [n, m, ...], the
// inner push indices [n], push_index). Reading and writing an element read and write every part.
#include "compiler/cluster/tf2xla/tensor_list_ops.h"

#include <fmt/format.h>

#include <cstring>
#include <map>
#include <optional>

#include "compiler/cluster/tf2xla/buffer_rows.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/tensor_list.h"
#include "compiler/hlo/computation.h"

namespace xlens::cluster {

bool IsUninitializedTensorList(const HloInstruction* list) {
  return list != nullptr && !list->shape().IsTuple() && list->shape().rank() == 1 &&
         list->shape().element_type() == PrimitiveType::S32;
}

bool SameConstant(const graph::Tensor& a, const graph::Tensor& b) {
  if (a.dtype() != b.dtype() || a.dims() != b.dims() || a.byte_size() != b.byte_size()) {
    return false;
  }
  return a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0;
}

bool IsFreshList(const XlaExpression& list) {
  return list.kind() == XlaExpression::Kind::kXlaOp &&
         (IsUninitializedTensorList(list.handle()) || list.fresh_list());
}

StatusOr<HloInstruction*> InitialListOfShape(HloBuilder& builder, const Shape& list_shape) {
  if (!list_shape.IsTuple() || list_shape.tuple_shapes().size() < 2) {
    return Status::Error("a loop's list must leave its body as a (buffer, push index) tuple, not " +
                         list_shape.ToString(false));
  }
  std::vector<HloInstruction*> parts;
  const std::vector<Shape>& shapes = list_shape.tuple_shapes();
  for (size_t k = 0; k + 1 < shapes.size(); ++k) {
    if (shapes[k].IsTuple()) {
      return Status::Error("a loop's list holds a tuple part " + shapes[k].ToString(false));
    }
    ASSIGN_OR_RETURN(HloInstruction * zeros,
                     builder.FullConstant(shapes[k].element_type(), 0, shapes[k].dimensions()));
    parts.push_back(zeros);
  }
  ASSIGN_OR_RETURN(HloInstruction * index, builder.ScalarConstant(PrimitiveType::S32, 0));
  parts.push_back(index);
  return builder.Tuple(parts);
}

namespace {

using graph::DataType;
using graph::PartialShape;
using graph::Tensor;

// The list of input i: its buffer and push index, and for a list of lists the stacked parts of
// its elements after their buffers (their push indices).
struct ListParts {
  HloInstruction* buffer = nullptr;
  std::vector<HloInstruction*> inner;
  HloInstruction* push_index = nullptr;
};

StatusOr<ListParts> InputList(XlaOpKernelContext& ctx, int i) {
  const XlaExpression& e = ctx.input_expression(i);
  HloInstruction* t = e.kind() == XlaExpression::Kind::kXlaOp ? e.handle() : nullptr;
  if (IsUninitializedTensorList(t)) {
    return ctx.Error(fmt::format("input {} is a list no write has given an element shape yet, "
                                 "which a compiled {} needs",
                                 i, ctx.node().type_string()));
  }
  if (t == nullptr || !t->shape().IsTuple() || t->shape().tuple_shapes().size() < 2) {
    return ctx.Error(fmt::format("input {} is not a list of known size and element shape", i));
  }
  const int64_t n = static_cast<int64_t>(t->shape().tuple_shapes().size());
  ListParts parts;
  LOWER_OR_RETURN(parts.buffer, ctx, ctx.builder().GetTupleElement(t, 0));
  for (int64_t k = 1; k + 1 < n; ++k) {
    HloInstruction* part = nullptr;
    LOWER_OR_RETURN(part, ctx, ctx.builder().GetTupleElement(t, k));
    parts.inner.push_back(part);
  }
  LOWER_OR_RETURN(parts.push_index, ctx, ctx.builder().GetTupleElement(t, n - 1));
  return parts;
}

Status SetList(XlaOpKernelContext& ctx, int output, const ListParts& parts) {
  std::vector<HloInstruction*> elements{parts.buffer};
  elements.insert(elements.end(), parts.inner.begin(), parts.inner.end());
  elements.push_back(parts.push_index);
  HloInstruction* list = nullptr;
  LOWER_OR_RETURN(list, ctx, ctx.builder().Tuple(elements));
  ctx.SetOutputExpression(output, XlaExpression::XlaOp(list, graph::DT_VARIANT));
  return OkStatus();
}

Status SetList(XlaOpKernelContext& ctx, int output, HloInstruction* buffer,
               HloInstruction* push_index) {
  ListParts parts;
  parts.buffer = buffer;
  parts.push_index = push_index;
  return SetList(ctx, output, parts);
}

// The parts of an element: the tensor itself, or a list's tuple (buffer, push indices...).
StatusOr<std::vector<HloInstruction*>> ElementParts(XlaOpKernelContext& ctx, HloInstruction* item) {
  if (!item->shape().IsTuple()) return std::vector<HloInstruction*>{item};
  std::vector<HloInstruction*> parts;
  for (size_t k = 0; k < item->shape().tuple_shapes().size(); ++k) {
    HloInstruction* part = nullptr;
    LOWER_OR_RETURN(part, ctx, ctx.builder().GetTupleElement(item, static_cast<int64_t>(k)));
    if (part->shape().IsTuple()) {
      return ctx.Error("a list element of " + item->shape().ToString(false) +
                       " nests deeper than lists of lists of tensors");
    }
    parts.push_back(part);
  }
  return parts;
}

StatusOr<HloInstruction*> S32(XlaOpKernelContext& ctx, int64_t value) {
  HloInstruction* c = nullptr;
  LOWER_OR_RETURN(c, ctx, ctx.builder().ScalarConstant(PrimitiveType::S32, static_cast<double>(value)));
  return c;
}

// An uninitialized list of `count` elements (tf2xla's BuildUninitializedTensorList).
Status SetUninitializedList(XlaOpKernelContext& ctx, int64_t count) {
  HloInstruction* list = nullptr;
  LOWER_OR_RETURN(list, ctx, ctx.builder().FullConstant(PrimitiveType::S32, 0, {count}));
  ctx.SetOutputExpression(0, XlaExpression::XlaOp(list, graph::DT_VARIANT));
  return OkStatus();
}

// The element shape input when it is a compile-time constant and fully defined (tf2xla's
// TryGetElementShapeFromInput); nullopt leaves the list uninitialized.
StatusOr<std::optional<std::vector<int64_t>>> ElementShapeIfKnown(XlaOpKernelContext& ctx,
                                                                  int input) {
  using Known = std::optional<std::vector<int64_t>>;
  if (ctx.input_expression(input).kind() != XlaExpression::Kind::kConstant) return Known();
  ASSIGN_OR_RETURN(Tensor t, ctx.ConstantInput(input));
  StatusOr<PartialShape> shape = graph::PartialShapeFromTensor(t);
  if (!shape.ok()) return ctx.Error("element_shape: " + shape.status().message());
  if (!shape->IsFullyDefined()) return Known();
  return Known(shape->dims());
}

// The list of input i, initialized for an element like `item` if it is not yet (tf2xla's
// GetInitializedTensorListForElement): zeros of its size for each part of the element, push
// index `push_index`.
StatusOr<ListParts> ListForElement(XlaOpKernelContext& ctx, int i, HloInstruction* item,
                                   bool push_index_at_end) {
  const XlaExpression& e = ctx.input_expression(i);
  HloInstruction* t = e.kind() == XlaExpression::Kind::kXlaOp ? e.handle() : nullptr;
  if (!IsUninitializedTensorList(t)) return InputList(ctx, i);
  const int64_t count = t->shape().dimensions()[0];
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> item_parts, ElementParts(ctx, item));
  ListParts parts;
  for (size_t k = 0; k < item_parts.size(); ++k) {
    // An element list's last part is its push index, stacked too; the outer push index follows.
    const Shape& part = item_parts[k]->shape();
    HloInstruction* zeros = nullptr;
    LOWER_OR_RETURN(zeros, ctx,
                    ctx.builder().FullConstant(part.element_type(), 0,
                                               BufferDims(count, part.dimensions())));
    if (k == 0) {
      parts.buffer = zeros;
    } else {
      parts.inner.push_back(zeros);
    }
  }
  ASSIGN_OR_RETURN(parts.push_index, S32(ctx, push_index_at_end ? count : 0));
  return parts;
}

// buffer with element `item` written at `index`.
StatusOr<HloInstruction*> WriteElement(XlaOpKernelContext& ctx, HloInstruction* buffer,
                                       HloInstruction* index, HloInstruction* item) {
  const std::vector<int64_t>& dims = buffer->shape().dimensions();
  std::vector<int64_t> element(dims.begin() + 1, dims.end());
  if (item->shape().dimensions() != element ||
      item->shape().element_type() != buffer->shape().element_type()) {
    return ctx.Error(fmt::format("the item {} does not fit a list of elements {}",
                                 item->shape().ToString(false),
                                 Shape(buffer->shape().element_type(), element).ToString(false)));
  }
  return WriteBufferRow(ctx, buffer, index, item);
}

// Element `index` of the list: buffer[index], or for a list of lists the element list's tuple.
StatusOr<HloInstruction*> ReadItem(XlaOpKernelContext& ctx, const ListParts& list,
                                   HloInstruction* index) {
  ASSIGN_OR_RETURN(HloInstruction * element, ReadBufferRow(ctx, list.buffer, index));
  if (list.inner.empty()) return element;
  std::vector<HloInstruction*> parts{element};
  for (HloInstruction* stacked : list.inner) {
    ASSIGN_OR_RETURN(HloInstruction * part, ReadBufferRow(ctx, stacked, index));
    parts.push_back(part);
  }
  HloInstruction* tuple = nullptr;
  LOWER_OR_RETURN(tuple, ctx, ctx.builder().Tuple(parts));
  return tuple;
}

// The list with `item` written at `index`, every part of it.
StatusOr<ListParts> WriteItem(XlaOpKernelContext& ctx, ListParts list, HloInstruction* index,
                              HloInstruction* item) {
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> parts, ElementParts(ctx, item));
  if (parts.size() != 1 + list.inner.size()) {
    return ctx.Error(fmt::format("the item {} does not fit a list of {}-part elements",
                                 item->shape().ToString(false), 1 + list.inner.size()));
  }
  ASSIGN_OR_RETURN(list.buffer, WriteElement(ctx, list.buffer, index, parts[0]));
  for (size_t k = 0; k < list.inner.size(); ++k) {
    ASSIGN_OR_RETURN(list.inner[k], WriteElement(ctx, list.inner[k], index, parts[k + 1]));
  }
  return list;
}

StatusOr<HloInstruction*> ZerosBuffer(XlaOpKernelContext& ctx, int64_t n,
                                      const std::vector<int64_t>& element) {
  ASSIGN_OR_RETURN(DataType dtype, ctx.GetTypeAttr("element_dtype"));
  ASSIGN_OR_RETURN(PrimitiveType type, XlaType(ctx, dtype));
  HloInstruction* zeros = nullptr;
  LOWER_OR_RETURN(zeros, ctx, ctx.builder().FullConstant(type, 0, BufferDims(n, element)));
  return zeros;
}

Status ReserveLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(Tensor n, ctx.ConstantInput(1));
  const int64_t count = n.GetAsInt64(0);
  if (count < 0) return ctx.Error("The num_elements to reserve must be a non negative number");
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> known, ElementShapeIfKnown(ctx, 0));
  ASSIGN_OR_RETURN(DataType element_dtype, ctx.GetTypeAttr("element_dtype"));
  // A list of lists takes its parts' shapes from the first list written into it.
  if (!known || element_dtype == graph::DT_VARIANT) return SetUninitializedList(ctx, count);
  const std::vector<int64_t>& element = *known;
  ASSIGN_OR_RETURN(HloInstruction * buffer, ZerosBuffer(ctx, count, element));
  ASSIGN_OR_RETURN(HloInstruction * index, S32(ctx, count));
  return SetList(ctx, 0, buffer, index);
}

Status EmptyTensorListLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(Tensor max, ctx.ConstantInput(1));
  const int64_t count = max.GetAsInt64(0);
  if (count < 0) {
    return ctx.Error("a compiled EmptyTensorList needs max_num_elements (it is -1): XLA's "
                     "buffers have a size fixed at compile time");
  }
  ASSIGN_OR_RETURN(std::optional<std::vector<int64_t>> known, ElementShapeIfKnown(ctx, 0));
  ASSIGN_OR_RETURN(DataType element_dtype, ctx.GetTypeAttr("element_dtype"));
  if (!known || element_dtype == graph::DT_VARIANT) return SetUninitializedList(ctx, count);
  ASSIGN_OR_RETURN(HloInstruction * buffer, ZerosBuffer(ctx, count, *known));
  ASSIGN_OR_RETURN(HloInstruction * index, S32(ctx, 0));
  RETURN_IF_ERROR(SetList(ctx, 0, buffer, index));
  ctx.SetOutputExpression(0, ctx.outputs()[0].WithFreshList());
  return OkStatus();
}

Status FromTensorLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * tensor, ctx.Input(0));
  if (tensor->shape().rank() < 1) {
    return ctx.Error("Tensor must be at least a vector, but saw shape: " +
                     tensor->shape().ToString(false));
  }
  ASSIGN_OR_RETURN(HloInstruction * index, S32(ctx, tensor->shape().dimensions()[0]));
  return SetList(ctx, 0, tensor, index);
}

Status GetItemLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  ASSIGN_OR_RETURN(HloInstruction * index, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * item, ReadItem(ctx, list, index));
  ctx.SetOutput(0, item);
  return OkStatus();
}

Status SetItemLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * index, ctx.Input(1));
  ASSIGN_OR_RETURN(HloInstruction * item, ctx.Input(2));
  ASSIGN_OR_RETURN(ListParts list, ListForElement(ctx, 0, item, /*push_index_at_end=*/true));
  ASSIGN_OR_RETURN(ListParts written, WriteItem(ctx, list, index, item));
  return SetList(ctx, 0, written);
}

Status PushBackLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * item, ctx.Input(1));
  ASSIGN_OR_RETURN(ListParts list, ListForElement(ctx, 0, item, /*push_index_at_end=*/false));
  ASSIGN_OR_RETURN(ListParts written, WriteItem(ctx, list, list.push_index, item));
  ASSIGN_OR_RETURN(HloInstruction * one, S32(ctx, 1));
  LOWER_OR_RETURN(written.push_index, ctx,
                  ctx.builder().Binary(HloOpcode::kAdd, list.push_index, one));
  RETURN_IF_ERROR(SetList(ctx, 0, written));
  // A constant pushed onto a list that is empty or holds only that constant keeps it uniform.
  const XlaExpression& in = ctx.input_expression(0);
  const XlaExpression& pushed = ctx.input_expression(1);
  if (pushed.kind() == XlaExpression::Kind::kConstant && in.kind() == XlaExpression::Kind::kXlaOp) {
    const graph::Tensor* held = in.uniform_list_element();
    if (IsFreshList(in) || (held != nullptr && SameConstant(*held, pushed.constant_value()))) {
      ctx.SetOutputExpression(0, ctx.outputs()[0].WithUniformListElement(pushed.constant_value()));
    }
  }
  return OkStatus();
}

Status PopBackLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  ASSIGN_OR_RETURN(HloInstruction * one, S32(ctx, 1));
  HloInstruction* last = nullptr;
  LOWER_OR_RETURN(last, ctx, ctx.builder().Binary(HloOpcode::kSubtract, list.push_index, one));
  ListParts popped = list;
  popped.push_index = last;
  RETURN_IF_ERROR(SetList(ctx, 0, popped));
  // Every element the same constant: the popped one is that constant, known at compile time.
  const XlaExpression& in = ctx.input_expression(0);
  const graph::Tensor* held =
      in.kind() == XlaExpression::Kind::kXlaOp ? in.uniform_list_element() : nullptr;
  if (held != nullptr) {
    const graph::Tensor element = *held;
    ctx.SetOutputExpression(0, ctx.outputs()[0].WithUniformListElement(element));
    ctx.SetConstantOutput(1, element);
    return OkStatus();
  }
  ASSIGN_OR_RETURN(HloInstruction * item, ReadItem(ctx, list, last));
  ctx.SetOutput(1, item);
  return OkStatus();
}

// A list of lists has no one tensor to stack or gather from.
Status RefuseListOfLists(XlaOpKernelContext& ctx, const ListParts& list) {
  if (list.inner.empty()) return OkStatus();
  return ctx.Error("input 0 is a list of lists, which has no tensor of its elements");
}

Status StackLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  RETURN_IF_ERROR(RefuseListOfLists(ctx, list));
  ASSIGN_OR_RETURN(int64_t num_elements, ctx.GetIntAttr("num_elements"));
  const int64_t size = list.buffer->shape().dimensions()[0];
  if (num_elements != -1 && num_elements != size) {
    return ctx.Error(fmt::format("Operation expected a list with {} elements but got a list with "
                                 "{} elements.",
                                 num_elements, size));
  }
  ctx.SetOutput(0, list.buffer);
  return OkStatus();
}

Status GatherLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  RETURN_IF_ERROR(RefuseListOfLists(ctx, list));
  ASSIGN_OR_RETURN(HloInstruction * indices, ctx.Input(1));
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, GatherAlongAxis(ctx.builder(), list.buffer, indices, 0));
  ctx.SetOutput(0, out);
  return OkStatus();
}

// The list's size is its buffer's leading dimension, known at compile time (TensorFlow's
// TensorListLength of a static list); its element shape the rest of the buffer's.
Status LengthLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  ctx.SetConstantOutput(0, Tensor::Scalar<int32_t>(
                               graph::DT_INT32,
                               static_cast<int32_t>(list.buffer->shape().dimensions()[0])));
  return OkStatus();
}

Status ElementShapeLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(ListParts list, InputList(ctx, 0));
  ASSIGN_OR_RETURN(DataType type, ctx.GetTypeAttr("shape_type"));
  const std::vector<int64_t>& dims = list.buffer->shape().dimensions();
  ctx.SetConstantOutput(0, graph::PartialShapeToTensor(
                               PartialShape(std::vector<int64_t>(dims.begin() + 1, dims.end())),
                               type));
  return OkStatus();
}

// ZerosLike and AddN of lists (what the gradient of a loop builds for lists): the buffers
// zeroed or summed, the push index kept, as TensorFlow's variant cases of these ops. Other
// inputs go to the lowering registered before.
void ExtendForLists(XlaOpRegistry& r, const std::string& op) {
  const XlaOpLowering* found = r.Find(op);
  if (found == nullptr) return;
  XlaOpLowering numeric = *found;
  const bool add = op == "AddN";
  r.Register(op, [numeric, add](XlaOpKernelContext& ctx) -> Status {
    if (ctx.num_inputs() == 0 || ctx.input_type(0) != graph::DT_VARIANT) return numeric(ctx);
    // An uninitialized list is all zeros: ZerosLike keeps it, AddN leaves it out of the sum.
    std::vector<int> lists;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const XlaExpression& e = ctx.input_expression(i);
      if (e.kind() != XlaExpression::Kind::kXlaOp || !IsUninitializedTensorList(e.handle())) {
        lists.push_back(i);
      }
    }
    if (lists.empty()) {
      ctx.SetOutputExpression(0, ctx.input_expression(0));
      return OkStatus();
    }
    ASSIGN_OR_RETURN(ListParts first, InputList(ctx, lists[0]));
    HloInstruction* buffer = nullptr;
    if (!add) {
      LOWER_OR_RETURN(first.buffer, ctx,
                      ctx.builder().FullConstant(first.buffer->shape().element_type(), 0,
                                                 first.buffer->shape().dimensions()));
      return SetList(ctx, 0, first);
    }
    buffer = first.buffer;
    for (size_t k = 1; k < lists.size(); ++k) {
      ASSIGN_OR_RETURN(ListParts next, InputList(ctx, lists[k]));
      if (!(next.buffer->shape() == buffer->shape())) {
        return ctx.Error(fmt::format("cannot add lists of {} and {}", buffer->shape().ToString(false),
                                     next.buffer->shape().ToString(false)));
      }
      LOWER_OR_RETURN(buffer, ctx, ctx.builder().Binary(HloOpcode::kAdd, buffer, next.buffer));
    }
    first.buffer = buffer;
    return SetList(ctx, 0, first);
  });
}

}  // namespace

void RegisterTensorListXlaOps(XlaOpRegistry& r) {
  ExtendForLists(r, "ZerosLike");
  ExtendForLists(r, "AddN");
  r.Register("TensorListReserve", ReserveLowering);
  r.Register("EmptyTensorList", EmptyTensorListLowering);
  r.Register("TensorListFromTensor", FromTensorLowering);
  r.Register("TensorListGetItem", GetItemLowering);
  r.Register("TensorListSetItem", SetItemLowering);
  r.Register("TensorListPushBack", PushBackLowering);
  r.Register("TensorListPopBack", PopBackLowering);
  r.Register("TensorListStack", StackLowering);
  r.Register("TensorListGather", GatherLowering);
  r.Register("TensorListLength", LengthLowering);
  r.Register("TensorListElementShape", ElementShapeLowering);
}

}  // namespace xlens::cluster
