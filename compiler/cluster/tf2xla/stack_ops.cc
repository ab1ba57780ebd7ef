// TensorFlow's stacks (StackV2, StackPushV2, StackPopV2, StackCloseV2) as tf2xla lowers them
// (stack_ops.cc): a resource whose value is the tuple (buffer [max_size, element...], s32 push
// index), the buffer made by the first push, which gives the element shape. Push writes at the
// index and moves it on (dynamic-update-slice), pop moves it back and reads (dynamic-slice). The
// size bound must be a compile-time constant: TensorFlow's v1 while-loop gradients keep the
// forward loop's values on stacks of max_size -1 outside an XLA context, which tf2xla refuses
// with the words used here.
#include <fmt/format.h>

#include <memory>

#include "compiler/cluster/tf2xla/buffer_rows.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/hlo/computation.h"

namespace xlens::cluster {

namespace {

using graph::DataType;
using graph::Tensor;

StatusOr<XlaResource*> StackInput(XlaOpKernelContext& ctx) {
  const XlaExpression& e = ctx.input_expression(0);
  if (e.kind() != XlaExpression::Kind::kResource ||
      e.resource()->kind != XlaResource::Kind::kStack) {
    return ctx.Error("input 0 must be a stack handle");
  }
  return e.resource();
}

// The stack's (buffer, index): its value's two parts.
StatusOr<std::pair<HloInstruction*, HloInstruction*>> StackParts(XlaOpKernelContext& ctx,
                                                            const XlaResource& s) {
  HloInstruction* buffer = nullptr;
  HloInstruction* index = nullptr;
  LOWER_OR_RETURN(buffer, ctx, ctx.builder().GetTupleElement(s.value, 0));
  LOWER_OR_RETURN(index, ctx, ctx.builder().GetTupleElement(s.value, 1));
  return std::make_pair(buffer, index);
}

Status StackV2Lowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(Tensor max_size, ctx.ConstantInput(0));
  if (max_size.num_elements() != 1 || max_size.GetAsInt64(0) < 0) {
    return ctx.Error("XLA compilation requires a fixed stack size upper bound. If you are using "
                     "tf.while_loop, set the maximum_iterations parameter to fix this issue.");
  }
  auto s = std::make_shared<XlaResource>();
  s->kind = XlaResource::Kind::kStack;
  s->name = ctx.name();
  ASSIGN_OR_RETURN(s->dtype, ctx.GetTypeAttr("elem_type"));
  s->size = max_size.GetAsInt64(0);
  ctx.SetOutputExpression(0, XlaExpression::OwnedResource(std::move(s)));
  return OkStatus();
}

Status StackPushLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * s, StackInput(ctx));
  ASSIGN_OR_RETURN(HloInstruction * elem, ctx.Input(1));
  const std::vector<int64_t> dims = BufferDims(s->size, elem->shape().dimensions());
  HloBuilder& b = ctx.builder();
  if (s->value == nullptr) {
    // The first push gives the element shape (tf2xla's MaybeInitializeStack).
    HloInstruction* zeros = nullptr;
    HloInstruction* start = nullptr;
    LOWER_OR_RETURN(zeros, ctx, b.FullConstant(elem->shape().element_type(), 0, dims));
    LOWER_OR_RETURN(start, ctx, b.ScalarConstant(PrimitiveType::S32, 0));
    LOWER_OR_RETURN(s->value, ctx, b.Tuple({zeros, start}));
    s->initial_value = s->value;
  }
  ASSIGN_OR_RETURN(auto parts, StackParts(ctx, *s));
  auto [buffer, index] = parts;
  if (buffer->shape().dimensions() != dims ||
      buffer->shape().element_type() != elem->shape().element_type()) {
    return ctx.Error(fmt::format("pushes {} onto stack '{}' of {}", elem->shape().ToString(false),
                                 s->name, buffer->shape().ToString(false)));
  }
  ASSIGN_OR_RETURN(HloInstruction * written, WriteBufferRow(ctx, buffer, index, elem));
  HloInstruction* one_s32 = nullptr;
  HloInstruction* next = nullptr;
  LOWER_OR_RETURN(one_s32, ctx, b.ScalarConstant(PrimitiveType::S32, 1));
  LOWER_OR_RETURN(next, ctx, b.Binary(HloOpcode::kAdd, index, one_s32));
  LOWER_OR_RETURN(s->value, ctx, b.Tuple({written, next}));
  s->modified = true;
  ctx.SetOutputExpression(0, ctx.input_expression(1));
  return OkStatus();
}

Status StackPopLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaResource * s, StackInput(ctx));
  if (s->value == nullptr) {
    return ctx.Error(fmt::format("pops stack '{}' before anything was pushed onto it", s->name));
  }
  HloBuilder& b = ctx.builder();
  ASSIGN_OR_RETURN(auto parts, StackParts(ctx, *s));
  auto [buffer, index] = parts;
  HloInstruction* one_s32 = nullptr;
  HloInstruction* last = nullptr;
  LOWER_OR_RETURN(one_s32, ctx, b.ScalarConstant(PrimitiveType::S32, 1));
  LOWER_OR_RETURN(last, ctx, b.Binary(HloOpcode::kSubtract, index, one_s32));
  ASSIGN_OR_RETURN(HloInstruction * element, ReadBufferRow(ctx, buffer, last));
  LOWER_OR_RETURN(s->value, ctx, b.Tuple({buffer, last}));
  s->modified = true;
  ctx.SetOutput(0, element);
  return OkStatus();
}

Status StackCloseLowering(XlaOpKernelContext&) { return OkStatus(); }

}  // namespace

void RegisterStackXlaOps(XlaOpRegistry& r) {
  r.Register("StackV2", StackV2Lowering);
  r.Register("StackPushV2", StackPushLowering);
  r.Register("StackPopV2", StackPopLowering);
  r.Register("StackCloseV2", StackCloseLowering);
}

}  // namespace xlens::cluster
