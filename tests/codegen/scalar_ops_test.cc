// Which float operations the CPU code may contract into fused multiply-adds (scalar_ops.cc): a
// multiply feeding the add of a constant (a Horner step), never the sum of two computed values,
// never f16, never GPU code; and a polynomial so contracted still matches the evaluator.
#include "compiler/codegen/scalar_ops.h"

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"

namespace xlens::codegen {
namespace {

// The unoptimised IR of the entry root's kernel for `triple`.
std::string KernelIr(const std::string& text, const std::string& triple) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  llvm_module.setTargetTriple(triple);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module,
                         triple.rfind("nvptx", 0) == 0 ? KernelTarget::kGpu : KernelTarget::kCpu);
  EXPECT_TRUE(spec.ok()) << spec.status().message();
  std::string ir;
  llvm::raw_string_ostream os(ir);
  llvm_module.print(os, nullptr);
  return ir;
}

constexpr const char* kHorner = R"(HloModule m
fused {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  c1 = f32[] constant(0.5)
  c2 = f32[] constant(-1.25)
  c1b = f32[4096] broadcast(c1), dimensions={}
  c2b = f32[4096] broadcast(c2), dimensions={}
  p = f32[4096] multiply(x, c1b)
  q = f32[4096] add(p, c2b)
  r = f32[4096] multiply(q, x)
  s = f32[4096] add(r, y)
  ROOT t = f32[4096] add(s, c1b)
}
ENTRY e {
  x = f32[4096] parameter(0)
  y = f32[4096] parameter(1)
  ROOT f = f32[4096] fusion(x, y), kind=kLoop, calls=fused
})";

TEST(ScalarOpsTest, OnlyMultipliesAndAddsOfConstantsMayContractOnTheCpu) {
  const std::string ir = KernelIr(kHorner, "x86_64-pc-linux-gnu");
  EXPECT_NE(ir.find("fmul contract float"), std::string::npos) << ir;
  EXPECT_NE(ir.find("fadd contract float %"), std::string::npos) << ir;
  // r + y adds two computed values: rounded as the evaluator rounds it.
  size_t plain_adds = 0;
  for (size_t at = ir.find("fadd float"); at != std::string::npos; at = ir.find("fadd float", at + 1)) {
    ++plain_adds;
  }
  EXPECT_EQ(plain_adds, 1u) << ir;
}

TEST(ScalarOpsTest, HalfPrecisionAndGpuCodeAreNotContracted) {
  std::string half = kHorner;
  for (size_t at = half.find("f32"); at != std::string::npos; at = half.find("f32", at)) {
    half.replace(at, 3, "f16");
  }
  EXPECT_EQ(KernelIr(half, "x86_64-pc-linux-gnu").find("contract"), std::string::npos);
  EXPECT_EQ(KernelIr(kHorner, "nvptx64-nvidia-cuda").find("contract"), std::string::npos);
}

TEST(ScalarOpsTest, AContractedPolynomialMatchesTheEvaluator) {
  testing::ExpectMatchesEvaluator(kHorner, {}, {1e-6, 1e-6});
}

}  // namespace
}  // namespace xlens::codegen
