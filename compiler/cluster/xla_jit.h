// TensorFlow's JIT in a session: with EnableXlaJit, every graph the session prepares for a Run
// signature goes through the clustering passes (mark_for_compilation, partially_decluster,
// encapsulate_subgraphs, build_xla_ops, dumped under TF_DUMP_GRAPH_PREFIX with
// --tf_xla_clustering_debug), and its clusters run as compiled XLA executables through the launch
// ops, with TensorFlow's lazy compilation and its fallback to op by op. The jit level comes from
// the session's global_jit_level and --tf_xla_auto_jit, as in TensorFlow; with neither (or on the
// CPU without --tf_xla_cpu_global_jit) only jit_scope'd nodes are compiled.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "compiler/cluster/clustering_result.h"
#include "compiler/graph/session.h"
#include "dump/flags.h"

namespace xlens::cluster {

class GraphDumper;
class XlaDeviceCompiler;

// What the JIT did in a session, for the command line and the manifest.
struct XlaJitRecord {
  struct GraphClustering {
    int64_t graph_index = 0;  // in the order the session prepared its graphs
    ClusteringResult result;
  };
  std::vector<GraphClustering> graphs;
};

class XlaJit {
 public:
  // `log` receives the JIT's one-line notices (recompiles, lazy fallbacks); stderr when null.
  XlaJit(DebugOptions flags, std::function<void(const std::string&)> log = nullptr);
  ~XlaJit();

  // Installs the clustering into `options` (keep this object alive as long as the session).
  void Install(graph::SessionOptions* options);
  // Compile every graph whole as the must-compile function `name` (TensorFlow's
  // tf.function(jit_compile=True)) instead of auto-clustering it.
  void set_must_compile_function(std::string name) { must_compile_function_ = std::move(name); }
  // While paused, the graphs the session prepares run op by op, unclustered and unrecorded: the
  // variables' initializers run outside a must-compile function, as TensorFlow runs them eagerly
  // (or in a plain session run) before the first call of the jit_compile function.
  void set_paused(bool paused) { paused_ = paused; }

  // Every graph clustered so far, with its clusters and reasons.
  XlaJitRecord record() const;
  // The compiler of the last session installed into (null before its first Run).
  std::shared_ptr<XlaDeviceCompiler> compiler() const;

 private:
  Status Run(std::unique_ptr<graph::Graph>* graph, graph::ResourceMgr* resources,
             graph::GlobalJitLevel session_level, bool session_cpu_global_jit);

  DebugOptions flags_;
  std::string must_compile_function_;
  std::atomic<bool> paused_{false};
  std::function<void(const std::string&)> log_;
  std::unique_ptr<GraphDumper> dumper_;
  // Shared by every graph, as TensorFlow's fuel is by the process.
  std::shared_ptr<std::atomic<int64_t>> fuel_;
  mutable std::mutex mu_;
  XlaJitRecord record_;
  std::shared_ptr<XlaDeviceCompiler> compiler_;
  // The registries the rewritten graphs' function-call ops resolve against; they must outlive
  // the graphs, which the session keeps.
  std::vector<std::shared_ptr<const graph::OpRegistry>> registries_;
};

}  // namespace xlens::cluster
