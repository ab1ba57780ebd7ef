#include "compiler/cluster/functionalize_cond_analysis.h"

#include <algorithm>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens::cluster::functionalize::cond {

using graph::Edge;
using graph::Graph;
using graph::Node;

namespace {

std::string Quoted(const std::string& name) { return "'" + EscapeForTerminal(name) + "'"; }

bool IsResult(const Node& n) {
  return n.type_string() == "_Retval" || n.type_string() == "_DeviceRetval";
}

// What a data or control edge brings into its destination's state.
BranchState Contribution(const Edge& e, const Analysis& a) {
  BranchState s = a.state[e.src->id()];
  if (e.src->IsSwitch() && !e.IsControlEdge()) s.insert({PredOf(*e.src), e.src_output});
  return s;
}

// A Switch on a predicate its own state already fixes (TF1's cond inside a cond on the same
// predicate): readers of the known output read its input instead, the other output never runs,
// as TensorFlow's RemoveRedundantSwitch does. `dead` marks the readers of the other output.
void BypassSwitch(Graph* g, Node* sw, int known, std::vector<char>* dead) {
  const Edge* in = sw->input_edge(0);
  Node* src = in->src;
  const int src_output = in->src_output;
  std::vector<const Edge*> outs = sw->out_edges();
  for (const Edge* e : outs) {
    Node* dst = e->dst;
    const int dst_input = e->dst_input;
    const bool control = e->IsControlEdge(), taken = e->src_output == known;
    g->RemoveEdge(e);
    if (!dst->IsOp()) continue;
    if (control) {
      g->AddControlEdge(src, dst);
    } else if (taken) {
      g->AddEdge(src, src_output, dst, dst_input);
    } else {
      (*dead)[dst->id()] = 1;
    }
  }
  g->RemoveNode(sw);
}

// A node `dead` marks: a Merge left with one input forwards it (TensorFlow's
// RemoveRedundantMerge); any other node never runs and goes, marking its readers.
Status DropDeadNode(Graph* g, Node* n, std::vector<char>* dead, bool* gone) {
  *gone = true;
  if (n->IsMerge()) {
    std::vector<const Edge*> data;
    for (const Edge* e : n->in_edges()) {
      if (!e->IsControlEdge() && e->src->IsOp()) data.push_back(e);
    }
    if (data.size() > 1) {
      *gone = false;
      return OkStatus();
    }
    if (data.size() == 1) {
      Node* src = data[0]->src;
      const int src_output = data[0]->src_output;
      std::vector<const Edge*> outs = n->out_edges();
      for (const Edge* e : outs) {
        Node* dst = e->dst;
        const int dst_input = e->dst_input, out = e->src_output;
        if (!dst->IsOp()) continue;
        if (out > 0) {
          return Status::Error(fmt::format("cannot make the Merge {} part of an If: the branch "
                                           "index it gives is read by {}",
                                           Quoted(n->name()), Quoted(dst->name())));
        }
        g->RemoveEdge(e);
        if (out < 0) {
          g->AddControlEdge(src, dst);
        } else {
          g->AddEdge(src, src_output, dst, dst_input);
        }
      }
      g->RemoveNode(n);
      return OkStatus();
    }
  }
  if (IsResult(*n)) {
    return Status::Error(fmt::format("cannot make a conditional an If: the result {} reads a "
                                     "branch that never runs (a Switch tests a predicate the "
                                     "branch it lies in already fixes)",
                                     Quoted(n->name())));
  }
  for (const Edge* e : n->out_edges()) {
    if (e->dst->IsOp()) (*dead)[e->dst->id()] = 1;
  }
  g->RemoveNode(n);
  return OkStatus();
}

// The predicate whose two branches a Merge's inputs come from; else the one only one input lies
// under (the other input computed before the conditional).
StatusOr<Pred> MergePred(const Node& n, const BranchState& s, const std::vector<BranchState>& data) {
  if (data.size() != 2) {
    return Status::Error(fmt::format("cannot make the Merge {} part of an If: it joins {} "
                                     "values, a conditional's Merge joins two",
                                     Quoted(n.name()), data.size()));
  }
  std::set<Pred> differing, one_sided;
  for (const auto& [pred, branch] : s) {
    const bool in0 = data[0].count({pred, branch}) > 0;
    const bool in1 = data[1].count({pred, branch}) > 0;
    const bool other0 = data[0].count({pred, 1 - branch}) > 0;
    const bool other1 = data[1].count({pred, 1 - branch}) > 0;
    if ((in0 && other1 && !in1) || (in1 && other0 && !in0)) {
      differing.insert(pred);
    } else if ((in0 && !in1 && !other1) || (in1 && !in0 && !other0)) {
      one_sided.insert(pred);
    }
  }
  const std::set<Pred>& candidates = differing.empty() ? one_sided : differing;
  if (candidates.size() != 1) {
    return Status::Error(fmt::format(
        "cannot make the Merge {} part of an If: {}", Quoted(n.name()),
        candidates.empty() ? "its inputs come from no Switch"
                           : "its inputs lie under the branches of more than one Switch "
                             "predicate"));
  }
  return *candidates.begin();
}

}  // namespace

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

StatusOr<Analysis> Analyze(Graph* g) {
  Analysis a;
  a.Resize(g->num_node_ids());
  std::vector<char> dead(g->num_node_ids(), 0);
  std::vector<int> order;
  {
    ASSIGN_OR_RETURN(std::vector<Node*> nodes, g->TopologicalOrder());
    for (Node* n : nodes) order.push_back(n->id());
  }
  for (int id : order) {
    Node* n = g->FindNodeId(id);
    if (n == nullptr || !n->IsOp()) continue;
    if (dead[id]) {
      bool gone = false;
      RETURN_IF_ERROR(DropDeadNode(g, n, &dead, &gone));
      if (gone) continue;
    }
    BranchState s;
    std::vector<BranchState> data;
    for (const Edge* e : n->in_edges()) {
      if (!e->src->IsOp()) continue;
      BranchState c = Contribution(*e, a);
      s.insert(c.begin(), c.end());
      if (n->IsMerge() && !e->IsControlEdge()) data.push_back(std::move(c));
    }
    if (n->IsSwitch()) {
      const Pred p = PredOf(*n);
      const int known = s.count({p, 0}) ? 0 : s.count({p, 1}) ? 1 : -1;
      if (known >= 0 && n->input_edge(0) != nullptr) {
        BypassSwitch(g, n, known, &dead);
        continue;
      }
    }
    if (n->IsMerge()) {
      ASSIGN_OR_RETURN(Pred p, MergePred(*n, s, data));
      a.merge_pred[id] = p;
      for (int b : {0, 1}) s.erase({p, b});
    } else {
      for (auto it = s.begin(); it != s.end(); ++it) {
        auto next = std::next(it);
        if (next != s.end() && next->first == it->first) {
          return CondError(*g, it->first, fmt::format("the node {} reads both of its branches",
                                                      Quoted(n->name())));
        }
      }
    }
    a.state[id] = std::move(s);
  }
  return a;
}

Status Levels(const Graph& g, Analysis* a) {
  ASSIGN_OR_RETURN(std::vector<Node*> order, g.TopologicalOrder());
  for (Node* n : order) {
    int64_t level = 0;
    for (const Edge* e : n->in_edges()) {
      if (e->src->IsOp()) level = std::max(level, a->pos[e->src->id()] + 1);
    }
    a->pos[n->id()] = level;
  }
  return OkStatus();
}

}  // namespace xlens::cluster::functionalize::cond
