#include "compiler/graph/scope.h"

#include <algorithm>
#include <cctype>
#include <set>
#include <unordered_map>

namespace xlens::graph {

// Names in use, as TensorFlow Python's Graph._names_in_use: keyed by the lower-cased name,
// valued by how often the name was asked for, so "Const" is followed by "Const_1". Node names
// and name scopes share the table ("Reshape" the node makes the scope "Reshape_1").
struct Scope::NameTable {
  std::unordered_map<std::string, int> in_use;
  // Per node id, the control frames it was made in (for dominated control dependencies).
  std::unordered_map<int, std::vector<int>> frames_of_node;
  int next_frame = 1;

  static std::string Lower(const std::string& s) {
    std::string out = s;
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
  }

  void Reserve(const std::string& name) {
    // A node name also reserves the scopes it lies in ("a/b/c" makes "a" and "a/b" taken).
    std::string key = Lower(name);
    if (in_use[key] == 0) in_use[key] = 1;
    for (size_t pos = key.find('/'); pos != std::string::npos; pos = key.find('/', pos + 1)) {
      std::string prefix = key.substr(0, pos);
      if (in_use[prefix] == 0) in_use[prefix] = 1;
    }
  }

  bool Taken(const std::string& key, const std::string& name, const Graph* graph) const {
    return in_use.count(key) > 0 || (graph != nullptr && graph->FindNode(name) != nullptr);
  }

