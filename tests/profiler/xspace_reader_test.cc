#include "profiler/xspace_reader.h"

#include <unistd.h>

#include <filesystem>
#include <string>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/support/file_io.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/proto/xplane.pb.h"
#include "profiler/trace_summary.h"
#include "tests/scratch_directory.h"

namespace xlens::profiler {
namespace {

namespace fs = std::filesystem;
namespace xp = xlens::xplaneproto;
using ::testing::HasSubstr;

// In one folder per test process, removed when the process ends (or is signalled).
std::string TempPath(const std::string& name) {
  return xlens::testing::ScratchDirectory("xspace-test") + "/" + name;
}

void AddStat(xp::XPlane& plane, google::protobuf::RepeatedPtrField<xp::XStat>* stats, int64_t id,
             const std::string& value) {
  xp::XStat* stat = stats->Add();
  stat->set_metadata_id(id);
  stat->set_str_value(value);
}

// A host plane with two CPU thunks of jit_f (one stat by reference, as TensorFlow stores repeated
// strings) and a python line; a device plane with a stream kernel, its launch's correlation id,
// and the derived "XLA Ops" line that repeats it. The tables come after the lines, as TensorFlow
// writes them.
xp::XSpace Sample() {
  xp::XSpace space;
  space.add_hostnames("vm");
  xp::XPlane* host = space.add_planes();
  host->set_id(0);
  host->set_name("/host:CPU");
  xp::XLine* thread = host->add_lines();
  thread->set_id(7);
  thread->set_name("tf_XLAPjRtCpuClient");
  thread->set_timestamp_ns(1'000'000'000);
  xp::XEvent* thunk = thread->add_events();
  thunk->set_metadata_id(1);
  thunk->set_offset_ps(2'000'400);  // 2000.4 ns: rounds to 2000
  thunk->set_duration_ps(17'026'000);
  AddStat(*host, thunk->mutable_stats(), 10, "ynn_fusion");
  xp::XStat* module_ref = thunk->add_stats();
  module_ref->set_metadata_id(11);
  module_ref->set_ref_value(12);
  xp::XStat* run = thunk->add_stats();
  run->set_metadata_id(13);
  run->set_int64_value(-5);
  xp::XEvent* launch = thread->add_events();
  launch->set_metadata_id(2);
  launch->set_offset_ps(30'000'000);
  launch->set_duration_ps(1'000'000);
  xp::XStat* correlation = launch->add_stats();
  correlation->set_metadata_id(14);
  correlation->set_uint64_value(99);
  xp::XEvent* aggregated = thread->add_events();  // no time of its own: skipped
  aggregated->set_metadata_id(1);
  aggregated->set_num_occurrences(4);
  (*host->mutable_event_metadata())[1].set_name("ynn_fusion");
  (*host->mutable_event_metadata())[2].set_name("cuLaunchKernel");
  (*host->mutable_event_metadata())[2].set_display_name("cuLaunchKernel (driver)");
  for (auto [id, name] : std::initializer_list<std::pair<int64_t, const char*>>{
           {10, "hlo_op"}, {11, "hlo_module"}, {12, "jit_f"}, {13, "run_id"}, {14, "correlation_id"}}) {
    (*host->mutable_stat_metadata())[id].set_name(name);
  }

  xp::XPlane* device = space.add_planes();
  device->set_name("/device:GPU:0");
  xp::XLine* stream = device->add_lines();
  stream->set_id(3);
  stream->set_display_id(1);
  stream->set_name("Stream #3");
  stream->set_display_name("Stream #3(Compute)");
  stream->set_timestamp_ns(1'000'000'000);
  xp::XEvent* kernel = stream->add_events();
  kernel->set_metadata_id(5);
  kernel->set_offset_ps(40'000'000);
  kernel->set_duration_ps(3'000'000);
  xp::XStat* kernel_correlation = kernel->add_stats();
  kernel_correlation->set_metadata_id(2);
  kernel_correlation->set_uint64_value(99);
  xp::XLine* ops = device->add_lines();
  ops->set_id(-1);
  ops->set_name("XLA Ops");
  ops->set_timestamp_ns(1'000'000'000);
  xp::XEvent* op = ops->add_events();
  op->set_metadata_id(5);
  op->set_offset_ps(40'000'000);
  op->set_duration_ps(3'000'000);
  xp::XEventMetadata& fusion = (*device->mutable_event_metadata())[5];
  fusion.set_name("loop_add_fusion");
  // The kernel's HLO names on its metadata, shared by every launch.
  AddStat(*device, fusion.mutable_stats(), 1, "loop_add_fusion");
  xp::XStat* bytes = fusion.add_stats();
  bytes->set_metadata_id(3);
  bytes->set_bytes_value(std::string(100, 'x'));  // dropped
  (*device->mutable_stat_metadata())[1].set_name("hlo_op");
  (*device->mutable_stat_metadata())[2].set_name("correlation_id");
  (*device->mutable_stat_metadata())[3].set_name("Hlo Proto");
  return space;
}

std::string Bytes(const xp::XSpace& space) {
  std::string bytes;
  EXPECT_TRUE(space.SerializeToString(&bytes));
  return bytes;
}

StatusOr<Trace> Read(const std::string& bytes, const std::string& name = "t.xplane.pb") {
  std::string path = TempPath(name);
  EXPECT_TRUE(WriteFile(path, bytes).ok());
  return ReadChromeTrace(path);
}

const TraceEvent* Find(const Trace& trace, const std::string& name, int32_t pid) {
  for (const TraceEvent& e : trace.events) {
    if (e.name == name && e.pid == pid) return &e;
  }
  return nullptr;
}

std::string StringArg(const TraceEvent& event, const std::string& key) {
  const TraceArg* arg = FindArg(event, key);
  if (arg == nullptr || !std::holds_alternative<std::string>(arg->value)) return "<none>";
  return std::get<std::string>(arg->value);
}

TEST(XSpaceReaderTest, PlanesLinesAndEventsBecomeTheTraceModel) {
  auto trace = Read(Bytes(Sample()));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->events.size(), 4u);  // the aggregated event is not a span
  ASSERT_EQ(trace->processes.size(), 2u);
  EXPECT_EQ(trace->processes[0].name, "/host:CPU");
  EXPECT_EQ(trace->processes[1].name, "/device:GPU:0");
  ASSERT_EQ(trace->threads.size(), 3u);
  EXPECT_EQ(trace->threads[1].tid, 1);  // display_id
  EXPECT_EQ(trace->threads[1].name, "Stream #3(Compute)");

  const TraceEvent* thunk = Find(*trace, "ynn_fusion", 0);
  ASSERT_NE(thunk, nullptr);
  EXPECT_EQ(thunk->start_ns, 1'000'002'000);
  EXPECT_EQ(thunk->duration_ns, 17'026);
  EXPECT_EQ(thunk->category, category::kCpuKernel);
  EXPECT_EQ(StringArg(*thunk, "hlo_op"), "ynn_fusion");
  EXPECT_EQ(StringArg(*thunk, "hlo_module"), "jit_f");  // a ref_value, by the name it refers to
  ASSERT_NE(FindArg(*thunk, "run_id"), nullptr);
  EXPECT_EQ(std::get<int64_t>(FindArg(*thunk, "run_id")->value), -5);

  const TraceEvent* launch = Find(*trace, "cuLaunchKernel", 0);
  ASSERT_NE(launch, nullptr);
  EXPECT_EQ(launch->category, "");
  EXPECT_EQ(StringArg(*launch, "long_name"), "cuLaunchKernel (driver)");

  // The stream's kernel is a GPU kernel named by its fusion; the derived line's copy is not.
  const TraceEvent* kernel = nullptr;
  const TraceEvent* op = nullptr;
  for (const TraceEvent& e : trace->events) {
    if (e.name == "loop_add_fusion") (e.tid == 1 ? kernel : op) = &e;
  }
  ASSERT_NE(kernel, nullptr);
  ASSERT_NE(op, nullptr);
  EXPECT_EQ(kernel->category, category::kGpuKernel);
  EXPECT_EQ(op->category, "xla_op");
  EXPECT_EQ(StringArg(*kernel, "hlo_op"), "loop_add_fusion");
  EXPECT_EQ(FindArg(*kernel, "Hlo Proto"), nullptr);
  // The launch and its kernel share correlation id 99: a flow.
  EXPECT_EQ(launch->flow_out, 99);
  EXPECT_EQ(kernel->flow_in, 99);
  EXPECT_NE(trace->FindMetadata("hostname"), nullptr);
  EXPECT_NE(trace->FindMetadata("xspace_aggregated_events_skipped"), nullptr);
}

TEST(XSpaceReaderTest, TheSummaryReadsItThroughTheSameEntry) {
  // Told by its first bytes, whatever its name.
  std::string path = TempPath("profile.bin");
  ASSERT_TRUE(WriteFile(path, Bytes(Sample())).ok());
  auto summary = SummarizeChromeTrace(path);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_THAT(*summary, HasSubstr("4 events"));
  EXPECT_THAT(*summary, HasSubstr("ynn_fusion"));
  EXPECT_THAT(*summary, HasSubstr("loop_add_fusion"));
  EXPECT_THAT(*summary, HasSubstr("Kernels by HLO module"));
  EXPECT_THAT(*summary, HasSubstr("jit_f"));
}

TEST(XSpaceReaderTest, JsonIsNotTakenForXSpace) {
  EXPECT_FALSE(LooksLikeXSpace("\n{\"", "t.json"));
  EXPECT_FALSE(LooksLikeXSpace("\n [", "t.json"));
  EXPECT_FALSE(LooksLikeXSpace("{\"t", "t.json"));
  EXPECT_FALSE(LooksLikeXSpace("\x1f\x8b\x08", "t.json.gz"));
  EXPECT_TRUE(LooksLikeXSpace("\n\x85\x01", "t"));
  EXPECT_TRUE(LooksLikeXSpace("\n{\x12", "t"));  // a plane of 123 bytes
  EXPECT_TRUE(LooksLikeXSpace("", "a.xplane.pb"));
}

TEST(XSpaceReaderTest, EveryCutOfAGoodFileIsATraceOrOneLine) {
  std::string bytes = Bytes(Sample());
  int errors = 0;
  for (size_t keep = 0; keep < bytes.size(); ++keep) {
    auto trace = Read(bytes.substr(0, keep));
    if (!trace.ok()) {
      ++errors;
      EXPECT_EQ(trace.status().message().find('\n'), std::string::npos);
      EXPECT_THAT(trace.status().message(), HasSubstr("t.xplane.pb"));
    }
  }
  EXPECT_GT(errors, static_cast<int>(bytes.size() / 2));
}

// Hand-made wire bytes.
std::string Varint(uint64_t v) {
  std::string out;
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
  return out;
}
std::string Key(int field, int wire) { return Varint(static_cast<uint64_t>(field) << 3 | wire); }
std::string Length(int field, const std::string& body) { return Key(field, 2) + Varint(body.size()) + body; }

TEST(XSpaceReaderTest, BrokenWireIsOneLineNamingTheMessage) {
  // The plane's lines as a varint.
  auto trace = Read(Length(1, Key(3, 0) + Varint(5)));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("XPlane"));
  EXPECT_THAT(trace.status().message(), HasSubstr("wire type 0, expected 2"));
  // A group.
  trace = Read(Key(1, 3) + Key(1, 4));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("groups"));
  // A line that claims ten million events' bytes.
  trace = Read(Length(1, Key(3, 2) + Varint(10'000'000ull * 40) + Length(4, Key(1, 0) + Varint(1))));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("claims 400000000 bytes"));
  // A varint that never ends.
  trace = Read(Key(1, 0) + std::string(11, '\xff'));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("longer than 10 bytes"));
  // Empty.
  trace = Read("");
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("empty file"));
}

TEST(XSpaceReaderTest, MissingMetadataIsNamedAndBadTimesRefused) {
  std::string event = Length(4, Key(1, 0) + Varint(42) + Key(2, 0) + Varint(1000));
  auto trace = Read(Length(1, Length(3, Key(3, 0) + Varint(5) + event)));
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->events.size(), 1u);
  EXPECT_EQ(trace->events[0].name, "(event metadata 42 missing)");
  EXPECT_NE(trace->FindMetadata("xspace_events_without_metadata"), nullptr);

