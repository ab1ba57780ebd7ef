#include "compiler/graph/remapper.h"

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/executor.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph {

bool ComputesConstant(const Node& node) {
  // Depth-first over the inputs, within a budget: a constant subexpression of a model is a few
  // nodes (a batch norm's Rsqrt of its variance plus epsilon, times its scale).
  constexpr int kBudget = 256;
  std::vector<const Node*> stack{&node};
  std::set<int> seen{node.id()};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->type_string() == "Const") {
      for (const Edge* e : n->in_edges()) {
        if (e->src->IsOp()) return false;  // a Const under a control input (a loop's pivot)
      }
      continue;
    }
    if (!IsFoldableKernel(*n)) return false;
    bool has_input = false;
    for (const Edge* e : n->in_edges()) {
      if (!e->src->IsOp()) continue;
      has_input = true;
      if (seen.insert(e->src->id()).second) {
        if (static_cast<int>(seen.size()) > kBudget) return false;
        stack.push_back(e->src);
      }
    }
    if (!has_input) return false;
  }
  return true;
}

namespace {

using Output = std::pair<Node*, int>;

bool OneDataConsumer(const Node& n) {
  return n.out_edges().size() == 1 && !n.out_edges()[0]->IsControlEdge();
}

bool IsFloat(const Node& n) {
  const AttrValue* t = FindAttr(n.attrs(), "T");
  return t != nullptr && t->type() == DT_FLOAT;
}

bool Nhwc(const Node& n) {
  const AttrValue* f = FindAttr(n.attrs(), "data_format");
  return f == nullptr || f->s() == "NHWC";
}

const PartialShape& ShapeOf(const Output& o) { return o.first->output_shapes()[o.second]; }

// A value that broadcasts along the channels (the last of `rank` dimensions) only: [C], [1,..,C],
// a scalar, or [1,..,1].
bool PerChannel(const PartialShape& s, int64_t channels, int64_t rank) {
  if (s.unknown_rank() || !s.IsFullyDefined() || s.rank() > rank) return false;
  for (int64_t i = 0; i + 1 < s.rank(); ++i) {
    if (s.dim(i) != 1) return false;
  }
  return s.rank() == 0 || s.dim(s.rank() - 1) == channels || s.dim(s.rank() - 1) == 1;
}

// A side input of the output's shape: the same rank and the same dims where known (a fed
// input's batch is unknown in the graph that runs; the kernel adds a side input that turns out
// to broadcast as the Add would).
bool SameShapeAsFarAsKnown(const PartialShape& a, const PartialShape& b) {
  if (a.unknown_rank() || b.unknown_rank() || a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i) {
    if (a.dim(i) != b.dim(i)) return false;
  }
  return true;
}

bool IsActivation(const std::string& op) {
  return op == "Relu" || op == "Relu6" || op == "Elu" || op == "LeakyRelu" || op == "Tanh" ||
         op == "Sigmoid";
}

// One per-channel term of the epilogue before the side input: added to, subtracted from or
// multiplied into the bias (a multiplier also into the filter).
struct Term {
  enum class Kind { kAdd, kSub, kMul } kind;
  Output value;
};

struct Match {
  Node* root = nullptr;
  std::vector<Node*> chain;  // after the root, in order; the last one's name is kept
  std::vector<Term> terms;
  Output side{nullptr, 0};
  std::string activation;
  float alpha = 0.2f;
};

class Remapper {
 public:
  explicit Remapper(Graph* graph) : graph_(graph) {}

  // The longest chain TensorFlow's remapper would fuse after `root`, or an empty one.
  Match MatchAfter(Node* root) const {
    Match m;
    m.root = root;
    const bool conv = root->type_string() == "Conv2D";
    if (!IsFloat(*root) || (conv && !Nhwc(*root)) || root->num_outputs() != 1) return m;
    const PartialShape& out = root->output_shapes()[0];
    if (out.unknown_rank() || out.rank() < 1 || out.dim(out.rank() - 1) < 0) return m;
    const int64_t channels = out.dim(out.rank() - 1), rank = out.rank();
    const AttrValue* tb = FindAttr(root->attrs(), "transpose_b");
    const Output filter = root->input_node(1);
    const bool foldable_filter = filter.first != nullptr && (conv || (tb != nullptr && !tb->b())) &&
                                 ComputesConstant(*filter.first);
    Node* cur = root;
    while (OneDataConsumer(*cur)) {
      const Edge* e = cur->out_edges()[0];
      Node* next = e->dst;
      if (!next->IsOp() || next->requested_device() != root->requested_device() || !IsFloat(*next) ||
          next->num_outputs() != 1) {
        break;
      }
      const std::string& op = next->type_string();
      const int slot = e->dst_input;
      const bool before_side = m.side.first == nullptr;
      Output other{nullptr, 0};
      if (next->num_inputs() == 2) other = next->input_node(1 - slot);
      if (IsActivation(op)) {
        if (op == "LeakyRelu") {
          if (const AttrValue* a = FindAttr(next->attrs(), "alpha")) m.alpha = a->f();
        }
        m.activation = op;
        m.chain.push_back(next);
        break;
      }
      if (other.first == nullptr || !before_side) break;
      const PartialShape& shape = ShapeOf(other);
      if (op == "BiasAdd" && slot == 0 && Nhwc(*next) && shape.rank() == 1 && shape.dim(0) == channels) {
        m.terms.push_back({Term::Kind::kAdd, other});
      } else if ((op == "AddV2" || op == "Add") && PerChannel(shape, channels, rank) &&
                 shape.rank() >= 1 && shape.dim(shape.rank() - 1) == channels) {
        m.terms.push_back({Term::Kind::kAdd, other});
      } else if ((op == "AddV2" || op == "Add") && SameShapeAsFarAsKnown(shape, out) &&
                 SameShapeAsFarAsKnown(next->output_shapes()[0], out)) {
        m.side = other;
      } else if (op == "Sub" && slot == 0 && PerChannel(shape, channels, rank) && shape.rank() >= 1 &&
                 shape.dim(shape.rank() - 1) == channels) {
        m.terms.push_back({Term::Kind::kSub, other});
      } else if (op == "Mul" && foldable_filter && PerChannel(shape, channels, rank) &&
                 (conv || shape.rank() <= 2) && ComputesConstant(*other.first)) {
        m.terms.push_back({Term::Kind::kMul, other});
      } else {
        break;
      }
      m.chain.push_back(next);
      cur = next;
    }
    return m;
  }

