#include "compiler/cluster/tf2xla/functional_ops.h"

#include <fmt/format.h>

#include <memory>
#include <optional>
#include <set>

#include "compiler/cluster/tf2xla/tensor_list_ops.h"
#include "compiler/cluster/tf2xla/while_resources.h"
#include "compiler/hlo/computation.h"

namespace xlens::cluster {

using graph::DataType;
using graph::Node;

namespace {

Status NodeError(const Node& node, const std::string& message) {
  return Status::Error(fmt::format("node '{}' ({}): {}", node.name(), node.type_string(), message));
}

StatusOr<std::unique_ptr<graph::FunctionBody>> InstantiateFunc(
    const Node& node, const std::string& what, const graph::NameAttrList& func,
    const graph::FunctionDefLibrary& library, const graph::OpRegistry& registry) {
  auto body = graph::InstantiateFunction(library, func, &registry);
  if (!body.ok()) {
    return NodeError(node, fmt::format("its {} '{}': {}", what, func.name,
                                       body.status().message()));
  }
  return body;
}

StatusOr<std::unique_ptr<graph::FunctionBody>> Instantiate(const Node& node,
                                                           const std::string& attr,
                                                           const graph::FunctionDefLibrary& library,
                                                           const graph::OpRegistry& registry) {
  const graph::AttrValue* f = graph::FindAttr(node.attrs(), attr);
  if (f == nullptr || f->kind() != graph::AttrValue::Kind::kFunc) {
    return NodeError(node, fmt::format("missing function attr '{}'", attr));
  }
  return InstantiateFunc(node, attr, f->func(), library, registry);
}

// One computation of a control-flow op (a loop's cond or body, a branch) over a tuple of values:
// its parameter, split into the arguments as the function sees them. A variable becomes a
// resource of the computation, its value the tuple's element.
struct LoopComputation {
  HloComputation* computation = nullptr;
  std::unique_ptr<HloBuilder> builder;
  std::vector<std::unique_ptr<XlaResource>> resources;  // by argument; null for values
  std::vector<XlaExpression> args;
  HloInstruction* param = nullptr;  // the state tuple
};

StatusOr<LoopComputation> StartLoopComputation(const std::string& prefix, HloBuilder& outer,
                                               const Shape& state,
                                               const std::vector<XlaExpression>& inputs) {
  LoopComputation c;
  HloModule* module = outer.module();
  c.computation = module->AddComputationBefore(
      std::make_unique<HloComputation>(module->UniqueComputationName(prefix)),
      outer.computation());
  c.builder = std::make_unique<HloBuilder>(module, c.computation);
  c.builder->SetMetadata(outer.metadata(), "");
  ASSIGN_OR_RETURN(HloInstruction * tuple, c.builder->Parameter(0, state, "arg_tuple"));
  c.param = tuple;
  c.resources.resize(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSIGN_OR_RETURN(HloInstruction * element,
                     c.builder->GetTupleElement(tuple, static_cast<int64_t>(i)));
    if (inputs[i].kind() == XlaExpression::Kind::kResource) {
      const XlaResource* outer_resource = inputs[i].resource();
      auto r = std::make_unique<XlaResource>(*outer_resource);
      r->initial_value = element;
      r->value = element;
      r->modified = false;
      c.args.push_back(XlaExpression::Resource(r.get()));
      c.resources[i] = std::move(r);
    } else {
      c.args.push_back(XlaExpression::XlaOp(element, inputs[i].dtype()));
    }
  }
  return c;
}


// The values of `inputs` as HLO: a variable's current value, a constant's instruction. Errors
// name the node and the `what` (loop variable, input) at fault. With `placeholders`, a
// TensorArray or stack without a value yet is an s32[] 0 (a first compilation of a loop body
// learns its value).
StatusOr<std::vector<HloInstruction*>> ValuesOf(const Node& node, const std::string& what,
                                                const std::vector<XlaExpression>& inputs,
                                                HloBuilder& builder, bool placeholders = false) {
  std::vector<HloInstruction*> values;
  std::set<const XlaResource*> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const XlaExpression& e = inputs[i];
    switch (e.kind()) {
      case XlaExpression::Kind::kResource: {
        const XlaResource* r = e.resource();
        if (r->value == nullptr && placeholders && IsMadeResource(e)) {
          auto zero = builder.ScalarConstant(PrimitiveType::S32, 0);
          if (!zero.ok()) return NodeError(node, zero.status().message());
          values.push_back(*zero);
          seen.insert(r);
          break;
        }
        if (r->value == nullptr) {
          return NodeError(node, fmt::format("{} {} is variable '{}', which is uninitialized",
                                             what, i, r->name));
        }
        if (!seen.insert(r).second) {
          return NodeError(node, fmt::format("variable '{}' is passed in twice", r->name));
        }
        values.push_back(r->value);
        break;
      }
      case XlaExpression::Kind::kConstant: {
        auto c = ConstantToHlo(builder, e.constant_value());
        if (!c.ok()) return NodeError(node, fmt::format("{} {}: {}", what, i, c.status().message()));
        values.push_back(*c);
        break;
      }
      case XlaExpression::Kind::kXlaOp:
        values.push_back(e.handle());
        break;
      default:
        return NodeError(node, fmt::format("{} {} has no value", what, i));
    }
  }
  return values;
}

// What the first compilation of a loop body says about the loop's lists (tf2xla's while_op.cc
// compiles the body once to learn the shapes of lists that enter uninitialized): per loop
// variable, the list shape it leaves the body with, and the constant every element of it holds
// when the body only pushes that constant onto a list that entered empty.
struct FirstPass {
  std::vector<std::optional<Shape>> list_shapes;
  std::vector<std::optional<graph::Tensor>> uniform;
  // Per loop variable that is a TensorArray or stack: the value the body leaves it with, and the
  // sources of the gradient arrays the body takes of it (while_resources.h).
  std::vector<std::optional<Shape>> resource_shapes;
  std::vector<std::set<std::string>> gradient_sources;
};

// Whether loop variable `i` is a list nothing has been pushed onto (uninitialized or empty).
bool EntersFresh(const std::vector<XlaExpression>& inputs, size_t i) {
  return inputs[i].dtype() == DataType::DT_VARIANT && IsFreshList(inputs[i]);
}

StatusOr<FirstPass> CompileBodyOnce(const graph::FunctionBody& body, const Shape& state,
                                    const std::vector<XlaExpression>& inputs, HloBuilder& outer,
                                    const FunctionBodyLowering& lower_body) {
  // A module of its own, thrown away: the second compilation is the one the loop calls.
  HloModule scratch(outer.module()->name() + ".first_pass");
  HloComputation* entry =
      scratch.AddComputation(std::make_unique<HloComputation>("entry"), /*is_entry=*/true);
  HloBuilder builder(&scratch, entry);
  builder.SetMetadata(outer.metadata(), "");
  FirstPass pass;
  {
    ASSIGN_OR_RETURN(LoopComputation b, StartLoopComputation("body", builder, state, inputs));
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (EntersFresh(inputs, i)) b.args[i] = b.args[i].WithFreshList();
      if (IsMadeResource(inputs[i])) PrepareFirstPassCopy(*inputs[i].resource(), *b.resources[i]);
    }
    ASSIGN_OR_RETURN(std::vector<XlaExpression> out, lower_body(*body.graph, b.builder.get(), b.args));
    pass.resource_shapes.resize(inputs.size());
    pass.gradient_sources.resize(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!IsMadeResource(inputs[i])) continue;
      const XlaResource& copy = *b.resources[i];
      if (copy.value != nullptr) pass.resource_shapes[i] = copy.value->shape();
      for (const auto& [source, grad] : copy.gradients) pass.gradient_sources[i].insert(source);
    }
    for (size_t i = 0; i < inputs.size() && i < out.size(); ++i) {
      const XlaExpression& e = out[i];
      if (inputs[i].dtype() != DataType::DT_VARIANT || e.kind() != XlaExpression::Kind::kXlaOp) {
        pass.list_shapes.emplace_back();
        pass.uniform.emplace_back();
        continue;
      }
      pass.list_shapes.push_back(e.handle()->shape());
      const graph::Tensor* held = e.uniform_list_element();
      pass.uniform.push_back(held != nullptr && EntersFresh(inputs, i)
                                 ? std::optional<graph::Tensor>(*held)
                                 : std::nullopt);
    }
  }
  return pass;
}

}  // namespace

