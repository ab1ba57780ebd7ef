#include "compiler/cluster/clustering_pipeline.h"

#include <cstdio>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/cluster/partially_decluster_pass.h"
#include "compiler/support/terminal_text.h"
#include "profiler/host_tracer.h"

namespace xlens::cluster {

namespace {

void ReportDump(const StatusOr<std::string>& written) {
  if (!written.ok()) {
    std::fprintf(stderr, "xlens: warning: a clustering dump was not written: %s\n",
                 EscapeForTerminal(written.status().message()).c_str());
  }
}

void ReportDumpErrors(const std::vector<std::string>& errors) {
  for (const std::string& e : errors) {
    std::fprintf(stderr, "xlens: warning: a clustering dump was not written: %s\n",
                 EscapeForTerminal(e).c_str());
  }
}

}  // namespace

StatusOr<ClusteringOutcome> RunClusteringPasses(graph::Graph* graph,
                                                const ClusteringPipelineOptions& options) {
  ClusteringOutcome outcome;
  MarkForCompilationOptions mark = options.mark;
  GraphDumper* dumper = options.dumper;
  if (dumper != nullptr) {
    // TensorFlow dumps the graph as its pass saw it, only when there is something to cluster.
    mark.before_create_clusters = [dumper](const graph::Graph& g) {
      ReportDump(dumper->Dump("before_mark_for_compilation", g));
    };
  }
  {
    profiler::TraceSpan span("mark_for_compilation", profiler::category::kClustering);
    ASSIGN_OR_RETURN(outcome.result, MarkForCompilationPass(mark).Run(graph));
  }
  if (dumper != nullptr && outcome.result.had_candidates) {
    ReportDump(dumper->Dump("mark_for_compilation", *graph, &outcome.result));
    ReportDump(dumper->Dump("mark_for_compilation_annotated",
                            AnnotateForDump(*graph, &outcome.result), &outcome.result));
  }
  {
    profiler::TraceSpan span("partially_decluster", profiler::category::kClustering);
    RETURN_IF_ERROR(PartiallyDeclusterPass().Run(graph, &outcome.result));
  }
  if (options.mark_only) return outcome;
  GraphWithFunctions encapsulated;
  {
    profiler::TraceSpan span("encapsulate_subgraphs", profiler::category::kClustering);
    EncapsulateSubgraphsPass encapsulate(dumper);
    ASSIGN_OR_RETURN(encapsulated, encapsulate.Run(*graph));
    ReportDumpErrors(encapsulate.dump_errors());
  }
  {
    profiler::TraceSpan span("build_xla_ops", profiler::category::kClustering);
    BuildXlaOpsPass build({}, dumper);
    ASSIGN_OR_RETURN(outcome.rewritten, build.Run(*encapsulated.graph));
    ReportDumpErrors(build.dump_errors());
  }
  return outcome;
}

}  // namespace xlens::cluster
