#include "compiler/codegen/cpu/x86_range_min_max.h"

#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsX86.h>

namespace xlens::codegen::cpu {
namespace {

// The range intrinsic for `type`, or not_intrinsic where the features lack it.
llvm::Intrinsic::ID RangeIntrinsic(llvm::FixedVectorType* type, bool vl) {
  const unsigned bits = type->getPrimitiveSizeInBits().getFixedValue();
  const bool f32 = type->getElementType()->isFloatTy();
  if (!f32 && !type->getElementType()->isDoubleTy()) return llvm::Intrinsic::not_intrinsic;
  switch (bits) {
    case 512: return f32 ? llvm::Intrinsic::x86_avx512_mask_range_ps_512 : llvm::Intrinsic::x86_avx512_mask_range_pd_512;
    case 256:
      if (!vl) break;
      return f32 ? llvm::Intrinsic::x86_avx512_mask_range_ps_256 : llvm::Intrinsic::x86_avx512_mask_range_pd_256;
    case 128:
      if (!vl) break;
      return f32 ? llvm::Intrinsic::x86_avx512_mask_range_ps_128 : llvm::Intrinsic::x86_avx512_mask_range_pd_128;
    default: break;
  }
  return llvm::Intrinsic::not_intrinsic;
}

bool HasFeature(llvm::StringRef features, llvm::StringRef feature) {
  llvm::SmallVector<llvm::StringRef, 64> parts;
  features.split(parts, ',');
  for (llvm::StringRef part : parts) {
    if (part == feature) return true;
  }
  return false;
}

}  // namespace

bool LowerVectorMinMaxToRange(llvm::Module& module) {
  bool changed = false;
  for (llvm::Function& f : module) {
    if (f.isDeclaration()) continue;
    const llvm::StringRef features = f.getFnAttribute("target-features").getValueAsString();
    if (!HasFeature(features, "+avx512dq")) continue;
    const bool vl = HasFeature(features, "+avx512vl");
    std::vector<llvm::IntrinsicInst*> calls;
    for (llvm::BasicBlock& block : f) {
      for (llvm::Instruction& i : block) {
        auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i);
        if (call == nullptr) continue;
        const llvm::Intrinsic::ID id = call->getIntrinsicID();
        if (id != llvm::Intrinsic::maximum && id != llvm::Intrinsic::minimum) continue;
        auto* type = llvm::dyn_cast<llvm::FixedVectorType>(call->getType());
        if (type != nullptr && RangeIntrinsic(type, vl) != llvm::Intrinsic::not_intrinsic) calls.push_back(call);
      }
    }
    for (llvm::IntrinsicInst* call : calls) {
      auto* type = llvm::cast<llvm::FixedVectorType>(call->getType());
      const llvm::Intrinsic::ID range = RangeIntrinsic(type, vl);
      llvm::IRBuilder<> b(call);
      b.setFastMathFlags(call->getFastMathFlags());
      llvm::Value* x = call->getArgOperand(0);
      llvm::Value* y = call->getArgOperand(1);
      // imm8: bits 1:0 select the minimum (00) or the maximum (01), bits 3:2 the sign from the
      // comparison (01), so that -0 < +0. All lanes (mask all ones), the current rounding (4).
      const int imm = call->getIntrinsicID() == llvm::Intrinsic::maximum ? 0b0101 : 0b0100;
      const unsigned lanes = type->getNumElements();
      std::vector<llvm::Value*> args = {x, y, b.getInt32(imm), x,
                                        lanes == 16 ? static_cast<llvm::Value*>(b.getInt16(0xFFFF))
                                                    : b.getInt8(static_cast<uint8_t>((1u << lanes) - 1))};
      if (type->getPrimitiveSizeInBits().getFixedValue() == 512) args.push_back(b.getInt32(4));
      llvm::Value* r = b.CreateIntrinsic(range, {}, args);
      // Where either is NaN, their sum is one.
      llvm::Value* unordered = b.CreateFCmpUNO(x, y);
      llvm::Value* result = b.CreateSelect(unordered, b.CreateFAdd(x, y), r);
      call->replaceAllUsesWith(result);
      call->eraseFromParent();
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens::codegen::cpu
