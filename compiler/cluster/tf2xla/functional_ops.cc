#include "compiler/cluster/tf2xla/while_op.h"

#include <fmt/format.h>

#include <memory>
#include <set>

namespace xlens::cluster {

using graph::DataType;
using graph::Node;

namespace {

Status NodeError(const Node& node, const std::string& message) {
  return Status::Error(fmt::format("node '{}' ({}): {}", node.name(), node.type_string(), message));
}

StatusOr<std::unique_ptr<graph::FunctionBody>> Instantiate(const Node& node,
                                                           const std::string& attr,
                                                           const graph::FunctionDefLibrary& library,
                                                           const graph::OpRegistry& registry) {
  const graph::AttrValue* f = graph::FindAttr(node.attrs(), attr);
  if (f == nullptr || f->kind() != graph::AttrValue::Kind::kFunc) {
    return NodeError(node, fmt::format("missing function attr '{}'", attr));
  }
  auto body = graph::InstantiateFunction(library, f->func(), &registry);
  if (!body.ok()) {
    return NodeError(node, fmt::format("its {} '{}': {}", attr, f->func().name,
                                       body.status().message()));
  }
  return body;
}

// One loop computation (cond or body) over the state tuple: its parameter, split into the
// loop variables as the function sees them. A variable becomes a resource of the computation,
// its value the state's element.
struct LoopComputation {
  HloComputation* computation = nullptr;
  std::unique_ptr<HloBuilder> builder;
  std::vector<std::unique_ptr<XlaResource>> resources;  // by loop variable; null for values
  std::vector<XlaExpression> args;
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

}  // namespace

bool IsFunctionalWhile(const std::string& op) { return op == "While" || op == "StatelessWhile"; }

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
  // The initial state: every loop variable's value, a variable's current value included.
  std::vector<HloInstruction*> init;
  std::set<const XlaResource*> seen;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const XlaExpression& e = inputs[i];
    switch (e.kind()) {
      case XlaExpression::Kind::kResource: {
        const XlaResource* r = e.resource();
        if (r->value == nullptr) {
          return NodeError(node, fmt::format("loop variable {} is variable '{}', which is "
                                             "uninitialized",
                                             i, r->name));
        }
        if (!seen.insert(r).second) {
          return NodeError(node, fmt::format("variable '{}' is passed to the loop twice", r->name));
        }
        init.push_back(r->value);
        break;
      }
      case XlaExpression::Kind::kConstant: {
        auto c = ConstantToHlo(builder, e.constant_value());
        if (!c.ok()) return NodeError(node, fmt::format("loop variable {}: {}", i, c.status().message()));
        init.push_back(*c);
        break;
      }
      case XlaExpression::Kind::kXlaOp:
        init.push_back(e.handle());
        break;
      default:
        return NodeError(node, fmt::format("loop variable {} has no value", i));
    }
  }
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
  ASSIGN_OR_RETURN(std::vector<XlaExpression> body_out,
                   lower_body(*body->graph, b.builder.get(), b.args));
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
      outputs.push_back(XlaExpression::XlaOp(element, inputs[i].dtype()));
    }
  }
  return outputs;
}

}  // namespace xlens::cluster
