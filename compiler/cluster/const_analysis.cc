#include "compiler/cluster/const_analysis.h"

#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/graph/op_def.h"

namespace xlens::cluster {

using graph::Edge;
using graph::Node;

std::vector<int> CompileTimeConstInputIndices(const Node& node) {
  std::vector<int> indices;
  const auto& const_args = node.registration().compile_time_const_inputs;
  if (const_args.empty()) return indices;
  // Input args may be lists (N tensors): walk the signature to find each arg's range.
  int index = 0;
  for (const graph::OpDef::ArgDef& arg : node.op_def().input_arg) {
    int count = 1;
    if (!arg.number_attr.empty()) {
      const graph::AttrValue* n = graph::FindAttr(node.attrs(), arg.number_attr);
      count = n != nullptr ? static_cast<int>(n->i()) : 0;
    } else if (!arg.type_list_attr.empty()) {
      const graph::AttrValue* types = graph::FindAttr(node.attrs(), arg.type_list_attr);
      count = types != nullptr ? static_cast<int>(types->list().type.size()) : 0;
    }
    bool is_const = false;
    for (const std::string& name : const_args) is_const |= name == arg.name;
    for (int k = 0; k < count; ++k, ++index) {
      if (is_const) indices.push_back(index);
    }
  }
  return indices;
}

StatusOr<std::vector<bool>> BackwardsConstAnalysis(
    const graph::Graph& graph, const std::function<bool(const Edge&)>& edge_filter) {
  std::vector<bool> must_be_const(graph.num_node_ids(), false);
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());
  auto accepts = [&](const Edge& e) { return !edge_filter || edge_filter(e); };
  // Consumers before producers, so a constness reaches everything it depends on.
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    Node* node = *it;
    if (must_be_const[node->id()]) {
      // A shape op's output is known from its input's shape, not its value.
      if (IsShapeConsumerOp(*node) || node->type_string() == "ShapeN") continue;
      for (const Edge* e : node->in_edges()) {
        if (!e->IsControlEdge() && accepts(*e)) must_be_const[e->src->id()] = true;
      }
      continue;
    }
    for (int i : CompileTimeConstInputIndices(*node)) {
      const Edge* e = node->input_edge(i);
      if (e != nullptr && accepts(*e)) must_be_const[e->src->id()] = true;
    }
  }
  return must_be_const;
}

}  // namespace xlens::cluster