  StatusOr<Node*> Add(const std::string& op, const std::string& name_hint, const std::string& device,
                      std::vector<Output> inputs, AttrMap attrs) {
    NodeDef def;
    def.name = graph_->NewName(name_hint);
    def.op = op;
    def.device = device;
    def.attr = std::move(attrs);
    for (const Output& in : inputs) {
      def.input.push_back(in.second == 0 ? in.first->name() : in.first->name() + ":" + std::to_string(in.second));
    }
    ASSIGN_OR_RETURN(Node * node, graph_->AddNode(std::move(def)));
    for (size_t i = 0; i < inputs.size(); ++i) graph_->AddEdge(inputs[i].first, inputs[i].second, node, static_cast<int>(i));
    // A new constant runs where the chain does: inside a loop's frame, under a control input
    // from the chain's first input, as TensorFlow anchors a loop body's constants to its pivot.
    if (inputs.empty() && anchor_ != nullptr) graph_->AddControlEdge(anchor_, node);
    // The rest of the rewrite reads these shapes (the fused node's own inference among them):
    // a node whose shapes cannot be inferred is an error here, not an unknown shape later.
    RETURN_IF_ERROR(graph_->InferNodeShapes(node));
    return node;
  }

  StatusOr<Node*> Binary(const std::string& op, const std::string& hint, const std::string& device,
                         Output a, Output b) {
    return Add(op, hint, device, {a, b}, {{"T", AttrValue::Type(DT_FLOAT)}});
  }

