#include "compiler/graph/subgraph.h"

#include <deque>
#include <set>

namespace xlens::graph {

std::string RunSignature::Key() const {
  auto join = [](std::vector<std::string> v) {
    std::sort(v.begin(), v.end());
    std::string out;
    for (const std::string& s : v) out += s + ",";
    return out;
  };
  // Fetch order matters for the result order, so fetches are not sorted.
  std::string fetch_list;
  for (const std::string& s : fetches) fetch_list += s + ",";
  return join(feeds) + "->" + fetch_list + "//" + join(targets);
}

Status CopyGraph(const Graph& src, Graph* dst) {
  std::vector<Node*> map(src.num_node_ids(), nullptr);
  map[0] = dst->source_node();
  map[1] = dst->sink_node();
  // First: a node whose op names a library function resolves through it.
  dst->library() = src.library();
  dst->versions() = src.versions();
  for (Node* n : src.op_nodes()) {
    NodeDef def = n->def();
    def.input.clear();
    ASSIGN_OR_RETURN(Node * copy, dst->AddNode(std::move(def)));
    map[n->id()] = copy;
  }
  for (Node* n : src.op_nodes()) {
    for (const Edge* e : n->in_edges()) {
      if (!e->src->IsOp()) continue;
      if (e->IsControlEdge()) {
        dst->AddControlEdge(map[e->src->id()], map[n->id()]);
      } else {
        dst->AddEdge(map[e->src->id()], e->src_output, map[n->id()], e->dst_input);
      }
    }
  }
  return OkStatus();
}

int PruneForReverseReachability(Graph* graph, const std::vector<Node*>& roots) {
  std::vector<char> keep(graph->num_node_ids(), 0);
  std::deque<Node*> queue(roots.begin(), roots.end());
  for (Node* n : roots) keep[n->id()] = 1;
  while (!queue.empty()) {
    Node* n = queue.front();
    queue.pop_front();
    for (const Edge* e : n->in_edges()) {
      if (e->src->IsOp() && !keep[e->src->id()]) {
        keep[e->src->id()] = 1;
        queue.push_back(e->src);
      }
    }
  }
  int removed = 0;
  for (Node* n : graph->op_nodes()) {
    if (!keep[n->id()]) {
      graph->RemoveNode(n);
      ++removed;
    }
  }
  return removed;
}

namespace {

// "x:0" -> "x_0" as TensorFlow names the _Arg/_Retval of a feed or fetch.
std::string Mangle(const TensorId& id) { return id.node + "_" + std::to_string(id.index); }

}  // namespace

StatusOr<std::unique_ptr<Graph>> RewriteGraphForExecution(const Graph& graph,
                                                          const RunSignature& signature) {
  auto g = std::make_unique<Graph>(&graph.registry());
  RETURN_IF_ERROR(CopyGraph(graph, g.get()));

  std::vector<Node*> roots;
  // Feeds: the fed output's consumers read an _Arg instead.
  std::set<std::string> fed;
  for (size_t k = 0; k < signature.feeds.size(); ++k) {
    ASSIGN_OR_RETURN(TensorId id, ParseTensorName(signature.feeds[k]));
    if (id.IsControl()) return Status::Error("feed '" + signature.feeds[k] + "' is not a tensor");
    Node* n = g->FindNode(id.node);
    if (!n) return Status::Error("feed '" + signature.feeds[k] + "': no node named '" + id.node + "'");
    if (id.index >= n->num_outputs()) {
      return Status::Error("feed '" + signature.feeds[k] + "': node '" + id.node + "' has " +
                           std::to_string(n->num_outputs()) + " outputs");
    }
    if (!fed.insert(id.ToString()).second) {
      return Status::Error("feed '" + signature.feeds[k] + "' is given twice");
    }
    NodeDef arg;
    arg.name = g->NewName("_arg_" + Mangle(id) + "_" + std::to_string(k));
    arg.op = "_Arg";
    arg.device = n->requested_device();
    arg.attr["T"] = AttrValue::Type(RemoveRefType(n->output_type(id.index)));
    arg.attr["index"] = AttrValue::Int(static_cast<int64_t>(k));
    ASSIGN_OR_RETURN(Node * arg_node, g->AddNode(std::move(arg)));
    std::vector<const Edge*> outs(n->out_edges().begin(), n->out_edges().end());
    const bool is_placeholder =
        n->type_string() == "Placeholder" || n->type_string() == "PlaceholderV2";
    for (const Edge* e : outs) {
      if (!e->IsControlEdge() && e->src_output == id.index) {
        Node* dst = e->dst;
        int input = e->dst_input;
        g->RemoveEdge(e);
        g->AddEdge(arg_node, 0, dst, input);
      } else if (e->IsControlEdge() && is_placeholder && e->dst->IsOp()) {
        // A fed Placeholder's control edges wait for the fed value instead, as TensorFlow's
        // FeedInputs rewrites them: otherwise the Placeholder itself would have to run (and
        // fail for want of a value) for the ops that waited for it (gradient code puts
        // control dependencies on the incoming gradient, which may be a fed placeholder).
        Node* dst = e->dst;
        g->RemoveEdge(e);
        g->AddControlEdge(arg_node, dst);
      }
    }
  }
  // Fetches: each feeds a _Retval.
  for (size_t k = 0; k < signature.fetches.size(); ++k) {
    ASSIGN_OR_RETURN(TensorId id, ParseTensorName(signature.fetches[k]));
    if (id.IsControl()) {
      return Status::Error("fetch '" + signature.fetches[k] + "' is not a tensor (use a target)");
    }
    Node* n = g->FindNode(id.node);
    if (!n) {
      return Status::Error("fetch '" + signature.fetches[k] + "': no node named '" + id.node + "'");
    }
    if (id.index >= n->num_outputs()) {
      return Status::Error("fetch '" + signature.fetches[k] + "': node '" + id.node + "' has " +
                           std::to_string(n->num_outputs()) + " output" +
                           (n->num_outputs() == 1 ? "" : "s"));
    }
    Node* src = n;
    int src_output = id.index;
    // A fetch of a fed tensor returns the fed value.
    if (fed.count(id.ToString())) {
      for (Node* a : g->op_nodes()) {
        if (a->type_string() == "_Arg" && a->name().rfind("_arg_" + Mangle(id) + "_", 0) == 0) {
          src = a;
          src_output = 0;
        }
      }
    }
    NodeDef ret;
    ret.name = g->NewName("_retval_" + Mangle(id) + "_" + std::to_string(k));
    ret.op = "_Retval";
    ret.device = n->requested_device();
    ret.attr["T"] = AttrValue::Type(RemoveRefType(n->output_type(id.index)));
    ret.attr["index"] = AttrValue::Int(static_cast<int64_t>(k));
    ASSIGN_OR_RETURN(Node * ret_node, g->AddNode(std::move(ret)));
    g->AddEdge(src, src_output, ret_node, 0);
    roots.push_back(ret_node);
  }
  for (const std::string& target : signature.targets) {
    std::string name = !target.empty() && target[0] == '^' ? target.substr(1) : target;
    Node* n = g->FindNode(name);
    if (!n) return Status::Error("target '" + target + "': no node named '" + name + "'");
    roots.push_back(n);
  }
  PruneForReverseReachability(g.get(), roots);
  return g;
}

}  // namespace xlens::graph
