// KernelBuilder: the state EmitKernel (kernel_emitter.h) keeps while it emits one kernel: the
// buffer table's bindings, the phases made so far and the IR builder. Internal to codegen: its
// CPU and one-thread-per-element emitters live in kernel_emitter.cc; the GPU emitters that use
// warps, shared memory and tiles (row reductions, column reductions, transposes, GEMM) live in
// gpu/*_emitter.cc, each a few member functions of this class.
#pragma once

#include <algorithm>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/elemental_ir_emitter.h"
#include "compiler/codegen/ir_array.h"
#include "compiler/codegen/kernel_emitter.h"

namespace xlens::codegen {

// Where one array lives in the buffer table.
struct Binding {
  const HloInstruction* hlo;
  std::vector<int64_t> shape_index;
  Shape shape;
  int64_t slot;
  int64_t scratch_offset = -1;  // >= 0: inside the scratch buffer
};

class KernelBuilder {
 public:
  KernelBuilder(const HloInstruction& hlo, const std::string& name, llvm::Module& module,
                KernelTarget target, const KernelOptions& options)
      : hlo_(hlo), module_(module), b_(module.getContext()), target_(target), options_(options) {
    spec_.name = name;
  }

  StatusOr<KernelSpec> Build();

 private:
  using Body = std::function<Status(ElementalIrEmitter&, const IrIndex&)>;
  // Where the leaves of an emitted value go (a fusion output or scratch).
  using Destination = std::function<IrArray(int64_t leaf)>;

