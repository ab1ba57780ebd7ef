// TensorFlow's EncapsulateSubgraphsPass (jit/encapsulate_subgraphs_pass.cc): every cluster that
// mark_for_compilation left in the `_XlaCluster` attrs becomes a function of the graph's library,
// named as the cluster, and one node calling it (`op: "cluster_0"`) takes the cluster's place.
//
// The function has one argument per distinct tensor flowing into the cluster (`<src>_<out>_arg`)
// and one result per distinct tensor flowing out (`<src>_<out>_retval`), both numbered in the
// order the graph's edges meet them. The arguments are then reordered as the launch needs them:
// compile-time constants first (those feeding, inside the cluster, an input whose value XLA needs
// at compile time, found by TensorFlow's backwards const analysis), then the other tensors, then
// resource handles; the call node records the split in `_XlaCompiledKernel = true`,
// `_XlaNumConstantArgs`, `_XlaNumResourceArgs`. Control edges into the cluster become control
// inputs of the call; members whose completion is awaited outside (a control edge leaving the
// cluster, or a node TensorFlow's graph joins to its sink) become the function's control outputs.
// Before a body becomes a function it is optimized as TensorFlow's OptimizeGraph does it, in the
// two steps that change TensorFlow's dumps: Identity nodes are bypassed and common subexpressions
// folded (which takes back the constants clone_constants_for_better_clustering copied).
// TensorFlow's constant folding of the body is not done: no corpus graph shows it, and XLA
// folds those constants itself.
// After the graph is rewritten every node gets `_XlaHasReferenceVars` (whether the graph holds a
// reference variable), which TensorFlow sets after its `encapsulate_subgraphs_after` dump.
#pragma once

#include <string>

#include "compiler/cluster/function_library_registry.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class EncapsulateSubgraphsPass {
 public:
  // `dumper`, when set, receives TensorFlow's dumps of this pass in TensorFlow's order:
  // encapsulate_subgraphs_before, per cluster encapsulate_subgraphs_subgraph_<cluster>,
  // encapsulate_fdef_graph_<cluster> and encapsulate_fdef_<cluster>, then
  // encapsulate_subgraphs_after. A dump that fails is reported through `dump_errors`, never
  // as the pass's error. `result`, when given, puts the clustering's reasons into the .dot of the
  // before dump.
  explicit EncapsulateSubgraphsPass(GraphDumper* dumper = nullptr,
                                    const ClusteringResult* result = nullptr)
      : dumper_(dumper), result_(result) {}

  // The rewritten graph (a new one; `graph` is left as it was), its library holding the
  // graph's functions and one per cluster. A graph without clusters comes back as a copy.
  StatusOr<GraphWithFunctions> Run(const graph::Graph& graph);

  // Messages of the dumps that could not be written during the last Run.
  const std::vector<std::string>& dump_errors() const { return dump_errors_; }

 private:
  void DumpOrNote(StatusOr<std::string> written);

  GraphDumper* dumper_;
  const ClusteringResult* result_;
  std::vector<std::string> dump_errors_;
};

// The argument names TensorFlow's GraphToFunctionDef gives: lower case, every character other
// than a letter or digit made '_', leading '_' dropped ("_arg_x_0_0_0_arg" -> "arg_x_0_0_0_arg",
// "gradients/sub_grad/Shape_1_0_arg" -> "gradients_sub_grad_shape_1_0_arg").
std::string NormalizeFunctionArgName(const std::string& name);

// For each input of `node`, whether XLA needs its value at compile time (the op's
// compile-time-constant inputs).
std::vector<bool> CompileTimeConstInputs(const graph::Node& node);

}  // namespace xlens::cluster
