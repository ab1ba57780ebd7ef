// A test-only code generation fault: the kernel of one HLO instruction stores wrong values (1 is
// added to every number it writes to memory, a pred is flipped), while the HLO it was compiled
// from is right. Planted by the hidden --xla_test_miscompile_kernel=NAME flag so that
// `xlens bisect` can be tested against a wrong kernel whose place is known.
#pragma once

#include <string_view>

#include <llvm/IR/Module.h>

#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/instruction.h"

namespace xlens::codegen {

// Whether `name` (the flag's value) names `hlo` or its kernel `spec`: the instruction's name
// ("fusion.3") or the kernel function's ("fusion_3").
bool IsPlantedKernel(std::string_view name, const HloInstruction& hlo, const KernelSpec& spec);

// Rewrites every phase function of `spec` in `module` so that each store to a buffer (not to a
// local variable) writes value + 1 (value xor 1 for a pred).
void PlantKernelFault(const HloInstruction& hlo, const KernelSpec& spec, llvm::Module& module);

}  // namespace xlens::codegen
