// The few GPU building blocks the kernel emitters share, as NVVM intrinsics that both the NVPTX
// back end and the GPU simulator understand: thread and block indices, barriers, warp shuffles
// of any scalar value, shared memory (address space 3), and a warp-wide reduction with an HLO
// reducer.
#pragma once

#include <string_view>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "compiler/codegen/elemental_ir_emitter.h"
#include "compiler/support/status.h"

namespace xlens::codegen::gpu {

inline constexpr int64_t kWarpSize = 32;

// threadIdx.x and blockIdx.x as i64.
llvm::Value* EmitThreadIdx(llvm::IRBuilder<>& b);
llvm::Value* EmitBlockIdx(llvm::IRBuilder<>& b);
// __syncthreads(): every thread of the block must reach it.
void EmitBarrier(llvm::IRBuilder<>& b);

// `value` of the lane whose id is this lane's xor `lane_mask` (shfl.sync.bfly over the full warp:
// every lane of the warp must execute it). Any integer or floating-point value up to 64 bits.
StatusOr<llvm::Value*> EmitShuffleXor(llvm::IRBuilder<>& b, llvm::Value* value, int64_t lane_mask);

// A shared-memory array of `count` elements of `type`, private to the kernel `function`.
llvm::GlobalVariable* CreateSharedArray(llvm::Module& module, llvm::Type* type, int64_t count,
                                        std::string_view name);
// &array[index] (index i64).
llvm::Value* SharedElementPointer(llvm::IRBuilder<>& b, llvm::GlobalVariable* array,
                                  llvm::Value* index);

// Combines the values of `width` consecutive lanes (a power of two up to 32) with `reducer`, by
// butterfly shuffles: afterwards every one of those lanes holds the same result (the reducer is
// commutative, as XLA requires of reducers). Every lane of the warp must execute it. Only the
// first `valid_lanes` lanes of each group of `width` hold values (`lane`: the lane's index in its
// group); the others are skipped, so no identity of the reducer is needed.
StatusOr<std::vector<llvm::Value*>> EmitWarpReduce(ElementalIrEmitter& e,
                                                   const HloComputation& reducer,
                                                   std::vector<llvm::Value*> values, int64_t width,
                                                   llvm::Value* lane, int64_t valid_lanes);

// Merges adjacent loads and stores of `function` into vector accesses (LLVM's load-store
// vectorizer, here rather than only in the NVPTX back end): 128-bit accesses are then in the IR
// itself, which the GPU simulator runs and counts as the hardware would see them.
void VectorizeAccesses(llvm::Function& function);

// The smallest power of two >= n (at least 1).
int64_t PowerOfTwoCeil(int64_t n);

}  // namespace xlens::codegen::gpu
