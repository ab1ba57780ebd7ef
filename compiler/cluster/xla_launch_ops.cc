#include "compiler/cluster/xla_launch_ops.h"

#include <algorithm>
#include <any>
#include <memory>
#include <mutex>
#include <vector>

#include <fmt/format.h>

#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "profiler/host_tracer.h"
#include "profiler/trace.h"

namespace xlens::cluster {

using graph::OpKernelContext;
using graph::Tensor;

namespace {

StatusOr<XlaDeviceCompiler*> CompilerFor(OpKernelContext& ctx) {
  std::shared_ptr<graph::ResourceBase> r =
      ctx.resources() ? ctx.resources()->LookupResource(kXlaDeviceCompilerResource) : nullptr;
  auto* compiler = dynamic_cast<XlaDeviceCompiler*>(r.get());
  if (compiler == nullptr) {
    return ctx.Error("the XLA launch ops run only in a session with the XLA JIT enabled");
  }
  return compiler;
}

size_t ListSize(OpKernelContext& ctx, const std::string& attr) {
  const graph::AttrValue* v = graph::FindAttr(ctx.attrs(), attr);
  if (v == nullptr) return 0;
  if (v->kind() == graph::AttrValue::Kind::kInt) return static_cast<size_t>(v->i());
  return v->kind() == graph::AttrValue::Kind::kList ? v->list().type.size() : 0;
}

StatusOr<std::shared_ptr<graph::Var>> VariableOf(OpKernelContext& ctx, const Tensor& handle) {
  if (handle.dtype() != graph::DT_RESOURCE || handle.handles().empty()) {
    return ctx.Error("expected a resource handle");
  }
  const graph::ResourceHandle& h = handle.handle();
  // A variable not assigned yet exists uninitialized, as TensorFlow's resource does: a cluster
  // may be the one that initializes it.
  return ctx.resources()->LookupOrCreate(h.container, h.name, h.dtype, h.shape);
}

// The variables a launch node's resource inputs named on its last call, with the handle tensors
// that named them (held, so no other handle can come at the same address): VarHandleOp hands out
// the same handle tensor every step, as a caller feeds the same handles of its captured
// variables, so a launch finds each of its hundreds of variables without looking its name up in
// the session's resources (ResNet50: 320 a step, twice). A session never drops a variable while
// it runs, so the variable a handle found stays the one it names.
struct VarMemo {
  std::vector<Tensor> handles;
  std::vector<std::shared_ptr<graph::Var>> vars;
};

StatusOr<std::shared_ptr<graph::Var>> KeptVariableOf(OpKernelContext& ctx, VarMemo& memo,
                                                     int input, const Tensor& handle) {
  if (memo.vars.size() != static_cast<size_t>(ctx.num_inputs())) {
    memo.handles.assign(ctx.num_inputs(), Tensor());
    memo.vars.assign(ctx.num_inputs(), nullptr);
  }
  if (memo.vars[input] != nullptr && handle.SharesBufferWith(memo.handles[input])) {
    return memo.vars[input];
  }
  ASSIGN_OR_RETURN(std::shared_ptr<graph::Var> var, VariableOf(ctx, handle));
  memo.handles[input] = handle;
  memo.vars[input] = var;
  return var;
}

// What a launch's compiled signature depends on, per input after the constants: the dtype and
// dims of an argument, and for a resource the variable itself and whether it holds a value.
struct ArgKey {
  const graph::Var* var = nullptr;
  graph::DataType dtype = graph::DT_INVALID;
  bool initialized = false;
  std::vector<int64_t> dims;
  bool operator==(const ArgKey&) const = default;
};

// The last signature a launch node compiled to and the keys of its arguments then. A launch whose
// arguments are the same as last time (every call of a loop) takes it without building the
// signature text again: over a function's hundreds of captured variables that took half a
// millisecond a call. The keys hold the variables, so a variable made anew (the session's
// resources cleared) never matches an old one at the same address. The function is known by its
// attrs' map, held, and its name, so a repeated launch does not spell its canonical name either;
// the key goes out as the same string tensor every time instead of a new string a call.
struct CompileMemo {
  std::mutex mu;
  std::shared_ptr<const graph::AttrMap> attrs;  // the launched function's, held for identity
  std::string name;                             // the launched function's name
  std::string function;  // its canonical name (nodes of two graphs share a node name)
  std::vector<ArgKey> keys;
  std::vector<std::shared_ptr<graph::Var>> vars;
  std::string signature;
  Tensor key;  // StringScalar(signature)
  VarMemo variables;
};

template <typename Memo>
std::shared_ptr<Memo> MemoOf(OpKernelContext& ctx) {
  if (ctx.state() == nullptr) return nullptr;
  std::any& value = ctx.state()->value;
  if (auto* memo = std::any_cast<std::shared_ptr<Memo>>(&value)) return *memo;
  auto memo = std::make_shared<Memo>();
  value = memo;
  return memo;
}

// Whether the launch's inputs after the constants are those `memo` keyed last time, compared in
// place (no key is built: a vector of dims per argument cost an allocation each).
StatusOr<bool> SameArguments(OpKernelContext& ctx, CompileMemo& memo, size_t num_args) {
  if (memo.signature.empty() || memo.keys.size() != static_cast<size_t>(ctx.num_inputs())) {
    return false;
  }
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const ArgKey& key = memo.keys[i];
    if (static_cast<size_t>(i) < num_args) {
      if (key.var != nullptr || key.dtype != t.dtype() || key.dims != t.dims()) return false;
      continue;
    }
    ASSIGN_OR_RETURN(std::shared_ptr<graph::Var> var, KeptVariableOf(ctx, memo.variables, i, t));
    if (var.get() != key.var) return false;
    std::lock_guard<std::mutex> lock(var->mu);
    if (var->is_initialized() != key.initialized) return false;
    if (key.initialized) {
      if (var->value.dtype() != key.dtype || var->value.dims() != key.dims) return false;
    } else if (var->dtype != key.dtype) {
      return false;
    }
  }
  return true;
}

Status XlaCompileKernel(OpKernelContext& ctx) {
  ASSIGN_OR_RETURN(XlaDeviceCompiler * compiler, CompilerFor(ctx));
  const graph::AttrValue* function = graph::FindAttr(ctx.attrs(), "function");
  if (function == nullptr || function->kind() != graph::AttrValue::Kind::kFunc) {
    return ctx.Error("missing attr 'function'");
  }
  ASSIGN_OR_RETURN(bool must_compile, ctx.GetAttr<bool>("must_compile"));
  const size_t num_constants = ListSize(ctx, "Tconstants");
  const size_t num_args = ListSize(ctx, "Targs");
  const size_t num_resources = ListSize(ctx, "Nresources");
  if (static_cast<size_t>(ctx.num_inputs()) != num_constants + num_args + num_resources) {
    return ctx.Error("the input count does not match Tconstants, Targs and Nresources");
  }
  // The arguments' keys (constants' values are not keyed: a launch with constants takes the
  // whole path).
  std::vector<ArgKey> keys;
  std::vector<std::shared_ptr<graph::Var>> vars;
  std::string function_name;
  std::shared_ptr<CompileMemo> memo = num_constants == 0 ? MemoOf<CompileMemo>(ctx) : nullptr;
  if (memo != nullptr) {
    const graph::NameAttrList& func = function->func();
    std::lock_guard<std::mutex> lock(memo->mu);
    if (memo->attrs == func.attr && memo->name == func.name) {
      ASSIGN_OR_RETURN(bool same, SameArguments(ctx, *memo, num_args));
      if (same) {
        ctx.set_output(0, memo->key);
        ctx.set_output(1, Tensor::Scalar<bool>(graph::DT_BOOL, true));
        return OkStatus();
      }
    }
  }
  if (memo != nullptr) {
    keys.resize(ctx.num_inputs());
    vars.resize(ctx.num_inputs());
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& t = ctx.input(i);
      ArgKey& key = keys[i];
      if (static_cast<size_t>(i) < num_args) {
        key.dtype = t.dtype();
        key.dims = t.dims();
        continue;
      }
      ASSIGN_OR_RETURN(vars[i], VariableOf(ctx, t));
      std::lock_guard<std::mutex> lock(vars[i]->mu);
      key.var = vars[i].get();
      key.dtype = vars[i]->dtype;
      key.initialized = vars[i]->is_initialized();
      if (key.initialized) {
        key.dtype = vars[i]->value.dtype();
        key.dims = vars[i]->value.dims();
      }
    }
    function_name = ModuleNameForFunction(function->func());
    std::lock_guard<std::mutex> lock(memo->mu);
    if (!memo->signature.empty() && memo->function == function_name && memo->keys == keys) {
      memo->attrs = function->func().attr;
      memo->name = function->func().name;
      ctx.set_output(0, memo->key);
      ctx.set_output(1, Tensor::Scalar<bool>(graph::DT_BOOL, true));
      return OkStatus();
    }
  }
  std::vector<XlaArgument> args;
  for (int i = 0; i < ctx.num_inputs(); ++i) {
    XlaArgument arg;
    const Tensor& t = ctx.input(i);
    if (static_cast<size_t>(i) < num_constants) {
      arg.kind = XlaArgument::Kind::kConstant;
      arg.constant_value = t;
      arg.dtype = t.dtype();
      arg.shape = t.dims();
    } else if (static_cast<size_t>(i) < num_constants + num_args) {
      arg.kind = XlaArgument::Kind::kParameter;
      arg.dtype = t.dtype();
      arg.shape = t.dims();
    } else {
      std::shared_ptr<graph::Var> var = vars.empty() ? nullptr : vars[i];
      if (var == nullptr) {
        ASSIGN_OR_RETURN(var, VariableOf(ctx, t));
      }
      std::lock_guard<std::mutex> lock(var->mu);
      arg.kind = XlaArgument::Kind::kResource;
      arg.name = t.handle().name;
      arg.dtype = var->dtype;
      arg.initialized = var->is_initialized();
      if (arg.initialized) {
        arg.dtype = var->value.dtype();
        arg.shape = var->value.dims();
      }
    }
    args.push_back(std::move(arg));
  }
  const graph::Graph* g = ctx.graph();
  if (g == nullptr) return ctx.Error("no function library to compile from");
  auto compiled = compiler->Compile(g->library(), function->func(), args, /*lazy=*/!must_compile);
  if (!compiled.ok()) {
    if (must_compile) return ctx.Error(compiled.status().message());
    // An auto-clustered cluster that cannot be compiled runs op by op, and says so.
    std::fprintf(stderr, "xlens: %s cannot be compiled, running it op by op: %s\n",
                 function->func().name.c_str(), compiled.status().message().c_str());
    ctx.set_output(0, Tensor::StringScalar(""));
    ctx.set_output(1, Tensor::Scalar<bool>(graph::DT_BOOL, false));
    return OkStatus();
  }
  const bool ok = *compiled != nullptr;
  if (ok && memo != nullptr) {
    std::lock_guard<std::mutex> lock(memo->mu);
    memo->attrs = function->func().attr;
    memo->name = function->func().name;
    memo->function = std::move(function_name);
    memo->keys = std::move(keys);
    memo->vars = std::move(vars);
    memo->signature = (*compiled)->signature;
    memo->key = Tensor::StringScalar(memo->signature);
    ctx.set_output(0, memo->key);
    ctx.set_output(1, Tensor::Scalar<bool>(graph::DT_BOOL, true));
    return OkStatus();
  }
  ctx.set_output(0, Tensor::StringScalar(ok ? (*compiled)->signature : ""));
  ctx.set_output(1, Tensor::Scalar<bool>(graph::DT_BOOL, ok));
  return OkStatus();
}

