// FunctionalizeConds (functionalize_extract.h): v1 conditionals back into If nodes, as
// TensorFlow's functionalize_cond.cc does. Every node's branch state is the set of
// (predicate, branch) pairs it lies under: a Switch's false output (0) puts its consumers under
// (pred, 0), its true output (1) under (pred, 1); a Merge takes its inputs' states less the
// predicate it joins. A conditional is rewritten once no Switch or Merge of another one lies
// under it, so nested conditionals go innermost first.
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/cluster/functionalize_extract.h"
#include "compiler/graph/types.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cluster::functionalize {

using graph::AttrListValue;
using graph::AttrValue;
using graph::DataType;
using graph::Edge;
using graph::Graph;
using graph::Node;
using graph::NodeDef;

namespace {

using Tensor = std::pair<const Node*, int>;  // a node's output
using Pred = std::pair<int, int>;            // the predicate's (node id, output)
using BranchState = std::set<std::pair<Pred, int>>;

std::string Quoted(const std::string& name) { return "'" + EscapeForTerminal(name) + "'"; }

bool IsResult(const Node& n) {
  return n.type_string() == "_Retval" || n.type_string() == "_DeviceRetval";
}

// The predicate a Switch tests, seen through Identity nodes: TF1's tf.cond switches its values on
// `pred_id` = Identity(pred) and its pivots on `pred` itself, one conditional.
Pred PredOf(const Node& sw) {
  const Edge* e = sw.input_edge(1);
  if (e == nullptr) return Pred{-1, 0};
  while (e->src->type_string() == "Identity" && e->src->input_edge(0) != nullptr) {
    e = e->src->input_edge(0);
  }
  return Pred{e->src->id(), e->src_output};
}

std::string PredName(const Graph& g, const Pred& p) {
  const Node* n = g.FindNodeId(p.first);
  std::string name = n == nullptr ? "?" : n->name();
  if (p.second != 0) name += ":" + std::to_string(p.second);
  return Quoted(name);
}

Status CondError(const Graph& g, const Pred& p, const std::string& what) {
  return Status::Error(fmt::format(
      "cannot make the conditional on {} an If: {}", PredName(g, p), what));
}

// The branch states of every node, and the predicate each Merge joins.
struct Analysis {
  std::vector<BranchState> state;
  std::map<const Node*, Pred> merge_pred;
};

// What a data or control edge brings into its destination's state.
BranchState Contribution(const Edge& e, const Analysis& a) {
  BranchState s = a.state[e.src->id()];
  if (e.src->IsSwitch() && !e.IsControlEdge()) s.insert({PredOf(*e.src), e.src_output});
  return s;
}

StatusOr<Analysis> Analyze(const Graph& g) {
  Analysis a;
  a.state.resize(g.num_node_ids());
  ASSIGN_OR_RETURN(std::vector<Node*> order, g.TopologicalOrder());
  for (Node* n : order) {
    BranchState s;
    std::vector<BranchState> data;
    for (const Edge* e : n->in_edges()) {
      if (!e->src->IsOp()) continue;
      BranchState c = Contribution(*e, a);
      s.insert(c.begin(), c.end());
      if (n->IsMerge() && !e->IsControlEdge()) data.push_back(std::move(c));
    }
    if (n->IsMerge()) {
      if (data.size() != 2) {
        return Status::Error(fmt::format("cannot make the Merge {} part of an If: it joins {} "
                                         "values, a conditional's Merge joins two",
                                         Quoted(n->name()), data.size()));
      }
      // The predicate whose two branches the inputs come from; else the one only one input
      // lies under (the other input computed before the conditional).
      std::vector<Pred> differing, one_sided;
      for (const auto& [pred, branch] : s) {
        const bool in0 = data[0].count({pred, branch}) > 0;
        const bool in1 = data[1].count({pred, branch}) > 0;
        const bool other0 = data[0].count({pred, 1 - branch}) > 0;
        const bool other1 = data[1].count({pred, 1 - branch}) > 0;
        if ((in0 && other1 && !in1) || (in1 && other0 && !in0)) {
          differing.push_back(pred);
        } else if ((in0 && !in1 && !other1) || (in1 && !in0 && !other0)) {
          one_sided.push_back(pred);
        }
      }
      std::sort(differing.begin(), differing.end());
      differing.erase(std::unique(differing.begin(), differing.end()), differing.end());
      std::sort(one_sided.begin(), one_sided.end());
      one_sided.erase(std::unique(one_sided.begin(), one_sided.end()), one_sided.end());
      const std::vector<Pred>& candidates = differing.empty() ? one_sided : differing;
      if (candidates.size() != 1) {
        return Status::Error(fmt::format(
            "cannot make the Merge {} part of an If: {}", Quoted(n->name()),
            candidates.empty() ? "its inputs come from no Switch"
                               : "its inputs lie under the branches of more than one Switch "
                                 "predicate"));
      }
      const Pred p = candidates[0];
      a.merge_pred[n] = p;
      for (int b : {0, 1}) s.erase({p, b});
    }
    a.state[n->id()] = std::move(s);
  }
  return a;
}

// One conditional: its Switches, its Merges and the nodes of each branch.
struct Cond {
  Pred pred;
  std::vector<Node*> switches;
  std::vector<Node*> merges;
  std::vector<Node*> branch[2];
  std::set<const Node*> in_branch[2];
};

// The first predicate whose branches hold no Switch or Merge of another conditional.
StatusOr<Cond> InnermostCond(const Graph& g, const Analysis& a) {
  std::map<Pred, Cond> conds;
  for (Node* n : g.op_nodes()) {
    if (n->IsSwitch()) {
      Cond& c = conds[PredOf(*n)];
      c.pred = PredOf(*n);
      c.switches.push_back(n);
    }
  }
  for (const auto& [merge, pred] : a.merge_pred) conds[pred].merges.push_back(const_cast<Node*>(merge));
  std::set<Pred> nested;
  for (Node* n : g.op_nodes()) {
    if (!n->IsSwitch() && !n->IsMerge()) continue;
    const Pred own = n->IsSwitch() ? PredOf(*n) : a.merge_pred.at(n);
    for (const auto& [pred, branch] : a.state[n->id()]) {
      if (pred != own) nested.insert(pred);
    }
  }
  const Cond* chosen = nullptr;
  for (const auto& [pred, c] : conds) {
    if (nested.count(pred) || c.switches.empty()) continue;
    if (chosen == nullptr || c.switches.front()->id() < chosen->switches.front()->id()) {
      chosen = &c;
    }
  }
  if (chosen == nullptr) {
    const Cond& any = conds.begin()->second;
    const Node* at = any.switches.empty() ? any.merges.front() : any.switches.front();
    return Status::Error(fmt::format("cannot make the {} {} part of an If: the branches of its "
                                     "conditionals cross each other",
                                     at->type_string(), Quoted(at->name())));
  }
  Cond c = *chosen;
  if (c.merges.empty()) {
    return CondError(g, c.pred, fmt::format("no Merge joins the branches of its Switch {}",
                                            Quoted(c.switches.front()->name())));
  }
  std::set<const Node*> own(c.switches.begin(), c.switches.end());
  own.insert(c.merges.begin(), c.merges.end());
  auto under = [&](const Node* n) {
    return a.state[n->id()].count({c.pred, 0}) > 0 || a.state[n->id()].count({c.pred, 1}) > 0;
  };
  // What a function's result (a _Retval) reads under the predicate escapes the conditional
  // without a Merge: name the first value of a branch it reads.
  auto closure = [&](std::vector<const Node*> stack, const std::set<const Node*>& stop) {
    std::set<const Node*> out(stack.begin(), stack.end());
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const Edge* e : n->in_edges()) {
        const Node* src = e->src;
        if (!src->IsOp() || own.count(src) || stop.count(src) || !under(src)) continue;
        if (out.insert(src).second) stack.push_back(src);
      }
    }
    return out;
  };
  // The values the Merges join, and what a result reads under the predicate besides them.
  const std::set<const Node*> joined =
      closure(std::vector<const Node*>(c.merges.begin(), c.merges.end()), {});
  std::vector<const Node*> results;
  for (Node* n : g.op_nodes()) {
    if (IsResult(*n) && under(n)) results.push_back(n);
  }
  const std::set<const Node*> escaping = closure(results, joined);
  for (Node* n : g.op_nodes()) {
    if (!escaping.count(n)) continue;
    for (const Edge* e : n->in_edges()) {
      const bool opens = e->src->IsSwitch() && PredOf(*e->src) == c.pred;
      if (!e->src->IsOp() || escaping.count(e->src) || !(under(e->src) || opens)) {
        continue;
      }
      return CondError(g, c.pred, fmt::format("the node {} of a branch is read by {} without a "
                                              "Merge",
                                              Quoted(e->src->name()), Quoted(n->name())));
    }
  }
  // Conditionals on one predicate one after the other (TF1 layers each testing one `training`
  // flag) are rewritten one at a time: first the one whose Merges no Merge of the predicate
  // feeds, with the nodes its Merges join and those under it that feed nothing else.
  std::set<const Node*> after;
  {
    std::vector<const Node*> stack(c.merges.begin(), c.merges.end());
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      for (const Edge* e : n->out_edges()) {
        if (e->dst->IsOp() && after.insert(e->dst).second) stack.push_back(e->dst);
      }
    }
  }
  std::vector<Node*> first;
  for (Node* m : c.merges) {
    if (!after.count(m)) first.push_back(m);
  }
  c.merges = first;
  std::set<const Node*> members = closure(std::vector<const Node*>(first.begin(), first.end()), {});
  for (Node* m : first) members.erase(m);
  const std::set<const Node*> first_merges(first.begin(), first.end());
  for (bool grew = true; grew;) {
    grew = false;
    for (Node* n : g.op_nodes()) {
      if (members.count(n) || own.count(n) || after.count(n) || !under(n)) continue;
      bool feeds_only_this = true;
      for (const Edge* e : n->out_edges()) {
        if (e->dst->IsOp() && !members.count(e->dst) && !first_merges.count(e->dst)) {
          feeds_only_this = false;
        }
      }
      if (feeds_only_this) grew = members.insert(n).second || grew;
    }
  }
  std::vector<Node*> switches;
  for (Node* sw : c.switches) {
    for (const Edge* e : sw->out_edges()) {
      if (members.count(e->dst) || first_merges.count(e->dst)) {
        switches.push_back(sw);
        break;
      }
    }
  }
  c.switches = switches;
  for (Node* n : g.op_nodes()) {
    if (own.count(n)) continue;
    const bool b0 = a.state[n->id()].count({c.pred, 0}) > 0;
    const bool b1 = a.state[n->id()].count({c.pred, 1}) > 0;
    if (b0 && b1) {
      return CondError(g, c.pred, fmt::format("the node {} reads both of its branches",
                                              Quoted(n->name())));
    }
    if (!members.count(n)) continue;
    for (int b : {0, 1}) {
      if (b == 0 ? b0 : b1) {
        c.branch[b].push_back(n);
        c.in_branch[b].insert(n);
      }
    }
  }
  return c;
}