bool IsFunctionalWhile(const std::string& op) { return op == "While" || op == "StatelessWhile"; }

bool IsFunctionalIf(const std::string& op) { return op == "If" || op == "StatelessIf"; }

bool IsFunctionalCase(const std::string& op) { return op == "Case" || op == "StatelessCase"; }

std::vector<graph::NameAttrList> FunctionalOpFunctions(const Node& node) {
  const std::string& op = node.type_string();
  std::vector<std::string> attrs;
  if (IsFunctionalWhile(op)) attrs = {"cond", "body"};
  if (IsFunctionalIf(op)) attrs = {"then_branch", "else_branch"};
  std::vector<graph::NameAttrList> out;
  for (const std::string& attr : attrs) {
    const graph::AttrValue* f = graph::FindAttr(node.attrs(), attr);
    if (f != nullptr && f->kind() == graph::AttrValue::Kind::kFunc) out.push_back(f->func());
  }
  if (IsFunctionalCase(op)) {
    const graph::AttrValue* f = graph::FindAttr(node.attrs(), "branches");
    if (f != nullptr && f->kind() == graph::AttrValue::Kind::kList) out = f->list().func;
  }
  return out;
}

StatusOr<std::vector<XlaExpression>> LowerWhile(const Node& node,
                                                const std::vector<XlaExpression>& inputs,
                                                const graph::FunctionDefLibrary& library,
                                                const graph::OpRegistry& registry,
                                                HloBuilder& builder,
                                                const FunctionBodyLowering& lower_body) {
  ASSIGN_OR_RETURN(auto cond, Instantiate(node, "cond", library, registry));
  ASSIGN_OR_RETURN(auto body, Instantiate(node, "body", library, registry));
  if (body->ret_types.size() != inputs.size() || body->arg_types.size() != inputs.size() ||
      cond->arg_types.size() != inputs.size()) {
    return NodeError(node, fmt::format("its cond and body must take and the body return the {} "
                                       "loop variables",
                                       inputs.size()));
  }
  // The initial state: every loop variable's value, a variable's current value included (a
  // TensorArray or stack without one yet learns it from the first compilation below).
  bool made = false;
  for (const XlaExpression& e : inputs) made |= IsMadeResource(e);
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> init,
                   ValuesOf(node, "loop variable", inputs, builder, /*placeholders=*/made));
  // Lists every element of which is one constant stay so through the loop when the body only
  // pops them or pushes that constant; the body sees them so and pops the constant.
  std::vector<std::optional<graph::Tensor>> uniform(inputs.size());
  bool fresh = false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (inputs[i].dtype() != DataType::DT_VARIANT) continue;
    if (const graph::Tensor* held = inputs[i].uniform_list_element()) uniform[i] = *held;
    fresh |= EntersFresh(inputs, i);
  }
  std::vector<CarriedGradient> carried;
  if (fresh || made) {
    // Lists that enter uninitialized take the shape the body's first write gives them, and
    // lists that enter empty the constant the body pushes, from a first compilation of the body;
    // so do TensorArrays and stacks, and the gradient arrays the body takes are made for the
    // loop to carry.
    std::vector<Shape> first_shapes;
    for (HloInstruction* v : init) first_shapes.push_back(v->shape());
    Shape first_state = Shape::Tuple(first_shapes);
    first_state.SetDefaultLayout();
    auto first = CompileBodyOnce(*body, first_state, inputs, builder, lower_body);
    if (!first.ok()) return NodeError(node, "its body: " + first.status().message());
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (first->uniform[i]) uniform[i] = first->uniform[i];
      if (inputs[i].dtype() != DataType::DT_VARIANT || !IsUninitializedTensorList(init[i])) {
        continue;
      }
      if (!first->list_shapes[i] || !first->list_shapes[i]->IsTuple()) continue;
      auto initial = InitialListOfShape(builder, *first->list_shapes[i]);
      if (!initial.ok()) return NodeError(node, initial.status().message());
      if (initial.value()->shape().tuple_shapes()[0].dimensions()[0] !=
          init[i]->shape().dimensions()[0]) {
        return NodeError(node, fmt::format("loop variable {}: the body resizes its list", i));
      }
      init[i] = *initial;
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (!IsMadeResource(inputs[i]) || inputs[i].resource()->value != nullptr) continue;
      if (!first->resource_shapes[i]) {
        return NodeError(node, fmt::format("loop variable {} is '{}', which the body leaves "
                                           "without a value",
                                           i, inputs[i].resource()->name));
      }
      XlaResource* r = inputs[i].resource();
      auto zeros = ZerosOfShape(builder, *first->resource_shapes[i]);
      if (!zeros.ok()) return NodeError(node, zeros.status().message());
      r->value = r->initial_value = init[i] = *zeros;
    }
    auto gradients = GradientsToCarry(builder, inputs, first->gradient_sources);
    if (!gradients.ok()) return NodeError(node, gradients.status().message());
    carried = std::move(*gradients);
  }
  const size_t num_vars = init.size();
  for (const CarriedGradient& g : carried) init.push_back(g.outer->value);
  std::vector<Shape> element_shapes;
  for (HloInstruction* v : init) element_shapes.push_back(v->shape());
  Shape state = Shape::Tuple(element_shapes);
  state.SetDefaultLayout();

  // cond: the state -> pred[].
  ASSIGN_OR_RETURN(LoopComputation c, StartLoopComputation("cond", builder, state, inputs));
  ASSIGN_OR_RETURN(std::vector<XlaExpression> cond_out,
                   lower_body(*cond->graph, c.builder.get(), c.args));
  if (cond_out.size() != 1) {
    return NodeError(node, fmt::format("its cond returns {} values, not one", cond_out.size()));
  }
  HloInstruction* predicate = nullptr;
  if (cond_out[0].kind() == XlaExpression::Kind::kConstant) {
    ASSIGN_OR_RETURN(predicate, ConstantToHlo(*c.builder, cond_out[0].constant_value()));
  } else if (cond_out[0].kind() == XlaExpression::Kind::kXlaOp) {
    predicate = cond_out[0].handle();
  }
  if (predicate == nullptr || predicate->shape().element_type() != PrimitiveType::PRED ||
      predicate->shape().rank() != 0) {
    return NodeError(node, "its cond must return a boolean scalar");
  }
  c.computation->set_root_instruction(predicate);

  // body: the state -> the next state; a variable's element is its value after the body.
  ASSIGN_OR_RETURN(LoopComputation b, StartLoopComputation("body", builder, state, inputs));
  {
    Status bound = BindCarriedGradients(*b.builder, b.param, num_vars, carried, b.resources);
    if (!bound.ok()) return NodeError(node, bound.message());
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (uniform[i]) b.args[i] = b.args[i].WithUniformListElement(*uniform[i]);
  }
  ASSIGN_OR_RETURN(std::vector<XlaExpression> body_out,
                   lower_body(*body->graph, b.builder.get(), b.args));
  for (size_t i = 0; i < inputs.size() && i < body_out.size(); ++i) {
    if (!uniform[i]) continue;
    const graph::Tensor* held = body_out[i].kind() == XlaExpression::Kind::kXlaOp
                                    ? body_out[i].uniform_list_element()
                                    : nullptr;
    if (held == nullptr || !SameConstant(*held, *uniform[i])) {
      // The body writes something else into a list it may have read as all one constant.
      return NodeError(node, fmt::format("loop variable {} is a list of one constant element "
                                         "that the body writes other values into",
                                         i));
    }
  }
  std::vector<HloInstruction*> next;
  for (size_t i = 0; i < inputs.size(); ++i) {
    HloInstruction* v = nullptr;
    if (b.resources[i] != nullptr) {
      v = b.resources[i]->value;
      if (v == nullptr) return NodeError(node, "the body leaves a variable without a value");
    } else if (body_out[i].kind() == XlaExpression::Kind::kXlaOp) {
      v = body_out[i].handle();
    } else if (body_out[i].kind() == XlaExpression::Kind::kConstant) {
      ASSIGN_OR_RETURN(v, ConstantToHlo(*b.builder, body_out[i].constant_value()));
    } else {
      return NodeError(node, fmt::format("the body returns a resource for loop variable {}, "
                                         "which is a value",
                                         i));
    }
    if (!(v->shape() == element_shapes[i])) {
      return NodeError(node, fmt::format("the body changes loop variable {} from {} to {}; XLA's "
                                         "loop state keeps its shapes",
                                         i, element_shapes[i].ToString(false),
                                         v->shape().ToString(false)));
    }
    next.push_back(v);
  }
  for (size_t k = 0; k < carried.size(); ++k) {
    const CarriedGradient& g = carried[k];
    HloInstruction* v = b.resources[g.input]->gradients.at(g.source)->value;
    if (!(v->shape() == element_shapes[num_vars + k])) {
      return NodeError(node, fmt::format("the body changes the gradient array '{}'",
                                         g.outer->name));
    }
    next.push_back(v);
  }
  ASSIGN_OR_RETURN(HloInstruction * next_state, b.builder->Tuple(next));
  b.computation->set_root_instruction(next_state);

  ASSIGN_OR_RETURN(HloInstruction * state_in, builder.Tuple(init));
  auto loop = std::make_unique<HloInstruction>(HloOpcode::kWhile, Shape());
  loop->AppendOperand(state_in);
  loop->SetCalledComputation("condition", c.computation);
  loop->SetCalledComputation("body", b.computation);
  auto added = builder.Add(std::move(loop));
  if (!added.ok()) return NodeError(node, added.status().message());

  std::vector<XlaExpression> outputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    ASSIGN_OR_RETURN(HloInstruction * element,
                     builder.GetTupleElement(*added, static_cast<int64_t>(i)));
    if (inputs[i].kind() == XlaExpression::Kind::kResource) {
      XlaResource* r = inputs[i].resource();
      if (b.resources[i]->modified) {
        r->value = element;
        r->modified = true;
      }
      outputs.push_back(inputs[i]);
    } else {
      XlaExpression value = XlaExpression::XlaOp(element, inputs[i].dtype());
      outputs.push_back(uniform[i] ? value.WithUniformListElement(*uniform[i]) : value);
    }
  }
  for (size_t k = 0; k < carried.size(); ++k) {
    ASSIGN_OR_RETURN(HloInstruction * element,
                     builder.GetTupleElement(*added, static_cast<int64_t>(num_vars + k)));
    carried[k].outer->value = element;
    carried[k].outer->modified = true;
  }
  return outputs;
}

