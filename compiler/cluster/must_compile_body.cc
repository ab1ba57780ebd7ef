#include "compiler/cluster/must_compile_body.h"

#include <set>

#include "compiler/cluster/compilability_check.h"
#include "compiler/cluster/tf2xla/functional_ops.h"
#include "compiler/graph/variable_nodes.h"
#include "compiler/graph/function.h"
#include "compiler/graph/types.h"

namespace xlens::cluster {

namespace {

bool IsReferenceVariable(const graph::Node& node) {
  const std::string& op = node.type_string();
  return op == "VariableV2" || op == "Variable";
}

// The reason a node is outside, or "" when it is part of the compiled function. `host` holds the
// node ids already outside; nodes come in topological order.
std::string HostReason(const graph::Node& node, const std::set<int>& host) {
  const std::string& op = node.type_string();
  std::string reason;
  if (op == "VarHandleOp") {
    reason = "a resource variable's handle: the variable is an input of the compiled function";
  } else if (graph::IsResourcePlaceholder(node)) {
    reason = "a captured resource variable: the variable is an input of the compiled function";
  } else if (IsReferenceVariable(node)) {
    reason = "a reference variable: its value is an input of the compiled function";
  } else if (HasForwardedRefInput(node)) {
    reason = "reads a reference variable: its value is an input of the compiled function";
  } else {
    return "";
  }
  for (const graph::Edge* e : node.in_edges()) {
    if (!e->src->IsOp()) continue;
    if (host.count(e->src->id()) == 0) return "";
  }
  return reason;
}

}  // namespace

std::map<std::string, std::string> MustCompileHostNodes(const graph::Graph& graph) {
  std::map<std::string, std::string> out;
  auto order = graph.TopologicalOrder();
  if (!order.ok()) return out;  // the clustering reports the cycle
  std::set<int> host;
  for (const graph::Node* node : *order) {
    if (!node->IsOp()) continue;
    std::string reason = HostReason(*node, host);
    if (reason.empty()) continue;
    host.insert(node->id());
    out[node->name()] = std::move(reason);
  }
  return out;
}

std::string MustCompileReason(const graph::Node& node, const graph::Graph& graph,
                              const OperationFilter& filter, int depth) {
  const std::string& op = node.type_string();
  if (!IsFunctionalWhile(op) && !IsFunctionalIf(op) && !IsFunctionalCase(op)) {
    return UncompilableReason(node, graph, filter, depth);
  }
  if (depth > 10) return "function depth limit exceeded";
  const std::vector<graph::NameAttrList> functions = FunctionalOpFunctions(node);
  if (functions.empty()) return "no functions to call";
  for (const graph::NameAttrList& f : functions) {
    auto body = graph::InstantiateFunction(graph.library(), f, &graph.registry());
    if (!body.ok()) return "could not instantiate: " + body.status().message();
    for (graph::Node* inner : (*body)->graph->op_nodes()) {
      const std::string& inner_op = inner->type_string();
      if (inner_op == "_Arg" || inner_op == "_Retval") continue;
      std::string reason = MustCompileReason(*inner, *(*body)->graph, filter, depth + 1);
      if (!reason.empty()) return "unsupported op " + inner->name() + ": " + reason;
    }
  }
  return "";
}

void KeepFunctionalControlFlow(graph::GraphDef* def) {
  auto keep = [](graph::NodeDef& node) {
    if (IsFunctionalWhile(node.op) || IsFunctionalIf(node.op) || IsFunctionalCase(node.op)) {
      node.attr.erase("_lower_using_switch_merge");
    }
  };
  for (graph::NodeDef& node : def->node) keep(node);
  for (graph::FunctionDef& f : def->library.function) {
    for (graph::NodeDef& node : f.node_def) keep(node);
  }
}

}  // namespace xlens::cluster
