#include "compiler/codegen/gpu/gpu_primitives.h"

#include <fmt/format.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Transforms/Scalar/InferAlignment.h>
#include <llvm/Transforms/Vectorize/LoadStoreVectorizer.h>

namespace xlens::codegen::gpu {

using llvm::Value;

llvm::Value* EmitThreadIdx(llvm::IRBuilder<>& b) {
  return b.CreateZExt(b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {}),
                      b.getInt64Ty(), "tid");
}

llvm::Value* EmitBlockIdx(llvm::IRBuilder<>& b) {
  return b.CreateZExt(b.CreateIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x, {}, {}),
                      b.getInt64Ty(), "bid");
}

void EmitBarrier(llvm::IRBuilder<>& b) { b.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {}); }

namespace {

Value* ShuffleI32(llvm::IRBuilder<>& b, Value* v, int64_t lane_mask) {
  // c = 0x1f: the whole warp is one segment; butterfly partners stay inside it.
  return b.CreateIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                           {b.getInt32(0xffffffffu), v, b.getInt32(static_cast<uint32_t>(lane_mask)),
                            b.getInt32(0x1f)});
}

}  // namespace

StatusOr<Value*> EmitShuffleXor(llvm::IRBuilder<>& b, Value* value, int64_t lane_mask) {
  llvm::Type* type = value->getType();
  const unsigned bits = type->getPrimitiveSizeInBits().getFixedValue();
  if (!(type->isIntegerTy() || type->isFloatingPointTy()) || bits == 0 || bits > 64) {
    return Error("a warp shuffle of this value type is not supported by the GPU emitters");
  }
  llvm::Type* int_type = b.getIntNTy(bits);
  Value* as_int = type->isIntegerTy() ? value : b.CreateBitCast(value, int_type);
  Value* shuffled;
  if (bits <= 32) {
    Value* wide = bits == 32 ? as_int : b.CreateZExt(as_int, b.getInt32Ty());
    Value* s = ShuffleI32(b, wide, lane_mask);
    shuffled = bits == 32 ? s : b.CreateTrunc(s, int_type);
  } else {
    Value* lo = ShuffleI32(b, b.CreateTrunc(as_int, b.getInt32Ty()), lane_mask);
    Value* hi = ShuffleI32(b, b.CreateTrunc(b.CreateLShr(as_int, 32), b.getInt32Ty()), lane_mask);
    shuffled = b.CreateOr(b.CreateZExt(lo, int_type), b.CreateShl(b.CreateZExt(hi, int_type), 32));
  }
  return type->isIntegerTy() ? shuffled : b.CreateBitCast(shuffled, type);
}

llvm::GlobalVariable* CreateSharedArray(llvm::Module& module, llvm::Type* type, int64_t count,
                                        std::string_view name) {
  auto* array_type = llvm::ArrayType::get(type, static_cast<uint64_t>(count));
  auto* global = new llvm::GlobalVariable(
      module, array_type, /*isConstant=*/false, llvm::GlobalValue::InternalLinkage,
      llvm::UndefValue::get(array_type), std::string(name), nullptr,
      llvm::GlobalValue::NotThreadLocal, /*AddressSpace=*/3);
  global->setAlignment(llvm::Align(16));
  return global;
}

llvm::Value* SharedElementPointer(llvm::IRBuilder<>& b, llvm::GlobalVariable* array, Value* index) {
  return b.CreateInBoundsGEP(array->getValueType(), array, {b.getInt64(0), index});
}

StatusOr<std::vector<Value*>> EmitWarpReduce(ElementalIrEmitter& e, const HloComputation& reducer,
                                             std::vector<Value*> values, int64_t width, Value* lane,
                                             int64_t valid_lanes) {
  llvm::IRBuilder<>& b = e.builder();
  for (int64_t offset = width / 2; offset >= 1; offset /= 2) {
    std::vector<Value*> args = values;
    std::vector<Value*> partner;
    for (Value* v : values) {
      ASSIGN_OR_RETURN(Value * other, EmitShuffleXor(b, v, offset));
      args.push_back(other);
      partner.push_back(other);
    }
    ASSIGN_OR_RETURN(std::vector<Value*> combined, e.EmitScalarComputation(reducer, args));
    if (valid_lanes < width) {
      // Before this step a lane holds its group's lanes that agree with it below bit 2*offset;
      // the group holds a value when its lowest lane, (lane mod 2*offset), is a valid one.
      Value* mask = b.getInt64(2 * offset - 1);
      Value* limit = b.getInt64(valid_lanes);
      Value* mine = b.CreateICmpULT(b.CreateAnd(lane, mask), limit);
      Value* theirs = b.CreateICmpULT(b.CreateAnd(b.CreateXor(lane, b.getInt64(offset)), mask), limit);
      for (size_t k = 0; k < values.size(); ++k) {
        combined[k] = b.CreateSelect(mine, b.CreateSelect(theirs, combined[k], values[k]), partner[k]);
      }
    }
    values = std::move(combined);
  }
  return values;
}

void VectorizeAccesses(llvm::Function& function) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder pb;
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  llvm::FunctionPassManager fpm;
  // The vectorizer merges only accesses whose alignment is already known to be the vector's:
  // infer it first from the 16-byte aligned kernel arguments and the offsets.
  fpm.addPass(llvm::InferAlignmentPass());
  fpm.addPass(llvm::LoadStoreVectorizerPass());
  fpm.run(function, fam);
}

int64_t PowerOfTwoCeil(int64_t n) {
  int64_t p = 1;
  while (p < n) p *= 2;
  return p;
}

}  // namespace xlens::codegen::gpu
