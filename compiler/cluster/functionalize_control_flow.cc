#include "compiler/cluster/functionalize_control_flow.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/cluster/functionalize_extract.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cluster {

using graph::AttrListValue;
using graph::AttrValue;
using graph::DataType;
using graph::Edge;
using graph::Graph;
using graph::Node;
using graph::NodeDef;
using functionalize::Extraction;
using functionalize::ResultSource;

namespace {

constexpr char kRoot[] = "";

std::string Quoted(const std::string& name) { return "'" + EscapeForTerminal(name) + "'"; }

std::string StringAttr(const Node& n, const std::string& name) {
  const AttrValue* a = graph::FindAttr(n.attrs(), name);
  return a != nullptr && a->kind() == AttrValue::Kind::kString ? a->s() : "";
}

bool BoolAttr(const Node& n, const std::string& name) {
  const AttrValue* a = graph::FindAttr(n.attrs(), name);
  return a != nullptr && a->kind() == AttrValue::Kind::kBool && a->b();
}

// The frame every node runs in, as TensorFlow's BuildControlFlowInfo finds it: an Enter (and what
// it feeds) is in the frame it names, what an Exit feeds in the frame around the Exit's.
struct Frames {
  std::map<const Node*, std::string> of;
  std::map<std::string, std::string> parent;
  // How many loops enclose frame `f`'s; -1 when its parents enter each other (a cycle).
  int Depth(std::string f) const {
    int d = 0;
    while (f != kRoot) {
      f = parent.at(f);
      if (++d > static_cast<int>(parent.size())) return -1;
    }
    return d;
  }
};

// Every node's inputs come from its own frame (or through an Enter or an Exit). A value read
// into a loop without an Enter makes its readers, and all they feed, disagree: the node named
// is the first reader of a value from outside (a constant or a placeholder, typically).
Status CheckFrames(const Graph& g, const Frames& frames) {
  const Node* first = nullptr;
  for (const Node* n : g.op_nodes()) {
    if (n->IsEnter() || !frames.of.count(n)) continue;
    std::map<std::string, const Node*> by_frame;  // the frame an input implies -> that input
    for (const Edge* e : n->in_edges()) {
      auto src = frames.of.find(e->src);
      if (!e->src->IsOp() || src == frames.of.end()) continue;
      by_frame.emplace(e->src->IsExit() ? frames.parent.at(src->second) : src->second, e->src);
    }
    if (by_frame.size() < 2) continue;
    for (const auto& [frame, src] : by_frame) {
      bool has_op_input = false;
      for (const Edge* e : src->in_edges()) has_op_input = has_op_input || e->src->IsOp();
      if (!has_op_input) {
        return Status::Error(fmt::format("the node {} reads {} from outside its loop without "
                                         "an Enter",
                                         Quoted(n->name()), Quoted(src->name())));
      }
    }
    if (first == nullptr) first = n;
  }
  if (first != nullptr) {
    return Status::Error(fmt::format("the node {} reads values of two frames without an Enter "
                                     "or an Exit",
                                     Quoted(first->name())));
  }
  return OkStatus();
}

StatusOr<Frames> BuildFrames(const Graph& g) {
  Frames frames;
  std::deque<const Node*> queue;
  for (Node* n : g.op_nodes()) {
    bool has_op_input = false;
    for (const Edge* e : n->in_edges()) has_op_input = has_op_input || e->src->IsOp();
    if (has_op_input) continue;
    if (n->IsEnter()) {
      const std::string f = StringAttr(*n, "frame_name");
      frames.parent.emplace(f, kRoot);
      frames.of[n] = f;
    } else {
      frames.of[n] = kRoot;
    }
    queue.push_back(n);
  }
  while (!queue.empty()) {
    const Node* src = queue.front();
    queue.pop_front();
    const std::string& src_frame = frames.of.at(src);
    // The frame around src's, where an Exit's consumers run.
    std::string outer = src_frame;
    if (src->IsExit()) {
      if (src_frame == kRoot) {
        return Status::Error(fmt::format("the Exit {} leaves no loop", Quoted(src->name())));
      }
      outer = frames.parent.at(src_frame);
    }
    for (const Edge* e : src->out_edges()) {
      const Node* dst = e->dst;
      if (!dst->IsOp()) continue;
      std::string frame = outer;
      if (dst->IsEnter()) {
        frame = StringAttr(*dst, "frame_name");
        auto [it, added] = frames.parent.emplace(frame, outer);
        if (!added && it->second != outer) {
          return Status::Error(fmt::format("the loop {} is entered from two frames ({})",
                                           Quoted(frame), Quoted(dst->name())));
        }
      }
      auto [it, added] = frames.of.emplace(dst, frame);
      if (added) queue.push_back(dst);
    }
  }
  RETURN_IF_ERROR(CheckFrames(g, frames));
  return frames;
}

// One loop variable: an Enter, and unless it is an invariant its Merge, Switch, NextIteration
// and Exits.
struct LoopVar {
  Node* enter = nullptr;
  bool invariant = false;
  Node* merge = nullptr;
  Node* next = nullptr;
  Node* sw = nullptr;
  std::vector<Node*> exits;
};

Status LoopError(const std::string& frame, const std::string& what) {
  return Status::Error(fmt::format("cannot make the loop {} a While: {}", Quoted(frame), what));
}

StatusOr<LoopVar> FindLoopVar(const std::string& frame, Node* enter, const Node* loop_cond) {
  LoopVar v;
  v.enter = enter;
  v.invariant = BoolAttr(*enter, "is_constant");
  if (v.invariant) return v;
  for (const Edge* e : enter->out_edges()) {
    if (!e->dst->IsOp() || e->IsControlEdge()) continue;
    if (!e->dst->IsMerge() || v.merge != nullptr) {
      return LoopError(frame, fmt::format("its Enter {} feeds {}, not one Merge",
                                          Quoted(enter->name()), Quoted(e->dst->name())));
    }
    v.merge = e->dst;
  }
  if (v.merge == nullptr) {
    return LoopError(frame, fmt::format("its Enter {} feeds no Merge", Quoted(enter->name())));
  }
  for (const Edge* e : v.merge->in_edges()) {
    if (!e->IsControlEdge() && e->src != enter) v.next = e->src;
  }
  if (v.next == nullptr || !v.next->IsNextIteration()) {
    return LoopError(frame, fmt::format("its Merge {} takes no NextIteration",
                                        Quoted(v.merge->name())));
  }
  for (const Edge* e : v.merge->out_edges()) {
    if (e->IsControlEdge() || !e->dst->IsSwitch() || e->dst_input != 0) continue;
    const Edge* p = e->dst->input_edge(1);
    if (p != nullptr && p->src == loop_cond) v.sw = e->dst;
  }
  if (v.sw == nullptr) {
    return LoopError(frame, fmt::format("its Merge {} feeds no Switch on the LoopCond {}",
                                        Quoted(v.merge->name()), Quoted(loop_cond->name())));
  }
  for (const Edge* e : v.sw->out_edges()) {
    if (!e->dst->IsOp() || e->IsControlEdge() || e->src_output != 0) continue;
    if (!e->dst->IsExit()) {
      return LoopError(frame, fmt::format("{} reads the false output of its Switch {}, which "
                                          "only an Exit may read",
                                          Quoted(e->dst->name()), Quoted(v.sw->name())));
    }
    v.exits.push_back(e->dst);
  }
  return v;
}

// The nodes `seeds` depend on (data and control), not crossing `stop`.
std::set<Node*> BackwardClosure(const std::vector<Node*>& seeds, const std::set<const Node*>& stop) {
  std::set<Node*> out;
  std::vector<Node*> stack;
  for (Node* s : seeds) {
    if (!stop.count(s) && out.insert(s).second) stack.push_back(s);
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const Edge* e : n->in_edges()) {
      Node* src = e->src;
      if (!src->IsOp() || stop.count(src)) continue;
      if (out.insert(src).second) stack.push_back(src);
    }
  }
  return out;
}

