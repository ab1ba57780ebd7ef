#include "compiler/cluster/encapsulate_subgraphs_pass.h"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>
#include <set>

#include "compiler/graph/function.h"

namespace xlens::cluster {

using graph::AttrValue;
using graph::DataType;
using graph::Edge;
using graph::GraphDef;
using graph::Node;
using graph::NodeDef;
using graph::TensorId;

namespace {

// Ops whose output depends only on their input's shape: a constant wanted from them does not
// make their input a constant (TensorFlow's IsMetadataOp in const analysis).
bool IsMetadataOp(const Node& n) {
  const std::string& op = n.type_string();
  return op == "Shape" || op == "ShapeN" || op == "Rank" || op == "Size";
}

std::string ClusterOf(const Node& n) {
  const AttrValue* a = graph::FindAttr(n.attrs(), kXlaClusterAttr);
  return a && a->kind() == AttrValue::Kind::kString ? a->s() : "";
}

using TensorKey = std::pair<const Node*, int>;

// One cluster being turned into a function.
struct Subgraph {
  std::string name;
  std::vector<Node*> nodes;  // in node id order
  std::set<const Node*> members;
  std::string device;  // the first member's

  struct Arg {
    TensorKey src;
    std::string name;
    DataType type;
  };
  std::vector<Arg> args;  // in the order the edges met them
  std::map<TensorKey, int> arg_by_src;
  std::vector<Arg> results;
  std::map<TensorKey, int> result_by_src;
  // The order _Arg (true) and _Retval (false) nodes were made, for the subgraph's node order.
  std::vector<std::pair<bool, int>> interface_order;
  std::set<std::string> control_outputs;

  std::vector<bool> const_args;
  std::vector<int> permutation;  // old arg index -> new
  int num_constants = 0;
  int num_resources = 0;

