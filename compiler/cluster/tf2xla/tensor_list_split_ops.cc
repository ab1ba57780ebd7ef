// TensorListSplit and TensorListConcatV2 as tf2xla lowers them (tensor_list_ops.cc): a list of
// known size and element shape is the tuple (buffer, push_index), the buffer holding every
// element along a leading dimension, so splitting a tensor into pieces of one length and
// concatenating a list's elements along their first dimension are reshapes of the buffer.
// Pieces of different lengths are refused, as tf2xla refuses them: a buffer has one element
// shape.
#include <fmt/format.h>

#include "compiler/cluster/tf2xla/xla_op_registry.h"

namespace xlens::cluster {

namespace {

using graph::Tensor;

Status SplitLowering(XlaOpKernelContext& ctx) {
  ASSIGN_OR_RETURN(HloInstruction * tensor, ctx.Input(0));
  const std::vector<int64_t>& dims = tensor->shape().dimensions();
  if (dims.empty()) return ctx.Error("Input must have rank at least 1");
  ASSIGN_OR_RETURN(std::vector<int64_t> lengths, ctx.ConstantInputAsIntVector(2));
  if (lengths.empty()) return ctx.Error("a compiled TensorListSplit needs at least one length");
  for (int64_t length : lengths) {
    if (length != lengths[0]) {
      return ctx.Error(fmt::format("All lengths must be the same ({} and {}): a compiled list's "
                                   "buffer holds elements of one shape",
                                   lengths[0], length));
    }
  }
  const int64_t length = lengths[0];
  const int64_t pieces = static_cast<int64_t>(lengths.size());
  if (length <= 0 || length * pieces != dims[0]) {
    return ctx.Error(fmt::format("{} lengths of {} do not sum to the tensor's first dimension {}",
                                 pieces, length, dims[0]));
  }
  std::vector<int64_t> buffer_dims{pieces, length};
  buffer_dims.insert(buffer_dims.end(), dims.begin() + 1, dims.end());
  HloBuilder& b = ctx.builder();
  HloInstruction* buffer = nullptr;
  LOWER_OR_RETURN(buffer, ctx, b.Reshape(tensor, buffer_dims));
  HloInstruction* push_index = nullptr;
  LOWER_OR_RETURN(push_index, ctx,
                  b.ScalarConstant(PrimitiveType::S32, static_cast<double>(pieces)));
  HloInstruction* list = nullptr;
  LOWER_OR_RETURN(list, ctx, b.Tuple({buffer, push_index}));
  ctx.SetOutputExpression(0, XlaExpression::XlaOp(list, graph::DT_VARIANT));
  return OkStatus();
}

// The buffer [n, d0, ...] read as [n * d0, ...]; the lengths (n times d0) are known at compile
// time.
Status ConcatLowering(XlaOpKernelContext& ctx) {
  const XlaExpression& e = ctx.input_expression(0);
  HloInstruction* t = e.kind() == XlaExpression::Kind::kXlaOp ? e.handle() : nullptr;
  if (t == nullptr || !t->shape().IsTuple() || t->shape().tuple_shapes().size() != 2) {
    return ctx.Error("input 0 is not a list of known size and element shape");
  }
  HloBuilder& b = ctx.builder();
  HloInstruction* buffer = nullptr;
  LOWER_OR_RETURN(buffer, ctx, b.GetTupleElement(t, 0));
  const std::vector<int64_t> dims = buffer->shape().dimensions();
  if (dims.size() < 2) return ctx.Error("Concat requires elements to be at least vectors");
  std::vector<int64_t> out_dims{dims[0] * dims[1]};
  out_dims.insert(out_dims.end(), dims.begin() + 2, dims.end());
  HloInstruction* out = nullptr;
  LOWER_OR_RETURN(out, ctx, b.Reshape(buffer, out_dims));
  ctx.SetOutput(0, out);
  Tensor lengths(graph::DT_INT64, {dims[0]});
  for (int64_t i = 0; i < dims[0]; ++i) lengths.flat<int64_t>()[i] = dims[1];
  ctx.SetConstantOutput(1, std::move(lengths));
  return OkStatus();
}

}  // namespace

void RegisterTensorListSplitXlaOps(XlaOpRegistry& r) {
  r.Register("TensorListSplit", SplitLowering);
  r.Register("TensorListConcatV2", ConcatLowering);
}

}  // namespace xlens::cluster
