// `xlens cluster GRAPH [TF_XLA flags] [--json FILE]`: TensorFlow's auto-clustering on a GraphDef,
// with the reason for every node left out. The flags are TensorFlow's (TF_XLA_FLAGS and the same
// on the command line); --jit-level stands for the session's global_jit_level of a TF1 program.
#include <cstdio>
#include <map>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "compiler/cli/cli_util.h"
#include "compiler/cli/commands.h"
#include "compiler/cluster/clustering_pipeline.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/cluster/mark_for_compilation_pass.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/lower_functional_ops.h"
#include "compiler/support/activity.h"
#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cli {
namespace {

int ClusterFail(const Status& status) { return Fail(Error(EscapeForTerminal(status.message()))); }

std::string Shown(const std::string& name) { return EscapeForTerminal(TruncateUtf8(name, 200)); }

}  // namespace

int RunCluster(const ClusterArgs& args) {
  for (const std::string& extra : args.extra_flags) {
    if (!IsDebugFlag(extra)) {
      return ClusterFail(Error(fmt::format("cluster: unknown argument '{}' (see xlens cluster --help)",
                                           EscapeForTerminal(extra))));
    }
  }
  auto flags = DebugOptionsFromEnvironment(args.extra_flags);
  if (!flags.ok()) return ClusterFail(flags.status());
  auto level = graph::ParseGlobalJitLevel(args.jit_level);
  if (!level.ok()) return ClusterFail(level.status().WithContext("--jit-level"));

  const std::string shown = DisplayPath(args.file);
  ActivityScope activity("clustering GraphDef " + args.file);
  std::shared_ptr<graph::SavedModel> saved_model;
  auto def = ReadGraphInput(args.file, args.signature, &saved_model);
  // The reader's message names the file already.
  if (!def.ok()) return ClusterFail(def.status());
  graph::GraphConstructorOptions load;
  load.source_name = shown;
  // A graph TensorFlow wrote may hold ops xlens does not run: they are simply not clusterable.
  load.allow_unknown_ops = true;
  auto g = graph::Graph::FromGraphDef(*def, load);
  if (!g.ok()) return ClusterFail(g.status().WithContext(shown));
  // A SavedModel's signature is a call of its function: inlined first, as TensorFlow's session
  // does before mark_for_compilation, so the clusters are the function's.
  if (saved_model != nullptr) {
    if (Status s = graph::LowerFunctionalOps(g->get()); !s.ok()) return ClusterFail(s.WithContext(shown));
  }

  cluster::ClusteringPipelineOptions options;
  options.mark = cluster::MarkForCompilationOptionsFor(*flags, *level);
  // With TensorFlow's dump settings every stage runs and is dumped; otherwise the partition is
  // all that is asked for.
  std::unique_ptr<cluster::GraphDumper> dumper;
  if (flags->tf_xla_clustering_debug && !flags->tf_dump_graph_prefix.empty()) {
    dumper = std::make_unique<cluster::GraphDumper>(flags->tf_dump_graph_prefix);
    options.dumper = dumper.get();
  } else {
    options.mark_only = true;
  }
  auto outcome = cluster::RunClusteringPasses(g->get(), options);
  if (!outcome.ok()) return ClusterFail(outcome.status().WithContext(shown));
  const cluster::ClusteringResult* result = &outcome->result;

  std::map<std::string, std::string> op_of;
  // Op names come from the file like node names: shown escaped.
  for (graph::Node* n : (*g)->op_nodes()) op_of[n->name()] = Shown(n->type_string());
  // The clusters as mark_for_compilation left them: declustered nodes are listed in their
  // cluster and again below with why they were taken out.
  const std::map<std::string, std::vector<std::string>>& clusters = result->clusters;
  for (const auto& [name, nodes] : clusters) {
    std::map<std::string, int> ops;
    for (const std::string& n : nodes) ++ops[op_of[n]];
    std::vector<std::string> histogram;
    for (const auto& [op, count] : ops) {
      histogram.push_back(count > 1 ? fmt::format("{} x{}", op, count) : op);
    }
    std::printf("%s: %zu node%s (%s)\n", Shown(name).c_str(), nodes.size(),
                nodes.size() == 1 ? "" : "s",
                fmt::format("{}", fmt::join(histogram, ", ")).c_str());
    if (args.verbose) {
      for (const std::string& n : nodes) {
        std::printf("  %s (%s)%s\n", Shown(n).c_str(), op_of[n].c_str(),
                    result->declustered.count(n) ? " [declustered]" : "");
      }
    }
  }
  if (clusters.empty()) std::printf("no clusters\n");
  if (!result->declustered.empty()) {
    std::printf("declustered afterwards (%zu):\n", result->declustered.size());
    for (const auto& [node, reason] : result->declustered) {
      std::printf("  %s (%s): %s\n", Shown(node).c_str(), op_of[node].c_str(),
                  EscapeForTerminal(reason).c_str());
    }
  }
  std::printf("left out (%zu of %d nodes):\n", result->unclustered.size(), (*g)->num_op_nodes());
  for (const auto& [node, reason] : result->unclustered) {
    std::printf("  %s (%s): %s\n", Shown(node).c_str(), op_of[node].c_str(),
                EscapeForTerminal(reason).c_str());
  }

  if (!args.json.empty()) {
    // The partition as mark_for_compilation leaves it (TensorFlow's mark_for_compilation dump),
    // then what partially_decluster took out.
    nlohmann::json j;
    j["clusters"] = nlohmann::json::object();
    for (const auto& [name, nodes] : clusters) j["clusters"][name] = nodes;
    j["unclustered"] = result->unclustered;
    j["declustered"] = result->declustered;
    Status written = WriteFile(args.json, j.dump(1) + "\n");
    if (!written.ok()) return ClusterFail(written.WithContext("--json"));
  }
  if (dumper != nullptr) {
    std::printf("clustering graphs dumped under %s\n", DisplayPath(dumper->prefix()).c_str());
  }
  return 0;
}

}  // namespace xlens::cli
