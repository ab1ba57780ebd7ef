#include "profiler/trace_summary.h"

#include <unistd.h>

#include <filesystem>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "profiler/chrome_trace_writer.h"

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
  // The GPU kernel's track (pid 1, tid 7) counts although the metadata names no such thread.
  EXPECT_THAT(text, HasSubstr("6 events on 2 tracks in 2 processes, 10.000 ms"));
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

// A trace with no metadata events (a hand-written or trimmed file) still has the tracks its events
// are on; named threads without events count too.
TEST(TraceSummary, TracksCountedFromTheEvents) {
  Trace trace;
  trace.events = {
      {"a", "cpu_kernel", 0, 1, 0, 100, {}},
      {"b", "cpu_kernel", 0, 2, 0, 100, {}},
      {"c", "cpu_kernel", 0, 2, 200, 100, {}},
      {"d", "kernel", 3, 9, 0, 100, {}},
  };
  EXPECT_THAT(SummarizeTrace(trace), HasSubstr("4 events on 3 tracks in 2 processes"));
  trace.threads = {{0, 1, "main", 1}, {0, 5, "idle", 5}};
  trace.processes = {{0, "Host (CPU)", 0}, {7, "GPU 6", 7}};
  EXPECT_THAT(SummarizeTrace(trace), HasSubstr("4 events on 4 tracks in 3 processes"));

  std::string path = (std::filesystem::temp_directory_path() / fmt::format("xlens_tracks_{}.json", ::getpid())).string();
  ASSERT_TRUE(WriteFile(path, R"({"traceEvents":[{"ph":"X","name":"k","cat":"kernel","pid":4,"tid":2,"ts":0,"dur":1},
    {"ph":"X","name":"k","cat":"kernel","pid":4,"tid":3,"ts":1,"dur":1}]})").ok());
  auto streamed = SummarizeChromeTrace(path, 15);
  std::filesystem::remove(path);
  ASSERT_TRUE(streamed.ok()) << streamed.status().message();
  EXPECT_THAT(*streamed, HasSubstr("2 events on 2 tracks in 1 processes"));
}

// Past the bound of counted tracks the summary says "more than" instead of holding every one.
TEST(TraceSummary, TrackCountIsBounded) {
  Trace trace;
  for (int64_t tid = 0; tid < (int64_t{1} << 16) + 5; ++tid) trace.events.push_back({"k", "kernel", 0, tid, 0, 1, {}});
  EXPECT_THAT(SummarizeTrace(trace), HasSubstr("on more than 65536 tracks in 1 processes"));
}

TEST(TraceSummary, NoKernels) {
  Trace trace;
  trace.events = {{"compile m", "compile", 0, 1, 0, 100, {}}};
  EXPECT_THAT(SummarizeTrace(trace), HasSubstr("No kernels"));
}

// Names from a file reach the terminal escaped: a NUL neither cuts the line nor merges two names,
// an escape sequence shows as text.
TEST(TraceSummary, NamesAreEscapedAndKeptWhole) {
  Trace trace;
  trace.events = {
      {std::string("a\0b", 3), "kernel", 1, 7, 0, 3000, {}},
      {std::string("a\0c", 3), "kernel", 1, 7, 0, 2000, {}},
      {"\x1b[2J\x1b[31mred\x07", "kernel", 1, 7, 0, 1000, {}},
      {"k", "cat\x1b]0;title\x07", 1, 7, 0, 1000, {}},
  };
  std::string text = SummarizeTrace(trace);
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find('\x07'), std::string::npos);
  EXPECT_THAT(text, HasSubstr("Top kernels (3 distinct"));
  EXPECT_THAT(text, HasSubstr("a\\x00b"));
  EXPECT_THAT(text, HasSubstr("a\\x00c"));
  EXPECT_THAT(text, HasSubstr("\\x1b[2J\\x1b[31mred\\x07"));
  EXPECT_THAT(text, HasSubstr("cat\\x1b]0;title\\x07"));
}

