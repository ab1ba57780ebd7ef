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
#include "tests/scratch_directory.h"

namespace xlens::profiler {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// In one folder per test process, removed when the process ends (or is signalled).
std::string TempPath(const std::string& name) {
  return xlens::testing::ScratchDirectory("trace-reader-test") + "/" + name;
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

TEST(ChromeTraceReader, GzipIsRecognisedByItsMagicBytes) {
  auto plain = ReadChromeTrace(Testdata("pytorch_profiler_sample.json"));
  auto gzip = ReadChromeTrace(Testdata("pytorch_profiler_sample.json.gz"));
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  ASSERT_TRUE(gzip.ok()) << gzip.status().message();
  ASSERT_EQ(gzip->events.size(), plain->events.size());
  for (size_t i = 0; i < plain->events.size(); ++i) {
    EXPECT_EQ(gzip->events[i].name, plain->events[i].name);
    EXPECT_EQ(gzip->events[i].start_ns, plain->events[i].start_ns);
  }
  // Whatever the name says.
  std::string renamed = TempPath("gzip-named.json");
  ASSERT_TRUE(WriteFile(renamed, *ReadFile(Testdata("pytorch_profiler_sample.json.gz"))).ok());
  auto read = ReadChromeTrace(renamed);
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ(read->events.size(), plain->events.size());
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
      {"only_spaces.json", "empty file"},
      {"lone_surrogate.json", "not valid JSON"},
      // A number beyond a double is an error at its place, not an exception.
      {"number_overflow.json", "number_overflow.json:2:43: event 0: \"ts\": number out of range: 1e400"},
      {"dur_out_of_range.json", "event 0 (\"k\"): \"dur\" is out of range: 1e17 us"},
      {"ts_beyond_int64.json", "event 0 (\"k\"): \"ts\" is out of range: 18446744073709551615 us"},
      {"pid_out_of_range.json", "event 0 (\"k\"): \"pid\" is out of range: 1e300"},
      {"base_time_out_of_range.json", "\"baseTimeNanoseconds\" is out of range: 9223372036854775807"},
      {"trailing_garbage.json", "trailing_garbage.json:1:20: not valid JSON: syntax error"},
      {"truncated.json.gz", "truncated.json.gz: the gzip stream is cut short"},
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

std::string Gzip(const std::string& text, int level = 6) {
  std::string out(compressBound(text.size()) + 64, '\0');
  z_stream z{};
  EXPECT_EQ(deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY), Z_OK);
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  EXPECT_EQ(deflate(&z, Z_FINISH), Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

std::string Event(const std::string& name, const std::string& rest = "") {
  return "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"" + name + "\",\"pid\":0,\"tid\":1,\"ts\":1,\"dur\":2" + rest + "}";
}

std::string Events(const std::vector<std::string>& events) {
  std::string text = "{\"traceEvents\":[";
  for (size_t i = 0; i < events.size(); ++i) text += (i ? "," : "") + events[i];
  return text + "]}";
}

// The longest token the reader holds is 16 MiB; longer ones are refused before they are held.
TEST(ChromeTraceReader, HugeStringsAreReadUpToTheTokenLimit) {
  auto trace = ParseChromeTrace(Events({Event(std::string(8 << 20, 'a'))}), "big.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->events.at(0).name.size(), size_t{8} << 20);

  auto huge = ParseChromeTrace(Events({Event(std::string(17 << 20, 'a'))}), "huge.json");
  ASSERT_FALSE(huge.ok());
  EXPECT_THAT(huge.status().message(), HasSubstr("huge.json:1:"));
  EXPECT_THAT(huge.status().message(), HasSubstr("a string longer than 16 MiB"));
  EXPECT_LT(huge.status().message().size(), 300u) << "the message does not quote the string";

  std::string long_number = "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":" + std::string(17 << 20, '1') + "}]}";
  auto number = ParseChromeTrace(long_number, "number.json");
  ASSERT_FALSE(number.ok());
  EXPECT_THAT(number.status().message(), HasSubstr("a number or literal longer than 16 MiB"));

  std::string spaces = "{\"traceEvents\":[" + std::string(17 << 20, ' ') + "]}";
  auto blank = ParseChromeTrace(spaces, "spaces.json");
  ASSERT_FALSE(blank.ok());
  EXPECT_THAT(blank.status().message(), HasSubstr("white space and brackets longer than 16 MiB"));
}

// The parser keeps no stack per level beyond a bounded one: 100000 levels are refused with a
// message, not a stack overflow; 200 levels of args are read and cut off as text.
TEST(ChromeTraceReader, DeepNestingIsBoundedWithAMessage) {
  std::string deep = Events({Event("a", ",\"args\":{\"x\":" + std::string(100000, '[') + std::string(100000, ']') + "}")});
  auto nested = ParseChromeTrace(deep, "deep.json");
  ASSERT_FALSE(nested.ok());
  EXPECT_THAT(nested.status().message(), HasSubstr("deep.json:1:"));
  EXPECT_THAT(nested.status().message(), HasSubstr("event 0: nested deeper than 256 levels"));

  // Skipped values are bounded the same way.
  std::string deep_top = "{\"skipped\":" + std::string(100000, '[');
  auto top = ParseChromeTrace(deep_top, "top.json");
  ASSERT_FALSE(top.ok());
  EXPECT_THAT(top.status().message(), HasSubstr("nested deeper than 256 levels"));

  std::string unclosed = "{\"traceEvents\":[" + std::string(100000, '{');
  auto broken = ParseChromeTrace(unclosed, "unclosed.json");
  ASSERT_FALSE(broken.ok());
  EXPECT_THAT(broken.status().message(), HasSubstr("unclosed.json:1:"));

  std::string fine = Events({Event("a", ",\"args\":{\"x\":" + std::string(200, '[') + std::string(200, ']') + "}")});
  auto read = ParseChromeTrace(fine, "fine.json");
  ASSERT_TRUE(read.ok()) << read.status().message();
  const auto& text = std::get<std::string>(FindArg(read->events.at(0), "x")->value);
  EXPECT_EQ(text, std::string(17, '[') + "..." + std::string(17, ']'));
}

// Names are kept byte for byte: a NUL (\u0000) does not cut them, escapes stay in the data (the
// summary escapes them for the terminal).
TEST(ChromeTraceReader, NamesWithNulAndControlsAreKeptWhole) {
  auto trace = ParseChromeTrace(Events({Event("a\\u0000b"), Event("\\u001b[31mred\\u001b[0m")}), "nul.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->events.at(0).name, std::string("a\0b", 3));
  EXPECT_EQ(trace->events.at(1).name, "\x1b[31mred\x1b[0m");
}

TEST(ChromeTraceReader, ErrorsEscapeWhatTheyQuote) {
  auto trace = ParseChromeTrace(Events({"{\"ph\":\"X\",\"name\":\"\\u001b[2J\",\"ts\":\"x\"}"}), "esc.json");
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("(\"\\x1b[2J\")"));
  EXPECT_EQ(trace.status().message().find('\x1b'), std::string::npos);
}

// ts and dur are exact for integers, refused beyond 2^62 ns, negative ts allowed (before the
// base), an "E" before its "B" closes a span of 0.
TEST(ChromeTraceReader, TimesAtTheEdges) {
  auto trace = ParseChromeTrace(
      "{\"baseTimeNanoseconds\":1000000,\"traceEvents\":["
      "{\"ph\":\"X\",\"name\":\"early\",\"ts\":-5,\"dur\":0},"
      "{\"ph\":\"X\",\"name\":\"late\",\"ts\":4611686018427387,\"dur\":4611686018427387},"
      "{\"ph\":\"B\",\"name\":\"backwards\",\"ts\":10},{\"ph\":\"E\",\"ts\":9}]}",
      "edges.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(Find(*trace, "early")->start_ns, 1000000 - 5000);
  EXPECT_EQ(Find(*trace, "late")->start_ns, 1000000 + int64_t{4611686018427387} * 1000);
  EXPECT_EQ(Find(*trace, "late")->duration_ns, int64_t{4611686018427387} * 1000);
  EXPECT_EQ(Find(*trace, "backwards")->duration_ns, 0);

  auto beyond = ParseChromeTrace("[{\"ph\":\"X\",\"name\":\"k\",\"ts\":4611686018427388,\"dur\":1}]", "b.json");
  ASSERT_FALSE(beyond.ok());
  EXPECT_THAT(beyond.status().message(), HasSubstr("b.json: event 0 (\"k\"): \"ts\" is out of range"));

  auto negative = ParseChromeTrace("[{\"ph\":\"X\",\"name\":\"k\",\"ts\":1,\"dur\":-0.5}]", "n.json");
  ASSERT_FALSE(negative.ok());
  EXPECT_THAT(negative.status().message(), HasSubstr("n.json: event 0 (\"k\"): \"dur\" is negative"));
}

// baseTimeNanoseconds may come after the events (Kineto writes it last); M events find their
// value by key whatever the order of args.
TEST(ChromeTraceReader, OrderOfKeysDoesNotMatter) {
  auto trace = ParseChromeTrace(
      "{\"traceEvents\":[{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":3,\"args\":{\"labels\":\"x\",\"name\":\"GPU 2\"}},"
      "{\"dur\":2,\"ts\":1,\"name\":\"k\",\"ph\":\"X\",\"pid\":3}],\"baseTimeNanoseconds\":7000}",
      "order.json");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->base_ns, 7000);
  EXPECT_EQ(Find(*trace, "k")->start_ns, 8000);
  ASSERT_EQ(trace->processes.size(), 1u);
  EXPECT_EQ(trace->processes[0].name, "GPU 2");

  auto listed = ParseChromeTrace("{\"traceEvents\":[],\"baseTimeNanoseconds\":[1]}", "list.json");
  ASSERT_FALSE(listed.ok());
  EXPECT_THAT(listed.status().message(), HasSubstr("\"baseTimeNanoseconds\" must be an integer, not array"));
}

TEST(ChromeTraceReader, TruncatedGzip) {
  std::string path = TempPath("whole.json.gz");
  ASSERT_TRUE(WriteChromeTrace(Sample(), path).ok());
  auto bytes = ReadFile(path);
  ASSERT_TRUE(bytes.ok());
  // Cut inside the data, and cut only the trailer (the JSON is whole, the stream is not).
  for (size_t keep : {bytes->size() / 2, bytes->size() - 4}) {
    SCOPED_TRACE(keep);
    std::string cut = TempPath("cut.json.gz");
    ASSERT_TRUE(WriteFile(cut, bytes->substr(0, keep)).ok());
    auto trace = ReadChromeTrace(cut);
    ASSERT_FALSE(trace.ok());
    EXPECT_THAT(trace.status().message(), HasSubstr("cut.json.gz: the gzip stream is cut short"));
  }
  std::string corrupt = *bytes;
  for (size_t i = 20; i < 40 && i < corrupt.size(); ++i) corrupt[i] = static_cast<char>(~corrupt[i]);
  auto trace = ParseChromeTrace(corrupt, "corrupt.json.gz");
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("corrupt.json.gz: not a valid gzip stream"));
}

TEST(ChromeTraceReader, ConcatenatedGzipMembersAreOneText) {
  std::string text = Events({Event("first"), Event("second")});
  size_t half = text.size() / 2;
  auto trace = ParseChromeTrace(Gzip(text.substr(0, half)) + Gzip(text.substr(half)), "two.json.gz");
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  EXPECT_EQ(trace->events.size(), 2u);
}

// A gzip bomb stops at the input limit (MaxInputBytes(), --max-input-size), uncompressed,
// and the message says how to raise it; within the limit a large stream is read in bounded memory.
TEST(ChromeTraceReader, GzipBombStopsAtTheInputLimit) {
  std::string text = "{\"traceEvents\":[";
  for (int i = 0; i < 40000; ++i) text += Event("k") + ",";
  text += Event("last") + "]}";
  std::string bomb = Gzip(text, 9);
  ASSERT_LT(bomb.size(), text.size() / 50);
  std::string path = TempPath("bomb.json.gz");
  ASSERT_TRUE(WriteFile(path, bomb).ok());

  SetMaxInputBytes(1 << 20);
  auto trace = ReadChromeTrace(path);
  SetMaxInputBytes(-1);
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("bomb.json.gz: uncompresses to more than 1 MiB, the limit on input files "
                                                  "(raise it with --max-input-size=SIZE or XLENS_MAX_INPUT_SIZE)"));

