#include "compiler/cluster/tf2xla/xla_compiler.h"

#include <fmt/format.h>

#include <map>
#include <set>
#include <utility>

#include "compiler/cluster/tf2xla/hlo_builder.h"
#include "compiler/cluster/tf2xla/function_call_ops.h"
#include "compiler/cluster/tf2xla/functional_ops.h"
#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/attr_value.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/hlo/verifier.h"
#include "compiler/support/thread_pool.h"

namespace xlens::cluster {

using graph::DataType;
using graph::Node;
using graph::Tensor;

namespace {

// Folded constants larger than this stay HLO: a constant of millions of elements in the module
// costs more than the few instructions that compute it.
constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;

// XLA names an instruction after the last component of its node's name ("gradients/add_grad/Sum"
// -> "Sum"), with characters HLO names do not allow replaced.
std::string InstructionNameFor(const std::string& node_name) {
  std::string last = node_name.substr(node_name.rfind('/') + 1);
  for (char& c : last) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) {
      c = '_';
    }
  }
  return last.empty() ? "op" : last;
}

bool HasResourceTypes(const Node& node) {
  for (DataType t : node.input_types()) {
    if (t == graph::DT_RESOURCE) return true;
  }
  for (DataType t : node.output_types()) {
    if (t == graph::DT_RESOURCE) return true;
  }
  return false;
}

// Whether the node is evaluated on the host when all its inputs are constants, as tf2xla's
// constant resolution does: stateless ops with a CPU kernel and numeric outputs.
bool CanFold(const Node& node) {
  if (node.is_stateful() || !node.has_kernel() || HasResourceTypes(node)) return false;
  if (node.num_outputs() == 0) return false;
  for (DataType t : node.output_types()) {
    if (graph::ToPrimitiveType(t) == PrimitiveType::PRIMITIVE_TYPE_INVALID) return false;
  }
  return true;
}

StatusOr<std::vector<Tensor>> FoldWithCpuKernel(const Node& node,
                                                const std::vector<XlaExpression>& inputs) {
  std::vector<Tensor> values;
  for (const XlaExpression& e : inputs) values.push_back(e.constant_value());
  graph::OpKernelContext ctx(node, std::move(values), {}, nullptr, nullptr,
                             &ThreadPool::Default());
  ctx.set_max_tensor_bytes(kMaxFoldedElements * 16);
  RETURN_IF_ERROR(node.registration().kernel(ctx));
  std::vector<Tensor> outputs;
  for (int i = 0; i < node.num_outputs(); ++i) {
    if (!ctx.output(i).IsInitialized()) {
      return Status::Error(fmt::format("node '{}' ({}): constant folding left output {} unset",
                                       node.name(), node.type_string(), i));
    }
    outputs.push_back(ctx.output(i));
  }
  return outputs;
}

std::string ArgKindName(XlaArgument::Kind kind) {
  switch (kind) {
    case XlaArgument::Kind::kParameter:
      return "parameter";
    case XlaArgument::Kind::kConstant:
      return "constant";
    case XlaArgument::Kind::kResource:
      return "resource";
  }
  return "?";
}

class GraphLowering {
 public:
  GraphLowering(const graph::Graph& body, const std::vector<XlaArgument>& args,
                const XlaCompileOptions& options)
      : body_(body), args_(args), options_(options) {}
  // A function body inside the module (a loop's cond or body), built through `builder`.
  GraphLowering(const graph::Graph& body, HloBuilder* builder, const XlaCompileOptions& options)
      : body_(body), args_(kNoArguments), options_(options), b_(builder) {}

  StatusOr<XlaCompilationResult> Run();
  // Lowers the body with its _Arg nodes bound to `args`; its _Retval values, by index.
  StatusOr<std::vector<XlaExpression>> LowerWithArguments(std::vector<XlaExpression> args);