  std::string negative = Length(4, Key(1, 0) + Varint(1) + Key(3, 0) + Varint(static_cast<uint64_t>(-7)));
  trace = Read(Length(1, Length(3, negative)));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("duration_ps -7 is negative"));

  std::string late = Length(4, Key(2, 0) + Varint(1'000'000));
  trace = Read(Length(1, Length(3, Key(3, 0) + Varint((uint64_t{1} << 62) - 10) + late)));
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("146 years"));
}

TEST(XSpaceReaderTest, AMillionEventsLoad) {
  xp::XSpace space;
  xp::XPlane* plane = space.add_planes();
  plane->set_name("/host:CPU");
  (*plane->mutable_event_metadata())[1].set_name("fusion");
  xp::XLine* line = plane->add_lines();
  line->set_timestamp_ns(1);
  for (int i = 0; i < 1'000'000; ++i) {
    xp::XEvent* e = line->add_events();
    e->set_metadata_id(1);
    e->set_offset_ps(int64_t{i} * 1000);
    e->set_duration_ps(500);
  }
  std::string path = TempPath("big.xplane.pb");
  ASSERT_TRUE(WriteFile(path, Bytes(space)).ok());
  auto summary = SummarizeChromeTrace(path);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_THAT(*summary, HasSubstr("1000000 events"));
}

