#include "compiler/cluster/clustering_pipeline.h"

#include <cstdio>
#include <map>

#include <fmt/format.h>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/compilability_check.h"
#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/cluster/functionalize_control_flow.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/cluster/must_compile_body.h"
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

std::string MustCompileError(const graph::Graph& graph, const std::string& function_name) {
  OperationFilter filter = OperationFilter::ForMustCompile();
  std::vector<std::string> unsupported;
  const std::map<std::string, std::string> host = MustCompileHostNodes(graph);
  for (graph::Node* node : graph.op_nodes()) {
    const std::string& op = node->type_string();
    if (op == "_Arg" || op == "_Retval" || host.count(node->name())) continue;
    std::string reason;
    if (op == "Unique" || op == "UniqueV2" || op == "Where") {
      // TensorFlow 2.21 compiles these with a bounded dynamic shape; xlens's pipeline has only
      // static shapes, so it refuses them for the reason the XLA documentation gives.
      reason = fmt::format(
          "its output shape is not known before it runs, and XLA must infer every dimension at "
          "compile time {{{{node {}}}}}",
          node->name());
    } else {
      reason = MustCompileReason(*node, graph, filter);
    }
    if (!reason.empty()) {
      unsupported.push_back(
          fmt::format("{} ({}){{{{node {}}}}}", op, reason, node->name()));
    }
  }
  if (unsupported.empty()) return "";
  std::string joined;
  for (const std::string& u : unsupported) joined += (joined.empty() ? "" : ", ") + u;
  return fmt::format(
      "Detected unsupported operations when trying to compile graph "
      "{}[_XlaMustCompile=true] on {}: {}",
      function_name, kXlaCpuJitDevice, joined);
}

namespace {

// The clustering stage a dump belongs to.
std::string StageOfDump(const std::string& name) {
  for (const char* stage : {"mark_for_compilation", "encapsulate_subgraphs", "build_xla_ops"}) {
    if (name.find(stage) != std::string::npos) return stage;
  }
  if (name.rfind("encapsulate_fdef", 0) == 0) return "encapsulate_subgraphs";
  return name;
}

// The passes themselves; RunClusteringPasses adds which files each stage wrote.
StatusOr<ClusteringOutcome> RunPasses(graph::Graph* graph,
                                      const ClusteringPipelineOptions& options) {
  ClusteringOutcome outcome;
  MarkForCompilationOptions mark = options.mark;
  GraphDumper* dumper = options.dumper;
  if (!options.must_compile_function.empty()) {
    // jit_compile: no clustering decisions, one cluster of everything or TensorFlow's error.
    // v1 loops and conditionals (a frozen graph's, TF1's) become While and If first, as tf2xla
    // functionalizes them, so they compile to XLA's while and conditional.
    {
      profiler::TraceSpan span("functionalize_control_flow", profiler::category::kClustering);
      RETURN_IF_ERROR(FunctionalizeControlFlow(graph));
    }
    std::string error = MustCompileError(*graph, options.must_compile_function);
    if (!error.empty()) return Error(error);
    // The variables' own nodes stay outside; their handles (or values) become arguments.
    const std::map<std::string, std::string> host = MustCompileHostNodes(*graph);
    for (graph::Node* node : graph->op_nodes()) {
      if (node->type_string() == "_Arg" || node->type_string() == "_Retval") {
        outcome.result.unclustered[node->name()] = "the function's arguments and results";
        continue;
      }
      if (auto it = host.find(node->name()); it != host.end()) {
        outcome.result.unclustered[node->name()] = it->second;
        continue;
      }
      node->mutable_attrs()["_XlaCluster"] = graph::AttrValue::String(options.must_compile_function);
      outcome.result.clusters[options.must_compile_function].push_back(node->name());
    }
    outcome.result.had_candidates = true;
  }
  if (dumper != nullptr) {
    // TensorFlow dumps the graph as its pass saw it, only when there is something to cluster.
    mark.before_create_clusters = [dumper](const graph::Graph& g) {
      ReportDump(dumper->Dump("before_mark_for_compilation", g));
    };
  }
  if (options.must_compile_function.empty()) {
    profiler::TraceSpan span("mark_for_compilation", profiler::category::kClustering);
    ASSIGN_OR_RETURN(outcome.result, MarkForCompilationPass(mark).Run(graph));
  }
  if (dumper != nullptr && outcome.result.had_candidates) {
    ReportDump(dumper->Dump("mark_for_compilation", *graph, &outcome.result));
    ReportDump(dumper->Dump("mark_for_compilation_annotated",
                            AnnotateForDump(*graph, &outcome.result), &outcome.result));
  }
  if (options.must_compile_function.empty()) {
    profiler::TraceSpan span("partially_decluster", profiler::category::kClustering);
    RETURN_IF_ERROR(PartiallyDeclusterPass().Run(graph, &outcome.result));
  }
  if (options.mark_only) return outcome;
  GraphWithFunctions encapsulated;
  {
    profiler::TraceSpan span("encapsulate_subgraphs", profiler::category::kClustering);
    EncapsulateSubgraphsPass encapsulate(dumper, &outcome.result);
    ASSIGN_OR_RETURN(encapsulated, encapsulate.Run(*graph));
    ReportDumpErrors(encapsulate.dump_errors());
  }
  {
    profiler::TraceSpan span("build_xla_ops", profiler::category::kClustering);
    BuildXlaOpsOptions build_options;
    build_options.lazy_compilation =
        options.lazy_compilation && options.must_compile_function.empty();
    BuildXlaOpsPass build(build_options, dumper);
    ASSIGN_OR_RETURN(outcome.rewritten, build.Run(*encapsulated.graph));
    ReportDumpErrors(build.dump_errors());
  }
  return outcome;
}

}  // namespace

StatusOr<ClusteringOutcome> RunClusteringPasses(graph::Graph* graph,
                                                const ClusteringPipelineOptions& options) {
  const size_t first = options.dumper ? options.dumper->written().size() : 0;
  ASSIGN_OR_RETURN(ClusteringOutcome outcome, RunPasses(graph, options));
  if (options.dumper == nullptr) return outcome;
  const auto& written = options.dumper->written();
  for (size_t i = first; i < written.size(); ++i) {
    const std::string stage = StageOfDump(written[i].name);
    if (outcome.stage_files.empty() || outcome.stage_files.back().first != stage) {
      outcome.stage_files.push_back({stage, {}});
    }
    outcome.stage_files.back().second.push_back(written[i].path);
  }
  return outcome;
}

}  // namespace xlens::cluster
