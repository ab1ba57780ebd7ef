// mark_for_compilation: TensorFlow's auto-clustering (jit/mark_for_compilation_pass.cc), with a
// reason kept for every node it leaves out.
//
// 1. Candidates: in node id order, every node XLA_CPU_JIT can compile that nothing excludes
//    (_XlaCompile=false, the jit level and device policy, --tf_xla_ops_to_cluster, a stateful op
//    whose value must be a compile-time constant, an Identity that ties a loop's condition to its
//    body, the clustering fuel).
// 2. Edge contraction: each candidate starts as its own cluster; edges of a cycle-detection graph
//    (graph_cycles.h) are contracted in post order, in TensorFlow's three phases (shape consumers
//    with their producers first, then everything but sink-like NoOps and scalar integer counters,
//    then everything), unless the two clusters differ in deadness, jit scope or device, would
//    pass --tf_xla_max_cluster_size, would break resource variable ordering, or would create a
//    cycle.
// 3. Clusters: Fill/SplitV used only outside their cluster are taken back out, and a cluster is
//    kept when it has at least --tf_xla_min_cluster_size nodes that are not Const or Identity, or
//    holds functional control flow, or a node with _XlaCompile=true. Its nodes get `_XlaCluster`
//    and `_XlaAlreadyClustered`, named cluster_N from a process-wide counter as in TensorFlow.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "compiler/cluster/clustering_result.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/session.h"
#include "compiler/support/status.h"
#include "dump/flags.h"

namespace xlens::cluster {

struct MarkForCompilationOptions {
  // The jit level for this graph after the flags (OFF clusters only _XlaCompile=true nodes).
  graph::GlobalJitLevel global_jit_level = graph::GlobalJitLevel::kOff;
  // --tf_xla_cpu_global_jit: XLA_CPU_JIT clusters whenever the jit level is on; without it only
  // on explicit request (_XlaCompile, must-compile) or the session's cpu_global_jit.
  bool cpu_global_jit_flag = false;
  bool session_cpu_global_jit = false;
  int64_t min_cluster_size = 4;
  int64_t max_cluster_size = 2147483647;
  // Shared by every graph the options cluster, as TensorFlow's process-wide fuel is.
  std::shared_ptr<std::atomic<int64_t>> fuel =
      std::make_shared<std::atomic<int64_t>>(INT64_MAX);
  std::string ops_to_cluster;       // --tf_xla_ops_to_cluster
  std::string cluster_exclude_ops;  // --tf_xla_cluster_exclude_ops
  bool deterministic_cluster_names = false;
  bool ignore_deadness_checks = false;
  bool ignore_resource_variable_checks = false;
  // Called with the graph where TensorFlow dumps before_mark_for_compilation (after the edge
  // contraction, before any attr is set; only when there are candidates).
  std::function<void(const graph::Graph&)> before_create_clusters;
};

// The jit level TensorFlow uses for a graph: --tf_xla_auto_jit when set (-1 turns it off), else
// the session's global_jit_level, where DEFAULT means OFF.
graph::GlobalJitLevel EffectiveJitLevel(const DebugOptions& flags,
                                        graph::GlobalJitLevel session_level);

// The options TensorFlow derives from TF_XLA_FLAGS and the session's config.
MarkForCompilationOptions MarkForCompilationOptionsFor(const DebugOptions& flags,
                                                      graph::GlobalJitLevel session_level,
                                                      bool session_cpu_global_jit = false);

// Restarts TensorFlow's process-wide cluster numbering (cluster_0, cluster_1, ...), for tests.
void ResetClusterSequenceNumbers();

class MarkForCompilationPass {
 public:
  explicit MarkForCompilationPass(MarkForCompilationOptions options)
      : options_(std::move(options)) {}

  // Clusters `graph` in place (sets the attrs) and returns the partition with a reason for every
  // op node left out. Errors: a cycle that is not a while loop, an op name in
  // --tf_xla_ops_to_cluster that XLA does not know, an unsupported --tf_xla_cluster_exclude_ops.
  StatusOr<ClusteringResult> Run(graph::Graph* graph) const;

 private:
  MarkForCompilationOptions options_;
};

// The op groups of --tf_xla_ops_to_cluster expanded ("FUSIBLE" is all of them); empty for no
// restriction.
std::vector<std::string> ExpandOpsToCluster(const std::string& flag);

}  // namespace xlens::cluster
