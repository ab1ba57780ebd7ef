// The GPU emitters of compiler/codegen/gpu (vectorised loops, warp and block row reductions,
// column reductions, tiled transposes, the tiled GEMM with its epilogue): for shapes at their
// edges (rows not a multiple of the warp, tiny and long rows, odd GEMM sizes, non-square
// transposes, multi-output and variadic reductions) each kernel has the launch shape and the
// instructions it is meant to have, ptxas accepts its PTX, and where a GPU device is at hand it
// computes what the evaluator computes, as do the one-thread-per-element emitters kept behind
// --xla_gpu_xlens_naive_emitters.
#include <unistd.h>

#include <chrono>
#include <iostream>

#include <filesystem>
#include <fstream>
#include <random>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/gpu_compiler.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_device.h"
#include "gpu_memory_counts.h"
#include "gpu_test_device.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

struct Case;
void PrintTo(const Case& c, std::ostream* os);

struct Case {
  std::string name;
  std::string hlo;
  int kernels;          // launches of the tuned emitters
  int64_t blocks;       // of the first launch; -1: not checked
  int64_t threads;      // of the first launch
  std::vector<std::string> ptx;  // what the tuned PTX contains
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

const char* kReducers = R"(
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
addi { a = s32[] parameter(0)  b = s32[] parameter(1)  ROOT r = s32[] add(a, b) }
and { a = pred[] parameter(0)  b = pred[] parameter(1)  ROOT r = pred[] and(a, b) }
argmax {
  a = f32[] parameter(0)  i = s32[] parameter(1)  b = f32[] parameter(2)  j = s32[] parameter(3)
  gt = pred[] compare(a, b), direction=GT
  eq = pred[] compare(a, b), direction=EQ
  lt = pred[] compare(i, j), direction=LT
  tie = pred[] and(eq, lt)
  keep = pred[] or(gt, tie)
  v = f32[] select(keep, a, b)
  k = s32[] select(keep, i, j)
  ROOT t = (f32[], s32[]) tuple(v, k)
}
)";

std::string Module(const std::string& name, const std::string& entry) {
  return "HloModule " + name + "\n" + kReducers + "ENTRY main {\n" + entry + "\n}\n";
}

std::string RowReduce(int64_t rows, int64_t length) {
  return Module("row_reduce", fmt::format(
      "x = f32[{0},{1}] parameter(0)\n z = f32[] constant(0)\n"
      " ROOT r = f32[{0}] reduce(x, z), dimensions={{1}}, to_apply=add", rows, length));
}

