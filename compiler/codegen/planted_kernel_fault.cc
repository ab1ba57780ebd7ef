#include "compiler/codegen/planted_kernel_fault.h"

#include <vector>

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>

namespace xlens::codegen {

bool IsPlantedKernel(std::string_view name, const HloInstruction& hlo, const KernelSpec& spec) {
  return !name.empty() && (name == hlo.name() || name == spec.name);
}

void PlantKernelFault(const HloInstruction& hlo, const KernelSpec& spec, llvm::Module& module) {
  const bool pred_result =
      hlo.shape().IsArray() && hlo.shape().element_type() == PrimitiveType::PRED;
  for (const KernelPhase& phase : spec.phases) {
    llvm::Function* function = module.getFunction(phase.function_name);
    if (function == nullptr) continue;
    std::vector<llvm::StoreInst*> stores;
    for (llvm::BasicBlock& block : *function) {
      for (llvm::Instruction& instruction : block) {
        auto* store = llvm::dyn_cast<llvm::StoreInst>(&instruction);
        if (store == nullptr) continue;
        // A loop counter or accumulator in a local variable is left alone: the fault is in what
        // the kernel writes, not in how long its loops run.
        if (llvm::isa<llvm::AllocaInst>(llvm::getUnderlyingObject(store->getPointerOperand()))) {
          continue;
        }
        stores.push_back(store);
      }
    }
    for (llvm::StoreInst* store : stores) {
      llvm::Value* value = store->getValueOperand();
      llvm::Type* type = value->getType();
      llvm::IRBuilder<> b(store);
      llvm::Value* wrong = nullptr;
      if (type->isFloatingPointTy()) {
        wrong = b.CreateFAdd(value, llvm::ConstantFP::get(type, 1.0), "planted_fault");
      } else if (type->isIntegerTy()) {
        wrong = pred_result ? b.CreateXor(value, llvm::ConstantInt::get(type, 1), "planted_fault")
                            : b.CreateAdd(value, llvm::ConstantInt::get(type, 1), "planted_fault");
      } else if (type->isVectorTy() && type->getScalarType()->isFloatingPointTy()) {
        wrong = b.CreateFAdd(value, llvm::ConstantFP::get(type, 1.0), "planted_fault");
      }
      if (wrong != nullptr) store->setOperand(0, wrong);
    }
  }
}

}  // namespace xlens::codegen
