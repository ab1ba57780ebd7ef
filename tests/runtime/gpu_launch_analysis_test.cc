#include "compiler/runtime/gpu_launch_analysis.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;

// A copy of 1M floats, one thread each, in blocks of 256: counted from 16 sampled blocks.
GpuLaunchAnalysis CopyLaunch() {
  constexpr int64_t kBlocks = 4096;
  GpuMemoryAnalysis analysis(kBlocks);
  for (int64_t b : SampledBlocks(kBlocks, 16)) {
    GpuBlockRecorder block(b);
    for (int t = 0; t < 256; ++t) {
      const uint64_t offset = (b * 256 + t) * 4;
      block.Record(t, 0, 0x100000 + offset, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kLoad);
      block.Record(t, 1, 0x900000 + offset, 4, GpuMemorySpace::kGlobal, GpuAccessKind::kStore);
    }
    analysis.AddBlock(block);
  }
  GpuLaunchAnalysis l;
  l.kernel = "fusion_3";
  l.hlo_instruction = "fusion.3";
  l.dims = {kBlocks, 256};
  l.resources = {16, 0, 0};
  l.memory = analysis.Finish();
  l.flops = 0;
  return l;
}

TEST(GpuLaunchAnalysisTest, TableRowAndSamplingNote) {
  GpuTarget target = *GpuTargetByName("h100");
  GpuLaunchAnalysis l = CopyLaunch();
  PredictLaunch(target, l);
  EXPECT_EQ(l.memory.dram_bytes(), 8 << 20);
  EXPECT_DOUBLE_EQ(SectorsPerRequest(l.memory), 4.0);
  // 8 MiB at 3000 GB/s plus the 2 us launch.
  EXPECT_NEAR(l.prediction.total_ns, (8 << 20) / 3000.0 + 2000, 1e-6);
  EXPECT_EQ(l.prediction.bound, "memory");
  std::string table = FormatGpuLaunchAnalyses({l}, target, "ptxas -v");
  EXPECT_THAT(table, HasSubstr("times predicted for h100"));
  EXPECT_THAT(table, HasSubstr("registers from ptxas -v"));
  EXPECT_THAT(table, HasSubstr("fusion_3 (fusion.3)"));
  EXPECT_THAT(table, HasSubstr("4096x256"));
  EXPECT_THAT(table, HasSubstr("100% warps"));
  EXPECT_THAT(table, HasSubstr("32768"));  // load requests: 1M / 32
  EXPECT_THAT(table, HasSubstr("4.00"));
  EXPECT_THAT(table, HasSubstr("8.39 MB"));
  EXPECT_THAT(table, HasSubstr("4.80 us"));
  EXPECT_THAT(table, HasSubstr("58.3%"));  // 2.80 us of DRAM time in 4.80 us
  EXPECT_THAT(table, HasSubstr("note: fusion_3: 16 of 4096 blocks analysed"));
}

TEST(GpuLaunchAnalysisTest, SpanArgsAndProfileColumns) {
  GpuTarget target = *GpuTargetByName("h200");
  GpuLaunchAnalysis l = CopyLaunch();
  PredictLaunch(target, l);
  std::vector<profiler::TraceArg> args = PredictedSpanArgs(l, target);
  auto find = [&](const std::string& key) -> const profiler::TraceArgValue* {
    for (const auto& a : args)
      if (a.key == key) return &a.value;
    return nullptr;
  };
  ASSERT_NE(find("grid"), nullptr);
  EXPECT_EQ(std::get<std::vector<int64_t>>(*find("grid")), (std::vector<int64_t>{4096, 1, 1}));
  EXPECT_EQ(std::get<std::string>(*find("target")), "h200");
  EXPECT_DOUBLE_EQ(std::get<double>(*find("sectors per request")), 4.0);
  // 8 MiB at the H200's 4300 GB/s takes 1.95 us, less than the launch.
  EXPECT_EQ(std::get<std::string>(*find("bound")), "launch");
  EXPECT_EQ(std::get<int64_t>(*find("blocks analysed")), 16);
  profiler::HloProfileEntry::GpuAnalysis columns = ProfileColumns(l);
  EXPECT_DOUBLE_EQ(columns.sectors_per_request, 4.0);
  EXPECT_DOUBLE_EQ(columns.dram_bytes, 8 << 20);
  EXPECT_DOUBLE_EQ(columns.occupancy, 1.0);
  EXPECT_EQ(columns.bound, "launch");
}

}  // namespace
}  // namespace xlens::runtime