  int RecordArg(const Edge* e) {
    TensorKey key{e->src, e->src_output};
    auto [it, inserted] = arg_by_src.emplace(key, static_cast<int>(args.size()));
    if (inserted) {
      args.push_back({key, e->src->name() + "_" + std::to_string(e->src_output) + "_arg",
                      graph::RemoveRefType(e->src->output_type(e->src_output))});
      interface_order.emplace_back(true, it->second);
    }
    return it->second;
  }
  int RecordResult(const Edge* e) {
    TensorKey key{e->src, e->src_output};
    auto [it, inserted] = result_by_src.emplace(key, static_cast<int>(results.size()));
    if (inserted) {
      results.push_back({key, e->src->name() + "_" + std::to_string(e->src_output) + "_retval",
                         graph::RemoveRefType(e->src->output_type(e->src_output))});
      interface_order.emplace_back(false, it->second);
    }
    return it->second;
  }
};

// TensorFlow's BackwardsConstAnalysis restricted to one cluster: which of its arguments must be
// known at compile time. `topo_position` is each node id's place in a topological order; only the
// cluster's own nodes are walked, so that encapsulating many clusters stays linear in the graph.
Status AnalyzeConstArgs(const std::vector<int>& topo_position, Subgraph* s) {
  s->const_args.assign(s->args.size(), false);
  std::set<const Node*> must_be_const;
  std::function<void(const Edge*)> want = [&](const Edge* e) {
    const std::string& op = e->src->type_string();
    if (s->members.count(e->src) &&
        (op == "While" || op == "StatelessWhile" || op == "IdentityN")) {
      // As TensorFlow's: a constant wanted from a While or IdentityN output wants only the
      // input it passes on, not every input (a loop's variables among them).
      if (const Edge* in = e->src->input_edge(e->src_output)) want(in);
      return;
    }
    if (s->members.count(e->src)) {
      must_be_const.insert(e->src);
    } else {
      auto it = s->arg_by_src.find({e->src, e->src_output});
      // A resource's handle is no compile-time constant (TensorFlow's launch refuses one).
      if (it != s->arg_by_src.end() && s->args[it->second].type != graph::DT_RESOURCE) {
        s->const_args[it->second] = true;
      }
    }
  };
  std::vector<Node*> consumers_first = s->nodes;
  std::sort(consumers_first.begin(), consumers_first.end(), [&](const Node* a, const Node* b) {
    return topo_position[a->id()] > topo_position[b->id()];
  });
  for (Node* n : consumers_first) {
    if (must_be_const.count(n)) {
      if (IsMetadataOp(*n)) continue;
      for (const Edge* e : n->in_edges()) {
        if (!e->IsControlEdge()) want(e);
      }
      continue;
    }
    std::vector<bool> const_inputs = CompileTimeConstInputs(*n);
    for (int i = 0; i < n->num_inputs(); ++i) {
      if (!const_inputs[i]) continue;
      if (const Edge* e = n->input_edge(i)) want(e);
    }
  }
  return OkStatus();
}

void OrderArgs(Subgraph* s) {
  const int n = static_cast<int>(s->args.size());
  s->num_constants = static_cast<int>(std::count(s->const_args.begin(), s->const_args.end(), true));
  s->num_resources = 0;
  for (int i = 0; i < n; ++i) {
    if (!s->const_args[i] && s->args[i].type == graph::DT_RESOURCE) ++s->num_resources;
  }
  int next_const = 0, next_arg = s->num_constants, next_resource = n - s->num_resources;
  s->permutation.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    if (s->const_args[i]) {
      s->permutation[i] = next_const++;
    } else if (s->args[i].type == graph::DT_RESOURCE) {
      s->permutation[i] = next_resource++;
    } else {
      s->permutation[i] = next_arg++;
    }
  }
}

// The cluster's body as a graph of _Arg/_Retval form: its nodes (without `_XlaCluster`), then the
// interface nodes in the order they were made, as TensorFlow's subgraph dump has them. The _Arg
// indices are the order of the edges, or with `permuted` the launch's order (constants first).
GraphDef SubgraphDef(const Subgraph& s, const graph::Graph& g, bool permuted) {
  GraphDef def;
  def.versions = g.versions();
  for (const Node* n : s.nodes) {
    NodeDef nd = n->def();
    nd.input.clear();
    nd.attr.erase(kXlaClusterAttr);
    for (int i = 0; i < n->num_inputs(); ++i) {
      const Edge* e = n->input_edge(i);
      if (!e) continue;
      if (s.members.count(e->src)) {
        nd.input.push_back(TensorId{e->src->name(), e->src_output}.ToString());
      } else {
        nd.input.push_back(s.args[s.arg_by_src.at({e->src, e->src_output})].name);
      }
    }
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() && s.members.count(e->src)) nd.input.push_back("^" + e->src->name());
    }
    def.node.push_back(std::move(nd));
  }
  for (const auto& [is_arg, index] : s.interface_order) {
    NodeDef nd;
    if (is_arg) {
      const Subgraph::Arg& a = s.args[index];
      nd.name = a.name;
      nd.op = "_Arg";
      nd.attr["T"] = AttrValue::Type(a.type);
      nd.attr["index"] = AttrValue::Int(permuted ? s.permutation[index] : index);
    } else {
      const Subgraph::Arg& r = s.results[index];
      nd.name = r.name;
      nd.op = "_Retval";
      nd.input.push_back(TensorId{r.src.first->name(), r.src.second}.ToString());
      nd.attr["T"] = AttrValue::Type(r.type);
      nd.attr["index"] = AttrValue::Int(index);
    }
    def.node.push_back(std::move(nd));
  }
  return def;
}

