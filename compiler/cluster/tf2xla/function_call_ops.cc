#include "compiler/cluster/tf2xla/function_call_ops.h"

#include <fmt/format.h>

namespace xlens::cluster {

namespace {

Status CallError(const graph::Node& node, const graph::NameAttrList& func,
                 const std::string& message) {
  return Status::Error(fmt::format("node '{}' ({}): in function '{}': {}", node.name(),
                                   node.type_string(), func.name, message));
}

}  // namespace

bool IsFunctionCallOp(const std::string& op) {
  return op == "PartitionedCall" || op == "StatefulPartitionedCall";
}

std::optional<graph::NameAttrList> CalledFunction(const graph::Node& node,
                                                  const graph::FunctionDefLibrary& library) {
  const std::string& op = node.type_string();
  if (IsFunctionCallOp(op)) {
    const graph::AttrValue* f = graph::FindAttr(node.attrs(), "f");
    if (f == nullptr || f->kind() != graph::AttrValue::Kind::kFunc) return std::nullopt;
    return f->func();
  }
  if (library.Find(op) == nullptr) return std::nullopt;
  graph::NameAttrList call;
  call.name = op;
  *call.attr = node.attrs();
  return call;
}

StatusOr<std::vector<XlaExpression>> LowerFunctionCall(
    const graph::Node& node, const graph::NameAttrList& func,
    const std::vector<XlaExpression>& inputs, const graph::FunctionDefLibrary& library,
    const graph::OpRegistry& registry, HloBuilder& builder, int depth,
    const FunctionBodyLowering& lower_body) {
  if (depth >= kMaxInlinedCallDepth) {
    return CallError(node, func,
                     fmt::format("calls nest deeper than {} (a function that calls itself has no "
                                 "compiled form)",
                                 kMaxInlinedCallDepth));
  }
  auto body = graph::InstantiateFunction(library, func, &registry);
  if (!body.ok()) return CallError(node, func, body.status().message());
  if ((*body)->arg_types.size() != inputs.size()) {
    return CallError(node, func,
                     fmt::format("the function takes {} arguments, the call gives {}",
                                 (*body)->arg_types.size(), inputs.size()));
  }
  auto outputs = lower_body(*(*body)->graph, &builder, inputs);
  if (!outputs.ok()) return CallError(node, func, outputs.status().message());
  if (static_cast<int>(outputs->size()) != node.num_outputs()) {
    return CallError(node, func,
                     fmt::format("the function returns {} results, the call has {} outputs",
                                 outputs->size(), node.num_outputs()));
  }
  for (int i = 0; i < node.num_outputs(); ++i) {
    const XlaExpression& e = (*outputs)[i];
    if (e.kind() != XlaExpression::Kind::kResource && e.dtype() != node.output_type(i)) {
      return CallError(node, func,
                       fmt::format("result {} is {}, the call's output is {}", i,
                                   graph::DataTypeName(e.dtype()),
                                   graph::DataTypeName(node.output_type(i))));
    }
  }
  return outputs;
}

}  // namespace xlens::cluster
