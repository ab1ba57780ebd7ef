// Streaming stores of CPU element loops (compiler/codegen/cpu/cpu_streaming_store.cc): which loops
// write their outputs through them, and that what they write matches the reference evaluator at
// every alignment a task's stretch can start and end on (rows whose bytes are no multiple of 64,
// rows split into several tasks, stretches shorter than a line), for every element width, for
// several outputs of one loop and for a non-default layout; and the same for the row kernels'
// per-element outputs (layer norm, RMS norm with its residual sum), written a row at a time.
#include "compiler/codegen/cpu/cpu_streaming_store.h"

#include <regex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <gtest/gtest.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/raw_ostream.h>

#include "codegen_test_util.h"
#include "fused_kernel_test_util.h"
#include "compiler/codegen/kernel_emitter.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/parser.h"
#include "compiler/passes/buffer_assignment.h"

namespace xlens::codegen {
namespace {

using testing::IrOfRoot;
using testing::Count;

// b + 3 c over `shape` (an array shape in HLO text).
std::string Triad(const std::string& shape) {
  return "HloModule triad\nENTRY e {\n  b = " + shape + " parameter(0)\n  c = " + shape +
         " parameter(1)\n  three = f32[] constant(3)\n  t = " + shape +
         " broadcast(three), dimensions={}\n  m = " + shape + " multiply(c, t)\n  ROOT a = " +
         shape + " add(b, m)\n}\n";
}

runtime::CompileOptions Streaming(int64_t threshold = 1) {
  runtime::CompileOptions options;
  options.cpu_streaming_store_bytes = threshold;
  return options;
}

TEST(CpuStreamingStoreTest, LoopsWritingAtLeastTheThresholdStream) {
  const std::string text = Triad("f32[1024,256]");  // 1 MiB of output
  const std::string streamed = IrOfRoot(text, 1 << 20);
  EXPECT_GT(Count(streamed, "!nontemporal"), 0);
  EXPECT_EQ(Count(streamed, "llvm.x86.sse.sfence"), cpu::HasStreamingStores() ? 2 : 0);  // call, declaration
  EXPECT_EQ(Count(IrOfRoot(text, (1 << 20) + 1), "!nontemporal"), 0);
  EXPECT_EQ(Count(IrOfRoot(text, 0), "!nontemporal"), 0);
}

// exp(transpose(-x)) as one loop fusion: x and the result in the layouts given.
std::string ExpOfTranspose(const std::string& x, const std::string& result,
                           const std::string& dimensions = "1,0") {
  return fmt::format(R"(HloModule m
fused {{
  x = {0} parameter(0)
  n = {0} negate(x)
  t = {1} transpose(n), dimensions={{{2}}}
  ROOT e = {1} exponential(t)
}}
ENTRY e {{
  x = {0} parameter(0)
  ROOT f = {1} fusion(x), kind=kLoop, calls=fused
}})", x, result, dimensions);
}

TEST(CpuStreamingStoreTest, StretchesAreLongerWhereTheLoopReadsThroughATranspose) {
  EXPECT_NE(IrOfRoot(Triad("f32[64,1024]"), 1).find("alloca [128 x float]"), std::string::npos);
  // (A 2-D transpose of values computed elementwise is tiled instead: cpu_transposed_loop.cc.)
  EXPECT_NE(IrOfRoot(ExpOfTranspose("f32[16,1024,64]{2,1,0}", "f32[16,64,1024]{2,1,0}", "0,2,1"), 1)
                .find("alloca [1024 x float]"),
            std::string::npos);
  // A transpose whose result layout makes it a bitcast reads in memory order.
  EXPECT_NE(IrOfRoot(ExpOfTranspose("f32[64,1024]{1,0}", "f32[1024,64]{0,1}"), 1).find("alloca [128 x float]"),
            std::string::npos);
}

TEST(CpuStreamingStoreTest, DefaultThresholdIsHalfTheLastLevelCache) {
  if (!cpu::HasStreamingStores()) GTEST_SKIP() << "no streaming stores on this target";
  EXPECT_GE(cpu::DefaultStreamingStoreBytes(), int64_t{1} << 20);
  // A small loop never streams by default.
  EXPECT_EQ(Count(IrOfRoot(Triad("f32[1000]"), -1), "!nontemporal"), 0);
}

TEST(CpuStreamingStoreTest, ThresholdByWhereTheOutputGoes) {
  if (!cpu::HasStreamingStores()) GTEST_SKIP() << "no streaming stores on this target";
  const int64_t half = cpu::DefaultStreamingStoreBytes();  // bytes: half the cache
  // Arrays of 2, 1/2 and 1/4 of the cache. e's buffer is fresh and read by the next op; n is
  // written over e's buffer (e dies at it); r, u and v are returned, u with its operand less
  // than the cache, v as large as it; inside the loop body the assignment knows nothing.
  auto module = ParseHloModule(fmt::format(R"(HloModule m
body {{
  p = f32[64] parameter(0)
  ROOT q = f32[64] negate(p)
}}
cond {{
  p = f32[64] parameter(0)
  ROOT t = pred[] constant(false)
}}
ENTRY e {{
  x = {0} parameter(0)
  y = {0} parameter(1)
  s = f32[64] parameter(2)
  x1 = {1} parameter(3)
  x2 = {2} parameter(4)
  e = {0} exponential(x)
  n = {0} negate(e)
  w = f32[64] while(s), condition=cond, body=body
  a = {0} add(n, y)
  r = {0} multiply(x, y)
  u = {2} negate(x2)
  v = {1} negate(x1)
  ROOT t = ({0}, {0}, f32[64], {2}, {1}) tuple(a, r, w, u, v)
}})", fmt::format("f32[{}]", half), fmt::format("f32[{}]", half / 4),
                                                 fmt::format("f32[{}]", half / 8)));
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto assignment = AssignBuffers(**module);
  ASSERT_TRUE(assignment.ok()) << assignment.status().message();
  const HloComputation& entry = *(*module)->entry_computation();
  auto bytes_for = [&](const char* name) {
    return cpu::StreamingStoreBytesFor(*entry.GetInstructionWithName(name), &*assignment);
  };
  auto n = assignment->GetSlice(*entry.GetInstructionWithName("n"));
  auto e = assignment->GetSlice(*entry.GetInstructionWithName("e"));
  ASSERT_TRUE(n.ok() && e.ok());
  EXPECT_EQ(bytes_for("e"), 2 * half);
  ASSERT_EQ(n->allocation, e->allocation);  // in place
  EXPECT_EQ(bytes_for("n"), 0);
  EXPECT_EQ(bytes_for("r"), half);
  EXPECT_EQ(bytes_for("u"), 0);
  EXPECT_EQ(bytes_for("v"), half);
  const HloInstruction* q = entry.GetInstructionWithName("w")->while_body()->root_instruction();
  EXPECT_EQ(cpu::StreamingStoreBytesFor(*q, &*assignment), 0);
  EXPECT_EQ(cpu::StreamingStoreBytesFor(*entry.GetInstructionWithName("r"), nullptr), 0);
}

TEST(CpuStreamingStoreTest, MultiOutputFusionReturnedThroughGetTupleElements) {
  if (!cpu::HasStreamingStores()) GTEST_SKIP() << "no streaming stores on this target";
  const int64_t half = cpu::DefaultStreamingStoreBytes();
  // Three multi-output fusions of arrays of half the cache each (batch norm's y and dx): f's
  // results reach the root only through get-tuple-elements, so the module returns them; g's
  // second result is also read by h; k's large results are returned, and only its small one
  // (batch norm's per-channel sums) is read by another kernel, l.
  auto module = ParseHloModule(fmt::format(R"(HloModule m
pair {{
  a = {0} parameter(0)
  b = {0} parameter(1)
  s = {0} add(a, b)
  d = {0} subtract(a, b)
  ROOT t = ({0}, {0}) tuple(s, d)
}}
sum {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
triple {{
  a = {0} parameter(0)
  b = {0} parameter(1)
  s = {0} add(a, b)
  d = {0} subtract(a, b)
  z = f32[] constant(0)
  r = f32[128] reduce(a, z), dimensions={{0}}, to_apply=sum
  ROOT t = ({0}, {0}, f32[128]) tuple(s, d, r)
}}
ENTRY e {{
  x = {0} parameter(0)
  y = {0} parameter(1)
  f = ({0}, {0}) fusion(x, y), kind=kLoop, calls=pair
  g = ({0}, {0}) fusion(x, y), kind=kLoop, calls=pair
  k = ({0}, {0}, f32[128]) fusion(x, y), kind=kInput, calls=triple
  f0 = {0} get-tuple-element(f), index=0
  f1 = {0} get-tuple-element(f), index=1
  g0 = {0} get-tuple-element(g), index=0
  g1 = {0} get-tuple-element(g), index=1
  h = {0} negate(g1)
  k0 = {0} get-tuple-element(k), index=0
  k1 = {0} get-tuple-element(k), index=1
  k2 = f32[128] get-tuple-element(k), index=2
  l = f32[128] negate(k2)
  ROOT t = ({0}, {0}, {0}, {0}, {0}, {0}, f32[128]) tuple(f0, f1, g0, h, k0, k1, l)
}})", fmt::format("f32[{},128]", half / 512)));
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto assignment = AssignBuffers(**module);
  ASSERT_TRUE(assignment.ok()) << assignment.status().message();
  const HloComputation& entry = *(*module)->entry_computation();
  EXPECT_EQ(cpu::StreamingStoreBytesFor(*entry.GetInstructionWithName("f"), &*assignment), half);
  EXPECT_EQ(cpu::StreamingStoreBytesFor(*entry.GetInstructionWithName("g"), &*assignment),
            2 * half);
  EXPECT_EQ(cpu::StreamingStoreBytesFor(*entry.GetInstructionWithName("k"), &*assignment), half);
}

TEST(CpuStreamingStoreTest, TriadMatchesTheEvaluatorAtEveryAlignment) {
  // A row of 1001 floats starts 4 bytes further off a line each row; 20001 floats split a row
  // into three tasks and each task into stretches; 7 floats are all head and tail.
  for (const char* shape : {"f32[37,1001]", "f32[3,20001]", "f32[5,7]", "f32[100003]", "f32[64,64]"}) {
    SCOPED_TRACE(shape);
    testing::ExpectMatchesEvaluator(Triad(shape), {}, {0, 0}, Streaming());
  }
}

// A loop fusion over f32[64,1024] of x, y (f32[64,1024]) and b (f32[1024]): `body` its lines after
// the parameters, its root last.
std::string LoopOverXYB(const std::string& body) {
  return fmt::format(R"(HloModule m
fused {{
  x = f32[64,1024] parameter(0)
  y = f32[64,1024] parameter(1)
  b = f32[1024] parameter(2)
{0}
}}
ENTRY e {{
  x = f32[64,1024] parameter(0)
  y = f32[64,1024] parameter(1)
  b = f32[1024] parameter(2)
  ROOT f = f32[64,1024] fusion(x, y, b), kind=kLoop, calls=fused
}})", body);
}

TEST(CpuStreamingStoreTest, StreamedLoopPrefetchesWhatItReadsInPlace) {
  if (!cpu::HasStreamingStores()) GTEST_SKIP() << "no streaming stores on this target";
  // Each operand read at the element written, every line of a 512-byte stretch 8 KiB ahead (the
  // address is the stretch's first byte plus the distance plus the line's offset).
  const std::string chain = LoopOverXYB(R"(
  a = f32[64,1024] multiply(x, y)
  s = f32[64,1024] add(a, x)
  d = f32[64,1024] maximum(s, x)
  m = f32[64,1024] minimum(d, y)
  ROOT n = f32[64,1024] negate(m))");
  const std::string streamed = IrOfRoot(chain, 1);
  EXPECT_EQ(Count(streamed, "call void @llvm.prefetch"), 2 * 8);
  static const std::regex distance(R"(add i64 %[\w.]+, 8192\n)");
  EXPECT_EQ(std::distance(std::sregex_iterator(streamed.begin(), streamed.end(), distance), std::sregex_iterator()), 2);
  // Loops whose outputs stay in the cache prefetch nothing.
  EXPECT_EQ(Count(IrOfRoot(chain, 0), "call void @llvm.prefetch"), 0);
  // x only where b is broadcast along the rows (one row's worth read by every row) and where y is
  // read reversed; neither where both are read through a concatenation and a slice of it, at
  // other elements than the one written.
  EXPECT_EQ(Count(IrOfRoot(LoopOverXYB(R"(
  bb = f32[64,1024] broadcast(b), dimensions={1}
  ROOT r = f32[64,1024] add(x, bb))"), 1), "call void @llvm.prefetch"), 8);
  EXPECT_EQ(Count(IrOfRoot(LoopOverXYB(R"(
  v = f32[64,1024] reverse(y), dimensions={1}
  ROOT r = f32[64,1024] add(x, v))"), 1), "call void @llvm.prefetch"), 8);
  EXPECT_EQ(Count(IrOfRoot(LoopOverXYB(R"(
  n = f32[64,1024] negate(y)
  c = f32[128,1024] concatenate(n, x), dimensions={0}
  l = f32[64,1024] slice(c), slice={[64:128], [0:1024]}
  ROOT r = f32[64,1024] add(x, l))"), 1), "call void @llvm.prefetch"), 0);
  // A loop reading more than kMaxPrefetchedStreams operands in place prefetches none.
  EXPECT_EQ(Count(IrOfRoot(R"(HloModule m
fused {
  a = f32[64,1024] parameter(0)
  b = f32[64,1024] parameter(1)
  c = f32[64,1024] parameter(2)
  d = f32[64,1024] parameter(3)
  ab = f32[64,1024] add(a, b)
  cd = f32[64,1024] multiply(c, d)
  ROOT r = f32[64,1024] add(ab, cd)
}
ENTRY e {
  a = f32[64,1024] parameter(0)
  b = f32[64,1024] parameter(1)
  c = f32[64,1024] parameter(2)
  d = f32[64,1024] parameter(3)
  ROOT f = f32[64,1024] fusion(a, b, c, d), kind=kLoop, calls=fused
})", 1), "call void @llvm.prefetch"), 0);
  // The last stretches prefetch past the arrays' ends, which must not fault.
  testing::ExpectMatchesEvaluator(chain, {}, {0, 0}, Streaming());
}

// Batch norm's shape of kernel: sums over the rows of x, then two outputs of x's shape that read
// x and y again with them.
std::string CenteredPair(const std::string& shape) {
  return fmt::format(R"(HloModule m
add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}}
fused {{
  x = {0} parameter(0)
  y = {0} parameter(1)
  z = f32[] constant(0)
  s = f32[{1}] reduce(x, z), dimensions={{0}}, to_apply=add
  sb = {0} broadcast(s), dimensions={{1}}
  a = {0} add(y, sb)
  d = {0} subtract(x, sb)
  ROOT t = ({0}, {0}) tuple(a, d)
}}
ENTRY e {{
  x = {0} parameter(0)
  y = {0} parameter(1)
  ROOT f = ({0}, {0}) fusion(x, y), kind=kInput, calls=fused
}})", shape, shape.substr(shape.find(',') + 1, shape.find(']') - shape.find(',') - 1));
}

TEST(CpuStreamingStoreTest, LoopsRereadingWhatTheyReducedStreamEachLineFromRegisters) {
  // After the sums, rows of 128 floats: each line of each output is one vector, stored from the
  // registers that compute it with one aligned non-temporal store. Rows of 1001 floats, and
  // loops that read from memory (b + 3c) take the stretches, whose copy stores lines as
  // <16 x i32>.
  auto line_stores = [](const std::string& ir) {
    int n = 0;
    for (size_t at = ir.find("store <16 x float>"); at != std::string::npos;
         at = ir.find("store <16 x float>", at + 1)) {
      n += ir.substr(at, ir.find('\n', at) - at).find("align 64, !nontemporal") != std::string::npos;
    }
    return n;
  };
  EXPECT_GE(line_stores(IrOfRoot(CenteredPair("f32[96,128]"), 1)), 2);
  EXPECT_EQ(line_stores(IrOfRoot(CenteredPair("f32[37,1001]"), 1)), 0);
  EXPECT_EQ(line_stores(IrOfRoot(Triad("f32[64,1024]"), 1)), 0);
  // Rows of 128 floats, of one line (several rows a task), and of 1001 floats.
  for (const char* shape : {"f32[96,128]", "f32[300,16]", "f32[37,1001]"}) {
    SCOPED_TRACE(shape);
    testing::ExpectMatchesEvaluator(CenteredPair(shape), {}, {1e-5, 1e-5}, Streaming());
  }
}

TEST(CpuStreamingStoreTest, EveryElementWidth) {
  for (const char* type : {"f64", "bf16", "s8", "f16", "s32"}) {
    SCOPED_TRACE(type);
    const std::string t = type;
    const std::string text = "HloModule m\nENTRY e {\n  x = " + t + "[9,517] parameter(0)\n  y = " +
                             t + "[9,517] parameter(1)\n  ROOT z = " + t + "[9,517] maximum(x, y)\n}\n";
    EXPECT_GT(Count(IrOfRoot(text, 1), "!nontemporal"), 0);
    testing::ExpectMatchesEvaluator(text, {}, {0, 0}, Streaming());
  }
  const std::string compare = R"(HloModule m
ENTRY e {
  x = f32[3,1999] parameter(0)
  y = f32[3,1999] parameter(1)
  ROOT z = pred[3,1999] compare(x, y), direction=LT
})";
  testing::ExpectMatchesEvaluator(compare, {}, {0, 0}, Streaming());
  const std::string complex = R"(HloModule m
ENTRY e {
  x = f32[7,333] parameter(0)
  y = f32[7,333] parameter(1)
  ROOT z = c64[7,333] complex(x, y)
})";
  testing::ExpectMatchesEvaluator(complex, {}, {0, 0}, Streaming());
}

TEST(CpuStreamingStoreTest, SeveralOutputsOfOneLoopAndATransposedLayout) {
  const std::string multi = R"(HloModule m
fused {
  x = f32[13,2050] parameter(0)
  y = f32[13,2050] parameter(1)
  s = f32[13,2050] add(x, y)
  d = f64[13,2050] convert(s)
  ROOT t = (f32[13,2050], f64[13,2050]) tuple(s, d)
}
ENTRY e {
  x = f32[13,2050] parameter(0)
  y = f32[13,2050] parameter(1)
  ROOT f = (f32[13,2050], f64[13,2050]) fusion(x, y), kind=kLoop, calls=fused
})";
  EXPECT_GT(Count(IrOfRoot(multi, 1), "!nontemporal"), 0);
  testing::ExpectMatchesEvaluator(multi, {}, {0, 0}, Streaming());
  const std::string transpose = R"(HloModule m
ENTRY e {
  x = f32[301,517] parameter(0)
  ROOT t = f32[517,301] transpose(x), dimensions={1,0}
})";
  testing::ExpectMatchesEvaluator(transpose, {}, {0, 0}, Streaming());
  const std::string layout = R"(HloModule m
ENTRY e {
  x = f32[129,67]{0,1} parameter(0)
  y = f32[129,67]{0,1} parameter(1)
  ROOT z = f32[129,67]{0,1} subtract(x, y)
})";
  testing::ExpectMatchesEvaluator(layout, {}, {0, 0}, Streaming());
}

TEST(CpuStreamingStoreTest, AnOutputWrittenOverItsOperandStillReadsTheOperand) {
  // The exponential's buffer dies at the add, which may be written over it in place.
  const std::string text = R"(HloModule m
ENTRY e {
  x = f32[17,3001] parameter(0)
  y = f32[17,3001] parameter(1)
  e = f32[17,3001] exponential(x)
  n = f32[17,3001] negate(e)
  ROOT a = f32[17,3001] add(n, y)
})";
  runtime::CompileOptions options = Streaming();
  options.optimize.filter.disabled = {"fusion"};
  testing::ExpectMatchesEvaluator(text, {}, {1e-6, 1e-6}, options);
}

constexpr const char* kAdd = R"(
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
)";

// The constant bytes each prefetch of a row kernel's unoptimized IR adds to its element's offset
// (its distance ahead), in order: the add before the line's own offset and the address.
std::vector<int64_t> PrefetchDistances(const std::string& ir) {
  static const std::regex prefetch(R"(add i64 %[\w.]+, (\d+)\n\s*%[\w.]+ = add i64 [^\n]+\n)"
                                   R"(\s*%[\w.]+ = getelementptr i8, ptr [^\n]+\n\s*call void @llvm\.prefetch)");
  std::vector<int64_t> distances;
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), prefetch); it != std::sregex_iterator(); ++it) {
    distances.push_back(std::stoll((*it)[1]));
  }
  return distances;
}

// RMS norm of x + r over rows of `n` floats, with the sum as a second output.
std::string RmsNormResidual(int64_t rows, int64_t n) {
  const std::string x = fmt::format("f32[{},{}]", rows, n), row = fmt::format("f32[{}]", rows);
  return testing::InInputFusion(kAdd, fmt::format(R"(
  x = {0} parameter(0)
  r = {0} parameter(1)
  g = f32[{2}] parameter(2)
  h = {0} add(x, r)
  sq = {0} multiply(h, h)
  z = f32[] constant(0)
  ss = {1} reduce(sq, z), dimensions={{1}}, to_apply=add
  inv_n = f32[] constant({3})
  ib = {1} broadcast(inv_n), dimensions={{}}
  ms = {1} multiply(ss, ib)
  eps = f32[] constant(1e-6)
  eb = {1} broadcast(eps), dimensions={{}}
  me = {1} add(ms, eb)
  rs = {1} rsqrt(me)
  rb = {0} broadcast(rs), dimensions={{0}}
  gb = {0} broadcast(g), dimensions={{1}}
  hn = {0} multiply(h, rb)
  y = {0} multiply(hn, gb)
  ROOT t = ({0}, {0}) tuple(h, y)
)", x, row, n, 1.0 / static_cast<double>(n)));
}

TEST(CpuStreamingStoreTest, RowKernelOutputsStreamARowAtATime) {
  const std::string text = RmsNormResidual(64, 1024);
  const std::string streamed = IrOfRoot(text, 1);
  EXPECT_GT(Count(streamed, "!nontemporal"), 0);
  EXPECT_NE(streamed.find("row.stage"), std::string::npos);
  EXPECT_EQ(Count(IrOfRoot(text, 0), "!nontemporal"), 0);
  // Rows of 1024, 1001 (each row 4 bytes further off a line) and 5 floats (head and tail only).
  for (auto [rows, n] : {std::pair<int64_t, int64_t>{64, 1024}, {37, 1001}, {9, 5}}) {
    SCOPED_TRACE(n);
    testing::ExpectMatchesEvaluator(RmsNormResidual(rows, n), {}, {1e-5, 1e-5}, Streaming());
  }
}

TEST(CpuStreamingStoreTest, RowsOfWholeLinesStreamEachLineFromRegisters) {
  // Rows of 1024 floats: each line of each output is one vector stored with one aligned
  // non-temporal store, the line's stack buffer gone once LLVM has optimized it; rows of 1001
  // floats (and rows whose outputs start off a line) take the stretches through the row's buffer.
  const std::string lines = IrOfRoot(RmsNormResidual(64, 1024), 1);
  EXPECT_NE(lines.find("row.line.stage"), std::string::npos);
  // Every vector store but the one starting the next row's partial sums at -0 writes a line.
  int line_stores = 0;
  for (size_t at = lines.find("store <16 x float>"); at != std::string::npos;
       at = lines.find("store <16 x float>", at + 1)) {
    const std::string store = lines.substr(at, lines.find('\n', at) - at);
    if (store.find("%row.next_lanes") != std::string::npos) continue;
    ++line_stores;
    EXPECT_NE(store.find("align 64, !nontemporal"), std::string::npos) << store;
  }
  EXPECT_EQ(line_stores, 2);
  const std::string stretches = IrOfRoot(RmsNormResidual(37, 1001), 1);
  EXPECT_EQ(stretches.find("row.line.stage"), std::string::npos);
  EXPECT_EQ(Count(stretches, "store <16 x float>"), 0);
  testing::ExpectMatchesEvaluator(RmsNormResidual(16, 1024), {}, {1e-5, 1e-5}, Streaming());
}

TEST(CpuStreamingStoreTest, StreamedRowKernelPrefetchesWhatItReadsAlongTheRows) {
  // x and r, read along the rows; not g, one row's worth read by every row. Rows of whole lines
  // prefetch in the line loop and in the stretches.
  const std::string text = RmsNormResidual(64, 1024);
  EXPECT_EQ(Count(IrOfRoot(text, 1), "call void @llvm.prefetch"), 4);
  EXPECT_EQ(Count(IrOfRoot(RmsNormResidual(64, 1001), 1), "call void @llvm.prefetch"), 2);
  EXPECT_EQ(Count(IrOfRoot(text, 0), "call void @llvm.prefetch"), 0);
  // The operands share the distance ahead of the next row, which the output loop reads for its
  // sum: x and r 4 KiB each past it (8 KiB, two rows of 1024 floats, past this row), a lone
  // operand 8 KiB (12 KiB).
  EXPECT_EQ(PrefetchDistances(IrOfRoot(text, 1)), std::vector<int64_t>(4, 8192));
  const std::string centred = testing::InInputFusion(kAdd, R"(
  x = f32[64,1024] parameter(0)
  z = f32[] constant(0)
  s = f32[64] reduce(x, z), dimensions={1}, to_apply=add
  k = f32[] constant(0.0009765625)
  kb = f32[64] broadcast(k), dimensions={}
  m = f32[64] multiply(s, kb)
  mb = f32[64,1024] broadcast(m), dimensions={0}
  ROOT y = f32[64,1024] subtract(x, mb)
)");
  EXPECT_EQ(PrefetchDistances(IrOfRoot(centred, 1)), std::vector<int64_t>(2, 12288));
  // The last rows prefetch past the arrays' ends, which must not fault.
  testing::ExpectMatchesEvaluator(RmsNormResidual(3, 1001), {}, {1e-5, 1e-5}, Streaming());
  testing::ExpectMatchesEvaluator(centred, {}, {1e-5, 1e-5}, Streaming());
}

// The text of the basic block `label` of `ir`, up to the blank line after it.
std::string Block(const std::string& ir, const std::string& label) {
  const size_t at = ir.find("\n" + label + ":");
  if (at == std::string::npos) return "";
  return ir.substr(at + 1, ir.find("\n\n", at + 1) - at - 1);
}

TEST(CpuStreamingStoreTest, StreamedRowKernelTakesTheNextRowsSumInItsOutputLoop) {
  if (!cpu::HasStreamingStores()) GTEST_SKIP() << "no streaming stores on this target";
  // The RMS norm's sum of squares: no pass over the row before its outputs (the row's block goes
  // straight to the output loops), the next row's sum taken in the line loop as a line of
  // partial sums, and in the stretches as one; the task's first row alone has a pass of its own.
  const std::string ir = IrOfRoot(RmsNormResidual(64, 1024), 1);
  const std::string row = Block(ir, "row.body");
  ASSERT_FALSE(row.empty()) << ir;
  EXPECT_EQ(row.find("label %row.element.header"), std::string::npos) << row;
  EXPECT_NE(row.find("label %row.lines.then"), std::string::npos) << row;
  EXPECT_NE(Block(ir, "row.line.element.body").find("%row.next_lanes"), std::string::npos) << ir;
  EXPECT_NE(Block(ir, "row.first.then").find("label %row.element.header"), std::string::npos) << ir;
  // Not where the outputs are written with plain stores: the sum is a pass of its own.
  EXPECT_EQ(IrOfRoot(RmsNormResidual(64, 1024), 0).find("row.next"), std::string::npos);
  // Rows of whole lines and not (stretches), a task's last row (whose next row is its own), one
  // row, and a row's sum returned beside the outputs, from a nonzero initial value (added once
  // though the line loop's partial sums start from zero); integers exactly.
  for (auto [rows, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1024}, {2, 1024}, {129, 1024}, {33, 1001}, {5, 16}, {7, 5}}) {
    SCOPED_TRACE(fmt::format("{}x{}", rows, n));
    testing::ExpectMatchesEvaluator(RmsNormResidual(rows, n), {}, {1e-5, 1e-5}, Streaming());
    for (const char* type : {"f32", "s32"}) {
      const std::string with_sum = testing::InInputFusion(fmt::format(R"(
add {{
  a = {0}[] parameter(0)
  b = {0}[] parameter(1)
  ROOT s = {0}[] add(a, b)
}})", type), fmt::format(R"(
  x = {0}[{1},{2}] parameter(0)
  c = {0}[] constant(3)
  s = {0}[{1}] reduce(x, c), dimensions={{1}}, to_apply=add
  sb = {0}[{1},{2}] broadcast(s), dimensions={{0}}
  y = {0}[{1},{2}] subtract(x, sb)
  ROOT t = ({0}[{1},{2}], {0}[{1}]) tuple(y, s)
)", type, rows, n));
      EXPECT_NE(IrOfRoot(with_sum, 1).find("row.next_sum"), std::string::npos) << type;
      testing::ExpectMatchesEvaluator(with_sum, {}, {1e-4, 1e-5}, Streaming());
    }
  }
  // Not over bf16, which is stored as 16-bit integers and summed widened: a line of partial sums
  // in the storage type was a sum of the integers.
  const std::string bf16 = testing::InInputFusion(R"(
add {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT s = bf16[] add(a, b)
})", R"(
  x = bf16[33,1024] parameter(0)
  c = bf16[] constant(0)
  s = bf16[33] reduce(x, c), dimensions={1}, to_apply=add
  sb = bf16[33,1024] broadcast(s), dimensions={0}
  ROOT y = bf16[33,1024] subtract(x, sb)
)");
  EXPECT_EQ(IrOfRoot(bf16, 1).find("row.next"), std::string::npos);
  testing::ExpectMatchesEvaluator(bf16, {}, {0, 0}, Streaming());
}

TEST(CpuStreamingStoreTest, RowKernelOverTwoReducedDimensionsStreamsWholeRows) {
  const std::string text = testing::InInputFusion(kAdd, R"(
  x = f32[6,33,40] parameter(0)
  z = f32[] constant(0)
  s = f32[6] reduce(x, z), dimensions={1,2}, to_apply=add
  k = f32[] constant(0.000757576)
  kb = f32[6] broadcast(k), dimensions={}
  m = f32[6] multiply(s, kb)
  mb = f32[6,33,40] broadcast(m), dimensions={0}
  ROOT y = f32[6,33,40] subtract(x, mb)
)");
  EXPECT_GT(Count(IrOfRoot(text, 1), "!nontemporal"), 0);
  testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5}, Streaming());
}

TEST(CpuStreamingStoreTest, LongRowsStreamAStretchAtATime) {
  // 8192 floats a row for two outputs (64 KiB of rows): each output's stack buffer holds one
  // stretch (512 bytes), which every stretch of the row reuses, whatever the row's length.
  const std::string ir = IrOfRoot(RmsNormResidual(2, 8192), 1);
  EXPECT_GT(Count(ir, "!nontemporal"), 0);
  EXPECT_EQ(Count(ir, "row.stage = alloca [128 x float]"), 1);
  EXPECT_EQ(Count(ir, "row.stage1 = alloca [128 x float]"), 1);
  EXPECT_EQ(Count(ir, "alloca [8192 x float]"), 0);
  // Rows of whole lines, and rows of 8195 floats (each row 12 bytes further off a line, its
  // stretches through the buffers).
  testing::ExpectMatchesEvaluator(RmsNormResidual(2, 8192), {}, {1e-5, 1e-5}, Streaming());
  testing::ExpectMatchesEvaluator(RmsNormResidual(3, 8195), {}, {1e-5, 1e-5}, Streaming());
}

TEST(CpuStreamingStoreTest, RowsOverSeveralDimensionsLongerThanTheStageAreNotStreamed) {
  // A row over two dimensions is streamed out whole once computed: 128 x 129 floats, 64.5 KiB of
  // stack buffer, past what stays in L1.
  const std::string text = testing::InInputFusion(kAdd, R"(
  x = f32[2,128,129] parameter(0)
  z = f32[] constant(0)
  s = f32[2] reduce(x, z), dimensions={1,2}, to_apply=add
  mb = f32[2,128,129] broadcast(s), dimensions={0}
  ROOT y = f32[2,128,129] subtract(x, mb)
)");
  EXPECT_EQ(Count(IrOfRoot(text, 1), "!nontemporal"), 0);
  testing::ExpectMatchesEvaluator(text, {}, {1e-4, 1e-4}, Streaming());
}

}  // namespace
}  // namespace xlens::codegen