  // Whether the GPU emitters of gpu/ apply (a GPU kernel, not the one-thread-per-element ones).
  bool GpuTuned() const { return target_ == KernelTarget::kGpu && !options_.gpu_naive_emitters; }
  // A new phase function; the builder is left in its entry block with `buffers` set.
  llvm::Function* NewPhase(bool sequential, int64_t tasks, int64_t work_per_task);
  // A GPU phase of `blocks` blocks of `threads` threads.
  llvm::Function* NewGpuPhase(int64_t blocks, int64_t threads, int64_t work_per_thread);
  IrArray ArrayOf(const Binding& binding) const;
  // An emitter with every binding made so far.
  std::unique_ptr<ElementalIrEmitter> MakeEmitter();
  // With `interleave` above 1, the vectorizer is asked for that many vectors an iteration of the
  // loop over the minor dimension (a loop over several joined dimensions is left to it).
  Status EmitParallelLoop(const Shape& shape, int64_t work_per_element, const Body& body,
                          unsigned interleave = 1);
  // Elements of a parallel loop's task: about 64K elements' worth of work (8192 elements of an
  // elementwise loop, fewer outputs of a reduction), so that a short row of long reductions
  // still spreads over threads.
  static int64_t TaskElements(int64_t work_per_element) {
    return std::clamp<int64_t>((int64_t{1} << 16) / work_per_element, 1, 8192);
  }
  // How many of `shape`'s minor-most physical dimensions a CPU loop runs as one element loop
  // of at most `task_elements` (1: the minor one alone), and that loop.
  size_t CombinedMinorDimensions(const Shape& shape, int64_t task_elements) const;
  Status EmitCombinedLoop(const Shape& shape, int64_t work_per_element, size_t combined,
                          const Body& body);
  // A task of a phase split into rows x blocks of the minor-most dimension `minor` (of size n):
  // the row's index in every other dimension (`outer`, major first) and its block's [begin, end).
  struct TaskRange {
    IrIndex index;  // index[minor] is left for the caller's loop
    llvm::Value* begin;
    llvm::Value* end;
  };
  TaskRange EmitTaskRange(llvm::Value* task, const Shape& shape, const std::vector<int64_t>& outer,
                          int64_t minor, int64_t block, int64_t blocks);
  Status EmitOutputs();
  // --- CPU streaming stores (cpu/cpu_streaming_store.cc) ---
  // Outputs of one shape that share an element loop, each with its first output leaf.
  using OutputGroup = std::vector<std::pair<const HloInstruction*, int64_t>>;
  // Whether `group`'s loop writes its outputs with streaming stores: a CPU loop whose array
  // outputs together reach KernelOptions::cpu_streaming_store_bytes.
  bool StreamsOutputs(const OutputGroup& group) const;
  // The bytes of output from which a CPU loop streams (KernelOptions::cpu_streaming_store_bytes
  // resolved); 0: never.
  int64_t StreamingStoreThreshold() const;
  // EmitParallelLoop's loop over `shape` for `group`, each stretch of a task computed into stack
  // buffers and written out with streaming stores (cpu/cpu_streaming_store.h).
  Status EmitCpuStreamedLoop(const Shape& shape, int64_t work_per_element, const OutputGroup& group);
  // --- CPU loops that read an operand transposed (cpu/cpu_transposed_loop.cc) ---
  // The transposes through which `group`'s loop over `shape` (2-D, row-major) reads parameters
  // in the other order, where everything else it reads is elementwise at its own index; empty
  // where the loop is not of that form.
  std::vector<const HloInstruction*> TransposedReads(const Shape& shape, const OutputGroup& group) const;
  // That loop in tiles of rows: each transposed operand's tile loaded by rows, transposed in
  // registers into a stack buffer, the body then run with unit stride throughout.
  Status EmitCpuTransposedLoop(const Shape& shape, int64_t work_per_element, const OutputGroup& group,
                               const std::vector<const HloInstruction*>& transposes);
  // --- CPU transposes (cpu/cpu_transpose.cc) ---
  // A root transpose or layout-changing copy of an operand read straight from its buffer: a
  // flat copy where the bytes keep their order, else tiles of whole lines transposed in
  // registers. False (nothing emitted) for what it does not handle.
  StatusOr<bool> TryEmitCpuTranspose();
  bool IsColumnReduction(const HloInstruction* hlo) const;
  // A reduction that keeps its operand's minor-most dimension, emitted with the loops
  // interchanged: each task owns a tile of outputs and sweeps the reduced rows over it, so
  // every load is contiguous and the sweep vectorizes across outputs (the CPU form:
  // EmitCpuColumnReductions).
  Status EmitColumnReduction(const HloInstruction* reduce, const Destination& destination,
                             bool may_split = true);
  Status EmitScatter(const HloInstruction* scatter);
  // --- CPU column reductions (cpu/cpu_column_reduction.cc) ---
  struct ColumnOutput {
    const HloInstruction* reduce;
    Destination destination;
  };
  // Sibling column reductions (one operand shape, the same reduced dimensions) as one sweep of
  // the reduced rows over tiles of outputs, split as cpu/cpu_column_reduction.h plans: with
  // `may_split`, sliced rows put partial tiles in scratch (past what the kernel has reserved so
  // far) and a second phase combines them. The sweep also writes `elementwise` (outputs of the
  // operand's dimensions, ColumnSweepElementwiseOutputs) at each element it reads.
  Status EmitCpuColumnReductions(const std::vector<ColumnOutput>& outputs, bool may_split,
                                 const OutputGroup& elementwise = {});
  // The root's outputs not yet written that the column sweep of `reductions` (one operand shape)
  // can write as it reads each element of their operand, so that no later loop reads the
  // operand's inputs again (a bias gradient's masked gradient beside its column sum): arrays of
  // the operand's dimensions computed elementwise (through broadcasts) from parameters, constants
  // and values already materialised, none of them a reduction or a value still to be
  // materialised. `later` are the values computed after the sweep (still pending, or outputs
  // left to the output loops): an output is left to the loops where one of them reads a parameter
  // it reads, since an output written in place over a parameter must not clobber what a later
  // phase still reads.
  OutputGroup ColumnSweepElementwiseOutputs(const std::vector<const HloInstruction*>& reductions,
                                            const std::vector<const HloInstruction*>& later) const;
  // The combine phase of strided row reductions: each output the init value folded with its
  // lanes of every slice in `partials` ([slices, output dims, lanes] per output).
  Status EmitCpuLaneCombine(const std::vector<ColumnOutput>& outputs,
                            const std::vector<std::vector<Binding>>& partials, int64_t slices);
  // --- CPU row kernels (cpu/cpu_row_emitter.cc) ---
  // `outputs` as one phase of one task per row when they form a row fusion (row_analysis.h):
  // the row's reductions, its per-row values and its outputs while the row is in cache. False
  // (nothing emitted) otherwise.
  struct RowOutput;
  StatusOr<bool> TryEmitCpuRowKernel(const std::vector<RowOutput>& outputs);
  Status EmitSelectAndScatter(const HloInstruction* sas);
  IrArray OutputArray(int64_t leaf) const;

