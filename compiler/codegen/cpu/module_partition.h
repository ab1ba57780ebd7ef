// PartitionModule: splits a module's kernels into independent modules (as bitcode, so that each
// can be read into its own LLVMContext and optimized and compiled on its own thread), grouped by
// the optimization level each kernel is to be compiled at. Every exported function is defined in
// exactly one partition and declared where others call it; functions with internal linkage are
// copied into every partition (so that they still inline); global variables of internal linkage
// are given external names and defined once, so a large constant is never duplicated.
// The JIT links the partitions' objects back together.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/support/status.h"

namespace llvm {
class Function;
class Module;
}  // namespace llvm

namespace xlens::codegen {

struct ModulePartition {
  std::string bitcode;
  int opt_level = 3;
  std::vector<std::string> functions;  // the exported functions it defines
};

// Splits `module` (which is changed: its internal global variables become external ones) into at most `partitions_per_level` partitions per optimization level, balanced by
// instruction count. `level_of` gives each exported function's level.
StatusOr<std::vector<ModulePartition>> PartitionModule(
    llvm::Module& module, const std::function<int(const llvm::Function&)>& level_of,
    int partitions_per_level);

}  // namespace xlens::codegen
