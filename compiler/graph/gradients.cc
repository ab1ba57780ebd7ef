#include "compiler/graph/gradients.h"

#include <algorithm>
#include <deque>
#include <map>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/grads/grad_util.h"

namespace xlens::graph {

namespace grad {
std::map<std::pair<const Node*, int>, PartialShape>* SetRefinedShapeTable(
    std::map<std::pair<const Node*, int>, PartialShape>* table);
}  // namespace grad

namespace {

// backprop_util.IsTrainable: the types a gradient flows through.
bool IsTrainable(DataType t) {
  switch (RemoveRefType(t)) {
    case DT_HALF:
    case DT_FLOAT:
    case DT_DOUBLE:
    case DT_BFLOAT16:
    case DT_COMPLEX64:
    case DT_COMPLEX128:
    case DT_RESOURCE:
    case DT_VARIANT:
      return true;
    default:
      return false;
  }
}

std::string Describe(const Node* n) { return "node '" + n->name() + "' (" + n->type_string() + ")"; }

// The colocation class of a tensor, as Python writes it ("loc:@producer").
AttrValue ColocationOf(const Output& t) {
  if (const AttrValue* c = FindAttr(t.node->attrs(), "_class")) return *c;
  AttrListValue list;
  list.s.push_back("loc:@" + t.node->name());
  return AttrValue::List(std::move(list));
}

class ScopedShapeTable {
 public:
  ScopedShapeTable() : previous_(grad::SetRefinedShapeTable(&table_)) {}
  ~ScopedShapeTable() { grad::SetRefinedShapeTable(previous_); }