  // --- GPU emitters (gpu/gpu_loop_emitter.cc) ---
  // The GPU element loop: each thread computes a 16-byte group of consecutive elements (so that
  // the load-store vectorizer makes 128-bit accesses) where the minor dimension allows it, one
  // element otherwise; consecutive threads take consecutive groups, so every warp access is
  // coalesced.
  Status EmitGpuLoop(const Shape& shape, int64_t work_per_element, const Body& body);

  // --- Row reductions and their epilogues (gpu/gpu_reduction_emitter.cc) ---
  // A row fusion: every reduction reduces the minor-most dimensions of one operand shape, and
  // every other value is either per element of that shape or per row. One kernel: a warp (or a
  // part of one, or a whole block) per row reduces with shuffles (and shared memory across warps),
  // the results feed later reductions and the per-element outputs of the same row.
  struct RowOutput {
    const HloInstruction* hlo;
    Destination destination;
  };
  // Emits `outputs` (reductions or values computed from them) as one row kernel; false when
  // they do not form a row fusion (nothing is emitted then).
  StatusOr<bool> TryEmitGpuRowKernel(const std::vector<RowOutput>& outputs);
  // A column reduction: tiles of 32 output columns, each warp reading 32 consecutive elements of
  // a row, partial results combined through shared memory.
  // With `may_split` (and KernelOptions::gpu_split_launches), few tiles and many rows split the
  // rows across blocks (gpu/gpu_launch_plan.h): partial results go to scratch, past what the
  // kernel has reserved so far, and a second phase combines them.
  Status EmitGpuColumnReduction(const HloInstruction* reduce, const Destination& destination,
                                bool may_split = true);

  // --- Transpose (gpu/gpu_transpose_emitter.cc) ---
  // A root transpose (or layout-changing copy) tiled through shared memory: 32x32 tiles padded
  // to 33 columns, read along the operand's minor dimension and written along the output's.
  StatusOr<bool> TryEmitGpuTranspose();

  // --- GEMM (gpu/gpu_gemm_emitter.cc) ---
  // The dot whose result the fusion's single output is an elementwise function of (the dot
  // itself when unfused or alone): the GEMM kernel computes it and applies that epilogue.
  const HloInstruction* FindGemmWithEpilogue() const;
  // A tiled GEMM: 64x64 output tiles per block of 256 threads, 4x4 outputs per thread, K in steps
  // of 16 through shared memory. With `epilogue`, each output is epilogue(dot) at its index.
  // False (nothing emitted) for what it does not handle (element types, several contracting
  // dimensions).
  // With `may_split` (and KernelOptions::gpu_split_launches), few tiles and a long K split K
  // across blocks (gpu/gpu_launch_plan.h): partial tiles go to scratch, past what the kernel
  // has reserved so far, and a second phase sums them and applies the epilogue.
  StatusOr<bool> TryEmitGpuGemm(const HloInstruction* dot, const HloInstruction* epilogue,
                                const Destination& destination, bool may_split = true);

  const HloInstruction& hlo_;
  llvm::Module& module_;
  llvm::IRBuilder<> b_;
  KernelTarget target_;
  KernelOptions options_;
  KernelSpec spec_;
  const HloInstruction* root_ = nullptr;
  std::vector<Binding> bindings_;
  std::vector<Shape> output_shapes_;
  // Output instructions of the root and the first output leaf each writes.
  std::vector<std::pair<const HloInstruction*, int64_t>> outputs_;
  std::map<const HloInstruction*, bool> written_;
  llvm::Value* buffers_ = nullptr;
  // The access group of the current phase's buffers when its element loop is parallel.
  llvm::MDNode* access_group_ = nullptr;
};

}  // namespace xlens::codegen
