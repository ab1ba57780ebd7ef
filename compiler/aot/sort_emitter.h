// A sort in the ahead-of-time entry function: the JIT hands sorts to its runtime (std::stable_sort
// over a permutation); an object that links only libc gets generated code instead, a stable
// insertion sort of every slice along the sort dimension, in place, with the comparator the
// kernel emitter makes. Quadratic in the sorted length, so long sorts are refused by name.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::aot {

// The longest slice a sort may have (beyond it: an error naming the sort).
inline constexpr int64_t kMaxInsertionSortLength = 1 << 14;

// Why `sort` cannot be generated ("" when it can): too long, or its operands and results not in
// one layout.
std::string WhyNotGeneratedSort(const HloInstruction& sort);

// Sorts the arrays at `outputs` (one per operand of `sort`, already holding the operands'
// values) along the sort dimension. `allocas` inserts in the function's first block (the
// comparator's argument tables); `comparator` is `i8 (ptr lhs, ptr rhs)` (EmitComparator).
void EmitInsertionSort(llvm::IRBuilder<>& b, llvm::IRBuilder<>& allocas, const HloInstruction& sort,
                       llvm::Function* comparator, const std::vector<llvm::Value*>& outputs);

}  // namespace xlens::aot
