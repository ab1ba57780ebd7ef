// `xlens run --backend=gpu-sim --gpu_sim_analysis` as a user runs it: the per-kernel table, the
// predicted kernels in the trace (flagged, on their own stream, linked to their launches), the
// per-HLO profile with the analysis columns, and one-line errors for what cannot be analysed.
// The answers hold for any correct emitter: an elementwise kernel over aligned f32 arrays touches
// exactly the sectors its bytes fill and moves each array through DRAM once.
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using json = nlohmann::json;

constexpr const char* kAdd = R"(HloModule add
ENTRY main {
  x = f32[1048576] parameter(0)
  y = f32[1048576] parameter(1)
  ROOT s = f32[1048576] add(x, y)
})";

constexpr int64_t kArrayBytes = 4 << 20;

class GpuSimAnalysisCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    RunResult probe = RunXlens("run --backend=gpu-sim " + Write("probe.hlo", kAdd));
    if (probe.exit_code != 0 && probe.output.find("unavailable") != std::string::npos) {
      GTEST_SKIP() << probe.output;
    }
  }
};

TEST_F(GpuSimAnalysisCliTest, TableAndTraceOfAnElementwiseKernel) {
  const std::string trace = (dir_ / "t.json").string();
  RunResult r = RunXlens("run --backend=gpu-sim --gpu_sim_analysis --reference --trace=" + trace + " " +
                         Write("add.hlo", kAdd));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("times predicted for h100"));
  EXPECT_THAT(r.output, HasSubstr("12.58 MB"));  // two arrays read, one written
  EXPECT_THAT(r.output, HasSubstr("reference: "));

  std::ifstream in(trace);
  json doc = json::parse(in);
  std::map<int64_t, json> flows_out, flows_in;
  std::vector<json> predicted;
  std::string process_name;
  for (const json& e : doc["traceEvents"]) {
    if (e["ph"] == "s") flows_out[e["id"].get<int64_t>()] = e;
    if (e["ph"] == "f") flows_in[e["id"].get<int64_t>()] = e;
    if (e["ph"] == "M" && e["name"] == "process_name" && e["args"]["name"].get<std::string>().find("predicted") != std::string::npos) {
      process_name = e["args"]["name"];
    }
    if (e["ph"] == "X" && e.contains("args") && e["args"].value("predicted", 0) == 1) predicted.push_back(e);
  }
  EXPECT_EQ(process_name, "GPU (predicted: NVIDIA H100 SXM5 80GB (HBM3))");
  ASSERT_EQ(predicted.size(), 1u);
  const json& k = predicted[0];
  EXPECT_EQ(k["cat"], "kernel");
  const json& a = k["args"];
  EXPECT_EQ(a["hlo_op"], "s");  // copied from the launch by its external id
  EXPECT_EQ(a["dram bytes"].get<int64_t>(), 3 * kArrayBytes);
  // Coalesced: every sector touched is one the bytes fill.
  EXPECT_EQ(a["global load sectors"].get<int64_t>() + a["global store sectors"].get<int64_t>(),
            a["ideal sectors"].get<int64_t>());
  EXPECT_EQ(a["global load sectors"].get<int64_t>(), 2 * kArrayBytes / 32);
  EXPECT_EQ(a["bound"], "memory");
  // 12.58 MB at 3000 GB/s, plus the 2 us launch.
  EXPECT_NEAR(k["dur"].get<double>(), 3.0 * kArrayBytes / 3000 / 1e3 + 2.0, 0.01);
  // The flow from the launch's host span ends on this kernel.
  ASSERT_EQ(flows_in.size(), 1u);
  const int64_t id = flows_in.begin()->first;
  ASSERT_TRUE(flows_out.count(id));
  EXPECT_EQ(flows_out[id]["pid"], 0);
  EXPECT_EQ(flows_in[id]["pid"], k["pid"]);
  EXPECT_EQ(flows_in[id]["ts"], k["ts"]);
}

TEST_F(GpuSimAnalysisCliTest, SampledBlocksAreSaidAndOtherTargetsAreFaster) {
  RunResult r = RunXlens("run --backend=gpu-sim --gpu_sim_analysis --gpu_target=h200 --gpu_sim_sample_blocks=4 " +
                         Write("add.hlo", kAdd));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("times predicted for h200"));
  EXPECT_THAT(r.output, HasSubstr("4300 GB/s copy"));
  EXPECT_THAT(r.output, HasSubstr("note: "));
  EXPECT_THAT(r.output, HasSubstr("4 of "));
  EXPECT_THAT(r.output, HasSubstr("12.58 MB"));  // the footprint of every block: still exact
  EXPECT_THAT(r.output, HasSubstr("4.93 us"));   // 12.58 MB at 4300 GB/s plus 2 us
}

TEST_F(GpuSimAnalysisCliTest, HloProfileHasPredictedColumns) {
  RunResult r = RunXlens("run --backend=gpu-sim --xla_hlo_profile " + Write("add.hlo", kAdd));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("times predicted for h100"));
  EXPECT_THAT(r.output, HasSubstr("sect/req"));
  EXPECT_THAT(r.output, HasSubstr("6.19 us"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr("times CPU kernels so far")));
}

// A module jaxlib dumped, with its stack-frame table: each predicted kernel on the trace and each
// row of the predicted profile names the line of train_step.py it came from.
TEST_F(GpuSimAnalysisCliTest, PredictedKernelsNameTheirPythonLine) {
  const std::string module = std::string(XLENS_SOURCE_DIR) + "/tests/hlo/testdata/jax_train_step.hlo";
  const std::string trace = (dir_ / "jax.json").string();
  RunResult r = RunXlens("run --backend=gpu-sim --gpu_sim_analysis --xla_hlo_profile --trace=" + trace + " " + module);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, ::testing::ContainsRegex("kernel +source"));
  EXPECT_THAT(r.output, HasSubstr("train_step.py:4\n"));
  std::ifstream in(trace);
  json doc = json::parse(in);
  int kernels = 0;
  for (const json& e : doc["traceEvents"]) {
    if (e.value("cat", "") != "kernel") continue;
    ++kernels;
    const json args = e.value("args", json::object());
    EXPECT_THAT(args.value("source", ""), ::testing::StartsWith("train_step.py:")) << e.dump();
    EXPECT_THAT(args.value("stack", ""), ::testing::EndsWith("train_step.py:14 (<module>)")) << e.dump();
  }
  EXPECT_GT(kernels, 0);
}

TEST_F(GpuSimAnalysisCliTest, WhatCannotBeAnalysedIsOneLine) {
  const std::string add = Write("add.hlo", kAdd);
  RunResult cpu = RunXlens("run --gpu_sim_analysis " + add);
  EXPECT_EQ(cpu.exit_code, 1);
  EXPECT_THAT(cpu.output, HasSubstr("--gpu_sim_analysis: the analysis needs --backend=gpu-sim"));
  RunResult target = RunXlens("run --backend=gpu-sim --gpu_sim_analysis --gpu_target=a100 " + add);
  EXPECT_EQ(target.exit_code, 1);
  EXPECT_THAT(target.output, HasSubstr("unknown target 'a100' (known: h100, h200)"));
  EXPECT_EQ(std::count(target.output.begin(), target.output.end(), '\n'), 1) << target.output;
}

}  // namespace
}  // namespace xlens
