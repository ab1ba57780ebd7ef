// The registers and shared memory each kernel of a PTX module needs: what the occupancy of its
// launches depends on. ptxas knows (its -v report, as Nsight Compute's "Registers Per Thread"
// comes from the same assembler); where the CUDA toolkit's ptxas is absent, the PTX's own
// declarations give an upper bound (virtual registers before allocation), and the source says
// which.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "compiler/support/status.h"

namespace xlens::runtime {

struct KernelResources {
  int registers = 0;            // per thread
  int64_t shared_bytes = 0;     // static shared memory per block
  int64_t spill_bytes = 0;      // spill stores (ptxas only)
};

struct ModuleResources {
  std::map<std::string, KernelResources> kernels;  // by entry name
  // "ptxas -v (PATH)" or "PTX declarations (upper bound: ptxas not found)".
  std::string source;
};

// Parses the report of `ptxas -v`: one entry per "Compiling entry function" line.
StatusOr<ModuleResources> ParsePtxasReport(const std::string& report);

// Counts each .entry's declared registers (32-bit units, 64-bit ones counting two, predicates
// none; at most 255) and the bytes of the .shared arrays it declares or names.
ModuleResources EstimateFromPtx(const std::string& ptx);

// The path of ptxas: $CUDA_HOME/bin, /usr/local/cuda/bin, then PATH; empty when none.
std::string FindPtxas();

// Assembles `ptx` for `arch` with `ptxas -v` when ptxas is found, else EstimateFromPtx. An
// assembler failure is an error with its message.
StatusOr<ModuleResources> KernelResourcesOf(const std::string& ptx, const std::string& arch);

}  // namespace xlens::runtime
