#include "compiler/cluster/compilability_check.h"

#include <fmt/format.h>

#include "compiler/cluster/tensorflow_xla_ops.h"
#include "compiler/cluster/tf2xla/function_call_ops.h"
#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/graph/function.h"

namespace xlens::cluster {

using graph::DataType;
using graph::Node;

OperationFilter OperationFilter::ForAutoClustering() { return OperationFilter{}; }

OperationFilter OperationFilter::ForMustCompile() {
  OperationFilter filter;
  filter.allow_unique_op = true;
  filter.allow_stateful_rng_ops = true;
  filter.allow_dummy_ops = true;
  filter.allow_control_trigger = true;
  filter.allow_top_level_args = true;
  filter.allow_variant_ops = true;
  filter.allow_tensor_array_ops = true;
  filter.allow_stack_ops = true;
  filter.allow_resource_ops_in_called_functions = true;
  // TensorFlow's must-compile check keeps OperationFilter's default here: an Assert's message
  // (a string Const) compiles, to nothing.
  filter.allow_string_consts = true;
  return filter;
}

namespace {

bool IsStatefulRandomOp(const std::string& op) {
  return op == "RandomUniform" || op == "RandomShuffle" || op == "RandomUniformInt" ||
         op == "RandomStandardNormal" || op == "TruncatedNormal" || op == "Multinomial";
}

bool IsDummyImplOp(const std::string& op) { return op == "Assert" || op == "CheckNumerics"; }

std::string NoKernel(const Node& node) {
  return fmt::format(
      "No registered '{}' OpKernel for {} devices compatible with node {{{{node {}}}}}",
      node.type_string(), kXlaCpuJitDevice, node.name());
}

// An op TensorFlow compiles for XLA_CPU_JIT whose lowering xlens lacks. TensorFlow's sentence
// ("No registered ... OpKernel") would say TensorFlow cannot compile it, which is not so; this
// says what is missing and where.
std::string NoLowering(const Node& node) {
  return fmt::format(
      "xlens has no XLA lowering for '{}' yet (TensorFlow compiles it for {}); node {{{{node {}}}}}",
      node.type_string(), kXlaCpuJitDevice, node.name());
}

bool HasType(const Node& node, DataType type) {
  for (DataType t : node.input_types()) {
    if (t == type) return true;
  }
  for (DataType t : node.output_types()) {
    if (t == type) return true;
  }
  return false;
}

// The ops whose XLA kernels take DT_VARIANT values (TensorFlow's AllowVariantTypes): the list
// ops, and those that pass a list along.
bool XlaKernelTakesVariants(const std::string& op) {
  return op.rfind("TensorList", 0) == 0 || op == "EmptyTensorList" || op == "Identity" ||
         op == "IdentityN" || op == "While" || op == "StatelessWhile" || op == "If" ||
         op == "StatelessIf" || op == "ZerosLike" || op == "AddN" || op == "_Arg" ||
         op == "_Retval";
}

// Types no XLA kernel takes: strings (but a string Const is its own rule), and variants but for
// the ops above.
bool HasUnsupportedType(const Node& node) {
  // XLA kernels are registered for value types only: a reference-typed input or output (the
  // VariableV2 family) has none.
  const bool variants_ok = XlaKernelTakesVariants(node.type_string());
  // TensorFlow's XLA Assert (a kernel that checks nothing) takes its message's strings.
  const bool strings_ok = node.type_string() == "Assert";
  auto bad = [variants_ok, strings_ok](DataType t) {
    return graph::IsRefType(t) || (t == graph::DT_STRING && !strings_ok) ||
           (t == graph::DT_VARIANT && !variants_ok);
  };
  for (DataType t : node.input_types()) {
    if (bad(t)) return true;
  }
  for (DataType t : node.output_types()) {
    if (bad(t)) return true;
  }
  return false;
}

}  // namespace

bool HasForwardedRefInput(const Node& node) {
  if (!IsIdentity(node)) return false;
  for (const graph::Edge* e : node.in_edges()) {
    if (e->IsControlEdge()) continue;
    if (graph::IsRefType(e->src->output_type(e->src_output))) return true;
  }
  return false;
}

std::string UncompilableReason(const Node& node, const graph::Graph& graph,
                               const OperationFilter& filter, int depth) {
  const std::string& op = node.type_string();
  if (op == "_Arg" || op == "_Retval") {
    // Inside a called function's body they are its parameters and results (XLA has kernels
    // for them); only at the top level are they the graph's feeds and fetches.
    return depth == 0 && !filter.allow_top_level_args ? "top level _Arg or _Retval" : "";
  }
  // A function call (PartitionedCall's `f`, or an op naming a library function) compiles when
  // every node of the function's body does: TensorFlow's IsCompilableCall.
  if (std::optional<graph::NameAttrList> call = CalledFunction(node, graph.library())) {
    if (depth > 10) return "function depth limit exceeded";
    auto body = graph::InstantiateFunction(graph.library(), *call, &graph.registry());
    if (!body.ok()) return "could not instantiate: " + body.status().message();
    for (Node* inner : (*body)->graph->op_nodes()) {
      std::string reason = UncompilableReason(*inner, *(*body)->graph, filter, depth + 1);
      if (!reason.empty()) return fmt::format("unsupported op {}: {}", inner->name(), reason);
    }
    return "";
  }
  if (depth > 0 && !filter.allow_resource_ops_in_called_functions) {
    for (DataType t : node.input_types()) {
      if (t == graph::DT_RESOURCE) return "resource variable op in called function";
    }
  }
  if (op == "Unique" && !filter.allow_unique_op) return "Unique op";
  if (op == "Where" && !filter.allow_where_op) return "Where op";
  if (IsStatefulRandomOp(op) && !filter.allow_stateful_rng_ops) return "stateful random op";
  if (IsDummyImplOp(op) && !filter.allow_dummy_ops) return "Assert or CheckNumerics";
  if (op == "ControlTrigger" && !filter.allow_control_trigger) return "not allowed ControlTrigger";
  if (op == "SymbolicGradient") return NoKernel(node);
  if (IsConstant(node)) {
    const graph::AttrValue* dtype = graph::FindAttr(node.attrs(), "dtype");
    if (dtype != nullptr && dtype->type() == graph::DT_STRING) {
      return filter.allow_string_consts ? "" : NoKernel(node);
    }
  }
  if (HasForwardedRefInput(node)) return "Identity with unsafe cast.";
  if (!node.registration().has_xla_kernel || !node.has_kernel()) {
    // TensorFlow's XLA kernel for _FusedConv2D takes only int8 and qint8 (cuDNN's int8
    // convolutions): a float one is TensorFlow's "no kernel" too.
    if (op == "_FusedConv2D" && !HasType(node, graph::DT_INT8) &&
        !HasType(node, graph::DT_QINT8)) {
      return NoKernel(node);
    }
    return TensorFlowCompilesForXlaCpu(op) ? NoLowering(node) : NoKernel(node);
  }
  // TensorFlow's kernels for the op, if any, do not take these types either: its words.
  if (HasUnsupportedType(node)) return NoKernel(node);
  if (!filter.allow_variant_ops && HasType(node, graph::DT_VARIANT)) {
    return "DT_VARIANT producer/consumer";
  }
  if (!filter.allow_stack_ops &&
      (op == "StackV2" || op == "StackPushV2" || op == "StackPopV2" || op == "StackCloseV2")) {
    return "Stack op";
  }
  if (!filter.allow_tensor_array_ops && op.rfind("TensorArray", 0) == 0) return "TensorArray op";
  return "";
}

}  // namespace xlens::cluster
