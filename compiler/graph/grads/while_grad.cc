// The gradient of a functional While / StatelessWhile, after TensorFlow's while_v2: a forward
// loop that accumulates what the backward pass needs into TensorLists, and a backward While that
// pops them in reverse order, one iteration per forward iteration.
//
// The backward body is the body's gradient: the body is instantiated, its arguments read from
// the popped entry state, and differentiated; every value of the forward body the gradient reads
// (an intermediate: tanh's output for TanhGrad, a MatMul's operands) is then popped from an
// accumulator instead, and the forward computations nothing else needs are removed. The forward
// loop is the While again with an iteration counter and those accumulators, each pushed every
// iteration. while_v2 adds the accumulators to the forward While in place; here the While's
// consumers are moved onto the accumulating loop instead, so the forward pass runs once and the
// loss is computed from the very values the gradient pops (a body drawing random numbers gets
// the gradient of what it drew).
//
// The backward loop carries: the iteration counter and the forward trip count (cond: counter <
// count), one gradient per differentiable loop variable (TensorFlow's float and complex types and
// TensorLists), the accumulators, and the loop variables the body passes through unchanged (the
// captured tensors: weights), whose gradients add up over the iterations. The accumulators are
// sized by the trip count's static bound where the graph gives one (StaticTripBound), so the
// gradient compiles.
#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "compiler/graph/function.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph::grad {

