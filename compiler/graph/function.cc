#include "compiler/graph/function.h"

#include <algorithm>
#include <any>
#include <map>
#include <set>

#include <pthread.h>

#include "compiler/graph/executor.h"
#include "compiler/graph/op_kernel.h"

namespace xlens::graph {
namespace {

std::string FunctionError(const std::string& function, const std::string& message) {
  return "function '" + function + "': " + message;
}

// Replaces every `$name` placeholder in `attrs` (and in the attrs of function values, which may
// forward a placeholder to a nested call) by the call's value.
Status BindPlaceholders(const std::string& function, const std::string& node,
                        const AttrMap& call_attrs, AttrMap* attrs) {
  for (auto& [key, value] : *attrs) {
    if (value.kind() == AttrValue::Kind::kPlaceholder) {
      const AttrValue* bound = FindAttr(call_attrs, value.placeholder());
      if (!bound) {
        return Status::Error(FunctionError(function, "node '" + node + "': attr '" + key +
                                                         "' is the placeholder $" +
                                                         value.placeholder() +
                                                         ", which the call does not set"));
      }
      value = *bound;
    } else if (value.kind() == AttrValue::Kind::kFunc) {
      NameAttrList func = value.func();
      auto copy = std::make_shared<AttrMap>(*func.attr);
      RETURN_IF_ERROR(BindPlaceholders(function, node, call_attrs, copy.get()));
      func.attr = copy;
      value = AttrValue::Func(func);
    }
  }
  return OkStatus();
}

// The tensor types of one signature argument, from the bound attrs.
Status ArgTypes(const std::string& function, const OpDef::ArgDef& arg, const AttrMap& attrs,
                std::vector<DataType>* types) {
  auto missing = [&](const std::string& attr) {
    return Status::Error(FunctionError(function, "argument '" + arg.name + "' needs attr '" +
                                                     attr + "', which the call does not set"));
  };
  if (!arg.type_list_attr.empty()) {
    const AttrValue* v = FindAttr(attrs, arg.type_list_attr);
    if (!v || v->kind() != AttrValue::Kind::kList) return missing(arg.type_list_attr);
    for (DataType t : v->list().type) types->push_back(t);
    return OkStatus();
  }
  DataType type = arg.type;
  if (!arg.type_attr.empty()) {
    const AttrValue* v = FindAttr(attrs, arg.type_attr);
    if (!v || v->kind() != AttrValue::Kind::kType) return missing(arg.type_attr);
    type = v->type();
  }
  int64_t count = 1;
  if (!arg.number_attr.empty()) {
    const AttrValue* v = FindAttr(attrs, arg.number_attr);
    if (!v || v->kind() != AttrValue::Kind::kInt) return missing(arg.number_attr);
    count = v->i();
    if (count < 0 || count > (1 << 20)) {
      return Status::Error(FunctionError(function, "argument '" + arg.name + "' has " +
                                                       std::to_string(count) + " tensors"));
    }
  }
  if (type == DT_INVALID) {
    return Status::Error(FunctionError(function, "argument '" + arg.name + "' has no type"));
  }
  for (int64_t i = 0; i < count; ++i) types->push_back(arg.is_ref ? MakeRefType(type) : type);
  return OkStatus();
}

bool ParseIndex(const std::string& text, int* out) {
  if (text.empty() || text.size() > 9) return false;
  int v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9') return false;
    v = v * 10 + (ch - '0');
  }
  *out = v;
  return true;
}

struct ArgRange {
  int start = 0;
  int count = 0;
};

// Resolves a FunctionDef tensor reference ("node:out_arg:index", "arg", "arg:index") to a node
// output of the instantiated graph.
StatusOr<std::pair<Node*, int>> ResolveTensor(const std::string& function, const std::string& ref,
                                              const std::map<std::string, ArgRange>& args,
                                              const std::vector<Node*>& arg_nodes,
                                              const std::map<std::string, Node*>& body) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t colon = ref.find(':', start);
    parts.push_back(ref.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  auto bad = [&](const std::string& why) {
    return Status::Error(FunctionError(function, "input '" + ref + "' " + why));
  };
  if (parts.size() == 3) {
    auto it = body.find(parts[0]);
    if (it == body.end()) return bad("names no node of the body");
    Node* src = it->second;
    int index;
    if (!ParseIndex(parts[2], &index)) return bad("has a bad index");
    int begin, end;
    Status st = NameRangeForArg(src->name(), src->attrs(), src->op_def(), /*is_input=*/false,
                                parts[1], &begin, &end);
    if (!st.ok()) return bad("does not name an output of '" + src->name() + "' (" +
                             src->type_string() + "): " + st.message());
    if (index >= end - begin) {
      return bad("is past the " + std::to_string(end - begin) + " tensors of output '" +
                 parts[1] + "' of '" + src->name() + "'");
    }
    return std::make_pair(src, begin + index);
  }
  if (parts.size() > 3) return bad("is not of the form node:output:index");
  int index = 0;
  if (parts.size() == 2 && !ParseIndex(parts[1], &index)) return bad("has a bad index");
  if (auto it = args.find(parts[0]); it != args.end()) {
    if (index >= it->second.count) return bad("is past the tensors of the argument");
    return std::make_pair(arg_nodes[it->second.start + index], 0);
  }
  // GraphDef-style "node" / "node:1", which some writers use inside bodies.
  if (auto it = body.find(parts[0]); it != body.end()) {
    if (index >= it->second->num_outputs()) return bad("is past the node's outputs");
    return std::make_pair(it->second, index);
  }
  return bad("names no argument or node of the function");
}

}  // namespace

