#include "compiler/codegen/ir_array.h"

#include <algorithm>
#include <iterator>
#include <utility>

#include "compiler/codegen/llvm_ir_util.h"

namespace xlens::codegen {

std::vector<int64_t> MajorToMinor(const Shape& shape) {
  std::vector<int64_t> order;
  if (shape.has_layout() && static_cast<int64_t>(shape.layout().minor_to_major.size()) ==
                                shape.rank()) {
    order.assign(shape.layout().minor_to_major.rbegin(), shape.layout().minor_to_major.rend());
  } else {
    for (int64_t d = 0; d < shape.rank(); ++d) order.push_back(d);
  }
  return order;
}

std::vector<int64_t> LayoutStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  int64_t stride = 1;
  std::vector<int64_t> order = MajorToMinor(shape);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    strides[*it] = stride;
    stride *= shape.dimensions(*it);
  }
  return strides;
}

bool KeepsPhysicalOrder(const Shape& operand, const Shape& result, const std::vector<int64_t>& permutation) {
  std::vector<int64_t> in, out;
  for (int64_t d : MajorToMinor(operand)) {
    if (operand.dimensions(d) > 1) in.push_back(d);
  }
  for (int64_t d : MajorToMinor(result)) {
    if (result.dimensions(d) > 1) out.push_back(permutation[d]);
  }
  return in == out;
}

namespace {

// Whether `v` is a remainder, as the minor index of one delinearized from a counter is.
bool IsRemainder(llvm::Value* v) {
  auto* op = llvm::dyn_cast<llvm::BinaryOperator>(v);
  return op != nullptr && (op->getOpcode() == llvm::Instruction::URem ||
                           op->getOpcode() == llvm::Instruction::SRem);
}

// `v` as a value plus a positive constant (an add of the two), or {nullptr, 0}.
std::pair<llvm::Value*, int64_t> CounterPlusConstant(llvm::Value* v) {
  auto* op = llvm::dyn_cast<llvm::BinaryOperator>(v);
  if (op == nullptr || op->getOpcode() != llvm::Instruction::Add) return {nullptr, 0};
  for (int k : {1, 0}) {
    auto* c = llvm::dyn_cast<llvm::ConstantInt>(op->getOperand(k));
    if (c != nullptr && c->getBitWidth() == 64 && c->getSExtValue() > 0 &&
        !llvm::isa<llvm::Constant>(op->getOperand(1 - k))) {
      return {op->getOperand(1 - k), c->getSExtValue()};
    }
  }
  return {nullptr, 0};
}

}  // namespace

llvm::Value* IrArray::EmitLinearIndex(llvm::IRBuilder<>& b, const IrIndex& index) const {
  std::vector<int64_t> strides = LayoutStrides(shape_);
  std::vector<int64_t> order = MajorToMinor(shape_);
  // An index delinearized from one counter (i % a, (i / a) % b, ...) is summed minor first, so
  // that it folds back into that counter, which a vectorizer reads as a unit stride. Any other
  // (a loop's own counters: a column sweep's row times its stride plus the vectorized column) is
  // summed major first: in the other order LLVM's vectorizer no longer sees the column loads as
  // consecutive and gathers them (a column sum over f32[4096,1024] 4x slower).
  const bool major_first = order.empty() || order.back() >= static_cast<int64_t>(index.size()) ||
                           !IsRemainder(index[order.back()]);
  if (major_first) std::reverse(order.begin(), order.end());
  llvm::Value* linear = nullptr;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t d = *it;
    if (d >= static_cast<int64_t>(index.size()) || shape_.dimensions(d) == 1) continue;
    // The last term summed major first is the minor index, a loop's counter. Where it is the
    // counter plus a constant (a slice's start), the constant joins the terms above it first:
    // summed as row * n + (i + c), LLVM rewrites the offset into ors of disjoint bits that its
    // vectorizer no longer reads as consecutive, and it gathers the loads (the LSTM gates, four
    // column slices of one f32[64,2048]: 102 against 61 us with the slices as arrays of their
    // own). Only nsw on what adds the counter, as the counter alone may be below zero.
    auto [counter, constant] = CounterPlusConstant(index[d]);
    if (major_first && linear != nullptr && counter != nullptr && std::next(it) == order.rend()) {
      linear = b.CreateAdd(linear, b.getInt64(constant * strides[d]), "", true, true);
      llvm::Value* term = strides[d] == 1 ? counter : b.CreateNSWMul(counter, b.getInt64(strides[d]));
      return b.CreateNSWAdd(linear, term);
    }
    llvm::Value* term = strides[d] == 1 ? index[d]
                                        : b.CreateMul(index[d], b.getInt64(strides[d]), "", true, true);
    linear = linear == nullptr ? term : b.CreateAdd(linear, term, "", true, true);
  }
  return linear == nullptr ? b.getInt64(0) : linear;
}