  Status Rewrite(const Match& m, RemapperStats& stats) {
    Node* root = m.root;
    anchor_ = root->input_node(0).first;
    Node* last = m.chain.back();
    const bool conv = root->type_string() == "Conv2D";
    const std::string name = last->name(), device = root->requested_device();
    const std::string prefix = name + "/remapped";
    const PartialShape& out = root->output_shapes()[0];
    const int64_t channels = out.dim(out.rank() - 1);
    // The filter with the multipliers folded in, and the bias the terms add up to.
    Output filter = root->input_node(1);
    Output bias{nullptr, 0};
    bool bias_is_vector = true;
    for (const Term& t : m.terms) {
      const PartialShape& s = ShapeOf(t.value);
      switch (t.kind) {
        case Term::Kind::kAdd:
          if (bias.first == nullptr) {
            bias = t.value;
            bias_is_vector = s.rank() == 1 && s.dim(0) == channels;
          } else {
            ASSIGN_OR_RETURN(Node * n, Binary("AddV2", prefix + "/bias", device, bias, t.value));
            bias = {n, 0};
            bias_is_vector = bias_is_vector && s.rank() == 1;
          }
          break;
        case Term::Kind::kSub:
          if (bias.first == nullptr) {
            ASSIGN_OR_RETURN(Node * n, Add("Neg", prefix + "/bias", device, {t.value}, {{"T", AttrValue::Type(DT_FLOAT)}}));
            bias = {n, 0};
            bias_is_vector = s.rank() == 1 && s.dim(0) == channels;
          } else {
            ASSIGN_OR_RETURN(Node * n, Binary("Sub", prefix + "/bias", device, bias, t.value));
            bias = {n, 0};
            bias_is_vector = bias_is_vector && s.rank() == 1;
          }
          break;
        case Term::Kind::kMul: {
          ASSIGN_OR_RETURN(Node * w, Binary("Mul", prefix + "/filter", device, filter, t.value));
          filter = {w, 0};
          ++stats.folded_scales;
          if (bias.first != nullptr) {
            ASSIGN_OR_RETURN(Node * n, Binary("Mul", prefix + "/bias", device, bias, t.value));
            bias = {n, 0};
            bias_is_vector = bias_is_vector && s.rank() == 1;
          }
          break;
        }
      }
    }
    if (bias.first == nullptr) {
      Tensor zeros(DT_FLOAT, {channels});
      ASSIGN_OR_RETURN(Node * n, Add("Const", prefix + "/bias", device, {},
                                     {{"dtype", AttrValue::Type(DT_FLOAT)}, {"value", AttrValue::TensorValue(zeros)}}));
      bias = {n, 0};
      bias_is_vector = true;
    }
    if (!bias_is_vector) {
      ASSIGN_OR_RETURN(Node * shape, Add("Const", prefix + "/bias_shape", device, {},
                                         {{"dtype", AttrValue::Type(DT_INT32)},
                                          {"value", AttrValue::TensorValue(Tensor::Vector<int32_t>(DT_INT32, {static_cast<int32_t>(channels)}))}}));
      ASSIGN_OR_RETURN(Node * n, Add("Reshape", prefix + "/bias", device, {bias, {shape, 0}},
                                     {{"T", AttrValue::Type(DT_FLOAT)}, {"Tshape", AttrValue::Type(DT_INT32)}}));
      bias = {n, 0};
    }
    AttrListValue fused_ops;
    fused_ops.s.push_back("BiasAdd");
    if (m.side.first != nullptr) fused_ops.s.push_back("Add");
    if (!m.activation.empty()) fused_ops.s.push_back(m.activation);
    const int num_args = m.side.first != nullptr ? 2 : 1;
    AttrMap attrs;
    for (const char* a : conv ? std::vector<const char*>{"T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu"}
                              : std::vector<const char*>{"T", "transpose_a", "transpose_b"}) {
      if (const AttrValue* v = FindAttr(root->attrs(), a)) attrs[a] = *v;
    }
    attrs["num_args"] = AttrValue::Int(num_args);
    if (conv) {
      AttrListValue types;
      types.type.assign(num_args, DT_FLOAT);
      attrs["TArgs"] = AttrValue::List(types);
    }
    attrs["fused_ops"] = AttrValue::List(fused_ops);
    attrs["leakyrelu_alpha"] = AttrValue::Float(m.alpha);
    std::vector<Output> inputs{root->input_node(0), filter, bias};
    if (m.side.first != nullptr) inputs.push_back(m.side);
    // What the chain's nodes were wired to: control inputs, and the last one's consumers.
    std::vector<Node*> control_in;
    for (Node* n : m.chain) {
      for (const Edge* e : n->in_edges()) {
        if (e->IsControlEdge()) control_in.push_back(e->src);
      }
    }
    for (const Edge* e : root->in_edges()) {
      if (e->IsControlEdge()) control_in.push_back(e->src);
    }
    std::vector<std::pair<Node*, int>> consumers;  // dst, dst_input (-1: control)
    for (const Edge* e : last->out_edges()) {
      consumers.emplace_back(e->dst, e->IsControlEdge() ? -1 : e->dst_input);
    }
    for (Node* n : m.chain) graph_->RemoveNode(n);
    graph_->RemoveNode(root);
    NodeDef def;
    def.name = name;
    def.op = conv ? "_FusedConv2D" : "_FusedMatMul";
    def.device = device;
    def.attr = std::move(attrs);
    for (const Output& in : inputs) {
      def.input.push_back(in.second == 0 ? in.first->name() : in.first->name() + ":" + std::to_string(in.second));
    }
    ASSIGN_OR_RETURN(Node * fused, graph_->AddNode(std::move(def)));
    for (size_t i = 0; i < inputs.size(); ++i) graph_->AddEdge(inputs[i].first, inputs[i].second, fused, static_cast<int>(i));
    for (Node* src : control_in) graph_->AddControlEdge(src, fused);
    for (const auto& [dst, slot] : consumers) {
      if (slot < 0) {
        graph_->AddControlEdge(fused, dst);
      } else {
        graph_->AddEdge(fused, 0, dst, slot);
      }
    }
    RETURN_IF_ERROR(graph_->InferNodeShapes(fused));
    ++(conv ? stats.fused_conv : stats.fused_matmul);
    return OkStatus();
  }

 private:
  Graph* graph_;
  Node* anchor_ = nullptr;
};

}  // namespace

StatusOr<RemapperStats> RemapGraph(Graph* graph) {
  RemapperStats stats;
  if (!graph->InferShapes().ok()) return stats;
  std::vector<Node*> roots;
  for (Node* n : graph->op_nodes()) {
    if (n->type_string() == "Conv2D" || n->type_string() == "MatMul") roots.push_back(n);
  }
  Remapper remapper(graph);
  for (Node* root : roots) {
    Match m = remapper.MatchAfter(root);
    if (m.chain.empty()) continue;
    RETURN_IF_ERROR(remapper.Rewrite(m, stats));
  }
  return stats;
}

}  // namespace xlens::graph