StatusOr<std::unique_ptr<FunctionBody>> InstantiateFunction(const FunctionDefLibrary& library,
                                                            const NameAttrList& func,
                                                            const OpRegistry* registry,
                                                            bool copy_library) {
  const FunctionDef* fdef = library.Find(func.name);
  if (!fdef) {
    return Status::Error("function '" + func.name + "' is not in the graph's function library");
  }
  return InstantiateFunctionDef(*fdef, *func.attr, library, registry, copy_library);
}

StatusOr<std::unique_ptr<FunctionBody>> InstantiateFunctionDef(const FunctionDef& fdef,
                                                               const AttrMap& call_attrs,
                                                               const FunctionDefLibrary& library,
                                                               const OpRegistry* registry,
                                                               bool copy_library) {
  const std::string& fname = fdef.signature.name;
  // The call's attrs, then the signature's defaults for attrs it leaves out.
  AttrMap attrs = call_attrs;
  for (const OpDef::AttrDef& a : fdef.signature.attr) {
    if (!attrs.count(a.name) && a.default_value) attrs[a.name] = *a.default_value;
  }

  auto body = std::make_unique<FunctionBody>();
  body->graph = std::make_unique<Graph>(registry);
  Graph* g = body->graph.get();
  if (copy_library) {
    g->library() = library;
  } else {
    g->set_call_library(&library);  // body nodes may call the library's functions by name
  }

  // _Arg nodes, one per input tensor.
  std::map<std::string, ArgRange> args;
  for (const OpDef::ArgDef& arg : fdef.signature.input_arg) {
    std::vector<DataType> types;
    RETURN_IF_ERROR(ArgTypes(fname, arg, attrs, &types));
    ArgRange range{static_cast<int>(body->arg_nodes.size()), static_cast<int>(types.size())};
    if (!args.emplace(arg.name, range).second) {
      return Status::Error(FunctionError(fname, "two arguments are named '" + arg.name + "'"));
    }
    for (size_t i = 0; i < types.size(); ++i) {
      NodeDef def;
      def.name = g->NewName(types.size() == 1 && arg.number_attr.empty() &&
                                    arg.type_list_attr.empty()
                                ? arg.name
                                : arg.name + "_" + std::to_string(i));
      def.op = "_Arg";
      def.attr["T"] = AttrValue::Type(types[i]);
      def.attr["index"] = AttrValue::Int(static_cast<int64_t>(body->arg_nodes.size()));
      if (auto it = fdef.arg_attr.find(range.start + static_cast<int>(i));
          it != fdef.arg_attr.end()) {
        for (const auto& [k, v] : it->second) {
          if (!k.empty() && k[0] == '_') def.attr[k] = v;
        }
      }
      auto n = g->AddNode(std::move(def));
      if (!n.ok()) return Status::Error(FunctionError(fname, n.status().message()));
      body->arg_nodes.push_back(*n);
      body->arg_types.push_back(types[i]);
    }
  }

  // Body nodes, attrs bound.
  std::map<std::string, Node*> nodes;
  std::vector<std::pair<Node*, const NodeDef*>> added;
  for (const NodeDef& nd : fdef.node_def) {
    NodeDef def = nd;
    def.input.clear();
    RETURN_IF_ERROR(BindPlaceholders(fname, nd.name, attrs, &def.attr));
    if (nodes.count(nd.name) || args.count(nd.name)) {
      return Status::Error(FunctionError(fname, "two nodes or arguments are named '" + nd.name +
                                                    "'"));
    }
    auto n = g->AddNode(std::move(def));
    if (!n.ok()) {
      return Status::Error(FunctionError(fname, "node '" + nd.name + "' (" + nd.op +
                                                    "): " + n.status().message()));
    }
    nodes[nd.name] = *n;
    added.emplace_back(*n, &nd);
  }

  auto connect = [&](Node* src, int src_output, Node* dst, int dst_input) -> Status {
    if (dst_input >= dst->num_inputs()) {
      return Status::Error(FunctionError(
          fname, "node '" + dst->name() + "' (" + dst->type_string() + ") has more inputs than its " +
                     std::to_string(dst->num_inputs())));
    }
    DataType have = RemoveRefType(src->output_type(src_output));
    DataType want = RemoveRefType(dst->input_type(dst_input));
    if (have != want) {
      return Status::Error(FunctionError(
          fname, "node '" + dst->name() + "' (" + dst->type_string() + "): input " +
                     std::to_string(dst_input) + " expects " + DataTypeName(want) + ", '" +
                     src->name() + "' gives " + DataTypeName(have)));
    }
    g->AddEdge(src, src_output, dst, dst_input);
    return OkStatus();
  };

  for (auto& [dst, nd] : added) {
    int next_input = 0;
    for (const std::string& input : nd->input) {
      if (!input.empty() && input[0] == '^') {
        auto it = nodes.find(input.substr(1));
        if (it == nodes.end()) {
          // A control input may name an argument (TensorFlow writes `^x_0_arg` when a body node
          // waits for a value it does not read): it waits for that argument's _Arg node.
          auto arg = args.find(input.substr(1));
          if (arg != args.end() && arg->second.count > 0) {
            g->AddControlEdge(body->arg_nodes[arg->second.start], dst);
            continue;
          }
          return Status::Error(FunctionError(fname, "node '" + nd->name + "': control input '" +
                                                        input + "' names no node of the body"));
        }
        g->AddControlEdge(it->second, dst);
        continue;
      }
      auto src = ResolveTensor(fname, input, args, body->arg_nodes, nodes);
      if (!src.ok()) {
        return Status::Error("node '" + nd->name + "' of " + src.status().message());
      }
      RETURN_IF_ERROR(connect(src->first, src->second, dst, next_input++));
    }
    if (next_input != dst->num_inputs()) {
      return Status::Error(FunctionError(fname, "node '" + nd->name + "' (" + nd->op + ") has " +
                                                    std::to_string(next_input) + " inputs, its op takes " +
                                                    std::to_string(dst->num_inputs())));
    }
  }

  // _Retval nodes, one per output tensor.
  for (const OpDef::ArgDef& out : fdef.signature.output_arg) {
    std::vector<DataType> types;
    RETURN_IF_ERROR(ArgTypes(fname, out, attrs, &types));
    auto ret = fdef.ret.find(out.name);
    if (ret == fdef.ret.end()) {
      return Status::Error(FunctionError(fname, "output '" + out.name + "' is never returned"));
    }
    // A list output is returned as one reference per tensor in TensorFlow only for a node's list
    // output ("node:out:0" names its first tensor).
    for (size_t i = 0; i < types.size(); ++i) {
      std::string ref = ret->second;
      if (types.size() > 1) {
        size_t last = ref.rfind(':');
        int base = 0;
        if (last != std::string::npos && ParseIndex(ref.substr(last + 1), &base)) {
          ref = ref.substr(0, last + 1) + std::to_string(base + static_cast<int>(i));
        } else {
          ref += ":" + std::to_string(i);
        }
      }
      auto src = ResolveTensor(fname, ref, args, body->arg_nodes, nodes);
      if (!src.ok()) return Status::Error("output '" + out.name + "' of " + src.status().message());
      NodeDef def;
      def.name = g->NewName(types.size() == 1 ? out.name + "_RetVal"
                                              : out.name + "_" + std::to_string(i) + "_RetVal");
      def.op = "_Retval";
      def.attr["T"] = AttrValue::Type(RemoveRefType(types[i]));
      def.attr["index"] = AttrValue::Int(static_cast<int64_t>(body->ret_nodes.size()));
      auto n = g->AddNode(std::move(def));
      if (!n.ok()) return Status::Error(FunctionError(fname, n.status().message()));
      RETURN_IF_ERROR(connect(src->first, src->second, *n, 0));
      body->ret_nodes.push_back(*n);
      body->ret_types.push_back(RemoveRefType(types[i]));
    }
  }

  // Control outputs, in the signature's order (then any the signature does not list).
  std::vector<std::string> control_names = fdef.signature.control_output;
  for (const auto& [name, node] : fdef.control_ret) {
    if (std::find(control_names.begin(), control_names.end(), name) == control_names.end()) {
      control_names.push_back(name);
    }
  }
  for (const std::string& name : control_names) {
    auto it = fdef.control_ret.find(name);
    if (it == fdef.control_ret.end()) continue;
    auto node = nodes.find(it->second);
    if (node == nodes.end()) {
      return Status::Error(FunctionError(fname, "control output '" + name + "' names no node ('" +
                                                    it->second + "')"));
    }
    body->control_ret_nodes.push_back(node->second);
  }
  return body;
}

