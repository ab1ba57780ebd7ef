// Which values XLA needs at compile time (tf2xla's BackwardsConstAnalysis): the inputs an op's
// lowering reads as constants (Reshape's shape, Sum's axes; OpRegistration's
// compile_time_const_inputs), and, backwards, every value those are computed from, except
// through ops that read only a shape (Shape, Rank, Size).
#pragma once

#include <functional>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// One flag per node id: whether its outputs must be compile-time constants. `edge_filter`, when
// given, limits the propagation to the edges it accepts (partially_decluster looks only inside
// clusters).
StatusOr<std::vector<bool>> BackwardsConstAnalysis(
    const graph::Graph& graph,
    const std::function<bool(const graph::Edge&)>& edge_filter = nullptr);

// The input indices of `node` whose values its lowering needs at compile time.
std::vector<int> CompileTimeConstInputIndices(const graph::Node& node);

}  // namespace xlens::cluster
