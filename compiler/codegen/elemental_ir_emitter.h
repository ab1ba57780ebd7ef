// ElementalIrEmitter: the LLVM IR that computes one element of an instruction's result from a
// multi-index, recursively through its operands. A kLoop fusion of twenty ops is one expression
// per element this way, with no intermediate arrays: only the instructions bound to memory
// (fusion parameters, operands of an unfused op, reductions materialised by the kernel emitter)
// are loaded.
//
// Reductions, reduce-window, dot and convolution are elemental too: one element is a loop over
// the reduced positions. Scalar computations (reducers, map, comparators, scatter combiners) are
// emitted inline with their parameters bound to values.
//
// Values computed for an (instruction, index) pair are reused while they dominate the insertion
// point: every nested loop or branch opens a scope and forgets what it computed on the way out.
#pragma once

#include <map>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "compiler/codegen/ir_array.h"
#include "compiler/hlo/computation.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

class ElementalIrEmitter {
 public:
  explicit ElementalIrEmitter(llvm::IRBuilder<>& b) : b_(b) { scopes_.emplace_back(); }

  // Reads of `hlo` (the array at `shape_index` of its result) come from `array`.
  void BindArray(const HloInstruction* hlo, std::vector<int64_t> shape_index, IrArray array);
  // `hlo` is the given values (one per array leaf of its shape, depth-first), at any index.
  void BindValues(const HloInstruction* hlo, std::vector<llvm::Value*> leaves);
  // Forgets a binding of BindValues: `hlo` is computed again where it is read.
  void UnbindValues(const HloInstruction* hlo);
  bool IsBound(const HloInstruction* hlo) const;

  // One element of an array-shaped instruction.
  StatusOr<llvm::Value*> EmitElement(const HloInstruction* hlo, const IrIndex& index);
  // One element of every array leaf of `hlo` (tuples flattened depth-first).
  StatusOr<std::vector<llvm::Value*>> EmitLeaves(const HloInstruction* hlo, const IrIndex& index);

  // Runs a scalar computation on `arguments` (one value per parameter leaf) and returns the
  // leaves of its root.
  StatusOr<std::vector<llvm::Value*>> EmitScalarComputation(
      const HloComputation& computation, const std::vector<llvm::Value*>& arguments);

  // A loop whose body may use the emitter; what the body computes is forgotten after it.
  Status EmitLoop(llvm::Value* start, llvm::Value* end, std::string_view name,
                  const std::function<Status(llvm::Value*)>& body,
                  llvm::MDNode* parallel_access_group = nullptr);
  // `if (condition) then()`; what `then` computes is forgotten after it.
  Status EmitIf(llvm::Value* condition, std::string_view name, const std::function<Status()>& then);

  llvm::IRBuilder<>& builder() { return b_; }

 private:
  using Leaves = std::vector<llvm::Value*>;
  struct CacheKey {
    const HloInstruction* hlo;
    std::vector<llvm::Value*> index;
    bool operator<(const CacheKey& o) const {
      return hlo != o.hlo ? hlo < o.hlo : index < o.index;
    }
  };

  StatusOr<Leaves> EmitUncached(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitOperand(const HloInstruction* hlo, int64_t i, const IrIndex& index);
  StatusOr<llvm::Value*> EmitConstant(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitIota(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitPad(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitConcatenate(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitDynamicSlice(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitDynamicUpdateSlice(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitGather(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<Leaves> EmitReduce(const HloInstruction* hlo, const IrIndex& index);
  // Reduce and reduce-window: accumulators holding the n init values, and their current values.
  StatusOr<std::vector<llvm::AllocaInst*>> EmitInitialAccumulators(const HloInstruction* hlo, int64_t n);
  Leaves LoadAccumulators(const std::vector<llvm::AllocaInst*>& accumulators);
  StatusOr<Leaves> EmitReduceWindow(const HloInstruction* hlo, const IrIndex& index);
  StatusOr<llvm::Value*> EmitDot(const HloInstruction* hlo, const IrIndex& index);
  // Dot and convolution: a zeroed accumulator, and acc += lhs * rhs in the accumulation type.
  StatusOr<llvm::AllocaInst*> EmitZeroAccumulator(PrimitiveType type, std::string_view name);
  Status EmitMultiplyAccumulate(const HloInstruction* hlo, const IrIndex& lhs_index,
                                const IrIndex& rhs_index, PrimitiveType acc_type,
                                llvm::AllocaInst* acc);
  StatusOr<llvm::Value*> EmitConvolution(const HloInstruction* hlo, const IrIndex& index);
  // Start indices of dynamic-slice / dynamic-update-slice, clamped so the window fits.
  StatusOr<IrIndex> EmitClampedStarts(const HloInstruction* hlo, int64_t first_operand,
                                      const Shape& window);
  // A loop nest over `sizes` (innermost last); body gets the induction variables.
  Status EmitLoopNest(const std::vector<int64_t>& sizes, std::string_view name,
                      const std::function<Status(const IrIndex&)>& body);

  llvm::IRBuilder<>& b_;
  std::map<std::pair<const HloInstruction*, std::vector<int64_t>>, IrArray> arrays_;
  std::unordered_map<const HloInstruction*, Leaves> values_;
  std::vector<std::map<CacheKey, Leaves>> scopes_;
  // Multi-indices a reshape made by splitting a row-major position, with that position and the
  // dimensions it was split over: a dense row-major array of those dimensions is read at the
  // position itself, so its loads stay contiguous and vectorize instead of costing a division
  // per dimension and element.
  std::map<IrIndex, std::pair<llvm::Value*, std::vector<int64_t>>> delinearized_;
};

// The number of array leaves of `shape` (1 for an array).
int64_t LeafCount(const Shape& shape);

}  // namespace xlens::codegen
