// CpuJit: LLVM's ORC JIT for the host CPU, with the host's features, the standard optimization
// pipeline at the chosen level, and the runtime symbols generated code calls.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "compiler/support/status.h"

namespace llvm {
class LLVMContext;
class Module;
namespace orc {
class LLJIT;
}
}  // namespace llvm

namespace xlens::codegen {

struct CpuJitOptions {
  int opt_level = 3;  // 0..3, as --xla_backend_optimization_level
};

// What compiling a module produced besides the code: its IR before and after optimization.
struct CompiledIr {
  std::string ir_no_opt;
  std::string ir_with_opt;
};

class CpuJit {
 public:
  static StatusOr<std::unique_ptr<CpuJit>> Create(const CpuJitOptions& options = {});
  ~CpuJit();

  // Optimizes `module` for the host, adds it to the JIT and returns its IR text before and after
  // optimization (only when `keep_ir`).
  StatusOr<CompiledIr> AddModule(std::unique_ptr<llvm::Module> module,
                                 std::unique_ptr<llvm::LLVMContext> context, bool keep_ir);
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

// Optimizes `module` in place for the host CPU at `opt_level`.
Status OptimizeModuleForHost(llvm::Module& module, int opt_level);

}  // namespace xlens::codegen
