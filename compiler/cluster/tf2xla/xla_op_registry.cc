#include "compiler/cluster/tf2xla/xla_op_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/op_def.h"

namespace xlens::cluster {

using graph::DataType;
using graph::Tensor;

XlaExpression XlaExpression::Constant(Tensor value) {
  XlaExpression e;
  e.kind_ = Kind::kConstant;
  e.dtype_ = value.dtype();
  e.constant_ = std::move(value);
  return e;
}

XlaExpression XlaExpression::XlaOp(HloInstruction* op, DataType dtype) {
  XlaExpression e;
  e.kind_ = Kind::kXlaOp;
  e.dtype_ = dtype;
  e.handle_ = op;
  return e;
}

XlaExpression XlaExpression::Resource(XlaResource* resource) {
  XlaExpression e;
  e.kind_ = Kind::kResource;
  e.dtype_ = graph::DT_RESOURCE;
  e.resource_ = resource;
  return e;
}

XlaExpression XlaExpression::OwnedResource(std::shared_ptr<XlaResource> resource) {
  XlaExpression e = Resource(resource.get());
  e.owned_resource_ = std::move(resource);
  return e;
}

XlaExpression XlaExpression::WithFreshList() const {
  XlaExpression e = *this;
  e.fresh_list_ = true;
  e.uniform_list_element_.reset();
  return e;
}

XlaExpression XlaExpression::WithUniformListElement(Tensor element) const {
  XlaExpression e = *this;
  e.fresh_list_ = false;
  e.uniform_list_element_ = std::move(element);
  return e;
}

std::vector<int64_t> XlaExpression::shape() const {
  switch (kind_) {
    case Kind::kConstant:
      return constant_.dims();
    case Kind::kXlaOp:
      return handle_->shape().dimensions();
    default:
      return {};
  }
}

XlaOpKernelContext::XlaOpKernelContext(const graph::Node& node, std::vector<XlaExpression> inputs,
                                       HloBuilder* builder)
    : node_(node),
      inputs_(std::move(inputs)),
      materialized_(inputs_.size(), nullptr),
      outputs_(node.num_outputs()),
      builder_(builder) {}

DataType XlaOpKernelContext::input_type(int i) const { return node_.input_type(i); }

std::vector<int64_t> XlaOpKernelContext::InputShape(int i) const { return inputs_[i].shape(); }

StatusOr<HloInstruction*> XlaOpKernelContext::Input(int i) {
  const XlaExpression& e = inputs_[i];
  switch (e.kind()) {
    case XlaExpression::Kind::kXlaOp:
      return e.handle();
    case XlaExpression::Kind::kConstant: {
      if (materialized_[i] == nullptr) {
        auto c = ConstantToHlo(*builder_, e.constant_value());
        if (!c.ok()) return Error(c.status().message());
        materialized_[i] = *c;
      }
      return materialized_[i];
    }
    case XlaExpression::Kind::kResource:
      return Error(fmt::format("input {} is a resource, not a value", i));
    default:
      return Error(fmt::format("input {} has no value", i));
  }
}

namespace {

// The OpDef name of input `i` ("reduction_indices"), for messages.
std::string InputArgName(const graph::Node& node, int i) {
  for (const auto& arg : node.op_def().input_arg) {
    int start = 0, end = 0;
    if (!graph::NameRangeForArg(node.name(), node.attrs(), node.op_def(), true, arg.name, &start,
                                &end)
             .ok()) {
      continue;
    }
    if (i >= start && i < end) return arg.name;
  }
  return std::to_string(i);
}

}  // namespace

StatusOr<Tensor> XlaOpKernelContext::ConstantInput(int i) const {
  const XlaExpression& e = inputs_[i];
  if (e.kind() != XlaExpression::Kind::kConstant) {
    const auto [src, src_output] = node_.input_node(i);
    return Error(fmt::format(
        "input {} ('{}', from '{}') must be a compile-time constant, but its value is only known "
        "at run time",
        i, InputArgName(node_, i), src == nullptr ? "?" : src->name()));
  }
  return e.constant_value();
}

StatusOr<std::vector<int64_t>> XlaOpKernelContext::ConstantInputAsIntVector(int i) const {
  ASSIGN_OR_RETURN(Tensor t, ConstantInput(i));
  if (!graph::DataTypeIsInteger(t.dtype())) {
    return Error(fmt::format("input {} must be an integer tensor, got {}", i,
                             graph::DataTypeName(t.dtype())));
  }
  return t.AsInt64Vector();
}

void XlaOpKernelContext::SetOutput(int i, HloInstruction* op) {
  outputs_[i] = XlaExpression::XlaOp(op, node_.output_type(i));
}

void XlaOpKernelContext::SetConstantOutput(int i, Tensor value) {
  outputs_[i] = XlaExpression::Constant(std::move(value));
}

void XlaOpKernelContext::SetOutputExpression(int i, XlaExpression expression) {
  outputs_[i] = std::move(expression);
}

StatusOr<XlaResource*> XlaOpKernelContext::InputResource(int i) const {
  const XlaExpression& e = inputs_[i];
  if (e.kind() != XlaExpression::Kind::kResource) {
    return Error(fmt::format("input {} must be a resource variable", i));
  }
  return e.resource();
}

StatusOr<HloInstruction*> XlaOpKernelContext::ReadVariableInput(int i) const {
  ASSIGN_OR_RETURN(XlaResource * resource, InputResource(i));
  if (resource->value == nullptr) {
    return Error(fmt::format("reads variable '{}' (argument {}), which is uninitialized",
                             resource->name, resource->arg_index));
  }
  return resource->value;
}

Status XlaOpKernelContext::AssignVariable(int i, DataType dtype, HloInstruction* value) {
  ASSIGN_OR_RETURN(XlaResource * resource, InputResource(i));
  if (resource->dtype != graph::DT_INVALID && resource->dtype != dtype) {
    return Error(fmt::format("assigns a {} value to variable '{}' of type {}",
                             graph::DataTypeName(dtype), resource->name,
                             graph::DataTypeName(resource->dtype)));
  }
  if (resource->value != nullptr && resource->value->shape().dimensions() !=
                                        value->shape().dimensions()) {
    return Error(fmt::format("assigns a value of shape {} to variable '{}' of shape {}",
                             value->shape().ToString(false), resource->name,
                             resource->value->shape().ToString(false)));
  }
  resource->dtype = dtype;
  resource->shape = value->shape().dimensions();
  resource->value = value;
  resource->modified = true;
  return OkStatus();
}

StatusOr<DataType> XlaOpKernelContext::GetTypeAttr(const std::string& name) const {
  return graph::GetTypeAttr(attrs(), name, node_.name());
}
StatusOr<int64_t> XlaOpKernelContext::GetIntAttr(const std::string& name) const {
  return graph::GetIntAttr(attrs(), name, node_.name());
}
StatusOr<bool> XlaOpKernelContext::GetBoolAttr(const std::string& name) const {
  return graph::GetBoolAttr(attrs(), name, node_.name());
}
StatusOr<float> XlaOpKernelContext::GetFloatAttr(const std::string& name) const {
  return graph::GetFloatAttr(attrs(), name, node_.name());
}
StatusOr<std::vector<int64_t>> XlaOpKernelContext::GetIntListAttr(const std::string& name) const {
  return graph::GetIntListAttr(attrs(), name, node_.name());
}

Status XlaOpKernelContext::Error(const std::string& message) const {
  return Status::Error(
      fmt::format("node '{}' ({}): {}", node_.name(), node_.type_string(), message));
}

const XlaOpRegistry& XlaOpRegistry::Global() {
  static const XlaOpRegistry* registry = [] {
    auto* r = new XlaOpRegistry();
    RegisterUnaryXlaOps(*r);
    RegisterBinaryXlaOps(*r);
    RegisterReductionXlaOps(*r);
    RegisterShapeXlaOps(*r);
    RegisterDataMovementXlaOps(*r);
    RegisterStridedSliceXlaOps(*r);
    RegisterMatMulXlaOps(*r);
    RegisterNnXlaOps(*r);
    RegisterPoolingXlaOps(*r);
    RegisterConvXlaOps(*r);
    RegisterVariableXlaOps(*r);
    RegisterTrainingXlaOps(*r);
    RegisterTensorListXlaOps(*r);
    RegisterTensorListSplitXlaOps(*r);
    RegisterTensorArrayXlaOps(*r);
    RegisterStackXlaOps(*r);
    RegisterStatelessRandomXlaOps(*r);
    RegisterModelXlaOps(*r);
    return r;
  }();
  return *registry;
}

const XlaOpLowering* XlaOpRegistry::Find(const std::string& op) const {
  auto it = lowerings_.find(op);
  return it == lowerings_.end() ? nullptr : &it->second;
}

std::vector<std::string> XlaOpRegistry::OpNames() const {
  std::vector<std::string> names;
  for (const auto& [name, _] : lowerings_) names.push_back(name);
  return names;
}

void XlaOpRegistry::Register(const std::string& op, XlaOpLowering lowering) {
  lowerings_[op] = std::move(lowering);
}

void XlaOpRegistry::AcceptRuntimeInput(const std::string& op, const std::string& arg) {
  runtime_inputs_.emplace(op, arg);
}

bool XlaOpRegistry::AcceptsRuntimeInput(const std::string& op, const std::string& arg) const {
  return runtime_inputs_.count({op, arg}) > 0;
}

StatusOr<HloInstruction*> ConstantToHlo(HloBuilder& builder, const Tensor& tensor) {
  PrimitiveType type = graph::ToPrimitiveType(tensor.dtype());
  if (type == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
    return Error(fmt::format("a {} constant has no HLO form",
                             graph::DataTypeName(tensor.dtype())));
  }
  ASSIGN_OR_RETURN(Literal literal, tensor.ToLiteral());
  return builder.Constant(std::move(literal));
}

StatusOr<PrimitiveType> XlaType(const XlaOpKernelContext& ctx, DataType dtype) {
  PrimitiveType type = graph::ToPrimitiveType(dtype);
  if (type == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
    return ctx.Error(fmt::format("type {} has no XLA element type", graph::DataTypeName(dtype)));
  }
  return type;
}

StatusOr<std::vector<int64_t>> BroadcastShapes(const XlaOpKernelContext& ctx,
                                               const std::vector<int64_t>& a,
                                               const std::vector<int64_t>& b) {
  const size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < rank - a.size() ? 1 : a[i - (rank - a.size())];
    const int64_t db = i < rank - b.size() ? 1 : b[i - (rank - b.size())];
    if (da == db || db == 1) {
      out[i] = da;
    } else if (da == 1) {
      out[i] = db;
    } else {
      return ctx.Error(fmt::format("incompatible shapes: [{}] vs. [{}]", fmt::join(a, ","),
                                   fmt::join(b, ",")));
    }
  }
  return out;
}

}  // namespace xlens::cluster
