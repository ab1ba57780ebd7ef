#include "compiler/codegen/llvm_ir_util.h"

#include <fmt/format.h>
#include <llvm/IR/CFG.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/float8_ir.h"

namespace xlens::codegen {

bool IsCodegenSupportedType(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::PRED:
    case PrimitiveType::S8: case PrimitiveType::S16: case PrimitiveType::S32:
    case PrimitiveType::S64: case PrimitiveType::U8: case PrimitiveType::U16:
    case PrimitiveType::U32: case PrimitiveType::U64: case PrimitiveType::F16:
    case PrimitiveType::BF16: case PrimitiveType::F32: case PrimitiveType::F64:
    case PrimitiveType::C64: case PrimitiveType::C128:
      return true;
    default:
      return IsComputedFloat8Type(type);
  }
}

StatusOr<llvm::Type*> ValueType(PrimitiveType type, llvm::LLVMContext& c) {
  switch (type) {
    case PrimitiveType::PRED: return llvm::Type::getInt1Ty(c);
    case PrimitiveType::S8: case PrimitiveType::U8: return llvm::Type::getInt8Ty(c);
    // The 8-bit floats are held as their bits, as bf16 is.
    case PrimitiveType::F8E5M2: case PrimitiveType::F8E4M3: case PrimitiveType::F8E3M4:
    case PrimitiveType::F8E4M3FN: case PrimitiveType::F8E4M3FNUZ: case PrimitiveType::F8E5M2FNUZ:
    case PrimitiveType::F8E4M3B11FNUZ:
      return llvm::Type::getInt8Ty(c);
    case PrimitiveType::S16: case PrimitiveType::U16: case PrimitiveType::BF16:
      return llvm::Type::getInt16Ty(c);
    case PrimitiveType::S32: case PrimitiveType::U32: return llvm::Type::getInt32Ty(c);
    case PrimitiveType::S64: case PrimitiveType::U64: return llvm::Type::getInt64Ty(c);
    case PrimitiveType::F16: return llvm::Type::getHalfTy(c);
    case PrimitiveType::F32: return llvm::Type::getFloatTy(c);
    case PrimitiveType::F64: return llvm::Type::getDoubleTy(c);
    case PrimitiveType::C64:
      return llvm::StructType::get(c, {llvm::Type::getFloatTy(c), llvm::Type::getFloatTy(c)});
    case PrimitiveType::C128:
      return llvm::StructType::get(c, {llvm::Type::getDoubleTy(c), llvm::Type::getDoubleTy(c)});
    default:
      return Error(fmt::format("element type {} is not supported by code generation",
                               PrimitiveTypeName(type)));
  }
}

StatusOr<llvm::Type*> StorageType(PrimitiveType type, llvm::LLVMContext& c) {
  if (type == PrimitiveType::PRED) return llvm::Type::getInt8Ty(c);
  return ValueType(type, c);
}

llvm::Value* StorageToValue(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* stored) {
  if (type == PrimitiveType::PRED) return b.CreateICmpNE(stored, b.getInt8(0));
  return stored;
}

llvm::Value* ValueToStorage(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value) {
  if (type == PrimitiveType::PRED) return b.CreateZExt(value, b.getInt8Ty());
  return value;
}

llvm::Type* FloatComputeType(PrimitiveType type, llvm::LLVMContext& c) {
  return type == PrimitiveType::F64 ? llvm::Type::getDoubleTy(c) : llvm::Type::getFloatTy(c);
}

llvm::Value* FloatToCompute(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value) {
  switch (type) {
    case PrimitiveType::F16:
      return b.CreateFPExt(value, b.getFloatTy());
    case PrimitiveType::BF16:
      return b.CreateBitCast(b.CreateShl(b.CreateZExt(value, b.getInt32Ty()), 16), b.getFloatTy());
    default:
      if (const Float8Format* f8 = Float8FormatOf(type)) return EmitFloat8ToF32(b, *f8, value);
      return value;
  }
}

llvm::Value* ComputeToFloat(llvm::IRBuilder<>& b, PrimitiveType type, llvm::Value* value) {
  switch (type) {
    case PrimitiveType::F16:
      return b.CreateFPTrunc(value, b.getHalfTy());
    case PrimitiveType::BF16: {
      // Round to nearest even; a NaN stays a quiet NaN (what bfloat16(float) does).
      llvm::Value* u = b.CreateBitCast(value, b.getInt32Ty());
      llvm::Value* high = b.CreateLShr(u, 16);
      llvm::Value* bias = b.CreateAdd(b.getInt32(0x7fff), b.CreateAnd(high, 1));
      llvm::Value* rounded = b.CreateLShr(b.CreateAdd(u, bias), 16);
      llvm::Value* quiet = b.CreateOr(high, 0x40);
      llvm::Value* is_nan = b.CreateFCmpUNO(value, value);
      return b.CreateTrunc(b.CreateSelect(is_nan, quiet, rounded), b.getInt16Ty());
    }
    default:
      if (const Float8Format* f8 = Float8FormatOf(type)) return EmitToFloat8(b, *f8, value);
      return value;
  }
}

