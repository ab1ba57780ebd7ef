#include "compiler/cluster/mark_for_compilation_pass.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "compiler/cluster/compilability_check.h"
#include "compiler/cluster/const_analysis.h"
#include "compiler/cluster/deadness_analysis.h"
#include "compiler/cluster/graph_cycles.h"
#include "compiler/cluster/resource_operation_safety_analysis.h"
#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::cluster {

using graph::GlobalJitLevel;
using graph::Graph;
using graph::Node;

graph::GlobalJitLevel EffectiveJitLevel(const DebugOptions& flags, GlobalJitLevel session_level) {
  GlobalJitLevel level = session_level == GlobalJitLevel::kDefault ? GlobalJitLevel::kOff
                                                                    : session_level;
  // A CPU-only graph is not a single-GPU graph: the "general" level applies.
  if (flags.tf_xla_auto_jit_general != 0) {
    level = static_cast<GlobalJitLevel>(flags.tf_xla_auto_jit_general);
  }
  return level;
}

MarkForCompilationOptions MarkForCompilationOptionsFor(const DebugOptions& flags,
                                                      GlobalJitLevel session_level,
                                                      bool session_cpu_global_jit) {
  MarkForCompilationOptions options;
  options.global_jit_level = EffectiveJitLevel(flags, session_level);
  options.cpu_global_jit_flag = flags.tf_xla_cpu_global_jit;
  options.session_cpu_global_jit = session_cpu_global_jit;
  options.min_cluster_size = flags.tf_xla_min_cluster_size;
  options.max_cluster_size = flags.tf_xla_max_cluster_size;
  options.fuel->store(flags.tf_xla_clustering_fuel);
  options.ops_to_cluster = flags.tf_xla_ops_to_cluster;
  options.cluster_exclude_ops = flags.tf_xla_cluster_exclude_ops;
  options.deterministic_cluster_names = flags.tf_xla_deterministic_cluster_names;
  options.ignore_deadness_checks = flags.tf_xla_disable_deadness_safety_checks_for_debugging;
  options.ignore_resource_variable_checks =
      flags.tf_xla_disable_resource_variable_safety_checks_for_debugging;
  return options;
}

