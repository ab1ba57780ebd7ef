#include "profiler/hlo_profile.h"

#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(HloProfile, RowsSortedByTimeWithSharesAndRates) {
  HloProfile profile;
  profile.module = "mnist";
  profile.runs = 10;
  profile.peak_bandwidth_gbps = 40;
  // Totals over 10 runs: 1 ms, 3 ms and 6 ms -> 0.1, 0.3 and 0.6 ms per run.
  profile.entries = {{"copy.1", "copy", 1'000'000, 8e6, 0, 0},
                     {"fusion.3", "kLoop fusion", 6'000'000, 12e6, 3e6, 1e6},
                     {"dot.2", "dot (Eigen)", 3'000'000, 3e6, 6e8, 0}};
  std::string text = FormatHloProfile(profile);
  std::vector<std::string> lines = Lines(text);
  ASSERT_EQ(lines.size(), 7u) << text;
  EXPECT_THAT(lines[0], HasSubstr("Execution profile for mnist: 1.000 ms per run over 10 runs, 3 kernels"));
  EXPECT_THAT(lines[1], HasSubstr("40.0 GB/s"));
  EXPECT_THAT(lines[2], HasSubstr("%peakBW"));
  // fusion.3: 0.6 ms, 60%, 12 MB in 0.6 ms = 20 GB/s = 50% of peak; 4 MFLOP (flops +
  // transcendentals) in 0.6 ms = 6.67 GFLOP/s.
  EXPECT_THAT(lines[3], HasSubstr("fusion.3 (kLoop fusion)"));
  EXPECT_THAT(lines[3], HasSubstr("60.0%"));
  EXPECT_THAT(lines[3], HasSubstr("12.00 MB"));
  EXPECT_THAT(lines[3], HasSubstr("20.00"));
  EXPECT_THAT(lines[3], HasSubstr("6.67"));
  EXPECT_THAT(lines[3], HasSubstr("50.0%"));
  // dot.2 next, cumulative 90%.
  EXPECT_THAT(lines[4], HasSubstr("dot.2"));
  EXPECT_THAT(lines[4], HasSubstr("90.0%"));
  EXPECT_THAT(lines[4], HasSubstr("2000.00"));  // 600 MFLOP in 0.3 ms
  EXPECT_THAT(lines[5], HasSubstr("copy.1"));
  EXPECT_THAT(lines[5], HasSubstr("100.0%"));
  EXPECT_THAT(lines[6], HasSubstr("total"));
  EXPECT_THAT(lines[6], HasSubstr("1.000 ms"));
}

TEST(HloProfile, WithoutPeakOrCostsShowsDashes) {
  HloProfile profile;
  profile.module = "m";
  profile.entries = {{"while.1", "while", 5000, 0, 0, 0}};
  std::string text = FormatHloProfile(profile);
  EXPECT_THAT(text, ::testing::Not(HasSubstr("%peakBW")));
  EXPECT_THAT(text, HasSubstr("while.1 (while)"));
  EXPECT_THAT(text, HasSubstr("5.00 us"));
}