Status EmitForLoop(llvm::IRBuilder<>& b, llvm::Value* start, llvm::Value* end,
                   std::string_view name, const std::function<Status(llvm::Value*)>& body,
                   llvm::MDNode* parallel_access_group) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& c = b.getContext();
  llvm::BasicBlock* preheader = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(c, fmt::format("{}.header", name), f);
  auto* body_block = llvm::BasicBlock::Create(c, fmt::format("{}.body", name), f);
  auto* exit = llvm::BasicBlock::Create(c, fmt::format("{}.exit", name), f);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* iv = b.CreatePHI(b.getInt64Ty(), 2, fmt::format("{}.iv", name));
  iv->addIncoming(start, preheader);
  b.CreateCondBr(b.CreateICmpSLT(iv, end), body_block, exit);
  b.SetInsertPoint(body_block);
  RETURN_IF_ERROR(body(iv));
  llvm::Value* next = b.CreateAdd(iv, b.getInt64(1), "", /*HasNUW=*/true, /*HasNSW=*/true);
  iv->addIncoming(next, b.GetInsertBlock());
  llvm::BranchInst* latch = b.CreateBr(header);
  if (parallel_access_group != nullptr) {
    llvm::LLVMContext& c = b.getContext();
    llvm::MDNode* parallel = llvm::MDNode::get(
        c, {llvm::MDString::get(c, "llvm.loop.parallel_accesses"), parallel_access_group});
    llvm::MDNode* loop_id = llvm::MDNode::getDistinct(c, {nullptr, parallel});
    loop_id->replaceOperandWith(0, loop_id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, loop_id);
  }
  b.SetInsertPoint(exit);
  return OkStatus();
}

llvm::MDNode* LoopHint(llvm::LLVMContext& context, std::string_view name, llvm::Constant* value) {
  std::vector<llvm::Metadata*> ops = {llvm::MDString::get(context, llvm::StringRef(name.data(), name.size()))};
  if (value != nullptr) ops.push_back(llvm::ConstantAsMetadata::get(value));
  return llvm::MDNode::get(context, ops);
}

void AddLoopHints(llvm::BasicBlock* header, const std::vector<llvm::Metadata*>& hints) {
  if (header == nullptr) return;
  llvm::LLVMContext& c = header->getContext();
  for (llvm::BasicBlock* pred : llvm::predecessors(header)) {
    llvm::Instruction* latch = pred->getTerminator();
    llvm::MDNode* old_id = latch->getMetadata(llvm::LLVMContext::MD_loop);
    if (old_id == nullptr) continue;
    std::vector<llvm::Metadata*> ops = {nullptr};
    for (unsigned i = 1; i < old_id->getNumOperands(); ++i) ops.push_back(old_id->getOperand(i));
    ops.insert(ops.end(), hints.begin(), hints.end());
    llvm::MDNode* id = llvm::MDNode::getDistinct(c, ops);
    id->replaceOperandWith(0, id);
    latch->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
}

llvm::AllocaInst* EmitEntryAlloca(llvm::IRBuilder<>& b, llvm::Type* type, std::string_view name) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::IRBuilder<> entry(&f->getEntryBlock(), f->getEntryBlock().begin());
  return entry.CreateAlloca(type, nullptr, llvm::StringRef(name.data(), name.size()));
}

std::vector<llvm::Value*> EmitTransposeInRegisters(llvm::IRBuilder<>& b, std::vector<llvm::Value*> v) {
  const int64_t n = static_cast<int64_t>(v.size());
  for (int64_t s = 1; s < n; s *= 2) {
    std::vector<int> low(n), high(n);
    for (int64_t i = 0; i < n; ++i) {
      low[i] = static_cast<int>((i & s) == 0 ? i : n + i - s);
      high[i] = static_cast<int>((i & s) == 0 ? i + s : n + i);
    }
    for (int64_t j = 0; j < n; ++j) {
      if ((j & s) != 0) continue;
      llvm::Value* a = v[j];
      llvm::Value* c = v[j + s];
      v[j] = b.CreateShuffleVector(a, c, low);
      v[j + s] = b.CreateShuffleVector(a, c, high);
    }
  }
  return v;
}

llvm::FunctionCallee DeclareFunction(llvm::Module& module, std::string_view name,
                                     llvm::Type* result, llvm::ArrayRef<llvm::Type*> params) {
  auto* type = llvm::FunctionType::get(result, params, false);
  return module.getOrInsertFunction(llvm::StringRef(name.data(), name.size()), type);
}

}  // namespace xlens::codegen
