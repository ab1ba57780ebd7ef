#include "compiler/cluster/xla_jit.h"

#include <unistd.h>

#include <filesystem>

#include "compiler/cluster/clustering_pipeline.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/cluster/mark_for_compilation_pass.h"
#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/cluster/xla_launch_ops.h"

namespace xlens::cluster {

namespace {

// A path as the manifest lists it: relative to the manifest's directory when below it.
std::string ManifestPath(const std::string& path, const std::string& directory) {
  std::error_code ec;
  std::filesystem::path rel = std::filesystem::relative(path, directory, ec);
  if (ec || rel.empty() || rel.string().rfind("..", 0) == 0) {
    return std::filesystem::absolute(path, ec).string();
  }
  return rel.string();
}

ManifestGraph ManifestGraphFor(int64_t index, const ClusteringOutcome& outcome,
                               const std::string& directory) {
  ManifestGraph g;
  g.process = static_cast<int64_t>(::getpid());
  g.id = index;
  g.name = "graph_" + std::to_string(index);
  for (const auto& [stage, files] : outcome.stage_files) {
    ManifestGraphStage& s = g.stages.emplace_back();
    s.name = stage;
    for (const std::string& f : files) s.files.push_back(ManifestPath(f, directory));
  }
  for (const auto& [name, nodes] : outcome.result.clusters) {
    ManifestCluster& c = g.clusters.emplace_back();
    c.name = name;
    c.nodes = nodes;
    for (const std::string& n : nodes) {
      if (outcome.result.declustered.count(n)) c.declustered.push_back(n);
    }
  }
  g.unclustered = outcome.result.unclustered;
  g.declustered = outcome.result.declustered;
  return g;
}

}  // namespace

XlaJit::XlaJit(DebugOptions flags, std::function<void(const std::string&)> log)
    : flags_(std::move(flags)),
      log_(std::move(log)),
      fuel_(std::make_shared<std::atomic<int64_t>>(flags_.tf_xla_clustering_fuel)) {
  if (flags_.tf_xla_clustering_debug && !flags_.tf_dump_graph_prefix.empty()) {
    dumper_ = std::make_unique<GraphDumper>(flags_.tf_dump_graph_prefix);
  }
  RegisterXlaLaunchKernels();
}

XlaJit::~XlaJit() = default;

void XlaJit::Install(graph::SessionOptions* options) {
  const graph::GlobalJitLevel level = options->global_jit_level;
  const bool cpu_global_jit = options->cpu_global_jit;
  options->post_rewrite_passes.push_back(
      [this, level, cpu_global_jit](std::unique_ptr<graph::Graph>* graph,
                                    graph::ResourceMgr* resources) {
        return Run(graph, resources, level, cpu_global_jit);
      });
}

Status XlaJit::Run(std::unique_ptr<graph::Graph>* graph, graph::ResourceMgr* resources,
                   graph::GlobalJitLevel session_level, bool session_cpu_global_jit) {
  if (paused_) return OkStatus();
  std::shared_ptr<graph::ResourceBase> base = resources->LookupOrCreateResource(
      kXlaDeviceCompilerResource,
      [this] { return std::make_shared<XlaDeviceCompiler>(flags_, log_); });
  ClusteringPipelineOptions options;
  options.mark = MarkForCompilationOptionsFor(flags_, session_level, session_cpu_global_jit);
  options.mark.fuel = fuel_;
  options.dumper = dumper_.get();
  options.must_compile_function = must_compile_function_;
  std::lock_guard<std::mutex> lock(mu_);
  compiler_ = std::dynamic_pointer_cast<XlaDeviceCompiler>(base);
  ASSIGN_OR_RETURN(ClusteringOutcome outcome, RunClusteringPasses(graph->get(), options));
  if (DumpContext* dump = compiler_->dump_context()) {
    dump->RecordClusteringGraph(ManifestGraphFor(static_cast<int64_t>(record_.graphs.size()),
                                                 outcome, dump->directory()));
  }
  record_.graphs.push_back(
      {static_cast<int64_t>(record_.graphs.size()), std::move(outcome.result)});
  if (outcome.rewritten.graph != nullptr) {
    registries_.push_back(outcome.rewritten.registry);
    *graph = std::move(outcome.rewritten.graph);
  }
  return OkStatus();
}

XlaJitRecord XlaJit::record() const {
  std::lock_guard<std::mutex> lock(mu_);
  return record_;
}

std::shared_ptr<XlaDeviceCompiler> XlaJit::compiler() const {
  std::lock_guard<std::mutex> lock(mu_);
  return compiler_;
}

}  // namespace xlens::cluster