 private:
  OpMetadata MetadataFor(const Node& node) const {
    OpMetadata m;
    m.op_type = node.type_string();
    m.op_name = name_prefix_ + node.name();
    m.source_file = options_.source_file;
    m.source_line = options_.source_line;
    return m;
  }
  Status BuildArguments(const std::vector<Node*>& arg_nodes);
  Status LowerNode(const Node& node);
  StatusOr<HloInstruction*> OutputValue(const XlaExpression& e, const Node& retval);
  // While, If and Case: their functions lowered into computations of the module
  // (functional_ops.h).
  Status LowerControlFlowNode(const Node& node, const std::vector<XlaExpression>& inputs);
  // A function call: its body lowered in place (function_call_ops.h).
  Status LowerCallNode(const Node& node, const graph::NameAttrList& func,
                       const std::vector<XlaExpression>& inputs);

  static inline const std::vector<XlaArgument> kNoArguments;

  const graph::Graph& body_;
  const std::vector<XlaArgument>& args_;
  const XlaCompileOptions& options_;
  XlaCompilationResult result_;
  std::unique_ptr<HloBuilder> builder_;
  HloBuilder* b_ = nullptr;  // builder_ for the entry; a loop computation's otherwise
  std::vector<std::unique_ptr<XlaResource>> resources_;
  std::vector<XlaExpression> arg_values_;
  // Output expressions per node id.
  std::vector<std::vector<XlaExpression>> values_;
  // Inside an inlined call: the calls' names ("call/inner_call/"), which prefix the op_name of
  // every instruction as TensorFlow's inlining names the nodes, and how many calls deep.
  std::string name_prefix_;
  int call_depth_ = 0;
};

Status GraphLowering::BuildArguments(const std::vector<Node*>& arg_nodes) {
  OpMetadata args_metadata;
  args_metadata.op_name = "XLA_Args";
  b_->SetMetadata(args_metadata, "");
  arg_values_.resize(args_.size());
  int64_t parameter_number = 0;
  for (size_t i = 0; i < args_.size(); ++i) {
    const XlaArgument& arg = args_[i];
    const Node* node = arg_nodes[i];
    const std::string name = fmt::format("arg{}", i);
    DataType node_type = node->output_type(0);
    switch (arg.kind) {
      case XlaArgument::Kind::kParameter: {
        if (node_type != arg.dtype) {
          return Status::Error(fmt::format(
              "_Arg '{}' (index {}) is {}, but the argument given is {}", node->name(), i,
              graph::DataTypeName(node_type), graph::DataTypeName(arg.dtype)));
        }
        PrimitiveType type = graph::ToPrimitiveType(arg.dtype);
        if (type == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
          return Status::Error(fmt::format("_Arg '{}' (index {}): type {} cannot be an XLA "
                                           "parameter",
                                           node->name(), i, graph::DataTypeName(arg.dtype)));
        }
        ASSIGN_OR_RETURN(HloInstruction * p,
                         b_->Parameter(parameter_number++, Shape(type, arg.shape), name));
        result_.input_mapping.push_back(static_cast<int>(i));
        arg_values_[i] = XlaExpression::XlaOp(p, arg.dtype);
        break;
      }
      case XlaArgument::Kind::kConstant:
        if (!arg.constant_value.IsInitialized()) {
          return Status::Error(fmt::format("_Arg '{}' (index {}) is a constant argument without "
                                           "a value",
                                           node->name(), i));
        }
        arg_values_[i] = XlaExpression::Constant(arg.constant_value);
        break;
      case XlaArgument::Kind::kResource: {
        if (node_type != graph::DT_RESOURCE) {
          return Status::Error(fmt::format("_Arg '{}' (index {}) is {}, but the argument given "
                                           "is a resource",
                                           node->name(), i, graph::DataTypeName(node_type)));
        }
        auto resource = std::make_unique<XlaResource>();
        resource->arg_index = static_cast<int>(i);
        resource->name = arg.name.empty() ? node->name() : arg.name;
        resource->dtype = arg.dtype;
        resource->shape = arg.shape;
        if (arg.initialized) {
          PrimitiveType type = graph::ToPrimitiveType(arg.dtype);
          if (type == PrimitiveType::PRIMITIVE_TYPE_INVALID) {
            return Status::Error(fmt::format("resource _Arg '{}' (index {}): variable type {} "
                                             "has no XLA element type",
                                             node->name(), i, graph::DataTypeName(arg.dtype)));
          }
          ASSIGN_OR_RETURN(HloInstruction * p, b_->Parameter(parameter_number++,
                                                                   Shape(type, arg.shape), name));
          result_.input_mapping.push_back(static_cast<int>(i));
          resource->initial_value = p;
          resource->value = p;
        }
        arg_values_[i] = XlaExpression::Resource(resource.get());
        resources_.push_back(std::move(resource));
        break;
      }
    }
    if (arg.kind != XlaArgument::Kind::kResource && node_type == graph::DT_RESOURCE) {
      return Status::Error(fmt::format("_Arg '{}' (index {}) is a resource, but the argument "
                                       "given is a {}",
                                       node->name(), i, ArgKindName(arg.kind)));
    }
  }
  return OkStatus();
}