namespace {

// "out_arg:index" of output `k` of `node`.
StatusOr<std::string> OutputArgName(const Node& node, int k) {
  for (const OpDef::ArgDef& arg : node.op_def().output_arg) {
    int begin, end;
    RETURN_IF_ERROR(NameRangeForArg(node.name(), node.attrs(), node.op_def(), false, arg.name,
                                    &begin, &end));
    if (k >= begin && k < end) return arg.name + ":" + std::to_string(k - begin);
  }
  return Status::Error("node '" + node.name() + "' (" + node.type_string() + ") has no output " +
                       std::to_string(k));
}

}  // namespace

StatusOr<GraphDef> FunctionDefAsGraphDef(const FunctionDef& fdef) {
  FunctionDefLibrary library;
  library.function.push_back(fdef);
  ASSIGN_OR_RETURN(std::unique_ptr<FunctionBody> body,
                   InstantiateFunctionDef(fdef, {}, library, &OpRegistry::Global(),
                                          /*copy_library=*/true));
  return body->graph->ToGraphDef();
}

StatusOr<FunctionDef> GraphToFunctionDef(const Graph& graph, const std::string& name,
                                         const std::vector<std::string>& control_outputs) {
  FunctionDef fdef;
  fdef.signature.name = name;
  std::map<int64_t, const Node*> args, rets;
  for (const Node* n : graph.op_nodes()) {
    if (n->type_string() == "_Arg" || n->type_string() == "_Retval") {
      const AttrValue* index = FindAttr(n->attrs(), "index");
      if (!index || index->kind() != AttrValue::Kind::kInt) {
        return Status::Error("node '" + n->name() + "' (" + n->type_string() +
                             ") has no int attr 'index'");
      }
      auto& slot = n->type_string() == "_Arg" ? args : rets;
      if (!slot.emplace(index->i(), n).second) {
        return Status::Error("node '" + n->name() + "' (" + n->type_string() + "): index " +
                             std::to_string(index->i()) + " is used twice");
      }
    }
  }
  std::map<const Node*, std::string> arg_names;
  for (const auto& [index, n] : args) {
    OpDef::ArgDef a;
    a.name = n->name();
    a.type = n->output_type(0);
    arg_names[n] = a.name;
    fdef.signature.input_arg.push_back(a);
  }
  auto ref_of = [&](const Node* src, int out) -> StatusOr<std::string> {
    if (auto it = arg_names.find(src); it != arg_names.end()) return it->second;
    ASSIGN_OR_RETURN(std::string arg, OutputArgName(*src, out));
    return src->name() + ":" + arg;
  };
  for (const Node* n : graph.op_nodes()) {
    if (n->type_string() == "_Arg" || n->type_string() == "_Retval") continue;
    NodeDef def = n->def();
    def.input.clear();
    for (int i = 0; i < n->num_inputs(); ++i) {
      auto [src, out] = n->input_node(i);
      if (!src) {
        return Status::Error("node '" + n->name() + "' (" + n->type_string() + "): input " +
                             std::to_string(i) + " is not connected");
      }
      ASSIGN_OR_RETURN(std::string ref, ref_of(src, out));
      def.input.push_back(ref);
    }
    for (const Edge* e : n->in_edges()) {
      if (e->IsControlEdge() && e->src->IsOp()) {
        if (arg_names.count(e->src)) continue;  // an _Arg's control edge has no FunctionDef form
        def.input.push_back("^" + e->src->name());
      }
    }
    fdef.node_def.push_back(std::move(def));
  }
  for (const auto& [index, n] : rets) {
    OpDef::ArgDef a;
    a.name = n->name();
    a.type = n->input_type(0);
    auto [src, out] = n->input_node(0);
    if (!src) return Status::Error("node '" + n->name() + "' (_Retval) has no input");
    ASSIGN_OR_RETURN(std::string ref, ref_of(src, out));
    fdef.ret[a.name] = ref;
    fdef.signature.output_arg.push_back(a);
  }
  for (const std::string& c : control_outputs) {
    if (!graph.FindNode(c)) {
      return Status::Error("control output '" + c + "' names no node of the graph");
    }
    fdef.signature.control_output.push_back(c);
    fdef.control_ret[c] = c;
  }
  return fdef;
}

