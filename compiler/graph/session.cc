#include "compiler/graph/session.h"

#include <algorithm>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "compiler/graph/lower_functional_ops.h"
#include "compiler/graph/remapper.h"

namespace xlens::graph {

std::string_view GlobalJitLevelName(GlobalJitLevel level) {
  switch (level) {
    case GlobalJitLevel::kDefault: return "DEFAULT";
    case GlobalJitLevel::kOff: return "OFF";
    case GlobalJitLevel::kOn1: return "ON_1";
    case GlobalJitLevel::kOn2: return "ON_2";
  }
  return "DEFAULT";
}

StatusOr<GlobalJitLevel> ParseGlobalJitLevel(std::string_view text) {
  if (text == "DEFAULT" || text == "0") return GlobalJitLevel::kDefault;
  if (text == "OFF" || text == "-1") return GlobalJitLevel::kOff;
  if (text == "ON_1" || text == "1") return GlobalJitLevel::kOn1;
  if (text == "ON_2" || text == "2") return GlobalJitLevel::kOn2;
  return Status::Error("unknown global_jit_level '" + std::string(text) +
                       "': expected DEFAULT, OFF, ON_1 or ON_2");
}

Session::Session(SessionOptions options) : options_(options) {}
Session::~Session() = default;

StatusOr<std::unique_ptr<Session>> Session::Create(const GraphDef& graph_def,
                                                   SessionOptions options) {
  std::unique_ptr<Session> session(new Session(options));
  ASSIGN_OR_RETURN(session->graph_, Graph::FromGraphDef(graph_def));
  return session;
}

Status Session::Extend(const GraphDef& more) {
  GraphDef all = graph_->ToGraphDef();
  for (const NodeDef& n : more.node) all.node.push_back(n);
  for (const FunctionDef& f : more.library.function) all.library.function.push_back(f);
  ASSIGN_OR_RETURN(std::unique_ptr<Graph> g, Graph::FromGraphDef(all));
  graph_ = std::move(g);
  prepared_.clear();
  by_key_.clear();
  std::lock_guard<std::mutex> lock(last_call_mu_);
  last_call_ = LastCall();
  return OkStatus();
}

StatusOr<Session::Prepared*> Session::Prepare(const RunSignature& signature) {
  std::string key = signature.Key();
  auto it = by_key_.find(key);
  if (it != by_key_.end()) return it->second;
  auto prepared = std::make_unique<Prepared>();
  prepared->signature = signature;
  // TF2 control flow and function calls become v1 control flow and inlined bodies first, as
  // TensorFlow's pre-placement LowerFunctionalOpsPass does before any XLA pass: the per-signature
  // graph the executor and the clustering see has no If, While or call left (but those kept on
  // purpose).
  const Graph* source = graph_.get();
  std::unique_ptr<Graph> lowered;
  if (HasFunctionalOpsToLower(*graph_)) {
    lowered = std::make_unique<Graph>(&graph_->registry());
    RETURN_IF_ERROR(CopyGraph(*graph_, lowered.get()));
    RETURN_IF_ERROR(LowerFunctionalOps(lowered.get()));
    source = lowered.get();
  }
  ASSIGN_OR_RETURN(prepared->graph, RewriteGraphForExecution(*source, signature));
  for (const GraphOptimizationPass& pass : options_.post_rewrite_passes) {
    RETURN_IF_ERROR(pass(&prepared->graph, &resources_));
  }
  // Grappler's remapper, last: what the clustering left to run op by op.
  if (options_.remap) RETURN_IF_ERROR(RemapGraph(prepared->graph.get()).status());
  ExecutorOptions eo;
  eo.resources = &resources_;
  eo.pool = options_.pool;
  eo.kernel_state = &kernel_state_;
  eo.max_tensor_bytes = options_.max_tensor_bytes;
  ASSIGN_OR_RETURN(prepared->executor, Executor::Create(prepared->graph.get(), eo));
  for (const std::string& feed : signature.feeds) {
    FeedCheck check;
    auto id = ParseTensorName(feed);
    if (const Node* n = id.ok() ? graph_->FindNode(id->node) : nullptr) {
      check.node = n;
      check.dtype = RemoveRefType(n->output_type(id->index));
      if (n->type_string() == "Placeholder") {
        const AttrValue* s = FindAttr(n->attrs(), "shape");
        if (s && s->kind() == AttrValue::Kind::kShape) check.shape = s;
      }
    }
    prepared->checks.push_back(check);
  }
  Prepared* raw = prepared.get();
  by_key_[key] = raw;
  prepared_.push_back(std::move(prepared));
  return raw;
}

StatusOr<std::vector<Tensor>> Session::Run(
    const std::vector<std::pair<std::string, Tensor>>& feeds,
    const std::vector<std::string>& fetches, const std::vector<std::string>& targets) {
  Prepared* prepared = nullptr;
  std::vector<size_t> source;  // per prepared feed: the index of the caller's feed it takes
  {
    std::lock_guard<std::mutex> lock(last_call_mu_);
    const bool same_call =
        last_call_.prepared != nullptr && last_call_.feeds.size() == feeds.size() &&
        last_call_.fetches == fetches && last_call_.targets == targets &&
        std::equal(feeds.begin(), feeds.end(), last_call_.feeds.begin(),
                   [](const auto& feed, const std::string& name) { return feed.first == name; });
    if (!same_call) {
      RunSignature signature;
      for (const auto& feed : feeds) signature.feeds.push_back(feed.first);
      signature.fetches = fetches;
      signature.targets = targets;
      ASSIGN_OR_RETURN(Prepared * p, Prepare(signature));
      // The cache key sorts feeds; the _Arg indices follow the first run's order, so map the
      // arguments onto the prepared graph's order (a name fed twice: its last value).
      std::unordered_map<std::string_view, size_t> last;
      for (size_t j = 0; j < feeds.size(); ++j) last[feeds[j].first] = j;
      LastCall call;
      call.prepared = p;
      for (const std::string& name : p->signature.feeds) {
        auto it = last.find(name);
        call.source.push_back(it == last.end() ? feeds.size() : it->second);
      }
      call.feeds = std::move(signature.feeds);
      call.fetches = fetches;
      call.targets = targets;
      last_call_ = std::move(call);
    }
    prepared = last_call_.prepared;
    source = last_call_.source;
  }
  std::vector<Tensor> ordered(prepared->signature.feeds.size());
  for (size_t i = 0; i < ordered.size(); ++i) {
    if (source[i] < feeds.size()) ordered[i] = feeds[source[i]].second;
  }
  // Feeds must match what the graph declares (dtype; a Placeholder's shape).
  for (size_t i = 0; i < prepared->checks.size(); ++i) {
    const FeedCheck& check = prepared->checks[i];
    if (check.node == nullptr) continue;
    if (ordered[i].dtype() != check.dtype) {
      return Status::Error("feed '" + prepared->signature.feeds[i] + "' is " +
                           DataTypeName(ordered[i].dtype()) + ", the graph expects " +
                           DataTypeName(check.dtype));
    }
    if (check.shape != nullptr && !check.shape->shape().IsCompatibleWith(ordered[i].dims())) {
      return Status::Error("feed '" + prepared->signature.feeds[i] + "' has shape " +
                           DimsToString(ordered[i].dims()) + ", the placeholder's shape is " +
                           check.shape->shape().ToString());
    }
  }
  return prepared->executor->Run(ordered);
}

std::vector<std::pair<std::string, const Graph*>> Session::ExecutedGraphs() const {
  std::vector<std::pair<std::string, const Graph*>> out;
  for (const auto& p : prepared_) out.emplace_back(p->signature.Key(), p->graph.get());
  return out;
}

}  // namespace xlens::graph
