// FunctionalizeConds (functionalize_extract.h): v1 conditionals back into If nodes, as
// TensorFlow's functionalize_cond.cc does. Every node's branch state is the set of
// (predicate, branch) pairs it lies under, computed once (functionalize_cond_analysis.h). The
// Merges are then taken innermost first (most pairs in their state), each with the nodes under
// its predicate that it reads and the Merges those feed: one If replaces them, and takes the
// Merges' state, so nothing else needs looking at again. Merges of one predicate and one state that read nothing another computes
// after them share an If, as TensorFlow groups them; one read after another's Merge (TF1 layers
// each testing one `training` flag) gets its own. A Switch still read when every Merge is gone
// is read outside both branches: refused by name, never left to give a wrong graph.
#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "compiler/cluster/functionalize_cond_analysis.h"
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
using cond::Analysis;
using cond::BranchState;
using cond::CondError;
using cond::Pred;
using cond::PredOf;

std::string Quoted(const std::string& name) { return "'" + EscapeForTerminal(name) + "'"; }

bool IsResult(const Node& n) {
  return n.type_string() == "_Retval" || n.type_string() == "_DeviceRetval";
}

// One conditional: its Switches, its Merges and the nodes of each branch.
struct Cond {
  Pred pred;
  std::vector<Node*> switches;
  std::vector<Node*> merges;
  std::vector<Node*> branch[2];
  std::set<const Node*> in_branch[2];
};

// Merges of one predicate and what they read under it: the nodes one If replaces.
struct Group {
  Pred pred;
  std::set<Node*> merges;
  std::set<Node*> members;
  std::set<Node*> switches;
  // The latest position of what the group reads from outside (-1: nothing yet).
  int64_t max_input_pos = -1;
};

bool IsSwitchOf(const Node& n, const Pred& p) { return n.IsSwitch() && PredOf(n) == p; }

bool IsMergeOf(const Analysis& a, const Node& n, const Pred& p) {
  return n.IsMerge() && a.merge_pred[n.id()] == p;
}

// Adds `merge` to `grp` with its branches: every node under its predicate connected to what it
// reads by edges either way (never through the predicate's Switches or Merges), and every Merge
// of the predicate such a node feeds. Nodes one Merge reads and another's branch feeds belong to
// one If: splitting them would leave a branch value read without a Merge.
Status AddMerge(const Graph& g, const Analysis& a, Node* merge, Group* grp) {
  const Pred& p = grp->pred;
  if (!grp->merges.insert(merge).second) return OkStatus();
  std::vector<Node*> stack = {merge};
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      Node* src = e->src;
      if (!src->IsOp()) continue;
      if (IsSwitchOf(*src, p)) {
        grp->switches.insert(src);
        for (const Edge* in : src->in_edges()) {
          if (in->src->IsOp()) grp->max_input_pos = std::max(grp->max_input_pos, a.pos[in->src->id()]);
        }
      } else if (!a.Under(src, p)) {  // a Merge of the predicate lies under it no more
        grp->max_input_pos = std::max(grp->max_input_pos, a.pos[src->id()]);
      } else if (grp->members.insert(src).second) {
        stack.push_back(src);
      }
    }
    if (n->IsMerge() && grp->merges.count(n)) continue;  // what reads a Merge lies outside
    for (const Edge* e : n->out_edges()) {
      Node* dst = e->dst;
      if (!dst->IsOp() || grp->merges.count(dst)) continue;
      if (IsMergeOf(a, *dst, p)) {
        if (a.state[dst->id()] != a.state[merge->id()]) {
          return CondError(g, p, fmt::format("the node {} of a branch feeds its Merges {} and {}, "
                                             "which lie under different conditionals",
                                             Quoted(n->name()), Quoted(merge->name()),
                                             Quoted(dst->name())));
        }
        grp->merges.insert(dst);
        stack.push_back(dst);
      } else if (grp->members.insert(dst).second) {
        stack.push_back(dst);  // a reader of a branch value lies under the predicate too
      }
    }
  }
  return OkStatus();
}

// Members no Merge of the group reads (through other members) run only when their branch is
// taken, as before; but a function's result among them reads a branch value without a Merge:
// name the branch value it reads.
Status CheckUnjoined(const Graph& g, const Group& grp) {
  std::set<const Node*> joined;
  std::vector<const Node*> stack(grp.merges.begin(), grp.merges.end());
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (grp.members.count(e->src) && joined.insert(e->src).second) stack.push_back(e->src);
    }
  }
  std::set<const Node*> seen;
  for (const Node* r : grp.members) {
    if (IsResult(*r)) stack.push_back(r);
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      if (joined.count(e->src)) {
        return CondError(g, grp.pred, fmt::format("the node {} of a branch is read by {} without "
                                                  "a Merge",
                                                  Quoted(e->src->name()), Quoted(n->name())));
      }
      if (grp.members.count(e->src) && seen.insert(e->src).second) stack.push_back(e->src);
    }
  }
  return OkStatus();
}