// Which branch a Merge's data input `k` comes from.
StatusOr<int> InputBranch(const Graph& g, const Cond& c, const Node& merge, int k) {
  auto branch_of = [&](int i) -> int {
    const Edge* e = merge.input_edge(i);
    if (e == nullptr) return -1;
    for (int b : {0, 1}) {
      if (c.in_branch[b].count(e->src)) return b;
    }
    if (e->src->IsSwitch() && PredOf(*e->src) == c.pred) return e->src_output;
    return -1;
  };
  const int mine = branch_of(k), other = branch_of(1 - k);
  if (mine >= 0 && other != mine) return mine;
  if (mine < 0 && other >= 0) return 1 - other;
  return CondError(g, c.pred, fmt::format("the inputs of its Merge {} do not come one from each "
                                          "branch",
                                          Quoted(merge.name())));
}

std::string DirName(const std::string& name) {
  const size_t slash = name.rfind('/');
  return slash == std::string::npos ? name : name.substr(0, slash);
}

// Whether any of `sources` is reachable forward from `from`.
bool Reaches(const std::vector<Node*>& from, const std::set<const Node*>& sources) {
  std::vector<const Node*> stack(from.begin(), from.end());
  std::set<const Node*> seen(from.begin(), from.end());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (sources.count(n)) return true;
    for (const Edge* e : n->out_edges()) {
      if (e->dst->IsOp() && seen.insert(e->dst).second) stack.push_back(e->dst);
    }
  }
  return false;
}