TEST(TraceSummary, VeryLongNamesAreShortenedWithTheirLength) {
  Trace trace;
  trace.events = {{std::string(5000, 'n'), "kernel", 1, 7, 0, 1000, {}}};
  std::string text = SummarizeTrace(trace);
  EXPECT_THAT(text, HasSubstr(std::string(1000, 'n') + "... (5000 bytes)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr(std::string(1001, 'n'))));
}

// Durations are at most 2^62 ns each (the reader refuses more); their sums are 128-bit and
// never wrap, and the span from first to last does not either.
TEST(TraceSummary, SumsOfHugeDurationsDoNotOverflow) {
  constexpr int64_t kHuge = (int64_t{1} << 62) - 1;
  Trace trace;
  for (int i = 0; i < 4; ++i) trace.events.push_back({"k", "kernel", 1, 7, -kHuge, kHuge, {}});
  trace.events.push_back({"late", "kernel", 1, 7, kHuge, kHuge, {}});
  std::string text = SummarizeTrace(trace);
  // 4 * (2^62 - 1) ns = 18446744073709.551612 ms, more than INT64_MAX ns.
  EXPECT_THAT(text, HasSubstr("18446744073709.55"));
  // From -(2^62-1) to 2*(2^62-1): 13835058055282.163 ms.
  EXPECT_THAT(text, HasSubstr("13835058055282.16"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr(" -")));
}

// The streamed summary of a file says what the summary of the same trace in memory says.
TEST(TraceSummary, StreamedFromAFileAsInMemory) {
  Trace trace;
  trace.base_ns = 1'000'000;
  trace.processes = {{0, "Host (CPU)", 0}};
  trace.threads = {{0, 1, "main", 1}, {0, 2, "other", 2}};
  trace.events = {
      {"execute m", "execute", 0, 1, 1'000'000, 10'000'000, {}},
      {"fusion.3", "cpu_kernel", 0, 1, 1'000'100, 3'000'000, {{"hlo_op", std::string("fusion.3")}}},
      {"dot.1", "library_call", 0, 2, 7'000'000, 2'000'000, {}},
  };
  trace.metadata = {{"dropped_records", int64_t{2}}};
  std::string path = (std::filesystem::temp_directory_path() / fmt::format("xlens_summary_{}.json.gz", ::getpid())).string();
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto streamed = SummarizeChromeTrace(path, 15);
  std::filesystem::remove(path);
  ASSERT_TRUE(streamed.ok()) << streamed.status().message();
  EXPECT_EQ(*streamed, SummarizeTrace(trace, 15));
  EXPECT_THAT(*streamed, HasSubstr("3 events on 2 tracks in 1 processes, 10.000 ms"));
  EXPECT_THAT(*streamed, HasSubstr("warning: dropped_records = 2"));
}

// A run on several devices: a line per device of its collectives, what they moved, how long it
// waited and for whom, named by its process, the same streamed from the file as in memory.
TEST(TraceSummary, CollectivesByDevice) {
  Trace trace;
  trace.processes = {{0, "Host (CPU)", 0}, {1000, "CPU device 0 (replica 0, partition 0)", 1},
                     {1001, "CPU device 1 (replica 0, partition 1)", 2}};
  auto collective = [](int32_t pid, int64_t start, int64_t wait, int64_t last) {
    return TraceEvent{"ar.1", "collective", pid, 1, start, 5'000'000,
                      {{"bytes", int64_t{2'000'000}}, {"wait_ns", wait}, {"last_arrival", last}}};
  };
  // Device 1 waits 3 ms and 1 ms for device 0; device 0 waits for no one.
  trace.events = {collective(1000, 4'000'000, 0, 0), collective(1001, 1'000'000, 3'000'000, 0),
                  collective(1000, 20'000'000, 0, 0), collective(1001, 19'000'000, 1'000'000, 0)};
  std::string summary = SummarizeTrace(trace, 15);
  EXPECT_THAT(summary, HasSubstr("Collectives by device"));
  EXPECT_THAT(summary, HasSubstr("            2      4.000      0.000  -                       "
                                 "CPU device 0 (replica 0, partition 0)\n"));
  EXPECT_THAT(summary, HasSubstr("            2      4.000      4.000  device 0 (4.000 ms)     "
                                 "CPU device 1 (replica 0, partition 1)\n"));
  EXPECT_THAT(summary, HasSubstr(SummarizeDeviceCollectives(trace)));
  std::string path = (std::filesystem::temp_directory_path() / fmt::format("xlens_summary_devices_{}.json", ::getpid())).string();
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto streamed = SummarizeChromeTrace(path, 15);
  std::filesystem::remove(path);
  ASSERT_TRUE(streamed.ok()) << streamed.status().message();
  EXPECT_EQ(*streamed, summary);
}

// Names are kept up to a budget (64 MiB, or the input limit when smaller); the events of names
// beyond it are counted together, the totals stay whole and the summary says so.
TEST(TraceSummary, DistinctNamesBeyondTheBudgetAreCountedTogether) {
  Trace trace;
  for (int i = 0; i < 500; ++i) trace.events.push_back({fmt::format("kernel_{}", i), "kernel", 1, 7, 0, 1'000'000, {}});
  SetMaxInputBytes(16 << 10);
  std::string text = SummarizeTrace(trace, 1000);
  SetMaxInputBytes(-1);
  EXPECT_THAT(text, HasSubstr("500 events"));
  EXPECT_THAT(text, HasSubstr("distinct and more, 500.000 ms in all"));
  EXPECT_THAT(text, HasSubstr("(other kernels)"));
  EXPECT_THAT(text, HasSubstr("warning: more distinct names than the summary keeps (16 KiB of them)"));
  EXPECT_THAT(SummarizeTrace(trace, 1000), ::testing::Not(HasSubstr("(other kernels)")));
}

TEST(TraceSummary, ErrorsComeFromTheReader) {
  std::string path = (std::filesystem::temp_directory_path() / fmt::format("xlens_summary_{}.json", ::getpid())).string();
  ASSERT_TRUE(WriteFile(path, "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":1e400}]}").ok());
  auto summary = SummarizeChromeTrace(path);
  std::filesystem::remove(path);
  ASSERT_FALSE(summary.ok());
  EXPECT_THAT(summary.status().message(), HasSubstr("event 0: \"ts\": number out of range: 1e400"));
}

}  // namespace
}  // namespace xlens::profiler
