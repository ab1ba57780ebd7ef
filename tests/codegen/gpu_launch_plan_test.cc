// The launch plans of compiler/codegen/gpu/gpu_launch_plan.h, and what they buy: a GEMM with few
// output tiles and a long K, and a narrow column reduction over many rows, are split across
// blocks, and the GPU simulator's analysis predicts the split launches faster on an H100 than the
// one tiled kernel (--xla_gpu_xlens_split_launches=false), while a wide column reduction, which
// already streams at the DRAM's rate, stays one kernel. (Agreement with the evaluator under the
// race check, and ptxas for sm_90, are checked by gpu_emitters_test's split cases.)
#include <iostream>
#include <random>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "compiler/codegen/gpu/gpu_launch_plan.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/hlo/parser.h"
#include "compiler/hlo/random_literal.h"
#include "compiler/runtime/gpu_executable.h"
#include "compiler/runtime/gpu_sim_analysis.h"
#include "compiler/runtime/gpu_sim_device.h"

namespace xlens {
namespace {

using codegen::gpu::PlanGemmSplit;
using codegen::gpu::PlanSplit;
using codegen::gpu::PlanStreamingSplit;

TEST(GpuLaunchPlanTest, SplitsOnlyLaunchesOfFewerBlocksThanSms) {
  // The MLP's [128,784]x[784,256]: 8 tiles, 49 steps of 16 -> 17 slices of 3 steps (136 blocks).
  auto mlp = PlanSplit(8, 49, 2);
  EXPECT_EQ(mlp.slices, 17);
  EXPECT_EQ(mlp.steps_per_slice, 3);
  EXPECT_GE(mlp.slices * 8, codegen::gpu::kTargetSms);
  // Every step is covered once, the last slice not empty.
  EXPECT_LT((mlp.slices - 1) * mlp.steps_per_slice, 49);
  EXPECT_GE(mlp.slices * mlp.steps_per_slice, 49);
  EXPECT_EQ(PlanSplit(132, 1000, 2).slices, 1);   // the machine is full already
  EXPECT_EQ(PlanSplit(4, 3, 2).slices, 1);        // K too short for two slices of 2 steps
  EXPECT_EQ(PlanSplit(1, 7, 2).slices, 3);        // 3 slices of 3 steps: 3, 3, 1
  EXPECT_EQ(PlanSplit(1, 7, 2).steps_per_slice, 3);
  EXPECT_EQ(PlanSplit(0, 7, 2).slices, 1);
}

TEST(GpuLaunchPlanTest, GemmSplitOnlyWhenItPaysForTheSecondKernel) {
  const double step_ns = 1088 / 1.98;  // the tiled GEMM's K step
  // The MLP's forward product: 8 tiles x 49 steps, 27 us of shared-memory time on 8 SMs.
  EXPECT_EQ(PlanGemmSplit(8, 49, step_ns, 128.0 * 256 * 4).slices, 17);
  // Its weight gradient x^T dh, [784,128]x[128,256]: 52 tiles x 8 steps (4.4 us) would save
  // 2.7 us in 3 slices, less than the second kernel costs.
  EXPECT_EQ(PlanGemmSplit(52, 8, step_ns, 784.0 * 256 * 4).slices, 1);
}

TEST(GpuLaunchPlanTest, StreamingSplitOnlyWhenItPaysForTheSecondKernel) {
  // f32[4096,1024] -> [1024]: 32 blocks of 16 warps already keep the DRAM busy (512 warps).
  EXPECT_EQ(PlanStreamingSplit(32, 16, 4096, 256, 4096.0 * 1024 * 4).slices, 1);
  // f32[4096,64] -> [64]: 2 blocks, 32 warps: latency bound, 16 slices of 256 rows.
  auto narrow = PlanStreamingSplit(2, 16, 4096, 256, 4096.0 * 64 * 4);
  EXPECT_EQ(narrow.slices, 16);
  EXPECT_EQ(narrow.steps_per_slice, 256);
  // Too little data for a second launch to pay: f32[512,64].
  EXPECT_EQ(PlanStreamingSplit(2, 16, 512, 256, 512.0 * 64 * 4).slices, 1);
}

std::string Gemm(int64_t m, int64_t k, int64_t n) {
  return fmt::format(R"(HloModule gemm
ENTRY main {{
  x = f32[{0},{1}] parameter(0)
  w = f32[{1},{2}] parameter(1)
  b = f32[{2}] parameter(2)
  d = f32[{0},{2}] dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[{0},{2}] broadcast(b), dimensions={{1}}
  a = f32[{0},{2}] add(d, bb)
  z = f32[] constant(0)
  zb = f32[{0},{2}] broadcast(z), dimensions={{}}
  ROOT r = f32[{0},{2}] maximum(a, zb)
}}
)", m, k, n);
}

std::string ColumnSum(int64_t rows, int64_t columns) {
  return fmt::format(R"(HloModule column
add {{ a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }}
ENTRY main {{
  x = f32[{0},{1}] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[{1}] reduce(x, z), dimensions={{0}}, to_apply=add
}}
)", rows, columns);
}

struct Predicted {
  size_t launches = 0;
  double ns = 0;
};

// Runs `text` on the simulator (split or not), checks it against the evaluator and returns the
// launches and the total time the analysis predicts for an H100.
Predicted RunAndPredict(runtime::GpuSimDevice& device, const std::string& text, bool split) {
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok());
  if (!module.ok()) return {};
  std::mt19937_64 rng(11);
  std::vector<Literal> args;
  for (const HloInstruction* p : (*module)->entry_computation()->parameter_instructions()) {
    args.push_back(MakeRandomLiteral(p->shape(), rng).value());
  }
  auto expected = EvaluateModule(**module, args);
  EXPECT_TRUE(expected.ok());
  runtime::GpuCompileOptions options;
  options.optimize.gpu_split_launches = split;
  auto exe = runtime::GpuExecutable::Create(std::move(*module), options, device);
  EXPECT_TRUE(exe.ok()) << exe.status().message();
  if (!exe.ok()) return {};
  auto actual = (*exe)->Execute(args);
  EXPECT_TRUE(actual.ok()) << actual.status().message();
  if (actual.ok() && expected.ok()) {
    Status match = ExpectLiteralNear(*expected, *actual, ErrorSpec{1e-3, 1e-3});
    EXPECT_TRUE(match.ok()) << match.message();
  }
  auto analysis = runtime::AnalyseGpuSimRun(**exe, device, runtime::GpuTargetByName("h100").value(),
                                            /*sample_blocks=*/8);
  EXPECT_TRUE(analysis.ok()) << analysis.status().message();
  if (!analysis.ok()) return {};
  Predicted p;
  p.launches = analysis->launches.size();
  for (const auto& l : analysis->launches) p.ns += l.prediction.total_ns;
  return p;
}

TEST(GpuLaunchPlanTest, SplitLaunchesArePredictedFasterOnH100) {
  auto opened = runtime::OpenSimulatedGpuDevice();
  if (!opened.ok()) GTEST_SKIP() << opened.status().message();
  struct Case {
    std::string name;
    std::string hlo;
    size_t split_launches;  // with the plan (the tiled kernel alone is 1)
  };
  const std::vector<Case> cases = {
      // The MLP's forward product with K cut to 256 (its K = 784 is in tests/bench's suite: the
      // analysis of 8 blocks each walking all of K is what takes the time here).
      {"gemm [128,256]x[256,256]+bias+relu", Gemm(128, 256, 256), 2},
      {"column sum f32[8192,64]", ColumnSum(8192, 64), 2},
      {"column sum f32[2048,1024] (wide: not split)", ColumnSum(2048, 1024), 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const Predicted tiled = RunAndPredict(**opened, c.hlo, /*split=*/false);
    const Predicted planned = RunAndPredict(**opened, c.hlo, /*split=*/true);
    std::cout << fmt::format("{}: one tiled kernel {:.2f} us, planned ({} launch{}) {:.2f} us\n", c.name,
                             tiled.ns / 1e3, planned.launches, planned.launches == 1 ? "" : "es",
                             planned.ns / 1e3);
    EXPECT_EQ(tiled.launches, 1u);
    EXPECT_EQ(planned.launches, c.split_launches);
    EXPECT_LE(planned.ns, tiled.ns * 1.001);
    if (c.split_launches > 1) EXPECT_LT(planned.ns, 0.7 * tiled.ns);
  }
}

}  // namespace
}  // namespace xlens
