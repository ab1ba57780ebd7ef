#include "compiler/graph/lower_functional_ops.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "compiler/graph/function.h"

namespace xlens::graph {
namespace {

using NodeOut = std::pair<Node*, int>;

bool BoolAttr(const AttrMap& attrs, const std::string& name) {
  const AttrValue* v = FindAttr(attrs, name);
  return v && v->kind() == AttrValue::Kind::kBool && v->b();
}

bool IsIfOp(const std::string& op) { return op == "If" || op == "StatelessIf"; }
bool IsCaseOp(const std::string& op) { return op == "Case" || op == "StatelessCase"; }
bool IsWhileOp(const std::string& op) { return op == "While" || op == "StatelessWhile"; }
bool IsCallOp(const std::string& op) {
  return op == "PartitionedCall" || op == "StatefulPartitionedCall";
}
bool IsIf(const Node& n) { return IsIfOp(n.type_string()); }
bool IsCase(const Node& n) { return IsCaseOp(n.type_string()); }
bool IsWhile(const Node& n) { return IsWhileOp(n.type_string()); }
bool IsCall(const Node& n) { return IsCallOp(n.type_string()); }

// TensorFlow keeps everything on a node that XLA must compile whole.
bool ShouldLowerOp(const std::string& op, const AttrMap& attrs) {
  if (BoolAttr(attrs, "_XlaMustCompile")) return false;
  if (IsIfOp(op) || IsCaseOp(op) || IsWhileOp(op)) {
    return BoolAttr(attrs, "_lower_using_switch_merge");
  }
  if (IsCallOp(op)) return !BoolAttr(attrs, "_noinline");
  return false;
}
bool ShouldLower(const Node& n) { return ShouldLowerOp(n.type_string(), n.attrs()); }

// The functions lowering a node of `op` splices in: both branches of an If, the cond and body of
// a While, a call's function. A placeholder ($f, bound when the enclosing body is instantiated)
// names none yet.
std::vector<std::string> ExpandedFunctions(const std::string& op, const AttrMap& attrs) {
  std::vector<const char*> keys;
  if (IsIfOp(op)) keys = {"then_branch", "else_branch"};
  if (IsWhileOp(op)) keys = {"cond", "body"};
  if (IsCallOp(op)) keys = {"f"};
  std::vector<std::string> names;
  for (const char* key : keys) {
    const AttrValue* v = FindAttr(attrs, key);
    if (v && v->kind() == AttrValue::Kind::kFunc) names.push_back(v->func().name);
  }
  if (IsCaseOp(op)) {
    const AttrValue* v = FindAttr(attrs, "branches");
    if (v && v->kind() == AttrValue::Kind::kList) {
      for (const NameAttrList& f : v->list().func) names.push_back(f.name);
    }
  }
  return names;
}

// Nodes the lowering of one node adds besides the bodies it splices in (switches, merges,
// identities per input and output, the pivots and control nodes): an upper bound's estimate.
int64_t LoweringOverhead(int64_t num_inputs) { return 12 + 3 * num_inputs; }

constexpr int64_t kSaturated = int64_t{1} << 50;
int64_t SaturatingAdd(int64_t a, int64_t b) { return std::min(kSaturated, a + b); }

// Names longer than this are not extended by inlining: a chain of n calls inlined in TensorFlow's
// form ("call/call/.../node") would hold n^2 characters of names. Deeper nodes are named under a
// fresh short prefix instead; shallower ones keep TensorFlow's names.
constexpr size_t kMaxInlinedPrefix = 256;

// The graph may grow this many times its own size (its nodes and its library's) by inlining, and
// at least to kMinExpansionBudget nodes. A node whose lowering would pass the budget is kept and
// runs through its kernel, which runs only the branch taken: a tree of Ifs 24 deep, whose every
// branch calls the next level, would otherwise become 2^24 copies of the leaf.
constexpr int64_t kExpansionFactor = 64;
constexpr int64_t kMinExpansionBudget = int64_t{1} << 18;

// One node's out edges, saved so the node can be removed before its replacement takes its name.
struct SavedOutEdge {
  Node* dst;
  int src_output;
  int dst_input;
  bool control;
};

class Lowering {
 public:
  Lowering(Graph* graph, bool fetchable) : g_(graph), fetchable_(fetchable) {}