Status RewriteCond(Graph* g, const Cond& c, graph::FunctionDefLibrary* library) {
  std::set<const Node*> switches(c.switches.begin(), c.switches.end());
  std::set<const Node*> merges(c.merges.begin(), c.merges.end());
  // The values the branches read from outside, each an argument of both.
  std::vector<Tensor> args;
  std::map<Tensor, int> arg_index;
  std::set<Node*> control_inputs;
  auto arg_for = [&](Tensor t) {
    auto [it, added] = arg_index.emplace(t, static_cast<int>(args.size()));
    if (added) args.push_back(t);
    return it->second;
  };
  // The argument an in-edge of branch `b` reads, -1 for none.
  auto outside = [&](int b, const Edge& e) -> StatusOr<int> {
    if (switches.count(e.src)) {
      if (e.IsControlEdge()) return -1;
      if (e.src_output != b) {
        return CondError(*g, c.pred, fmt::format("the node {} of one branch reads the Switch {} "
                                                 "of the other",
                                                 Quoted(e.dst->name()), Quoted(e.src->name())));
      }
      const Edge* in = e.src->input_edge(0);
      return arg_for({in->src, in->src_output});
    }
    if (c.in_branch[1 - b].count(e.src)) {
      return CondError(*g, c.pred, fmt::format("the node {} of one branch reads {} of the other",
                                               Quoted(e.dst->name()), Quoted(e.src->name())));
    }
    if (e.IsControlEdge()) {
      control_inputs.insert(e.src);
      return -1;
    }
    return arg_for({e.src, e.src_output});
  };
  // Every value of a branch is read inside it or by one of the Merges.
  for (int b : {0, 1}) {
    for (const Node* n : c.branch[b]) {
      for (const Edge* e : n->out_edges()) {
        if (!e->dst->IsOp() || c.in_branch[b].count(e->dst) || merges.count(e->dst)) continue;
        return CondError(*g, c.pred, fmt::format("the node {} of a branch is read by {} without "
                                                 "a Merge",
                                                 Quoted(n->name()), Quoted(e->dst->name())));
      }
    }
  }
  // Each branch's results, one per Merge; resolve the arguments first so both agree on them.
  std::vector<functionalize::ResultSource> results[2];
  std::vector<const Node*> control_outputs[2];
  for (Node* m : c.merges) {
    for (int k : {0, 1}) {
      ASSIGN_OR_RETURN(int b, InputBranch(*g, c, *m, k));
      const Edge* e = m->input_edge(k);
      ResultSource r;
      if (c.in_branch[b].count(e->src)) {
        r.node = e->src;
        r.output = e->src_output;
      } else {
        ASSIGN_OR_RETURN(r.arg, outside(b, *e));
      }
      results[b].push_back(r);
    }
    for (const Edge* e : m->in_edges()) {
      if (!e->IsControlEdge() || !e->src->IsOp()) continue;
      bool inside = false;
      for (int b : {0, 1}) {
        if (c.in_branch[b].count(e->src)) {
          control_outputs[b].push_back(e->src);
          inside = true;
        }
      }
      if (!inside && !switches.count(e->src)) control_inputs.insert(e->src);
    }
  }
  for (int b : {0, 1}) {
    for (const Node* n : c.branch[b]) {
      for (const Edge* e : n->in_edges()) {
        if (e->src->IsOp() && !c.in_branch[b].count(e->src)) RETURN_IF_ERROR(outside(b, *e).status());
      }
    }
  }
  std::set<const Node*> sources;
  for (const Tensor& t : args) sources.insert(t.first);
  sources.insert(control_inputs.begin(), control_inputs.end());
  if (Reaches(c.merges, sources)) {
    return CondError(*g, c.pred, fmt::format("a value its Merge {} gives is read back into its "
                                             "own branches",
                                             Quoted(c.merges.front()->name())));
  }
  const std::string if_name = g->NewName(DirName(c.merges.front()->name()) + "/If");
  std::vector<DataType> arg_types;
  for (const Tensor& t : args) arg_types.push_back(t.first->output_type(t.second));
  std::string functions[2];
  for (int b : {0, 1}) {
    Extraction e;
    e.name = if_name + (b == 1 ? "_then" : "_else");
    e.arg_types = arg_types;
    e.nodes = c.branch[b];
    e.outside = [&, b](const Edge& edge) { return outside(b, edge); };
    e.results = results[b];
    e.control_outputs = control_outputs[b];
    ASSIGN_OR_RETURN(functions[b], ExtractFunction(*g, e, library));
  }
  const Node* pred_node = g->FindNodeId(c.pred.first);
  NodeDef def;
  def.name = if_name;
  def.op = "If";
  def.device = c.merges.front()->requested_device();
  def.attr["Tcond"] = AttrValue::Type(pred_node->output_type(c.pred.second));
  AttrListValue tin, tout;
  tin.type = arg_types;
  for (const Node* m : c.merges) tout.type.push_back(m->output_type(0));
  def.attr["Tin"] = AttrValue::List(tin);
  def.attr["Tout"] = AttrValue::List(tout);
  graph::NameAttrList then_f, else_f;
  then_f.name = functions[1];
  else_f.name = functions[0];
  def.attr["then_branch"] = AttrValue::Func(then_f);
  def.attr["else_branch"] = AttrValue::Func(else_f);
  ASSIGN_OR_RETURN(Node * node, g->AddNode(std::move(def)));
  g->AddEdge(const_cast<Node*>(pred_node), c.pred.second, node, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    g->AddEdge(const_cast<Node*>(args[i].first), args[i].second, node, static_cast<int>(i) + 1);
  }
  for (Node* src : control_inputs) g->AddControlEdge(src, node);
  for (size_t k = 0; k < c.merges.size(); ++k) {
    std::vector<const Edge*> outs = c.merges[k]->out_edges();
    for (const Edge* e : outs) {
      if (!e->dst->IsOp()) continue;
      if (e->IsControlEdge()) {
        g->AddControlEdge(node, e->dst);
      } else if (e->src_output != 0) {
        return CondError(*g, c.pred, fmt::format("the branch index its Merge {} gives is read "
                                                 "by {}",
                                                 Quoted(c.merges[k]->name()),
                                                 Quoted(e->dst->name())));
      } else {
        Node* dst = e->dst;
        const int input = e->dst_input;
        g->RemoveEdge(e);
        g->AddEdge(node, static_cast<int>(k), dst, input);
      }
    }
  }
  for (Node* m : c.merges) g->RemoveNode(m);
  for (int b : {0, 1}) {
    for (Node* n : c.branch[b]) g->RemoveNode(n);
  }
  // A Switch the next conditional on the predicate reads too stays for it.
  for (Node* sw : c.switches) {
    if (std::none_of(sw->out_edges().begin(), sw->out_edges().end(),
                     [](const Edge* e) { return e->dst->IsOp(); })) {
      g->RemoveNode(sw);
    }
  }
  return OkStatus();
}

}  // namespace

Status FunctionalizeConds(Graph* graph, graph::FunctionDefLibrary* library) {
  for (;;) {
    bool any = false;
    for (Node* n : graph->op_nodes()) any = any || n->IsSwitch() || n->IsMerge();
    if (!any) return OkStatus();
    ASSIGN_OR_RETURN(Analysis a, Analyze(*graph));
    bool has_switch = false;
    for (Node* n : graph->op_nodes()) has_switch = has_switch || n->IsSwitch();
    if (!has_switch) {
      for (const auto& [merge, pred] : a.merge_pred) {
        return Status::Error(fmt::format("cannot make the Merge {} part of an If: no Switch "
                                         "opens its conditional",
                                         Quoted(merge->name())));
      }
    }
    ASSIGN_OR_RETURN(Cond c, InnermostCond(*graph, a));
    RETURN_IF_ERROR(RewriteCond(graph, c, library));
  }
}

}  // namespace xlens::cluster::functionalize
