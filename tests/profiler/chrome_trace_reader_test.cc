#include "profiler/chrome_trace_reader.h"

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <map>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "profiler/chrome_trace_writer.h"

namespace xlens::profiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string TempPath(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / fmt::format("xlens_reader_test_{}", ::getpid());
  fs::create_directories(dir);
  return (dir / name).string();
}

std::string Testdata(const std::string& name) { return std::string(XLENS_TESTDATA_DIR) + "/" + name; }

const TraceEvent* Find(const Trace& trace, const std::string& name) {
  for (const TraceEvent& e : trace.events) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

Trace Sample() {
  Trace trace;
  trace.base_ns = 5'000'000'123;
  trace.processes = {{kHostPid, "Host (CPU)", 0}, {kGpuPidBase, "GPU 0", 1}};
  trace.threads = {{kHostPid, 1, "main", 1}, {kGpuPidBase, 7, "stream 7", 7}};
  TraceEvent kernel{"fusion.3", category::kCpuKernel, kHostPid, 1, trace.base_ns + 1001, 2002,
                    {{"hlo_op", std::string("fusion.3")}, {"bytes_accessed", int64_t{4096}},
                     {"achieved GB/s", 2.5}, {"grid", std::vector<int64_t>{4, 1, 1}}}};
  TraceEvent launch{"cuLaunchKernel", category::kCudaDriver, kHostPid, 1, trace.base_ns + 4000, 100, {}};
  launch.flow_out = 9;
  TraceEvent gpu{"k", category::kGpuKernel, kGpuPidBase, 7, trace.base_ns + 4500, 300, {}};
  gpu.flow_in = 9;
  trace.events = {kernel, launch, gpu};
  trace.metadata = {{"dropped_records", int64_t{3}}};
  return trace;
}

TEST(ChromeTraceReader, ReadsBackWhatTheWriterWrites) {
  for (const char* name : {"roundtrip.json", "roundtrip.json.gz"}) {
    SCOPED_TRACE(name);
    std::string path = TempPath(name);
    Trace written = Sample();
    ASSERT_TRUE(WriteChromeTrace(written, path).ok());
    auto read = ReadChromeTrace(path);
    ASSERT_TRUE(read.ok()) << read.status().message();
    EXPECT_EQ(read->base_ns, written.base_ns);
    ASSERT_EQ(read->events.size(), 3u);
    const TraceEvent* kernel = Find(*read, "fusion.3");
    ASSERT_NE(kernel, nullptr);
    EXPECT_EQ(kernel->start_ns, written.events[0].start_ns) << "nanoseconds survive the round trip";
    EXPECT_EQ(kernel->duration_ns, 2002);
    EXPECT_EQ(kernel->category, "cpu_kernel");
    EXPECT_EQ(std::get<int64_t>(FindArg(*kernel, "bytes_accessed")->value), 4096);
    EXPECT_DOUBLE_EQ(std::get<double>(FindArg(*kernel, "achieved GB/s")->value), 2.5);
    EXPECT_EQ(std::get<std::vector<int64_t>>(FindArg(*kernel, "grid")->value),
              (std::vector<int64_t>{4, 1, 1}));
    EXPECT_EQ(Find(*read, "cuLaunchKernel")->flow_out, 9);
    EXPECT_EQ(Find(*read, "k")->flow_in, 9);
    ASSERT_EQ(read->processes.size(), 2u);
    EXPECT_EQ(read->processes[1].name, "GPU 0");
    ASSERT_EQ(read->threads.size(), 2u);
    EXPECT_EQ(read->threads[1].name, "stream 7");
    ASSERT_NE(read->FindMetadata("dropped_records"), nullptr);
    EXPECT_EQ(std::get<int64_t>(read->FindMetadata("dropped_records")->value), 3);
  }
}

TEST(ChromeTraceReader, ReadsPyTorchProfilerTraces) {
  auto trace = ReadChromeTrace(Testdata("pytorch_profiler_sample.json"));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  const TraceEvent* kernel = Find(*trace, "ampere_sgemm_32x32_sliced1x4_nn");
  ASSERT_NE(kernel, nullptr);
  EXPECT_EQ(kernel->category, "kernel");
  EXPECT_EQ(kernel->start_ns, 1700000000000000000 + 118500);
  EXPECT_EQ(kernel->duration_ns, 12000);
  EXPECT_EQ(std::get<int64_t>(FindArg(*kernel, "registers per thread")->value), 128);
  EXPECT_EQ(kernel->flow_in, 311);
  EXPECT_EQ(Find(*trace, "cudaLaunchKernel")->flow_out, 311);
  // Nested shape lists are kept as text.
  EXPECT_EQ(std::get<std::string>(FindArg(*Find(*trace, "aten::mm"), "Input Dims")->value),
            "[[64,128],[128,32]]");
  EXPECT_NE(Find(*trace, "Iteration Start: PyTorch Profiler"), nullptr) << "instant events";
  // Kineto's "pid": "" names a track of its own, not the GPU's process 0.
  const TraceEvent* window_end = Find(*trace, "Record Window End");
  ASSERT_NE(window_end, nullptr);
  EXPECT_NE(window_end->pid, kernel->pid);
  bool stream_named = false;
  for (const TraceThread& t : trace->threads) stream_named |= t.name == "stream 7 ";
  EXPECT_TRUE(stream_named);
}

TEST(ChromeTraceReader, ArrayFormAndBeginEndPairs) {
  // Chrome's array form may lack its closing bracket (a trace cut off while recording).
  std::string text =
      "[{\"ph\":\"B\",\"name\":\"outer\",\"pid\":1,\"tid\":2,\"ts\":10},\n"
      "{\"ph\":\"B\",\"name\":\"inner\",\"pid\":1,\"tid\":2,\"ts\":11},\n"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":12.5},\n"
      "{\"ph\":\"E\",\"pid\":1,\"tid\":2,\"ts\":20},\n";
  auto trace = ParseChromeTrace(text, "array.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->events.size(), 2u);
  EXPECT_EQ(Find(*trace, "inner")->duration_ns, 1500);
  EXPECT_EQ(Find(*trace, "outer")->duration_ns, 10000);
}

// Every file of the broken-trace corpus gives one clear error naming the file.
TEST(ChromeTraceReader, BrokenTracesGiveClearErrors) {
  const std::map<std::string, std::string> expected = {
      {"truncated.json", "truncated.json:1:"},
      {"not_json.txt", "not_json.txt:1:2: not valid JSON: syntax error while parsing value"},
      {"ts_is_a_string.json", "event 0 (\"a\"): \"ts\" must be a number, not string"},
      {"negative_dur.json", "\"dur\" is negative"},
      {"events_not_a_list.json", "\"traceEvents\" must be a list, not object"},
      {"event_not_an_object.json", "event 0: expected an object, not number"},
      {"missing_phase.json", "expected \"ph\" (a string)"},
      {"pid_is_a_list.json", "\"pid\" must be a number or a string, not array"},
      {"missing_dur.json", "expected \"dur\" (microseconds)"},
      {"flow_without_id.json", "a flow event needs an \"id\""},
      {"ts_out_of_range.json", "\"ts\" is out of range"},
      {"no_trace_events.json", "expected a \"traceEvents\" list"},
      {"base_time_not_integer.json", "\"baseTimeNanoseconds\" must be an integer, not string"},
      {"top_level_string.json", "expected a JSON object with \"traceEvents\" or a list of events, not string"},
      {"empty.json", "empty file"},
      {"lone_surrogate.json", "not valid JSON"},
  };
  int checked = 0;
  for (const auto& entry : fs::directory_iterator(Testdata("broken"))) {
    std::string name = entry.path().filename().string();
    SCOPED_TRACE(name);
    auto it = expected.find(name);
    ASSERT_NE(it, expected.end()) << "a broken trace without an expected error";
    auto trace = ReadChromeTrace(entry.path().string());
    ASSERT_FALSE(trace.ok());
    EXPECT_THAT(trace.status().message(), HasSubstr(name));
    EXPECT_THAT(trace.status().message(), HasSubstr(it->second));
    EXPECT_EQ(trace.status().message().find('\n'), std::string::npos) << "one line";
    ++checked;
  }
  EXPECT_EQ(checked, static_cast<int>(expected.size()));
}

TEST(ChromeTraceReader, MissingFile) {
  auto trace = ReadChromeTrace("/nonexistent/timeline.ctf.json");
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("/nonexistent/timeline.ctf.json: cannot open"));
}

TEST(ChromeTraceReader, TruncatedGzip) {
  std::string path = TempPath("whole.json.gz");
  ASSERT_TRUE(WriteChromeTrace(Sample(), path).ok());
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  std::string cut = TempPath("cut.json.gz");
  ASSERT_TRUE(WriteFileAtomic(cut, bytes->substr(0, bytes->size() / 2)).ok());
  auto trace = ReadChromeTrace(cut);
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("cut.json.gz"));
}

TEST(ChromeTraceReader, HugeStringsAndDeepNestingDoNotCrash) {
  std::string huge = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"" + std::string(64 << 20, 'a') +
                     "\",\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":1}]}";
  auto trace = ParseChromeTrace(huge, "huge.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->events.at(0).name.size(), size_t{64} << 20);

  std::string deep = "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"a\",\"pid\":0,\"tid\":1,\"ts\":1,"
                     "\"dur\":1,\"args\":{\"x\":" +
                     std::string(100000, '[') + std::string(100000, ']') + "}}]}";
  auto nested = ParseChromeTrace(deep, "deep.json");
  EXPECT_TRUE(nested.ok()) << nested.status().message();

  std::string unclosed = "{\"traceEvents\":[" + std::string(100000, '[');
  auto broken = ParseChromeTrace(unclosed, "unclosed.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("unclosed.json:1:"));
}

}  // namespace
}  // namespace xlens::profiler
