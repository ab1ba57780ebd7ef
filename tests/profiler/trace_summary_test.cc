#include "profiler/trace_summary.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens::profiler {
namespace {

using ::testing::HasSubstr;

TEST(TraceSummary, TopKernelsAndCategories) {
  Trace trace;
  trace.processes = {{0, "Host (CPU)", 0}};
  trace.threads = {{0, 1, "main", 1}};
  trace.events = {
      {"execute m", "execute", 0, 1, 0, 10'000'000, {}},
      {"fusion.3", "cpu_kernel", 0, 1, 100, 3'000'000, {}},
      {"fusion.3", "cpu_kernel", 0, 1, 4'000'000, 1'000'000, {}},
      {"dot.1", "library_call", 0, 1, 6'000'000, 2'000'000, {}},
      {"gpu_k", "kernel", 1, 7, 6'000'000, 1'000'000, {}},
      {"algebraic-simplifier", "pass", 0, 1, 0, 500, {}},
  };
  trace.metadata = {{"dropped_records", int64_t{4}}};
  std::string text = SummarizeTrace(trace, 2);
  EXPECT_THAT(text, HasSubstr("6 events on 1 tracks in 1 processes, 10.000 ms"));
  EXPECT_THAT(text, HasSubstr("warning: dropped_records = 4"));
  EXPECT_THAT(text, HasSubstr("Top kernels (3 distinct, 7.000 ms in all)"));
  // fusion.3 first: 4 ms over 2 calls, 57.1% of kernel time.
  size_t fusion = text.find("fusion.3");
  size_t dot = text.find("dot.1");
  ASSERT_NE(fusion, std::string::npos);
  ASSERT_NE(dot, std::string::npos);
  EXPECT_LT(fusion, dot);
  EXPECT_THAT(text, HasSubstr("57.1%"));
  EXPECT_THAT(text, HasSubstr("2000.00"));  // average us of fusion.3
  EXPECT_THAT(text, HasSubstr("... 1 more"));
  EXPECT_THAT(text, HasSubstr("execute"));
  EXPECT_THAT(text, HasSubstr("cpu_kernel"));
}

TEST(TraceSummary, NoKernels) {
  Trace trace;
  trace.events = {{"compile m", "compile", 0, 1, 0, 100, {}}};
  EXPECT_THAT(SummarizeTrace(trace), HasSubstr("No kernels"));
}

}  // namespace
}  // namespace xlens::profiler
