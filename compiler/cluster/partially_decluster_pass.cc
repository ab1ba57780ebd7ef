#include "compiler/cluster/partially_decluster_pass.h"

#include <algorithm>

#include "compiler/cluster/const_analysis.h"
#include "compiler/cluster/xla_cluster_util.h"

namespace xlens::cluster {

using graph::Edge;
using graph::Graph;
using graph::Node;

namespace {

// TensorFlow's GetReversePostOrder with nodes compared by name: a depth-first walk from the
// nodes without inputs, children in name order, NextIteration back edges skipped.
std::vector<Node*> ReversePostOrderByName(const Graph& graph) {
  auto by_name = [](const Node* a, const Node* b) { return a->name() < b->name(); };
  std::vector<Node*> roots;
  for (Node* n : graph.op_nodes()) {
    if (n->in_edges().empty()) roots.push_back(n);
  }
  std::sort(roots.begin(), roots.end(), by_name);
  std::vector<bool> visited(graph.num_node_ids(), false);
  std::vector<Node*> post;
  struct Frame {
    Node* node;
    std::vector<Node*> children;
    size_t next = 0;
  };
  auto children_of = [&](Node* n) {
    std::vector<Node*> out;
    for (const Edge* e : n->out_edges()) {
      if (e->src->IsNextIteration()) continue;
      if (e->dst->IsOp()) out.push_back(e->dst);
    }
    std::sort(out.begin(), out.end(), by_name);
    return out;
  };
  // _SOURCE is the single root TensorFlow starts from; its children are the roots, in order.
  for (Node* root : roots) {
    if (visited[root->id()]) continue;
    std::vector<Frame> stack;
    visited[root->id()] = true;
    stack.push_back({root, children_of(root)});
    while (!stack.empty()) {
      Frame& top = stack.back();
      if (top.next < top.children.size()) {
        Node* child = top.children[top.next++];
        if (!visited[child->id()]) {
          visited[child->id()] = true;
          stack.push_back({child, children_of(child)});
        }
        continue;
      }
      post.push_back(top.node);
      stack.pop_back();
    }
  }
  std::reverse(post.begin(), post.end());
  return post;
}

void Decluster(Node* n, const std::string& cluster, const std::string& reason,
               ClusteringResult* result) {
  (void)cluster;
  RemoveFromXlaCluster(n);
  result->declustered[n->name()] = reason;
}

}  // namespace

Status PartiallyDeclusterPass::Run(Graph* graph, ClusteringResult* result) const {
  // Must-be-constant nodes, looking only along edges inside one cluster.
  auto intra_cluster = [](const Edge& e) {
    auto src = GetXlaClusterForNode(*e.src);
    return src.has_value() && src == GetXlaClusterForNode(*e.dst);
  };
  ASSIGN_OR_RETURN(std::vector<bool> must_be_const, BackwardsConstAnalysis(*graph, intra_cluster));
  std::vector<Node*> rpo = ReversePostOrderByName(*graph);
  for (Node* n : rpo) {
    if (!must_be_const[n->id()]) continue;
    std::optional<std::string> cluster = GetXlaClusterForNode(*n);
    if (!cluster) continue;
    bool on_cluster_edge = std::all_of(n->in_edges().begin(), n->in_edges().end(),
                                       [&](const Edge* e) {
                                         auto c = GetXlaClusterForNode(*e->src);
                                         return !c || *c != *cluster;
                                       });
    // Every op here has a TensorFlow kernel to run it outside; a Const stays (it needs no input,
    // and nothing is gained by moving it).
    if (!on_cluster_edge || IsConstant(*n) || !n->has_kernel()) continue;
    Decluster(n, *cluster,
              "must-be-constant input of " + *cluster +
                  " computed only from values outside it: declustered so the cluster receives it "
                  "as a constant argument and compiles once per distinct value",
              result);
  }
  for (Node* n : rpo) {
    if (!IsShapeConsumerOp(*n)) continue;
    std::optional<std::string> cluster = GetXlaClusterForNode(*n);
    if (!cluster) continue;
    bool input_in_cluster = std::any_of(n->in_edges().begin(), n->in_edges().end(),
                                        [&](const Edge* e) {
                                          return GetXlaClusterForNode(*e->src) == cluster;
                                        });
    if (input_in_cluster) continue;
    Decluster(n, *cluster,
              "Declustering " + n->type_string() + " because it is a root shape consumer: none "
              "of its inputs comes from " + *cluster,
              result);
  }
  return OkStatus();
}

}  // namespace xlens::cluster
