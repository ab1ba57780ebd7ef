#include "compiler/codegen/cpu/cpu_jit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include "compiler/codegen/llvm_ir_util.h"

namespace xlens::codegen {
namespace {

// int64_t f(int64_t a, int64_t b) { return xlens_powi_s64(a, b) + (int64_t)expf(0); }
// The context is declared first so that it outlives the module.
struct ModuleAndContext {
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> module;
};

ModuleAndContext PowerModule() {
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("test", *context);
  llvm::IRBuilder<> b(*context);
  auto* type = llvm::FunctionType::get(b.getInt64Ty(), {b.getInt64Ty(), b.getInt64Ty()}, false);
  auto* f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "power", *module);
  b.SetInsertPoint(llvm::BasicBlock::Create(*context, "entry", f));
  llvm::Value* p = b.CreateCall(
      DeclareFunction(*module, "xlens_powi_s64", b.getInt64Ty(), {b.getInt64Ty(), b.getInt64Ty()}),
      {f->getArg(0), f->getArg(1)});
  llvm::Value* e = b.CreateCall(DeclareFunction(*module, "expf", b.getFloatTy(), {b.getFloatTy()}),
                                {llvm::ConstantFP::get(b.getFloatTy(), 0.0)});
  b.CreateRet(b.CreateAdd(p, b.CreateFPToSI(e, b.getInt64Ty())));
  return {std::move(context), std::move(module)};
}

TEST(CpuJitTest, CompilesForTheHostAndResolvesRuntimeAndLibmSymbols) {
  auto jit = CpuJit::Create();
  ASSERT_TRUE(jit.ok()) << jit.status().message();
  ModuleAndContext m = PowerModule();
  auto ir = (*jit)->AddModule(std::move(m.module), std::move(m.context), /*keep_ir=*/true);
  ASSERT_TRUE(ir.ok()) << ir.status().message();
  EXPECT_THAT(ir->ir_no_opt, ::testing::HasSubstr("call i64 @xlens_powi_s64"));
  EXPECT_THAT(ir->ir_with_opt, ::testing::HasSubstr("target-cpu"));
  auto address = (*jit)->Lookup("power");
  ASSERT_TRUE(address.ok()) << address.status().message();
  auto power = reinterpret_cast<int64_t (*)(int64_t, int64_t)>(*address);
  EXPECT_EQ(power(3, 4), 81 + 1);
  EXPECT_EQ(power(2, -1), 0 + 1);   // integer powers with negative exponents are 0
  EXPECT_EQ(power(-1, -3), -1 + 1);
  EXPECT_FALSE((*jit)->Lookup("missing").ok());
}

TEST(CpuJitTest, InvalidIrIsReportedAsACodeGenerationBug) {
  auto jit = CpuJit::Create();
  ASSERT_TRUE(jit.ok());
  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("bad", *context);
  auto* f = llvm::Function::Create(llvm::FunctionType::get(llvm::Type::getVoidTy(*context), false),
                                   llvm::Function::ExternalLinkage, "f", *module);
  llvm::BasicBlock::Create(*context, "entry", f);  // no terminator
  auto ir = (*jit)->AddModule(std::move(module), std::move(context), false);
  ASSERT_FALSE(ir.ok());
  EXPECT_THAT(ir.status().message(), ::testing::HasSubstr("a code generation bug"));
}

TEST(CpuJitTest, ObjectFilesAreElf) {
  ModuleAndContext m = PowerModule();
  std::string text;
  llvm::raw_string_ostream os(text);
  m.module->print(os, nullptr);
  auto object = CompileIrToHostObject(text);
  ASSERT_TRUE(object.ok()) << object.status().message();
  EXPECT_EQ(object->substr(0, 4), "\x7f" "ELF");
  EXPECT_FALSE(CompileIrToHostObject("this is not IR").ok());
}

}  // namespace
}  // namespace xlens::codegen
