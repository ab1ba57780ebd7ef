#ifndef XLENS_CODEGEN_CPU_PERF_MAP_H_
#define XLENS_CODEGEN_CPU_PERF_MAP_H_

// Names for JIT-compiled code in Linux perf's profiles.
//
// `perf report` shows an address inside JIT-compiled code as a bare hex number unless the
// process lists its JIT symbols in /tmp/perf-<pid>.map ("START SIZE NAME" per line, hex), the
// convention perf shares with V8, the JVM and CPython's `-X perf`. With XLENS_PERF_MAP=1 in the
// environment, every function the CPU JIT links (each kernel's phases: `fusion.6_phase0`, ...) is
// appended there as it is linked, so a profile of `xlens run` names the kernel and the phase
// its time goes to.

#include <memory>
#include <string>

namespace llvm::orc {
class LLJIT;
}  // namespace llvm::orc

namespace xlens::codegen {

// /tmp/perf-<pid>.map when XLENS_PERF_MAP is set to anything but "" or "0"; empty otherwise.
std::string PerfMapPathFromEnvironment();

// Appends each function `jit` links from now on to the map at `path` (created if absent).
// Returns false where the JIT does not link with JITLink (the only linker this hooks into).
bool WritePerfMap(llvm::orc::LLJIT& jit, const std::string& path);

}  // namespace xlens::codegen

#endif  // XLENS_CODEGEN_CPU_PERF_MAP_H_