// Adds the nodes under the predicate that a reader of `start` (a Switch of the group) begins and
// that end in nothing but the group: a branch's ops whose values no Merge takes, run only when
// their branch is taken. Nothing is added when they reach a Merge of the predicate, a result, or
// read what the group's Merges give.
void AddDangling(const Analysis& a, Node* start, int64_t first_pos, Group* grp) {
  const Pred& p = grp->pred;
  for (const Edge* out : start->out_edges()) {
    Node* head = out->dst;
    if (!head->IsOp() || grp->members.count(head) || grp->merges.count(head) ||
        head->IsMerge() || !a.Under(head, p)) {
      continue;
    }
    std::set<Node*> region = {head};
    std::vector<Node*> stack = {head};
    std::set<Node*> switches;
    bool ok = true;
    while (ok && !stack.empty()) {
      Node* n = stack.back();
      stack.pop_back();
      if (IsResult(*n) || n->IsMerge() || n->IsSwitch()) {
        ok = false;
        break;
      }
      for (const Edge* e : n->in_edges()) {
        Node* src = e->src;
        if (!src->IsOp() || region.count(src) || grp->members.count(src)) continue;
        if (IsSwitchOf(*src, p)) {
          switches.insert(src);
        } else if (a.Under(src, p) || a.pos[src->id()] >= first_pos) {
          ok = false;  // another part of the branch, or something after the conditional
        }
      }
      for (const Edge* e : n->out_edges()) {
        if (e->dst->IsOp() && region.insert(e->dst).second) stack.push_back(e->dst);
      }
    }
    if (!ok) continue;
    for (Node* sw : switches) {
      if (grp->switches.count(sw)) continue;
      for (const Edge* in : sw->in_edges()) {
        if (in->src->IsOp() && a.pos[in->src->id()] >= first_pos) ok = false;
      }
    }
    if (!ok) continue;
    grp->members.insert(region.begin(), region.end());
    grp->switches.insert(switches.begin(), switches.end());
  }
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

// Replaces `c` by an If. `ordered`: what it reads lies below its Merges' levels, so none of it
// depends on them; else that is checked.
StatusOr<Node*> RewriteCond(Graph* g, const Cond& c, graph::FunctionDefLibrary* library,
                            bool ordered) {
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
  if (!ordered && Reaches(c.merges, sources)) {
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
  return node;
}

// The Merges still to rewrite, in the order they become Ifs: innermost (most pairs in their
// state) first, then by position; and, for each predicate and state, by the latest position of
// what each reads from outside, as first computed (a bound ever after: what a Merge reads can
// only become an If placed earlier).
class Pending {
 public:
  using Key = std::pair<Pred, BranchState>;

  Status Index(const Graph& g, const Analysis& a) {
    queue_.clear();
    by_key_.clear();
    reads_until_.assign(g.num_node_ids(), -1);
    for (Node* n : g.op_nodes()) {
      if (!n->IsMerge() || !a.merge_pred[n->id()]) continue;
      Group alone;
      alone.pred = *a.merge_pred[n->id()];
      RETURN_IF_ERROR(AddMerge(g, a, n, &alone));
      reads_until_[n->id()] = alone.max_input_pos;
      queue_.insert(QueueKey(a, n));
      by_key_[KeyOf(a, n)].insert({alone.max_input_pos, n->id()});
    }
    return OkStatus();
  }
  bool empty() const { return queue_.empty(); }
  int first() const { return std::get<2>(*queue_.begin()); }
  // The Merges of `key` that read nothing from outside at or after `pos`, by id.
  std::vector<int> ReadingBefore(const Key& key, int64_t pos) const {
    std::vector<int> out;
    auto it = by_key_.find(key);
    if (it == by_key_.end()) return out;
    for (auto m = it->second.begin(); m != it->second.end() && m->first < pos; ++m) {
      out.push_back(m->second);
    }
    return out;
  }
  void Remove(const Analysis& a, const Node* m) {
    queue_.erase(QueueKey(a, m));
    auto it = by_key_.find(KeyOf(a, m));
    if (it != by_key_.end()) it->second.erase({reads_until_[m->id()], m->id()});
  }
  static Key KeyOf(const Analysis& a, const Node* m) {
    return {*a.merge_pred[m->id()], a.state[m->id()]};
  }

 private:
  using Entry = std::tuple<size_t, int64_t, int>;
  static Entry QueueKey(const Analysis& a, const Node* m) {
    return {std::numeric_limits<size_t>::max() - a.state[m->id()].size(), a.pos[m->id()],
            m->id()};
  }
  std::set<Entry> queue_;
  std::map<Key, std::set<std::pair<int64_t, int>>> by_key_;
  std::vector<int64_t> reads_until_;
};

// The group of the first pending Merge: the Merges its branch nodes feed, the Merges of its
// predicate and state that read nothing from at or after it (they share its If, as TensorFlow
// groups them), and the branch nodes whose values no Merge takes.
StatusOr<Group> NextGroup(const Graph& g, const Analysis& a, const Pending& pending) {
  Node* first = g.FindNodeId(pending.first());
  const int64_t first_pos = a.pos[first->id()];
  Group grp;
  grp.pred = *a.merge_pred[first->id()];
  RETURN_IF_ERROR(AddMerge(g, a, first, &grp));
  if (grp.max_input_pos < first_pos) {
    for (int id : pending.ReadingBefore(Pending::KeyOf(a, first), first_pos)) {
      Node* m = g.FindNodeId(id);
      if (grp.merges.count(m)) continue;
      Group other;
      other.pred = grp.pred;
      RETURN_IF_ERROR(AddMerge(g, a, m, &other));
      bool apart = other.max_input_pos < first_pos;
      for (Node* n : other.members) apart = apart && !grp.members.count(n);
      if (!apart) continue;
      grp.merges.insert(other.merges.begin(), other.merges.end());
      grp.members.insert(other.members.begin(), other.members.end());
      grp.switches.insert(other.switches.begin(), other.switches.end());
    }
  }
  RETURN_IF_ERROR(CheckUnjoined(g, grp));
  const std::vector<Node*> switches(grp.switches.begin(), grp.switches.end());
  for (Node* sw : switches) AddDangling(a, sw, first_pos, &grp);
  return grp;
}

std::vector<Node*> ById(const std::set<Node*>& nodes) {
  std::vector<Node*> out(nodes.begin(), nodes.end());
  std::sort(out.begin(), out.end(), [](const Node* x, const Node* y) { return x->id() < y->id(); });
  return out;
}

StatusOr<Cond> MakeCond(const Analysis& a, const Group& grp) {
  Cond c;
  c.pred = grp.pred;
  c.merges = ById(grp.merges);
  c.switches = ById(grp.switches);
  if (c.switches.empty()) {
    return Status::Error(fmt::format("cannot make the Merge {} part of an If: no Switch opens "
                                     "its conditional",
                                     Quoted(c.merges.front()->name())));
  }
  for (Node* n : ById(grp.members)) {
    for (int b : {0, 1}) {
      if (a.state[n->id()].count({c.pred, b})) {
        c.branch[b].push_back(n);
        c.in_branch[b].insert(n);
      }
    }
  }
  return c;
}

}  // namespace

Status FunctionalizeConds(Graph* graph, graph::FunctionDefLibrary* library) {
  bool any = false;
  for (Node* n : graph->op_nodes()) any = any || n->IsSwitch() || n->IsMerge();
  if (!any) return OkStatus();
  ASSIGN_OR_RETURN(Analysis a, cond::Analyze(graph));
  RETURN_IF_ERROR(cond::Levels(*graph, &a));
  std::set<Pred> joined;
  for (Node* n : graph->op_nodes()) {
    if (n->IsMerge() && a.merge_pred[n->id()]) joined.insert(*a.merge_pred[n->id()]);
  }
  Pending pending;
  RETURN_IF_ERROR(pending.Index(*graph, a));
  while (!pending.empty()) {
    ASSIGN_OR_RETURN(Group grp, NextGroup(*graph, a, pending));
    const Node* first = graph->FindNodeId(pending.first());
    const BranchState state = a.state[first->id()];
    const int64_t level = a.pos[first->id()];
    const bool ordered = grp.max_input_pos < level;
    for (const Node* m : grp.merges) pending.Remove(a, m);
    ASSIGN_OR_RETURN(Cond c, MakeCond(a, grp));
    ASSIGN_OR_RETURN(Node * if_node, RewriteCond(graph, c, library, ordered));
    a.Resize(graph->num_node_ids());
    a.state[if_node->id()] = state;
    a.pos[if_node->id()] = level;
    if (!ordered) {
      // Placed at its first Merge's level the If could come before what it reads: level again.
      RETURN_IF_ERROR(cond::Levels(*graph, &a));
      RETURN_IF_ERROR(pending.Index(*graph, a));
    }
  }
  // Every Merge is gone: a Switch still read is read outside both branches of its conditional.
  for (Node* sw : graph->op_nodes()) {
    if (!sw->IsSwitch()) continue;
    const Pred p = PredOf(*sw);
    const Node* reader = nullptr;
    for (const Edge* e : sw->out_edges()) {
      if (e->dst->IsOp()) reader = reader == nullptr ? e->dst : reader;
    }
    if (!joined.count(p)) {
      return CondError(*graph, p, fmt::format("no Merge joins the branches of its Switch {}",
                                              Quoted(sw->name())));
    }
    if (reader != nullptr) {
      return CondError(*graph, p, fmt::format("its Switch {} is read by {} outside both branches",
                                              Quoted(sw->name()), Quoted(reader->name())));
    }
    graph->RemoveNode(sw);
  }
  return OkStatus();
}

}  // namespace xlens::cluster::functionalize
