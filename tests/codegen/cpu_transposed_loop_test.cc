// CPU loops that read an operand transposed (compiler/codegen/cpu/cpu_transposed_loop.cc): the
// SGD update `w - c * transpose(g)` matches the reference evaluator whatever its rows and columns
// (not multiples of the vector width, one column, tails past the last whole tile, several tasks,
// other element widths), and its kernel reads the transposed operand with whole vectors, not
// gathers.
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "compiler/codegen/cpu/cpu_jit.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/parser.h"

namespace xlens::codegen {
namespace {

// w - 3 * transpose(g) over [rows, columns] of `type`, as one loop fusion.
std::string Update(int64_t rows, int64_t columns, const std::string& type = "f32") {
  return fmt::format(R"(HloModule m
fused {{
  g = {0}[{2},{1}] parameter(0)
  t = {0}[{1},{2}] transpose(g), dimensions={{1,0}}
  w = {0}[{1},{2}] parameter(1)
  h = {0}[] constant(3)
  hb = {0}[{1},{2}] broadcast(h), dimensions={{}}
  m = {0}[{1},{2}] multiply(t, hb)
  ROOT s = {0}[{1},{2}] subtract(w, m)
}}
ENTRY e {{
  g = {0}[{2},{1}] parameter(0)
  w = {0}[{1},{2}] parameter(1)
  ROOT f = {0}[{1},{2}] fusion(g, w), kind=kLoop, calls=fused
}}
)",
                     type, rows, columns);
}

// The root's kernel, its IR after the host's optimization pipeline in `ir`.
StatusOr<KernelSpec> EmitRoot(const std::string& text, std::string* ir) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module);
  std::string verify;
  llvm::raw_string_ostream os(verify);
  if (llvm::verifyModule(llvm_module, &os)) return Error("invalid IR: " + verify);
  if (spec.ok()) {
    RETURN_IF_ERROR(OptimizeModuleForHost(llvm_module, 2));
    llvm::raw_string_ostream out(*ir);
    llvm_module.print(out, nullptr);
  }
  return spec;
}

TEST(CpuTransposedLoopTest, TheMnistUpdateReadsItsGradientWithWholeVectors) {
  // f32[784,10] from a gradient f32[10,784]: walked element by element, every gradient load
  // was a gather across its rows.
  std::string ir;
  auto spec = EmitRoot(Update(784, 10), &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 1);
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("scatter")));
  EXPECT_THAT(ir, ::testing::HasSubstr("load <8 x float>"));
  EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
}

TEST(CpuTransposedLoopTest, ALoopReadingInMemoryOrderIsLeftAlone) {
  // Without the transpose nothing is tiled: no tile buffer, no shuffles.
  const char* text = R"(HloModule m
fused {
  g = f32[784,10] parameter(0)
  w = f32[784,10] parameter(1)
  ROOT s = f32[784,10] subtract(w, g)
}
ENTRY e {
  g = f32[784,10] parameter(0)
  w = f32[784,10] parameter(1)
  ROOT f = f32[784,10] fusion(g, w), kind=kLoop, calls=fused
})";
  std::string ir;
  auto spec = EmitRoot(text, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("%tile")));
}

TEST(CpuTransposedLoopTest, MatchesTheEvaluatorOnOddShapes) {
  // Tasks of whole tiles of 64 rows, about 8192 elements each; the last task's rows past its
  // last whole tile go in strips of 8 rows, then one by one: [2003,10] is three tasks of 832
  // rows, the last with 339 (five tiles, two strips, 3 rows); [333,17] one task of five tiles,
  // a strip and 5 rows; [101,64] one of a tile, four strips and 5 rows.
  for (auto [rows, columns, tasks] : {std::tuple<int64_t, int64_t, int64_t>{784, 10, 1},
                                      {2003, 10, 3}, {6000, 1, 1}, {1900, 3, 1}, {333, 17, 1},
                                      {101, 64, 1}}) {
    SCOPED_TRACE(fmt::format("[{},{}]", rows, columns));
    std::string ir;
    auto spec = EmitRoot(Update(rows, columns), &ir);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    ASSERT_EQ(spec->phases.size(), 1u);
    EXPECT_EQ(spec->phases[0].tasks, tasks);
    EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
    testing::ExpectMatchesEvaluator(Update(rows, columns));
  }
}

TEST(CpuTransposedLoopTest, ASmallLoopIsLeftScalar) {
  // Under 64 KiB a kernel is compiled without the loop vectorizer: its scalar loop reads the
  // transposed operand as cheaply, so it is left as it was, a task per row.
  std::string ir;
  auto spec = EmitRoot(Update(256, 10), &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 256);
}

TEST(CpuTransposedLoopTest, MatchesTheEvaluatorForOtherElementWidths) {
  for (const char* type : {"f64", "bf16", "s32"}) {
    SCOPED_TRACE(type);
    testing::ExpectMatchesEvaluator(Update(1003, 17, type));
  }
}

}  // namespace
}  // namespace xlens::codegen
