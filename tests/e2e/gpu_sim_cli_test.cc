// `xlens run --backend=gpu-sim` as a user runs it: the GPU backend's kernels on the GPU
// simulator, proved against the evaluator, with and without the race check, with a trace.
#include <filesystem>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

// Softmax: a row reduction materialised into scratch, then a second and the normalisation: three
// launches of one fusion.
constexpr const char* kSoftmax = R"(HloModule softmax
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT m = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT s = f32[] add(a, b) }
ENTRY e {
  x = f32[64,1000] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[64] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[64,1000] broadcast(mx), dimensions={0}
  d = f32[64,1000] subtract(x, mb)
  ex = f32[64,1000] exponential(d)
  zero = f32[] constant(0)
  s = f32[64] reduce(ex, zero), dimensions={1}, to_apply=add
  sb = f32[64,1000] broadcast(s), dimensions={0}
  ROOT r = f32[64,1000] divide(ex, sb)
}
)";

class GpuSimCliTest : public CliTest {};

TEST_F(GpuSimCliTest, RunsTheGpuKernelsOnTheSimulatorAndMatchesTheEvaluator) {
  const std::string file = Write("softmax.hlo", kSoftmax);
  const std::string trace = (dir_ / "timeline.ctf.json").string();
  RunResult r = RunXlens("run " + file + " --backend=gpu-sim --reference --iterations 2 --trace " + trace);
  if (r.output.find("the GPU simulator is unavailable") != std::string::npos) GTEST_SKIP() << r.output;
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("compile [0-9.]+ ms for sm_90 \\(simulated\\); run median"));
  EXPECT_THAT(r.output, HasSubstr("fusion_phase2 (fusion): grid 250, block 256"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("reference: .*: match"));
  EXPECT_THAT(xlens::testing::ReadTestFile(trace), HasSubstr("\"kernel\":\"fusion_phase2\""));
  RunResult checked = RunXlens("run " + file + " --backend=gpu-sim --gpu_sim_race_check --reference");
  EXPECT_EQ(checked.exit_code, 0) << checked.output;
}

TEST_F(GpuSimCliTest, TheRaceCheckNeedsTheSimulator) {
  const std::string file = Write("softmax.hlo", kSoftmax);
  RunResult r = RunXlens("run " + file + " --gpu_sim_race_check");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("--gpu_sim_race_check: the race check needs --backend=gpu-sim"));
  RunResult bad = RunXlens("run " + file + " --backend=gpu-simulator");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("expected cpu, gpu or gpu-sim"));
}

}  // namespace
}  // namespace xlens
