// Ahead-of-time compilation, as tfcompile does it: an HLO module -> one relocatable object for a
// target triple, holding every kernel as generated code (no oneDNN, Eigen or runtime calls: the
// program that links it needs only libc, libm and libstdc++), the weights (constants) in
// read-only data, and one entry function that runs the kernels in order over caller-owned
// buffers. The sizes of every buffer are fixed here, at compile time, and reported.
//
// What the JIT hands to libraries is generated here: dots and convolutions as loop nests
// (dot_emitter.h, convolution_emitter.h), sorts and top-k as an insertion sort
// (sort_emitter.h), integer powers and complex functions inline; while loops and conditionals
// run in the entry function. Refused with one line naming the instruction: custom calls,
// infeed/outfeed/send/recv, collectives, fft, cholesky, triangular-solve, sorts of more than
// 16384 elements a slice, dynamic shapes. On CPUs without half-precision conversions the code
// calls the C compiler's runtime (__extendhfsf2, ...), which every link adds.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/support/status.h"

namespace xlens::aot {

struct AotOptions {
  std::string target_triple;    // "" = the host's; e.g. "aarch64-unknown-linux-gnu"
  std::string target_cpu;       // "" = generic for the triple ("native" only for the host)
  std::string target_features;  // LLVM's "+avx2,+fma" form
  std::string entry_point = "entry";  // the entry function's C symbol
  int opt_level = 3;
  // The pass pipeline's options (backend forced to CPU); its dump context gets every stage's
  // files as the JIT writes them (before/after optimizations, buffer assignment, ir-*.ll).
  OptimizeOptions optimize;
};

// One argument or result of the entry function: a dense row-major array.
struct AotBuffer {
  std::string name;        // the entry parameter's or result's HLO name
  std::string element_type;  // "f32", "s32", ...
  std::vector<int64_t> dimensions;
  int64_t byte_size = 0;
};

// The compiled object and what the header needs to call it. The entry function's C signature:
//   extern "C" void <entry_point>(const void* const* args, void* const* results, void* temp);
// args[i] points at argument i (byte_size bytes), results[i] at where result i is written, both
// aligned to 16 bytes at least (the kernels use aligned vector accesses; 64 is best), and the
// results not overlapping the arguments; temp at temp_bytes of scratch aligned to
// temp_alignment (may be null if temp_bytes is 0). The arguments are only read. It is
// reentrant: all state is in the three pointers. Arguments and results are the array leaves of
// the entry's parameters (in parameter order) and of its root, depth-first.
struct AotResult {
  std::string object;  // the ELF relocatable object's bytes
  std::vector<AotBuffer> arguments;
  std::vector<AotBuffer> results;  // the root's elements in order (one if the root is an array)
  int64_t temp_bytes = 0;
  int64_t temp_alignment = 64;
  int64_t weights_bytes = 0;  // constants placed in read-only data
  int kernel_count = 0;
  std::string target_triple;  // the triple actually used
};

StatusOr<AotResult> CompileAheadOfTime(const HloModule& module, const AotOptions& options);

}  // namespace xlens::aot
