#include "compiler/graph/graph_dot.h"

#include <algorithm>
#include <deque>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

namespace xlens::graph {
namespace {

// Labels quote names from the file: bounded, escaped for a DOT string, no raw control bytes.
constexpr size_t kMaxLabelBytes = 200;

std::string Quote(std::string_view s) {
  std::string out = "\"";
  size_t n = 0;
  for (unsigned char c : s) {
    if (++n > kMaxLabelBytes) {
      out += "...";
      break;
    }
    if (c == '\n') {
      out += "\\n";  // DOT's line break inside a label
    } else if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      out += '?';
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

struct FamilyStyle {
  const char* family;
  const char* shape;
  const char* style;
  const char* fill;
};

// TensorBoard's palette, roughly: one fill per family so a training graph's forward pass,
// gradients and updates read apart at a glance.
constexpr FamilyStyle kStyles[] = {
    {"math", "ellipse", "filled", "#bbdefb"},
    {"matrix", "ellipse", "filled", "#f8bbd0"},
    {"reduction", "ellipse", "filled", "#d1c4e9"},
    {"array", "ellipse", "filled", "#fff9c4"},
    {"nn", "ellipse", "filled", "#c5cae9"},
    {"random", "ellipse", "filled", "#b2dfdb"},
    {"state", "ellipse", "filled", "#ffe0b2"},
    {"control", "box", "filled", "#ffccbc"},
    {"const", "box", "filled", "#eeeeee"},
    {"feed", "invhouse", "filled", "#c8e6c9"},
    {"variable", "cylinder", "filled", "#ffcc80"},
    {"result", "house", "filled", "#c8e6c9"},
    {"noop", "octagon", "dashed", "#ffffff"},
    {"other", "ellipse", "filled", "#f5f5f5"},
};

const FamilyStyle& StyleOf(const std::string& family) {
  for (const FamilyStyle& s : kStyles) {
    if (family == s.family) return s;
  }
  return kStyles[std::size(kStyles) - 1];
}

bool Contains(std::initializer_list<std::string_view> ops, std::string_view op) {
  return std::find(ops.begin(), ops.end(), op) != ops.end();
}

}  // namespace

std::string OpFamily(const std::string& op) {
  if (op == "Const" || op == "HostConst") return "const";
  if (op == "Placeholder" || op == "PlaceholderWithDefault" || op == "_Arg") return "feed";
  if (op == "_Retval") return "result";
  if (op == "NoOp") return "noop";
  if (Contains({"VarHandleOp", "VariableV2", "Variable", "_VarHandlesOp"}, op)) return "variable";
  if (Contains({"Switch", "Merge", "Enter", "Exit", "NextIteration", "LoopCond", "If",
                "StatelessIf", "While", "StatelessWhile", "PartitionedCall",
                "StatefulPartitionedCall", "RefSwitch", "RefEnter", "RefMerge",
                "ControlTrigger", "Case", "StatelessCase"},
               op)) {
    return "control";
  }
  if (op.starts_with("Apply") || op.starts_with("ResourceApply") || op.starts_with("Assign") ||
      Contains({"ReadVariableOp", "VarIsInitializedOp", "IsVariableInitialized",
                "DestroyResourceOp", "ResourceGather", "ResourceScatterAdd", "ScatterAdd",
                "ScatterUpdate", "ResourceScatterUpdate"},
               op)) {
    return "state";
  }
  if (op.starts_with("Random") || op.starts_with("Stateless") || op.starts_with("Truncated") ||
      Contains({"Multinomial", "ParameterizedTruncatedNormal"}, op)) {
    return "random";
  }
  if (Contains({"MatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "Conv2D",
                "Conv2DBackpropInput", "Conv2DBackpropFilter", "DepthwiseConv2dNative", "Einsum",
                "Conv3D", "SparseMatMul"},
               op)) {
    return "matrix";
  }
  if (Contains({"Sum", "Mean", "Prod", "Max", "Min", "All", "Any", "ArgMax", "ArgMin",
                "EuclideanNorm", "Cumsum", "Cumprod"},
               op)) {
    return "reduction";
  }
  if (Contains({"Softmax", "LogSoftmax", "SparseSoftmaxCrossEntropyWithLogits",
                "SoftmaxCrossEntropyWithLogits", "Relu", "Relu6", "Elu", "Selu", "Gelu",
                "LeakyRelu", "ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "LeakyReluGrad",
                "BiasAdd", "BiasAddGrad", "BiasAddV1", "MaxPool", "AvgPool", "MaxPoolGrad",
                "AvgPoolGrad", "FusedBatchNorm", "FusedBatchNormV3", "FusedBatchNormGradV3",
                "L2Loss", "InTopK", "InTopKV2", "TopKV2", "Softplus", "Softsign",
                "SoftplusGrad", "SoftsignGrad", "LRN"},
               op)) {
    return "nn";
  }
  if (Contains({"Reshape", "Shape", "ShapeN", "Size", "Rank", "ExpandDims", "Squeeze",
                "Transpose", "ConcatV2", "Concat", "Pack", "Unpack", "Slice", "StridedSlice",
                "StridedSliceGrad", "Gather", "GatherV2", "GatherNd", "ScatterNd", "Tile",
                "Fill", "ZerosLike", "OnesLike", "Identity", "IdentityN", "StopGradient",
                "PreventGradient", "Split", "SplitV", "Pad", "PadV2", "MirrorPad", "Reverse",
                "ReverseV2", "BroadcastTo", "BroadcastGradientArgs", "Range", "OneHot", "Where",
                "Cast", "Bitcast", "Snapshot", "ConcatOffset", "InvertPermutation", "Unique",
                "Select", "SelectV2", "CheckNumerics", "Assert", "Print", "PrintV2", "SpaceToDepth",
                "DepthToSpace", "Empty", "MatrixDiag", "MatrixBandPart", "DynamicStitch",
                "EnsureShape", "LinSpace"},
               op)) {
    return "array";
  }
  // The rest of what graphs are made of is elementwise arithmetic (Add, Mul, Exp, Square, Less,
  // LogicalAnd, ...): TensorFlow's math_ops.
  return "math";
}

namespace {

class GraphDotWriter {
 public:
  GraphDotWriter(const Graph& graph, const GraphDotOptions& options)
      : graph_(graph), options_(options) {}

  StatusOr<std::string> Write() {
    std::vector<Node*> nodes = graph_.op_nodes();
    RETURN_IF_ERROR(ChooseNodes(nodes));
    std::string title = options_.title.empty() ? "graph" : options_.title;
    out_ = "digraph " + Quote(title) + " {\n";
    out_ += fmt::format(
        "  graph [label={}, labelloc=t, rankdir=TB, fontname=\"Helvetica\", fontsize=14];\n",
        Quote(fmt::format("{} ({} nodes)", title, nodes.size())));
    out_ += "  node [fontname=\"Helvetica\", fontsize=10, color=\"#616161\", "
            "margin=\"0.08,0.03\"];\n";
    out_ += "  edge [fontname=\"Helvetica\", fontsize=8, color=\"#757575\", arrowsize=0.6];\n";
    for (Node* n : nodes) {
      if (shown_.count(n->id())) EmitNode(*n);
    }
    for (Node* n : nodes) {
      if (shown_.count(n->id())) EmitEdgesInto(*n);
    }
    if (hidden_ > 0) EmitCut();
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  // Every node when the graph is small and no radius is asked; otherwise the nodes nearest to the
  // centre (edges taken both ways), up to the radius and max_nodes.
  Status ChooseNodes(const std::vector<Node*>& nodes) {
    const int total = static_cast<int>(nodes.size());
    const bool capped = options_.max_nodes > 0 && total > options_.max_nodes;
    if (!options_.center.empty()) {
      center_ = graph_.FindNode(options_.center);
      if (center_ == nullptr) {
        return Status::Error(fmt::format("--node: no node named {} in the graph",
                                         Quote(options_.center)));
      }
    }
    if (options_.radius < 0 && !capped) {
      for (Node* n : nodes) shown_.insert(n->id());
      return OkStatus();
    }
    if (center_ == nullptr) {
      auto order = graph_.TopologicalOrder();
      if (order.ok() && !order->empty()) center_ = order->back();
      if (center_ == nullptr && !nodes.empty()) center_ = nodes.back();
      if (center_ == nullptr) return OkStatus();
    }
    std::unordered_map<int, int> distance = {{center_->id(), 0}};
    std::deque<Node*> queue = {center_};
    while (!queue.empty()) {
      Node* n = queue.front();
      queue.pop_front();
      if (options_.max_nodes > 0 && static_cast<int>(shown_.size()) >= options_.max_nodes) break;
      shown_.insert(n->id());
      const int d = distance[n->id()];
      if (options_.radius >= 0 && d >= options_.radius) continue;
      auto visit = [&](Node* m) {
        if (m->IsOp() && distance.emplace(m->id(), d + 1).second) queue.push_back(m);
      };
      for (const Edge* e : n->in_edges()) visit(e->src);
      for (const Edge* e : n->out_edges()) visit(e->dst);
    }
    hidden_ = total - static_cast<int>(shown_.size());
    return OkStatus();
  }

  static std::string Id(const Node& n) { return fmt::format("n{}", n.id()); }

  void EmitNode(const Node& n) {
    const std::string family = OpFamily(n.type_string());
    const FamilyStyle& style = StyleOf(family);
    std::string label = n.name() + "\n" + n.type_string();
    if (n.type_string() == "Const") {
      if (const AttrValue* v = FindAttr(n.attrs(), "value");
          v != nullptr && v->kind() == AttrValue::Kind::kTensor && v->tensor().IsInitialized() &&
          v->tensor().num_elements() <= 4) {
        label += " " + v->tensor().DebugString(4);
      }
    }
    std::string extra;
    if (&n == center_) extra = ", penwidth=3, color=\"#d32f2f\"";
    if (!n.has_kernel()) extra += ", fontcolor=\"#b71c1c\"";
    std::string tooltip = n.type_string();
    if (!n.requested_device().empty()) tooltip += " on " + n.requested_device();
    out_ += fmt::format("  {} [label={}, shape={}, style=\"{}\", fillcolor=\"{}\", class=\"{}\", "
                        "tooltip={}{}];\n",
                        Id(n), Quote(label), style.shape, style.style, style.fill, family,
                        Quote(tooltip), extra);
  }

  std::string EdgeLabel(const Edge& e) const {
    const Node& src = *e.src;
    std::string label;
    if (src.num_outputs() > 1) label = fmt::format("{}: ", e.src_output);
    if (e.src_output < src.num_outputs()) {
      label += DataTypeName(RemoveRefType(src.output_type(e.src_output)));
      if (e.src_output < static_cast<int>(src.output_shapes().size())) {
        label += " " + src.output_shapes()[e.src_output].ToString();
      }
    }
    return label;
  }

  void EmitEdgesInto(const Node& dst) {
    for (const Edge* e : dst.in_edges()) {
      if (!e->src->IsOp()) continue;
      if (!shown_.count(e->src->id())) {
        ++cut_inputs_[dst.id()];
        continue;
      }
      if (e->IsControlEdge()) {
        out_ += fmt::format("  {} -> {} [style=dashed, color=\"#9e9e9e\", class=\"control\"];\n",
                            Id(*e->src), Id(dst));
      } else {
        out_ += fmt::format("  {} -> {} [label={}];\n", Id(*e->src), Id(dst),
                            Quote(EdgeLabel(*e)));
      }
    }
    for (const Edge* e : dst.out_edges()) {
      if (e->dst->IsOp() && !shown_.count(e->dst->id())) ++cut_users_[dst.id()];
    }
  }

  void EmitCut() {
    std::set<int> ids;
    for (const auto& [id, n] : cut_inputs_) ids.insert(id);
    for (const auto& [id, n] : cut_users_) ids.insert(id);
    for (int id : ids) {
      std::string what;
      if (int k = cut_inputs_[id]; k > 0) what += fmt::format("{} input{}", k, k == 1 ? "" : "s");
      if (int k = cut_users_[id]; k > 0) {
        what += fmt::format("{}{} user{}", what.empty() ? "" : ", ", k, k == 1 ? "" : "s");
      }
      out_ += fmt::format(
          "  cut{} [label={}, shape=box, style=\"rounded,dashed\", color=\"#9e9e9e\", "
          "fontsize=8, class=\"cut\"];\n  n{} -> cut{} [style=dashed, color=\"#9e9e9e\", "
          "arrowhead=none];\n",
          id, Quote("not shown: " + what), id, id);
    }
    std::string which =
        options_.radius >= 0
            ? fmt::format("showing the {} nodes within {} edges of '{}'", shown_.size(),
                          options_.radius, center_ ? center_->name() : "")
            : fmt::format("showing the {} nodes nearest to '{}' (at most {}); pick another with "
                          "--node NAME --radius N",
                          shown_.size(), center_ ? center_->name() : "", options_.max_nodes);
    out_ += fmt::format(
        "  cut_note [shape=note, style=filled, fillcolor=\"#fff9c4\", class=\"cut\", "
        "label={}];\n",
        Quote(fmt::format("{} nodes not shown\n{}", hidden_, which)));
  }

  const Graph& graph_;
  const GraphDotOptions& options_;
  Node* center_ = nullptr;
  std::set<int> shown_;
  int hidden_ = 0;
  std::unordered_map<int, int> cut_inputs_, cut_users_;
  std::string out_;
};

}  // namespace

StatusOr<std::string> GraphToDot(const Graph& graph, const GraphDotOptions& options) {
  return GraphDotWriter(graph, options).Write();
}

}  // namespace xlens::graph