namespace {

// TensorFlow numbers clusters per graph fingerprint (0 unless deterministic names are asked
// for), process-wide.
struct ClusterSequenceNumbers {
  std::mutex mu;
  std::map<uint64_t, int64_t> next;
  static ClusterSequenceNumbers& Global() {
    static ClusterSequenceNumbers* numbers = new ClusterSequenceNumbers;
    return *numbers;
  }
  int64_t GetNext(uint64_t fingerprint) {
    std::lock_guard<std::mutex> lock(mu);
    return next[fingerprint]++;
  }
};

const std::map<std::string, std::vector<std::string>>& OpGroups() {
  static const auto* groups = new std::map<std::string, std::vector<std::string>>{
      {"PW",
       {"ComplexAbs", "Angle", "Conj", "Abs", "Acos", "Acosh", "Asin", "Atan", "Atanh", "Ceil",
        "Cos", "Cosh", "Sin", "Exp", "Expm1", "Floor", "IsFinite", "IsInf", "IsNan", "Inv",
        "Reciprocal", "Log", "Log1p", "Invert", "LogicalNot", "Ndtri", "Neg", "Rint", "Round",
        "Rsqrt", "Sigmoid", "Sign", "Sinh", "Softplus", "Softsign", "Sqrt", "Square", "Tan",
        "Tanh", "Real", "Imag", "Erf", "Erfc", "Erfinv", "Lgamma", "Digamma", "Add", "AddV2",
        "Sub", "Mul", "Div", "Atan2", "Complex", "DivNoNan", "MulNoNan", "FloorDiv", "Xlogy",
        "Xlog1py", "Xdivy", "FloorMod", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift",
        "RightShift", "LogicalAnd", "LogicalOr", "Mod", "Maximum", "Minimum", "RealDiv",
        "ReciprocalGrad", "RsqrtGrad", "SqrtGrad", "TruncateDiv", "TruncateMod", "Equal",
        "NotEqual", "Greater", "GreaterEqual", "Less", "LessEqual", "SigmoidGrad",
        "SoftplusGrad", "SoftsignGrad", "TanhGrad", "Pow", "SquaredDifference",
        "ApproximateEqual", "AddN", "Bitcast", "Cast", "ClipByValue", "Const", "Empty",
        "Identity", "IdentityN", "Relu", "Relu6", "ReluGrad", "Relu6Grad", "LeakyReluGrad",
        "Elu", "EluGrad", "Selu", "SeluGrad", "Select", "SelectV2", "Transpose",
        "ConjugateTranspose", "_UnaryOpsComposition", "CollectiveReduceV2",
        "CollectiveAssignGroupV2", "PlaceholderWithDefault", "PreventGradient", "StopGradient",
        "Snapshot", "_EagerConst"}},
      {"RED", {"All", "Any", "Min", "Max", "Mean", "Prod", "Sum"}},
      {"PWRED",
       {"ArgMax", "ArgMin", "DiagPart", "Softmax", "SparseSoftmaxCrossEntropyWithLogits",
        "LogSoftmax"}},
      {"REDUCEWINDOW",
       {"ArgMax", "ArgMin", "DiagPart", "Softmax", "SparseSoftmaxCrossEntropyWithLogits",
        "LogSoftmax"}},
      {"REDUCEWINDOWPW", {"BiasAddGrad", "LRN", "LRNGrad"}},
      {"BN",
       {"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3", "_FusedBatchNormEx",
        "FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"}},
      {"Conv", {"_FusedConv2D"}},
      {"SORT", {"TopKV2"}},
      {"MISC",
       {"ApproxTopK", "BroadcastTo", "ExpandDims", "Fill", "NoOp", "Range", "Rank", "Reshape",
        "Shape", "ShapeN", "Size", "Squeeze", "Transpose", "ZerosLike", "OnesLike", "BiasAdd",
        "BroadcastArgs", "BroadcastGradientArgs", "OneHot", "Concat", "ConcatV2", "ConcatOffset",
        "Const", "MirrorPad", "MirrorPadGrad", "Pack", "Pad", "PadV2", "Reverse", "ReverseV2",
        "ReverseSequence", "Slice", "Split", "SplitV", "StridedSlice", "StridedSliceGrad",
        "ResourceStridedSliceAssign", "Tile", "Transpose", "InvertPermutation", "Unpack",
        "DeviceIndex", "TensorStridedSliceUpdate", "XlaConcatND", "XlaSplitND"}}};
  return *groups;
}

std::vector<std::string> SplitComma(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

bool IsIntegerType(graph::DataType t) {
  switch (t) {
    case graph::DT_INT8: case graph::DT_INT16: case graph::DT_INT32: case graph::DT_INT64:
    case graph::DT_UINT8: case graph::DT_UINT16: case graph::DT_UINT32: case graph::DT_UINT64:
      return true;
    default:
      return false;
  }
}

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// One cluster of the contraction (TensorFlow's MarkForCompilationPassImpl::Cluster).
struct Cluster {
  int size = 1;
  int cycles_graph_node_id = 0;
  int first_node_id = 0;  // a member, to find the merged cluster again
  int effective_size = 0;
  bool has_functional_control_flow = false;
  std::string deadness;  // "" when deadness checks are off
  bool is_xla_compile_attr_true = false;
  std::optional<std::string> xla_scope;
  std::vector<int> resource_var_operation_node_ids;

  void Merge(Cluster* other) {
    size += other->size;
    effective_size += other->effective_size;
    has_functional_control_flow |= other->has_functional_control_flow;
    is_xla_compile_attr_true |= other->is_xla_compile_attr_true;
    if (!xla_scope) xla_scope = std::move(other->xla_scope);
    resource_var_operation_node_ids.insert(resource_var_operation_node_ids.end(),
                                           other->resource_var_operation_node_ids.begin(),
                                           other->resource_var_operation_node_ids.end());
    other->resource_var_operation_node_ids.clear();
  }
};

// TensorFlow's one-time notice when auto-jit is asked for on the CPU without enabling XLA:CPU.
void WarnOnceCpuNotClustered() {
  static std::once_flag once;
  std::call_once(once, [] {
    std::fprintf(stderr,
                 "(One-time warning): Not using XLA:CPU for cluster.\n\n"
                 "If you want XLA:CPU, do one of the following:\n\n"
                 " - set the TF_XLA_FLAGS to include \"--tf_xla_cpu_global_jit\", or\n"
                 " - set cpu_global_jit to true on this session's OptimizerOptions, or\n"
                 " - use experimental_jit_scope, or\n"
                 " - use tf.function(jit_compile=True).\n");
  });
}

class Impl {
 public:
  Impl(const MarkForCompilationOptions& options, Graph* graph)
      : options_(options), graph_(graph) {}

  StatusOr<ClusteringResult> Run();

 private:
  Status FindCompilationCandidates();
  Status BuildInitialClusterSet();
  Status RunEdgeContractionLoop();
  void DeclusterNodes();
  Status CreateClusters();

  template <typename Fn>
  StatusOr<bool> ForEachEdgeInPostOrder(Fn fn);
  bool TryToContractEdge(Cluster* from, Cluster* to);
  bool ShouldCompile(bool is_xla_compile_attr_true) const;
  std::string NotCompiledReason() const;

  Cluster* ClusterForNodeId(int id) {
    if (id < 0 || id >= graph_->num_node_ids() || graph_->FindNodeId(id) == nullptr) return nullptr;
    if (cluster_index_[id] < 0) return nullptr;
    return clusters_[Find(id)].get();
  }
  int Find(int id) {
    while (parent_[id] != id) {
      parent_[id] = parent_[parent_[id]];
      id = parent_[id];
    }
    return id;
  }
  std::string Describe(const Cluster& c) const {
    const Node* node = graph_->FindNodeId(c.first_node_id);
    return c.size == 1 ? fmt::format("<{}>", node->name())
                       : fmt::format("<{} + {} others>", node->name(), c.size - 1);
  }
  std::string DescribeCycleNode(int id) {
    if (Cluster* c = ClusterForNodeId(id)) return Describe(*c);
    if (id >= graph_->num_node_ids()) return "<a while loop>";
    const Node* node = graph_->FindNodeId(id);
    return node ? node->name() : "?";
  }
  void NoteFailure(Cluster* from, Cluster* to, std::string reason) {
    failures_.push_back({from->first_node_id, to->first_node_id, std::move(reason)});
  }

  const MarkForCompilationOptions& options_;
  Graph* graph_;
  std::vector<ControlFlowInfo> frames_;
  GraphCycles cycles_;
  std::unique_ptr<DeadnessAnalysis> deadness_;
  std::set<std::pair<int, int>> unsafe_resource_deps_;
  std::vector<Node*> candidates_;  // id order
  std::vector<bool> is_candidate_;
  std::vector<std::unique_ptr<Cluster>> clusters_;  // by the node id that created it
  std::vector<int> cluster_index_;                  // node id -> own cluster slot, -1 if none
  std::vector<int> parent_;                         // union-find over node ids
  std::set<int> declustered_;
  uint64_t fingerprint_ = 0;
  struct Failure {
    int from_node, to_node;
    std::string reason;
  };
  std::vector<Failure> failures_;
  std::map<std::string, std::string> reasons_;  // node -> why it is not a candidate
  std::map<const Cluster*, bool> should_compile_cache_;
};

bool Impl::ShouldCompile(bool is_xla_compile_attr_true) const {
  // XLA_CPU_JIT clusters when the jit level is on and --tf_xla_cpu_global_jit registered it so,
  // or when the session's cpu_global_jit asks, or on explicit request.
  return is_xla_compile_attr_true ||
         (options_.cpu_global_jit_flag && options_.global_jit_level != GlobalJitLevel::kOff) ||
         (!options_.cpu_global_jit_flag && options_.session_cpu_global_jit);
}

std::string Impl::NotCompiledReason() const {
  if (options_.global_jit_level == GlobalJitLevel::kOff) {
    return "auto-clustering is off (the jit level is OFF: set --tf_xla_auto_jit or the session's "
           "global_jit_level) and the node is not in a jit_scope";
  }
  return "XLA_CPU_JIT clusters only on request: auto-clustering on the CPU needs "
         "--tf_xla_cpu_global_jit (or a jit_scope, or a must-compile function)";
}

Status Impl::FindCompilationCandidates() {
  ASSIGN_OR_RETURN(std::vector<bool> compile_time_const, BackwardsConstAnalysis(*graph_));
  std::set<std::string> allowlist;
  for (const std::string& name : ExpandOpsToCluster(options_.ops_to_cluster)) {
    allowlist.insert(name);
  }
  for (const std::string& name : SplitComma(options_.ops_to_cluster)) {
    if (name == "FUSIBLE" || OpGroups().count(name)) continue;
    const graph::OpRegistration* reg = graph_->registry().Find(name);
    if (reg == nullptr || !reg->has_xla_kernel) {
      return Error(fmt::format(
          "The operation '{}' passed to --tf_xla_ops_to_cluster is not supported by XLA.", name));
    }
  }
  OperationFilter filter = OperationFilter::ForAutoClustering();
  for (const std::string& name : SplitComma(options_.cluster_exclude_ops)) {
    if (name != "Where") {
      return Error(fmt::format(
          "The operation '{}' passed to --tf_xla_cluster_exclude_ops is not supported by XLA.",
          name));
    }
    filter.allow_where_op = false;
  }

  is_candidate_.assign(graph_->num_node_ids(), false);
  std::atomic<int64_t>& fuel = *options_.fuel;
  for (Node* node : graph_->op_nodes()) {
    if (fuel.load() <= 0) {
      reasons_[node->name()] = "the clustering fuel ran out (--tf_xla_clustering_fuel)";
      continue;
    }
    const graph::AttrValue* compile = graph::FindAttr(node->attrs(), "_XlaCompile");
    if (compile != nullptr && compile->kind() == graph::AttrValue::Kind::kBool && !compile->b()) {
      reasons_[node->name()] = "kXlaCompileAttr(_XlaCompile) is false.";
      continue;
    }
    bool xla_compile_true = GetBoolAttr(*node, "_XlaCompile") ||
                            (options_.global_jit_level != GlobalJitLevel::kOff &&
                             GetBoolAttr(*node, "_XlaMustCompile"));
    if (!ShouldCompile(xla_compile_true)) {
      reasons_[node->name()] = NotCompiledReason();
      if (options_.global_jit_level != GlobalJitLevel::kOff) WarnOnceCpuNotClustered();
      continue;
    }
    std::string why = UncompilableReason(*node, *graph_, filter);
    if (!why.empty()) {
      reasons_[node->name()] = "uncompilable: " + why;
      continue;
    }
    if (!allowlist.empty() && !allowlist.count(node->type_string())) {
      reasons_[node->name()] = fmt::format(
          "Rejecting TF operation {} as it is not listed in --tf_xla_ops_to_cluster.",
          node->type_string());
      continue;
    }
    if (compile_time_const[node->id()] && node->is_stateful()) {
      // XLA folds must-be-constant values at compile time; a stateful op cannot be folded.
      reasons_[node->name()] =
          "must-be-constant stateful op (its value is needed at compile time, and a stateful op "
          "cannot be folded)";
      continue;
    }
    if (IsIdentity(*node)) {
      bool from_loop_switch = false, drives_consts = false;
      for (const graph::Edge* e : node->in_edges()) {
        if (e->src->IsSwitch() && e->src_output == 1) {
          const graph::Edge* pred = e->src->input_edge(1);
          from_loop_switch |= pred != nullptr && pred->src->IsLoopCond();
        }
      }
      for (const graph::Edge* e : node->out_edges()) {
        drives_consts |= e->IsControlEdge() && IsConstant(*e->dst);
      }
      if (from_loop_switch && drives_consts) {
        reasons_[node->name()] =
            "including it can create dependencies between while loop condition and body "
            "computations with runtime overhead.";
        continue;
      }
    }
    is_candidate_[node->id()] = true;
    candidates_.push_back(node);
    fuel.fetch_sub(1);
  }
  return OkStatus();
}

Status Impl::BuildInitialClusterSet() {
  if (!options_.ignore_resource_variable_checks) {
    ASSIGN_OR_RETURN(auto pairs, ComputeIncompatibleResourceOperationPairs(*graph_));
    unsafe_resource_deps_.insert(pairs.begin(), pairs.end());
  }
  clusters_.resize(graph_->num_node_ids());
  cluster_index_.assign(graph_->num_node_ids(), -1);
  parent_.resize(graph_->num_node_ids());
  for (int i = 0; i < graph_->num_node_ids(); ++i) parent_[i] = i;
  for (Node* node : candidates_) {
    auto cluster = std::make_unique<Cluster>();
    cluster->cycles_graph_node_id = node->id();
    cluster->first_node_id = node->id();
    // Const and Identity enable no optimization by themselves: they do not count toward the
    // minimum size.
    cluster->effective_size = IsIdentity(*node) || IsConstant(*node) ? 0 : 1;
    const std::string& op = node->type_string();
    cluster->has_functional_control_flow =
        op == "While" || op == "StatelessWhile" || op == "If" || op == "StatelessIf";
    if (deadness_) cluster->deadness = deadness_->PredicateFor(*node);
    if (HasResourceInputOrOutput(*node) || MayCallFunction(*node, *graph_)) {
      cluster->resource_var_operation_node_ids.push_back(node->id());
    }
    cluster->is_xla_compile_attr_true =
        GetBoolAttr(*node, "_XlaCompile") ||
        (options_.global_jit_level != GlobalJitLevel::kOff && GetBoolAttr(*node, "_XlaMustCompile"));
    // A user's jit_scope separates clusters only with auto-jit off; with it on, only the internal
    // scopes TensorFlow makes itself do.
    std::string scope = GetStringAttr(*node, options_.global_jit_level != GlobalJitLevel::kOff
                                                 ? "_XlaInternalScope"
                                                 : "_XlaScope");
    if (!scope.empty()) cluster->xla_scope = scope;
    cluster_index_[node->id()] = node->id();
    clusters_[node->id()] = std::move(cluster);
  }
  return OkStatus();
}

template <typename Fn>
StatusOr<bool> Impl::ForEachEdgeInPostOrder(Fn fn) {
  bool changed = false;
  for (int32_t node : cycles_.AllNodesInPostOrder()) {
    Cluster* from = ClusterForNodeId(node);
    if (from == nullptr) continue;
    std::vector<int32_t> successors = cycles_.Successors(from->cycles_graph_node_id);
    for (int32_t to_id : successors) {
      Cluster* to = ClusterForNodeId(to_id);
      if (to == nullptr) continue;
      changed |= fn(from, to);
    }
  }
  return changed;
}

bool Impl::TryToContractEdge(Cluster* from, Cluster* to) {
  if (from->deadness != to->deadness) {
    NoteFailure(from, to,
                fmt::format("the two nodes have mismatching deadness: {} and {}", from->deadness,
                            to->deadness));
    return false;
  }
  if (from->xla_scope && to->xla_scope && *from->xla_scope != *to->xla_scope) {
    NoteFailure(from, to,
                fmt::format("the two nodes have mismatching XLA scopes ({} and {})",
                            *from->xla_scope, *to->xla_scope));
    return false;
  }
  if (from->size + to->size > options_.max_cluster_size) {
    NoteFailure(from, to,
                fmt::format("the new cluster will be larger than the max cluster size ({} > {})",
                            from->size + to->size, options_.max_cluster_size));
    return false;
  }
  if (!options_.ignore_resource_variable_checks) {
    for (int a : from->resource_var_operation_node_ids) {
      for (int b : to->resource_var_operation_node_ids) {
        if (unsafe_resource_deps_.count({a, b})) {
          NoteFailure(from, to,
                      fmt::format("the new cluster would break resource variable semantics ({} "
                                  "must see {}'s update)",
                                  graph_->FindNodeId(b)->name(), graph_->FindNodeId(a)->name()));
          return false;
        }
      }
    }
  }
  int a = from->cycles_graph_node_id, b = to->cycles_graph_node_id;
  std::optional<int32_t> merged = cycles_.ContractEdge(a, b);
  if (!merged) {
    // Name a path that the contraction would have closed into a cycle.
    std::string path;
    for (int32_t succ : cycles_.Successors(a)) {
      if (succ == b) continue;
      std::vector<int32_t> p = cycles_.FindPath(succ, b);
      if (p.empty()) continue;
      p.pop_back();
      for (int32_t id : p) path += (path.empty() ? "" : ",") + DescribeCycleNode(id);
      break;
    }
    NoteFailure(from, to, fmt::format("contracting the edge would create a cycle via [{}]", path));
    return false;
  }
  from->Merge(to);
  from->cycles_graph_node_id = *merged;
  parent_[Find(to->first_node_id)] = Find(from->first_node_id);
  return true;
}

Status Impl::RunEdgeContractionLoop() {
  // Phase 0: shape consumers (Shape, Rank, Size) join their producers first, so a large tensor
  // need not leave its cluster only to have its shape taken.
  RETURN_IF_ERROR(ForEachEdgeInPostOrder([&](Cluster* from, Cluster* to) {
                    if (to->size != 1) return false;
                    const Node* n = graph_->FindNodeId(to->first_node_id);
                    if (!IsShapeConsumerOp(*n)) return false;
                    return TryToContractEdge(from, to);
                  }).status());
  // Phase 1: everything but edges into sink-like NoOps and out of scalar integer counters
  // ("iteration++"), which would otherwise tie weight updates together wrongly.
  RETURN_IF_ERROR(ForEachEdgeInPostOrder([&](Cluster* from, Cluster* to) {
                    if (to->size == 1) {
                      const Node* n = graph_->FindNodeId(to->first_node_id);
                      if (n->type_string() == "NoOp" && n->out_edges().empty()) return false;
                    }
                    if (from->size == 1) {
                      const Node* n = graph_->FindNodeId(from->first_node_id);
                      const std::string& op = n->type_string();
                      if (op == "AssignAddVariableOp" || op == "AssignSubVariableOp") {
                        const graph::AttrValue* dtype = graph::FindAttr(n->attrs(), "dtype");
                        bool integer = dtype != nullptr && IsIntegerType(dtype->type());
                        bool scalar_const = false;
                        for (const graph::Edge* e : n->in_edges()) {
                          if (!e->IsControlEdge() && IsConstant(*e->src)) {
                            const graph::AttrValue* v = graph::FindAttr(e->src->attrs(), "value");
                            scalar_const = v != nullptr &&
                                           v->kind() == graph::AttrValue::Kind::kTensor &&
                                           v->tensor().dims().empty();
                            break;
                          }
                        }
                        if (integer && scalar_const) return false;
                      }
                    }
                    return TryToContractEdge(from, to);
                  }).status());
  // Phase 2: whatever can still be contracted.
  RETURN_IF_ERROR(ForEachEdgeInPostOrder([&](Cluster* from, Cluster* to) {
                    return TryToContractEdge(from, to);
                  }).status());
  return OkStatus();
}

void Impl::DeclusterNodes() {
  for (Node* n : candidates_) {
    Cluster* cluster = ClusterForNodeId(n->id());
    if (n->type_string() != "Fill" && n->type_string() != "SplitV") continue;
    if (n->out_edges().empty()) continue;
    bool used_inside = false;
    for (const graph::Edge* e : n->out_edges()) {
      used_inside |= ClusterForNodeId(e->dst->id()) == cluster;
    }
    if (!used_inside) {
      // Clustered, its result would stay alive from the cluster's end to its uses.
      declustered_.insert(n->id());
      reasons_[n->name()] = fmt::format(
          "{} used only outside its cluster: left to TensorFlow so it is materialized where it "
          "is used",
          n->type_string());
    }
  }
}

Status Impl::CreateClusters() {
  if (options_.before_create_clusters) options_.before_create_clusters(*graph_);
  std::map<const Cluster*, std::string> names;
  for (Node* n : candidates_) {
    Cluster* cluster = ClusterForNodeId(n->id());
    if (declustered_.count(n->id())) continue;
    if (!(cluster->effective_size >= options_.min_cluster_size ||
          cluster->has_functional_control_flow || cluster->is_xla_compile_attr_true)) {
      std::string reason = fmt::format(
          "cluster too small ({} < --tf_xla_min_cluster_size={}; Const and Identity do not "
          "count)",
          cluster->effective_size, options_.min_cluster_size);
      // Why it did not grow: the first edge it could not contract.
      for (const Failure& f : failures_) {
        Cluster* a = ClusterForNodeId(f.from_node);
        Cluster* b = ClusterForNodeId(f.to_node);
        if (a != cluster && b != cluster) continue;
        const Cluster* other = a == cluster ? b : a;
        reason += fmt::format("; could not join {}: {}", Describe(*other), f.reason);
        break;
      }
      reasons_[n->name()] = reason;
      continue;
    }
    std::string& name = names[cluster];
    if (name.empty()) {
      name = "cluster_";
      if (options_.deterministic_cluster_names) name += std::to_string(fingerprint_) + "_";
      name += std::to_string(ClusterSequenceNumbers::Global().GetNext(fingerprint_));
    }
    n->mutable_attrs()["_XlaCluster"] = graph::AttrValue::String(name);
    n->mutable_attrs()["_XlaAlreadyClustered"] = graph::AttrValue::Bool(true);
  }
  return OkStatus();
}

StatusOr<ClusteringResult> Impl::Run() {
  ClusteringResult result;
  for (Node* n : graph_->op_nodes()) {
    // Clustered before (TensorFlow's guard against clustering a cluster's fallback again), or
    // encapsulated already: a call of a compiled cluster's function (encapsulate_subgraphs_after).
    const graph::AttrValue* compiled = graph::FindAttr(n->attrs(), kXlaCompiledKernelAttr);
    if (graph::FindAttr(n->attrs(), "_XlaAlreadyClustered") != nullptr ||
        (compiled != nullptr && compiled->kind() == graph::AttrValue::Kind::kBool &&
         compiled->b() && graph_->library().Find(n->type_string()) != nullptr)) {
      for (Node* m : graph_->op_nodes()) {
        if (auto c = GetXlaClusterForNode(*m)) {
          result.clusters[*c].push_back(m->name());
        } else {
          result.unclustered[m->name()] = "the graph was clustered already";
        }
      }
      return result;
    }
  }
  RETURN_IF_ERROR(FindCompilationCandidates());
  result.had_candidates = !candidates_.empty();
  if (result.had_candidates) {
    ASSIGN_OR_RETURN(frames_, BuildControlFlowInfo(*graph_));
    RETURN_IF_ERROR(CreateCycleDetectionGraph(*graph_, frames_, &cycles_));
    if (!options_.ignore_deadness_checks) {
      ASSIGN_OR_RETURN(deadness_, DeadnessAnalysis::Run(*graph_, frames_));
    }
    if (options_.deterministic_cluster_names) {
      ASSIGN_OR_RETURN(std::string bytes,
                       graph::SerializeGraphDef(graph_->ToGraphDef(), graph::GraphDefFormat::kBinary));
      fingerprint_ = Fnv1a(bytes);
    }
    RETURN_IF_ERROR(BuildInitialClusterSet());
    RETURN_IF_ERROR(RunEdgeContractionLoop());
    DeclusterNodes();
    RETURN_IF_ERROR(CreateClusters());
  }
  for (Node* n : graph_->op_nodes()) {
    if (auto c = GetXlaClusterForNode(*n)) {
      result.clusters[*c].push_back(n->name());
      continue;
    }
    auto it = reasons_.find(n->name());
    result.unclustered[n->name()] =
        it != reasons_.end() ? it->second : "not a compilation candidate";
  }
  return result;
}

}  // namespace

void ResetClusterSequenceNumbers() {
  auto& numbers = ClusterSequenceNumbers::Global();
  std::lock_guard<std::mutex> lock(numbers.mu);
  numbers.next.clear();
}

std::vector<std::string> ExpandOpsToCluster(const std::string& flag) {
  std::set<std::string> ops;
  for (const std::string& item : SplitComma(flag)) {
    if (item == "FUSIBLE") {
      for (const auto& [group, members] : OpGroups()) ops.insert(members.begin(), members.end());
    } else if (auto it = OpGroups().find(item); it != OpGroups().end()) {
      ops.insert(it->second.begin(), it->second.end());
    } else {
      ops.insert(item);
    }
  }
  return {ops.begin(), ops.end()};
}

StatusOr<ClusteringResult> MarkForCompilationPass::Run(Graph* graph) const {
  return Impl(options_, graph).Run();
}

}  // namespace xlens::cluster
