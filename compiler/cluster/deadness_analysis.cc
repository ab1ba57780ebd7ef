#include "compiler/cluster/deadness_analysis.h"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace xlens::cluster {

using graph::Edge;
using graph::Node;

class Predicate {
 public:
  enum class Kind { kAnd, kOr, kNot, kSymbol };
  Kind kind;
  std::vector<const Predicate*> operands;  // sorted by key, no duplicates
  std::string key;                         // canonical text; equal keys, equal predicates
};

struct DeadnessAnalysis::Factory {
  std::unordered_map<std::string, std::unique_ptr<Predicate>> interned;

  const Predicate* Intern(Predicate::Kind kind, std::vector<const Predicate*> operands,
                          std::string key) {
    auto& slot = interned[key];
    if (!slot) {
      slot = std::make_unique<Predicate>();
      slot->kind = kind;
      slot->operands = std::move(operands);
      slot->key = key;
    }
    return slot.get();
  }
  const Predicate* True() { return Intern(Predicate::Kind::kAnd, {}, "#true"); }
  const Predicate* False() { return Intern(Predicate::Kind::kOr, {}, "#false"); }
  const Predicate* Symbol(const std::string& name) {
    return Intern(Predicate::Kind::kSymbol, {}, name);
  }
  const Predicate* Not(const Predicate* p) {
    if (p->kind == Predicate::Kind::kNot) return p->operands[0];
    if (p == True()) return False();
    if (p == False()) return True();
    return Intern(Predicate::Kind::kNot, {p}, "~" + p->key);
  }
  const Predicate* And(std::vector<const Predicate*> ops) { return AndOr(std::move(ops), true); }
  const Predicate* Or(std::vector<const Predicate*> ops) { return AndOr(std::move(ops), false); }

  const Predicate* AndOr(std::vector<const Predicate*> ops, bool is_and) {
    const Predicate::Kind kind = is_and ? Predicate::Kind::kAnd : Predicate::Kind::kOr;
    const Predicate* identity = is_and ? True() : False();
    const Predicate* absorbing = is_and ? False() : True();
    // Flatten nested operations of the same kind; drop the identity.
    std::map<std::string, const Predicate*> flat;
    std::vector<const Predicate*> work = std::move(ops);
    while (!work.empty()) {
      const Predicate* p = work.back();
      work.pop_back();
      if (p == absorbing) return absorbing;
      if (p == identity) continue;
      if (p->kind == kind) {
        work.insert(work.end(), p->operands.begin(), p->operands.end());
        continue;
      }
      flat.emplace(p->key, p);
    }
    // x & ~x is false, x | ~x is true.
    for (const auto& [key, p] : flat) {
      if (flat.count(Not(p)->key)) return absorbing;
    }
    std::vector<const Predicate*> operands;
    for (const auto& [key, p] : flat) operands.push_back(p);
    if (operands.empty()) return identity;
    if (operands.size() == 1) return operands[0];
    // Factor out what every operand shares: (A & B) | (A & C) is A & (B | C).
    const Predicate::Kind inner = is_and ? Predicate::Kind::kOr : Predicate::Kind::kAnd;
    auto parts = [&](const Predicate* p) {
      std::set<std::string> keys;
      if (p->kind == inner) {
        for (const Predicate* q : p->operands) keys.insert(q->key);
      } else {
        keys.insert(p->key);
      }
      return keys;
    };
    std::set<std::string> common = parts(operands[0]);
    for (size_t i = 1; i < operands.size() && !common.empty(); ++i) {
      std::set<std::string> next, mine = parts(operands[i]);
      std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(),
                            std::inserter(next, next.begin()));
      common = std::move(next);
    }
    if (!common.empty()) {
      std::vector<const Predicate*> common_ops, rests;
      for (const std::string& key : common) common_ops.push_back(interned[key].get());
      for (const Predicate* p : operands) {
        std::vector<const Predicate*> rest;
        if (p->kind == inner) {
          for (const Predicate* q : p->operands) {
            if (!common.count(q->key)) rest.push_back(q);
          }
        }
        rests.push_back(is_and ? Or(rest) : And(rest));
      }
      common_ops.push_back(AndOr(rests, is_and));
      return AndOr(common_ops, !is_and);
    }
    std::string key = "(";
    for (size_t i = 0; i < operands.size(); ++i) {
      key += (i ? (is_and ? " & " : " | ") : "") + operands[i]->key;
    }
    key += ")";
    return Intern(kind, std::move(operands), std::move(key));
  }
};