StatusOr<std::vector<XlaExpression>> LowerConditional(const Node& node,
                                                      const std::vector<XlaExpression>& inputs,
                                                      const graph::FunctionDefLibrary& library,
                                                      const graph::OpRegistry& registry,
                                                      HloBuilder& builder,
                                                      const FunctionBodyLowering& lower_body) {
  const bool is_if = IsFunctionalIf(node.type_string());
  if (inputs.empty()) return NodeError(node, "it has no predicate");
  std::vector<std::unique_ptr<graph::FunctionBody>> functions;
  for (const graph::NameAttrList& f : FunctionalOpFunctions(node)) {
    ASSIGN_OR_RETURN(auto body, InstantiateFunc(node, "branch", f, library, registry));
    functions.push_back(std::move(body));
  }
  if (functions.size() != (is_if ? 2u : functions.size()) || functions.empty()) {
    return NodeError(node, is_if ? "it needs then_branch and else_branch"
                                 : "it needs at least one branch");
  }
  const std::vector<XlaExpression> args(inputs.begin() + 1, inputs.end());
  const XlaExpression& predicate = inputs[0];
  const PrimitiveType selector_type = is_if ? PrimitiveType::PRED : PrimitiveType::S32;
  const std::string selector_words = is_if ? "its predicate must be a boolean scalar"
                                           : "its branch index must be an int32 scalar";
  if (predicate.kind() == XlaExpression::Kind::kConstant) {
    // Known at compile time: the branch it picks, lowered in place (its writes are the
    // variables' own). An index out of range picks the last branch.
    const graph::Tensor& p = predicate.constant_value();
    if (p.dtype() != (is_if ? graph::DT_BOOL : graph::DT_INT32) || p.num_elements() != 1) {
      return NodeError(node, selector_words);
    }
    const int64_t value = static_cast<int64_t>(p.GetAsDouble(0));
    size_t taken = 0;
    if (is_if) {
      taken = value != 0 ? 0 : 1;
    } else {
      taken = value < 0 || value >= static_cast<int64_t>(functions.size())
                  ? functions.size() - 1
                  : static_cast<size_t>(value);
    }
    return lower_body(*functions[taken]->graph, &builder, args);
  }
  if (predicate.kind() != XlaExpression::Kind::kXlaOp ||
      predicate.handle()->shape().element_type() != selector_type ||
      predicate.handle()->shape().rank() != 0) {
    return NodeError(node, selector_words);
  }
  ASSIGN_OR_RETURN(std::vector<HloInstruction*> values, ValuesOf(node, "input", args, builder));
  std::vector<Shape> element_shapes;
  for (HloInstruction* v : values) element_shapes.push_back(v->shape());
  Shape operand_shape = Shape::Tuple(element_shapes);
  operand_shape.SetDefaultLayout();

  struct Branch {
    LoopComputation computation;
    std::vector<HloInstruction*> outputs;
  };
  std::vector<Branch> branches;
  for (size_t index = 0; index < functions.size(); ++index) {
    const graph::FunctionBody* fb = functions[index].get();
    Branch branch;
    const std::string prefix =
        is_if ? (index == 0 ? "then" : "else") : fmt::format("branch{}", index);
    ASSIGN_OR_RETURN(branch.computation,
                     StartLoopComputation(prefix, builder, operand_shape, args));
    HloBuilder& b = *branch.computation.builder;
    ASSIGN_OR_RETURN(std::vector<XlaExpression> out,
                     lower_body(*fb->graph, &b, branch.computation.args));
    for (size_t k = 0; k < out.size(); ++k) {
      if (out[k].kind() == XlaExpression::Kind::kXlaOp) {
        branch.outputs.push_back(out[k].handle());
      } else if (out[k].kind() == XlaExpression::Kind::kConstant) {
        ASSIGN_OR_RETURN(HloInstruction * c, ConstantToHlo(b, out[k].constant_value()));
        branch.outputs.push_back(c);
      } else {
        return NodeError(node, fmt::format("a branch returns a resource as output {}; XLA's "
                                           "conditional returns values",
                                           k));
      }
    }
    branches.push_back(std::move(branch));
  }
  const size_t num_outputs = branches[0].outputs.size();
  if (num_outputs != static_cast<size_t>(node.num_outputs())) {
    return NodeError(node, "its branches do not return the node's outputs");
  }
  for (const Branch& branch : branches) {
    if (branch.outputs.size() != num_outputs) {
      return NodeError(node, "its branches do not return the node's outputs");
    }
    for (size_t k = 0; k < num_outputs; ++k) {
      const Shape& a = branches[0].outputs[k]->shape();
      const Shape& b = branch.outputs[k]->shape();
      if (!(a == b)) {
        return NodeError(node, fmt::format("its branches return output {} as {} and as {}; "
                                           "XLA's conditional needs one shape",
                                           k, a.ToString(false), b.ToString(false)));
      }
    }
  }
  // Every variable any branch writes leaves as an extra result of all of them.
  std::vector<size_t> written;
  for (size_t i = 0; i < args.size(); ++i) {
    if (branches[0].computation.resources[i] == nullptr) continue;
    bool modified = false;
    for (const Branch& branch : branches) modified |= branch.computation.resources[i]->modified;
    if (modified) written.push_back(i);
  }
  for (Branch& branch : branches) {
    std::vector<HloInstruction*> results = branch.outputs;
    for (size_t i : written) {
      HloInstruction* v = branch.computation.resources[i]->value;
      if (!(v->shape() == element_shapes[i])) {
        return NodeError(node, fmt::format("a branch changes variable '{}' from {} to {}",
                                           branch.computation.resources[i]->name,
                                           element_shapes[i].ToString(false),
                                           v->shape().ToString(false)));
      }
      results.push_back(v);
    }
    ASSIGN_OR_RETURN(HloInstruction * root, branch.computation.builder->Tuple(results));
    branch.computation.computation->set_root_instruction(root);
  }

  ASSIGN_OR_RETURN(HloInstruction * operand, builder.Tuple(values));
  auto conditional = std::make_unique<HloInstruction>(HloOpcode::kConditional, Shape());
  conditional->AppendOperand(predicate.handle());
  std::vector<HloComputation*> computations;
  for (const Branch& branch : branches) {
    conditional->AppendOperand(operand);
    computations.push_back(branch.computation.computation);
  }
  conditional->SetCalledComputations("branch_computations", std::move(computations));
  auto added = builder.Add(std::move(conditional));
  if (!added.ok()) return NodeError(node, added.status().message());

  std::vector<XlaExpression> outputs;
  for (size_t k = 0; k < num_outputs; ++k) {
    ASSIGN_OR_RETURN(HloInstruction * element,
                     builder.GetTupleElement(*added, static_cast<int64_t>(k)));
    outputs.push_back(XlaExpression::XlaOp(element, node.output_type(static_cast<int>(k))));
  }
  for (size_t j = 0; j < written.size(); ++j) {
    ASSIGN_OR_RETURN(HloInstruction * element,
                     builder.GetTupleElement(*added, static_cast<int64_t>(num_outputs + j)));
    XlaResource* r = args[written[j]].resource();
    r->value = element;
    r->modified = true;
  }
  return outputs;
}

}  // namespace xlens::cluster
