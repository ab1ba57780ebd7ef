// Pairs of resource variable operations that must not share a cluster
// (jit/resource_operation_safety_analysis.h). An XLA cluster reads all its variables when it
// starts and writes them all when it ends, so inside one cluster an edge Read -> anything and
// anything -> Write keeps its meaning, but a write (or read-modify-write) that reaches a later
// read or read-modify-write would see the wrong value. Function calls count as read-modify-write.
#pragma once

#include <utility>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// {a, b} (node ids): a reaches b and they may not be clustered together.
StatusOr<std::vector<std::pair<int, int>>> ComputeIncompatibleResourceOperationPairs(
    const graph::Graph& graph);

}  // namespace xlens::cluster
