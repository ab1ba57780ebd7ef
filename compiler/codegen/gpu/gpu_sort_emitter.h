// The GPU sort kernel, as XLA's GPU backend emits it: a bitonic sorting network over each row of
// the sorted dimension, padded to a power of two. Every comparator of the network orders its
// lower index first (the variant whose first step of each merge compares mirrored positions),
// so a position past the end never moves and needs no padding value. Stages whose pairs lie
// within one block's tile of 2 x threads elements run together in one launch on a copy of the
// tile in shared memory (loaded and stored coalesced, a barrier between stages); the longer
// ones are a launch each, in global memory.
//
// The comparator computation is a device function the stages call. Ties are broken by the
// elements' original positions (kept in scratch beside the operands), so the result is the
// stable sort's whether or not is_stable is set, as the reference evaluator sorts.
#pragma once

#include <string>

#include <llvm/IR/Module.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// Emits the kernels of `sort` (operands, then outputs, then scratch, as EmitKernel's GPU phases
// take them) into `module`, named after `name`.
StatusOr<KernelSpec> EmitGpuSort(const HloInstruction& sort, const std::string& name,
                                 llvm::Module& module);

}  // namespace xlens::codegen
