// The functions generated CPU code may call besides the C library: integer powers, complex
// arithmetic and transcendental functions (computed with std::complex exactly as the reference
// evaluator computes them), and the half-precision conversions LLVM lowers to library calls.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace xlens::codegen {

// (symbol name, address) of every runtime function.
const std::vector<std::pair<std::string, void*>>& CpuRuntimeSymbols();

}  // namespace xlens::codegen
