#include "compiler/aot/graph_lowering.h"

#include <map>
#include <set>

#include <fmt/format.h>

#include "compiler/cluster/graph_run.h"
#include "compiler/cluster/tf2xla/xla_compiler.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/partial_shape.h"
#include "compiler/graph/types.h"
#include "compiler/graph/placeholder_shape.h"
#include "compiler/graph/variable_nodes.h"
#include "compiler/hlo/shape.h"

namespace xlens::aot {

namespace {

using cluster::QuoteName;
using graph::DataType;
using graph::NodeDef;

// "node:0" for "node": one spelling per tensor, to match inputs against feeds. A control input,
// or a name that is no tensor's, as it is.
std::string Canonical(const std::string& input) {
  StatusOr<graph::TensorId> id = graph::ParseTensorName(input);
  if (!id.ok() || id->IsControl()) return input;
  return id->node + ":" + std::to_string(id->index);
}

// The node an input (data or control) reads; a name that is no tensor's as it is.
std::string NodeOf(const std::string& input) {
  StatusOr<graph::TensorId> id = graph::ParseTensorName(input);
  return id.ok() ? id->node : input;
}

HeaderBuffer Buffer(const std::string& name, DataType type, const std::vector<int64_t>& dims) {
  HeaderBuffer b;
  b.name = name;
  b.element_type = std::string(PrimitiveTypeName(graph::ToPrimitiveType(type)));
  b.dimensions = dims;
  int64_t n = graph::DataTypeSize(type);
  for (int64_t d : dims) n *= d;
  b.byte_size = n;
  return b;
}

// A name no node of `def` has, from `base`.
std::string FreshName(const std::set<std::string>& taken, const std::string& base) {
  if (!taken.count(base)) return base;
  for (int i = 1;; ++i) {
    std::string name = base + "_" + std::to_string(i);
    if (!taken.count(name)) return name;
  }
}

// The node a resource handle comes from, through the Identity nodes an inlined function call
// leaves between a captured variable and its reads.
std::string HandleSource(const std::map<std::string, const NodeDef*>& nodes, std::string input) {
  for (int hops = 0; hops < 64; ++hops) {
    auto it = nodes.find(NodeOf(input));
    if (it == nodes.end()) break;
    const NodeDef& n = *it->second;
    if (n.op != "Identity" || n.input.empty() || n.input[0][0] == '^') return n.name;
    input = n.input[0];
  }
  return NodeOf(input);
}

struct Variable {
  DataType type = graph::DT_INVALID;
  std::vector<int64_t> shape;
};

// What variable `v` of the config is in the graph: its node must hold a resource variable.
StatusOr<Variable> ResolveVariable(const graph::Graph& g, const std::string& shown,
                                   const ConfigVariable& v) {
  const std::string where = v.where + ": variable " + QuoteName(v.node_name);
  const graph::Node* n = g.FindNode(v.node_name);
  if (n == nullptr) {
    return Error(fmt::format("{}: the graph {} has no node named {}", where, shown, QuoteName(v.node_name)));
  }
  Variable out;
  const std::string& op = n->type_string();
  if (op == "VarHandleOp") {
    if (const graph::AttrValue* t = graph::FindAttr(n->attrs(), "dtype");
        t != nullptr && t->kind() == graph::AttrValue::Kind::kType) {
      out.type = t->type();
    }
    if (const graph::AttrValue* s = graph::FindAttr(n->attrs(), "shape");
        s != nullptr && s->kind() == graph::AttrValue::Kind::kShape && s->shape().IsFullyDefined()) {
      out.shape = s->shape().dims();
      if (v.has_shape && !s->shape().IsCompatibleWith(v.shape)) {
        return Error(fmt::format("{}: the config's shape {} is not the variable's {}", where,
                                 graph::DimsToString(v.shape), s->shape().ToString()));
      }
    } else if (!v.has_shape) {
      return Error(fmt::format("{}: the variable's shape is not static in the graph: give its shape "
                               "in the config", where));
    }
  } else if (graph::IsResourcePlaceholder(*n)) {
    if (v.type == graph::DT_INVALID || !v.has_shape) {
      return Error(fmt::format("{}: a captured resource placeholder: give the variable's type and "
                               "shape in the config", where));
    }
  } else {
    return Error(fmt::format("{}: node {} is a {}, not a resource variable (VarHandleOp)", where,
                             QuoteName(v.node_name), op));
  }
  if (v.has_shape) out.shape = v.shape;
  if (v.type != graph::DT_INVALID) {
    if (out.type != graph::DT_INVALID && out.type != v.type) {
      return Error(fmt::format("{}: the config's type {} is not the variable's {}", where,
                               graph::DataTypeName(v.type), graph::DataTypeName(out.type)));
    }
    out.type = v.type;
  }
  if (out.type == graph::DT_INVALID) {
    return Error(fmt::format("{}: the variable's type is unknown: give it in the config", where));
  }
  return out;
}

}  // namespace

StatusOr<LoweredGraph> LowerGraphForAot(const graph::GraphDef& def, const Tf2XlaConfig& config,
                                        const std::string& shown, const std::string& module_name,
                                        const std::map<std::string, graph::Tensor>& frozen) {
  ASSIGN_OR_RETURN(std::unique_ptr<graph::Graph> g,
                   cluster::BuildGraphToRun(def, shown, /*allow_unknown_ops=*/false,
                                            /*infer_shapes=*/true));
  LoweredGraph out;
  std::vector<cluster::XlaArgument> args;
  std::set<std::string> taken;
  for (const NodeDef& n : def.node) taken.insert(n.name);

  // Feeds: the tensor each replaces, and the _Arg that stands for it.
  std::map<std::string, std::string> replaced;  // "node:i" -> arg node name
  std::set<std::string> fed_nodes;
  std::vector<NodeDef> new_nodes;
  for (size_t i = 0; i < config.feed.size(); ++i) {
    const ConfigFeed& f = config.feed[i];
    const std::string where = f.where + ": feed " + QuoteName(f.id.ToString());
    auto found_or = cluster::FindGraphTensor(*g, shown, "feed", f.id.ToString(), true);
    if (!found_or.ok()) return Error(f.where + ": " + found_or.status().message());
    const auto found = *found_or;
    const graph::Node& n = *found.first;
    const int index = found.second;
    const DataType type = graph::RemoveRefType(n.output_type(index));
    if (type == graph::DT_RESOURCE || type == graph::DT_VARIANT) {
      return Error(fmt::format("{}: node {} ({}) outputs a {}, which cannot be fed: give a variable "
                               "as a `variable` entry", where, QuoteName(n.name()), n.type_string(),
                               graph::DataTypeName(type)));
    }
    if (f.type != graph::DT_INVALID && f.type != type) {
      return Error(fmt::format("{}: the config's type {} is not the graph's {} (node {})", where,
                               graph::DataTypeName(f.type), graph::DataTypeName(type), QuoteName(n.name())));
    }
    const graph::PartialShape declared = graph::PlaceholderShape(n).value_or(
        index < static_cast<int>(n.output_shapes().size()) ? n.output_shapes()[index]
                                                           : graph::PartialShape::UnknownRank());
    if (!declared.IsCompatibleWith(f.shape)) {
      return Error(fmt::format("{}: the config's shape {} does not fit node {}'s {}{}", where,
                               graph::DimsToString(f.shape), QuoteName(n.name()), graph::DataTypeName(type),
                               declared.ToString()));
    }
    NodeDef arg;
    arg.name = FreshName(taken, "aot_feed_" + std::to_string(i));
    taken.insert(arg.name);
    arg.op = "_Arg";
    arg.attr["T"] = graph::AttrValue::Type(type);
    arg.attr["index"] = graph::AttrValue::Int(static_cast<int64_t>(i));
    replaced[n.name() + ":" + std::to_string(index)] = arg.name;
    fed_nodes.insert(n.name());
    new_nodes.push_back(std::move(arg));
    cluster::XlaArgument a;
    a.kind = cluster::XlaArgument::Kind::kParameter;
    a.dtype = type;
    a.shape = f.shape;
    args.push_back(std::move(a));
    out.args.push_back(Buffer(f.name, type, f.shape));
  }
  std::map<std::string, std::string> variable_args;  // variable node -> its _Arg
  for (size_t v = 0; v < config.variable.size(); ++v) {
    const ConfigVariable& cv = config.variable[v];
    ASSIGN_OR_RETURN(Variable var, ResolveVariable(*g, shown, cv));
    NodeDef arg;
    arg.name = FreshName(taken, "aot_variable_" + std::to_string(v));
    taken.insert(arg.name);
    arg.op = "_Arg";
    arg.attr["T"] = graph::AttrValue::Type(graph::DT_RESOURCE);
    arg.attr["index"] = graph::AttrValue::Int(static_cast<int64_t>(config.feed.size() + v));
    replaced[cv.node_name + ":0"] = arg.name;
    variable_args[cv.node_name] = arg.name;
    new_nodes.push_back(std::move(arg));
    cluster::XlaArgument a;
    a.kind = cluster::XlaArgument::Kind::kResource;
    a.dtype = var.type;
    a.shape = var.shape;
    a.initialized = true;
    a.name = cv.node_name;
    args.push_back(std::move(a));
    // tfcompile names a variable without a name by its node.
    out.variables.push_back(Buffer(cv.name.empty() ? cv.node_name : cv.name, var.type, var.shape));
    out.variable_readonly.push_back(cv.readonly);
  }

  // Fetches: a _Retval each, reading the tensor (or the feed that replaced it).
  std::vector<std::string> fetch_inputs;
  for (size_t i = 0; i < config.fetch.size(); ++i) {
    const ConfigFetch& f = config.fetch[i];
    auto found = cluster::FindGraphTensor(*g, shown, "fetch", f.id.ToString(), true);
    if (!found.ok()) return Error(f.where + ": " + found.status().message());
    const graph::Node& n = *found->first;
    const DataType type = graph::RemoveRefType(n.output_type(found->second));
    if (type == graph::DT_RESOURCE || type == graph::DT_VARIANT || type == graph::DT_STRING) {
      return Error(fmt::format("{}: fetch {}: node {} ({}) outputs a {}, which compiled code cannot "
                               "return", f.where, QuoteName(f.id.ToString()), QuoteName(n.name()),
                               n.type_string(), graph::DataTypeName(type)));
    }
    std::string input = n.name() + ":" + std::to_string(found->second);
    if (auto it = replaced.find(input); it != replaced.end()) input = it->second;
    NodeDef ret;
    ret.name = FreshName(taken, "aot_fetch_" + std::to_string(i));
    taken.insert(ret.name);
    ret.op = "_Retval";
    ret.input.push_back(input);
    ret.attr["T"] = graph::AttrValue::Type(type);
    ret.attr["index"] = graph::AttrValue::Int(static_cast<int64_t>(i));
    fetch_inputs.push_back(NodeOf(input));
    new_nodes.push_back(std::move(ret));
  }

  // The graph with feeds and variables rewired, pruned to what the fetches need.
  std::map<std::string, const NodeDef*> original;
  for (const NodeDef& n : def.node) original[n.name] = &n;
  std::map<std::string, NodeDef> by_name;
  for (const NodeDef& n : def.node) {
    NodeDef copy = n;
    std::vector<std::string> inputs;
    for (const std::string& in : copy.input) {
      if (in.empty()) continue;
      if (in[0] == '^') {
        // A feed replaces its node: an order on it is met by the argument's being given.
        if (fed_nodes.count(in.substr(1))) continue;
        if (auto it = variable_args.find(in.substr(1)); it != variable_args.end()) {
          inputs.push_back("^" + it->second);
          continue;
        }
        inputs.push_back(in);
        continue;
      }
      auto it = replaced.find(Canonical(in));
      inputs.push_back(it != replaced.end() ? it->second : in);
    }
    copy.input = std::move(inputs);
    // A read of a frozen variable is its value.
    if (copy.op == "ReadVariableOp" && !copy.input.empty() && copy.input[0][0] != '^') {
      if (auto it = frozen.find(HandleSource(original, copy.input[0]));
          it != frozen.end() && !variable_args.count(it->first)) {
        NodeDef constant;
        constant.name = copy.name;
        constant.op = "Const";
        constant.device = copy.device;
        for (size_t k = 1; k < copy.input.size(); ++k) {
          if (copy.input[k][0] == '^') constant.input.push_back(copy.input[k]);
        }
        constant.attr["dtype"] = graph::AttrValue::Type(it->second.dtype());
        constant.attr["value"] = graph::AttrValue::TensorValue(it->second);
        copy = std::move(constant);
      }
    }
    by_name[copy.name] = std::move(copy);
  }
  for (const NodeDef& n : new_nodes) by_name[n.name] = n;

  graph::GraphDef pruned;
  pruned.library = def.library;
  pruned.versions = def.versions;
  std::set<std::string> kept;
  for (size_t i = 0; i < config.fetch.size(); ++i) {
    std::vector<std::string> stack = {new_nodes[new_nodes.size() - config.fetch.size() + i].name};
    while (!stack.empty()) {
      std::string name = stack.back();
      stack.pop_back();
      if (!kept.insert(name).second) continue;
      auto it = by_name.find(name);
      if (it == by_name.end()) continue;  // the graph's builder reported it already
      const NodeDef& n = it->second;
      const std::string fetch = QuoteName(config.fetch[i].id.ToString());
      if (n.op == "Placeholder") {
        return Error(fmt::format("{}: fetch {} is not computed from the feeds: it needs placeholder "
                                 "{}, which the config does not feed", config.fetch[i].where, fetch,
                                 QuoteName(n.name)));
      }
      if (n.op == "VarHandleOp" || n.op == "VariableV2" || n.op == "Variable") {
        return Error(fmt::format("{}: fetch {} reads variable {} ({}), which the config does not "
                                 "list: add a `variable` entry, or freeze the graph",
                                 config.fetch[i].where, fetch, QuoteName(n.name), n.op));
      }
      for (const std::string& in : n.input) stack.push_back(NodeOf(in));
    }
  }
  // Every argument stays, used or not: the entry's parameters are the config's, in order.
  for (const NodeDef& n : new_nodes) kept.insert(n.name);
  for (const NodeDef& n : def.node) {
    if (kept.count(n.name)) pruned.node.push_back(by_name[n.name]);
  }
  for (const NodeDef& n : new_nodes) pruned.node.push_back(n);

  ASSIGN_OR_RETURN(std::unique_ptr<graph::Graph> body,
                   cluster::BuildGraphToRun(pruned, shown, /*allow_unknown_ops=*/false,
                                            /*infer_shapes=*/false));
  cluster::XlaCompileOptions options;
  options.module_name = module_name;
  auto lowered = cluster::CompileGraphToHlo(*body, args, options);
  if (!lowered.ok()) return cluster::InGraphFile(lowered.status(), shown);

  const size_t num_fetches = config.fetch.size();
  for (size_t i = 0; i < num_fetches; ++i) {
    out.results.push_back(Buffer(config.fetch[i].name, lowered->output_dtypes[i], lowered->output_shapes[i]));
  }
  out.variable_update_result.assign(config.variable.size(), -1);
  for (size_t k = 0; k < lowered->resource_updates.size(); ++k) {
    const int arg = lowered->resource_updates[k];
    const size_t v = static_cast<size_t>(arg) - config.feed.size();
    if (arg < static_cast<int>(config.feed.size()) || v >= config.variable.size()) continue;
    if (config.variable[v].readonly) {
      return Error(fmt::format("{}: variable {} is readonly in the config, but the graph assigns it",
                               config.variable[v].where, QuoteName(config.variable[v].node_name)));
    }
    out.variable_update_result[v] = static_cast<int>(num_fetches + k);
  }
  out.module = std::move(lowered->module);
  return out;
}

}  // namespace xlens::aot
