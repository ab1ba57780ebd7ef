// Graphviz DOT for a TensorFlow Graph, drawn the way TensorBoard's graph view draws one: ops as
// ellipses filled by their family (math, matrix, reduction, array, neural-net, state, control
// flow), constants as small grey boxes, feeds (Placeholder, _Arg) as inverted houses, variables
// as cylinders, results (_Retval) as houses, NoOps as dashed octagons. Data edges carry the dtype
// and inferred shape of the tensor on them ("float [100,10]"), with the output index where a node
// has several; control edges are dashed and unlabelled.
//
// Large graphs are cut as the HLO DOT printer cuts them: above `max_nodes` only the
// neighbourhood of one node is drawn (the nearest first), a note says how many nodes are not
// shown, and every drawn node that lost neighbours gets a dashed stub saying how many.
#pragma once

#include <string>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct GraphDotOptions {
  // The node the neighbourhood is centred on (highlighted); empty: the last node in topological
  // order (usually the training op or the result).
  std::string center;
  // Only nodes at most this many edges away from `center` are drawn; -1: no radius, the whole
  // graph unless it has more than `max_nodes` nodes.
  int radius = -1;
  // At most this many nodes are drawn, the nearest to `center` first; <= 0: no limit.
  int max_nodes = 300;
  // The graph's label (the file name).
  std::string title;
};

// The graph as a DOT digraph. Shapes are whatever Graph::InferShapes left on the nodes. Fails
// when `center` names no node.
StatusOr<std::string> GraphToDot(const Graph& graph, const GraphDotOptions& options = {});

// The family an op belongs to for drawing ("math", "matrix", "reduction", "array", "nn",
// "state", "control", "random", "const", "feed", "variable", "result", "noop", "other").
std::string OpFamily(const std::string& op);

}  // namespace xlens::graph
