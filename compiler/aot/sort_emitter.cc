#include "compiler/aot/sort_emitter.h"

#include <fmt/format.h>

namespace xlens::aot {
namespace {

std::vector<int64_t> MinorToMajor(const Shape& shape) {
  return shape.has_layout() ? shape.layout().minor_to_major : shape_util::DefaultMinorToMajor(shape.rank());
}

// Elements between neighbours along each dimension, for the shape's layout.
std::vector<int64_t> ElementStrides(const Shape& shape) {
  std::vector<int64_t> strides(shape.rank(), 1);
  int64_t stride = 1;
  for (int64_t d : MinorToMajor(shape)) {
    strides[d] = stride;
    stride *= shape.dimensions(d);
  }
  return strides;
}

std::vector<Shape> ArrayShapes(const Shape& shape) {
  std::vector<Shape> shapes;
  shape.ForEachLeaf([&](const Shape& s, const std::vector<int64_t>&) {
    if (s.IsArray()) shapes.push_back(s);
  });
  return shapes;
}

}  // namespace

std::string WhyNotGeneratedSort(const HloInstruction& sort) {
  const Shape& shape = sort.operand(0)->shape();
  const int64_t n = shape.dimensions(sort.dimensions(0));
  if (n > kMaxInsertionSortLength) {
    return fmt::format("sorts {} elements per slice, and the generated sort (by insertion, "
                       "quadratic) takes at most {}", n, kMaxInsertionSortLength);
  }
  const std::vector<int64_t> layout = MinorToMajor(shape);
  for (const HloInstruction* operand : sort.operands()) {
    if (MinorToMajor(operand->shape()) != layout) return "has operands in different layouts";
  }
  for (const Shape& s : ArrayShapes(sort.shape())) {
    if (MinorToMajor(s) != layout) return "has results in layouts other than its operands'";
  }
  return "";
}

void EmitInsertionSort(llvm::IRBuilder<>& b, llvm::IRBuilder<>& allocas, const HloInstruction& sort,
                       llvm::Function* comparator, const std::vector<llvm::Value*>& outputs) {
  llvm::LLVMContext& c = b.getContext();
  llvm::Function* f = b.GetInsertBlock()->getParent();
  const Shape& shape = sort.operand(0)->shape();
  const int64_t dimension = sort.dimensions(0);
  const int64_t n = shape.dimensions(dimension);
  const int64_t total = shape.num_elements();
  if (n <= 1 || total == 0) return;
  const int64_t stride = ElementStrides(shape)[dimension];
  const size_t count = outputs.size();
  std::vector<int64_t> widths;
  std::vector<llvm::Type*> types;
  for (const HloInstruction* operand : sort.operands()) {
    widths.push_back(ByteWidth(operand->shape().element_type()));
    types.push_back(llvm::IntegerType::get(c, static_cast<unsigned>(widths.back() * 8)));
  }
  llvm::Type* ptr = b.getPtrTy();
  auto* table_type = llvm::ArrayType::get(ptr, count);
  llvm::Value* lhs_table = allocas.CreateAlloca(table_type, nullptr, "sort_lhs");
  llvm::Value* rhs_table = allocas.CreateAlloca(table_type, nullptr, "sort_rhs");
  const std::string name = sort.name();
  llvm::Type* i64 = b.getInt64Ty();
  // Element `k` of the slice starting at element `row`, in output `i`.
  auto element = [&](size_t i, llvm::Value* row, llvm::Value* k) {
    llvm::Value* index = b.CreateAdd(row, b.CreateMul(k, b.getInt64(stride)));
    return b.CreateInBoundsGEP(b.getInt8Ty(), outputs[i], b.CreateMul(index, b.getInt64(widths[i])));
  };

  // for (e = 0; e < total; ++e) if ((e / stride) % n == 0) sort the slice starting at e.
  llvm::BasicBlock* before = b.GetInsertBlock();
  auto* rows = llvm::BasicBlock::Create(c, name + ".rows", f);
  auto* row_body = llvm::BasicBlock::Create(c, name + ".row", f);
  auto* next_row = llvm::BasicBlock::Create(c, name + ".next_row", f);
  auto* done = llvm::BasicBlock::Create(c, name + ".sorted", f);
  b.CreateBr(rows);
  b.SetInsertPoint(rows);
  llvm::PHINode* e = b.CreatePHI(i64, 2, "e");
  e->addIncoming(b.getInt64(0), before);
  b.CreateCondBr(b.CreateICmpSLT(e, b.getInt64(total)), row_body, done);
  b.SetInsertPoint(row_body);
  llvm::Value* first = b.CreateICmpEQ(b.CreateURem(b.CreateUDiv(e, b.getInt64(stride)), b.getInt64(n)),
                                      b.getInt64(0));
  auto* slice = llvm::BasicBlock::Create(c, name + ".slice", f);
  b.CreateCondBr(first, slice, next_row);

  // for (i = 1; i < n; ++i) for (j = i; j > 0 && less(x[j], x[j-1]); --j) swap(x[j], x[j-1]);
  b.SetInsertPoint(slice);
  auto* outer = llvm::BasicBlock::Create(c, name + ".outer", f);
  auto* inner = llvm::BasicBlock::Create(c, name + ".inner", f);
  auto* compare = llvm::BasicBlock::Create(c, name + ".compare", f);
  auto* swap = llvm::BasicBlock::Create(c, name + ".swap", f);
  auto* outer_next = llvm::BasicBlock::Create(c, name + ".outer_next", f);
  b.CreateBr(outer);
  b.SetInsertPoint(outer);
  llvm::PHINode* i = b.CreatePHI(i64, 2, "i");
  i->addIncoming(b.getInt64(1), slice);
  b.CreateCondBr(b.CreateICmpSLT(i, b.getInt64(n)), inner, next_row);
  // `inner` is entered from `outer` (j = i) and from `swap` (j - 1).
  b.SetInsertPoint(inner);
  llvm::PHINode* j = b.CreatePHI(i64, 2, "j");
  j->addIncoming(i, outer);
  b.CreateCondBr(b.CreateICmpSGT(j, b.getInt64(0)), compare, outer_next);
  b.SetInsertPoint(compare);
  llvm::Value* previous = b.CreateSub(j, b.getInt64(1));
  std::vector<llvm::Value*> at_j, at_previous;
  for (size_t k = 0; k < count; ++k) {
    at_j.push_back(element(k, e, j));
    at_previous.push_back(element(k, e, previous));
    b.CreateStore(at_j.back(), b.CreateConstInBoundsGEP2_64(table_type, lhs_table, 0, k));
    b.CreateStore(at_previous.back(), b.CreateConstInBoundsGEP2_64(table_type, rhs_table, 0, k));
  }
  llvm::Value* less = b.CreateICmpNE(b.CreateCall(comparator, {lhs_table, rhs_table}), b.getInt8(0));
  b.CreateCondBr(less, swap, outer_next);
  b.SetInsertPoint(swap);
  for (size_t k = 0; k < count; ++k) {
    llvm::Value* x = b.CreateAlignedLoad(types[k], at_j[k], llvm::MaybeAlign(1));
    llvm::Value* y = b.CreateAlignedLoad(types[k], at_previous[k], llvm::MaybeAlign(1));
    b.CreateAlignedStore(x, at_previous[k], llvm::MaybeAlign(1));
    b.CreateAlignedStore(y, at_j[k], llvm::MaybeAlign(1));
  }
  j->addIncoming(previous, swap);
  b.CreateBr(inner);
  b.SetInsertPoint(outer_next);
  i->addIncoming(b.CreateAdd(i, b.getInt64(1)), outer_next);
  b.CreateBr(outer);

  b.SetInsertPoint(next_row);
  e->addIncoming(b.CreateAdd(e, b.getInt64(1)), next_row);
  b.CreateBr(rows);
  b.SetInsertPoint(done);
}

}  // namespace xlens::aot