  Status Run() {
    int64_t own_size = g_->num_op_nodes();
    for (const FunctionDef& f : g_->library().function) {
      functions_.emplace(f.signature.name, &f);  // the first of a name, as Find gives
      own_size += static_cast<int64_t>(f.node_def.size());
    }
    budget_ = std::max(kMinExpansionBudget, kExpansionFactor * own_size);
    // Recursion is refused before any work: every node the pass would lower, with what it
    // expands to.
    for (Node* n : g_->op_nodes()) {
      if (ShouldLower(*n)) RETURN_IF_ERROR(Expansion(*n).status());
    }
    for (int id = 2; id < g_->num_node_ids(); ++id) {
      Node* n = g_->FindNodeId(id);
      if (!n || !ShouldLower(*n)) continue;
      ASSIGN_OR_RETURN(int64_t expansion, Expansion(*n));
      if (g_->num_op_nodes() + expansion > budget_) continue;  // kept: it runs through its kernel
      if (IsIf(*n)) {
        RETURN_IF_ERROR(LowerIf(n));
      } else if (IsCase(*n)) {
        RETURN_IF_ERROR(LowerCase(n));
      } else if (IsWhile(*n)) {
        RETURN_IF_ERROR(LowerWhile(n));
      } else {
        RETURN_IF_ERROR(InlineCall(n));
      }
    }
    return OkStatus();
  }

 private:
  // TensorFlow's Graph::NewName: `prefix/_N` with one counter for the whole pass.
  std::string NewName(const std::string& prefix) {
    std::string name;
    do {
      name = prefix + "/_" + std::to_string(counter_++);
    } while (g_->FindNode(name));
    return name;
  }

  static DataType TypeOf(NodeOut out) { return RemoveRefType(out.first->output_type(out.second)); }

  StatusOr<Node*> Add(const Node& origin, std::string name, std::string op, AttrMap attrs,
                      const std::vector<NodeOut>& inputs, const std::vector<Node*>& controls = {}) {
    NodeDef def;
    def.name = std::move(name);
    def.op = std::move(op);
    def.attr = std::move(attrs);
    def.device = origin.requested_device();
    auto n = g_->AddNode(def);
    if (!n.ok()) {
      return Status::Error("lowering node '" + origin.name() + "' (" + origin.type_string() +
                           "): " + n.status().message());
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].first) g_->AddEdge(inputs[i].first, inputs[i].second, *n, static_cast<int>(i));
    }
    for (Node* c : controls) g_->AddControlEdge(c, *n);
    return *n;
  }

  StatusOr<Node*> AddUnary(const Node& origin, std::string name, std::string op, NodeOut in,
                           AttrMap attrs = {}) {
    attrs["T"] = AttrValue::Type(TypeOf(in));
    return Add(origin, std::move(name), std::move(op), std::move(attrs), {in});
  }

  StatusOr<Node*> AddMerge(const Node& origin, std::string name, std::vector<NodeOut> inputs,
                           DataType type, const std::vector<Node*>& controls = {}) {
    AttrMap attrs;
    attrs["T"] = AttrValue::Type(type);
    attrs["N"] = AttrValue::Int(static_cast<int64_t>(inputs.size()));
    return Add(origin, std::move(name), "Merge", std::move(attrs), inputs, controls);
  }

  // A call node standing for `fn` applied to `inputs`, inlined when the pass reaches it (it is
  // added after every node before it, as TensorFlow's call nodes are).
  StatusOr<Node*> AddCall(const Node& origin, std::string name, const NameAttrList& fn,
                          const std::vector<NodeOut>& inputs, std::vector<DataType> out_types) {
    AttrListValue tin, tout;
    for (NodeOut in : inputs) tin.type.push_back(TypeOf(in));
    tout.type = std::move(out_types);
    AttrMap attrs;
    attrs["Tin"] = AttrValue::List(tin);
    attrs["Tout"] = AttrValue::List(tout);
    attrs["f"] = AttrValue::Func(fn);
    return Add(origin, std::move(name), origin.is_stateful() ? "StatefulPartitionedCall"
                                                             : "PartitionedCall",
               std::move(attrs), inputs);
  }

  static std::vector<SavedOutEdge> SaveOutEdges(const Node& n) {
    std::vector<SavedOutEdge> out;
    for (const Edge* e : n.out_edges()) {
      out.push_back({e->dst, e->src_output, e->dst_input, e->IsControlEdge()});
    }
    return out;
  }

