// CPU loops that read an operand transposed (compiler/codegen/cpu/cpu_transposed_loop.cc): the
// SGD update `w - c * transpose(g)` matches the reference evaluator whatever its rows and columns
// (not multiples of the vector width, one column, tails past the last whole tile, several tasks,
// other element widths), and its kernel reads the transposed operand with whole vectors, not
// gathers, also where the transpose is of a value computed from parameters. And the lone transposes and layout-changing copies (compiler/codegen/cpu/
// cpu_transpose.cc): tiles of whole lines transposed in registers, or a flat copy where the
// result keeps the operand's bytes in order, matching the evaluator on every shape, layout,
// permutation and element width, streamed or not.
#include <algorithm>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

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
StatusOr<KernelSpec> EmitRoot(const std::string& text, std::string* ir, const KernelOptions& options = {}) {
  auto module = ParseHloModule(text);
  if (!module.ok()) return module.status();
  llvm::LLVMContext context;
  llvm::Module llvm_module("test", context);
  auto spec = EmitKernel(*(*module)->entry_computation()->root_instruction(), "k", llvm_module,
                         KernelTarget::kCpu, options);
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

TEST(CpuTransposedLoopTest, TheTransposedOperandIsReadInWholeLines) {
  // A strip of output rows is a cache line of the operand's elements, so that each line of the
  // operand is read once, whole: the rows of a strip lie a whole operand row apart and share L1
  // sets, and half a line left for the next strip was evicted by then. A vector of a line's
  // elements for every width, and none of half a line.
  for (auto [type, whole, half] : {std::tuple<const char*, const char*, const char*>{
                                       "f32", "load <16 x float>", "load <8 x float>"},
                                   {"f16", "load <32 x half>", "load <16 x half>"},
                                   {"f64", "load <8 x double>", "load <4 x double>"}}) {
    SCOPED_TRACE(type);
    std::string ir;
    auto spec = EmitRoot(Update(1024, 512, type), &ir);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_THAT(ir, ::testing::HasSubstr(whole));
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr(half)));
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  }
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
  // last whole tile go in strips of a line's 16 rows, then of 8, then one by one: [333,17] is
  // one task of five tiles, a strip of 8 and 5 rows; [101,64] one of a tile, two strips of 16
  // and 5 rows; [91,64] one of a tile, a strip of 16, one of 8 and 3 rows. [12,600] has fewer
  // rows than a line and under 16 columns fewer than two register blocks, so their strips are
  // of 8 rows: [2003,10] is three tasks of 832 rows, the last with 339 (five tiles, two strips,
  // 3 rows).
  for (auto [rows, columns, tasks] : {std::tuple<int64_t, int64_t, int64_t>{784, 10, 1},
                                      {2003, 10, 3}, {6000, 1, 1}, {1900, 3, 1}, {333, 17, 1},
                                      {101, 64, 1}, {91, 64, 1}, {12, 600, 1}}) {
    SCOPED_TRACE(fmt::format("[{},{}]", rows, columns));
    std::string ir;
    auto spec = EmitRoot(Update(rows, columns), &ir);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    ASSERT_EQ(spec->phases.size(), 1u);
    EXPECT_EQ(spec->phases[0].tasks, tasks);
    // Fewer columns than a register block's 8 are read as the lines are (a transposed [1, n] is
    // its own row); more are transposed in registers.
    if (columns >= 8) EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
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

TEST(CpuTransposedLoopTest, AWideUpdateIsTiledInBlocksOfColumns) {
  // f32[256,2048] from g f32[2048,256]: 16 rows of the gradient's tile would not stay in L1,
  // so tiles of 64 rows take 64 columns at a time; streamed or not, nothing gathers.
  for (int64_t threshold : {int64_t{-1}, int64_t{1}}) {
    KernelOptions options;
    options.cpu_streaming_store_bytes = threshold;
    std::string ir;
    auto spec = EmitRoot(Update(256, 2048), &ir, options);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_THAT(ir, ::testing::HasSubstr("alloca [4096 x float]"));
    EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  }
  // Columns past the last whole block (700 = 10 x 64 + 60), rows past the last tile and strip.
  runtime::CompileOptions streamed;
  streamed.cpu_streaming_store_bytes = 1;
  for (const auto& options : {runtime::CompileOptions{}, streamed}) {
    testing::ExpectMatchesEvaluator(Update(100, 700), {}, {0, 0}, options);
    testing::ExpectMatchesEvaluator(Update(77, 1030, "f64"), {}, {0, 0}, options);
  }
}

TEST(CpuTransposedLoopTest, MatchesTheEvaluatorForOtherElementWidths) {
  for (const char* type : {"f64", "bf16", "s32"}) {
    SCOPED_TRACE(type);
    testing::ExpectMatchesEvaluator(Update(1003, 17, type));
  }
}

// w - transpose(3 * g + d) over [rows, columns]: the algebraic simplifier's form of
// `w - 3 * transpose(g) - transpose(d)` (transpose(x) * c becomes transpose(x * c)), a transpose of
// a value the fusion computes from two parameters read only through it.
std::string ComputedUpdate(int64_t rows, int64_t columns, const std::string& type = "f32") {
  return fmt::format(R"(HloModule m
fused {{
  g = {0}[{2},{1}] parameter(0)
  d = {0}[{2},{1}] parameter(1)
  h = {0}[] constant(3)
  hb = {0}[{2},{1}] broadcast(h), dimensions={{}}
  m = {0}[{2},{1}] multiply(g, hb)
  a = {0}[{2},{1}] add(m, d)
  t = {0}[{1},{2}] transpose(a), dimensions={{1,0}}
  w = {0}[{1},{2}] parameter(2)
  ROOT s = {0}[{1},{2}] subtract(w, t)
}}
ENTRY e {{
  g = {0}[{2},{1}] parameter(0)
  d = {0}[{2},{1}] parameter(1)
  w = {0}[{1},{2}] parameter(2)
  ROOT f = {0}[{1},{2}] fusion(g, d, w), kind=kLoop, calls=fused
}}
)",
                     type, rows, columns);
}