  auto whole = ReadChromeTrace(path);
  ASSERT_TRUE(whole.ok()) << whole.status().message();
  EXPECT_EQ(whole->events.size(), 40001u);
}

// What the reader holds while streaming ("B" events waiting for their "E", names of tracks) is
// bounded: 256 MiB, or the input limit when smaller.
TEST(ChromeTraceReader, WhatTheReaderHoldsIsBounded) {
  std::string open = "[";
  for (int i = 0; i < 1500; ++i) open += "{\"ph\":\"B\",\"name\":\"x\",\"ts\":1},";
  std::string named = "[";
  for (int i = 0; i < 1500; ++i) named += fmt::format("{{\"ph\":\"i\",\"tid\":\"t{}\",\"ts\":1}},", i);
  SetMaxInputBytes(64 << 10);
  auto spans = ParseChromeTrace(open, "open.json");
  auto tracks = ParseChromeTrace(named, "named.json");
  SetMaxInputBytes(-1);
  ASSERT_FALSE(spans.ok());
  EXPECT_THAT(spans.status().message(), HasSubstr("open.json: event "));
  EXPECT_THAT(spans.status().message(), HasSubstr("hold more than 64 KiB of track names and \"B\" events still open"));
  ASSERT_FALSE(tracks.ok());
  EXPECT_THAT(tracks.status().message(), HasSubstr("hold more than 64 KiB"));
  // Without the small limit, both read (the cut-off array form).
  EXPECT_TRUE(ParseChromeTrace(open, "open.json").ok());
  EXPECT_TRUE(ParseChromeTrace(named, "named.json").ok());
}

