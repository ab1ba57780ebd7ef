// partially_decluster: after mark_for_compilation, TensorFlow takes some nodes back out of their
// clusters (jit/partially_decluster_pass.cc), and so does xlens, saying why:
//  - a node whose value the cluster needs as a compile-time constant (a Reshape's shape, a
//    BroadcastGradientArgs' shapes) and whose inputs all come from outside the cluster: computed
//    outside, it reaches the cluster as a constant argument, and the cluster compiles once per
//    distinct value instead of once per distinct input;
//  - a shape consumer (Shape, Rank, Size) none of whose inputs comes from its own cluster: it
//    would make the cluster depend on a whole tensor only to read its shape.
// On a CPU, host and device memory are one, so TensorFlow's third rule (device-to-host copies)
// never applies.
#pragma once

#include "compiler/cluster/clustering_result.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class PartiallyDeclusterPass {
 public:
  // Removes `_XlaCluster` from the nodes it takes out and lists them in `result->declustered`
  // with the reason (`result->clusters` keeps mark_for_compilation's partition).
  Status Run(graph::Graph* graph, ClusteringResult* result) const;
};

}  // namespace xlens::cluster