TEST(CpuTransposedLoopTest, ATransposeOfAComputedValueIsTiledOnItsParameters) {
  // Walked element by element, f32[4096,2048] - transpose(0.1 * g) took 50 ms, every read of g a
  // gather; the parameters under the transpose are transposed into tiles like a lone one's.
  for (auto [rows, columns] : {std::pair<int64_t, int64_t>{784, 10}, {256, 2048}}) {
    SCOPED_TRACE(fmt::format("[{},{}]", rows, columns));
    std::string ir;
    auto spec = EmitRoot(ComputedUpdate(rows, columns), &ir);
    ASSERT_TRUE(spec.ok()) << spec.status().message();
    EXPECT_THAT(ir, ::testing::HasSubstr("%tile"));
    EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
    EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  }
  testing::ExpectMatchesEvaluator(ComputedUpdate(333, 17));
  runtime::CompileOptions streamed;
  streamed.cpu_streaming_store_bytes = 1;
  testing::ExpectMatchesEvaluator(ComputedUpdate(100, 700), {}, {0, 0}, streamed);
  testing::ExpectMatchesEvaluator(ComputedUpdate(1003, 17, "f64"));
}

TEST(CpuTransposedLoopTest, AValueReadBothTransposedAndNotIsLeftToTheElementLoop) {
  // m = 3 * g feeds the transpose and, square, the output directly: its tile would be read at
  // the wrong index by the direct use, so the loop is not tiled, and still right.
  const char* text = R"(HloModule m
fused {
  g = f32[512,512] parameter(0)
  h = f32[] constant(3)
  hb = f32[512,512] broadcast(h), dimensions={}
  m = f32[512,512] multiply(g, hb)
  t = f32[512,512] transpose(m), dimensions={1,0}
  ROOT s = f32[512,512] subtract(m, t)
}
ENTRY e {
  g = f32[512,512] parameter(0)
  ROOT f = f32[512,512] fusion(g), kind=kLoop, calls=fused
})";
  std::string ir;
  auto spec = EmitRoot(text, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("%tile")));
  testing::ExpectMatchesEvaluator(text);
}

// A lone transpose of x: `in` and `out` its shapes (with layouts), `dims` its permutation.
std::string Transpose(const std::string& in, const std::string& out, const std::string& dims) {
  return fmt::format("HloModule m\nENTRY e {{\n  x = {} parameter(0)\n  ROOT t = {} transpose(x), "
                     "dimensions={{{}}}\n}}\n",
                     in, out, dims);
}

runtime::CompileOptions Streaming() {
  runtime::CompileOptions options;
  options.cpu_streaming_store_bytes = 1;
  return options;
}