Status GraphLowering::LowerNode(const Node& node) {
  const std::string& op = node.type_string();
  std::vector<XlaExpression> inputs(node.num_inputs());
  for (int i = 0; i < node.num_inputs(); ++i) {
    const auto [src, src_output] = node.input_node(i);
    if (src == nullptr) {
      return Status::Error(fmt::format("node '{}' ({}): input {} is not connected", node.name(),
                                       op, i));
    }
    const XlaExpression& e = values_[src->id()][src_output];
    if (e.kind() == XlaExpression::Kind::kInvalid) {
      return Status::Error(fmt::format("node '{}' ({}): input {} from '{}' has no value",
                                       node.name(), op, i, src->name()));
    }
    inputs[i] = e;
  }
  std::vector<XlaExpression>& outputs = values_[node.id()];
  outputs.assign(node.num_outputs(), XlaExpression());

  if (op == "_Arg") {
    ASSIGN_OR_RETURN(int64_t index, graph::GetIntAttr(node.attrs(), "index", node.name()));
    outputs[0] = arg_values_[index];
    return OkStatus();
  }

  if (op == "Const") {
    ASSIGN_OR_RETURN(Tensor value, graph::GetTensorAttr(node.attrs(), "value", node.name()));
    outputs[0] = XlaExpression::Constant(std::move(value));
    return OkStatus();
  }
  if (IsFunctionalWhile(op) || IsFunctionalIf(op) || IsFunctionalCase(op)) {
    b_->SetMetadata(MetadataFor(node), InstructionNameFor(node.name()));
    return LowerControlFlowNode(node, inputs);
  }
  // Before folding: a call's body folds what it can itself.
  if (std::optional<graph::NameAttrList> call = CalledFunction(node, body_.library())) {
    b_->SetMetadata(MetadataFor(node), InstructionNameFor(node.name()));
    return LowerCallNode(node, *call, inputs);
  }
  // Constant folding: every input known on the host.
  bool all_constant = true;
  for (const XlaExpression& e : inputs) {
    all_constant &= e.kind() == XlaExpression::Kind::kConstant;
  }
  if (all_constant && CanFold(node)) {
    StatusOr<std::vector<Tensor>> folded = FoldWithCpuKernel(node, inputs);
    bool small = folded.ok();
    if (folded.ok()) {
      for (const Tensor& t : *folded) small &= t.num_elements() <= kMaxFoldedElements;
    }
    if (small) {
      for (size_t i = 0; i < folded->size(); ++i) {
        outputs[i] = XlaExpression::Constant(std::move((*folded)[i]));
      }
      return OkStatus();
    }
    // Too large to hold on the host, or refused by the kernel: the lowering builds it (and
    // reports what is wrong with the inputs in its own words). Without one, the kernel's error.
    if (!folded.ok() && XlaOpRegistry::Global().Find(op) == nullptr) return folded.status();
  }

  const XlaOpLowering* lowering = XlaOpRegistry::Global().Find(op);
  if (lowering == nullptr) {
    return Status::Error(
        fmt::format("no XLA lowering for op '{}' (node '{}')", op, node.name()));
  }
  // Inputs the op needs at compile time must be constants (tf2xla's compile-time constant
  // inputs); checked before the lowering runs, so the message names the input and its source.
  b_->SetMetadata(MetadataFor(node), InstructionNameFor(node.name()));
  XlaOpKernelContext ctx(node, std::move(inputs), b_);
  for (const std::string& arg : node.registration().compile_time_const_inputs) {
    if (XlaOpRegistry::Global().AcceptsRuntimeInput(op, arg)) continue;
    int start = 0, end = 0;
    RETURN_IF_ERROR(graph::NameRangeForArg(node.name(), node.attrs(), node.op_def(), true, arg,
                                           &start, &end));
    for (int i = start; i < end; ++i) RETURN_IF_ERROR(ctx.ConstantInput(i).status());
  }
  RETURN_IF_ERROR((*lowering)(ctx));
  for (int i = 0; i < node.num_outputs(); ++i) {
    const XlaExpression& e = ctx.outputs()[i];
    if (e.kind() == XlaExpression::Kind::kInvalid) {
      return Status::Error(fmt::format("node '{}' ({}): the lowering left output {} unset",
                                       node.name(), op, i));
    }
    // A list (DT_VARIANT) is a tuple of its buffer and push index (tensor_list_ops.cc).
    if (e.kind() == XlaExpression::Kind::kXlaOp && node.output_type(i) != graph::DT_VARIANT) {
      PrimitiveType want = graph::ToPrimitiveType(node.output_type(i));
      if (e.handle()->shape().element_type() != want) {
        return Status::Error(fmt::format(
            "node '{}' ({}): output {} lowered to {} but the op's type is {}", node.name(), op, i,
            e.handle()->shape().ToString(false), graph::DataTypeName(node.output_type(i))));
      }
    }
    outputs[i] = e;
  }
  return OkStatus();
}