// TensorFlow optimizes a cluster's body before making it a function (OptimizeGraph): of nodes
// that compute the same thing (same op, device, attrs and inputs, not stateful, not control
// flow) the first in node order stays and the others are folded into it. That is what takes back
// the constants clone_constants_for_better_clustering copied (`.../clone_0`). TensorFlow's
// constant folding of the body is not done here (see the pass's header).
void EliminateCommonSubexpressions(GraphDef* def, const graph::OpRegistry& registry) {
  std::map<std::string, std::string> replaced;  // removed node -> the node that stays
  auto canonical = [&](const std::string& input) {
    auto id = graph::ParseTensorName(input);
    if (!id.ok()) return input;
    auto it = replaced.find(id->node);
    if (it == replaced.end()) return input;
    id->node = it->second;
    return id->ToString();
  };
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::string, std::vector<const NodeDef*>> by_key;
    for (const NodeDef& n : def->node) {
      if (replaced.count(n.name) || n.op == "_Arg" || n.op == "_Retval") continue;
      const graph::OpRegistration* reg = registry.Find(n.op);
      if (!reg || reg->op_def.is_stateful) continue;
      if (n.op == "Switch" || n.op == "Merge" || n.op == "Enter" || n.op == "Exit" ||
          n.op == "NextIteration" || n.op == "LoopCond") {
        continue;
      }
      std::string key = n.op + "|" + n.device;
      std::set<std::string> control;
      for (const std::string& in : n.input) {
        if (!in.empty() && in[0] == '^') {
          control.insert(canonical(in));
        } else {
          key += "|" + canonical(in);
        }
      }
      for (const std::string& c : control) key += "|" + c;
      auto& same = by_key[key];
      const NodeDef* kept = nullptr;
      for (const NodeDef* other : same) {
        if (other->attr == n.attr) {
          kept = other;
          break;
        }
      }
      if (kept) {
        replaced[n.name] = kept->name;
        changed = true;
      } else {
        same.push_back(&n);
      }
    }
  }
  if (replaced.empty()) return;
  std::vector<NodeDef> kept;
  for (NodeDef& n : def->node) {
    if (replaced.count(n.name)) continue;
    std::vector<std::string> inputs;
    std::set<std::string> seen_control;
    for (const std::string& in : n.input) {
      std::string c = canonical(in);
      if (!c.empty() && c[0] == '^' && !seen_control.insert(c).second) continue;
      inputs.push_back(c);
    }
    n.input = std::move(inputs);
    kept.push_back(std::move(n));
  }
  def->node = std::move(kept);
}

// TensorFlow's RemoveIdentityNodes, the other step of OptimizeGraph that shows in its dumps: an
// Identity with exactly one input, a data input that is not a reference, and consumers is
// bypassed (its consumers read its input; its control consumers wait for its input's node).
void RemoveIdentityNodes(GraphDef* def, const graph::Graph& g) {
  for (bool changed = true; changed;) {
    changed = false;
    std::map<std::string, int> uses;
    for (const NodeDef& n : def->node) {
      for (const std::string& in : n.input) {
        auto id = graph::ParseTensorName(in);
        if (id.ok()) ++uses[id->node];
      }
    }
    for (size_t i = 0; i < def->node.size(); ++i) {
      const NodeDef& n = def->node[i];
      if (n.op != "Identity" || n.input.size() != 1 || n.input[0].empty() ||
          n.input[0][0] == '^' || !uses.count(n.name)) {
        continue;
      }
      const Node* original = g.FindNode(n.name);
      if (!original || original->num_inputs() != 1 || graph::IsRefType(original->input_type(0))) {
        continue;
      }
      const std::string name = n.name;
      const std::string input = n.input[0];
      auto in_id = graph::ParseTensorName(input);
      if (!in_id.ok()) continue;
      const std::string input_node = in_id->node;
      def->node.erase(def->node.begin() + static_cast<long>(i));
      for (NodeDef& c : def->node) {
        std::vector<std::string> inputs;
        std::set<std::string> control;
        for (const std::string& in : c.input) {
          auto id = graph::ParseTensorName(in);
          std::string r = in;
          if (id.ok() && id->node == name) r = id->IsControl() ? "^" + input_node : input;
          if (!r.empty() && r[0] == '^' && !control.insert(r).second) continue;
          inputs.push_back(r);
        }
        c.input = std::move(inputs);
      }
      changed = true;
      break;
    }
  }
}

// A body node waiting for an argument keeps that control input in TensorFlow's FunctionDef
// (`^x_0_arg`); GraphToFunctionDef leaves it out, so it is put back here.
void RestoreArgControlInputs(const GraphDef& body_def, graph::FunctionDef* f) {
  std::set<std::string> args;
  for (const NodeDef& n : body_def.node) {
    if (n.op == "_Arg") args.insert(n.name);
  }
  std::map<std::string, std::vector<std::string>> arg_controls;
  for (const NodeDef& n : body_def.node) {
    for (const std::string& in : n.input) {
      if (!in.empty() && in[0] == '^' && args.count(in.substr(1))) {
        arg_controls[n.name].push_back(in);
      }
    }
  }
  for (NodeDef& n : f->node_def) {
    auto it = arg_controls.find(n.name);
    if (it == arg_controls.end()) continue;
    for (const std::string& c : it->second) n.input.push_back(c);
  }
}

