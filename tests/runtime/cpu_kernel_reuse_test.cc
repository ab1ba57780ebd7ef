// Identical kernel instructions share one compiled kernel (cpu_compiler.cc, KernelReuseKey):
// one function in the LLVM IR, each thunk keeping its own HLO name, and the results of each.
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/executable.h"

namespace xlens::runtime {
namespace {

// Four row sums of exp(x * k): a and b identical; c differs only in the constant k, d only in
// its operand's layout.
constexpr char kFourSums[] = R"(HloModule reuse
add { x = f32[] parameter(0) y = f32[] parameter(1) ROOT s = f32[] add(x, y) }
ENTRY e {
  a = f32[64,128]{1,0} parameter(0)
  b = f32[64,128]{1,0} parameter(1)
  c = f32[64,128]{1,0} parameter(2)
  d = f32[64,128]{0,1} parameter(3)
  two = f32[] constant(0.5)
  other = f32[] constant(0.25)
  zero = f32[] constant(0)
  two_a = f32[64,128]{1,0} broadcast(two), dimensions={}
  ma = f32[64,128]{1,0} multiply(a, two_a)
  ea = f32[64,128]{1,0} exponential(ma)
  ra = f32[64]{0} reduce(ea, zero), dimensions={1}, to_apply=add
  two_b = f32[64,128]{1,0} broadcast(two), dimensions={}
  mb = f32[64,128]{1,0} multiply(b, two_b)
  eb = f32[64,128]{1,0} exponential(mb)
  rb = f32[64]{0} reduce(eb, zero), dimensions={1}, to_apply=add
  other_c = f32[64,128]{1,0} broadcast(other), dimensions={}
  mc = f32[64,128]{1,0} multiply(c, other_c)
  ec = f32[64,128]{1,0} exponential(mc)
  rc = f32[64]{0} reduce(ec, zero), dimensions={1}, to_apply=add
  two_d = f32[64,128]{0,1} broadcast(two), dimensions={}
  md = f32[64,128]{0,1} multiply(d, two_d)
  ed = f32[64,128]{0,1} exponential(md)
  rd = f32[64]{0} reduce(ed, zero), dimensions={1}, to_apply=add
  ROOT t = (f32[64]{0}, f32[64]{0}, f32[64]{0}, f32[64]{0}) tuple(ra, rb, rc, rd)
})";

struct Kernels {
  std::map<std::string, std::string> function;  // by the parameter the kernel reads
  std::map<std::string, std::string> hlo;       // its instruction's name, by the same
};

Kernels KernelsByParameter(const Executable& exe) {
  Kernels out;
  for (const KernelInfo& kernel : exe.kernels()) {
    const HloInstruction* hlo =
        exe.module().entry_computation()->GetInstructionWithName(kernel.hlo_instruction);
    EXPECT_NE(hlo, nullptr) << kernel.hlo_instruction;
    if (hlo == nullptr || hlo->operands().size() != 1) continue;
    out.function[hlo->operand(0)->name()] = kernel.name;
    out.hlo[hlo->operand(0)->name()] = kernel.hlo_instruction;
  }
  return out;
}

int64_t Definitions(const std::string& ir, const std::string& function) {
  int64_t count = 0;
  for (size_t at = ir.find("define "); at != std::string::npos; at = ir.find("define ", at + 1)) {
    const size_t end = ir.find('\n', at);
    if (ir.substr(at, end - at).find("@" + function + "(") != std::string::npos) ++count;
  }
  return count;
}

TEST(CpuKernelReuseTest, IdenticalFusionsShareOneFunctionAndOthersDoNot) {
  auto module = ParseHloModule(kFourSums);
  ASSERT_TRUE(module.ok()) << module.status().message();
  CompileOptions options;
  options.keep_llvm_ir = true;
  auto exe = CompileForCpu(std::move(*module), options);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  Kernels kernels = KernelsByParameter(**exe);
  ASSERT_EQ(kernels.function.size(), 4u) << (*exe)->ThunkSequenceText();
  EXPECT_EQ(kernels.function["a"], kernels.function["b"]) << (*exe)->ThunkSequenceText();
  EXPECT_NE(kernels.hlo["a"], kernels.hlo["b"]) << "each thunk keeps its own instruction";
  EXPECT_NE(kernels.function["c"], kernels.function["a"]) << "another constant";
  EXPECT_NE(kernels.function["d"], kernels.function["a"]) << "another layout";
  EXPECT_NE(kernels.function["c"], kernels.function["d"]);
  const std::string& ir = (*exe)->llvm_ir().ir_no_opt;
  EXPECT_EQ(Definitions(ir, kernels.function["a"]), 1) << "the shared function, once";
  EXPECT_EQ(Definitions(ir, kernels.function["c"]), 1);
  EXPECT_EQ(Definitions(ir, kernels.function["d"]), 1);
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    testing::ExpectMatchesEvaluator(kFourSums, testing::RandomArguments(kFourSums, seed),
                                    {1e-5, 1e-5});
  }
}

// A kernel the planted fault names is its own: the fault stays in that one instruction, and the
// instruction identical to it runs a correct kernel of its own.
TEST(CpuKernelReuseTest, APlantedKernelIsNeitherSharedNorLent) {
  std::string a_fusion;
  {
    auto module = ParseHloModule(kFourSums);
    ASSERT_TRUE(module.ok());
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    a_fusion = KernelsByParameter(**exe).hlo["a"];
  }
  ASSERT_FALSE(a_fusion.empty());
  CompileOptions options;
  options.optimize.planted.miscompile_kernel = a_fusion;
  auto module = ParseHloModule(kFourSums);
  ASSERT_TRUE(module.ok());
  auto expected = EvaluateModule(**module, testing::RandomArguments(kFourSums));
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto exe = CompileForCpu(std::move(*module), options);
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  Kernels kernels = KernelsByParameter(**exe);
  EXPECT_NE(kernels.function["a"], kernels.function["b"]);
  auto actual = (*exe)->Execute(testing::RandomArguments(kFourSums));
  ASSERT_TRUE(actual.ok()) << actual.status().message();
  EXPECT_FALSE(ExpectLiteralNear(expected->tuple_element(0), actual->tuple_element(0), {1e-5, 1e-5}).ok())
      << "the planted kernel is wrong";
  for (int64_t i = 1; i < 4; ++i) {
    Status match = ExpectLiteralNear(expected->tuple_element(i), actual->tuple_element(i), {1e-5, 1e-5});
    EXPECT_TRUE(match.ok()) << "output " << i << ": " << match.message();
  }
}

}  // namespace
}  // namespace xlens::runtime