TEST(ChromeTraceJsonVariantsTest, JaxTrailingEmptyObjectAndXlaKernels) {
  std::string path = TempPath("vm.trace.json");
  ASSERT_TRUE(WriteFile(path, R"({"displayTimeUnit":"ns","metadata":{"highres-ticks":true},"traceEvents":[
{"ph":"M","pid":701,"name":"process_name","args":{"name":"/host:CPU"}},
{"ph":"X","pid":701,"tid":3,"ts":248.851,"dur":17.026,"name":"ynn_fusion","args":{"hlo_module":"jit_f","hlo_op":"ynn_fusion"}},
{"ph":"X","pid":701,"tid":3,"ts":265.586,"dur":0.24,"name":"end: ynn_fusion","args":{}},
{}]})").ok());
  auto trace = ReadChromeTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->events.size(), 2u);
  EXPECT_EQ(trace->events[0].category, category::kCpuKernel);
  EXPECT_EQ(StringArg(trace->events[0], "hlo_module"), "jit_f");
  auto summary = SummarizeChromeTrace(path);
  ASSERT_TRUE(summary.ok()) << summary.status().message();
  EXPECT_THAT(*summary, HasSubstr("cpu_kernel"));
  EXPECT_THAT(*summary, HasSubstr("jit_f"));
  // An event with a name but no phase is still an error.
  ASSERT_TRUE(WriteFile(path, R"({"traceEvents":[{"name":"a","ts":1}]})").ok());
  trace = ReadChromeTrace(path);
  ASSERT_FALSE(trace.ok());
  EXPECT_THAT(trace.status().message(), HasSubstr("expected \"ph\""));
}