// Rewrites the loop of `frame` (whose inner loops are While nodes already) into a While node,
// which `frames` then places in the frame around it.
Status FunctionalizeLoop(Graph* g, const std::string& frame, Frames* frames,
                         graph::FunctionDefLibrary* library) {
  std::vector<Node*> members, enters;
  Node* loop_cond = nullptr;
  for (Node* n : g->op_nodes()) {
    auto it = frames->of.find(n);
    if (it == frames->of.end() || it->second != frame) continue;
    members.push_back(n);
    if (n->IsEnter()) enters.push_back(n);
    if (n->IsLoopCond()) {
      if (loop_cond != nullptr) {
        return LoopError(frame, fmt::format("it has two LoopConds, {} and {}",
                                            Quoted(loop_cond->name()), Quoted(n->name())));
      }
      loop_cond = n;
    }
  }
  if (loop_cond == nullptr) {
    return LoopError(frame, fmt::format("it has no LoopCond (its Enter {})",
                                        Quoted(enters.empty() ? frame : enters[0]->name())));
  }
  std::vector<LoopVar> vars;
  std::set<const Node*> structure{loop_cond};
  std::map<const Node*, int> var_of;  // Enter, Merge and Switch -> their variable
  for (Node* enter : enters) {
    ASSIGN_OR_RETURN(LoopVar v, FindLoopVar(frame, enter, loop_cond));
    const int index = static_cast<int>(vars.size());
    for (Node* n : {v.enter, v.merge, v.next, v.sw}) {
      if (n == nullptr) continue;
      structure.insert(n);
      var_of[n] = index;
    }
    for (Node* x : v.exits) structure.insert(x);
    vars.push_back(std::move(v));
  }
  std::set<const Node*> member_set(members.begin(), members.end());
  for (Node* n : members) {
    if (n->IsExit() && !structure.count(n)) {
      return LoopError(frame, fmt::format("its Exit {} reads no loop variable's Switch",
                                          Quoted(n->name())));
    }
    if ((n->IsMerge() || n->IsNextIteration()) && !structure.count(n) &&
        (n->IsNextIteration() || std::any_of(n->in_edges().begin(), n->in_edges().end(),
                                             [](const Edge* e) {
                                               return e->src->IsNextIteration();
                                             }))) {
      return LoopError(frame, fmt::format("{} belongs to no loop variable", Quoted(n->name())));
    }
  }
  // An in-edge of a cond or body node from outside it: the loop variable it reads.
  auto outside = [&](bool body, const Edge& e) -> StatusOr<int> {
    auto it = var_of.find(e.src);
    if (it != var_of.end()) {
      if (e.IsControlEdge()) return -1;
      const LoopVar& v = vars[it->second];
      if (e.src == v.enter && !v.invariant) {
        return LoopError(frame, fmt::format("{} reads its Enter {} before the Merge",
                                            Quoted(e.dst->name()), Quoted(e.src->name())));
      }
      if (e.src == v.sw && (!body || e.src_output != 1)) {
        return LoopError(frame, fmt::format("{} reads the {} output of the Switch {}",
                                            Quoted(e.dst->name()),
                                            e.src_output == 0 ? "false" : "true",
                                            Quoted(e.src->name())));
      }
      return it->second;
    }
    if (e.IsControlEdge() && structure.count(e.src)) return -1;
    return LoopError(frame, fmt::format("{} reads {} {}", Quoted(e.dst->name()),
                                        Quoted(e.src->name()),
                                        member_set.count(e.src) ? "of the loop's control"
                                                                : "from outside without an Enter"));
  };
  std::vector<DataType> types;
  for (const LoopVar& v : vars) types.push_back(v.enter->output_type(0));

  Extraction cond;
  cond.name = frame + "_cond";
  cond.arg_types = types;
  const Edge* pred = loop_cond->input_edge(0);
  if (pred == nullptr) return LoopError(frame, "its LoopCond has no input");
  std::set<Node*> cond_nodes = BackwardClosure({pred->src}, structure);
  cond.nodes.assign(cond_nodes.begin(), cond_nodes.end());
  cond.outside = [&](const Edge& e) { return outside(false, e); };
  if (cond_nodes.count(pred->src)) {
    cond.results.push_back({pred->src, pred->src_output, -1});
  } else {
    ASSIGN_OR_RETURN(int arg, outside(false, *pred));
    cond.results.push_back({nullptr, 0, arg});
  }

  Extraction body;
  body.name = frame + "_body";
  body.arg_types = types;
  std::vector<Node*> seeds;
  for (const LoopVar& v : vars) {
    if (v.next == nullptr) continue;
    for (const Edge* e : v.next->in_edges()) {
      if (e->src->IsOp()) seeds.push_back(e->src);
    }
  }
  for (Node* n : members) {
    if (!structure.count(n) && !cond_nodes.count(n)) seeds.push_back(n);
  }
  std::set<Node*> body_nodes = BackwardClosure(seeds, structure);
  body.nodes.assign(body_nodes.begin(), body_nodes.end());
  body.outside = [&](const Edge& e) { return outside(true, e); };
  for (size_t i = 0; i < vars.size(); ++i) {
    const LoopVar& v = vars[i];
    if (v.invariant) {
      body.results.push_back({nullptr, 0, static_cast<int>(i)});
      continue;
    }
    const Edge* in = v.next->input_edge(0);
    if (in == nullptr) return LoopError(frame, fmt::format("{} has no input", Quoted(v.next->name())));
    if (body_nodes.count(in->src)) {
      body.results.push_back({in->src, in->src_output, -1});
    } else {
      ASSIGN_OR_RETURN(int arg, outside(true, *in));
      body.results.push_back({nullptr, 0, arg});
    }
    for (const Edge* e : v.next->in_edges()) {
      if (e->IsControlEdge() && body_nodes.count(e->src)) body.control_outputs.push_back(e->src);
    }
  }
  // Nothing of the loop is read after it but through an Exit.
  for (std::set<Node*>* part : {&cond_nodes, &body_nodes}) {
    for (const Node* n : *part) {
      if (!member_set.count(n)) {
        return LoopError(frame, fmt::format("{} runs outside the loop but is read inside it "
                                            "without an Enter",
                                            Quoted(n->name())));
      }
      for (const Edge* e : n->out_edges()) {
        if (e->dst->IsOp() && !member_set.count(e->dst)) {
          return LoopError(frame, fmt::format("{} is read by {} after the loop without an Exit",
                                              Quoted(n->name()), Quoted(e->dst->name())));
        }
      }
    }
  }
  ASSIGN_OR_RETURN(std::string cond_name, functionalize::ExtractFunction(*g, cond, library));
  ASSIGN_OR_RETURN(std::string body_name, functionalize::ExtractFunction(*g, body, library));

  NodeDef def;
  def.name = g->NewName(frame + "/While");
  def.op = "While";
  def.device = vars.empty() ? "" : vars[0].enter->requested_device();
  AttrListValue t;
  t.type = types;
  def.attr["T"] = AttrValue::List(t);
  graph::NameAttrList cond_f, body_f;
  cond_f.name = cond_name;
  body_f.name = body_name;
  def.attr["cond"] = AttrValue::Func(cond_f);
  def.attr["body"] = AttrValue::Func(body_f);
  if (!vars.empty()) {
    if (const AttrValue* p = graph::FindAttr(vars[0].enter->attrs(), "parallel_iterations")) {
      def.attr["parallel_iterations"] = *p;
    }
  }
  ASSIGN_OR_RETURN(Node * loop, g->AddNode(std::move(def)));
  frames->of[loop] = frames->parent.at(frame);
  for (size_t i = 0; i < vars.size(); ++i) {
    for (const Edge* e : vars[i].enter->in_edges()) {
      if (!e->src->IsOp()) continue;
      if (e->IsControlEdge()) {
        g->AddControlEdge(e->src, loop);
      } else {
        g->AddEdge(e->src, e->src_output, loop, static_cast<int>(i));
      }
    }
    for (Node* x : vars[i].exits) {
      std::vector<const Edge*> outs = x->out_edges();
      for (const Edge* e : outs) {
        if (!e->dst->IsOp()) continue;
        Node* dst = e->dst;
        const int input = e->dst_input;
        const bool control = e->IsControlEdge();
        g->RemoveEdge(e);
        if (control) {
          g->AddControlEdge(loop, dst);
        } else {
          g->AddEdge(loop, static_cast<int>(i), dst, input);
        }
      }
    }
  }
  for (Node* n : members) {
    frames->of.erase(n);
    g->RemoveNode(n);
  }
  return OkStatus();
}

}  // namespace

bool HasV1ControlFlow(const Graph& graph) {
  for (const Node* n : graph.op_nodes()) {
    if (n->IsControlFlow()) return true;
  }
  return false;
}

Status FunctionalizeControlFlow(Graph* graph) {
  if (!HasV1ControlFlow(*graph)) return OkStatus();
  ASSIGN_OR_RETURN(Frames frames, BuildFrames(*graph));
  std::vector<std::pair<int, std::string>> loops;
  for (const auto& [frame, parent] : frames.parent) {
    const int depth = frames.Depth(frame);
    if (depth < 0) {
      return Status::Error(fmt::format("the loop {} is entered from inside itself",
                                       Quoted(frame)));
    }
    loops.push_back({-depth, frame});
  }
  std::sort(loops.begin(), loops.end());  // innermost first
  for (const auto& [depth, frame] : loops) {
    RETURN_IF_ERROR(FunctionalizeLoop(graph, frame, &frames, &graph->library()));
  }
  return functionalize::FunctionalizeConds(graph, &graph->library());
}

}  // namespace xlens::cluster