namespace {

using GradOutputs = std::vector<Output>;

bool IsDifferentiable(DataType t) {
  switch (RemoveRefType(t)) {
    case DT_HALF:
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_BFLOAT16:
    case DT_COMPLEX64:
    case DT_COMPLEX128:
    case DT_VARIANT:
      return true;
    default:
      return false;
  }
}

// `base`, or `base_1`, `base_2`, ...: a name no function of `library` has.
std::string UniqueFunctionName(const FunctionDefLibrary& library, const std::string& base) {
  if (!library.Find(base)) return base;
  for (int i = 1;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (!library.Find(name)) return name;
  }
}

// Adds `fdef` under a fresh name and returns the reference a While's func attr takes.
NameAttrList AddFunction(FunctionDefLibrary& library, FunctionDef fdef) {
  fdef.signature.name = UniqueFunctionName(library, fdef.signature.name);
  NameAttrList ref;
  ref.name = fdef.signature.name;
  library.function.push_back(std::move(fdef));
  return ref;
}

// Functions a nested gradient added to a body's own copy of the library (the gradient of a loop
// inside the loop) join the caller's library, where the graph's kernels look them up.
void MergeNewFunctions(const FunctionDefLibrary& from, FunctionDefLibrary& into) {
  for (const FunctionDef& f : from.function) {
    if (!into.Find(f.signature.name)) into.function.push_back(f);
  }
}

StatusOr<Node*> AddInterfaceNode(Graph* g, const std::string& op, const std::string& name,
                                 DataType type, int index) {
  NodeDef def;
  def.name = g->NewName(name);
  def.op = op;
  def.attr["T"] = AttrValue::Type(type);
  def.attr["index"] = AttrValue::Int(index);
  return g->AddNode(std::move(def));
}

StatusOr<Node*> AddRetval(Graph* g, const std::string& name, const Output& value, int index) {
  ASSIGN_OR_RETURN(Node * ret, AddInterfaceNode(g, "_Retval", name, value.type(), index));
  g->AddEdge(value.node, value.index, ret, 0);
  return ret;
}

// Points every consumer of `arg` (an _Arg of the body) at `value` instead, control edges
// included, and removes the _Arg.
void ReplaceArg(Graph* g, Node* arg, const Output& value) {
  std::vector<const Edge*> edges(arg->out_edges().begin(), arg->out_edges().end());
  for (const Edge* e : edges) {
    Node* dst = e->dst;
    if (e->IsControlEdge()) {
      if (dst->IsOp()) g->AddControlEdge(value.node, dst);
      g->RemoveEdge(e);
    } else {
      int input = e->dst_input;
      (void)g->UpdateEdge(value.node, value.index, dst, input);
    }
  }
  g->RemoveNode(arg);
}

Output ElementShapeUnknown(const Scope& s) { return ops::Const(s, int32_t{-1}); }

Output EmptyList(const Scope& s, DataType element_dtype, int64_t max_num_elements) {
  return ops::AsOutput(ops::BuildOp(
      s, "EmptyTensorList",
      {ElementShapeUnknown(s), ops::Input(static_cast<int32_t>(max_num_elements))},
      {{"element_dtype", AttrValue::Type(element_dtype)},
       {"shape_type", AttrValue::Type(DT_INT32)}}));
}

AttrValue TypeList(const std::vector<DataType>& types) {
  AttrListValue list;
  list.type = types;
  return AttrValue::List(std::move(list));
}

// A cond taking `extra` more arguments than `cond` (ignored): the forward loop's added state.
StatusOr<FunctionDef> WidenCond(const FunctionDefLibrary& library, const NameAttrList& cond,
                                const std::vector<DataType>& extra) {
  ASSIGN_OR_RETURN(auto body, InstantiateFunction(library, cond));
  Graph* g = body->graph.get();
  int index = static_cast<int>(body->arg_nodes.size());
  for (DataType t : extra) {
    RETURN_IF_ERROR(AddInterfaceNode(g, "_Arg", "accumulator", t, index++).status());
  }
  return GraphToFunctionDef(*g, cond.name + "_accumulating");
}

// A scalar integer constant `t` is (through Identity), else nothing.
std::optional<int64_t> ScalarConstant(const Output& t) {
  std::optional<Tensor> v = ConstantValue(t);
  if (!v || v->num_elements() != 1) return std::nullopt;
  switch (v->dtype()) {
    case DT_INT32:
    case DT_INT64:
      return static_cast<int64_t>(v->GetAsDouble(0));
    default:
      return std::nullopt;
  }
}

Output SkipIdentities(Output t) {
  while (t.valid() && t.node->type_string() == "Identity") t = In(*t.node, 0);
  return t;
}

// The most iterations the loop can run, when the graph says so: a loop variable that starts at
// a constant, steps by one and must stay below a constant (or an unchanged loop variable that
// enters as one) for the cond to hold; TF2's while_loop makes such a pair of its loop counter
// and maximum_iterations. Compiled lists need it (XLA's buffers have a size fixed at compile
// time), as TensorFlow's XLA needs maximum_iterations to differentiate a loop.
std::optional<int64_t> StaticTripBound(const Node& op, const FunctionBody& cond,
                                       const FunctionBody& body) {
  // The conjuncts of the cond's result.
  std::vector<Output> terms{SkipIdentities(In(*cond.ret_nodes[0], 0))};
  std::optional<int64_t> bound;
  auto arg_index = [](const FunctionBody& fb, const Output& t) -> int {
    for (size_t i = 0; i < fb.arg_nodes.size(); ++i) {
      if (t.node == fb.arg_nodes[i]) return static_cast<int>(i);
    }
    return -1;
  };
  auto constant = [&](const Output& t) -> std::optional<int64_t> {
    if (auto c = ScalarConstant(t)) return c;
    int m = arg_index(cond, t);
    if (m < 0 || m >= op.num_inputs()) return std::nullopt;
    auto [src, out] = body.ret_nodes[m]->input_node(0);
    if (src != body.arg_nodes[m]) return std::nullopt;  // it changes
    return ScalarConstant(In(op, m));
  };
  while (!terms.empty()) {
    Output t = terms.back();
    terms.pop_back();
    if (!t.valid()) continue;
    const std::string& kind = t.node->type_string();
    if (kind == "LogicalAnd") {
      terms.push_back(SkipIdentities(In(*t.node, 0)));
      terms.push_back(SkipIdentities(In(*t.node, 1)));
      continue;
    }
    if (kind != "Less") continue;
    int k = arg_index(cond, SkipIdentities(In(*t.node, 0)));
    std::optional<int64_t> limit = constant(SkipIdentities(In(*t.node, 1)));
    if (k < 0 || !limit || k >= op.num_inputs()) continue;
    std::optional<int64_t> start = ScalarConstant(In(op, k));
    Output next = SkipIdentities(In(*body.ret_nodes[k], 0));
    if (!start || !next.valid() ||
        (next.node->type_string() != "AddV2" && next.node->type_string() != "Add")) {
      continue;
    }
    Output a = SkipIdentities(In(*next.node, 0)), b = SkipIdentities(In(*next.node, 1));
    if (a.node != body.arg_nodes[k]) std::swap(a, b);
    if (a.node != body.arg_nodes[k] || ScalarConstant(b) != std::optional<int64_t>(1)) continue;
    int64_t trips = std::max<int64_t>(0, *limit - *start);
    bound = bound ? std::min(*bound, trips) : trips;
  }
  return bound;
}

struct LoopVars {
  std::vector<DataType> types;
  std::vector<int> varying;     // indices the body changes: their entry values are accumulated
  std::vector<int> invariant;   // indices the body returns unchanged
  std::vector<int> grads;       // differentiable indices
};

// A value the body computes that its gradient reads: the forward loop pushes it every
// iteration, the backward loop pops it (while_v2's intermediates).
struct Intermediate {
  std::string node;
  int output = 0;
  DataType type = DT_INVALID;
};

// The forward body with an iteration counter and accumulators: one per varying loop variable,
// pushed the iteration's entry value, then one per intermediate, pushed its value.
StatusOr<FunctionDef> AccumulatingBody(const FunctionDefLibrary& library, const NameAttrList& body,
                                       const LoopVars& vars,
                                       const std::vector<Intermediate>& intermediates) {
  ASSIGN_OR_RETURN(auto fb, InstantiateFunction(library, body));
  Graph* g = fb->graph.get();
  Scope s = Scope::ForGraph(g).NewSubScope("accumulate");
  int n = static_cast<int>(vars.types.size());
  ASSIGN_OR_RETURN(Node * counter, AddInterfaceNode(g, "_Arg", "counter", DT_INT32, n));
  Output next = ops::Add(s, Output(counter), ops::Input(1));
  RETURN_IF_ERROR(s.status());
  RETURN_IF_ERROR(AddRetval(g, "counter_next", next, n).status());
  std::vector<std::pair<Output, DataType>> pushed_values;
  for (int i : vars.varying) pushed_values.push_back({Output(fb->arg_nodes[i]), vars.types[i]});
  for (const Intermediate& m : intermediates) {
    Node* src = g->FindNode(m.node);
    if (src == nullptr) {
      return Error("the body '" + body.name + "' has no node '" + m.node + "' to accumulate");
    }
    pushed_values.push_back({Output(src, m.output), m.type});
  }
  int index = n + 1;
  for (const auto& [value, type] : pushed_values) {
    ASSIGN_OR_RETURN(Node * acc, AddInterfaceNode(g, "_Arg", "accumulator", DT_VARIANT, index));
    Output pushed = ops::AsOutput(ops::BuildOp(s, "TensorListPushBack", {Output(acc), value},
                                               {{"element_dtype", AttrValue::Type(type)}}));
    RETURN_IF_ERROR(s.status());
    RETURN_IF_ERROR(AddRetval(g, "accumulator_next", pushed, index++).status());
  }
  return GraphToFunctionDef(*g, body.name + "_accumulating");
}

// The backward cond: counter < count, over the backward loop's variables.
StatusOr<FunctionDef> BackwardCond(const std::string& name, const std::vector<DataType>& types) {
  Scope root = Scope::NewRootScope();
  Graph* g = root.graph();
  std::vector<Node*> args;
  for (size_t i = 0; i < types.size(); ++i) {
    ASSIGN_OR_RETURN(Node * a,
                     AddInterfaceNode(g, "_Arg", "loop_var", types[i], static_cast<int>(i)));
    args.push_back(a);
  }
  Output less = ops::Less(root, Output(args[0]), Output(args[1]));
  RETURN_IF_ERROR(root.status());
  RETURN_IF_ERROR(AddRetval(g, "more", less, 0).status());
  return GraphToFunctionDef(*g, name);
}

// Removes the op nodes no _Retval depends on (the forward computations the gradient reads from
// accumulators instead), _Arg nodes kept.
void RemoveDeadNodes(Graph* g) {
  std::set<const Node*> live;
  std::vector<const Node*> stack;
  for (Node* n : g->op_nodes()) {
    if (n->type_string() == "_Retval" || n->type_string() == "_Arg") stack.push_back(n);
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!live.insert(n).second) continue;
    for (const Edge* e : n->in_edges()) {
      if (e->src->IsOp()) stack.push_back(e->src);
    }
  }
  for (Node* n : g->op_nodes()) {
    if (!live.count(n)) g->RemoveNode(n);
  }
}

