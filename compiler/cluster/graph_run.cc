#include "compiler/cluster/graph_run.h"

#include <algorithm>
#include <mutex>
#include <set>

#include <fmt/format.h>

#include "compiler/cluster/must_compile_body.h"
#include "compiler/graph/attr_value.h"
#include "compiler/graph/placeholder_shape.h"
#include "compiler/graph/variable_nodes.h"
#include "compiler/support/terminal_text.h"

namespace xlens::cluster {

using graph::DataType;
using graph::Graph;
using graph::Node;
using graph::PartialShape;
using graph::Tensor;

std::string QuoteName(std::string_view name) {
  return "'" + EscapeForTerminal(TruncateUtf8(name, 200)) + "'";
}

std::string TypeAndShape(DataType type, const PartialShape& shape) {
  return graph::DataTypeName(type) + shape.ToString();
}

Status InGraphFile(const Status& status, const std::string& shown) {
  // A SavedModel's messages name the file inside the directory ("DIR/saved_model.pb: ...").
  if (status.ok() || status.message().starts_with(shown + ":") ||
      status.message().starts_with(shown + "/")) {
    return status;
  }
  return status.WithContext(shown);
}

StatusOr<std::unique_ptr<Graph>> BuildGraphToRun(const graph::GraphDef& def,
                                                 const std::string& shown, bool allow_unknown_ops,
                                                 bool infer_shapes) {
  graph::GraphConstructorOptions options;
  options.allow_unknown_ops = allow_unknown_ops;
  options.source_name = shown;
  auto built = Graph::FromGraphDef(def, options);
  if (!built.ok()) return InGraphFile(built.status(), shown);
  if (infer_shapes) RETURN_IF_ERROR(InGraphFile((*built)->InferShapes(), shown));
  return std::move(*built);
}

StatusOr<std::pair<Node*, int>> FindGraphTensor(const Graph& g, const std::string& shown,
                                                std::string_view what, const std::string& name,
                                                bool output_required) {
  auto id = graph::ParseTensorName(name);
  if (!id.ok() || id->IsControl()) {
    return Error(fmt::format("{}: {} {}: not a tensor name (NODE or NODE:INDEX)", shown, what,
                             QuoteName(name)));
  }
  Node* n = g.FindNode(id->node);
  if (n == nullptr) {
    return Error(fmt::format("{}: {} {}: the graph has no node named {}", shown, what,
                             QuoteName(name), QuoteName(id->node)));
  }
  if (output_required && id->index >= n->num_outputs()) {
    return Error(fmt::format("{}: {} {}: node {} ({}) has {} output{}", shown, what,
                             QuoteName(name), QuoteName(n->name()),
                             EscapeForTerminal(n->type_string()), n->num_outputs(),
                             n->num_outputs() == 1 ? "" : "s"));
  }
  return std::make_pair(n, id->index);
}

Status CheckFeed(const std::string& shown, const Node& n, int index, const Tensor& t,
                 const std::string& source) {
  const DataType want = graph::RemoveRefType(n.output_type(index));
  const std::optional<PartialShape> placeholder = graph::PlaceholderShape(n);
  const std::string declared = TypeAndShape(
      want, placeholder.value_or(n.output_shapes().size() > static_cast<size_t>(index)
                                     ? n.output_shapes()[index]
                                     : PartialShape::UnknownRank()));
  if ((placeholder && !placeholder->IsCompatibleWith(t.dims())) || t.dtype() != want) {
    return Error(fmt::format("{}: feed {} ({}): {} holds {}, the graph expects {}", shown,
                             QuoteName(n.name()), EscapeForTerminal(n.type_string()), source,
                             TypeAndShape(t.dtype(), t.shape()), declared));
  }
  return OkStatus();
}

namespace {

// A captured variable's value: the session gets a variable named as the Placeholder, and the
// Placeholder is fed a handle to it every step. Its dtype is the one the ops that read or update
// it declare.
Status AssignCapturedVariable(const std::string& shown, std::string_view what,
                              graph::Session& session, const Node& n, Tensor value,
                              const std::string& source,
                              std::vector<std::pair<std::string, Tensor>>* feeds) {
  DataType dtype = graph::DT_INVALID;
  std::string reader;
  for (const graph::Edge* e : n.out_edges()) {
    if (e->IsControlEdge()) continue;
    const Node* user = e->dst;
    for (const char* attr : {"dtype", "T"}) {
      const graph::AttrValue* a = graph::FindAttr(user->attrs(), attr);
      if (a != nullptr && a->kind() == graph::AttrValue::Kind::kType &&
          a->type() != graph::DT_RESOURCE) {
        dtype = a->type();
        reader = user->name();
        break;
      }
    }
    if (dtype != graph::DT_INVALID) break;
  }
  if (dtype != graph::DT_INVALID && value.dtype() != dtype) {
    return Error(fmt::format("{}: {} {}: {} holds {}, the variable is {} (as {} reads it)", shown,
                             what, QuoteName(n.name()), source,
                             TypeAndShape(value.dtype(), value.shape()), graph::DataTypeName(dtype),
                             QuoteName(reader)));
  }
  graph::ResourceHandle handle;
  handle.name = n.name();
  handle.dtype = value.dtype();
  handle.shape = value.shape();
  auto variable = session.resources().LookupOrCreate("", handle.name, value.dtype(), value.shape());
  {
    std::lock_guard<std::mutex> lock(variable->mu);
    variable->value = std::move(value);
  }
  feeds->emplace_back(n.name(), Tensor::ResourceScalar(std::move(handle)));
  return OkStatus();
}

}  // namespace

Status AssignVariable(const Graph& g, const std::string& shown, std::string_view what,
                      graph::Session& session, const std::string& name, Tensor value,
                      const std::string& source,
                      std::vector<std::pair<std::string, Tensor>>* feeds) {
  Node* n = g.FindNode(name);
  if (n == nullptr) {
    return Error(fmt::format("{}: {} {}: the graph has no node named {}", shown, what,
                             QuoteName(name), QuoteName(name)));
  }
  const std::string& op = n->type_string();
  if (graph::IsResourcePlaceholder(*n)) {
    return AssignCapturedVariable(shown, what, session, *n, std::move(value), source, feeds);
  }
  if (!graph::IsVariableOp(op)) {
    return Error(fmt::format("{}: {} {}: node {} is a {}, not a variable (VarHandleOp, "
                             "VariableV2)",
                             shown, what, QuoteName(name), QuoteName(name),
                             EscapeForTerminal(op)));
  }
  auto dtype = graph::GetTypeAttr(n->attrs(), "dtype", n->name());
  if (!dtype.ok()) return InGraphFile(dtype.status(), shown);
  const PartialShape shape = graph::ShapeAttr(n->attrs()).value_or(PartialShape::UnknownRank());
  if (value.dtype() != *dtype || !shape.IsCompatibleWith(value.dims())) {
    return Error(fmt::format("{}: {} {}: {} holds {}, the variable is {}", shown, what,
                             QuoteName(name), source, TypeAndShape(value.dtype(), value.shape()),
                             TypeAndShape(*dtype, shape)));
  }
  std::string container, shared_name;
  if (const graph::AttrValue* c = graph::FindAttr(n->attrs(), "container")) container = c->s();
  if (const graph::AttrValue* s = graph::FindAttr(n->attrs(), "shared_name")) shared_name = s->s();
  if (shared_name.empty()) shared_name = n->name();
  auto variable = session.resources().LookupOrCreate(container, shared_name, *dtype, shape);
  std::lock_guard<std::mutex> lock(variable->mu);
  variable->value = std::move(value);
  return OkStatus();
}

Status CheckCapturesAssigned(const Graph& g, const std::string& shown,
                             const std::vector<std::string>& fetches,
                             const std::vector<std::string>& targets,
                             const std::vector<std::pair<std::string, Tensor>>& feeds,
                             std::string_view how) {
  std::set<std::string> fed;
  for (const auto& [name, tensor] : feeds) {
    auto id = graph::ParseTensorName(name);
    fed.insert(id.ok() ? id->node : name);
  }
  std::vector<const Node*> stack;
  std::set<const Node*> seen;
  for (const std::string& name : fetches) {
    auto id = graph::ParseTensorName(name);
    if (const Node* n = id.ok() ? g.FindNode(id->node) : nullptr) stack.push_back(n);
  }
  for (const std::string& name : targets) {
    if (const Node* n = g.FindNode(name)) stack.push_back(n);
  }
  std::vector<std::string> missing;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second || fed.count(n->name())) continue;
    if (graph::IsResourcePlaceholder(*n)) missing.push_back(n->name());
    for (const graph::Edge* e : n->in_edges()) stack.push_back(e->src);
  }
  if (missing.empty()) return OkStatus();
  std::sort(missing.begin(), missing.end());
  std::vector<std::string> named;
  for (size_t i = 0; i < missing.size() && i < 3; ++i) named.push_back(QuoteName(missing[i]));
  return Error(fmt::format("{}: {} captured variable{} (resource Placeholder{}) the run needs {} no "
                           "value: {} ({}{})",
                           shown, missing.size(), missing.size() == 1 ? "" : "s",
                           missing.size() == 1 ? "" : "s", missing.size() == 1 ? "has" : "have",
                           how, fmt::join(named, ", "), missing.size() > 3 ? ", ..." : ""));
}

StatusOr<std::unique_ptr<XlaJit>> InstallGraphJit(const GraphJitOptions& options,
                                                  const graph::GraphDef& def,
                                                  graph::SessionOptions* session_options,
                                                  std::optional<graph::GraphDef>* def_to_run) {
  def_to_run->reset();
  session_options->global_jit_level = options.level;
  session_options->cpu_global_jit = options.cpu_global_jit;
  if (options.mode == "off") return std::unique_ptr<XlaJit>();
  auto jit = std::make_unique<XlaJit>(options.flags);
  if (options.mode == "compile") {
    jit->set_must_compile_function(options.function_name);
    *def_to_run = def;
    KeepFunctionalControlFlow(&**def_to_run);
  }
  jit->Install(session_options);
  return jit;
}

}  // namespace xlens::cluster