llvm::Value* IrArray::EmitElementPointer(llvm::IRBuilder<>& b, const IrIndex& index) const {
  llvm::Type* type = StorageType(shape_.element_type(), b.getContext()).value();
  return b.CreateInBoundsGEP(type, base_, {EmitLinearIndex(b, index)});
}

StatusOr<llvm::Value*> IrArray::EmitRead(llvm::IRBuilder<>& b, const IrIndex& index) const {
  ASSIGN_OR_RETURN(llvm::Type * type, StorageType(shape_.element_type(), b.getContext()));
  llvm::LoadInst* stored = b.CreateLoad(type, EmitElementPointer(b, index));
  if (access_group_ != nullptr) stored->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
  return StorageToValue(b, shape_.element_type(), stored);
}

Status IrArray::EmitWrite(llvm::IRBuilder<>& b, const IrIndex& index, llvm::Value* value) const {
  RETURN_IF_ERROR(StorageType(shape_.element_type(), b.getContext()).status());
  llvm::StoreInst* store =
      b.CreateStore(ValueToStorage(b, shape_.element_type(), value), EmitElementPointer(b, index));
  if (access_group_ != nullptr) store->setMetadata(llvm::LLVMContext::MD_access_group, access_group_);
  return OkStatus();
}

IrIndex DelinearizePhysical(llvm::IRBuilder<>& b, llvm::Value* linear, const Shape& shape) {
  IrIndex index(shape.rank(), nullptr);
  std::vector<int64_t> order = MajorToMinor(shape);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    int64_t size = shape.dimensions(*it);
    if (it + 1 == order.rend()) {
      index[*it] = linear;
    } else {
      index[*it] = b.CreateURem(linear, b.getInt64(size));
      linear = b.CreateUDiv(linear, b.getInt64(size));
    }
  }
  return index;
}

IrIndex DelinearizeRowMajor(llvm::IRBuilder<>& b, llvm::Value* linear,
                            const std::vector<int64_t>& dims) {
  IrIndex index(dims.size(), nullptr);
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    if (d == 0) {
      index[d] = linear;
    } else {
      index[d] = b.CreateURem(linear, b.getInt64(dims[d]));
      linear = b.CreateUDiv(linear, b.getInt64(dims[d]));
    }
  }
  return index;
}

llvm::Value* LinearizeRowMajor(llvm::IRBuilder<>& b, const IrIndex& index,
                               const std::vector<int64_t>& dims) {
  // Summed minor first for an index delinearized from a counter, as EmitLinearIndex: a reshape
  // of a loop's own index folds back into it; major first otherwise.
  if (dims.empty()) return b.getInt64(0);
  if (!IsRemainder(index[dims.size() - 1])) {
    llvm::Value* linear = b.getInt64(0);
    for (size_t d = 0; d < dims.size(); ++d) {
      linear = b.CreateAdd(b.CreateMul(linear, b.getInt64(dims[d]), "", true, true), index[d], "",
                           true, true);
    }
    return linear;
  }
  llvm::Value* linear = nullptr;
  int64_t stride = 1;
  for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
    llvm::Value* term =
        stride == 1 ? index[d] : b.CreateMul(index[d], b.getInt64(stride), "", true, true);
    linear = linear == nullptr ? term : b.CreateAdd(linear, term, "", true, true);
    stride *= dims[d];
  }
  return linear;
}

}  // namespace xlens::codegen