TEST(ChromeTraceJsonVariantsTest, TensorFlowOneTimeline) {
  // What tensorflow.python.client.timeline writes from RunMetadata's step stats.
  std::string path = TempPath("timeline.ctf.json");
  ASSERT_TRUE(WriteFile(path, R"({"traceEvents":[
{"name":"process_name","ph":"M","pid":0,"args":{"name":"Allocators"}},
{"name":"process_name","ph":"M","pid":1,"args":{"name":"/job:localhost/replica:0/task:0/device:CPU:0 Compute"}},
{"ph":"X","cat":"Op","name":"MatMul","pid":1,"tid":0,"ts":1700000000000100,"dur":25,"args":{"name":"MatMul","op":"MatMul","input0":"a","input1":"b"}},
{"ph":"s","cat":"DataFlow","name":"a","pid":1,"tid":0,"ts":1700000000000090,"id":0},
{"ph":"t","cat":"DataFlow","name":"a","pid":1,"tid":0,"ts":1700000000000100,"id":0},
{"ph":"N","cat":"Tensor","name":"a","pid":1,"tid":0,"ts":1700000000000090,"id":"a"},
{"ph":"O","cat":"Tensor","name":"a","pid":1,"tid":0,"ts":1700000000000090,"id":"a","args":{"snapshot":{"tensor_description":"dtype: DT_FLOAT"}}},
{"ph":"D","cat":"Tensor","name":"a","pid":1,"tid":0,"ts":1700000000000140,"id":"a"},
{"ph":"C","cat":"Memory","name":"cpu","pid":0,"ts":1700000000000100,"args":{"cpu":1024}}
]})").ok());
  auto trace = ReadChromeTrace(path);
  ASSERT_TRUE(trace.ok()) << trace.status().message();
  ASSERT_EQ(trace->events.size(), 1u);
  EXPECT_EQ(trace->events[0].name, "MatMul");
  EXPECT_EQ(trace->events[0].duration_ns, 25'000);
}

}  // namespace
}  // namespace xlens::profiler

