// The builder of an ahead-of-time object (aot_compiler.h), shared by its source files: where
// every array lives when the entry function runs, and the code that runs the kernels, control
// flow and sorts over those places. Internal to compiler/aot.
#pragma once

#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/aot/aot_compiler.h"
#include "compiler/codegen/kernel_emitter.h"

namespace xlens::aot {

// Where an allocation of the buffer assignment lives when the entry function runs.
struct Home {
  enum class Kind { kArgument, kResult, kConstant, kTemp };
  Kind kind = Kind::kTemp;
  int64_t index = 0;   // argument or result number
  int64_t offset = 0;  // kTemp: bytes into temp
  llvm::GlobalVariable* constant = nullptr;
};

// Where one array is when the entry function runs: `base` and `offset` identify the memory
// (so that two places can be compared while generating code), `pointer` computes it.
struct Place {
  const void* base = nullptr;
  int64_t offset = 0;
  llvm::Value* pointer = nullptr;
  bool operator==(const Place& other) const { return base == other.base && offset == other.offset; }
};

using Leaf = std::pair<const HloInstruction*, std::vector<int64_t>>;

// The array leaves of a shape, depth-first, with their sizes.
std::vector<std::pair<std::vector<int64_t>, int64_t>> ArrayLeaves(const Shape& shape);

// A computation a while or conditional runs: every value it defines has its own region of
// temp (as the JIT's nested frames do); its parameters are the caller's places.
struct NestedLayout {
  std::map<Leaf, int64_t> offsets;           // into temp
  std::map<Leaf, int64_t> parameter_leaf;    // (parameter, index) -> leaf number
  std::vector<int64_t> staging;              // a while body's root leaves staged here (temp offsets)
};

// One invocation of a computation: where its values are.
struct Frame {
  const HloComputation* computation = nullptr;
  const NestedLayout* layout = nullptr;  // null for the entry
  std::vector<Place> parameters;         // nested: the parameter leaves' places
};

class AotBuilder {
 public:
  AotBuilder(HloModule& module, const AotOptions& options) : module_(module), options_(options) {}
  StatusOr<AotResult> Build();

 private:
  Status PlaceAllocations();
  // Pass one: the kernels of `order` and of the computations its control flow runs, and the
  // temp regions of those computations.
  Status EmitKernels(const std::vector<const HloInstruction*>& order);
  Status PlanNested(const HloComputation& computation);
  llvm::GlobalVariable* ConstantGlobal(const HloInstruction& constant);
  // Pass two: the entry function's code for `order`, run in `frame`.
  StatusOr<Place> EntryPlace(llvm::IRBuilder<>& b, const HloInstruction& hlo,
                             const std::vector<int64_t>& index);
  StatusOr<Place> PlaceOf(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo,
                          const std::vector<int64_t>& index);
  StatusOr<std::vector<Place>> LeafPlaces(llvm::IRBuilder<>& b, const Frame& frame,
                                          const HloInstruction& hlo);
  Frame NestedFrame(const HloComputation& computation, std::vector<Place> parameters) const;
  Status EmitSequence(llvm::IRBuilder<>& b, const Frame& frame,
                      const std::vector<const HloInstruction*>& order);
  Status EmitKernelCall(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo);
  Status EmitWhile(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo);
  Status EmitConditional(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo);
  Status EmitSort(llvm::IRBuilder<>& b, const Frame& frame, const HloInstruction& hlo);
  void Copy(llvm::IRBuilder<>& b, const Place& to, const Place& from, int64_t bytes);
  Status EmitEntry();
  // Calls of functions outside libc and libm (the runtime's integer power, complex math),
  // named by the instruction whose kernel makes them.
  Status CheckCallsOnlyLibraries() const;

  HloModule& module_;
  const AotOptions& options_;
  AotResult result_;
  const BufferAssignment* assignment_ = nullptr;
  std::unique_ptr<llvm::LLVMContext> context_ = std::make_unique<llvm::LLVMContext>();
  std::unique_ptr<llvm::Module> llvm_module_;
  std::vector<Home> homes_;  // by allocation index
  std::map<std::pair<int64_t, std::vector<int64_t>>, int64_t> argument_of_;  // (param, leaf)
  std::vector<Leaf> result_leaves_;
  std::vector<bool> result_in_place_;  // result j is computed where the caller wants it
  std::map<std::string, std::string> hlo_of_function_;
  std::set<std::string> symbols_;
  std::map<const HloInstruction*, codegen::KernelSpec> kernels_;
  std::map<const HloInstruction*, std::string> comparators_;  // of sorts
  std::map<const HloComputation*, NestedLayout> nested_;
  std::map<const HloInstruction*, llvm::GlobalVariable*> constants_;
  int64_t scratch_bytes_ = 0;
  int64_t temp_bytes_ = 0;
  int64_t scratch_offset_ = 0;
  // Values the entry function reads once: the argument and result pointers, temp, scratch.
  std::vector<llvm::Value*> argument_ptrs_, result_ptrs_;
  llvm::Value* temp_ = nullptr;
  llvm::Value* scratch_ = nullptr;
  llvm::IRBuilder<>* allocas_ = nullptr;  // at the end of the entry function's first block
};

}  // namespace xlens::aot
