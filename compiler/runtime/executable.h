// Executable: a compiled module ready to run on the CPU. It holds the optimized module, its
// buffer assignment, the JIT that owns the generated code, one arena with every buffer (entry
// allocations, the frames of nested computations, kernel scratch) and the thunk sequence.
// Running it allocates nothing: arguments are copied into their parameter buffers, the thunks
// run, and the results are read back out.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/passes/buffer_assignment.h"
#include "compiler/passes/hlo_optimizer.h"
#include "compiler/runtime/frame_plan.h"
#include "compiler/runtime/thunk.h"

namespace xlens::runtime {

// One generated kernel, for logs, dumps and the profiler.
struct KernelInfo {
  std::string name;            // symbol of its first phase
  std::string hlo_instruction;
  std::string fusion_kind;     // "kLoop", ...; empty for an unfused op
  int64_t phases = 0;
  int64_t tasks = 0;           // of the widest phase
  std::string launch;          // "1 phase: 2048 tasks x 8192 work"
  // The library call that runs it on each of its parts' data (part_epilogue.h), whose thunk it
  // then has no thunk of its own beside; empty: a thunk of its own.
  std::string run_by_call;
};

class Executable {
 public:
  ~Executable();

  // Copies arguments (one literal per entry parameter, shapes as declared) into the arena,
  // runs, and returns the result (a tuple for a tuple-shaped root).
  StatusOr<Literal> Execute(std::span<const Literal> arguments);
  // The same with the arguments where their owners keep them: a launch passes a variable's
  // value as it lies instead of copying it into a literal first, and the program reads
  // row-major arguments in place instead of copying them into the arena.
  StatusOr<Literal> Execute(std::span<const Literal* const> arguments);
  // The same with array arguments given as row-major data where their owner keeps them (a
  // NumPy array's buffer), one per entry parameter, each of its parameter's shape (the caller
  // checked them; a tuple parameter is an error). Read in place as Execute above reads them, or
  // copied into the arena; the pointers are the executable's only for this call.
  StatusOr<Literal> ExecuteOnArrays(std::span<const void* const> arrays);
  // Whether Execute and ExecuteOnArrays read row-major arguments in place.
  bool borrows_arguments() const { return may_borrow_arguments_; }
  // The three steps of Execute, for timing the run alone.
  Status SetArguments(std::span<const Literal> arguments);
  // The p-th of `count` arguments is argument(p). With `borrow`, a parameter whose argument is
  // row-major and aligned is read in place (its slot points at the argument) until Execute ends.
  Status SetArguments(size_t count, const std::function<const Literal&(size_t)>& argument,
                      bool borrow = false);
  // With `thunk_ns`, the wall time of each top-level thunk is added to it (one entry per thunk).
  Status Run(std::vector<int64_t>* thunk_ns = nullptr);
  // Runs as `device` among several simulated devices (its collectives meet theirs) from now on;
  // nullptr: the only device. Not owned.
  void set_device(DeviceCollectives* device) { device_ = device; }
  // The top-level thunks, in the order Run times them.
  const ThunkSequence& thunks() const { return thunks_; }
  StatusOr<Literal> Results() const;

  const HloModule& module() const { return *module_; }
  const BufferAssignment& buffer_assignment() const { return *assignment_; }
  // What the pass pipeline did: the passes that ran, fusion decisions, kernel counts (the buffer
  // assignment is buffer_assignment()).
  const OptimizeResult& optimize_result() const { return optimize_result_; }
  const std::vector<KernelInfo>& kernels() const { return kernels_; }
  // XLA's thunk_sequence.txt: one line per thunk, control flow indented.
  std::string ThunkSequenceText() const;
  int64_t arena_bytes() const { return arena_bytes_; }
  int64_t compile_ns() const { return compile_ns_; }
  // The module's LLVM IR, when the compile options kept it.
  const codegen::CompiledIr& llvm_ir() const { return llvm_ir_; }

 private:
  friend class ExecutableBuilder;
  Executable() = default;

  // Records parameter_homes_ once, before a slot is first pointed at a borrowed argument.
  void RecordParameterHomes();
  // Points parameter leaf `leaf`'s slot at `data` where `borrow` lets it be read in place, else
  // copies it into the leaf's arena buffer; returns the bytes copied.
  int64_t PlaceParameterLeaf(size_t leaf, const Shape& s, const uint8_t* data, bool borrow);
  // Points every parameter slot back at its arena buffer once a call is done.
  void ReturnBorrowedSlots();

  std::unique_ptr<HloModule> module_;
  std::unique_ptr<BufferAssignment> assignment_;
  OptimizeResult optimize_result_;
  std::unique_ptr<codegen::CpuJit> jit_;
  char* arena_ = nullptr;
  int64_t arena_bytes_ = 0;
  int64_t scratch_offset_ = 0;
  std::unique_ptr<FramePlan> entry_plan_;
  std::vector<char*> frame_;
  std::vector<char*> parameter_homes_;  // the arena buffer of each parameter leaf's slot
  // Whether Execute may read row-major arguments in place: decided once, when the module is
  // compiled (only a module without while, conditional or call; see cpu_compiler.cc).
  bool may_borrow_arguments_ = false;
  ThunkSequence thunks_;
  std::vector<KernelInfo> kernels_;
  int64_t compile_ns_ = 0;
  codegen::CompiledIr llvm_ir_;
  std::string execute_span_name_;
  int64_t runs_ = 0;
  DeviceCollectives* device_ = nullptr;
};

// Checks `arguments` against the entry's parameters (count, shapes) and calls fn(leaf shape,
// row-major data, leaf number) for each array leaf of each argument, in parameter order.
Status ForEachArgumentLeaf(const HloModule& module, std::span<const Literal> arguments,
                           const std::function<Status(const Shape&, const uint8_t*, size_t)>& fn);

// Copies a row-major array (Literal storage) into `destination` laid out as `shape` says, and
// back.
void CopyToLayout(const uint8_t* row_major, const Shape& shape, char* destination);
void CopyFromLayout(const char* source, const Shape& shape, uint8_t* row_major);

}  // namespace xlens::runtime
