// Graphviz DOT for a graph at any stage of the clustering, drawn so the clustering reads at a
// glance: each cluster is a box (`subgraph "cluster_<name>"`) holding its members, the ops
// build_xla_ops made for a cluster are boxed under the cluster's scope, and every op left out of
// the clusters says why in its label and tooltip (ClusteringResult's reasons). Ops are coloured
// by family as graph_dot.h colours them; control edges are dashed. It reads a GraphDef, so a
// graph whose call nodes name functions of its library draws as well as any other.
#pragma once

#include <string>

#include "compiler/cluster/clustering_result.h"
#include "compiler/graph/graph_def.h"

namespace xlens::cluster {

struct ClusterGraphDotOptions {
  std::string title;  // the graph's label (the dump's file name)
  // Reasons longer than this are cut in labels (tooltips keep them whole).
  size_t max_reason_chars = 60;
};

std::string ClusterGraphToDot(const graph::GraphDef& graph_def, const ClusteringResult* result,
                              const ClusterGraphDotOptions& options = {});

}  // namespace xlens::cluster