  // Removes `n` and puts in its place a node of its name: IdentityN of `outputs` when lowered
  // nodes stay fetchable (after `done` too, except for a While), else a NoOp after `done`. Data consumers read `outputs`, control
  // consumers wait for `done`.
  Status ReplaceWithLoweredOutput(Node* n, const std::vector<NodeOut>& outputs, Node* done,
                                  bool identity_waits_for_done = true) {
    std::vector<SavedOutEdge> out_edges = SaveOutEdges(*n);
    std::string name = n->name();
    std::string device = n->requested_device();
    std::string op = n->type_string();
    g_->RemoveNode(n);
    NodeDef def;
    def.name = name;
    def.device = device;
    if (fetchable_ && !outputs.empty()) {
      def.op = "IdentityN";
      AttrListValue types;
      for (NodeOut o : outputs) types.type.push_back(TypeOf(o));
      def.attr["T"] = AttrValue::List(types);
    } else {
      def.op = "NoOp";
    }
    auto kept = g_->AddNode(def);
    if (!kept.ok()) {
      return Status::Error("lowering node '" + name + "' (" + op + "): " + kept.status().message());
    }
    if (def.op == "IdentityN") {
      for (size_t i = 0; i < outputs.size(); ++i) {
        g_->AddEdge(outputs[i].first, outputs[i].second, *kept, static_cast<int>(i));
      }
    }
    if (done && (def.op == "NoOp" || identity_waits_for_done)) g_->AddControlEdge(done, *kept);
    for (const SavedOutEdge& e : out_edges) {
      if (e.control) {
        g_->AddControlEdge(done ? done : *kept, e.dst);
      } else {
        if (e.src_output >= static_cast<int>(outputs.size())) {
          return Status::Error("lowering node '" + name + "' (" + op + "): output " +
                               std::to_string(e.src_output) + " is used but the lowering has only " +
                               std::to_string(outputs.size()));
        }
        g_->AddEdge(outputs[e.src_output].first, outputs[e.src_output].second, e.dst, e.dst_input);
      }
    }
    return OkStatus();
  }