Status GraphLowering::LowerControlFlowNode(const Node& node,
                                           const std::vector<XlaExpression>& inputs) {
  const XlaCompileOptions& options = options_;
  auto lower_body = [&options](const graph::Graph& body, HloBuilder* builder,
                               std::vector<XlaExpression> args) {
    GraphLowering lowering(body, builder, options);
    return lowering.LowerWithArguments(std::move(args));
  };
  const auto lower = IsFunctionalWhile(node.type_string()) ? LowerWhile : LowerConditional;
  ASSIGN_OR_RETURN(std::vector<XlaExpression> outputs,
                   lower(node, inputs, body_.library(), body_.registry(), *b_, lower_body));
  values_[node.id()] = std::move(outputs);
  return OkStatus();
}

Status GraphLowering::LowerCallNode(const Node& node, const graph::NameAttrList& func,
                                    const std::vector<XlaExpression>& inputs) {
  const XlaCompileOptions& options = options_;
  const std::string prefix = name_prefix_ + node.name() + "/";
  const int depth = call_depth_ + 1;
  auto lower_body = [&](const graph::Graph& body, HloBuilder* builder,
                        std::vector<XlaExpression> args) {
    GraphLowering lowering(body, builder, options);
    lowering.name_prefix_ = prefix;
    lowering.call_depth_ = depth;
    return lowering.LowerWithArguments(std::move(args));
  };
  ASSIGN_OR_RETURN(std::vector<XlaExpression> outputs,
                   LowerFunctionCall(node, func, inputs, body_.library(), body_.registry(), *b_,
                                     call_depth_, lower_body));
  values_[node.id()] = std::move(outputs);
  return OkStatus();
}

