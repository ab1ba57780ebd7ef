#include "compiler/cluster/resource_operation_safety_analysis.h"

#include <map>

#include "compiler/cluster/xla_cluster_util.h"

namespace xlens::cluster {

using graph::Edge;
using graph::Node;

namespace {

// Read -> anything and anything -> Write can live in one cluster.
bool IsEdgeSafe(XlaResourceOpKind from, XlaResourceOpKind to) {
  return from == XlaResourceOpKind::kRead || to == XlaResourceOpKind::kWrite;
}

}  // namespace

StatusOr<std::vector<std::pair<int, int>>> ComputeIncompatibleResourceOperationPairs(
    const graph::Graph& graph) {
  std::vector<std::pair<int, int>> result;
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());
  // Per node: the writing resource operations that reach it (reads never conflict as a source,
  // so they are not carried), by node id.
  std::vector<std::map<int, XlaResourceOpKind>> reaching(graph.num_node_ids());
  for (Node* node : order) {
    std::map<int, XlaResourceOpKind>& set = reaching[node->id()];
    for (const Edge* e : node->in_edges()) {
      if (node->IsMerge() && e->src->IsNextIteration()) continue;  // back edges
      const auto& incoming = reaching[e->src->id()];
      set.insert(incoming.begin(), incoming.end());
    }
    std::optional<XlaResourceOpKind> kind = ResourceOpKindFor(node->type_string());
    if (!kind && MayCallFunction(*node, graph)) kind = XlaResourceOpKind::kReadWrite;
    if (!kind) continue;
    for (const auto& [id, incoming_kind] : set) {
      if (!IsEdgeSafe(incoming_kind, *kind)) result.push_back({id, node->id()});
    }
    if (*kind != XlaResourceOpKind::kRead) set[node->id()] = *kind;
  }
  return result;
}

}  // namespace xlens::cluster
