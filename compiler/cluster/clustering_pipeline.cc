#include "compiler/cluster/clustering_pipeline.h"

#include <cstdio>

#include "compiler/cluster/partially_decluster_pass.h"
#include "profiler/host_tracer.h"

namespace xlens::cluster {

StatusOr<ClusteringResult> RunClusteringPasses(graph::Graph* graph,
                                               const ClusteringPipelineOptions& options) {
  ClusteringResult result;
  {
    profiler::TraceSpan span("mark_for_compilation", profiler::category::kClustering);
    ASSIGN_OR_RETURN(result, MarkForCompilationPass(options.mark).Run(graph));
  }
  {
    profiler::TraceSpan span("partially_decluster", profiler::category::kClustering);
    RETURN_IF_ERROR(PartiallyDeclusterPass().Run(graph, &result));
  }
  return result;
}

}  // namespace xlens::cluster