namespace {

// The calls active on this thread: nested executors run on their caller's thread.
thread_local int call_depth = 0;

struct CallDepthScope {
  CallDepthScope() { ++call_depth; }
  ~CallDepthScope() { --call_depth; }
};

// Bytes of this thread's stack left below the current frame; SIZE_MAX when unknown.
size_t FreeStackBytes() {
  thread_local char* stack_low = nullptr;
  thread_local bool known = false;
  if (!known) {
    known = true;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
      void* addr = nullptr;
      size_t size = 0;
      if (pthread_attr_getstack(&attr, &addr, &size) == 0) stack_low = static_cast<char*>(addr);
      pthread_attr_destroy(&attr);
    }
  }
  if (!stack_low) return SIZE_MAX;
  char here;
  return &here > stack_low ? static_cast<size_t>(&here - stack_low) : 0;
}

// Errors of calls deeper than this pass up unchanged: a chain of n calls would otherwise give a
// message of n "in function" prefixes.
constexpr int kMaxErrorContextDepth = 3;

// One instantiated function and the executor that runs it, kept in the calling node's state (a
// While runs its body once per iteration). `library` is the graph whose function library the
// body's own calls look in: the cache entry is rebuilt if the node runs against another one.
struct CachedFunction {
  std::shared_ptr<FunctionBody> body;
  std::shared_ptr<Executor> executor;
  const Graph* library = nullptr;
};
using FunctionCache = std::map<std::string, CachedFunction>;

}  // namespace

