// A TensorFlow-style Session over a graph: Run(feeds, fetches, targets) with variables that keep
// their state between runs. Each distinct signature of Run is rewritten (feeds as _Arg, fetches as
// _Retval, pruned) once and cached with its executor, as TensorFlow's DirectSession does; the
// clustering of the next stage works on exactly those per-signature graphs.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/executor.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/subgraph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

// OptimizerOptions.GlobalJitLevel of TensorFlow's ConfigProto.
enum class GlobalJitLevel { kDefault = 0, kOff = -1, kOn1 = 1, kOn2 = 2 };
std::string_view GlobalJitLevelName(GlobalJitLevel level);  // "DEFAULT", "OFF", "ON_1", "ON_2"
StatusOr<GlobalJitLevel> ParseGlobalJitLevel(std::string_view text);

class ResourceMgr;

// A pass over each signature's rewritten graph before it runs (TensorFlow's
// POST_REWRITE_FOR_EXEC optimization passes, where the XLA clustering runs). It may rewrite the
// graph in place or replace it, and keep state in the session's resources.
using GraphOptimizationPass =
    std::function<Status(std::unique_ptr<Graph>* graph, ResourceMgr* resources)>;

struct SessionOptions {
  // config.graph_options.optimizer_options.global_jit_level (the clustering acts on it).
  GlobalJitLevel global_jit_level = GlobalJitLevel::kDefault;
  // config.graph_options.optimizer_options.cpu_global_jit.
  bool cpu_global_jit = false;
  // Run in order on every per-signature graph (cluster::EnableXlaJit installs the clustering).
  std::vector<GraphOptimizationPass> post_rewrite_passes;
  ThreadPool* pool = nullptr;
  int64_t max_tensor_bytes = int64_t{1} << 34;
  // Fuse convolutions and products with the per-channel ops and activation after them before
  // running op by op (grappler's remapper: compiler/graph/remapper.h).
  bool remap = true;
};

class Session {
 public:
  // The session keeps its own copy of the graph.
  static StatusOr<std::unique_ptr<Session>> Create(const GraphDef& graph_def,
                                                   SessionOptions options = {});
  ~Session();

  // Runs the nodes `fetches` and `targets` need, with `feeds` replacing the fed tensors. Returns
  // one tensor per fetch, in order.
  StatusOr<std::vector<Tensor>> Run(const std::vector<std::pair<std::string, Tensor>>& feeds,
                                    const std::vector<std::string>& fetches,
                                    const std::vector<std::string>& targets = {});

  // Adds nodes (a GraphDef whose nodes may refer to the session's).
  Status Extend(const GraphDef& more);

  const Graph& graph() const { return *graph_; }
  ResourceMgr& resources() { return resources_; }
  const SessionOptions& options() const { return options_; }
  // The rewritten graph of every signature run so far, by RunSignature::Key().
  std::vector<std::pair<std::string, const Graph*>> ExecutedGraphs() const;

 private:
  Session(SessionOptions options);
  // What a fed tensor is checked against on every run: the dtype the graph declares and, for a
  // Placeholder, its shape attr (nullptr: none). Found once per signature, not by name per run.
  struct FeedCheck {
    const Node* node = nullptr;  // nullptr: the name resolves to no node (nothing to check)
    DataType dtype = DT_INVALID;
    const AttrValue* shape = nullptr;
  };
  struct Prepared {
    RunSignature signature;
    std::unique_ptr<Graph> graph;
    std::unique_ptr<Executor> executor;
    std::vector<FeedCheck> checks;  // one per signature.feeds
  };
  // The last Run's call as given (feeds in the caller's order) and where each feed goes in its
  // prepared signature's order: a loop that runs the same call again (a training loop; a
  // function with hundreds of captured variables fed by handle) skips the key and the name
  // matching, which took longer than the step on small graphs.
  struct LastCall {
    std::vector<std::string> feeds, fetches, targets;
    Prepared* prepared = nullptr;
    std::vector<size_t> source;  // source[i]: the caller's feed that prepared feed i takes
  };
  StatusOr<Prepared*> Prepare(const RunSignature& signature);

  SessionOptions options_;
  std::unique_ptr<Graph> graph_;
  ResourceMgr resources_;
  std::map<std::string, KernelState> kernel_state_;
  std::vector<std::unique_ptr<Prepared>> prepared_;  // in first-run order
  std::map<std::string, Prepared*> by_key_;
  std::mutex last_call_mu_;  // Run may be called from several threads, as TensorFlow's
  LastCall last_call_;
};

}  // namespace xlens::graph