DeadnessAnalysis::DeadnessAnalysis() : factory_(std::make_unique<Factory>()) {}
DeadnessAnalysis::~DeadnessAnalysis() = default;

StatusOr<std::unique_ptr<DeadnessAnalysis>> DeadnessAnalysis::Run(
    const graph::Graph& graph, const std::vector<ControlFlowInfo>& frames) {
  std::unique_ptr<DeadnessAnalysis> analysis(new DeadnessAnalysis());
  Factory& f = *analysis->factory_;
  auto& preds = analysis->predicates_;
  preds.assign(graph.num_node_ids(), {});
  ASSIGN_OR_RETURN(std::vector<Node*> order, graph.TopologicalOrder());

  auto input_pred = [&](const Edge* e) -> const Predicate* {
    const auto& src = preds[e->src->id()];
    if (src.empty()) return f.True();  // _SOURCE, or a back edge not yet visited
    if (e->IsControlEdge()) return src.back();
    return src[e->src_output];
  };
  // What a loop frame was entered under, from its Enter nodes (for what leaves through Exit).
  std::map<std::string, std::vector<const Predicate*>> frame_entry;

  for (Node* node : order) {
    const Predicate* alive = nullptr;
    std::vector<const Predicate*> outputs(node->num_outputs(), nullptr);
    if (node->IsMerge()) {
      bool in_loop = false;
      std::vector<const Predicate*> inputs;
      for (const Edge* e : node->in_edges()) {
        if (e->src->IsNextIteration()) {
          in_loop = true;
          continue;
        }
        inputs.push_back(input_pred(e));
      }
      if (in_loop) {
        // Optimistically, every Merge of a loop is alive under one symbol for the frame.
        const std::string& frame = frames[node->id()].frame_name;
        alive = f.And({f.And(frame_entry[frame]), f.Symbol("{loop " + frame + "}")});
      } else {
        alive = f.Or(inputs);
      }
      std::fill(outputs.begin(), outputs.end(), alive);
    } else if (node->IsSwitch()) {
      std::vector<const Predicate*> inputs;
      for (const Edge* e : node->in_edges()) inputs.push_back(input_pred(e));
      alive = f.And(inputs);
      // The predicate's symbol is the tensor it comes from: an Identity forwards the same value
      // (TF1's cond switches on `cond/pred_id`, an Identity of the predicate), so it is looked
      // through and both switches agree.
      const Edge* pred_edge = node->input_edge(1);
      while (pred_edge != nullptr && pred_edge->src->type_string() == "Identity" &&
             pred_edge->src->num_inputs() == 1 && pred_edge->src->input_edge(0) != nullptr) {
        pred_edge = pred_edge->src->input_edge(0);
      }
      std::string tensor =
          pred_edge ? pred_edge->src->name() + ":" + std::to_string(pred_edge->src_output) : "?";
      const Predicate* symbol = f.Symbol(tensor);
      outputs[0] = f.And({alive, f.Not(symbol)});
      if (outputs.size() > 1) outputs[1] = f.And({alive, symbol});
    } else if (node->IsExit()) {
      // A value leaves the loop once, alive when the loop was entered alive.
      alive = f.And(frame_entry[frames[node->id()].frame_name]);
      std::fill(outputs.begin(), outputs.end(), alive);
    } else if (node->type_string() == "ControlTrigger") {
      alive = f.True();
      std::fill(outputs.begin(), outputs.end(), alive);
    } else {
      std::vector<const Predicate*> inputs;
      for (const Edge* e : node->in_edges()) inputs.push_back(input_pred(e));
      alive = f.And(inputs);
      std::fill(outputs.begin(), outputs.end(), alive);
      if (node->IsEnter()) frame_entry[frames[node->id()].frame_name].push_back(alive);
    }
    outputs.push_back(alive);
    preds[node->id()] = std::move(outputs);
  }
  return analysis;
}

std::string DeadnessAnalysis::PredicateFor(const Node& node) const {
  const auto& p = predicates_[node.id()];
  return p.empty() ? "#true" : p.back()->key;
}

std::string DeadnessAnalysis::PredicateForOutput(const Node& node, int output) const {
  const auto& p = predicates_[node.id()];
  if (p.empty() || output < 0 || output + 1 >= static_cast<int>(p.size())) return PredicateFor(node);
  return p[output]->key;
}

}  // namespace xlens::cluster