StatusOr<std::vector<XlaExpression>> GraphLowering::LowerWithArguments(
    std::vector<XlaExpression> args) {
  arg_values_ = std::move(args);
  std::map<int64_t, Node*> retval_nodes;
  for (Node* node : body_.op_nodes()) {
    if (node->type_string() != "_Arg" && node->type_string() != "_Retval") continue;
    ASSIGN_OR_RETURN(int64_t index, graph::GetIntAttr(node->attrs(), "index", node->name()));
    if (node->type_string() == "_Arg") {
      if (index < 0 || index >= static_cast<int64_t>(arg_values_.size())) {
        return Status::Error(fmt::format("_Arg '{}' has index {}, but {} arguments were given",
                                         node->name(), index, arg_values_.size()));
      }
    } else if (!retval_nodes.emplace(index, node).second) {
      return Status::Error(fmt::format("two _Retval nodes have index {}", index));
    }
  }
  values_.assign(body_.num_node_ids(), {});
  ASSIGN_OR_RETURN(std::vector<Node*> order, body_.TopologicalOrder());
  for (Node* node : order) {
    if (node->type_string() == "_Retval") continue;
    RETURN_IF_ERROR(LowerNode(*node));
  }
  std::vector<XlaExpression> out;
  int64_t expected = 0;
  for (const auto& [index, node] : retval_nodes) {
    if (index != expected++) return Status::Error("the _Retval indices are not 0..n-1");
    const auto [src, src_output] = node->input_node(0);
    if (src == nullptr) return Status::Error(fmt::format("_Retval '{}' has no input", node->name()));
    out.push_back(values_[src->id()][src_output]);
  }
  return out;
}

StatusOr<HloInstruction*> GraphLowering::OutputValue(const XlaExpression& e, const Node& retval) {
  switch (e.kind()) {
    case XlaExpression::Kind::kXlaOp:
      return e.handle();
    case XlaExpression::Kind::kConstant:
      return ConstantToHlo(*b_, e.constant_value());
    default:
      return Status::Error(fmt::format("_Retval '{}': returns a resource handle, which an XLA "
                                       "computation cannot return",
                                       retval.name()));
  }
}

