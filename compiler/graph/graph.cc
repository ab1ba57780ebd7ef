#include "compiler/graph/graph.h"

#include <algorithm>
#include <deque>
#include <set>

#include <fmt/format.h>

#include "compiler/graph/function_call_op.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/support/terminal_text.h"

namespace xlens::graph {
namespace {

const OpRegistration& SourceSinkRegistration(const char* name) {
  static OpRegistration source = [] {
    OpRegistration r;
    r.op_def.name = "_Source";
    return r;
  }();
  static OpRegistration sink = [] {
    OpRegistration r;
    r.op_def.name = "_Sink";
    return r;
  }();
  return std::string_view(name) == "_SOURCE" ? source : sink;
}

bool IsOpOneOf(const Node& n, std::initializer_list<std::string_view> ops) {
  for (std::string_view op : ops) {
    if (n.type_string() == op) return true;
  }
  return false;
}

std::string NodeLabel(const NodeDef& def) { return "node '" + def.name + "' (" + def.op + ")"; }

}  // namespace

const Edge* Node::input_edge(int i) const {
  for (const Edge* e : in_edges_) {
    if (e->dst_input == i) return e;
  }
  return nullptr;
}

std::pair<Node*, int> Node::input_node(int i) const {
  const Edge* e = input_edge(i);
  if (!e) return {nullptr, 0};
  return {e->src, e->src_output};
}

bool Node::IsSwitch() const { return IsOpOneOf(*this, {"Switch", "RefSwitch"}); }
// TensorFlow classes _XlaMerge (the join of a cluster's launch and its fallback) as a Merge too.
bool Node::IsMerge() const { return IsOpOneOf(*this, {"Merge", "RefMerge", "_XlaMerge"}); }
bool Node::IsEnter() const { return IsOpOneOf(*this, {"Enter", "RefEnter"}); }
bool Node::IsExit() const { return IsOpOneOf(*this, {"Exit", "RefExit"}); }
bool Node::IsNextIteration() const {
  return IsOpOneOf(*this, {"NextIteration", "RefNextIteration"});
}
bool Node::IsLoopCond() const { return type_string() == "LoopCond"; }
bool Node::IsControlFlow() const {
  return IsSwitch() || IsMerge() || IsEnter() || IsExit() || IsNextIteration() || IsLoopCond();
}

Graph::Graph(const OpRegistry* registry) : registry_(registry) {
  for (const char* name : {"_SOURCE", "_SINK"}) {
    auto node = std::make_unique<Node>();
    node->id_ = static_cast<int>(nodes_.size());
    node->def_.name = name;
    node->def_.op = name[1] == 'S' && name[2] == 'O' ? "_Source" : "_Sink";
    node->registration_ = &SourceSinkRegistration(name);
    nodes_.push_back(std::move(node));
  }
}

Graph::~Graph() = default;

StatusOr<Node*> Graph::AddNode(NodeDef def) {
  if (def.name.empty()) return Status::Error("a node of op '" + def.op + "' has no name");
  if (by_name_.count(def.name)) {
    return Status::Error(NodeLabel(def) + ": duplicate node name");
  }
  const OpRegistration* reg = FindOp(def.op);
  if (!reg) {
    auto unknown = registry_->LookUp(def.op);
    return Status::Error(NodeLabel(def) + ": " + unknown.status().message());
  }
  AddDefaultsToAttrs(reg->op_def, &def.attr);
  RETURN_IF_ERROR(ValidateAttrs(def.name, def.attr, reg->op_def));
  auto node = std::make_unique<Node>();
  RETURN_IF_ERROR(InOutTypesForNode(def.name, def.attr, reg->op_def, &node->input_types_,
                                    &node->output_types_));
  node->id_ = static_cast<int>(nodes_.size());
  node->registration_ = reg;
  node->def_ = std::move(def);
  node->output_shapes_.assign(node->output_types_.size(), PartialShape::UnknownRank());
  Node* raw = node.get();
  by_name_[raw->name()] = raw;
  nodes_.push_back(std::move(node));
  ++num_op_nodes_;
  return raw;
}

const OpRegistration* Graph::FindOp(const std::string& op) {
  if (const OpRegistration* reg = registry_->Find(op)) return reg;
  if (auto it = function_ops_.find(op); it != function_ops_.end()) return it->second.get();
  const FunctionDef* fdef = library_.Find(op);
  if (!fdef && call_library_) fdef = call_library_->Find(op);
  if (!fdef) return nullptr;
  return (function_ops_[op] = MakeFunctionCallRegistration(*fdef)).get();
}

const Edge* Graph::AddEdge(Node* src, int src_output, Node* dst, int dst_input) {
  auto edge = std::make_unique<Edge>();
  edge->src = src;
  edge->src_output = src_output;
  edge->dst = dst;
  edge->dst_input = dst_input;
  edge->id = static_cast<int>(edges_.size());
  const Edge* raw = edge.get();
  src->out_edges_.push_back(raw);
  dst->in_edges_.push_back(raw);
  edges_.push_back(std::move(edge));
  return raw;
}

const Edge* Graph::AddControlEdge(Node* src, Node* dst) {
  for (const Edge* e : dst->in_edges_) {
    if (e->IsControlEdge() && e->src == src) return e;
  }
  return AddEdge(src, kControlSlot, dst, kControlSlot);
}

void Graph::RemoveEdge(const Edge* edge) {
  auto erase = [edge](std::vector<const Edge*>& v) {
    v.erase(std::remove(v.begin(), v.end(), edge), v.end());
  };
  erase(edge->src->out_edges_);
  erase(edge->dst->in_edges_);
  edges_[edge->id].reset();
}

void Graph::RemoveNode(Node* node) {
  std::vector<const Edge*> edges = node->in_edges_;
  edges.insert(edges.end(), node->out_edges_.begin(), node->out_edges_.end());
  for (const Edge* e : edges) {
    if (edges_[e->id]) RemoveEdge(e);
  }
  by_name_.erase(node->name());
  --num_op_nodes_;
  nodes_[node->id_].reset();
}

Status Graph::UpdateEdge(Node* src, int src_output, Node* dst, int dst_input) {
  if (const Edge* e = dst->input_edge(dst_input)) RemoveEdge(e);
  AddEdge(src, src_output, dst, dst_input);
  return OkStatus();
}

Node* Graph::FindNode(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

std::vector<Node*> Graph::op_nodes() const {
  std::vector<Node*> out;
  out.reserve(num_op_nodes_);
  for (size_t i = 2; i < nodes_.size(); ++i) {
    if (nodes_[i]) out.push_back(nodes_[i].get());
  }
  return out;
}

std::string Graph::NewName(const std::string& prefix) {
  if (!by_name_.count(prefix)) return prefix;
  int& counter = name_counters_[prefix];
  std::string name;
  do {
    name = prefix + "_" + std::to_string(++counter);
  } while (by_name_.count(name));
  return name;
}

namespace {

// "; 3 more nodes use ops xlens does not know: 'Erfc' (z), 'Einsum' (w, v)": the unknown ops of
// `def` other than at `first`, each with its first nodes, in the graph's order; empty when none.
std::string OtherUnknownOps(const GraphDef& def, const OpRegistry& registry, const NodeDef& first) {
  constexpr size_t kMaxOps = 12, kMaxNodesPerOp = 3;
  std::vector<std::pair<std::string, std::vector<std::string>>> ops;
  int64_t nodes = 0;
  for (const NodeDef& n : def.node) {
    if (&n == &first || registry.Find(n.op) || def.library.Find(n.op)) continue;
    ++nodes;
    auto it = std::find_if(ops.begin(), ops.end(), [&](const auto& e) { return e.first == n.op; });
    if (it == ops.end()) {
      ops.push_back({n.op, {}});
      it = ops.end() - 1;
    }
    it->second.push_back(n.name);
  }
  if (nodes == 0) return "";
  std::string out = fmt::format("; {} more node{} use{} ops xlens does not know:", nodes,
                                nodes == 1 ? "" : "s", nodes == 1 ? "s" : "");
  for (size_t i = 0; i < ops.size() && i < kMaxOps; ++i) {
    const auto& [op, names] = ops[i];
    std::vector<std::string> shown(names.begin(), names.begin() + std::min(names.size(), kMaxNodesPerOp));
    out += fmt::format("{} '{}' ({}{})", i == 0 ? "" : ",", EscapeForTerminal(op),
                       EscapeForTerminal(fmt::format("{}", fmt::join(shown, ", "))),
                       names.size() > shown.size() ? fmt::format(" and {} more", names.size() - shown.size())
                                                   : "");
  }
  if (ops.size() > kMaxOps) out += fmt::format(" and {} more ops", ops.size() - kMaxOps);
  return out;
}

}  // namespace

StatusOr<std::unique_ptr<Graph>> Graph::FromGraphDef(const GraphDef& def,
                                                     const GraphConstructorOptions& options) {
  auto graph = std::make_unique<Graph>();
  const std::string where = options.source_name.empty() ? "" : options.source_name + ": ";
  graph->library_ = def.library;
  graph->versions_ = def.versions;
  graph->unmodeled_fields_ = def.unmodeled_fields;

  // Unknown ops (allowed for inspection only) get a signature made from how they are used.
  std::map<std::string, int> outputs_used;
  if (options.allow_unknown_ops) {
    for (const NodeDef& n : def.node) {
      for (const std::string& input : n.input) {
        auto id = ParseTensorName(input);
        if (id.ok() && !id->IsControl()) {
          int& count = outputs_used[id->node];
          count = std::max(count, id->index + 1);
        }
      }
    }
  }

  for (const NodeDef& n : def.node) {
    NodeDef copy = n;
    copy.input.clear();
    if (options.allow_unknown_ops && !graph->FindOp(n.op)) {
      auto reg = std::make_unique<OpRegistration>();
      reg->op_def.name = n.op;
      reg->has_xla_kernel = false;
      auto node = std::make_unique<Node>();
      node->id_ = static_cast<int>(graph->nodes_.size());
      node->registration_ = reg.get();
      for (const std::string& input : n.input) {
        if (!input.empty() && input[0] != '^') node->input_types_.push_back(DT_INVALID);
      }
      node->output_types_.assign(outputs_used[n.name], DT_INVALID);
      node->output_shapes_.assign(node->output_types_.size(), PartialShape::UnknownRank());
      node->def_ = std::move(copy);
      if (graph->by_name_.count(n.name)) {
        return Status::Error(where + NodeLabel(n) + ": duplicate node name");
      }
      graph->by_name_[n.name] = node.get();
      graph->nodes_.push_back(std::move(node));
      graph->unknown_registrations_.push_back(std::move(reg));
      ++graph->num_op_nodes_;
      continue;
    }
    auto node = graph->AddNode(std::move(copy));
    if (!node.ok()) {
      std::string message = where + node.status().message();
      // An unknown op is rarely alone (a model needs the ops of a layer): every other op the
      // graph uses that the registry lacks is named with it, so one run lists the whole gap.
      if (!graph->FindOp(n.op)) message += OtherUnknownOps(def, *graph->registry_, n);
      return Status::Error(message);
    }
    (*node)->def_.input = n.input;  // kept until wired below
  }

  for (size_t i = 2; i < graph->nodes_.size(); ++i) {
    Node* dst = graph->nodes_[i].get();
    const NodeDef& nd = def.node[i - 2];
    int data_inputs = 0;
    bool seen_control = false;
    for (const std::string& input : nd.input) {
      auto id = ParseTensorName(input);
      if (!id.ok()) {
        return Status::Error(where + NodeLabel(nd) + ": " + id.status().message());
      }
      Node* src = graph->FindNode(id->node);
      if (!src) {
        return Status::Error(where + NodeLabel(nd) + ": input '" + input +
                             "' names a node that does not exist");
      }
      if (id->IsControl()) {
        seen_control = true;
        graph->AddControlEdge(src, dst);
        continue;
      }
      if (seen_control) {
        return Status::Error(where + NodeLabel(nd) + ": data input '" + input +
                             "' comes after a control input");
      }
      if (id->index >= src->num_outputs()) {
        return Status::Error(where + NodeLabel(nd) + ": input '" + input + "' asks for output " +
                             std::to_string(id->index) + " of " + NodeLabel(src->def_) +
                             ", which has " + std::to_string(src->num_outputs()) + " output" +
                             (src->num_outputs() == 1 ? "" : "s"));
      }
      if (data_inputs >= dst->num_inputs()) {
        return Status::Error(where + NodeLabel(nd) + ": has " +
                             std::to_string(std::count_if(nd.input.begin(), nd.input.end(),
                                                          [](const std::string& s) {
                                                            return s.empty() || s[0] != '^';
                                                          })) +
                             " data inputs, the op takes " + std::to_string(dst->num_inputs()));
      }
      DataType expected = dst->input_type(data_inputs);
      DataType got = src->output_type(id->index);
      bool compatible = expected == DT_INVALID || got == DT_INVALID || expected == got ||
                        (!IsRefType(expected) && RemoveRefType(got) == expected);
      if (!compatible) {
        return Status::Error(where + NodeLabel(nd) + ": input " + std::to_string(data_inputs) +
                             " ('" + input + "') is " + DataTypeName(got) + ", expected " +
                             DataTypeName(expected));
      }
      graph->AddEdge(src, id->index, dst, data_inputs);
      ++data_inputs;
    }
    if (data_inputs != dst->num_inputs()) {
      return Status::Error(where + NodeLabel(nd) + ": has " + std::to_string(data_inputs) +
                           " data input" + (data_inputs == 1 ? "" : "s") + ", the op takes " +
                           std::to_string(dst->num_inputs()));
    }
    dst->def_.input.clear();
  }
  return graph;
}

GraphDef Graph::ToGraphDef() const {
  GraphDef def;
  def.library = library_;
  def.versions = versions_;
  def.unmodeled_fields = unmodeled_fields_;
  for (Node* node : op_nodes()) {
    NodeDef nd = node->def_;
    nd.input.clear();
    std::vector<const Edge*> data(node->num_inputs(), nullptr);
    std::vector<std::string> control;
    for (const Edge* e : node->in_edges_) {
      if (e->IsControlEdge()) {
        if (e->src->IsOp()) control.push_back("^" + e->src->name());
      } else if (e->dst_input < static_cast<int>(data.size())) {
        data[e->dst_input] = e;
      }
    }
    for (const Edge* e : data) {
      if (!e) continue;  // an unwired input (a graph under construction)
      nd.input.push_back(TensorId{e->src->name(), e->src_output}.ToString());
    }
    nd.input.insert(nd.input.end(), control.begin(), control.end());
    def.node.push_back(std::move(nd));
  }
  return def;
}

StatusOr<std::vector<Node*>> Graph::TopologicalOrder() const {
  std::vector<int> pending(nodes_.size(), 0);
  std::vector<Node*> ready;
  for (Node* n : op_nodes()) {
    for (const Edge* e : n->in_edges_) {
      if (e->src->IsOp() && !e->src->IsNextIteration()) ++pending[n->id_];
    }
    if (pending[n->id_] == 0) ready.push_back(n);
  }
  std::vector<Node*> order;
  order.reserve(num_op_nodes_);
  // Lowest id first among ready nodes keeps the order stable and close to the file's.
  std::set<int> queue;
  for (Node* n : ready) queue.insert(n->id_);
  while (!queue.empty()) {
    Node* n = nodes_[*queue.begin()].get();
    queue.erase(queue.begin());
    order.push_back(n);
    if (n->IsNextIteration()) continue;
    for (const Edge* e : n->out_edges_) {
      if (e->dst->IsOp() && --pending[e->dst->id_] == 0) queue.insert(e->dst->id_);
    }
  }
  if (static_cast<int>(order.size()) == num_op_nodes_) return order;

  // Name one cycle: walk back along unfinished inputs until a node repeats.
  Node* start = nullptr;
  for (Node* n : op_nodes()) {
    if (pending[n->id_] > 0) {
      start = n;
      break;
    }
  }
  std::vector<Node*> path;
  std::map<Node*, size_t> position;
  Node* cur = start;
  while (cur && !position.count(cur)) {
    position[cur] = path.size();
    path.push_back(cur);
    Node* next = nullptr;
    for (const Edge* e : cur->in_edges_) {
      if (e->src->IsOp() && !e->src->IsNextIteration() && pending[e->src->id_] > 0) {
        next = e->src;
        break;
      }
    }
    cur = next;
  }
  std::string cycle;
  if (cur) {
    // The path runs backwards along inputs; forwards, it closes on its last node.
    for (size_t i = path.size(); i-- > position[cur];) {
      cycle += "'" + path[i]->name() + "' -> ";
    }
    cycle += "'" + path.back()->name() + "'";
  }
  return Status::Error("the graph has a cycle: " + cycle +
                       " (only NextIteration may feed a loop's Merge back)");
}

namespace {

// Ops whose value shape inference computes from constant inputs, as TensorFlow's shape refiner
// evaluates small constant subgraphs.
constexpr int64_t kMaxConstantElements = 1024;

bool CanEvaluateForShapes(const Node& n) {
  return !n.is_stateful() && !n.IsControlFlow() && n.registration().kernel &&
         n.type_string() != "_Arg" && n.type_string() != "Placeholder" &&
         n.type_string() != "PlaceholderWithDefault";
}

}  // namespace

Status Graph::InferShapes() {
  ASSIGN_OR_RETURN(std::vector<Node*> order, TopologicalOrder());
  shape_constants_.assign(nodes_.size(), {});
  shape_handles_.assign(nodes_.size(), {});
  for (Node* n : order) RETURN_IF_ERROR(InferNodeShapes(n));
  return OkStatus();
}

Status Graph::InferNodeShapes(Node* n) {
  if (shape_constants_.size() < nodes_.size()) {
    shape_constants_.resize(nodes_.size());
    shape_handles_.resize(nodes_.size());
  }
  int num_in = n->num_inputs();
  std::vector<PartialShape> in_shapes(num_in, PartialShape::UnknownRank());
  std::vector<const Tensor*> in_tensors(num_in, nullptr);
  std::vector<HandleShape> in_handles(num_in);
  bool all_constant = true;
  for (const Edge* e : n->in_edges_) {
    if (e->IsControlEdge()) continue;
    Node* src = e->src;
    if (e->dst_input >= num_in) continue;
    if (e->src_output < static_cast<int>(src->output_shapes_.size())) {
      in_shapes[e->dst_input] = src->output_shapes_[e->src_output];
    }
    auto& c = shape_constants_[src->id_];
    if (e->src_output < static_cast<int>(c.size()) && c[e->src_output]) {
      in_tensors[e->dst_input] = &*c[e->src_output];
    }
    auto& h = shape_handles_[src->id_];
    if (e->src_output < static_cast<int>(h.size())) in_handles[e->dst_input] = h[e->src_output];
  }
  for (const Tensor* t : in_tensors) all_constant &= t != nullptr;
  if (n->IsMerge()) {
    // A loop's back edge (from NextIteration) has no shape yet: the Merge takes the shape of
    // the value entering the loop, as TensorFlow's shape refiner does on import.
    const PartialShape* entering = nullptr;
    for (const Edge* e : n->in_edges_) {
      if (!e->IsControlEdge() && !e->src->IsNextIteration()) entering = &in_shapes[e->dst_input];
    }
    for (const Edge* e : n->in_edges_) {
      if (!e->IsControlEdge() && e->src->IsNextIteration() && entering) {
        in_shapes[e->dst_input] = *entering;
      }
    }
  }

  n->output_shapes_.assign(n->num_outputs(), PartialShape::UnknownRank());
  auto& constants = shape_constants_[n->id_];
  auto& handles = shape_handles_[n->id_];
  constants.assign(n->num_outputs(), std::nullopt);
  handles.assign(n->num_outputs(), std::nullopt);
  if (n->registration().shape_fn) {
    InferenceContext ctx(n, &n->def_.attr, in_shapes, n->input_types_, n->output_types_,
                         in_tensors);
    ctx.set_input_handle_shapes(in_handles);
    RETURN_IF_ERROR(n->registration().shape_fn(ctx));
    for (int i = 0; i < n->num_outputs(); ++i) {
      n->output_shapes_[i] = ctx.output(i);
      handles[i] = ctx.output_handle_shape(i);
    }
  }

  // Constant values for the shape functions downstream.
  const std::string& op = n->type_string();
  if (op == "Const") {
    if (const AttrValue* v = FindAttr(n->def_.attr, "value");
        v && v->kind() == AttrValue::Kind::kTensor &&
        v->tensor().num_elements() <= kMaxConstantElements) {
      constants[0] = v->tensor();
    }
    return OkStatus();
  }
  if ((op == "Shape" || op == "Size" || op == "Rank") && num_in == 1 && n->num_outputs() == 1) {
    const PartialShape& s = in_shapes[0];
    DataType out = n->output_type(0);
    if (op == "Rank" && !s.unknown_rank()) {
      Tensor t(out, {});
      t.SetFromInt64(0, s.rank());
      constants[0] = t;
    } else if (op == "Shape" && s.IsFullyDefined()) {
      Tensor t(out, {s.rank()});
      for (int64_t i = 0; i < s.rank(); ++i) t.SetFromInt64(i, s.dim(i));
      constants[0] = t;
    } else if (op == "Size" && s.IsFullyDefined()) {
      Tensor t(out, {});
      t.SetFromInt64(0, s.num_elements());
      constants[0] = t;
    }
    return OkStatus();
  }
  if (!all_constant || num_in == 0 || !CanEvaluateForShapes(*n)) return OkStatus();
  std::vector<Tensor> inputs;
  for (const Tensor* t : in_tensors) inputs.push_back(*t);
  OpKernelContext ctx(*n, std::move(inputs), {}, nullptr, nullptr, nullptr);
  ctx.set_max_tensor_bytes(kMaxConstantElements * 16);
  if (!n->registration().kernel(ctx).ok()) return OkStatus();  // the executor reports it
  for (int i = 0; i < n->num_outputs(); ++i) {
    const Tensor& t = ctx.output(i);
    if (t.IsInitialized() && t.num_elements() <= kMaxConstantElements) {
      constants[i] = t;
      if (n->output_shapes_[i].IsCompatibleWith(t.dims())) n->output_shapes_[i] = t.shape();
    }
  }
  return OkStatus();
}

}  // namespace xlens::graph