TEST(CpuTransposeTest, ALoneTransposeMovesWholeLinesTransposedInRegisters) {
  // f32[2048,64] -> [64,2048]: bands of 64 rows of the operand (32 tasks), each read as 16 x 16
  // blocks of whole lines; where the output streams, every row of a block is one non-temporal
  // line.
  const std::string text = Transpose("f32[2048,64]", "f32[64,2048]", "1,0");
  std::string ir;
  auto spec = EmitRoot(text, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  ASSERT_EQ(spec->phases.size(), 1u);
  EXPECT_EQ(spec->phases[0].tasks, 32);
  EXPECT_THAT(ir, ::testing::HasSubstr("load <16 x i32>"));
  EXPECT_THAT(ir, ::testing::HasSubstr("shufflevector"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("gather")));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("!nontemporal")));
  KernelOptions streamed;
  streamed.cpu_streaming_store_bytes = 1;
  ir.clear();
  ASSERT_TRUE(EmitRoot(text, &ir, streamed).ok());
  int nontemporal_lines = 0;
  for (size_t at = 0, end; at < ir.size(); at = end + 1) {
    end = std::min(ir.find('\n', at), ir.size());
    const std::string line = ir.substr(at, end - at);
    nontemporal_lines += line.find("store <16 x i32>") != std::string::npos &&
                         line.find("align 64, !nontemporal") != std::string::npos;
  }
  EXPECT_GE(nontemporal_lines, 16);
}

TEST(CpuTransposeTest, ATransposeThatKeepsTheBytesInOrderIsAFlatCopy) {
  // JAX's jnp.transpose(x): the result layout {0,1} makes it a bitcast in bytes.
  const std::string text = Transpose("f32[512,300]{1,0}", "f32[300,512]{0,1}", "1,0");
  std::string ir;
  auto spec = EmitRoot(text, &ir);
  ASSERT_TRUE(spec.ok()) << spec.status().message();
  EXPECT_THAT(ir, ::testing::HasSubstr("llvm.memcpy"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("shufflevector")));
  KernelOptions streamed;
  streamed.cpu_streaming_store_bytes = 1;
  ir.clear();
  ASSERT_TRUE(EmitRoot(text, &ir, streamed).ok());
  EXPECT_THAT(ir, ::testing::HasSubstr("!nontemporal"));
  EXPECT_THAT(ir, ::testing::Not(::testing::HasSubstr("llvm.memcpy")));
  // Streamed, it reads from memory: each line of the operand is prefetched 8 KiB ahead of its
  // copy, into L2 (locality 1). Past the end the prefetches are dropped, which the evaluator's
  // check below runs through.
  EXPECT_THAT(ir, ::testing::HasSubstr(", i64 8192\n  tail call void @llvm.prefetch.p0(ptr %"));
  EXPECT_THAT(ir, ::testing::HasSubstr(", i32 0, i32 1, i32 1)"));
  for (const auto& options : {runtime::CompileOptions{}, Streaming()}) {
    testing::ExpectMatchesEvaluator(text, {}, {0, 0}, options);
    // A copy to the same order, a degenerate dimension moved.
    testing::ExpectMatchesEvaluator(Transpose("f32[7,1,3001]", "f32[1,7,3001]", "1,0,2"), {}, {0, 0}, options);
  }
}

TEST(CpuTransposeTest, MatchesTheEvaluatorOnEveryShapeAndLayout) {
  // Rows and columns no multiple of the 16 lanes (the columns past the last block, the band's
  // rows past its last), bands cut short at the end, batch dimensions outside and between the
  // two that swap, a layout-changing copy, and 8- and 2-byte elements (8 and 32 lanes).
  const std::vector<std::tuple<std::string, std::string, std::string>> cases = {
      {"f32[301,517]", "f32[517,301]", "1,0"},
      {"f32[64,64]", "f32[64,64]", "1,0"},
      {"f32[16,16]", "f32[16,16]", "1,0"},
      {"f32[17,200]", "f32[200,17]", "1,0"},
      {"f32[3,40,50]", "f32[3,50,40]", "0,2,1"},
      {"f32[40,3,50]", "f32[50,3,40]", "2,1,0"},
      {"f32[5,24,36]", "f32[36,5,24]", "2,0,1"},
      {"f32[6,5,40,33]", "f32[33,5,6,40]", "3,1,0,2"},
      {"f64[129,67]", "f64[67,129]", "1,0"},
      {"c64[40,20]", "c64[20,40]", "1,0"},
      {"bf16[100,70]", "bf16[70,100]", "1,0"},
      {"s32[3,50,40]", "s32[40,50,3]", "2,1,0"},
  };
  for (const auto& options : {runtime::CompileOptions{}, Streaming()}) {
    for (const auto& [in, out, dims] : cases) {
      SCOPED_TRACE(in + " -> " + out);
      testing::ExpectMatchesEvaluator(Transpose(in, out, dims), {}, {0, 0}, options);
    }
    const std::string copy = R"(HloModule m
ENTRY e {
  x = f32[129,67]{1,0} parameter(0)
  ROOT c = f32[129,67]{0,1} copy(x)
})";
    testing::ExpectMatchesEvaluator(copy, {}, {0, 0}, options);
  }
}

}  // namespace
}  // namespace xlens::codegen
