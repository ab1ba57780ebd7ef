// Graphs whose nodes call functions of their library by op name, as encapsulate_subgraphs leaves
// them (`op: "cluster_0"`): TensorFlow resolves such ops through its FunctionLibraryDefinition,
// an op registry with the library's functions on top of the global ops. Here that is an
// OpRegistry holding both, owned beside the graph that points at it.
#pragma once

#include <memory>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/op_registry.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// The ops of `base` and one op per function of `library` (function_call_op.h: its signature and
// the kernel that runs its body; no XLA kernel: a compiled call runs through what build_xla_ops
// makes of it).
std::shared_ptr<const graph::OpRegistry> RegistryWithFunctions(
    const graph::FunctionDefLibrary& library,
    const graph::OpRegistry& base = graph::OpRegistry::Global());

// A graph and the registry its nodes' ops come from. The registry is declared first so it
// outlives the graph.
struct GraphWithFunctions {
  std::shared_ptr<const graph::OpRegistry> registry;
  std::unique_ptr<graph::Graph> graph;
};

// Builds a graph from `def` whose function-call nodes resolve against def's library (what
// Graph::FromGraphDef cannot, its registry being the global one). Errors name the node.
StatusOr<GraphWithFunctions> GraphFromGraphDefWithFunctions(const graph::GraphDef& def);

}  // namespace xlens::cluster
