// IrArray: an array in memory as IR sees it: a base pointer and the Shape (with its layout) that
// says where each element lives. Reads and writes take a multi-index in logical dimension order.
#pragma once

#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "compiler/hlo/shape.h"
#include "compiler/support/status.h"

namespace xlens::codegen {

// A multi-index: one i64 value per logical dimension.
using IrIndex = std::vector<llvm::Value*>;

// The physical order of a shape's dimensions, major first (its layout reversed; row-major when
// it has none).
std::vector<int64_t> MajorToMinor(const Shape& shape);
// Element strides of each logical dimension in a dense array of `shape` laid out by its layout.
std::vector<int64_t> LayoutStrides(const Shape& shape);
// Whether `result`, a transpose of `operand` by `permutation` (result dimension d is operand
// dimension permutation[d]; the identity for a copy), holds the operand's elements in the
// operand's own physical order, dimensions of size 1 aside: a bitcast in bytes.
bool KeepsPhysicalOrder(const Shape& operand, const Shape& result, const std::vector<int64_t>& permutation);

class IrArray {
 public:
  IrArray() = default;
  IrArray(llvm::Value* base, Shape shape) : base_(base), shape_(std::move(shape)) {}

  // Tags every load and store with an access group (llvm.access.group), so that a loop marked
  // llvm.loop.parallel_accesses over that group vectorizes without runtime alias checks: an
  // output written in place over its operand (buffer assignment allows it for elementwise
  // reads) would otherwise fail the check and fall back to scalar code.
  void set_access_group(llvm::MDNode* group) { access_group_ = group; }
  llvm::MDNode* access_group() const { return access_group_; }

  llvm::Value* base() const { return base_; }
  const Shape& shape() const { return shape_; }

  // The element offset of `index` (sum of index * stride).
  llvm::Value* EmitLinearIndex(llvm::IRBuilder<>& b, const IrIndex& index) const;
  llvm::Value* EmitElementPointer(llvm::IRBuilder<>& b, const IrIndex& index) const;
  // One element as a value (pred as i1).
  StatusOr<llvm::Value*> EmitRead(llvm::IRBuilder<>& b, const IrIndex& index) const;
  Status EmitWrite(llvm::IRBuilder<>& b, const IrIndex& index, llvm::Value* value) const;

 private:
  llvm::Value* base_ = nullptr;
  Shape shape_;
  llvm::MDNode* access_group_ = nullptr;
};

// The multi-index of element `linear` of `shape` in physical (layout) order.
IrIndex DelinearizePhysical(llvm::IRBuilder<>& b, llvm::Value* linear, const Shape& shape);
// The multi-index of element `linear` of `shape` counted in row-major (logical) order.
IrIndex DelinearizeRowMajor(llvm::IRBuilder<>& b, llvm::Value* linear,
                            const std::vector<int64_t>& dims);
// The row-major linear position of `index` in `dims`.
llvm::Value* LinearizeRowMajor(llvm::IRBuilder<>& b, const IrIndex& index,
                               const std::vector<int64_t>& dims);

}  // namespace xlens::codegen
