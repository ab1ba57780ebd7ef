// KernelEmitter: turns one HLO instruction of a scheduled computation (a fusion, or an unfused
// op treated as a fusion of one) into CPU kernel functions in an LLVM module.
//
// A kernel is one or more phases, each a function
//     void phase(void** buffers, int64_t task_begin, int64_t task_end)
// that the runtime calls over [0, tasks) split across threads (or in one call when the phase is
// sequential). `buffers` holds one pointer per array leaf of the instruction's operands, then one
// per leaf of its result, then a scratch pointer. Phases run in order:
//  - a reduction (or reduce-window, dot, convolution) inside a fusion whose result other fused
//    instructions read is materialised first, into scratch, so that softmax's
//    row max and row sum are computed once per row and not once per element;
//  - then every output, outputs of one shape sharing a loop (and their common subexpressions);
//  - scatter and select-and-scatter copy their operand, then apply updates in order in one
//    sequential phase (updates to the same element must not race).
// The loop of a phase walks its shape in physical order with the minor-most dimension innermost,
// so that loads and stores are contiguous and LLVM's loop vectorizer can widen them.
#pragma once

#include <set>
#include <string>
#include <vector>

#include <llvm/IR/Module.h>

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// Where a kernel runs: a CPU phase is called over a range of tasks with a table of buffer
// pointers; a GPU phase is a PTX kernel taking one pointer per buffer (launch shapes: see
// kernel_builder.h).
enum class KernelTarget { kCpu, kGpu };

struct KernelPhase {
  std::string function_name;
  // CPU: tasks the runtime splits over threads. GPU: threads of the launch.
  int64_t tasks = 0;
  // Elements computed per task (times the reduction length for reductions): the runtime's grain.
  int64_t work_per_task = 1;
  bool sequential = false;
  // GPU launch dimensions (x only): blocks of threads_per_block threads.
  int64_t blocks = 1;
  int64_t threads_per_block = 1;
  // CPU: where task t writes elements [t * elements_per_task, (t + 1) * elements_per_task) of
  // every output, in the outputs' physical order, and nothing else (the element loops); 0: tasks
  // cut otherwise. What a caller running a range of tasks on part of the data reads (a loop run
  // on a library call's parts, runtime/part_epilogue.h), instead of knowing how the loops cut.
  int64_t elements_per_task = 0;
  // CPU: the least work (in work_per_task's units) the runtime hands a thread at once; 0: its
  // default (64K elements' worth, runtime/thunk.cc), under which a phase runs on one thread.
  int64_t chunk_work = 0;
};

struct KernelSpec {
  std::string name;
  std::vector<KernelPhase> phases;
  int64_t operand_leaves = 0;
  int64_t output_leaves = 0;
  int64_t scratch_bytes = 0;
  // Whether every reduction the outputs read is complete before the kernel writes an output
  // element it covers: the CPU row kernel reduces a row before it writes the row, the CPU's
  // phased form materializes each reduction in a phase before the outputs'. Only such a kernel
  // may write over an operand it reduces (BufferAssignmentOptions::in_place_row_fusions); one
  // that computed a reduction per output element would read elements it had overwritten.
  bool reduces_before_writing = false;
};

struct KernelOptions {
  // GPU: the one-thread-per-element emitters (a reduction is one thread per output, a transpose
  // and a dot are elementwise loops) instead of the warp, shared-memory and tiled ones, so that
  // both can be compared (--xla_gpu_xlens_naive_emitters).
  bool gpu_naive_emitters = false;
  // GPU: split a GEMM's K, and a column reduction's rows, across blocks when the plain tiled
  // launch would fill too few SMs (gpu/gpu_launch_plan.h). Off: always the one tiled kernel
  // (--xla_gpu_xlens_split_launches=false, and tests that check that kernel).
  bool gpu_split_launches = true;
  // CPU: element loops whose outputs together reach this many bytes write them with streaming
  // (non-temporal) stores (cpu/cpu_streaming_store.h); 0: never; -1: half the host's last-level
  // cache (cpu::DefaultStreamingStoreBytes).
  int64_t cpu_streaming_store_bytes = -1;
};

// The CPU compiler compiles a kernel that touches fewer bytes than this and does fewer
// floating-point operations at O1, without the loop vectorizer: it runs in microseconds whatever
// LLVM does with it. Emitters whose code pays off only when vectorized leave such kernels alone.
inline constexpr int64_t kCpuSmallKernelBytes = 64 << 10;
inline constexpr double kCpuSmallKernelFlops = 64 << 10;

// The CPU's cache line: the loops that move whole lines at a time (transposes in registers)
// read and write this much of each row.
inline constexpr int64_t kCpuLineBytes = 64;

// Emits the kernel of `hlo` into `module`, its functions named after `name`.
StatusOr<KernelSpec> EmitKernel(const HloInstruction& hlo, const std::string& name,
                                llvm::Module& module, KernelTarget target = KernelTarget::kCpu,
                                const KernelOptions& options = {});

// Whether element i of `instruction`'s result reads only element i of each array operand, or a
// scalar: an elementwise op, a parameter, a constant, a reshape or bitcast (in place where the
// operand holds as many elements in the same physical order: the caller checks the shapes), a
// broadcast of a scalar. The loops fold such a fusion's index into one offset for all its arrays
// (KernelBuilder::CombinedMinorDimensions), and a range of its elements can be run on its own.
bool ReadsOperandsAtItsIndex(const HloInstruction& instruction);

// Whether EmitKernel handles `hlo` (as opposed to control flow, library calls and no-ops).
bool IsKernelInstruction(const HloInstruction& hlo);

// A C-like name LLVM and ptxas accept ("fusion.3" -> "fusion_3").
std::string SanitizeName(std::string_view name);
// SanitizeName(hlo_name), with "_1", "_2", ... added until it is not in `taken`; then taken.
std::string UniqueKernelName(std::string_view hlo_name, std::set<std::string>& taken);

}  // namespace xlens::codegen

namespace xlens::codegen {

// Emits `bool name(void** lhs, void** rhs)`: a sort comparator over one element of each operand
// (lhs[i] and rhs[i] point at operand i's two elements), as `computation` compares them.
Status EmitComparator(const HloComputation& computation,
                      const std::vector<PrimitiveType>& operand_types, const std::string& name,
                      llvm::Module& module);

}  // namespace xlens::codegen
