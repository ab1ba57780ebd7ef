// The clustering passes in TensorFlow's order on one graph, with their dumps:
// mark_for_compilation, partially_decluster, encapsulate_subgraphs, build_xla_ops. The session's
// JIT (xla_jit.h) runs this on every per-signature graph; `xlens cluster` runs it on a file.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/cluster/clustering_result.h"
#include "compiler/cluster/function_library_registry.h"
#include "compiler/cluster/mark_for_compilation_pass.h"
#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

class GraphDumper;

struct ClusteringOutcome {
  ClusteringResult result;
  // The graph after build_xla_ops (with its registry of library functions); empty with
  // mark_only.
  GraphWithFunctions rewritten;
  // The dump files written for this graph, by clustering stage (TensorFlow's dump name with the
  // cluster dropped: "encapsulate_subgraphs_subgraph_cluster_0" is stage
  // "encapsulate_subgraphs"), in the order written.
  std::vector<std::pair<std::string, std::vector<std::string>>> stage_files;
};

struct ClusteringPipelineOptions {
  MarkForCompilationOptions mark;
  // Where TensorFlow's clustering graphs go (TF_DUMP_GRAPH_PREFIX with
  // --tf_xla_clustering_debug); null: nowhere.
  GraphDumper* dumper = nullptr;
  // Stop after partially_decluster (what `xlens cluster` reports without rewriting the graph).
  bool mark_only = false;
  // TensorFlow's lazy compilation of auto-clustered launches (off: must_compile launches).
  bool lazy_compilation = true;
  // A must-compile function (TensorFlow's jit_compile=True): the whole graph is one cluster
  // named so; every op must compile, or the error is TensorFlow's "Detected unsupported
  // operations when trying to compile graph NAME[_XlaMustCompile=true] on XLA_CPU_JIT: ...".
  std::string must_compile_function;
};

// The must-compile check: "" when XLA can compile every op of `graph`, else TensorFlow's error.
std::string MustCompileError(const graph::Graph& graph, const std::string& function_name);

// Runs the passes: mark_for_compilation and partially_decluster on `graph` in place (they only
// set attrs), then encapsulate_subgraphs and build_xla_ops into a new graph. The result's
// partition is mark_for_compilation's, with what partially_decluster took out in `declustered`.
// A dump that cannot be written is reported on stderr and never fails the clustering.
StatusOr<ClusteringOutcome> RunClusteringPasses(graph::Graph* graph,
                                                const ClusteringPipelineOptions& options);

}  // namespace xlens::cluster