// The cluster a launch node ran last and the key tensor that named it: the next call with the
// same key (every call after the first, since _XlaCompile hands out its key tensor again) takes
// it without looking the long signature text up in the compiler's cache.
struct RunMemo {
  std::mutex mu;
  std::shared_ptr<graph::ResourceBase> compiler;  // held: the cache the cluster came from
  Tensor key;
  std::shared_ptr<XlaCompiledCluster> cluster;
  VarMemo variables;
};

StatusOr<std::shared_ptr<XlaCompiledCluster>> ClusterFor(OpKernelContext& ctx, const Tensor& key) {
  std::shared_ptr<graph::ResourceBase> base =
      ctx.resources() ? ctx.resources()->LookupResource(kXlaDeviceCompilerResource) : nullptr;
  auto* compiler = dynamic_cast<XlaDeviceCompiler*>(base.get());
  if (compiler == nullptr) {
    return ctx.Error("the XLA launch ops run only in a session with the XLA JIT enabled");
  }
  std::shared_ptr<RunMemo> memo = MemoOf<RunMemo>(ctx);
  if (memo != nullptr) {
    std::lock_guard<std::mutex> lock(memo->mu);
    if (memo->cluster != nullptr && memo->compiler == base &&
        (key.SharesBufferWith(memo->key) || memo->cluster->signature == key.strings()[0])) {
      memo->key = key;
      return memo->cluster;
    }
  }
  std::shared_ptr<XlaCompiledCluster> cluster = compiler->Lookup(key.strings()[0]);
  if (cluster == nullptr) {
    return ctx.Error("no compiled cluster for key '" + key.strings()[0] + "'");
  }
  if (memo != nullptr) {
    std::lock_guard<std::mutex> lock(memo->mu);
    memo->compiler = std::move(base);
    memo->key = key;
    memo->cluster = cluster;
  }
  return cluster;
}

