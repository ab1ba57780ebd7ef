// Rewriting a graph for one Session::Run, as TensorFlow's subgraph::RewriteGraphForExecution
// does: each fed tensor becomes an _Arg node (`_arg_<name>_<index>_<k>`), each fetched tensor
// feeds a _Retval node (`_retval_<name>_<index>_<k>`), and the graph is pruned to what the
// fetches and targets need. The result is the graph the executor (and the clustering passes)
// see for that signature.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct RunSignature {
  std::vector<std::string> feeds;    // "x", "x:0", "split:1"
  std::vector<std::string> fetches;  // tensors
  std::vector<std::string> targets;  // node names run for their effect
  // Canonical text "feeds->fetches//targets" used as the cache key.
  std::string Key() const;
};

// A copy of `graph` rewritten and pruned for `signature`. Errors name a feed, fetch or target that
// does not exist, or a fetch of an output index the node does not have.
StatusOr<std::unique_ptr<Graph>> RewriteGraphForExecution(const Graph& graph,
                                                          const RunSignature& signature);

// Removes every node from which none of `roots` is reachable (following data and control
// edges backwards); returns how many were removed.
int PruneForReverseReachability(Graph* graph, const std::vector<Node*>& roots);

// Copies every node and edge of `src` into `dst` (which must be empty).
Status CopyGraph(const Graph& src, Graph* dst);

}  // namespace xlens::graph
