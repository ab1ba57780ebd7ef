// The analysis FunctionalizeConds (functionalize_cond.cc) starts from, as TensorFlow's
// functionalize_cond.cc computes it: every node's branch state, the set of (predicate, branch)
// pairs it lies under (a Switch's false output (0) puts its consumers under (pred, 0), its true
// output (1) under (pred, 1); a Merge takes its inputs' states less the predicate it joins), the
// predicate each Merge joins, and each node's level. Computed once, in one pass that also bypasses
// a Switch on a predicate its own state already fixes and drops the branch that never runs.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster::functionalize::cond {

using Pred = std::pair<int, int>;  // the predicate's (node id, output)
using BranchState = std::set<std::pair<Pred, int>>;

// The predicate a Switch tests, seen through Identity nodes: TF1's tf.cond switches its values on
// `pred_id` = Identity(pred) and its pivots on `pred` itself, one conditional.
Pred PredOf(const graph::Node& sw);
// The predicate's name, quoted for a message.
std::string PredName(const graph::Graph& g, const Pred& p);
// "cannot make the conditional on PRED an If: WHAT".
Status CondError(const graph::Graph& g, const Pred& p, const std::string& what);

// The branch states of every node (by id), the predicate each Merge joins, and each node's level
// (Levels below): the If that replaces a conditional whose inputs lie below all its Merges takes
// its first Merge's level, which keeps every path running from a lower level to a higher one.
struct Analysis {
  std::vector<BranchState> state;
  std::vector<int64_t> pos;
  std::vector<std::optional<Pred>> merge_pred;
  void Resize(int n) {
    state.resize(n);
    pos.resize(n, 0);
    merge_pred.resize(n);
  }
  bool Under(const graph::Node* n, const Pred& p) const {
    const BranchState& s = state[n->id()];
    return s.count({p, 0}) > 0 || s.count({p, 1}) > 0;
  }
};

// One pass in topological order: redundant Switches bypassed, their dead branches dropped, the
// states of the rest.
StatusOr<Analysis> Analyze(graph::Graph* g);

// A level for every node: one more than the greatest of what it reads. A path runs only from a
// lower level to a higher one, so what a group reads below its lowest Merge cannot depend on it.
Status Levels(const graph::Graph& g, Analysis* a);

}  // namespace xlens::cluster::functionalize::cond
