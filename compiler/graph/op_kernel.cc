#include "compiler/graph/op_kernel.h"

namespace xlens::graph {

OpKernelContext::OpKernelContext(const Node& node, std::vector<Tensor> inputs,
                                 std::vector<bool> input_is_dead, ResourceMgr* resources,
                                 KernelState* state, ThreadPool* pool)
    : node_(node),
      inputs_(std::move(inputs)),
      input_is_dead_(std::move(input_is_dead)),
      outputs_(node.num_outputs()),
      output_is_dead_(node.num_outputs(), false),
      resources_(resources),
      state_(state),
      pool_(pool) {
  if (input_is_dead_.size() != inputs_.size()) input_is_dead_.assign(inputs_.size(), false);
}

StatusOr<Tensor*> OpKernelContext::allocate_output(int i, std::vector<int64_t> dims) {
  auto t = Tensor::Create(node_.output_type(i), std::move(dims), max_tensor_bytes_);
  if (!t.ok()) return Error(t.status().message());
  outputs_[i] = std::move(*t);
  return &outputs_[i];
}

StatusOr<Tensor*> OpKernelContext::forward_input_or_allocate_output(int input, int output,
                                                                   std::vector<int64_t> dims) {
  Tensor& in = inputs_[input];
  if (in.RefCountIsOne() && in.dtype() == RemoveRefType(node_.output_type(output)) &&
      in.dims() == dims) {
    outputs_[output] = in;  // shares the buffer: the input still reads it
    return &outputs_[output];
  }
  return allocate_output(output, std::move(dims));
}

Status OpKernelContext::Error(const std::string& message) const {
  return Status::Error("node '" + node_.name() + "' (" + node_.type_string() + "): " + message);
}

template <>
StatusOr<DataType> OpKernelContext::GetAttr<DataType>(const std::string& name) const {
  return GetTypeAttr(attrs(), name, this->name());
}
template <>
StatusOr<int64_t> OpKernelContext::GetAttr<int64_t>(const std::string& name) const {
  return GetIntAttr(attrs(), name, this->name());
}
template <>
StatusOr<float> OpKernelContext::GetAttr<float>(const std::string& name) const {
  return GetFloatAttr(attrs(), name, this->name());
}
template <>
StatusOr<bool> OpKernelContext::GetAttr<bool>(const std::string& name) const {
  return GetBoolAttr(attrs(), name, this->name());
}
template <>
StatusOr<std::string> OpKernelContext::GetAttr<std::string>(const std::string& name) const {
  return GetStringAttr(attrs(), name, this->name());
}
template <>
StatusOr<PartialShape> OpKernelContext::GetAttr<PartialShape>(const std::string& name) const {
  return GetShapeAttr(attrs(), name, this->name());
}
template <>
StatusOr<Tensor> OpKernelContext::GetAttr<Tensor>(const std::string& name) const {
  return GetTensorAttr(attrs(), name, this->name());
}
template <>
StatusOr<std::vector<int64_t>> OpKernelContext::GetAttr<std::vector<int64_t>>(
    const std::string& name) const {
  return GetIntListAttr(attrs(), name, this->name());
}
template <>
StatusOr<std::vector<DataType>> OpKernelContext::GetAttr<std::vector<DataType>>(
    const std::string& name) const {
  return GetTypeListAttr(attrs(), name, this->name());
}

}  // namespace xlens::graph