StatusOr<XlaCompilationResult> GraphLowering::Run() {
  result_.module = std::make_unique<HloModule>(options_.module_name);
  HloComputation* entry = result_.module->AddComputation(
      std::make_unique<HloComputation>(options_.module_name), /*is_entry=*/true);
  builder_ = std::make_unique<HloBuilder>(result_.module.get(), entry);
  b_ = builder_.get();

  std::vector<Node*> arg_nodes(args_.size(), nullptr);
  std::map<int64_t, Node*> retval_nodes;
  for (Node* node : body_.op_nodes()) {
    if (node->type_string() == "_Arg") {
      ASSIGN_OR_RETURN(int64_t index, graph::GetIntAttr(node->attrs(), "index", node->name()));
      if (index < 0 || index >= static_cast<int64_t>(args_.size())) {
        return Status::Error(fmt::format("_Arg '{}' has index {}, but {} arguments were given",
                                         node->name(), index, args_.size()));
      }
      if (arg_nodes[index] != nullptr) {
        return Status::Error(fmt::format("_Arg '{}' and '{}' both have index {}",
                                         arg_nodes[index]->name(), node->name(), index));
      }
      arg_nodes[index] = node;
    } else if (node->type_string() == "_Retval") {
      ASSIGN_OR_RETURN(int64_t index, graph::GetIntAttr(node->attrs(), "index", node->name()));
      if (!retval_nodes.emplace(index, node).second) {
        return Status::Error(fmt::format("two _Retval nodes have index {}", index));
      }
    }
  }
  for (size_t i = 0; i < arg_nodes.size(); ++i) {
    if (arg_nodes[i] == nullptr) {
      return Status::Error(fmt::format("{} arguments were given, but the body has no _Arg with "
                                       "index {}",
                                       args_.size(), i));
    }
  }
  int64_t expected_index = 0;
  for (const auto& [index, node] : retval_nodes) {
    if (index != expected_index++) {
      return Status::Error(fmt::format("the _Retval indices are not 0..{}",
                                       retval_nodes.size() - 1));
    }
  }
  RETURN_IF_ERROR(BuildArguments(arg_nodes));

  values_.assign(body_.num_node_ids(), {});
  ASSIGN_OR_RETURN(std::vector<Node*> order, body_.TopologicalOrder());
  for (Node* node : order) {
    if (node->type_string() == "_Retval") continue;
    RETURN_IF_ERROR(LowerNode(*node));
  }

  OpMetadata retvals_metadata;
  retvals_metadata.op_name = "XLA_Retvals";
  b_->SetMetadata(retvals_metadata, "XLA_Retvals");
  std::vector<HloInstruction*> outputs;
  for (const auto& [index, node] : retval_nodes) {
    const auto [src, src_output] = node->input_node(0);
    if (src == nullptr) {
      return Status::Error(fmt::format("_Retval '{}' has no input", node->name()));
    }
    const XlaExpression& e = values_[src->id()][src_output];
    ASSIGN_OR_RETURN(HloInstruction * value, OutputValue(e, *node));
    outputs.push_back(value);
    result_.output_dtypes.push_back(e.dtype());
    result_.output_shapes.push_back(value->shape().dimensions());
  }
  for (const auto& resource : resources_) {
    if (!resource->modified) continue;
    outputs.push_back(resource->value);
    result_.output_dtypes.push_back(resource->dtype);
    result_.output_shapes.push_back(resource->value->shape().dimensions());
    result_.resource_updates.push_back(resource->arg_index);
  }
  HloInstruction* root = nullptr;
  if (outputs.size() == 1) {
    root = outputs[0];
  } else {
    ASSIGN_OR_RETURN(root, b_->Tuple(outputs));
  }
  entry->set_root_instruction(root);

  ComputationLayout layout;
  for (HloInstruction* p : entry->parameter_instructions()) layout.parameters.push_back(p->shape());
  layout.result = root->shape();
  result_.module->set_entry_computation_layout(layout);
  Status verified = VerifyModule(*result_.module);
  if (!verified.ok()) {
    return Status::Error("the lowered module does not verify: " + verified.message());
  }
  return std::move(result_);
}

}  // namespace

StatusOr<XlaCompilationResult> CompileGraphToHlo(const graph::Graph& body,
                                                 const std::vector<XlaArgument>& args,
                                                 const XlaCompileOptions& options) {
  GraphLowering lowering(body, args, options);
  return lowering.Run();
}

StatusOr<std::unique_ptr<graph::FunctionBody>> FunctionBodyForCompilation(
    const graph::FunctionDefLibrary& library, const std::string& name) {
  graph::NameAttrList func;
  func.name = name;
  return graph::InstantiateFunction(library, func);
}

StatusOr<std::unique_ptr<graph::FunctionBody>> FunctionBodyForCompilation(
    const graph::FunctionDef& fdef) {
  // A control input from an argument ("^cond_switch_1_arg", which encapsulation writes when a
  // node inside the cluster waited on a node outside it) orders nothing once every argument is
  // an entry parameter, available before any instruction runs. The instantiation only resolves
  // control inputs that name body nodes, so they are dropped here.
  graph::FunctionDef copy = fdef;
  std::set<std::string> arg_names;
  for (const auto& arg : copy.signature.input_arg) arg_names.insert(arg.name);
  for (graph::NodeDef& node : copy.node_def) {
    std::vector<std::string> inputs;
    for (const std::string& input : node.input) {
      if (!input.empty() && input[0] == '^' && arg_names.count(input.substr(1)) > 0) continue;
      inputs.push_back(input);
    }
    node.input = std::move(inputs);
  }
  return graph::InstantiateFunctionDef(copy, {}, graph::FunctionDefLibrary{});
}

}  // namespace xlens::cluster
