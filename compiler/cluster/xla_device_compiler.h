// What TensorFlow's DeviceCompiler does for the XLA launch ops: compiles a cluster's function
// for the argument signature of a launch (shapes and types of the arguments, values of the
// compile-time constants, the variables' types and shapes), caches the executable by that
// signature, and decides when to compile. For auto-clustered launches it follows TensorFlow's
// lazy rule: a cluster's first signature compiles at once; a new signature of a cluster compiled
// before runs op by op on its first request and compiles on the second. Must-compile launches
// always compile. Every compilation of a cluster after its first says why, in one line:
//   recompiling cluster_0: argument shapes changed from (f32[1,10], f32[1,10]) to (f32[1,100], f32[1,100])
// on the log (stderr) and as a span of the trace.
#pragma once

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "compiler/cluster/tf2xla/xla_compiler.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/runtime/cpu_compiler.h"
#include "dump/dump_context.h"
#include "dump/flags.h"

namespace xlens::cluster {

// One compiled signature of a cluster.
struct XlaCompiledCluster {
  std::string function_name;  // "cluster_0"
  std::string module_name;    // "cluster_0__XlaCompiledKernel_true__..._.3"
  std::string signature;      // the cache key
  std::vector<XlaArgument::Kind> arg_kinds;
  std::vector<int> input_mapping;     // entry parameter -> argument index
  std::vector<int> resource_updates;  // outputs after the retvals -> argument index
  int num_retvals = 0;
  std::shared_ptr<runtime::Executable> executable;
  std::mutex run_mu;  // an executable's buffers serve one run at a time
};

class XlaDeviceCompiler : public graph::ResourceBase {
 public:
  // `log` receives the one-line notices (recompiles, lazy decisions); stderr when null.
  XlaDeviceCompiler(DebugOptions flags, std::function<void(const std::string&)> log = nullptr);
  ~XlaDeviceCompiler() override;

  // The executable for `function` (of `library`) at `args`, compiled if needed. With `lazy`,
  // may decline (TensorFlow's lazy rule): then returns null and the launch runs the fallback.
  StatusOr<std::shared_ptr<XlaCompiledCluster>> Compile(const graph::FunctionDefLibrary& library,
                                                        const graph::NameAttrList& function,
                                                        const std::vector<XlaArgument>& args,
                                                        bool lazy);
  // A compiled signature by its key (what _XlaCompile hands _XlaRun).
  std::shared_ptr<XlaCompiledCluster> Lookup(const std::string& key) const;
  // How many times a launch looked a key up in the cache (a launch that ran the same cluster
  // last time does not: it keeps the cluster its key named).
  int64_t lookups() const { return lookups_.load(std::memory_order_relaxed); }

  int64_t compilations() const;
  int64_t lazy_fallbacks() const;
  // The XLA dump of the compiled modules (null when --xla_dump_to is not set): the clustering
  // records its graphs in its manifest.
  DumpContext* dump_context() const { return dump_ && dump_->enabled() ? dump_.get() : nullptr; }
  // Every module compiled so far, per cluster function ("cluster_0" -> module names).
  std::map<std::string, std::vector<std::string>> modules_by_cluster() const;

 private:
  void Log(const std::string& line);
  DebugOptions flags_;
  std::function<void(const std::string&)> log_;
  std::unique_ptr<DumpContext> dump_;
  runtime::CompileOptions compile_options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<XlaCompiledCluster>> compiled_;
  std::map<std::string, int> requests_;             // signature -> requests seen
  std::map<std::string, std::string> last_shapes_;  // function -> its last compiled shapes
  std::map<std::string, std::vector<std::string>> modules_;
  int64_t lazy_fallbacks_ = 0;
  mutable std::atomic<int64_t> lookups_{0};
};

// TensorFlow's name for a function with its attrs (Canonicalize), as its HLO module is named:
// "cluster_0[_XlaCompiledKernel=true,_XlaNumConstantArgs=0]" becomes
// "cluster_0__XlaCompiledKernel_true__XlaNumConstantArgs_0_".
std::string ModuleNameForFunction(const graph::NameAttrList& function);

// "(f32[1,10], s32[])": the launch's arguments as shapes (constants with their values elided).
std::string ArgumentShapesText(const std::vector<XlaArgument>& args);

}  // namespace xlens::cluster
