// When is a node alive? TensorFlow's v1 control flow makes the outputs of a Switch's untaken
// branch dead, and deadness flows forward until a Merge. XLA computes every value, so a cluster
// must not mix nodes that can be dead under different conditions (jit/deadness_analysis.h). This
// computes, for every node, a symbolic predicate under which it is alive, in TensorFlow's
// optimistic form: a Switch output is alive when its predicate tensor is true (or false), a Merge
// is alive when any input is, every other node when all its inputs are, and all the Merges of one
// loop share one symbol for the loop frame; what leaves a loop through Exit is alive when the loop
// was entered. Predicates are simplified as TensorFlow does ((a & b) | (a & ~b) is a), so two
// nodes with the same condition compare equal.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class Predicate;

class DeadnessAnalysis {
 public:
  static StatusOr<std::unique_ptr<DeadnessAnalysis>> Run(
      const graph::Graph& graph, const std::vector<ControlFlowInfo>& frames);
  ~DeadnessAnalysis();

  // A canonical text of the predicate under which `node` runs ("#true" when always):
  // nodes may share a cluster only when theirs are equal.
  std::string PredicateFor(const graph::Node& node) const;
  // The same for one output of the node (a Switch's two outputs differ).
  std::string PredicateForOutput(const graph::Node& node, int output) const;

 private:
  DeadnessAnalysis();
  struct Factory;
  std::unique_ptr<Factory> factory_;
  // Per node id: the predicate of each output, and of the node itself (control slot) last.
  std::vector<std::vector<const Predicate*>> predicates_;
};

}  // namespace xlens::cluster
