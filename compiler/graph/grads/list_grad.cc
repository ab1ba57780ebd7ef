// Gradients of the TensorList ops (tensorflow/python/ops/list_ops.py) and of the v1 TensorArray
// ops (tensor_array_grad.py). A list's gradient is a list: stacking and unstacking swap
// (Stack <-> FromTensor), reading and writing swap (GetItem <-> SetItem, PushBack <-> PopBack),
// gathering and scattering swap. A TensorArray's gradient lives in the gradient array
// TensorArrayGradV3 makes for the same source (the "gradients" scope), so writes to the forward
// array become reads of the gradient array and the other way round.
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

AttrValue TypeAttr(DataType t) { return AttrValue::Type(t); }

DataType AttrType(const Node& op, const std::string& name) {
  const AttrValue* v = FindAttr(op.attrs(), name);
  return v ? v->type() : DT_INVALID;
}

Output ElementShapeOf(const Scope& s, const Output& list) {
  return ops::AsOutput(ops::BuildOp(s, "TensorListElementShape", {list},
                                    {{"shape_type", TypeAttr(DT_INT32)}}));
}

Output Length(const Scope& s, const Output& list) {
  return ops::AsOutput(ops::BuildOp(s, "TensorListLength", {list}));
}

// array_ops.shape(t)[1:]
Output TrailingShape(const Scope& s, const Output& t) {
  return ops::AsOutput(ops::BuildOp(s, "Slice", {ShapeOf(s, t), Int32s({1}), Int32s({-1})}));
}

// gradient of TensorListPushBack: pop the element's gradient off the list's gradient.
Status PushBackGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Node* pop = ops::BuildOp(s, "TensorListPopBack", {g[0], ElementShapeOf(s, g[0])},
                           {{"element_dtype", TypeAttr(dtype)}});
  if (pop == nullptr) return s.status();
  *out = {Output(pop, 0), Output(pop, 1)};
  return s.status();
}

// gradient of TensorListPopBack: push the element's gradient back.
Status PopBackGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output list = g[0];
  if (IsZerosTensor(list)) {
    list = ops::AsOutput(ops::BuildOp(
        s, "EmptyTensorList", {ElementShapeOf(s, Out(op, 0)), ops::Input(-1)},
        {{"element_dtype", TypeAttr(dtype)}, {"shape_type", TypeAttr(DT_INT32)}}));
  }
  Output pushed = ops::AsOutput(ops::BuildOp(s, "TensorListPushBack", {list, g[1]},
                                             {{"element_dtype", TypeAttr(dtype)}}));
  *out = {pushed, NoGradient()};
  return s.status();
}

Status StackGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output list = ops::AsOutput(ops::BuildOp(
      s, "TensorListFromTensor", {g[0], ElementShapeOf(s, In(op, 0))},
      {{"element_dtype", TypeAttr(dtype)}, {"shape_type", TypeAttr(DT_INT32)}}));
  *out = {list, NoGradient()};
  return s.status();
}

Status FromTensorGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  PartialShape shape = StaticShape(s, In(op, 0));
  int64_t num_elements = -1;
  if (!shape.unknown_rank() && shape.rank() >= 1 && shape.dim(0) >= 0) num_elements = shape.dim(0);
  Output stacked = ops::AsOutput(
      ops::BuildOp(s, "TensorListStack", {g[0], TrailingShape(s, In(op, 0))},
                   {{"element_dtype", TypeAttr(dtype)}, {"num_elements", AttrValue::Int(num_elements)}}));
  *out = {stacked, NoGradient()};
  return s.status();
}

Status GetItemGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output reserved = ops::AsOutput(ops::BuildOp(
      s, "TensorListReserve", {ElementShapeOf(s, In(op, 0)), Length(s, In(op, 0))},
      {{"element_dtype", TypeAttr(dtype)}, {"shape_type", TypeAttr(DT_INT32)}}));
  Output list = ops::AsOutput(ops::BuildOp(s, "TensorListSetItem", {reserved, In(op, 1), g[0]},
                                           {{"element_dtype", TypeAttr(dtype)}}));
  *out = {list, NoGradient(), NoGradient()};
  return s.status();
}

Status SetItemGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output list = ops::AsOutput(ops::BuildOp(s, "TensorListSetItem",
                                           {g[0], In(op, 1), ZerosLikeOf(s, In(op, 2))},
                                           {{"element_dtype", TypeAttr(dtype)}}));
  Output item = ops::AsOutput(ops::BuildOp(s, "TensorListGetItem",
                                           {g[0], In(op, 1), ShapeOf(s, In(op, 2))},
                                           {{"element_dtype", TypeAttr(dtype)}}));
  const AttrValue* resize = FindAttr(op.attrs(), "resize_if_index_out_of_bounds");
  if (resize && resize->b()) {
    list = ops::AsOutput(ops::BuildOp(s, "TensorListResize", {list, Length(s, In(op, 0))}));
  }
  *out = {list, NoGradient(), item};
  return s.status();
}

Status GatherGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output reserved = ops::AsOutput(ops::BuildOp(
      s, "TensorListReserve", {ElementShapeOf(s, In(op, 0)), Length(s, In(op, 0))},
      {{"element_dtype", TypeAttr(dtype)}, {"shape_type", TypeAttr(DT_INT32)}}));
  Output list = ops::AsOutput(ops::BuildOp(s, "TensorListScatterIntoExistingList",
                                           {reserved, g[0], In(op, 1)},
                                           {{"element_dtype", TypeAttr(dtype)}}));
  *out = {list, NoGradient(), NoGradient()};
  return s.status();
}