TEST(HloProfile, PredictedGpuColumns) {
  HloProfile profile;
  profile.module = "softmax";
  profile.runs = 2;
  profile.peak_bandwidth_gbps = 3000;
  profile.predicted_for = "h100";
  HloProfileEntry reduce{"fusion.1", "kInput fusion", 2 * 20'000, 4e6, 1e6, 0};
  reduce.has_gpu_analysis = true;
  reduce.gpu = {32.0, 4.2e6, 0.5, 7, "uncoalesced"};
  profile.entries = {reduce, {"copy.2", "copy", 2 * 1'000, 0, 0, 0}};
  std::vector<std::string> lines = Lines(FormatHloProfile(profile));
  ASSERT_EQ(lines.size(), 6u);
  EXPECT_THAT(lines[0], HasSubstr("(times predicted for h100, not measured)"));
  EXPECT_THAT(lines[1], HasSubstr("a device copy on the target): 3000.0 GB/s"));
  EXPECT_THAT(lines[2], HasSubstr("sect/req"));
  EXPECT_THAT(lines[2], HasSubstr("bound"));
  // 4 MB in 20 us = 200 GB/s = 6.7% of 3000.
  EXPECT_THAT(lines[3], HasSubstr("fusion.1"));
  EXPECT_THAT(lines[3], HasSubstr("200.00"));
  EXPECT_THAT(lines[3], HasSubstr("6.7%"));
  EXPECT_THAT(lines[3], HasSubstr("32.00"));
  EXPECT_THAT(lines[3], HasSubstr("4.20 MB"));
  EXPECT_THAT(lines[3], HasSubstr("50%"));
  EXPECT_THAT(lines[3], HasSubstr("uncoalesced"));
  // A row without an analysis has dashes in those columns; the total lines up.
  EXPECT_THAT(lines[4], HasSubstr("copy.2"));
  EXPECT_EQ(lines[5].find("total"), lines[4].find("copy.2"));
}

TEST(HloProfile, SourceColumnWhenAnyRowHasASourceLine) {
  HloProfile profile;
  profile.module = "jit_train_step";
  HloProfileEntry fusion{"fusion.2", "kInput fusion", 3000, 0, 0, 0};
  fusion.source = "train_step.py:12";
  HloProfileEntry dot{"dot.1", "dot (Eigen)", 2000, 0, 0, 0};
  dot.source = "train_step.py:4";
  profile.entries = {fusion, dot, {"copy.3", "copy", 1000, 0, 0, 0}};
  std::vector<std::string> lines = Lines(FormatHloProfile(profile));
  ASSERT_EQ(lines.size(), 6u);
  // The kernel column is padded so the sources line up under their heading; a row without one
  // has a dash.
  const size_t column = lines[1].find("source");
  ASSERT_NE(column, std::string::npos) << lines[1];
  EXPECT_EQ(lines[2].find("train_step.py:12"), column) << lines[2];
  EXPECT_EQ(lines[3].find("train_step.py:4"), column) << lines[3];
  EXPECT_THAT(lines[2], HasSubstr("fusion.2 (kInput fusion)"));
  EXPECT_EQ(lines[4].find("-", column), column) << lines[4];
  // Without any source, no column.
  profile.entries = {{"copy.3", "copy", 1000, 0, 0, 0}};
  EXPECT_THAT(FormatHloProfile(profile), ::testing::Not(HasSubstr("source")));
}

TEST(HloProfile, BoundColumnHoldsEachRowToTheLimitThatBindsIt) {
  MachineLimits limits;
  limits.threads = 2;
  limits.caches = {{1, 32 << 10, 2}, {2, 1 << 20, 2}, {3, 32 << 20, 1}};
  limits.sweep = {{32 << 10, 400, 450, 500}, {1 << 20, 200, 210, 250}, {16 << 20, 60, 62, 70}};
  limits.memory = {384 << 20, 20, 25, 40};
  limits.peak_gflops = 200;
  HloProfile profile;
  profile.module = "m";
  profile.runs = 1;
  profile.limits = &limits;
  // 500 MB, beyond the sweep: memory (the read's 40 GB/s: 12.5 ms) in 25 ms: 50%.
  // 1 MiB in L2 (250 GB/s: 4.19 us) in 8.39 us: 50%, the L2's.
  // 1 GFLOP (200 GFLOP/s: 5 ms) over 1 MB in 10 ms: 50%, the FMA units'.
  profile.entries = {{"fusion.1", "kLoop fusion", 25'000'000, 500e6, 0, 0},
                     {"fusion.2", "kInput fusion", 8'388, 1 << 20, 0, 0},
                     {"dot.3", "dot (oneDNN)", 10'000'000, 1 << 20, 1e9, 0}};
  std::vector<std::string> lines = Lines(FormatHloProfile(profile));
  ASSERT_EQ(lines.size(), 7u);
  EXPECT_THAT(lines[1], HasSubstr("Machine limits (measured, this machine): memory 40.0 GB/s"));
  EXPECT_THAT(lines[2], HasSubstr("%bound limit"));
  EXPECT_THAT(lines[3], HasSubstr("fusion.1"));
  EXPECT_THAT(lines[3], HasSubstr("50.0% mem"));
  EXPECT_THAT(lines[4], HasSubstr("dot.3"));
  EXPECT_THAT(lines[4], HasSubstr("50.0% FMA"));
  EXPECT_THAT(lines[5], HasSubstr("fusion.2"));
  EXPECT_THAT(lines[5], HasSubstr("50.0% L2"));
  // The total: 17.504 ms of floors in 35.008 ms.
  EXPECT_THAT(lines[6], HasSubstr("total"));
  EXPECT_THAT(lines[6], HasSubstr("50.0%"));
  // Without limits, no column.
  profile.limits = nullptr;
  EXPECT_THAT(FormatHloProfile(profile), ::testing::Not(HasSubstr("%bound")));
}

TEST(HloProfile, EmptyProfile) {
  HloProfile profile;
  profile.module = "empty";
  std::string text = FormatHloProfile(profile);
  EXPECT_THAT(text, HasSubstr("0 kernels"));
}

TEST(HloProfile, PeakBandwidthIsMeasuredOnceAndPlausible) {
  double first = PeakMemoryBandwidthGBps();
  EXPECT_GT(first, 0.5);    // any machine copies faster than 0.5 GB/s
  EXPECT_LT(first, 50000);  // and slower than 50 TB/s
  EXPECT_EQ(PeakMemoryBandwidthGBps(), first) << "cached for the process";
}

}  // namespace
}  // namespace xlens::profiler