int CurrentCallDepth() { return call_depth; }

StatusOr<std::vector<Tensor>> RunFunction(OpKernelContext& ctx, const NameAttrList& func,
                                          const std::vector<Tensor>& args) {
  const Graph* library = ctx.graph();
  if (!library) return ctx.Error("no function library to find '" + func.name + "' in");
  if (call_depth >= kMaxCallDepth) {
    return Status::Error("function '" + func.name + "' is called " + std::to_string(call_depth + 1) +
                         " calls deep at run time, past the limit of " +
                         std::to_string(kMaxCallDepth) +
                         " (a function that calls itself without end, or a chain of calls too "
                         "deep to run)");
  }
  if (FreeStackBytes() < kMinFreeStackBytes) {
    return Status::Error("function '" + func.name + "' is called " + std::to_string(call_depth + 1) +
                         " calls deep at run time, which leaves too little of the thread's stack");
  }
  CallDepthScope scope;
  KernelState* state = ctx.state();
  auto* cache_ptr = std::any_cast<std::shared_ptr<FunctionCache>>(&state->value);
  if (!cache_ptr) {
    state->value = std::make_shared<FunctionCache>();
    cache_ptr = std::any_cast<std::shared_ptr<FunctionCache>>(&state->value);
  }
  FunctionCache& cache = **cache_ptr;
  std::string key = func.name;
  for (const auto& [k, v] : *func.attr) key += "|" + k + "=" + v.DebugString();
  auto it = cache.find(key);
  if (it != cache.end() && it->second.library != library) {
    cache.erase(it);
    it = cache.end();
  }
  if (it == cache.end()) {
    auto body = InstantiateFunction(library->library(), func, &library->registry(),
                                    /*copy_library=*/false);
    if (!body.ok()) return ctx.Error(body.status().message());
    std::shared_ptr<FunctionBody> shared = std::move(*body);
    ExecutorOptions options;
    options.resources = ctx.resources();
    options.pool = ctx.pool();
    options.max_tensor_bytes = ctx.max_tensor_bytes();
    options.function_library = library;
    auto executor = Executor::Create(shared->graph.get(), options);
    if (!executor.ok()) return ctx.Error(executor.status().message());
    it = cache.emplace(key, CachedFunction{shared, std::shared_ptr<Executor>(std::move(*executor)),
                                           library})
             .first;
  }
  // Held for the call: a nested call of the same node (recursion) may replace the cache entry.
  CachedFunction entry = it->second;
  const FunctionBody& body = *entry.body;
  if (args.size() != body.arg_types.size()) {
    return ctx.Error("function '" + func.name + "' takes " + std::to_string(body.arg_types.size()) +
                     " arguments, the call gives " + std::to_string(args.size()));
  }
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].dtype() != RemoveRefType(body.arg_types[i])) {
      return ctx.Error("function '" + func.name + "': argument " + std::to_string(i) + " is " +
                       DataTypeName(args[i].dtype()) + ", the function takes " +
                       DataTypeName(body.arg_types[i]));
    }
  }
  auto results = entry.executor->Run(args);
  if (!results.ok()) {
    if (call_depth > kMaxErrorContextDepth) return results.status();
    return ctx.Error("in function '" + func.name + "': " + results.status().message());
  }
  return std::move(*results);
}

}  // namespace xlens::graph