// The compiled program's result for `held` (one tensor per entry parameter). Arguments of the
// entry's own types and dims (every argument, unless a variable changed shape after the launch
// was keyed) go as arrays where the tensors hold them: no literal per argument is looked at
// leaf by leaf, as Execute does for tuples. Others go through Execute, which checks them.
StatusOr<Literal> RunCluster(XlaCompiledCluster& cluster, const std::vector<Tensor>& held) {
  const HloComputation& entry = *cluster.executable->module().entry_computation();
  bool as_arrays = static_cast<int64_t>(held.size()) == entry.num_parameters();
  std::vector<const void*> arrays;
  arrays.reserve(held.size());
  for (size_t p = 0; as_arrays && p < held.size(); ++p) {
    const Tensor& t = held[p];
    const Shape& shape = entry.parameter_instruction(static_cast<int64_t>(p))->shape();
    const graph::DataType d = t.dtype();
    const bool numeric = d != graph::DT_INVALID && d != graph::DT_STRING &&
                         d != graph::DT_RESOURCE && d != graph::DT_VARIANT;
    as_arrays = numeric && shape.IsArray() &&
                shape.element_type() == graph::ToPrimitiveType(d) &&
                std::equal(shape.dimensions().begin(), shape.dimensions().end(), t.dims().begin(),
                           t.dims().end()) &&
                t.num_elements() > 0 && t.raw_data() != nullptr;
    if (as_arrays) arrays.push_back(t.raw_data());
  }
  if (as_arrays) {
    std::lock_guard<std::mutex> lock(cluster.run_mu);
    return cluster.executable->ExecuteOnArrays(std::span<const void* const>(arrays));
  }
  std::vector<Literal> reshaped;  // a tensor whose dims are not its literal's
  reshaped.reserve(held.size());
  std::vector<const Literal*> literals;
  literals.reserve(held.size());
  for (const Tensor& t : held) {
    const graph::DataType d = t.dtype();
    const bool numeric = d != graph::DT_INVALID && d != graph::DT_STRING && d != graph::DT_RESOURCE &&
                         d != graph::DT_VARIANT;
    if (numeric && t.literal().shape().dimensions() == t.dims()) {
      literals.push_back(&t.literal());
    } else {
      ASSIGN_OR_RETURN(Literal l, t.ToLiteral());
      reshaped.push_back(std::move(l));
      literals.push_back(&reshaped.back());
    }
  }
  std::lock_guard<std::mutex> lock(cluster.run_mu);
  return cluster.executable->Execute(std::span<const Literal* const>(literals));
}