std::string Softmax(int64_t rows, int64_t length) {
  return Module("softmax", fmt::format(R"(
  x = f32[{0},{1}] parameter(0)
  lo = f32[] constant(-inf)
  m = f32[{0}] reduce(x, lo), dimensions={{1}}, to_apply=max
  mb = f32[{0},{1}] broadcast(m), dimensions={{0}}
  s = f32[{0},{1}] subtract(x, mb)
  e = f32[{0},{1}] exponential(s)
  z = f32[] constant(0)
  sum = f32[{0}] reduce(e, z), dimensions={{1}}, to_apply=add
  sb = f32[{0},{1}] broadcast(sum), dimensions={{0}}
  ROOT d = f32[{0},{1}] divide(e, sb))", rows, length));
}

std::string LayerNorm(int64_t rows, int64_t length) {
  return Module("layer_norm", fmt::format(R"(
  x = f32[{0},{1}] parameter(0)
  gamma = f32[{1}] parameter(1)
  beta = f32[{1}] parameter(2)
  z = f32[] constant(0)
  n = f32[] constant({1})
  nb = f32[{0}] broadcast(n), dimensions={{}}
  sum = f32[{0}] reduce(x, z), dimensions={{1}}, to_apply=add
  mean = f32[{0}] divide(sum, nb)
  mb = f32[{0},{1}] broadcast(mean), dimensions={{0}}
  c = f32[{0},{1}] subtract(x, mb)
  sq = f32[{0},{1}] multiply(c, c)
  vs = f32[{0}] reduce(sq, z), dimensions={{1}}, to_apply=add
  var = f32[{0}] divide(vs, nb)
  eps = f32[] constant(1e-5)
  eb = f32[{0}] broadcast(eps), dimensions={{}}
  ve = f32[{0}] add(var, eb)
  rs = f32[{0}] rsqrt(ve)
  rb = f32[{0},{1}] broadcast(rs), dimensions={{0}}
  normed = f32[{0},{1}] multiply(c, rb)
  gb = f32[{0},{1}] broadcast(gamma), dimensions={{1}}
  bb = f32[{0},{1}] broadcast(beta), dimensions={{1}}
  scaled = f32[{0},{1}] multiply(normed, gb)
  ROOT out = f32[{0},{1}] add(scaled, bb))", rows, length));
}

std::string Transpose(const std::string& in, const std::string& out, const std::string& dims) {
  return Module("transpose", fmt::format(
      "x = f32[{0}] parameter(0)\n t = f32[{1}] transpose(x), dimensions={{{2}}}\n"
      " ROOT e = f32[{1}] exponential(t)", in, out, dims));
}

std::string Gemm(int64_t m, int64_t k, int64_t n) {
  return Module("gemm", fmt::format(R"(
  x = f32[{0},{1}] parameter(0)
  w = f32[{1},{2}] parameter(1)
  b = f32[{2}] parameter(2)
  d = f32[{0},{2}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[{0},{2}] broadcast(b), dimensions={{1}}
  a = f32[{0},{2}] add(d, bb)
  z = f32[] constant(0)
  zb = f32[{0},{2}] broadcast(z), dimensions={{}}
  ROOT r = f32[{0},{2}] maximum(a, zb))", m, k, n));
}

std::vector<Case> Cases() {
  const std::vector<std::string> shuffles = {"shfl.sync.bfly.b32"};
  const std::vector<std::string> block = {"shfl.sync.bfly.b32", "bar.sync", ".shared"};
  const std::vector<std::string> tile = {"bar.sync", ".shared"};
  return {
      // Loops: 16-byte groups per thread where the rows allow, one element otherwise.
      {"elementwise_vectorised",
       Module("ew", "x = f32[1000,64] parameter(0)\n y = f32[1000,64] parameter(1)\n"
                    " e = f32[1000,64] exponential(x)\n ROOT a = f32[1000,64] add(e, y)"),
       1, 63, 256, {"ld.global.v4.f32", "st.global.v4.f32"}},
      {"elementwise_odd_rows",
       Module("ew", "x = f32[999,7] parameter(0)\n ROOT n = f32[999,7] negate(x)"), 1, 28, 256, {}},
      {"elementwise_f16",
       Module("ew", "x = f16[64,40] parameter(0)\n ROOT n = f16[64,40] negate(x)"), 1, 2, 256, {"ld.global.v4"}},
      // Row reductions: a warp per row, parts of a warp for tiny rows, a block for long rows.
      {"row_reduce_warp", RowReduce(300, 1000), 1, 38, 256, shuffles},
      {"row_reduce_few_long_rows", RowReduce(100, 1000), 1, 100, 256, block},
      {"row_reduce_not_a_warp_multiple", RowReduce(37, 33), 1, 5, 256, shuffles},
      {"row_reduce_tiny_rows", RowReduce(1000, 5), 1, 32, 256, shuffles},
      {"row_reduce_one_row_of_one", RowReduce(1, 1), 1, 1, 32, {}},
      {"row_reduce_long_rows", RowReduce(3, 10000), 1, 3, 256, block},
      {"row_reduce_3d",
       Module("r3", "x = f32[6,5,70] parameter(0)\n z = f32[] constant(0)\n"
                    " ROOT r = f32[6] reduce(x, z), dimensions={1,2}, to_apply=add"),
       1, 1, 192, shuffles},
      {"row_reduce_s32",
       Module("ri", "x = s32[40,50] parameter(0)\n z = s32[] constant(0)\n"
                    " ROOT r = s32[40] reduce(x, z), dimensions={1}, to_apply=addi"),
       1, 5, 256, shuffles},
      {"row_reduce_pred",
       Module("rp", "x = f32[40,50] parameter(0)\n z = f32[] constant(0)\n"
                    " zb = f32[40,50] broadcast(z), dimensions={}\n"
                    " c = pred[40,50] compare(x, zb), direction=LT\n t = pred[] constant(true)\n"
                    " ROOT r = pred[40] reduce(c, t), dimensions={1}, to_apply=and"),
       1, 5, 256, shuffles},
      {"variadic_argmax",
       Module("am", "x = f32[20,300] parameter(0)\n i = s32[20,300] iota(), iota_dimension=1\n"
                    " lo = f32[] constant(-inf)\n z = s32[] constant(0)\n"
                    " ROOT r = (f32[20], s32[20]) reduce(x, i, lo, z), dimensions={1}, to_apply=argmax"),
       1, 3, 256, shuffles},
      {"multi_output_reductions",
       "HloModule mo\n" + std::string(kReducers) + R"(
fused {
  x = f32[50,70] parameter(0)
  z = f32[] constant(0)
  lo = f32[] constant(-inf)
  s = f32[50] reduce(x, z), dimensions={1}, to_apply=add
  m = f32[50] reduce(x, lo), dimensions={1}, to_apply=max
  two = f32[] constant(2)
  tb = f32[50,70] broadcast(two), dimensions={}
  d = f32[50,70] multiply(x, tb)
  ROOT t = (f32[50], f32[50], f32[50,70]) tuple(s, m, d)
}
ENTRY main {
  x = f32[50,70] parameter(0)
  ROOT f = (f32[50], f32[50], f32[50,70]) fusion(x), kind=kInput, calls=fused
}
)", 1, 7, 256, shuffles},
      {"softmax", Softmax(300, 100), 1, 38, 256, shuffles},
      {"softmax_few_rows", Softmax(64, 1000), 1, 64, 256, block},
      {"softmax_long_rows", Softmax(4, 5000), 1, 4, 256, block},
      {"layer_norm", LayerNorm(33, 96), 1, 5, 256, shuffles},
      // Column reductions: 32-column tiles, 16 warps over the rows.
      {"column_reduce",
       Module("cr", "x = f32[1000,300] parameter(0)\n z = f32[] constant(0)\n"
                    " ROOT r = f32[300] reduce(x, z), dimensions={0}, to_apply=add"),
       1, 10, 512, tile},
      {"column_reduce_3d",
       Module("cr3", "x = f32[4,100,70] parameter(0)\n z = f32[] constant(0)\n"
                     " ROOT r = f32[4,70] reduce(x, z), dimensions={1}, to_apply=add"),
       1, 12, 512, tile},
      // Narrow columns over many rows: the rows split across blocks, a second kernel combines.
      {"column_reduce_split_rows",
       Module("crs", "x = f32[4096,64] parameter(0)\n z = f32[] constant(0)\n"
                     " ROOT r = f32[64] reduce(x, z), dimensions={0}, to_apply=add"),
       2, 32, 512, tile},
      {"column_argmax_split_rows",
       Module("cas", "x = f32[8192,32] parameter(0)\n i = s32[8192,32] iota(), iota_dimension=0\n"
                     " lo = f32[] constant(-inf)\n z = s32[] constant(0)\n"
                     " ROOT r = (f32[32], s32[32]) reduce(x, i, lo, z), dimensions={0}, to_apply=argmax"),
       2, 32, 512, tile},
      // Transposes through a padded shared tile.
      {"transpose_non_square", Transpose("300,200", "200,300", "1,0"), 1, 70, 256, tile},
      {"transpose_3d", Transpose("5,40,70", "5,70,40", "0,2,1"), 1, 30, 256, tile},
      {"transpose_ragged", Transpose("33,9", "9,33", "1,0"), 1, 2, 256, tile},
      // GEMM with the bias and ReLU epilogue in the same kernel.
      // K split across blocks where the tiles are few (gpu_launch_plan.h): 7 steps of K in
      // slices of 3, then a second kernel sums the slices and applies the epilogue.
      {"gemm_epilogue", Gemm(64, 100, 50), 2, 3, 256, tile},
      {"gemm_odd", Gemm(37, 19, 53), 1, 1, 256, tile},
      {"gemm_large_k", Gemm(130, 300, 70), 2, 42, 256, tile},  // 6 tiles x 7 slices
      {"gemm_split_k", Gemm(64, 512, 64), 2, 16, 256, tile},    // 1 tile x 16 slices of 32
      {"gemm_batched_transposed_rhs",
       Module("bg", "x = f32[3,17,9] parameter(0)\n w = f32[3,21,9] parameter(1)\n"
                    " ROOT d = f32[3,17,21] dot(x, w), lhs_batch_dims={0}, rhs_batch_dims={0},"
                    " lhs_contracting_dims={2}, rhs_contracting_dims={2}"),
       2, 3, 256, tile},  // the rhs is transposed first (dot canonicalisation)
      {"gemm_f64",
       Module("g64", "x = f64[20,30] parameter(0)\n w = f64[30,10] parameter(1)\n"
                     " ROOT d = f64[20,10] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}"),
       1, 1, 256, tile},
  };
}

StatusOr<runtime::GpuCompilation> Compile(const std::string& text, bool naive) {
  ASSIGN_OR_RETURN(std::unique_ptr<HloModule> module, ParseHloModule(text));
  runtime::GpuCompileOptions options;
  options.optimize.gpu_naive_emitters = naive;
  return runtime::CompileForGpuToPtx(std::move(module), options);
}

std::string FindPtxas() {
  for (const char* candidate : {"/usr/local/cuda/bin/ptxas", "/usr/bin/ptxas"}) {
    if (std::filesystem::exists(candidate)) return candidate;
  }
  return "";
}

class GpuEmittersTest : public ::testing::TestWithParam<Case> {};

TEST_P(GpuEmittersTest, LaunchShapeAndInstructions) {
  const Case& c = GetParam();
  auto compiled = Compile(c.hlo, /*naive=*/false);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  ASSERT_EQ(static_cast<int>(compiled->kernels.size()), c.kernels);
  if (c.blocks >= 0) {
    EXPECT_EQ(compiled->kernels[0].blocks, c.blocks);
    EXPECT_EQ(compiled->kernels[0].threads_per_block, c.threads);
  }
  for (const std::string& s : c.ptx) EXPECT_THAT(compiled->ptx, HasSubstr(s));
  // The one-thread-per-element kernels use no warp shuffle and no shared memory.
  auto naive = Compile(c.hlo, /*naive=*/true);
  ASSERT_TRUE(naive.ok()) << naive.status().message();
  EXPECT_THAT(naive->ptx, Not(HasSubstr("shfl.sync")));
  EXPECT_THAT(naive->ptx, Not(HasSubstr(".shared")));
}

TEST_P(GpuEmittersTest, PtxAssemblesForSm90) {
  const std::string ptxas = FindPtxas();
  if (ptxas.empty()) GTEST_SKIP() << "ptxas not found (the CUDA toolkit is not installed)";
  auto compiled = Compile(GetParam().hlo, /*naive=*/false);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string file = (std::filesystem::temp_directory_path() /
                            ("xlens_emit_" + std::to_string(::getpid()) + "_" + GetParam().name + ".ptx")).string();
  std::ofstream(file) << compiled->ptx;
  const std::string command = ptxas + " -arch=sm_90 " + file + " -o /dev/null 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) output.append(buffer, n);
  const int status = pclose(pipe);
  std::filesystem::remove(file);
  EXPECT_EQ(status, 0) << output;
}

TEST_P(GpuEmittersTest, AgreesWithTheEvaluator) {
  auto device = testing::OpenTestGpuDevice();
  if (!device.ok()) GTEST_SKIP() << device.status().message();
  const Case& c = GetParam();
  for (bool naive : {false, true}) {
    SCOPED_TRACE(naive ? "naive emitters" : "tuned emitters");
    auto module = ParseHloModule(c.hlo);
    ASSERT_TRUE(module.ok());
    std::mt19937_64 rng(7);
    std::vector<Literal> args;
    for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
      args.push_back(MakeRandomLiteral(p->shape(), rng).value());
    }
    auto expected = EvaluateModule(**module, args);
    ASSERT_TRUE(expected.ok()) << expected.status().message();
    runtime::GpuCompileOptions options;
    options.optimize.gpu_naive_emitters = naive;
    auto exe = runtime::GpuExecutable::Create(std::move(*module), options, **device);
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    auto actual = (*exe)->Execute(args);
    ASSERT_TRUE(actual.ok()) << actual.status().message();
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-4, 1e-4});
    EXPECT_TRUE(match.ok()) << match.message();
  }
}

// The memory traffic of each kernel as the simulator reports it: the new kernels read and write
// whole sectors (coalesced) and hit no shared-memory bank twice; the one-thread-per-element
// reductions and transposes touch several times the sectors they need. Prints the figures.
TEST(GpuEmittersMemoryTest, CoalescedAndFreeOfBankConflicts) {
  auto opened = runtime::OpenSimulatedGpuDevice();
  if (!opened.ok()) GTEST_SKIP() << opened.status().message();
  runtime::GpuSimDevice& device = **opened;
  struct Expectation {
    std::string name;
    std::string hlo;
    double naive_at_least;  // sectors over ideal of the one-thread-per-element kernels
  };
  const std::vector<Expectation> cases = {
      {"elementwise f32[256,256]",
       Module("ew", "x = f32[256,256] parameter(0)\n y = f32[256,256] parameter(1)\n"
                    " ROOT a = f32[256,256] add(x, y)"), 1},
      {"row reduce f32[512,1024]", RowReduce(512, 1024), 4},
      {"softmax f32[256,1024]", Softmax(256, 1024), 2},
      {"layer norm f32[256,1024]", LayerNorm(256, 1024), 2},
      {"column reduce f32[1024,256]",
       Module("cr", "x = f32[1024,256] parameter(0)\n z = f32[] constant(0)\n"
                    " ROOT r = f32[256] reduce(x, z), dimensions={0}, to_apply=add"), 1},
      {"transpose f32[512,256]", Transpose("512,256", "256,512", "1,0"), 4},
      {"gemm+bias+relu 128x128x128", Gemm(128, 128, 128), 0},
  };
  std::cout << "case | kernels naive/tuned | sectors per request naive/tuned (over ideal) | "
               "shared wavefronts per request | simulator ms naive/tuned\n";
  for (const Expectation& c : cases) {
    SCOPED_TRACE(c.name);
    testing::KernelMemoryCounts totals[2];
    size_t kernels[2];
    double ms[2];
    for (int naive = 0; naive < 2; ++naive) {
      auto module = ParseHloModule(c.hlo);
      ASSERT_TRUE(module.ok());
      std::mt19937_64 rng(3);
      std::vector<Literal> args;
      for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
        args.push_back(MakeRandomLiteral(p->shape(), rng).value());
      }
      runtime::GpuCompileOptions options;
      options.optimize.gpu_naive_emitters = naive == 1;
      options.optimize.gpu_split_launches = false;  // the one tiled kernel is what is measured
      auto exe = runtime::GpuExecutable::Create(std::move(*module), options, device);
      ASSERT_TRUE(exe.ok()) << exe.status().message();
      auto start = std::chrono::steady_clock::now();
      ASSERT_TRUE((*exe)->Execute(args).ok());  // warm: the kernels compiled for the host
      ms[naive] = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      testing::MemoryCounter counter;
      device.SetObserver(&counter);
      auto result = (*exe)->Execute(args);
      device.SetObserver(nullptr);
      ASSERT_TRUE(result.ok()) << result.status().message();
      kernels[naive] = counter.kernels().size();
      for (const testing::KernelMemoryCounts& k : counter.kernels()) {
        totals[naive].global_requests += k.global_requests;
        totals[naive].global_sectors += k.global_sectors;
        totals[naive].global_ideal_sectors += k.global_ideal_sectors;
        totals[naive].shared_requests += k.shared_requests;
        totals[naive].shared_wavefronts += k.shared_wavefronts;
      }
    }
    const testing::KernelMemoryCounts& tuned = totals[0];
    const testing::KernelMemoryCounts& naive = totals[1];
    std::cout << fmt::format("{} | {}/{} | {:.2f} ({:.2f}) / {:.2f} ({:.2f}) | {:.2f} | {:.0f}/{:.0f}\n", c.name,
                             kernels[1], kernels[0], naive.SectorsPerRequest(), naive.SectorsOverIdeal(),
                             tuned.SectorsPerRequest(), tuned.SectorsOverIdeal(),
                             tuned.SharedWavefrontsPerRequest(), ms[1], ms[0]);
    EXPECT_LE(tuned.SectorsOverIdeal(), 1.3);
    EXPECT_GE(naive.SectorsOverIdeal(), c.naive_at_least);
    if (tuned.shared_requests > 0) EXPECT_LE(tuned.SharedWavefrontsPerRequest(), 1.01);
    EXPECT_EQ(kernels[0], 1u);
  }
}

INSTANTIATE_TEST_SUITE_P(Emitters, GpuEmittersTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) { return info.param.name; });

}  // namespace
}  // namespace xlens