  Status LowerIf(Node* n) {
    const std::string name = n->name();
    ASSIGN_OR_RETURN(NameAttrList then_fn, GetFuncAttr(n->attrs(), "then_branch", name));
    ASSIGN_OR_RETURN(NameAttrList else_fn, GetFuncAttr(n->attrs(), "else_branch", name));
    NodeOut pred = n->input_node(0);
    if (!pred.first) return Status::Error("node '" + name + "' (If): the predicate is not connected");
    std::string then_name = NewName(name + "/then");
    std::string else_name = NewName(name + "/else");

    ASSIGN_OR_RETURN(Node * switch_pred, AddSwitch(*n, NewName(name + "/switch_pred"), pred, pred));
    ASSIGN_OR_RETURN(Node * pivot_f, AddUnary(*n, NewName(name + "/pivot_f"), "Identity",
                                              {switch_pred, 0}));
    ASSIGN_OR_RETURN(Node * pivot_t, AddUnary(*n, NewName(name + "/pivot_t"), "Identity",
                                              {switch_pred, 1}));
    std::vector<NodeOut> then_inputs, else_inputs;
    for (int i = 1; i < n->num_inputs(); ++i) {
      NodeOut src = n->input_node(i);
      if (!src.first) {
        return Status::Error("node '" + name + "' (If): input " + std::to_string(i) +
                             " is not connected");
      }
      ASSIGN_OR_RETURN(Node * sw, AddSwitch(*n, NewName(name + "/" + src.first->name()), src, pred));
      then_inputs.push_back({sw, 1});
      else_inputs.push_back({sw, 0});
    }
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() && e->src->IsOp()) g_->AddControlEdge(e->src, switch_pred);
    }
    std::vector<DataType> out_types(n->output_types().begin(), n->output_types().end());
    ASSIGN_OR_RETURN(Node * then_call, AddCall(*n, then_name, then_fn, then_inputs, out_types));
    g_->AddControlEdge(pivot_t, then_call);
    ASSIGN_OR_RETURN(Node * else_call, AddCall(*n, else_name, else_fn, else_inputs, out_types));
    g_->AddControlEdge(pivot_f, else_call);
    std::vector<NodeOut> outputs;
    for (int i = 0; i < n->num_outputs(); ++i) {
      ASSIGN_OR_RETURN(Node * merge, AddMerge(*n, NewName(name + "/output"),
                                              {{then_call, i}, {else_call, i}}, out_types[i]));
      outputs.push_back({merge, 0});
    }
    ASSIGN_OR_RETURN(Node * branch_executed,
                     AddMerge(*n, NewName(name + "/branch_executed"), {{pivot_t, 0}, {pivot_f, 0}},
                              DT_BOOL, {then_call, else_call}));
    return ReplaceWithLoweredOutput(n, outputs, branch_executed);
  }

  // lower_case_op.cc: `<case>/branch<b>/_N` calls, `<case>/branch_index/_N` =
  // _SwitchN(index, index) with the pivots `<case>/pivot_<b>/_N`, one _SwitchN
  // `<case>/<input's node>/_N` per input, one Merge `<case>/merge/_N` per output and
  // `<case>/branch_executed/_N` after every branch. An index out of range takes the last branch,
  // in _SwitchN as in Case.
  Status LowerCase(Node* n) {
    const std::string name = n->name();
    const AttrValue* branches_attr = FindAttr(n->attrs(), "branches");
    if (!branches_attr || branches_attr->kind() != AttrValue::Kind::kList ||
        branches_attr->list().func.empty()) {
      return Status::Error("node '" + name + "' (" + n->type_string() +
                           "): attr 'branches' must list at least one function");
    }
    const std::vector<NameAttrList> branches = branches_attr->list().func;
    const int num_branches = static_cast<int>(branches.size());
    NodeOut index = n->input_node(0);
    if (!index.first) {
      return Status::Error("node '" + name + "' (" + n->type_string() +
                           "): the branch index is not connected");
    }
    std::vector<std::string> call_names;
    for (int b = 0; b < num_branches; ++b) {
      call_names.push_back(NewName(name + "/branch" + std::to_string(b)));
    }
    ASSIGN_OR_RETURN(Node * branch_index,
                     AddSwitchN(*n, NewName(name + "/branch_index"), index, index, num_branches));
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() && e->src->IsOp()) g_->AddControlEdge(e->src, branch_index);
    }
    std::vector<Node*> pivots;
    for (int b = 0; b < num_branches; ++b) {
      ASSIGN_OR_RETURN(Node * pivot, AddUnary(*n, NewName(name + "/pivot_" + std::to_string(b)),
                                              "Identity", {branch_index, b}));
      pivots.push_back(pivot);
    }
    std::vector<std::vector<NodeOut>> branch_inputs(num_branches);
    for (int i = 1; i < n->num_inputs(); ++i) {
      NodeOut src = n->input_node(i);
      if (!src.first) {
        return Status::Error("node '" + name + "' (" + n->type_string() + "): input " +
                             std::to_string(i) + " is not connected");
      }
      ASSIGN_OR_RETURN(Node * sw, AddSwitchN(*n, NewName(name + "/" + src.first->name()), src,
                                             index, num_branches));
      for (int b = 0; b < num_branches; ++b) branch_inputs[b].push_back({sw, b});
    }
    std::vector<DataType> out_types(n->output_types().begin(), n->output_types().end());
    std::vector<Node*> calls;
    for (int b = 0; b < num_branches; ++b) {
      ASSIGN_OR_RETURN(Node * call, AddCall(*n, call_names[b], branches[b], branch_inputs[b],
                                            out_types));
      g_->AddControlEdge(pivots[b], call);
      calls.push_back(call);
    }
    std::vector<NodeOut> outputs;
    for (int i = 0; i < n->num_outputs(); ++i) {
      std::vector<NodeOut> merge_inputs;
      for (Node* call : calls) merge_inputs.push_back({call, i});
      ASSIGN_OR_RETURN(Node * merge,
                       AddMerge(*n, NewName(name + "/merge"), merge_inputs, out_types[i]));
      outputs.push_back({merge, 0});
    }
    std::vector<NodeOut> pivot_outs;
    for (Node* pivot : pivots) pivot_outs.push_back({pivot, 0});
    ASSIGN_OR_RETURN(Node * branch_executed,
                     AddMerge(*n, NewName(name + "/branch_executed"), pivot_outs, DT_INT32, calls));
    return ReplaceWithLoweredOutput(n, outputs, branch_executed);
  }

  StatusOr<Node*> AddSwitchN(const Node& origin, std::string name, NodeOut data, NodeOut index,
                             int num_outs) {
    AttrMap attrs;
    attrs["T"] = AttrValue::Type(TypeOf(data));
    attrs["num_outs"] = AttrValue::Int(num_outs);
    return Add(origin, std::move(name), "_SwitchN", std::move(attrs), {data, index});
  }

  StatusOr<Node*> AddSwitch(const Node& origin, std::string name, NodeOut data, NodeOut pred) {
    AttrMap attrs;
    attrs["T"] = AttrValue::Type(TypeOf(data));
    return Add(origin, std::move(name), "Switch", std::move(attrs), {data, pred});
  }

  Status LowerWhile(Node* n) {
    const std::string name = n->name();
    ASSIGN_OR_RETURN(NameAttrList cond_fn, GetFuncAttr(n->attrs(), "cond", name));
    ASSIGN_OR_RETURN(NameAttrList body_fn, GetFuncAttr(n->attrs(), "body", name));
    ASSIGN_OR_RETURN(int64_t parallel_iterations,
                     GetIntAttr(n->attrs(), "parallel_iterations", name));
    if (parallel_iterations < 1) {
      return Status::Error("node '" + name + "' (" + n->type_string() +
                           "): parallel_iterations must be > 0");
    }
    const int num_vars = n->num_inputs();
    std::vector<NodeOut> inputs;
    std::vector<DataType> types;
    std::vector<char> is_resource;
    for (int i = 0; i < num_vars; ++i) {
      NodeOut src = n->input_node(i);
      if (!src.first) {
        return Status::Error("node '" + name + "' (While): input " + std::to_string(i) +
                             " is not connected");
      }
      inputs.push_back(src);
      types.push_back(TypeOf(src));
      // A resource (a variable's handle) is the same in every iteration: it enters the frame as
      // a constant and has no Merge, Switch, Exit or NextIteration.
      is_resource.push_back(types.back() == DT_RESOURCE);
    }
    int num_lowered = 0;
    for (char r : is_resource) num_lowered += r ? 0 : 1;
    if (num_lowered == 0) {
      return Status::Error("node '" + name + "' (" + n->type_string() +
                           "): a loop without non-resource loop variables cannot be lowered");
    }
    std::string cond_name = NewName(name + "/cond");
    std::string body_name = NewName(name + "/body");
    std::vector<Node*> control_inputs;
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() && e->src->IsOp()) control_inputs.push_back(e->src);
    }

    std::vector<Node*> enters(num_vars), merges, switches, exits;
    std::vector<int> lowered_index(num_vars, -1);
    for (int i = 0; i < num_vars; ++i) {
      AttrMap attrs;
      attrs["frame_name"] = AttrValue::String(name);
      attrs["is_constant"] = AttrValue::Bool(is_resource[i] != 0);
      attrs["parallel_iterations"] = AttrValue::Int(parallel_iterations);
      ASSIGN_OR_RETURN(enters[i], AddUnary(*n, NewName(name + "/enter"), "Enter", inputs[i],
                                           std::move(attrs)));
    }
    if (!control_inputs.empty()) {
      ASSIGN_OR_RETURN(Node * incoming, Add(*n, NewName(name + "/LoopControlInputs"), "NoOp", {},
                                            {}, control_inputs));
      for (Node* enter : enters) g_->AddControlEdge(incoming, enter);
    }
    for (int i = 0; i < num_vars; ++i) {
      if (is_resource[i]) continue;
      lowered_index[i] = static_cast<int>(merges.size());
      // The second input, the back edge, is wired once the NextIteration exists.
      ASSIGN_OR_RETURN(Node * merge, AddMerge(*n, NewName(name + "/merge"),
                                              {{enters[i], 0}, {nullptr, 0}}, types[i]));
      merges.push_back(merge);
    }
    std::vector<NodeOut> cond_inputs;
    for (int i = 0; i < num_vars; ++i) {
      cond_inputs.push_back(is_resource[i] ? NodeOut{enters[i], 0}
                                           : NodeOut{merges[lowered_index[i]], 0});
    }
    ASSIGN_OR_RETURN(Node * cond_call, AddCall(*n, cond_name, cond_fn, cond_inputs, {DT_BOOL}));
    // Puts the cond's constants in the loop's frame.
    g_->AddControlEdge(merges[0], cond_call);
    ASSIGN_OR_RETURN(Node * loop_cond, Add(*n, NewName(name + "/LoopCond"), "LoopCond", {},
                                           {{cond_call, 0}}));
    for (int i = 0; i < num_vars; ++i) {
      if (is_resource[i]) continue;
      ASSIGN_OR_RETURN(Node * sw, AddSwitch(*n, NewName(name + "/" + inputs[i].first->name() +
                                                        "_switch"),
                                            {merges[lowered_index[i]], 0}, {loop_cond, 0}));
      switches.push_back(sw);
    }
    std::vector<NodeOut> body_inputs;
    for (int i = 0; i < num_vars; ++i) {
      body_inputs.push_back(is_resource[i] ? NodeOut{enters[i], 0}
                                           : NodeOut{switches[lowered_index[i]], 1});
    }
    ASSIGN_OR_RETURN(Node * body_call, AddCall(*n, body_name, body_fn, body_inputs, types));
    // Puts the body's constants in the loop's frame.
    ASSIGN_OR_RETURN(Node * body_control, AddUnary(*n, NewName(name + "/loop_body_control"),
                                                   "Identity", {switches[0], 1}));
    g_->AddControlEdge(body_control, body_call);
    std::vector<NodeOut> outputs;
    for (int i = 0; i < num_vars; ++i) {
      if (is_resource[i]) {
        outputs.push_back(inputs[i]);
        continue;
      }
      ASSIGN_OR_RETURN(Node * exit, AddUnary(*n, NewName(name + "/exit"), "Exit",
                                             {switches[lowered_index[i]], 0}));
      exits.push_back(exit);
      outputs.push_back({exit, 0});
    }
    ASSIGN_OR_RETURN(Node * loop_executed,
                     Add(*n, NewName(name + "/LoopExecuted"), "NoOp", {}, {}, exits));
    RETURN_IF_ERROR(ReplaceWithLoweredOutput(n, outputs, loop_executed,
                                             /*identity_waits_for_done=*/false));
    for (int i = 0; i < num_vars; ++i) {
      if (is_resource[i]) continue;
      ASSIGN_OR_RETURN(Node * next, AddUnary(*loop_executed, NewName(name + "/next_iteration"),
                                             "NextIteration", {body_call, i}));
      g_->AddControlEdge(body_call, next);
      g_->AddEdge(next, 0, merges[lowered_index[i]], 1);
    }
    return OkStatus();
  }

  // TensorFlow's InlineFunctionBody with the lowering's options: control outputs from the
  // function's control_ret, the call kept as a node of its name.
  Status InlineCall(Node* call) {
    const std::string name = call->name();
    ASSIGN_OR_RETURN(NameAttrList fn, GetFuncAttr(call->attrs(), "f", name));
    auto fdef = functions_.find(fn.name);
    auto instantiated =
        fdef == functions_.end()
            ? StatusOr<std::unique_ptr<FunctionBody>>(Status::Error(
                  "function '" + fn.name + "' is not in the graph's function library"))
            : InstantiateFunctionDef(*fdef->second, *fn.attr, g_->library(), &g_->registry(),
                                     /*copy_library=*/false);
    if (!instantiated.ok()) {
      return Status::Error("inlining node '" + name + "' (" + call->type_string() +
                           "): " + instantiated.status().message());
    }
    const FunctionBody& body = **instantiated;
    if (static_cast<int>(body.arg_nodes.size()) != call->num_inputs() ||
        static_cast<int>(body.ret_nodes.size()) != call->num_outputs()) {
      return Status::Error("inlining node '" + name + "' (" + call->type_string() +
                           "): function '" + fn.name + "' takes " +
                           std::to_string(body.arg_nodes.size()) + " arguments and returns " +
                           std::to_string(body.ret_nodes.size()) + " values, the call has " +
                           std::to_string(call->num_inputs()) + " inputs and " +
                           std::to_string(call->num_outputs()) + " outputs");
    }
    for (int i = 0; i < call->num_inputs(); ++i) {
      if (TypeOf(call->input_node(i)) != body.arg_types[i]) {
        return Status::Error("inlining node '" + name + "' (" + call->type_string() +
                             "): input " + std::to_string(i) + " is " +
                             DataTypeName(TypeOf(call->input_node(i))) + ", function '" + fn.name +
                             "' takes " + DataTypeName(body.arg_types[i]));
      }
    }
    const std::string prefix = InlinePrefix(name, fn.name);
    const std::string func_prefix = "Func/" + prefix;

    std::vector<Node*> control_inputs;
    for (const Edge* e : call->in_edges()) {
      if (e->IsControlEdge() && e->src->IsOp()) control_inputs.push_back(e->src);
    }
    Node* input_control = nullptr;
    if (!control_inputs.empty()) {
      ASSIGN_OR_RETURN(input_control, Add(*call, NewName(func_prefix + "/input_control_node"),
                                          "NoOp", {}, {}, control_inputs));
    }
    std::vector<Node*> input_nodes;
    for (int i = 0; i < call->num_inputs(); ++i) {
      ASSIGN_OR_RETURN(Node * id, AddUnary(*call, NewName(func_prefix + "/input"), "Identity",
                                           call->input_node(i)));
      if (input_control) g_->AddControlEdge(input_control, id);
      input_nodes.push_back(id);
    }

    // The body's nodes, named under the call.
    const Graph& fg = *body.graph;
    std::vector<Node*> node_map(fg.num_node_ids(), nullptr);
    for (size_t i = 0; i < body.arg_nodes.size(); ++i) node_map[body.arg_nodes[i]->id()] = input_nodes[i];
    for (Node* fn_node : fg.op_nodes()) {
      const std::string& op = fn_node->type_string();
      if (op == "_Arg" || op == "_Retval") continue;
      NodeDef def = fn_node->def();
      def.name = prefix + "/" + fn_node->name();
      def.input.clear();
      auto added = g_->AddNode(std::move(def));
      if (!added.ok()) {
        return Status::Error("inlining node '" + name + "' (" + call->type_string() +
                             ") of function '" + fn.name + "': " + added.status().message());
      }
      node_map[fn_node->id()] = *added;
    }
    for (Node* fn_node : fg.op_nodes()) {
      const std::string& op = fn_node->type_string();
      if (op == "_Arg" || op == "_Retval") continue;
      Node* dst = node_map[fn_node->id()];
      bool has_inputs = false, has_control_inputs = false;
      for (const Edge* e : fn_node->in_edges()) {
        if (!e->src->IsOp()) continue;
        has_inputs = true;
        has_control_inputs |= e->IsControlEdge();
        Node* src = node_map[e->src->id()];
        if (e->IsControlEdge()) {
          g_->AddControlEdge(src, dst);
        } else {
          g_->AddEdge(src, e->src->type_string() == "_Arg" ? 0 : e->src_output, dst, e->dst_input);
        }
      }
      // A node without inputs would run outside the call's frame and even when the call does
      // not (on an untaken branch); a nested call passes the edge on to the constants of its
      // own body when it is inlined in turn.
      bool nested_call = IsCall(*fn_node) || fn_node->type_string() == "SymbolicGradient";
      if (input_control && (!has_inputs || (nested_call && !has_control_inputs))) {
        g_->AddControlEdge(input_control, dst);
      }
    }
    std::vector<NodeOut> outputs;
    for (Node* ret : body.ret_nodes) {
      auto [src, index] = ret->input_node(0);
      Node* mapped = node_map[src->id()];
      if (src->type_string() == "_Arg") index = 0;
      ASSIGN_OR_RETURN(Node * out, AddUnary(*call, NewName(func_prefix + "/output"), "Identity",
                                            {mapped, index}));
      for (const Edge* e : ret->in_edges()) {
        if (e->IsControlEdge() && e->src->IsOp()) g_->AddControlEdge(node_map[e->src->id()], out);
      }
      outputs.push_back({out, 0});
    }
    ASSIGN_OR_RETURN(Node * output_control,
                     Add(*call, NewName(func_prefix + "/output_control_node"), "NoOp", {}, {}));
    for (Node* c : body.control_ret_nodes) g_->AddControlEdge(node_map[c->id()], output_control);
    if (body.control_ret_nodes.empty() && input_control) {
      g_->AddControlEdge(input_control, output_control);
    }
    return ReplaceWithLoweredOutput(call, outputs, output_control);
  }

  // How many nodes lowering `n` adds, everything it splices in lowered in turn (saturated).
  // A function that reaches itself through what the pass lowers would be inlined without end:
  // an error naming the node and the cycle.
  StatusOr<int64_t> Expansion(const Node& n) {
    int64_t total = LoweringOverhead(n.num_inputs());
    for (const std::string& callee : ExpandedFunctions(n.type_string(), n.attrs())) {
      auto size = ExpandedSize(callee);
      if (!size.ok()) {
        return Status::Error("node '" + n.name() + "' (" + n.type_string() + "): " +
                             size.status().message());
      }
      total = SaturatingAdd(total, *size);
    }
    return total;
  }

  // The nodes function `root` becomes once inlined, its own lowered nodes inlined in turn:
  // iterative depth-first over the functions, each sized once.
  StatusOr<int64_t> ExpandedSize(const std::string& root) {
    struct Visit {
      std::string name;
      std::vector<std::string> callees;
      size_t next = 0;
      int64_t size = 0;
    };
    std::vector<Visit> stack;
    auto enter = [&](const std::string& name) -> bool {
      auto fn = functions_.find(name);
      if (fn == functions_.end()) {
        sizes_[name] = 0;  // unknown: inlining the call reports it
        return false;
      }
      const FunctionDef& f = *fn->second;
      Visit v;
      v.name = name;
      v.size = static_cast<int64_t>(f.node_def.size() + f.signature.input_arg.size() +
                                    f.signature.output_arg.size()) + 2;
      for (const NodeDef& nd : f.node_def) {
        if (!ShouldLowerOp(nd.op, nd.attr)) continue;
        v.size = SaturatingAdd(v.size, LoweringOverhead(static_cast<int64_t>(nd.input.size())));
        for (std::string& callee : ExpandedFunctions(nd.op, nd.attr)) v.callees.push_back(callee);
      }
      on_stack_.insert(name);
      stack.push_back(std::move(v));
      return true;
    };
    if (auto known = sizes_.find(root); known != sizes_.end()) return known->second;
    if (!enter(root)) return int64_t{0};
    while (!stack.empty()) {
      Visit& top = stack.back();
      if (top.next < top.callees.size()) {
        const std::string& callee = top.callees[top.next++];
        if (auto known = sizes_.find(callee); known != sizes_.end()) {
          top.size = SaturatingAdd(top.size, known->second);
        } else if (on_stack_.count(callee)) {
          return RecursionError(stack, callee);
        } else {
          enter(callee);  // its size is added when it is done
        }
        continue;
      }
      int64_t size = top.size;
      sizes_[top.name] = size;
      on_stack_.erase(top.name);
      stack.pop_back();
      if (!stack.empty()) stack.back().size = SaturatingAdd(stack.back().size, size);
    }
    return sizes_[root];
  }

  template <typename Visits>
  Status RecursionError(const Visits& stack, const std::string& callee) {
    on_stack_.clear();
    size_t first = 0;
    while (first < stack.size() && stack[first].name != callee) ++first;
    std::vector<std::string> cycle;
    for (size_t i = first; i < stack.size(); ++i) cycle.push_back(stack[i].name);
    cycle.push_back(callee);
    std::string path;
    for (size_t i = 0; i < cycle.size(); ++i) {
      if (cycle.size() > 8 && i == 3) {
        path += " -> ... (" + std::to_string(cycle.size() - 6) + " more)";
        i = cycle.size() - 4;
        continue;
      }
      path += (i ? " -> '" : "'") + cycle[i] + "'";
    }
    return Status::Error("function '" + callee + "' calls itself (" + path +
                         "): a recursive function cannot be inlined");
  }

  // The prefix the nodes inlined for call `name` are named under.
  std::string InlinePrefix(const std::string& name, const std::string& function) {
    if (name.size() <= kMaxInlinedPrefix) return name;
    return NewName(function.substr(0, kMaxInlinedPrefix / 2) + "/inlined");
  }

  Graph* g_;
  bool fetchable_;
  int64_t counter_ = 0;
  std::unordered_map<std::string, const FunctionDef*> functions_;
  std::unordered_map<std::string, int64_t> sizes_;
  std::unordered_set<std::string> on_stack_;
  int64_t budget_ = 0;
};

bool HasArgsOrRetvals(const Graph& graph) {
  for (const Node* n : graph.op_nodes()) {
    if (n->type_string() == "_Arg" || n->type_string() == "_Retval") return true;
  }
  return false;
}

}  // namespace

bool HasFunctionalOpsToLower(const Graph& graph) {
  for (const Node* n : graph.op_nodes()) {
    if (ShouldLower(*n)) return true;
  }
  return false;
}

Status LowerFunctionalOps(Graph* graph, const LowerFunctionalOpsOptions& options) {
  bool fetchable = options.keep_lowered_nodes_fetchable.value_or(!HasArgsOrRetvals(*graph));
  return Lowering(graph, fetchable).Run();
}

}  // namespace xlens::graph
