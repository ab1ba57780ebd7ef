// CompilationCache: executables keyed by the module's fingerprint, the argument shapes and the
// compile options (the device counts, XLA's num_replicas and num_partitions, among them), as
// XLA's JIT keeps them. A second run with the same shapes does not compile;
// a module compiled again with other argument shapes is logged as
//   recompiling MODULE: argument shapes changed from (f32[8]) to (f32[16])
// which is what TensorFlow users see as a retrace/recompile storm, made visible.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "compiler/runtime/cpu_compiler.h"

namespace xlens::runtime {

class CompilationCache {
 public:
  // Where "recompiling ..." lines go; stderr when unset.
  explicit CompilationCache(std::function<void(const std::string&)> log = nullptr);

  // The executable for `module` (which is not consumed: a copy is compiled on a miss).
  StatusOr<std::shared_ptr<Executable>> GetOrCompile(const HloModule& module,
                                                     const CompileOptions& options);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }

 private:
  std::function<void(const std::string&)> log_;
  std::map<std::string, std::shared_ptr<Executable>> executables_;
  std::map<std::string, std::string> last_shapes_;  // module name -> argument shapes
  int64_t hits_ = 0, misses_ = 0;
};

// "(f32[8], s32[])": the entry's parameter shapes.
std::string ArgumentShapes(const HloModule& module);

}  // namespace xlens::runtime