namespace xlens::profiler {
namespace {

// The corpus of tests/profiler/testdata/xspace: good_* read (one of them recorded by
// jax.profiler), broken_* give one line naming the file.
TEST(XSpaceCorpusTest, GoodFilesReadBrokenFilesSayWhy) {
  int good = 0, broken = 0;
  for (const auto& entry : fs::directory_iterator(std::string(XLENS_TESTDATA_DIR) + "/xspace")) {
    std::string name = entry.path().filename().string();
    auto trace = ReadChromeTrace(entry.path().string());
    SCOPED_TRACE(name);
    if (name.rfind("good_", 0) == 0) {
      ++good;
      EXPECT_TRUE(trace.ok()) << trace.status().message();
    } else {
      ++broken;
      ASSERT_FALSE(trace.ok());
      EXPECT_THAT(trace.status().message(), HasSubstr(name));
      EXPECT_EQ(trace.status().message().find('\n'), std::string::npos);
    }
  }
  EXPECT_GE(good, 3);
  EXPECT_GE(broken, 10);
}

// jax.profiler's XSpace and the JSON it converted from it in the same run: the same events, and
// XLA's CPU thunks named by their HLO module.
TEST(XSpaceCorpusTest, JaxProfilerXSpaceAndJsonAgree) {
  auto xspace = ReadChromeTrace(std::string(XLENS_TESTDATA_DIR) + "/xspace/good_jax_profiler_cpu.xplane.pb");
  auto json = ReadChromeTrace(std::string(XLENS_TESTDATA_DIR) + "/jax_profiler_cpu.trace.json.gz");
  ASSERT_TRUE(xspace.ok()) << xspace.status().message();
  ASSERT_TRUE(json.ok()) << json.status().message();
  EXPECT_EQ(xspace->events.size(), json->events.size());
  auto kernels_of = [](const Trace& trace, const std::string& module) {
    int n = 0;
    for (const TraceEvent& e : trace.events) {
      if (e.category == category::kCpuKernel && StringArg(e, "hlo_module") == module) ++n;
    }
    return n;
  };
  EXPECT_GT(kernels_of(*xspace, "jit_f"), 0);
  EXPECT_EQ(kernels_of(*xspace, "jit_f"), kernels_of(*json, "jit_f"));
  EXPECT_EQ(kernels_of(*xspace, "jit_step"), kernels_of(*json, "jit_step"));
}

}  // namespace
}  // namespace xlens::profiler