TEST(ChromeTraceReader, OnlyRegularFilesAreRead) {
  auto dir = ReadChromeTrace(fs::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(dir.status().message(), HasSubstr("is a directory"));
  auto device = ReadChromeTrace("/dev/zero");
  ASSERT_FALSE(device.ok());
  EXPECT_THAT(device.status().message(), HasSubstr("not a regular file"));
}

// The streaming interface: events one at a time, relative to a base given after them, flows by
// ordinal, and args only when wanted.
TEST(ChromeTraceReader, StreamsEventsToAVisitor) {
  struct Visitor : ChromeTraceVisitor {
    bool WantsArgs() const override { return false; }
    void OnEvent(TraceEvent& event) override {
      names.push_back(event.name);
      starts.push_back(event.start_ns);
      args += event.args.size();
    }
    void OnFlow(size_t ordinal, int64_t id, bool is_start, int64_t at_ns) override { flows.push_back({ordinal, id}); }
    std::vector<std::string> names;
    std::vector<int64_t> starts;
    std::vector<std::pair<size_t, int64_t>> flows;
    size_t args = 0;
  } visitor;
  std::string path = TempPath("stream.json");
  ASSERT_TRUE(WriteFile(path, "{\"traceEvents\":[" + Event("a", ",\"args\":{\"k\":[1,2]}") + "," +
                                  Event("b") + ",{\"ph\":\"s\",\"id\":5,\"pid\":0,\"tid\":1,\"ts\":2}],"
                                  "\"baseTimeNanoseconds\":100}")
                  .ok());
  auto header = StreamChromeTrace(path, visitor);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(header->base_ns, 100);
  EXPECT_EQ(visitor.names, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(visitor.starts, (std::vector<int64_t>{1000, 1000}));
  EXPECT_EQ(visitor.args, 0u);
  ASSERT_EQ(visitor.flows.size(), 1u);
  EXPECT_EQ(visitor.flows[0].second, 5);
}

// Counters reach visitors that ask for them: one sample per "C" event with its numeric args, a
// name that keeps ids apart as Chrome does, and times relative to the base like events. Visitors
// that do not ask (ReadChromeTrace) skip them, even broken ones, as before.
TEST(ChromeTraceReader, CountersReachVisitorsThatAskForThem) {
  struct Visitor : ChromeTraceVisitor {
    bool WantsCounters() const override { return true; }
    void OnEvent(TraceEvent& event) override { ++events; }
    void OnCounter(TraceCounterSample& sample) override { samples.push_back(std::move(sample)); }
    int events = 0;
    std::vector<TraceCounterSample> samples;
  } visitor;
  std::string path = TempPath("counters.json");
  ASSERT_TRUE(WriteFile(path, "{\"traceEvents\":[" + Event("a") +
                                  ",{\"ph\":\"C\",\"name\":\"mem\",\"cat\":\"m\",\"pid\":3,\"ts\":1.5,"
                                  "\"args\":{\"bytes\":1024,\"ratio\":0.25,\"note\":\"x\"}},"
                                  "{\"ph\":\"C\",\"name\":\"mem\",\"id\":7,\"pid\":3,\"ts\":2,\"args\":{\"bytes\":4}}],"
                                  "\"baseTimeNanoseconds\":100}")
                  .ok());
  auto header = StreamChromeTrace(path, visitor);
  ASSERT_TRUE(header.ok()) << header.status().message();
  EXPECT_EQ(visitor.events, 1);
  ASSERT_EQ(visitor.samples.size(), 2u);
  EXPECT_EQ(visitor.samples[0].name, "mem");
  EXPECT_EQ(visitor.samples[0].category, "m");
  EXPECT_EQ(visitor.samples[0].pid, 3);
  EXPECT_EQ(visitor.samples[0].ts_ns, 1500);
  using Values = std::vector<std::pair<std::string, double>>;
  EXPECT_EQ(visitor.samples[0].values, (Values{{"bytes", 1024.0}, {"ratio", 0.25}}));
  EXPECT_EQ(visitor.samples[1].name, "mem 7");
  EXPECT_EQ(visitor.samples[1].values, (Values{{"bytes", 4.0}}));

  // A counter without a time is an error for a reader of counters, and skipped by the others.
  std::string broken = Events({Event("a"), "{\"ph\":\"C\",\"name\":\"mem\",\"pid\":3,\"args\":{\"b\":1}}"});
  ASSERT_TRUE(WriteFile(path, broken).ok());
  auto refused = StreamChromeTrace(path, visitor);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("event 1 (\"mem\"): expected \"ts\""));
  auto skipped = ReadChromeTrace(path);
  ASSERT_TRUE(skipped.ok()) << skipped.status().message();
  EXPECT_EQ(skipped->events.size(), 1u);
}

}  // namespace
}  // namespace xlens::profiler