// Renames the signature's arguments and results as TensorFlow's GraphToFunctionDef does.
void NormalizeSignatureNames(graph::FunctionDef* f) {
  std::set<std::string> used;
  auto unique = [&](const std::string& name) {
    std::string base = NormalizeFunctionArgName(name), out = base;
    for (int k = 1; !used.insert(out).second; ++k) out = base + "_" + std::to_string(k);
    return out;
  };
  std::map<std::string, std::string> renamed_args;
  for (auto& a : f->signature.input_arg) {
    std::string n = unique(a.name);
    renamed_args[a.name] = n;
    a.name = n;
  }
  for (NodeDef& nd : f->node_def) {
    for (std::string& in : nd.input) {
      bool control = !in.empty() && in[0] == '^';
      auto it = renamed_args.find(control ? in.substr(1) : in);
      if (it != renamed_args.end()) in = (control ? "^" : "") + it->second;
    }
  }
  std::map<std::string, std::string> ret;
  for (auto& a : f->signature.output_arg) {
    std::string n = unique(a.name);
    // A result that is an argument itself (a pivot's value passed through) names it too.
    const std::string& value = f->ret.at(a.name);
    auto arg = renamed_args.find(value);
    ret[n] = arg != renamed_args.end() ? arg->second : value;
    a.name = n;
  }
  f->ret = std::move(ret);
}

bool HasRefType(const Node& n) {
  for (DataType t : n.input_types()) {
    if (graph::IsRefType(t)) return true;
  }
  for (DataType t : n.output_types()) {
    if (graph::IsRefType(t)) return true;
  }
  return false;
}

