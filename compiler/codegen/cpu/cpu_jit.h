// CpuJit: LLVM's ORC JIT for the host CPU, with the host's features, the standard optimization
// pipeline at the chosen level, and the runtime symbols generated code calls.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/support/status.h"

namespace llvm {
class Function;
class LLVMContext;
class Module;
class TargetLibraryInfoImpl;
class TargetMachine;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace xlens::codegen {

struct CpuJitOptions {
  int opt_level = 3;  // 0..3, as --xla_backend_optimization_level
  // --xla_xlens_persistent_cache_dir: compiled partitions are kept here across processes
  // (object_cache.h); empty: in memory only.
  std::string persistent_cache_dir;
  // Where to list the linked functions for perf (perf_map.h); empty: XLENS_PERF_MAP decides.
  std::string perf_map_path;
};

// What compiling a module produced besides the code: its IR before and after optimization, and
// how much of it came from the object cache.
struct CompiledIr {
  std::string ir_no_opt;
  std::string ir_with_opt;
  int partitions = 0;
  int cached_partitions = 0;
  // Cache entries that were corrupt or could not be written (the compilation went on).
  std::vector<std::string> warnings;
};

class CpuJit {
 public:
  static StatusOr<std::unique_ptr<CpuJit>> Create(const CpuJitOptions& options = {});
  ~CpuJit();

  // Optimizes `module` for the host, compiles it and adds it to the JIT; returns its IR text
  // before and after optimization (only when `keep_ir`). The module is split into partitions
  // (module_partition.h) that are optimized and compiled to machine code in parallel on the
  // default thread pool, each function at the level `level_of` gives it (unset: the JIT's).
  StatusOr<CompiledIr> AddModule(std::unique_ptr<llvm::Module> module,
                                 std::unique_ptr<llvm::LLVMContext> context, bool keep_ir,
                                 const std::function<int(const llvm::Function&)>& level_of = {});
  // Makes host functions callable by the modules added later (name -> address).
  Status DefineSymbols(const std::vector<std::pair<std::string, void*>>& symbols);
  // The address of a function of an added module.
  StatusOr<void*> Lookup(const std::string& name);

  // "x86_64-pc-linux-gnu, cpu skylake-avx512" for logs.
  const std::string& target_description() const { return target_description_; }

 private:
  CpuJit() = default;
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  CpuJitOptions options_;
  std::string target_description_;
  std::string cpu_, features_, triple_;
};

// An ELF object file for the host CPU from optimized LLVM IR text (what `xlens compile
// --emit=obj` writes).
StatusOr<std::string> CompileIrToHostObject(const std::string& ir_text);

// LLVM's standard pipeline at `opt_level` (0..3; vectorizers from 2) over `module`, for `tm`
// (null: no target), with the library functions `library_info` describes.
void RunStandardPipeline(llvm::Module& module, llvm::TargetMachine* tm, int opt_level,
                         const llvm::TargetLibraryInfoImpl& library_info);

// Optimizes `module` in place for the host CPU at `opt_level`, its functions given the target
// attributes the JIT gives them (the same vector width on every machine of the same features).
Status OptimizeModuleForHost(llvm::Module& module, int opt_level);

}  // namespace xlens::codegen
