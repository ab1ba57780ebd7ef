#include "profiler/chrome_trace_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/support/file_io.h"
#include "profiler/trace_schema.h"
#include "tests/scratch_directory.h"

namespace xlens::profiler {
namespace {

namespace fs = std::filesystem;

// In one folder per test process, removed when the process ends (or is signalled).
std::string TempPath(const std::string& name) {
  return xlens::testing::ScratchDirectory("trace-writer-test") + "/" + name;
}

// A small timeline in the shape the runtime and CUPTI collector produce.
Trace SampleTrace() {
  Trace trace;
  trace.base_ns = 1'000'000'000;
  trace.processes = {{kHostPid, "Host (CPU)", 0}, {kGpuPidBase, "GPU 0", 1}};
  trace.threads = {{kHostPid, 1, "main", 1}, {kGpuPidBase, 7, "stream 7", 7}};
  TraceEvent execute{"execute m", category::kExecute, kHostPid, 1, trace.base_ns + 1000, 9000, {}};
  TraceEvent kernel{"fusion.3", category::kCpuKernel, kHostPid, 1, trace.base_ns + 2000, 1500,
                    {{"hlo_op", std::string("fusion.3")},
                     {"fusion_kind", std::string("kLoop")},
                     {"op_names", std::string("dense/MatMul;dense/BiasAdd")},
                     {"module", std::string("m")},
                     {"bytes_accessed", int64_t{4096}},
                     {"flops", int64_t{1024}},
                     {"achieved GB/s", 2.73}}};
  TraceEvent launch{"cuLaunchKernel", category::kCudaDriver, kHostPid, 1, trace.base_ns + 4000, 250,
                    {{"correlation", int64_t{12}}}};
  launch.flow_out = 12;
  TraceEvent gpu{"fusion_3", category::kGpuKernel, kGpuPidBase, 7, trace.base_ns + 5000, 123,
                 {{"device", int64_t{0}},
                  {"stream", int64_t{7}},
                  {"correlation", int64_t{12}},
                  {"grid", std::vector<int64_t>{4, 1, 1}},
                  {"block", std::vector<int64_t>{128, 1, 1}},
                  {"registers per thread", int64_t{32}},
                  {"shared memory", int64_t{0}},
                  {"hlo_op", std::string("fusion.3")},
                  {"fusion_kind", std::string("kLoop")},
                  {"op_names", std::string("dense/MatMul;dense/BiasAdd")},
                  {"module", std::string("m")},
                  {"bytes_accessed", int64_t{4096}},
                  {"flops", int64_t{1024}}}};
  gpu.flow_in = 12;
  trace.events = {execute, kernel, launch, gpu};
  trace.metadata = {{"dropped_records", int64_t{0}}, {"kernels_before_launch", int64_t{0}}};
  return trace;
}

TEST(FormatMicros, NanosecondPrecisionAndSign) {
  EXPECT_EQ(FormatMicros(0), "0.000");
  EXPECT_EQ(FormatMicros(12345), "12.345");
  EXPECT_EQ(FormatMicros(-250), "-0.250");
  EXPECT_EQ(FormatMicros(3'600'000'000'007), "3600000000.007");
}

TEST(JsonEscape, QuotesBackslashesControlsAndBadUtf8) {
  std::string out;
  AppendJsonEscaped("a\"b\\c\n\t\x01", out);
  EXPECT_EQ(out, "a\\\"b\\\\c\\n\\t\\u0001");
  out.clear();
  AppendJsonEscaped("caf\xc3\xa9 \xe2\x9c\x93", out);  // valid UTF-8 is kept
  EXPECT_EQ(out, "caf\xc3\xa9 \xe2\x9c\x93");
  out.clear();
  AppendJsonEscaped("x\xff\xc3y\xed\xa0\x80", out);  // stray bytes, a cut sequence, a surrogate
  EXPECT_EQ(out, "x\xef\xbf\xbd\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
  EXPECT_NO_THROW((void)nlohmann::json::parse("\"" + out + "\""));
}

TEST(ChromeTraceWriter, WritesTheContract) {
  std::string path = TempPath("timeline.ctf.json");
  ASSERT_TRUE(WriteChromeTrace(SampleTrace(), path).ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  nlohmann::json doc = nlohmann::json::parse(*text);
  EXPECT_THAT(testing::CheckTraceSchema(doc), ::testing::IsEmpty());
  EXPECT_EQ(doc["baseTimeNanoseconds"], 1'000'000'000);
  EXPECT_EQ(doc["otherData"]["producer"], "xlens");
  EXPECT_EQ(doc["otherData"]["dropped_records"], 0);
  int kernels = 0, flows = 0;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "fusion.3") {
      ++kernels;
      EXPECT_EQ(e["ts"].get<double>(), 2.0);
      EXPECT_EQ(e["dur"].get<double>(), 1.5);
      EXPECT_EQ(e["args"]["fusion_kind"], "kLoop");
      EXPECT_EQ(e["args"]["bytes_accessed"], 4096);
    }
    if (e["ph"] == "f") {
      ++flows;
      EXPECT_EQ(e["id"], 12);
      EXPECT_EQ(e["pid"], kGpuPidBase);
      EXPECT_EQ(e["ts"].get<double>(), 5.0) << "the flow ends where the kernel starts";
    }
    if (e["ph"] == "X" && e["cat"] == "kernel") {
      EXPECT_EQ(e["args"]["grid"], nlohmann::json::array({4, 1, 1}));
    }
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(flows, 1);
  // No temporary file is left beside it.
  for (const auto& entry : fs::directory_iterator(fs::path(path).parent_path())) {
    EXPECT_FALSE(IsTemporaryName(entry.path().filename().string())) << entry.path();
  }
}

TEST(ChromeTraceWriter, WallClockBaseAsPyTorchWritesIt) {
  Trace trace = SampleTrace();
  trace.wall_base_ns = 1'763'900'000'000'000'000;
  std::string path = TempPath("wall.json");
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  nlohmann::json doc = nlohmann::json::parse(*ReadFile(path));
  EXPECT_EQ(doc["baseTimeNanoseconds"].get<int64_t>(), trace.wall_base_ns);
  EXPECT_EQ(doc["otherData"]["steady_clock_base_ns"].get<int64_t>(), trace.base_ns);
  // Event times stay relative to the base, whichever clock names it.
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] == "X" && e["name"] == "fusion.3") EXPECT_EQ(e["ts"].get<double>(), 2.0);
  }
}

TEST(ChromeTraceWriter, GzipWhenTheNameSaysSo) {
  std::string path = TempPath("timeline.ctf.json.gz");
  ASSERT_TRUE(WriteChromeTrace(SampleTrace(), path).ok());
  std::ifstream in(path, std::ios::binary);
  unsigned char magic[2] = {0, 0};
  in.read(reinterpret_cast<char*>(magic), 2);
  EXPECT_EQ(magic[0], 0x1f);
  EXPECT_EQ(magic[1], 0x8b);
  gzFile gz = gzopen(path.c_str(), "rb");
  ASSERT_NE(gz, nullptr);
  std::string text;
  char buffer[4096];
  int n;
  while ((n = gzread(gz, buffer, sizeof(buffer))) > 0) text.append(buffer, n);
  gzclose(gz);
  EXPECT_THAT(testing::CheckTraceSchema(nlohmann::json::parse(text)), ::testing::IsEmpty());
}

TEST(ChromeTraceWriter, HostileStringsStayValidJson) {
  Trace trace = SampleTrace();
  std::string hostile = "\"}],{\\\n\x02\xff" + std::string(1 << 20, 'x');
  trace.events[1].name = hostile;
  for (TraceArg& arg : trace.events[1].args) {
    if (arg.key == "op_names") arg.value = hostile;
  }
  trace.threads[0].name = "quote\"thread";
  std::string path = TempPath("hostile.json");
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  nlohmann::json doc = nlohmann::json::parse(*text);
  EXPECT_THAT(testing::CheckTraceSchema(doc), ::testing::IsEmpty());
}

// The schema check itself: a kernel that lost a key of its link to the HLO is reported.
TEST(ChromeTraceWriter, SchemaCheckNamesAKernelWithoutItsHloKeys) {
  for (const char* key : {"op_names", "fusion_kind", "hlo_op", "bytes_accessed"}) {
    Trace trace = SampleTrace();
    std::vector<TraceArg>& args = trace.events[1].args;
    std::erase_if(args, [&](const TraceArg& a) { return a.key == key; });
    std::string path = TempPath(std::string("without_") + key + ".json");
    ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
    auto text = ReadFile(path);
    ASSERT_TRUE(text.ok());
    std::vector<std::string> problems = testing::CheckTraceSchema(nlohmann::json::parse(*text));
    EXPECT_THAT(problems, ::testing::Contains(::testing::HasSubstr(std::string("args.") + key)))
        << key;
  }
}

TEST(ChromeTraceWriter, LargeTracesStreamAndStayValid) {
  Trace trace = SampleTrace();
  TraceEvent base = trace.events[1];
  for (int i = 0; i < 50000; ++i) {
    base.start_ns = trace.base_ns + 20000 + i * 10;
    base.duration_ns = 5;
    trace.events.push_back(base);
  }
  std::string path = TempPath("large.json");
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  nlohmann::json doc = nlohmann::json::parse(*text);
  EXPECT_THAT(testing::CheckTraceSchema(doc), ::testing::IsEmpty());
  EXPECT_GT(doc["traceEvents"].size(), 50000u);
}

TEST(ChromeTraceWriter, UnwritablePathIsAnErrorAndLeavesNothing) {
  Status status = WriteChromeTrace(SampleTrace(), "/nonexistent-dir/timeline.ctf.json");
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("/nonexistent-dir/timeline.ctf.json"));
}