 private:
  std::map<std::pair<const Node*, int>, PartialShape> table_;
  // The enclosing computation's table: a While's gradient differentiates its body inside the
  // gradient of the graph around it.
  std::map<std::pair<const Node*, int>, PartialShape>* previous_;
};

// The zeros for an output nobody sent a gradient to: control_flow_state.ZerosLike, which
// calls array_ops.zeros_like(optimize=False), so always a ZerosLike node "zeros_like" in the
// gradients scope, whatever is known of the shape.
Output ZerosForOutput(const Scope& scope, const Output& t) {
  return ops::AsOutput(ops::BuildOp(scope, "ZerosLike", {t}, {}, "zeros_like"));
}

}  // namespace

std::vector<Output> GradientTuple(const Scope& scope, const std::vector<Output>& tensors) {
  Scope s = scope.NewSubScope("tuple");
  std::vector<Node*> gating;
  for (const Output& t : tensors) {
    if (t.valid() && std::find(gating.begin(), gating.end(), t.node) == gating.end()) {
      gating.push_back(t.node);
    }
  }
  Node* gate = ops::NoOp(s.WithControlDependencies(gating).WithOpName("group_deps"));
  std::vector<Output> out;
  for (const Output& t : tensors) {
    if (!t.valid()) {
      out.push_back(Output());
      continue;
    }
    AttrMap attrs;
    attrs["_class"] = ColocationOf(t);
    Node* id = s.WithControlDependencies(std::vector<Node*>{gate})
                   .AddNode("Identity", {t}, std::move(attrs), "control_dependency");
    out.push_back(ops::AsOutput(id));
  }
  return out;
}

Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& outputs,
                            const std::vector<Output>& inputs,
                            const std::vector<Output>& grad_outputs,
                            std::vector<Output>* grad_inputs) {
  return AddSymbolicGradients(scope, outputs, inputs, grad_outputs, GradientsOptions{},
                              grad_inputs);
}

Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& outputs,
                            const std::vector<Output>& inputs,
                            const std::vector<Output>& grad_outputs,
                            const GradientsOptions& options, std::vector<Output>* grad_inputs) {
  RETURN_IF_ERROR(scope.status());
  if (!grad_outputs.empty() && grad_outputs.size() != outputs.size()) {
    return Error("gradients: " + std::to_string(grad_outputs.size()) +
                 " output gradients given for " + std::to_string(outputs.size()) + " outputs");
  }
  for (const Output& o : outputs) {
    if (!o.valid()) return Error("gradients: an output is not the output of a node");
  }
  for (const Output& i : inputs) {
    if (!i.valid()) return Error("gradients: an input is not the output of a node");
  }
  ScopedShapeTable shape_table;
  Graph* graph = scope.graph();
  const Scope gs = scope.NewSubScope(options.name);

  // grad_ys: ones shaped like each output, as _DefaultGradYs makes them.
  std::vector<Output> grad_ys = grad_outputs;
  if (grad_ys.empty()) {
    for (size_t i = 0; i < outputs.size(); ++i) {
      Output shape = grad::ShapeOf(gs, outputs[i]);
      Scope const_scope = gs;
      Scope fill_scope = gs.NewOpScope("grad_ys_" + std::to_string(i), &const_scope);
      Output one = ops::ScalarConst(const_scope, RemoveRefType(outputs[i].type()), 1.0);
      grad_ys.push_back(ops::Fill(fill_scope, shape, one));
    }
  }
  RETURN_IF_ERROR(gs.status());

  // reached: forward from the inputs along trainable tensors (_MarkReachedOps).
  std::unordered_set<const Node*> reached;
  {
    std::deque<const Node*> queue;
    for (const Output& x : inputs) queue.push_back(x.node);
    while (!queue.empty()) {
      const Node* n = queue.front();
      queue.pop_front();
      if (!reached.insert(n).second) continue;
      for (const Edge* e : n->out_edges()) {
        if (e->IsControlEdge() || !e->dst->IsOp()) continue;
        if (IsTrainable(n->output_type(e->src_output))) queue.push_back(e->dst);
      }
    }
  }
  std::unordered_set<const Node*> reachable_to_ops;
  for (const Output& y : outputs) {
    if (reached.count(y.node)) reachable_to_ops.insert(y.node);
  }
  // between: backward from the outputs, over reached nodes (_PendingCount).
  std::unordered_set<const Node*> between;
  {
    std::deque<const Node*> queue;
    for (const Output& y : outputs) queue.push_back(y.node);
    std::unordered_set<const Node*> remaining = reached;
    while (!queue.empty()) {
      const Node* n = queue.front();
      queue.pop_front();
      if (!remaining.erase(n)) continue;
      between.insert(n);
      for (int i = 0; i < n->num_inputs(); ++i) {
        auto [src, idx] = n->input_node(i);
        if (src != nullptr) queue.push_back(src);
      }
    }
  }
  std::unordered_map<const Node*, int> pending;
  for (const Node* n : between) {
    for (int i = 0; i < n->num_inputs(); ++i) {
      auto [src, idx] = n->input_node(i);
      if (src != nullptr && between.count(src)) ++pending[src];
    }
  }

  // grads[node][output]: the gradients received so far.
  std::unordered_map<const Node*, std::vector<std::vector<Output>>> grads;
  auto set_grad = [&](const Output& t, const Output& g) {
    auto& per_node = grads[t.node];
    if (per_node.empty()) per_node.resize(t.node->num_outputs());
    per_node[t.index].push_back(g);
  };
  for (size_t i = 0; i < outputs.size(); ++i) set_grad(outputs[i], grad_ys[i]);

  std::deque<Node*> queue;
  std::unordered_set<const Node*> queued_outputs;
  for (const Output& y : outputs) {
    if (pending[y.node] == 0 && reachable_to_ops.count(y.node) &&
        queued_outputs.insert(y.node).second) {
      queue.push_back(y.node);
    }
  }
  // Inputs whose own inputs get no gradient stop the backward walk (_StopOps).
  std::unordered_set<const Node*> stop_ops;
  for (const Output& x : inputs) {
    bool is_stop = true;
    for (int i = 0; i < x.node->num_inputs(); ++i) {
      auto [src, idx] = x.node->input_node(i);
      if (src != nullptr && pending[src] > 0) is_stop = false;
    }
    if (is_stop) stop_ops.insert(x.node);
  }

  while (!queue.empty()) {
    Node* op = queue.front();
    queue.pop_front();
    // _AggregatedGrads: one gradient per output, several summed with AddN.
    auto& per_node = grads[op];
    if (per_node.empty()) per_node.resize(op->num_outputs());
    std::vector<Output> out_grads(op->num_outputs());
    bool has_out_grads = false;
    for (int i = 0; i < op->num_outputs(); ++i) {
      auto& list = per_node[i];
      if (list.empty()) continue;
      has_out_grads = true;
      if (list.size() == 1) {
        out_grads[i] = list[0];
      } else {
        out_grads[i] = ops::AddN(gs, list);
        grad::RefineShape(out_grads[i], grad::StaticShape(gs, list[0]));
      }
      list = {out_grads[i]};
    }
    std::vector<Output> in_grads(op->num_inputs());
    if (has_out_grads && !stop_ops.count(op)) {
      const GradFn& grad_fn = op->registration().gradient;
      if (!grad_fn) {
        return Error(Describe(op) +
                     ": no gradient is defined for this op, and a gradient must flow through it "
                     "from the outputs to the inputs");
      }
      for (int i = 0; i < op->num_outputs(); ++i) {
        if (!out_grads[i].valid() && IsTrainable(op->output_type(i))) {
          out_grads[i] = ZerosForOutput(gs, Output(op, i));
        }
      }
      const Scope op_scope = gs.NewSubScope(op->name() + "_grad");
      std::vector<Output> produced;
      Status st = grad_fn(op_scope, *op, out_grads, &produced);
      if (st.ok()) st = op_scope.status();
      if (!st.ok()) return st.WithContext("building the gradient of " + Describe(op));
      if (produced.size() != static_cast<size_t>(op->num_inputs())) {
        return Error("the gradient of " + Describe(op) + " returned " +
                     std::to_string(produced.size()) + " gradients for " +
                     std::to_string(op->num_inputs()) + " inputs");
      }
      int non_null = 0;
      for (const Output& g : produced) non_null += g.valid() ? 1 : 0;
      if (options.gate_gradients && non_null > 1) produced = GradientTuple(op_scope, produced);
      RETURN_IF_ERROR(op_scope.status());
      in_grads = std::move(produced);
    }
    for (int i = 0; i < op->num_inputs(); ++i) {
      auto [src, idx] = op->input_node(i);
      if (src == nullptr || !in_grads[i].valid()) continue;
      if (op->input_type(i) != DT_RESOURCE) {
        grad::RefineShape(in_grads[i], grad::StaticShape(gs, Output(src, idx)));
      }
      set_grad(Output(src, idx), in_grads[i]);
    }
    // _UpdatePendingAndEnqueueReady.
    for (int i = 0; i < op->num_inputs(); ++i) {
      auto [src, idx] = op->input_node(i);
      if (src == nullptr || !between.count(src)) continue;
      if (--pending[src] == 0) queue.push_back(src);
    }
  }

  grad_inputs->clear();
  for (const Output& x : inputs) {
    Output g;
    auto it = grads.find(x.node);
    if (it != grads.end() && static_cast<size_t>(x.index) < it->second.size()) {
      auto& list = it->second[x.index];
      if (list.size() == 1) {
        g = list[0];
      } else if (list.size() > 1) {
        g = ops::AddN(gs, list);
      }
    }
    grad_inputs->push_back(g);
  }
  return gs.status();
}

}  // namespace xlens::graph
