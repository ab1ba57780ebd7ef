// The target side of ahead-of-time compilation: a TargetMachine for any triple LLVM was built
// with (not only the host's), the optimization pipeline for it, the relocatable object, and the
// check that generated code calls nothing but libc and libm.
#pragma once

#include <memory>
#include <string>

#include "compiler/support/status.h"

namespace llvm {
class Module;
class TargetMachine;
}  // namespace llvm

namespace xlens::aot {

struct TargetChoice {
  std::string triple;    // "" = the host's
  std::string cpu;       // "" = generic; "native" = the host's CPU (host triple only)
  std::string features;  // "+avx2,+fma"
  int opt_level = 3;
};

// A TargetMachine for position-independent code (the object links into PIE programs and
// shared libraries alike). Errors name the triple or CPU that LLVM does not know.
StatusOr<std::unique_ptr<llvm::TargetMachine>> CreateTargetMachine(const TargetChoice& choice);

// LLVM's default pipeline at `opt_level` for the module's target, without any vector math
// library: a vectorized libmvec call would be one more library for the program to link.
void OptimizeForTarget(llvm::Module& module, llvm::TargetMachine& machine, int opt_level);

// The module as an ELF (or the target's) relocatable object.
StatusOr<std::string> EmitObject(llvm::Module& module, llvm::TargetMachine& machine);

// Whether a function the generated code declares is one libc or libm provides (memcpy, expf, ...).
bool IsLibcOrLibmFunction(const std::string& name);
// Whether a function the code generator itself may call is one of the C compiler's own runtime
// (libgcc, compiler-rt), which every C and C++ link adds: half and bfloat16 conversions where
// the CPU has no instruction for them, 128-bit integer division.
bool IsCompilerRuntimeFunction(const std::string& name);

}  // namespace xlens::aot