Status XlaRunKernel(OpKernelContext& ctx) {
  const int key_index = ctx.num_inputs() - 1;
  const Tensor& key = ctx.input(key_index);
  if (key.dtype() != graph::DT_STRING || key.strings().empty()) {
    return ctx.Error("the compilation key must be a string scalar");
  }
  ASSIGN_OR_RETURN(std::shared_ptr<XlaCompiledCluster> cluster, ClusterFor(ctx, key));
  // _XlaRun's inputs are the launch's arguments after the constants.
  const int num_constants = static_cast<int>(std::count(
      cluster->arg_kinds.begin(), cluster->arg_kinds.end(), XlaArgument::Kind::kConstant));
  auto input_of_arg = [&](int arg) { return arg - num_constants; };

  profiler::TraceSpan span(cluster->function_name, profiler::category::kExecute);
  span.AddArg("module", cluster->module_name);
  // The arguments are passed where the tensors hold them (a variable's value is taken, shared,
  // under its lock and kept alive by `held` through the run): copying ResNet50's 94 MB of
  // weights into fresh literals on every call cost more than running it.
  std::vector<Tensor> held;
  held.reserve(cluster->input_mapping.size());
  std::vector<std::shared_ptr<graph::Var>> vars(cluster->arg_kinds.size());
  std::shared_ptr<RunMemo> memo = MemoOf<RunMemo>(ctx);
  std::unique_lock<std::mutex> memo_lock;
  if (memo != nullptr) memo_lock = std::unique_lock<std::mutex>(memo->mu);
  for (int arg : cluster->input_mapping) {
    int input = input_of_arg(arg);
    if (input < 0 || input >= key_index) return ctx.Error("argument mapping out of range");
    const Tensor& t = ctx.input(input);
    if (cluster->arg_kinds[arg] == XlaArgument::Kind::kResource) {
      if (memo != nullptr) {
        ASSIGN_OR_RETURN(vars[arg], KeptVariableOf(ctx, memo->variables, input, t));
      } else {
        ASSIGN_OR_RETURN(vars[arg], VariableOf(ctx, t));
      }
      std::lock_guard<std::mutex> lock(vars[arg]->mu);
      held.push_back(vars[arg]->value);
    } else {
      held.push_back(t);
    }
  }
  if (memo_lock.owns_lock()) memo_lock.unlock();
  ASSIGN_OR_RETURN(Literal result, RunCluster(*cluster, held));
  const int num_outputs = cluster->num_retvals + static_cast<int>(cluster->resource_updates.size());
  std::vector<Literal> outputs;
  if (num_outputs == 1 && !result.shape().IsTuple()) {
    outputs.push_back(std::move(result));
  } else {
    outputs = std::move(result.tuple_elements());
  }
  if (static_cast<int>(outputs.size()) != num_outputs) {
    return ctx.Error(fmt::format("the compiled cluster returned {} values, expected {}",
                                 outputs.size(), num_outputs));
  }
  for (int i = 0; i < cluster->num_retvals; ++i) {
    if (i >= ctx.num_outputs()) break;
    ASSIGN_OR_RETURN(Tensor t, Tensor::FromLiteral(std::move(outputs[i])));
    ctx.set_output(i, std::move(t));
  }
  for (size_t k = 0; k < cluster->resource_updates.size(); ++k) {
    int arg = cluster->resource_updates[k];
    std::shared_ptr<graph::Var> var = vars[arg];
    if (var == nullptr) {
      ASSIGN_OR_RETURN(var, VariableOf(ctx, ctx.input(input_of_arg(arg))));
    }
    ASSIGN_OR_RETURN(Tensor t,
                     Tensor::FromLiteral(std::move(outputs[cluster->num_retvals + k])));
    std::lock_guard<std::mutex> lock(var->mu);
    if (var->dtype == graph::DT_INVALID) var->dtype = t.dtype();
    var->value = std::move(t);
  }
  return OkStatus();
}

}  // namespace

void RegisterXlaLaunchKernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    const graph::OpRegistry& registry = graph::OpRegistry::Global();
    graph::SetKernel(registry, "_XlaCompile", XlaCompileKernel);
    graph::SetKernel(registry, "_XlaRun", XlaRunKernel);
  });
}

}  // namespace xlens::cluster