Status ScatterGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output tensor = ops::AsOutput(ops::BuildOp(s, "TensorListGather",
                                             {g[0], In(op, 1), TrailingShape(s, In(op, 0))},
                                             {{"element_dtype", TypeAttr(dtype)}}));
  out->assign(op.num_inputs(), NoGradient());
  (*out)[0] = tensor;
  return s.status();
}

Status ScatterIntoExistingGrad(const Scope& s, const Node& op, const GradOutputs& g,
                               GradOutputs* out) {
  const DataType dtype = AttrType(op, "element_dtype");
  Output tensor = ops::AsOutput(ops::BuildOp(s, "TensorListGather",
                                             {g[0], In(op, 2), TrailingShape(s, In(op, 1))},
                                             {{"element_dtype", TypeAttr(dtype)}}));
  Output zeros = ZerosLikeOf(s, In(op, 1));
  Output list = ops::AsOutput(ops::BuildOp(s, "TensorListScatterIntoExistingList",
                                           {g[0], zeros, In(op, 2)},
                                           {{"element_dtype", TypeAttr(dtype)}}));
  *out = {list, tensor, NoGradient()};
  return s.status();
}

Status NoInputGradients(const Scope& s, const Node& op, const GradOutputs&, GradOutputs* out) {
  out->assign(op.num_inputs(), NoGradient());
  return s.status();
}

// ---- TensorArray ----------------------------------------------------------------------------

// tensor_array_grad._GetGradSource: the name scope up to the first "gradients" component.
std::string GradSource(const Scope& s) {
  const std::string& prefix = s.name_prefix();
  size_t start = 0;
  while (start <= prefix.size()) {
    size_t end = prefix.find('/', start);
    if (end == std::string::npos) end = prefix.size();
    if (prefix.compare(start, 9, "gradients") == 0) return prefix.substr(0, end);
    start = end + 1;
  }
  return "gradients";
}

// The gradient array of the forward array input 0 of `op` and its flow.
std::pair<Output, Output> GradArray(const Scope& s, const Node& op, const Output& flow) {
  Node* g = ops::BuildOp(s.WithControlDependencies(std::vector<Output>{flow}), "TensorArrayGradV3",
                         {In(op, 0), flow}, {{"source", AttrValue::String(GradSource(s))}});
  if (g == nullptr) return {Output(), Output()};
  return {Output(g, 0), Output(g, 1)};
}

Status ReadGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, In(op, 2));
  Output w = ops::AsOutput(ops::BuildOp(s, "TensorArrayWriteV3", {grad, In(op, 1), g[0], flow}));
  *out = {NoGradient(), NoGradient(), w};
  return s.status();
}

Status WriteGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, g[0]);
  Output r = ops::AsOutput(ops::BuildOp(s, "TensorArrayReadV3", {grad, In(op, 1), flow},
                                        {{"dtype", TypeAttr(AttrType(op, "T"))}}));
  *out = {NoGradient(), NoGradient(), r, g[0]};
  return s.status();
}

Status TaGatherGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, In(op, 2));
  Output w = ops::AsOutput(ops::BuildOp(s, "TensorArrayScatterV3", {grad, In(op, 1), g[0], flow}));
  *out = {NoGradient(), NoGradient(), w};
  return s.status();
}

Status TaScatterGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, g[0]);
  Output r = ops::AsOutput(ops::BuildOp(s, "TensorArrayGatherV3", {grad, In(op, 1), flow},
                                        {{"dtype", TypeAttr(AttrType(op, "T"))}}));
  *out = {NoGradient(), NoGradient(), r, g[0]};
  return s.status();
}

Status TaConcatGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, In(op, 1));
  Output w = ops::AsOutput(ops::BuildOp(s, "TensorArraySplitV3", {grad, g[0], Out(op, 1), flow}));
  *out = {NoGradient(), w};
  return s.status();
}

Status TaSplitGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  auto [grad, flow] = GradArray(s, op, g[0]);
  Node* c = ops::BuildOp(s, "TensorArrayConcatV3", {grad, flow},
                         {{"dtype", TypeAttr(AttrType(op, "T"))}});
  *out = {NoGradient(), c ? Output(c, 0) : Output(), NoGradient(), g[0]};
  return s.status();
}

}  // namespace

void RegisterListGradients(OpRegistry& r) {
  Set(r, "TensorListPushBack", PushBackGrad);
  Set(r, "TensorListPopBack", PopBackGrad);
  Set(r, "TensorListStack", StackGrad);
  Set(r, "TensorListFromTensor", FromTensorGrad);
  Set(r, "TensorListGetItem", GetItemGrad);
  Set(r, "TensorListSetItem", SetItemGrad);
  Set(r, "TensorListGather", GatherGrad);
  Set(r, "TensorListScatter", ScatterGrad);
  Set(r, "TensorListScatterV2", ScatterGrad);
  Set(r, "TensorListScatterIntoExistingList", ScatterIntoExistingGrad);
  for (const char* op : {"EmptyTensorList", "TensorListReserve", "TensorListLength",
                         "TensorListElementShape", "TensorArrayV3", "TensorArraySizeV3",
                         "TensorArrayCloseV3", "TensorArrayGradV3"}) {
    Set(r, op, NoInputGradients);
  }
  Set(r, "TensorArrayReadV3", ReadGrad);
  Set(r, "TensorArrayWriteV3", WriteGrad);
  Set(r, "TensorArrayGatherV3", TaGatherGrad);
  Set(r, "TensorArrayScatterV3", TaScatterGrad);
  Set(r, "TensorArrayConcatV3", TaConcatGrad);
  Set(r, "TensorArraySplitV3", TaSplitGrad);
}

}  // namespace xlens::graph::grad
