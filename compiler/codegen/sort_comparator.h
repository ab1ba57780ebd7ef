// The comparator function of a sort instruction, as the JIT and ahead-of-time compilers both
// generate it beside the module's kernels.
#pragma once

#include <set>
#include <string>

#include <llvm/IR/Module.h>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// Emits the comparator of `sort` (its to_apply over one element of each operand, EmitComparator)
// into `module` under a name not in `taken` ("<sort>_comparator"); returns that name.
StatusOr<std::string> EmitSortComparator(const HloInstruction& sort, std::set<std::string>& taken,
                                         llvm::Module& module);

}  // namespace xlens::codegen