  std::string Unique(const std::string& name, const Graph* graph) {
    std::string key = Lower(name);
    int i = 0;
    if (auto it = in_use.find(key); it != in_use.end()) i = it->second;
    if (i == 0 && graph != nullptr && graph->FindNode(name) != nullptr) i = 1;
    in_use[key] = i + 1;
    if (i == 0) return name;
    const std::string base_key = key;
    std::string candidate = name;
    while (true) {
      key = base_key + "_" + std::to_string(i);
      candidate = name + "_" + std::to_string(i);
      ++i;
      if (!Taken(key, candidate, graph)) break;
    }
    in_use[key] = 1;
    return candidate;
  }
};

DataType Output::type() const {
  if (node == nullptr || index < 0 || index >= node->num_outputs()) return DT_INVALID;
  return node->output_type(index);
}

std::string Output::name() const {
  if (node == nullptr) return "<none>";
  return index == 0 ? node->name() : node->name() + ":" + std::to_string(index);
}

Scope Scope::NewRootScope() {
  Scope scope;
  scope.owned_graph_ = std::make_shared<Graph>();
  scope.graph_ = scope.owned_graph_.get();
  scope.status_ = std::make_shared<Status>();
  scope.names_ = std::make_shared<NameTable>();
  return scope;
}

Scope Scope::ForGraph(Graph* graph) {
  Scope scope;
  scope.graph_ = graph;
  scope.status_ = std::make_shared<Status>();
  scope.names_ = std::make_shared<NameTable>();
  for (Node* node : graph->op_nodes()) scope.names_->Reserve(node->name());
  // The nodes already there get their static shapes, as an imported graph has them in Python;
  // nodes added later are inferred one by one from these. A graph shape inference rejects
  // keeps unknown shapes: running it reports the error.
  (void)graph->InferShapes();
  return scope;
}

Scope Scope::WithOpName(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  s.exact_name_.clear();
  return s;
}

Scope Scope::NewSubScope(const std::string& name) const {
  Scope s = *this;
  s.op_name_.clear();
  s.exact_name_.clear();
  if (name.empty()) return s;
  s.prefix_ = names_->Unique(prefix_.empty() ? name : prefix_ + "/" + name, graph_);
  return s;
}

Scope Scope::NewOpScope(const std::string& default_name, Scope* inputs_scope) const {
  const std::string name = op_name_.empty() ? default_name : op_name_;
  Scope inner = NewSubScope(name);
  Scope s = *this;
  s.op_name_.clear();
  s.exact_name_ = inner.prefix_;
  *inputs_scope = std::move(inner);
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Node*>& deps) const {
  Scope s = *this;
  ControlFrame frame;
  frame.id = names_->next_frame++;
  for (Node* n : deps) {
    if (n != nullptr) frame.deps.push_back(n);
  }
  s.control_frames_.push_back(std::move(frame));
  return s;
}

Scope Scope::WithControlDependencies(const std::vector<Output>& deps) const {
  std::vector<Node*> nodes;
  for (const Output& o : deps) nodes.push_back(o.node);
  return WithControlDependencies(nodes);
}

Scope Scope::WithNoControlDependencies() const {
  Scope s = *this;
  s.control_frames_.clear();
  return s;
}

Scope Scope::WithDevice(const std::string& device) const {
  Scope s = *this;
  s.device_ = device;
  return s;
}

Scope Scope::WithXlaScope(bool compile, const std::string& scope_name) const {
  Scope s = *this;
  s.has_xla_scope_ = true;
  s.xla_compile_ = compile;
  s.xla_scope_ = scope_name;
  return s;
}

void Scope::UpdateStatus(const Status& s) const {
  if (status_->ok() && !s.ok()) *status_ = s;
}

std::string Scope::GetUniqueNameForOp(const std::string& default_name) const {
  if (!exact_name_.empty()) return exact_name_;
  const std::string base = op_name_.empty() ? default_name : op_name_;
  return names_->Unique(prefix_.empty() ? base : prefix_ + "/" + base, graph_);
}

namespace {

// Fills the type and length attrs an op derives from its inputs (T, N, Tidx, ...) that the
// caller did not set, from the inputs bound to each argument.
Status InferInputAttrs(const std::string& node_name, const OpDef& op_def,
                       const std::vector<Output>& inputs, AttrMap& attrs) {
  // How many tensors each argument takes; list arguments whose length is not given share
  // what the fixed arguments leave (only possible when there is one such list).
  std::vector<int> counts(op_def.input_arg.size(), 1);
  int fixed = 0;
  int open_lists = 0;
  int open_index = -1;
  for (size_t a = 0; a < op_def.input_arg.size(); ++a) {
    const OpDef::ArgDef& arg = op_def.input_arg[a];
    if (!arg.number_attr.empty()) {
      if (const AttrValue* n = FindAttr(attrs, arg.number_attr)) {
        counts[a] = static_cast<int>(n->i());
        fixed += counts[a];
      } else {
        ++open_lists;
        open_index = static_cast<int>(a);
      }
    } else if (!arg.type_list_attr.empty()) {
      if (const AttrValue* t = FindAttr(attrs, arg.type_list_attr)) {
        counts[a] = static_cast<int>(t->list().type.size());
        fixed += counts[a];
      } else {
        ++open_lists;
        open_index = static_cast<int>(a);
      }
    } else {
      fixed += 1;
    }
  }
  const int total = static_cast<int>(inputs.size());
  if (open_lists > 1) {
    return Error("node '" + node_name + "' (" + op_def.name +
                 "): more than one list input without its length attr");
  }
  if (open_lists == 1) {
    if (total < fixed) {
      return Error("node '" + node_name + "' (" + op_def.name + "): " + std::to_string(total) +
                   " inputs given, at least " + std::to_string(fixed) + " needed");
    }
    counts[open_index] = total - fixed;
    const OpDef::ArgDef& arg = op_def.input_arg[open_index];
    if (!arg.number_attr.empty()) attrs[arg.number_attr] = AttrValue::Int(counts[open_index]);
  } else if (total != fixed) {
    return Error("node '" + node_name + "' (" + op_def.name + "): " + std::to_string(total) +
                 " inputs given, the op takes " + std::to_string(fixed));
  }
  int pos = 0;
  for (size_t a = 0; a < op_def.input_arg.size(); ++a) {
    const OpDef::ArgDef& arg = op_def.input_arg[a];
    const int n = counts[a];
    if (!arg.type_list_attr.empty() && FindAttr(attrs, arg.type_list_attr) == nullptr) {
      AttrListValue list;
      for (int k = 0; k < n; ++k) list.type.push_back(RemoveRefType(inputs[pos + k].type()));
      attrs[arg.type_list_attr] = AttrValue::List(std::move(list));
    } else if (!arg.type_attr.empty() && n > 0 && FindAttr(attrs, arg.type_attr) == nullptr) {
      attrs[arg.type_attr] = AttrValue::Type(RemoveRefType(inputs[pos].type()));
    }
    pos += n;
  }
  return OkStatus();
}

}  // namespace

Node* Scope::AddNode(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs,
                     const std::string& default_name) const {
  if (!ok()) return nullptr;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].valid()) {
      UpdateStatus(Error("adding a " + op + " node: input " + std::to_string(i) +
                         " is not an output of any node"));
      return nullptr;
    }
  }
  const std::string name = GetUniqueNameForOp(default_name.empty() ? op : default_name);
  auto reg = graph_->registry().LookUp(op);
  if (!reg.ok()) {
    UpdateStatus(reg.status().WithContext("node '" + name + "'"));
    return nullptr;
  }
  Status st = InferInputAttrs(name, (*reg)->op_def, inputs, attrs);
  if (!st.ok()) {
    UpdateStatus(st);
    return nullptr;
  }
  if (has_xla_scope_) {
    // What tf.xla.experimental.jit_scope puts on every op made inside it.
    attrs["_XlaCompile"] = AttrValue::Bool(xla_compile_);
    attrs["_XlaScope"] = AttrValue::String(xla_scope_);
    attrs["_XlaSeparateCompiledGradients"] = AttrValue::Bool(false);
  }
  NodeDef def;
  def.name = name;
  def.op = op;
  def.device = device_;
  def.attr = std::move(attrs);
  auto added = graph_->AddNode(std::move(def));
  if (!added.ok()) {
    UpdateStatus(added.status());
    return nullptr;
  }
  Node* node = *added;
  names_->Reserve(name);
  for (size_t i = 0; i < inputs.size(); ++i) {
    graph_->AddEdge(inputs[i].node, inputs[i].index, node, static_cast<int>(i));
  }
  // The node's static shapes, known from here on as Python knows them once it has added an op
  // (gradient functions choose their constant paths by them). A shape function's complaint
  // leaves the shapes unknown: the graph is still what the caller built, and running it
  // reports the error with the values in hand.
  (void)graph_->InferNodeShapes(node);
  // Control dependencies as Python adds them: a frame is skipped when an input was made inside
  // it (that input already waits for the frame's nodes), and a node that is already a data
  // input is not added again.
  std::vector<int> frames;
  std::set<Node*> added_deps;
  for (const ControlFrame& frame : control_frames_) {
    frames.push_back(frame.id);
    bool dominated = false;
    for (const Output& in : inputs) {
      auto it = names_->frames_of_node.find(in.node->id());
      if (it != names_->frames_of_node.end() &&
          std::find(it->second.begin(), it->second.end(), frame.id) != it->second.end()) {
        dominated = true;
        break;
      }
    }
    if (dominated) continue;
    for (Node* dep : frame.deps) {
      bool is_input = std::any_of(inputs.begin(), inputs.end(),
                                  [&](const Output& o) { return o.node == dep; });
      if (is_input || !added_deps.insert(dep).second) continue;
      graph_->AddControlEdge(dep, node);
    }
  }
  if (!frames.empty()) names_->frames_of_node[node->id()] = std::move(frames);
  return node;
}

}  // namespace xlens::graph