// The backward body: pops the iteration's entry state and the intermediates the gradient of
// the body reads, and applies that gradient, the gradients of the body's outputs being the
// loop's gradients so far. Loop variables: counter, count, grads..., state accumulators...,
// intermediate accumulators..., invariant values... `intermediates` receives what the forward
// loop must push.
StatusOr<FunctionDef> BackwardBody(FunctionDefLibrary& library, const NameAttrList& body,
                                   const LoopVars& vars, std::vector<DataType>* types,
                                   std::vector<Intermediate>* intermediates) {
  ASSIGN_OR_RETURN(auto fb, InstantiateFunction(library, body));
  Graph* g = fb->graph.get();
  std::set<const Node*> forward;
  for (Node* n : g->op_nodes()) {
    if (n->type_string() != "_Arg" && n->type_string() != "_Retval") forward.insert(n);
  }
  Scope s = Scope::ForGraph(g).NewSubScope("backward");
  auto add_arg = [&](const std::string& name, DataType t) -> StatusOr<Node*> {
    return AddInterfaceNode(g, "_Arg", name, t, 0);  // indices set at the end
  };
  ASSIGN_OR_RETURN(Node * counter, add_arg("counter", DT_INT32));
  ASSIGN_OR_RETURN(Node * count, add_arg("count", DT_INT32));
  std::vector<Node*> grad_args;
  for (int i : vars.grads) {
    ASSIGN_OR_RETURN(Node * a, add_arg("grad", vars.types[i]));
    grad_args.push_back(a);
  }
  std::vector<Output> state(vars.types.size());
  std::vector<Node*> state_accs;
  std::vector<Output> popped_lists;
  for (int i : vars.varying) {
    ASSIGN_OR_RETURN(Node * acc, add_arg("accumulator", DT_VARIANT));
    state_accs.push_back(acc);
    Node* pop = ops::BuildOp(s, "TensorListPopBack", {Output(acc), ElementShapeUnknown(s)},
                             {{"element_dtype", AttrValue::Type(vars.types[i])}});
    RETURN_IF_ERROR(s.status());
    popped_lists.push_back(Output(pop, 0));
    state[i] = Output(pop, 1);
  }
  std::vector<Node*> invariant_args;
  for (int i : vars.invariant) {
    ASSIGN_OR_RETURN(Node * a, add_arg("invariant", vars.types[i]));
    invariant_args.push_back(a);
    state[i] = Output(a);
  }
  // The body now reads the popped state; its results are the forward outputs to differentiate.
  for (size_t i = 0; i < vars.types.size(); ++i) ReplaceArg(g, fb->arg_nodes[i], state[i]);
  std::vector<Output> results;
  for (Node* ret : fb->ret_nodes) {
    auto [src, out] = ret->input_node(0);
    results.push_back(Output(src, out));
    g->RemoveNode(ret);
  }
  std::vector<Output> ys, xs, dys;
  for (size_t k = 0; k < vars.grads.size(); ++k) {
    ys.push_back(results[vars.grads[k]]);
    xs.push_back(state[vars.grads[k]]);
    dys.push_back(Output(grad_args[k]));
  }
  std::vector<Output> dxs;
  GradientsOptions options;
  options.name = "gradients";
  RETURN_IF_ERROR(AddSymbolicGradients(Scope::ForGraph(g), ys, xs, dys, options, &dxs));
  for (size_t k = 0; k < dxs.size(); ++k) {
    if (!dxs[k].valid()) dxs[k] = ZerosLikeOf(s, xs[k]);
  }
  RETURN_IF_ERROR(s.status());

  // What the gradient reads of the forward computation comes from accumulators (constants and
  // resource handles are kept: nothing to accumulate).
  std::map<std::pair<const Node*, int>, std::vector<const Edge*>> reads;
  for (const Node* f : forward) {
    if (f->type_string() == "Const") continue;
    for (const Edge* e : f->out_edges()) {
      if (e->IsControlEdge() || forward.count(e->dst) || !e->dst->IsOp()) continue;
      if (RemoveRefType(f->output_type(e->src_output)) == DT_RESOURCE) continue;
      reads[{f, e->src_output}].push_back(e);
    }
  }
  std::vector<Node*> intermediate_accs;
  std::vector<Output> popped_intermediates;
  intermediates->clear();
  for (const auto& [tensor, edges] : reads) {
    const auto [f, output] = tensor;
    const DataType type = RemoveRefType(f->output_type(output));
    intermediates->push_back({f->name(), output, type});
    ASSIGN_OR_RETURN(Node * acc, add_arg("intermediate", DT_VARIANT));
    intermediate_accs.push_back(acc);
    Node* pop = ops::BuildOp(s, "TensorListPopBack", {Output(acc), ElementShapeUnknown(s)},
                             {{"element_dtype", AttrValue::Type(type)}});
    RETURN_IF_ERROR(s.status());
    popped_intermediates.push_back(Output(pop, 0));
    for (const Edge* e : edges) RETURN_IF_ERROR(g->UpdateEdge(pop, 1, e->dst, e->dst_input));
  }

  Output next = ops::Add(s, Output(counter), ops::Input(1));
  RETURN_IF_ERROR(s.status());
  std::vector<Output> rets{next, Output(count)};
  rets.insert(rets.end(), dxs.begin(), dxs.end());
  rets.insert(rets.end(), popped_lists.begin(), popped_lists.end());
  rets.insert(rets.end(), popped_intermediates.begin(), popped_intermediates.end());
  for (Node* a : invariant_args) rets.push_back(Output(a));
  for (size_t k = 0; k < rets.size(); ++k) {
    RETURN_IF_ERROR(AddRetval(g, "loop_var_next", rets[k], static_cast<int>(k)).status());
  }
  std::vector<Node*> args{counter, count};
  args.insert(args.end(), grad_args.begin(), grad_args.end());
  args.insert(args.end(), state_accs.begin(), state_accs.end());
  args.insert(args.end(), intermediate_accs.begin(), intermediate_accs.end());
  args.insert(args.end(), invariant_args.begin(), invariant_args.end());
  types->clear();
  for (size_t k = 0; k < args.size(); ++k) {
    args[k]->mutable_attrs()["index"] = AttrValue::Int(static_cast<int64_t>(k));
    types->push_back(args[k]->output_type(0));
  }
  RemoveDeadNodes(g);
  MergeNewFunctions(g->library(), library);
  return GraphToFunctionDef(*g, body.name + "_grad");
}

