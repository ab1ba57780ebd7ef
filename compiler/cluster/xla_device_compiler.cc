#include "compiler/cluster/xla_device_compiler.h"

#include <atomic>
#include <cstdio>

#include <fmt/format.h>

#include "compiler/graph/graph_def_io.h"
#include "compiler/passes/hlo_pipelines.h"
#include "profiler/host_tracer.h"

namespace xlens::cluster {

namespace {

std::atomic<int64_t> next_module_id{1};

std::string ShapeText(graph::DataType dtype, const std::vector<int64_t>& dims) {
  std::string text = std::string(PrimitiveTypeName(graph::ToPrimitiveType(dtype))) + "[";
  for (size_t i = 0; i < dims.size(); ++i) text += (i ? "," : "") + std::to_string(dims[i]);
  return text + "]";
}

std::string AttrText(const graph::AttrValue& value) {
  switch (value.kind()) {
    case graph::AttrValue::Kind::kBool:
      return value.b() ? "true" : "false";
    case graph::AttrValue::Kind::kInt:
      return std::to_string(value.i());
    case graph::AttrValue::Kind::kString:
      return value.s();
    default:
      return value.DebugString();
  }
}

// A constant argument's value is part of the signature: a hash of its bytes.
std::string ValueDigest(const graph::Tensor& t) {
  auto proto = graph::TensorToProto(t);
  const std::string bytes = proto.ok() ? *proto : t.DebugString(16);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:016x}", h);
}

}  // namespace

std::string ModuleNameForFunction(const graph::NameAttrList& function) {
  std::string canonical = function.name + "[";
  bool first = true;
  for (const auto& [key, value] : *function.attr) {
    canonical += (first ? "" : ",") + key + "=" + AttrText(value);
    first = false;
  }
  canonical += "]";
  for (char& c : canonical) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '.' && c != '-') c = '_';
  }
  // An HLO module name starts with a letter: TensorFlow's "__inference_f_7" module is
  // "a_inference_f_7...".
  if (!canonical.empty() && canonical[0] == '_') canonical[0] = 'a';
  return canonical;
}

std::string ArgumentShapesText(const std::vector<XlaArgument>& args) {
  std::string text = "(";
  for (size_t i = 0; i < args.size(); ++i) {
    text += i ? ", " : "";
    if (args[i].kind == XlaArgument::Kind::kResource) text += "resource ";
    text += ShapeText(args[i].dtype, args[i].shape);
  }
  return text + ")";
}

XlaDeviceCompiler::XlaDeviceCompiler(DebugOptions flags,
                                     std::function<void(const std::string&)> log)
    : flags_(std::move(flags)), log_(std::move(log)) {
  compile_options_.opt_level = static_cast<int>(flags_.xla_backend_optimization_level);
  compile_options_.optimize.filter.disabled = {flags_.xla_disable_hlo_passes.begin(),
                                               flags_.xla_disable_hlo_passes.end()};
  compile_options_.optimize.filter.enabled_only = {flags_.xla_enable_hlo_passes_only.begin(),
                                                   flags_.xla_enable_hlo_passes_only.end()};
  if (!flags_.xla_reduce_precision.empty()) {
    auto config = ParseReducePrecisionFlag(flags_.xla_reduce_precision);
    if (config.ok()) compile_options_.optimize.reduce_precision = *config;
  }
  if (!flags_.xla_dump_to.empty() || flags_.xla_dump_hlo_as_text || flags_.xla_dump_hlo_as_dot ||
      flags_.xla_dump_hlo_as_html) {
    dump_ = std::make_unique<DumpContext>(flags_);
    if (dump_->enabled()) compile_options_.optimize.dump = dump_.get();
  }
}

XlaDeviceCompiler::~XlaDeviceCompiler() = default;

void XlaDeviceCompiler::Log(const std::string& line) {
  if (log_) {
    log_(line);
  } else {
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

StatusOr<std::shared_ptr<XlaCompiledCluster>> XlaDeviceCompiler::Compile(
    const graph::FunctionDefLibrary& library, const graph::NameAttrList& function,
    const std::vector<XlaArgument>& args, bool lazy) {
  const std::string canonical = ModuleNameForFunction(function);
  const std::string shapes = ArgumentShapesText(args);
  std::string signature = canonical + shapes;
  for (const XlaArgument& a : args) {
    if (a.kind == XlaArgument::Kind::kConstant) signature += "," + ValueDigest(a.constant_value);
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = compiled_.find(signature); it != compiled_.end()) return it->second;
    int requests = ++requests_[signature];
    bool compiled_before = last_shapes_.count(function.name) != 0;
    if (lazy && compiled_before && requests < 2) {
      // TensorFlow compiles a cluster's second signature only when it comes back: a shape seen
      // once may never be seen again.
      ++lazy_fallbacks_;
      Log(fmt::format("not compiling {} for argument shapes {} yet: this launch runs op by op "
                      "(lazy compilation); it compiles if they come again",
                      function.name, shapes));
      profiler::TraceSpan span("lazy fallback " + function.name, profiler::category::kCompile);
      span.AddArg("shapes", shapes);
      return std::shared_ptr<XlaCompiledCluster>();
    }
    if (compiled_before) {
      std::string line = fmt::format("recompiling {}: argument shapes changed from {} to {}",
                                     function.name, last_shapes_[function.name], shapes);
      Log(line);
      profiler::TraceSpan span("recompile " + function.name, profiler::category::kCompile);
      span.AddArg("reason", line);
    }
    last_shapes_[function.name] = shapes;
  }

  auto cluster = std::make_shared<XlaCompiledCluster>();
  cluster->function_name = function.name;
  cluster->module_name = canonical + "." + std::to_string(next_module_id++);
  cluster->signature = signature;
  for (const XlaArgument& a : args) cluster->arg_kinds.push_back(a.kind);
  ASSIGN_OR_RETURN(std::unique_ptr<graph::FunctionBody> body,
                   FunctionBodyForCompilation(library, function.name));
  XlaCompileOptions options;
  options.module_name = cluster->module_name;
  ASSIGN_OR_RETURN(XlaCompilationResult lowered, CompileGraphToHlo(*body->graph, args, options));
  cluster->input_mapping = lowered.input_mapping;
  cluster->resource_updates = lowered.resource_updates;
  cluster->num_retvals =
      static_cast<int>(lowered.output_dtypes.size() - lowered.resource_updates.size());
  ASSIGN_OR_RETURN(std::unique_ptr<runtime::Executable> exe,
                   runtime::CompileForCpu(std::move(lowered.module), compile_options_));
  cluster->executable = std::move(exe);

  // The manifest links the cluster of the graph to the module it became.
  if (DumpContext* dump = dump_context()) {
    dump->RecordClusterModule(function.name, cluster->module_name);
  }
  std::lock_guard<std::mutex> lock(mu_);
  compiled_[signature] = cluster;
  modules_[function.name].push_back(cluster->module_name);
  return cluster;
}

std::shared_ptr<XlaCompiledCluster> XlaDeviceCompiler::Lookup(const std::string& key) const {
  lookups_.fetch_add(1, std::memory_order_relaxed);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = compiled_.find(key);
  return it == compiled_.end() ? nullptr : it->second;
}

int64_t XlaDeviceCompiler::compilations() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(compiled_.size());
}

int64_t XlaDeviceCompiler::lazy_fallbacks() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lazy_fallbacks_;
}

std::map<std::string, std::vector<std::string>> XlaDeviceCompiler::modules_by_cluster() const {
  std::lock_guard<std::mutex> lock(mu_);
  return modules_;
}

}  // namespace xlens::cluster