// Whether TensorFlow's graph joins `n` to its _SINK, which makes a cluster member a control
// output of its function. TensorFlow adds that edge to a node without consumers when a graph is
// built; our graphs carry no sink edges, so this recognises the two ways it shows: a node with no
// out-edges, and a node whose only consumers are the `_retval_<node>_<i>_<j>` nodes a TF1 session
// adds for its fetches after the graph was built (the node had no consumer before).
bool JoinedToSink(const Node& n) {
  if (n.out_edges().empty()) return true;
  for (const Edge* e : n.out_edges()) {
    if (e->IsControlEdge() || e->dst->type_string() != "_Retval" ||
        e->dst->name().rfind("_retval_", 0) != 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string NormalizeFunctionArgName(const std::string& name) {
  std::string out;
  for (char c : name) {
    unsigned char u = static_cast<unsigned char>(c);
    out += std::isalnum(u) ? static_cast<char>(std::tolower(u)) : '_';
  }
  size_t first = out.find_first_not_of('_');
  if (first == std::string::npos) return "unknown";
  return out.substr(first);
}

std::vector<bool> CompileTimeConstInputs(const Node& node) {
  std::vector<bool> out(node.num_inputs(), false);
  for (const std::string& arg : node.registration().compile_time_const_inputs) {
    int start = 0, end = 0;
    if (!graph::NameRangeForArg(node.name(), node.attrs(), node.op_def(), /*is_input=*/true, arg,
                                &start, &end)
             .ok()) {
      continue;
    }
    for (int i = start; i < end && i < node.num_inputs(); ++i) out[i] = true;
  }
  return out;
}

void EncapsulateSubgraphsPass::DumpOrNote(StatusOr<std::string> written) {
  if (!written.ok()) dump_errors_.push_back(written.status().message());
}

StatusOr<GraphWithFunctions> EncapsulateSubgraphsPass::Run(const graph::Graph& g) {
  dump_errors_.clear();
  if (dumper_) DumpOrNote(dumper_->Dump("encapsulate_subgraphs_before", g, result_));

  // The clusters, in the order their first members appear.
  std::vector<Subgraph> subgraphs;
  std::map<std::string, int> index_of;
  std::map<const Node*, int> cluster_of;
  for (Node* n : g.op_nodes()) {
    std::string c = ClusterOf(*n);
    if (c.empty()) continue;
    auto [it, inserted] = index_of.emplace(c, static_cast<int>(subgraphs.size()));
    if (inserted) {
      subgraphs.emplace_back();
      subgraphs.back().name = c;
      subgraphs.back().device = n->requested_device();
      if (g.registry().Find(c) || g.library().Find(c)) {
        return Status::Error("cluster '" + c + "' of node '" + n->name() +
                             "' is named as an op or function that exists already");
      }
    }
    subgraphs[it->second].nodes.push_back(n);
    subgraphs[it->second].members.insert(n);
    cluster_of[n] = it->second;
  }
  auto cluster_index = [&](const Node* n) {
    auto it = cluster_of.find(n);
    return it == cluster_of.end() ? -1 : it->second;
  };

  // Edges in the order TensorFlow made them: its Encapsulator numbers arguments and results in
  // edge id order. Ours follow the GraphDef; the one difference a dump shows is a TF1 session's
  // feeds and fetches, which TensorFlow wires in (`_arg_<feed>_...`, `_retval_<fetch>_...`) after
  // the graph was built, so their edges come after all others.
  auto rewired = [](const Edge* e) {
    return (e->src->type_string() == "_Arg" && e->src->name().rfind("_arg_", 0) == 0) ||
           (e->dst->type_string() == "_Retval" && e->dst->name().rfind("_retval_", 0) == 0);
  };
  std::vector<const Edge*> edges;
  for (Node* n : g.op_nodes()) {
    for (const Edge* e : n->in_edges()) edges.push_back(e);
  }
  std::sort(edges.begin(), edges.end(), [&](const Edge* a, const Edge* b) {
    bool ra = rewired(a), rb = rewired(b);
    return ra != rb ? rb : a->id < b->id;
  });
  for (const Edge* e : edges) {
    int sc = cluster_index(e->src), dc = cluster_index(e->dst);
    if (sc == dc) continue;
    if (e->IsControlEdge()) {
      if (sc >= 0) subgraphs[sc].control_outputs.insert(e->src->name());
      continue;
    }
    if (sc >= 0) subgraphs[sc].RecordResult(e);
    if (dc >= 0) subgraphs[dc].RecordArg(e);
  }
  for (Subgraph& s : subgraphs) {
    for (const Node* n : s.nodes) {
      if (JoinedToSink(*n)) s.control_outputs.insert(n->name());
    }
  }

  // TensorFlow converts the clusters and appends their call nodes in the iteration order of a
  // hash map of clusters, which is not the same from one process to the next (the corpus has
  // clusters 3 and 4 in both orders); the order the clusters first appear in is ours.
  std::vector<int> conversion_order;
  for (size_t ci = 0; ci < subgraphs.size(); ++ci) conversion_order.push_back(static_cast<int>(ci));

  GraphDef out_def;
  out_def.versions = g.versions();
  out_def.library = g.library();
  if (!subgraphs.empty()) {
    ASSIGN_OR_RETURN(std::vector<Node*> topo, g.TopologicalOrder());
    std::vector<int> topo_position(g.num_node_ids(), -1);
    for (size_t i = 0; i < topo.size(); ++i) topo_position[topo[i]->id()] = static_cast<int>(i);
    for (int ci : conversion_order) {
      Subgraph& s = subgraphs[ci];
      RETURN_IF_ERROR(AnalyzeConstArgs(topo_position, &s));
      OrderArgs(&s);
      // TensorFlow dumps the body before it reorders the arguments and optimizes it.
      if (dumper_) {
        DumpOrNote(dumper_->Dump("encapsulate_subgraphs_subgraph_" + s.name,
                                 SubgraphDef(s, g, /*permuted=*/false)));
      }
      GraphDef body_def = SubgraphDef(s, g, /*permuted=*/true);
      RemoveIdentityNodes(&body_def, g);
      EliminateCommonSubexpressions(&body_def, g.registry());
      body_def.library = g.library();  // a member may call a function of the library by name
      auto body = graph::Graph::FromGraphDef(body_def);
      if (!body.ok()) {
        return Status::Error("cluster '" + s.name + "': " + body.status().message());
      }
      // A control output the body's optimization removed (a bypassed Identity, a folded
      // duplicate) has nothing left to wait for.
      std::vector<std::string> control_outputs;
      for (const std::string& name : s.control_outputs) {
        if ((*body)->FindNode(name) != nullptr) control_outputs.push_back(name);
      }
      auto fdef = graph::GraphToFunctionDef(**body, s.name, control_outputs);
      if (!fdef.ok()) return Status::Error("cluster '" + s.name + "': " + fdef.status().message());
      RestoreArgControlInputs(body_def, &*fdef);
      NormalizeSignatureNames(&*fdef);
      if (dumper_) {
        // TensorFlow dumps the optimized body with the library as it stands: the graph's own
        // functions and those of the clusters converted before this one.
        GraphDef with_library = body_def;
        with_library.library = out_def.library;
        DumpOrNote(dumper_->Dump("encapsulate_fdef_graph_" + s.name, with_library));
        DumpOrNote(dumper_->DumpFunctionDef("encapsulate_fdef_" + s.name, *fdef));
      }
      out_def.library.function.push_back(std::move(*fdef));
    }
  }

  // The tensor a consumer outside a cluster reads instead of src:out.
  auto image = [&](const Node* src, int out) -> std::string {
    int c = cluster_index(src);
    if (c < 0) return TensorId{src->name(), out}.ToString();
    const Subgraph& s = subgraphs[c];
    return TensorId{s.name, s.result_by_src.at({src, out})}.ToString();
  };
  auto control_image = [&](const Node* src) -> std::string {
    int c = cluster_index(src);
    return "^" + (c < 0 ? src->name() : subgraphs[c].name);
  };

  for (Node* n : g.op_nodes()) {
    if (cluster_index(n) >= 0) continue;
    NodeDef nd = n->def();
    nd.input.clear();
    for (int i = 0; i < n->num_inputs(); ++i) {
      auto [src, out] = n->input_node(i);
      if (src) nd.input.push_back(image(src, out));
    }
    std::set<std::string> seen;
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() || !e->src->IsOp()) continue;
      std::string c = control_image(e->src);
      if (seen.insert(c).second) nd.input.push_back(c);
    }
    out_def.node.push_back(std::move(nd));
  }
  for (int ci : conversion_order) {
    const Subgraph& s = subgraphs[ci];
    NodeDef call;
    call.name = s.name;
    call.op = s.name;
    call.device = s.device;
    std::vector<std::string> inputs(s.args.size());
    for (size_t i = 0; i < s.args.size(); ++i) {
      inputs[s.permutation[i]] = image(s.args[i].src.first, s.args[i].src.second);
    }
    call.input = std::move(inputs);
    std::set<std::string> seen;
    for (const Node* member : s.nodes) {
      for (const Edge* e : member->in_edges()) {
        if (!e->IsControlEdge() || !e->src->IsOp() || s.members.count(e->src)) continue;
        std::string c = control_image(e->src);
        if (seen.insert(c).second) call.input.push_back(c);
      }
    }
    call.attr[kXlaCompiledKernelAttr] = AttrValue::Bool(true);
    call.attr[kXlaNumConstantArgsAttr] = AttrValue::Int(s.num_constants);
    call.attr[kXlaNumResourceArgsAttr] = AttrValue::Int(s.num_resources);
    out_def.node.push_back(std::move(call));
  }

  ASSIGN_OR_RETURN(GraphWithFunctions result, GraphFromGraphDefWithFunctions(out_def));
  if (dumper_) DumpOrNote(dumper_->Dump("encapsulate_subgraphs_after", *result.graph));

  bool has_ref_vars = false;
  for (Node* n : g.op_nodes()) has_ref_vars = has_ref_vars || HasRefType(*n);
  for (Node* n : result.graph->op_nodes()) {
    n->mutable_attrs()[kXlaHasReferenceVarsAttr] = AttrValue::Bool(has_ref_vars);
  }
  return result;
}

}  // namespace xlens::cluster
