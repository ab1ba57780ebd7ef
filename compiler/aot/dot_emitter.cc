#include "compiler/aot/dot_emitter.h"

#include <functional>

#include <llvm/IR/IRBuilder.h>

namespace xlens::aot {
void EmitCountedLoop(llvm::IRBuilder<>& b, const std::string& name, int64_t count,
                     const std::function<void(llvm::Value*)>& body) {
  llvm::Function* f = b.GetInsertBlock()->getParent();
  llvm::LLVMContext& c = b.getContext();
  llvm::BasicBlock* before = b.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(c, name + ".header", f);
  auto* loop = llvm::BasicBlock::Create(c, name + ".body", f);
  auto* exit = llvm::BasicBlock::Create(c, name + ".exit", f);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* i = b.CreatePHI(b.getInt64Ty(), 2, name);
  i->addIncoming(b.getInt64(0), before);
  b.CreateCondBr(b.CreateICmpSLT(i, b.getInt64(count)), loop, exit);
  b.SetInsertPoint(loop);
  body(i);
  i->addIncoming(b.CreateNUWAdd(i, b.getInt64(1)), b.GetInsertBlock());
  b.CreateBr(header);
  b.SetInsertPoint(exit);
}

void EmitScaledRowAdd(llvm::IRBuilder<>& b, const std::string& name, int64_t count, llvm::Type* t,
                      llvm::Value* scale, llvm::Value* row, llvm::Value* out) {
  EmitCountedLoop(b, name, count, [&](llvm::Value* j) {
    llvm::Value* target = b.CreateInBoundsGEP(t, out, j);
    llvm::Value* product = b.CreateFMul(scale, b.CreateLoad(t, b.CreateInBoundsGEP(t, row, j)));
    b.CreateStore(b.CreateFAdd(b.CreateLoad(t, target), product), target);
  });
}

llvm::Function* CreateLoopNestKernel(const std::string& name, llvm::Module& module) {
  llvm::LLVMContext& c = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  llvm::Type* i64 = llvm::Type::getInt64Ty(c);
  auto* type = llvm::FunctionType::get(llvm::Type::getVoidTy(c), {ptr, i64, i64}, false);
  llvm::Function* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, name, module);
  f->addParamAttr(0, llvm::Attribute::NoAlias);
  f->addFnAttr(llvm::Attribute::NoUnwind);
  return f;
}

codegen::KernelSpec OnePhaseKernelSpec(const std::string& name, int64_t work) {
  codegen::KernelSpec spec;
  spec.name = name;
  codegen::KernelPhase phase;
  phase.function_name = name;
  phase.tasks = 1;
  phase.work_per_task = work;
  phase.sequential = true;
  spec.phases.push_back(phase);
  spec.operand_leaves = 2;
  spec.output_leaves = 1;
  return spec;
}

codegen::KernelSpec EmitRowMajorDot(const HloInstruction& dot, const std::string& name,
                                    llvm::Module& module) {
  const Shape& lhs = dot.operand(0)->shape();
  const Shape& rhs = dot.operand(1)->shape();
  const int64_t batch_dims = static_cast<int64_t>(dot.dot_dimension_numbers->lhs_batch_dimensions.size());
  int64_t batch = 1;
  for (int64_t d = 0; d < batch_dims; ++d) batch *= lhs.dimensions(d);
  const int64_t m = lhs.rank() == batch_dims + 2 ? lhs.dimensions(batch_dims) : 1;
  const int64_t k = lhs.dimensions(lhs.rank() - 1);
  const int64_t n = rhs.rank() == batch_dims + 2 ? rhs.dimensions(batch_dims + 1) : 1;

  llvm::LLVMContext& c = module.getContext();
  llvm::Type* ptr = llvm::PointerType::get(c, 0);
  llvm::Function* f = CreateLoopNestKernel(name, module);
  llvm::IRBuilder<> b(llvm::BasicBlock::Create(c, "entry", f));
  llvm::Type* t = dot.shape().element_type() == PrimitiveType::F64 ? b.getDoubleTy() : b.getFloatTy();
  auto buffer = [&](int i) {
    auto* p = b.CreateLoad(ptr, b.CreateConstInBoundsGEP1_64(ptr, f->getArg(0), i));
    p->setMetadata(llvm::LLVMContext::MD_nonnull, llvm::MDNode::get(c, {}));
    return p;
  };
  llvm::Value* a = buffer(0);
  llvm::Value* w = buffer(1);
  llvm::Value* out = buffer(2);
  EmitCountedLoop(b, "row", batch * m, [&](llvm::Value* row) {
    // row = batch index * m + i; its batch's right-hand side starts at (row / m) * k * n.
    llvm::Value* out_row = b.CreateInBoundsGEP(t, out, b.CreateNUWMul(row, b.getInt64(n)));
    llvm::Value* a_row = b.CreateInBoundsGEP(t, a, b.CreateNUWMul(row, b.getInt64(k)));
    llvm::Value* w_batch = b.CreateInBoundsGEP(
        t, w, b.CreateNUWMul(b.CreateUDiv(row, b.getInt64(m)), b.getInt64(k * n)));
    EmitCountedLoop(b, "zero", n, [&](llvm::Value* j) {
      b.CreateStore(llvm::ConstantFP::get(t, 0.0), b.CreateInBoundsGEP(t, out_row, j));
    });
    EmitCountedLoop(b, "k", k, [&](llvm::Value* kk) {
      llvm::Value* scale = b.CreateLoad(t, b.CreateInBoundsGEP(t, a_row, kk));
      llvm::Value* w_row = b.CreateInBoundsGEP(t, w_batch, b.CreateNUWMul(kk, b.getInt64(n)));
      EmitScaledRowAdd(b, "j", n, t, scale, w_row, out_row);
    });
  });
  b.CreateRetVoid();
  return OnePhaseKernelSpec(name, batch * m * k * n);
}

}  // namespace xlens::aot