// A symlink's target is replaced and the link kept, as every writer does (file_io.h).
TEST(ChromeTraceWriter, WritesThroughSymlinksToTheirTarget) {
  for (const char* name : {"target.json", "target.json.gz"}) {
    SCOPED_TRACE(name);
    std::string target = TempPath(name);
    std::string link = TempPath(std::string("link-to-") + name);
    ASSERT_TRUE(WriteFile(target, "old").ok());
    fs::remove(link);
    fs::create_symlink(target, link);
    ASSERT_TRUE(WriteChromeTrace(SampleTrace(), link).ok());
    EXPECT_TRUE(fs::is_symlink(link)) << "the link is kept";
    auto written = ReadFile(target);
    ASSERT_TRUE(written.ok());
    EXPECT_NE(*written, "old") << "the target holds the trace";
    EXPECT_GT(written->size(), 100u);
  }
}

// /dev/null (a character device) is written through, plain and gzip, and stays a device.
TEST(ChromeTraceWriter, WritesThroughDevices) {
  for (const char* path : {"/dev/null"}) {
    ASSERT_TRUE(WriteChromeTrace(SampleTrace(), path).ok());
    EXPECT_TRUE(fs::is_character_file(path));
  }
  // A name ending in .gz that is a link to /dev/null: gzip goes to the device.
  std::string link = TempPath("null.json.gz");
  fs::remove(link);
  fs::create_symlink("/dev/null", link);
  ASSERT_TRUE(WriteChromeTrace(SampleTrace(), link).ok());
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_TRUE(fs::is_symlink(link));
}

TEST(ChromeTraceWriter, ADirectoryIsRefusedAndLeftAlone) {
  std::string dir = TempPath("a-directory.json");
  fs::create_directories(dir);
  Status status = WriteChromeTrace(SampleTrace(), dir);
  ASSERT_FALSE(status.ok());
  EXPECT_THAT(status.message(), ::testing::HasSubstr("is a directory"));
  EXPECT_TRUE(fs::is_directory(dir));
}

TEST(ChromeTraceWriter, NonFiniteNumbersBecomeNull) {
  Trace trace = SampleTrace();
  trace.events[1].args.push_back({"ratio", std::numeric_limits<double>::infinity()});
  std::string path = TempPath("inf.json");
  ASSERT_TRUE(WriteChromeTrace(trace, path).ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_NO_THROW((void)nlohmann::json::parse(*text));
}

}  // namespace
}  // namespace xlens::profiler