Status WhileGrad(const Scope& s, const Node& op, const GradOutputs& g, GradOutputs* out) {
  const std::string& node = op.name();
  ASSIGN_OR_RETURN(NameAttrList cond, GetFuncAttr(op.attrs(), "cond", node));
  ASSIGN_OR_RETURN(NameAttrList body, GetFuncAttr(op.attrs(), "body", node));
  FunctionDefLibrary& library = s.graph()->library();

  LoopVars vars;
  vars.types = op.input_types();
  int64_t max_trips = -1;  // unknown
  {
    ASSIGN_OR_RETURN(auto fb, InstantiateFunction(library, body));
    ASSIGN_OR_RETURN(auto cb, InstantiateFunction(library, cond));
    if (cb->ret_nodes.size() == 1) {
      if (std::optional<int64_t> bound = StaticTripBound(op, *cb, *fb)) max_trips = *bound;
    }
    if (fb->ret_nodes.size() != vars.types.size()) {
      return Error("the body '" + body.name + "' returns " +
                   std::to_string(fb->ret_nodes.size()) + " values for " +
                   std::to_string(vars.types.size()) + " loop variables");
    }
    for (size_t i = 0; i < vars.types.size(); ++i) {
      auto [src, out_index] = fb->ret_nodes[i]->input_node(0);
      bool unchanged = src == fb->arg_nodes[i] && out_index == 0;
      (unchanged ? vars.invariant : vars.varying).push_back(static_cast<int>(i));
      if (IsDifferentiable(vars.types[i])) vars.grads.push_back(static_cast<int>(i));
    }
  }
  for (int i : vars.varying) {
    if (RemoveRefType(vars.types[i]) == DT_RESOURCE) {
      return Error("loop variable " + std::to_string(i) +
                   " is a resource the body replaces; a While's gradient accumulates only "
                   "tensors");
    }
  }

  // The backward body first: it says which intermediates the forward loop must accumulate.
  std::vector<DataType> bwd_types;
  std::vector<Intermediate> intermediates;
  ASSIGN_OR_RETURN(FunctionDef bwd_body,
                   BackwardBody(library, body, vars, &bwd_types, &intermediates));
  ASSIGN_OR_RETURN(FunctionDef bwd_cond, BackwardCond(cond.name + "_grad", bwd_types));

  // The forward loop again, accumulating.
  const size_t num_accs = vars.varying.size() + intermediates.size();
  std::vector<DataType> extra{DT_INT32};
  for (size_t j = 0; j < num_accs; ++j) extra.push_back(DT_VARIANT);
  ASSIGN_OR_RETURN(FunctionDef fwd_cond, WidenCond(library, cond, extra));
  ASSIGN_OR_RETURN(FunctionDef fwd_body, AccumulatingBody(library, body, vars, intermediates));
  NameAttrList fwd_cond_ref = AddFunction(library, std::move(fwd_cond));
  NameAttrList fwd_body_ref = AddFunction(library, std::move(fwd_body));
  NameAttrList bwd_body_ref = AddFunction(library, std::move(bwd_body));
  NameAttrList bwd_cond_ref = AddFunction(library, std::move(bwd_cond));

  std::vector<Output> fwd_inputs;
  for (int i = 0; i < op.num_inputs(); ++i) fwd_inputs.push_back(In(op, i));
  fwd_inputs.push_back(ops::Const(s, int32_t{0}));
  for (int i : vars.varying) fwd_inputs.push_back(EmptyList(s, vars.types[i], max_trips));
  for (const Intermediate& m : intermediates) {
    fwd_inputs.push_back(EmptyList(s, m.type, max_trips));
  }
  RETURN_IF_ERROR(s.status());
  AttrMap fwd_attrs = op.attrs();
  std::vector<DataType> fwd_types = vars.types;
  fwd_types.insert(fwd_types.end(), extra.begin(), extra.end());
  fwd_attrs["T"] = TypeList(fwd_types);
  fwd_attrs["cond"] = AttrValue::Func(fwd_cond_ref);
  fwd_attrs["body"] = AttrValue::Func(fwd_body_ref);
  if (const AttrValue* shapes = FindAttr(op.attrs(), "output_shapes");
      shapes && shapes->kind() == AttrValue::Kind::kList && shapes->list().size() > 0) {
    AttrListValue list = shapes->list();
    for (size_t j = 0; j < extra.size(); ++j) list.shape.push_back(PartialShape::Scalar());
    fwd_attrs["output_shapes"] = AttrValue::List(std::move(list));
  }
  Node* fwd = s.AddNode(op.type_string(), fwd_inputs, fwd_attrs, "forward_accumulating");
  RETURN_IF_ERROR(s.status());
  const int n = static_cast<int>(vars.types.size());

  std::vector<Output> bwd_inputs{ops::Const(s, int32_t{0}), Output(fwd, n)};
  for (int i : vars.grads) {
    Output gi = g[i];
    if (!gi.valid()) gi = ZerosLikeOf(s, Out(op, i));
    bwd_inputs.push_back(gi);
  }
  for (size_t j = 0; j < num_accs; ++j) {
    bwd_inputs.push_back(Output(fwd, n + 1 + static_cast<int>(j)));
  }
  for (int i : vars.invariant) bwd_inputs.push_back(In(op, i));
  RETURN_IF_ERROR(s.status());
  AttrMap bwd_attrs;
  bwd_attrs["T"] = TypeList(bwd_types);
  bwd_attrs["cond"] = AttrValue::Func(bwd_cond_ref);
  bwd_attrs["body"] = AttrValue::Func(bwd_body_ref);
  if (const AttrValue* p = FindAttr(op.attrs(), "parallel_iterations")) {
    bwd_attrs["parallel_iterations"] = *p;
  }
  if (const AttrValue* lower = FindAttr(op.attrs(), "_lower_using_switch_merge")) {
    bwd_attrs["_lower_using_switch_merge"] = *lower;
  }
  Node* bwd = s.AddNode(op.type_string(), bwd_inputs, bwd_attrs, "backward");
  RETURN_IF_ERROR(s.status());

  // The loop's consumers read the accumulating loop's outputs (the same values), so the forward
  // pass runs once and what the gradient pops is what the loss was computed from, as while_v2
  // rewrites the forward While in place. The original loop runs only where it is fetched.
  Graph* graph = s.graph();
  std::vector<const Edge*> uses(op.out_edges().begin(), op.out_edges().end());
  for (const Edge* e : uses) {
    if (e->IsControlEdge() || e->dst == fwd || e->dst == bwd || !e->dst->IsOp()) continue;
    RETURN_IF_ERROR(graph->UpdateEdge(fwd, e->src_output, e->dst, e->dst_input));
  }

  out->assign(op.num_inputs(), NoGradient());
  for (size_t k = 0; k < vars.grads.size(); ++k) {
    (*out)[vars.grads[k]] = Output(bwd, 2 + static_cast<int>(k));
  }
  return s.status();
}

}  // namespace

void RegisterWhileGradients(OpRegistry& r) {
  Set(r, "While", WhileGrad);
  Set(r, "StatelessWhile", WhileGrad);
}

}  // namespace xlens::graph::grad
