// `xlens run --trace`, `--xla_hlo_profile` and `xlens trace summary` as a user runs them: the
// timeline keeps the trace contract, shows the compile passes before the runs and one span per
// kernel per run, and fusion shows as fewer kernels.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "cli_test_util.h"
#include "profiler/trace_schema.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;
using ::testing::IsEmpty;
using json = nlohmann::json;

const std::string kMnist = std::string(XLENS_SOURCE_DIR) + "/samples/mnist_softmax_train_step.hlo";

json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return json::parse(in);
}

struct Span {
  std::string name, category;
  double start, end;
  json args;
};

std::vector<Span> Spans(const json& doc) {
  std::vector<Span> spans;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    double ts = e["ts"], dur = e["dur"];
    spans.push_back({e["name"], e["cat"], ts, ts + dur, e.value("args", json::object())});
  }
  return spans;
}

// Kernel and library-call spans inside each execute span, in run order.
std::vector<std::vector<Span>> KernelsPerRun(const std::vector<Span>& spans) {
  std::vector<std::vector<Span>> runs;
  for (const Span& run : spans) {
    if (run.category != "execute") continue;
    std::vector<Span>& kernels = runs.emplace_back();
    for (const Span& s : spans) {
      if ((s.category == "cpu_kernel" || s.category == "library_call") && s.start >= run.start &&
          s.end <= run.end) {
        kernels.push_back(s);
      }
    }
  }
  return runs;
}

class TraceCliTest : public CliTest {};

TEST_F(TraceCliTest, TimelineOfARunKeepsTheContract) {
  std::string trace = (dir_ / "timeline.ctf.json").string();
  RunResult r = RunXlens("run " + kMnist + " --iterations 3 --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("trace events to " + trace));
  json doc = ReadJson(trace);
  EXPECT_THAT(testing::CheckTraceSchema(doc), IsEmpty());

  std::vector<Span> spans = Spans(doc);
  // One untimed run first, then the three timed ones.
  std::vector<std::vector<Span>> runs = KernelsPerRun(spans);
  ASSERT_EQ(runs.size(), 4u);
  for (const auto& kernels : runs) {
    ASSERT_FALSE(kernels.empty());
    EXPECT_EQ(kernels.size(), runs[0].size()) << "every run launches the same kernels";
    std::vector<std::string> names, first;
    for (const Span& k : kernels) names.push_back(k.name);
    for (const Span& k : runs[0]) first.push_back(k.name);
    EXPECT_EQ(names, first);
  }
  int fusions = 0, with_op_names = 0;
  for (const Span& k : runs[0]) {
    // The viewer's link from a kernel to its HLO: the same four keys on every kernel and library
    // call, empty strings where there is no fusion or no metadata.
    for (const char* key : {"hlo_op", "op_names", "fusion_kind"}) {
      ASSERT_TRUE(k.args.contains(key) && k.args[key].is_string()) << k.name << " " << key;
    }
    ASSERT_TRUE(k.args.contains("bytes_accessed") && k.args["bytes_accessed"].is_number_integer())
        << k.name;
    EXPECT_EQ(k.args["module"], "mnist_softmax_train_step");
    EXPECT_EQ(k.args["hlo_op"], k.name);
    EXPECT_GT(k.args["bytes_accessed"].get<int64_t>(), 0) << k.name;
    if (k.category == "library_call" && k.args["fusion_kind"] == "kCustom") {
      // A oneDNN call with its fused epilogue: a fusion, but library code, not a generated kernel.
      ++fusions;
    } else if (!k.args["fusion_kind"].get<std::string>().empty()) {
      ++fusions;
      EXPECT_EQ(k.category, "cpu_kernel");
      EXPECT_TRUE(k.args.contains("kernel")) << "the generated function's name";
    }
    if (!k.args["op_names"].get<std::string>().empty()) ++with_op_names;
    if (k.args.contains("achieved GB/s")) EXPECT_GT(k.args["achieved GB/s"].get<double>(), 0);
  }
  EXPECT_GT(fusions, 0);
  EXPECT_GT(with_op_names, 0);
  // The dots run as library calls, with their flops.
  bool dot = false;
  for (const Span& k : runs[0]) {
    if (k.category == "library_call") {
      dot = true;
      EXPECT_GT(k.args["flops"].get<int64_t>(), 1'000'000) << k.name;
    }
  }
  EXPECT_TRUE(dot);

  // The compilation comes first: its passes (with `changed`) inside the compile span, before
  // any run.
  auto compile = std::find_if(spans.begin(), spans.end(), [](const Span& s) { return s.category == "compile"; });
  ASSERT_NE(compile, spans.end());
  double first_run = 1e300;
  for (const Span& s : spans) {
    if (s.category == "execute") first_run = std::min(first_run, s.start);
  }
  int passes = 0;
  std::set<std::string> pipelines;
  for (const Span& s : spans) {
    if (s.category != "pass") continue;
    ++passes;
    EXPECT_TRUE(s.args.contains("changed")) << s.name;
    EXPECT_GE(s.start, compile->start);
    EXPECT_LE(s.end, compile->end);
    EXPECT_LT(s.end, first_run);
    pipelines.insert(s.args.value("pipeline", ""));
  }
  EXPECT_GT(passes, 10);
  EXPECT_GT(pipelines.size(), 2u);
  bool codegen = std::any_of(spans.begin(), spans.end(), [](const Span& s) {
    return s.category == "codegen" && s.name == "machine code and thunks";
  });
  EXPECT_TRUE(codegen);
}

// A dot without metadata still carries every key of the link to its HLO, empty where the HLO has
// nothing to say.
TEST_F(TraceCliTest, KernelsWithoutMetadataHaveEmptyOpNamesAndFusionKind) {
  std::string module = Write("nometa.hlo", R"(HloModule nometa
ENTRY main {
  x = f32[64,64] parameter(0)
  y = f32[64,64] parameter(1)
  d = f32[64,64] dot(x, y), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[64,64] tanh(d), metadata={op_name="model/Tanh"}
})");
  std::string trace = (dir_ / "nometa.json").string();
  RunResult r = RunXlens("run " + module + " --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json doc = ReadJson(trace);
  EXPECT_THAT(testing::CheckTraceSchema(doc), IsEmpty());
  std::vector<std::vector<Span>> runs = KernelsPerRun(Spans(doc));
  ASSERT_FALSE(runs.empty());
  bool dot = false, tanh = false;
  for (const Span& k : runs[0]) {
    if (k.category == "library_call") {
      // The dot itself (Eigen) or the oneDNN call made of it (a kCustom fusion; tanh is not one
      // of oneDNN's post-ops, so it stays outside).
      dot = true;
      EXPECT_EQ(k.args["op_names"], "");
      EXPECT_EQ(k.args["fusion_kind"], k.name == "d" ? "" : "kCustom") << k.name;
    } else {
      tanh = true;
      EXPECT_EQ(k.args["op_names"], "model/Tanh") << k.name;
    }
  }
  EXPECT_TRUE(dot);
  EXPECT_TRUE(tanh);
}

TEST_F(TraceCliTest, FusionTurnsManyKernelsIntoFew) {
  std::string fused = (dir_ / "fused.json").string();
  std::string unfused = (dir_ / "unfused.json.gz").string();
  RunResult a = RunXlens("run " + kMnist + " --trace " + fused);
  ASSERT_EQ(a.exit_code, 0) << a.output;
  RunResult b = RunXlens("run " + kMnist + " --trace " + unfused +
                         " --xla_disable_hlo_passes=fusion,multi-output-fusion");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  size_t fused_kernels = KernelsPerRun(Spans(ReadJson(fused))).at(0).size();
  // The .gz trace is read back through the command line.
  RunResult summary = RunXlens("trace summary " + unfused);
  ASSERT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_THAT(summary.output, HasSubstr("Top kernels"));
  EXPECT_THAT(summary.output, HasSubstr("cpu_kernel"));
  std::smatch match;
  ASSERT_TRUE(std::regex_search(summary.output, match, std::regex("Top kernels \\(([0-9]+) distinct")))
      << summary.output;
  size_t unfused_kernels = std::stoul(match[1]);
  EXPECT_GE(unfused_kernels, 2 * fused_kernels) << "fused " << fused_kernels << ", unfused " << unfused_kernels;
}

TEST_F(TraceCliTest, HloProfileIsPrintedAndDumped) {
  std::string dump = (dir_ / "dump").string();
  RunResult r = RunXlens("run " + kMnist + " --iterations 5 --xla_hlo_profile --xla_dump_to=" + dump);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("Execution profile for mnist_softmax_train_step"));
  EXPECT_THAT(r.output, HasSubstr("over 5 runs"));
  EXPECT_THAT(r.output, HasSubstr("GB/s"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("dot \\(Eigen\\)|oneDNN matmul"));
  EXPECT_THAT(r.output, ::testing::ContainsRegex("[0-9.]+ (us|ms) +[0-9.]+% +100.0% .* total"));
  std::string profile_file;
  for (const auto& entry : std::filesystem::directory_iterator(dump)) {
    if (entry.path().string().ends_with(".mnist_softmax_train_step.hlo_profile.txt")) profile_file = entry.path().string();
  }
  ASSERT_FALSE(profile_file.empty());
  EXPECT_THAT(profile_file, ::testing::ContainsRegex("module_[0-9]{4}\\.mnist"));
  std::ifstream in(profile_file);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(text, HasSubstr("Execution profile for mnist_softmax_train_step"));
  // The manifest lists it with the module's other files.
  std::ifstream manifest(dump + "/manifest.json");
  std::string manifest_text((std::istreambuf_iterator<char>(manifest)), std::istreambuf_iterator<char>());
  EXPECT_THAT(manifest_text, HasSubstr("hlo_profile.txt"));
}

// A module jaxlib dumped, with its stack-frame table: every kernel span carries the line of the
// Python that made it (`source`) and the callers above it (`stack`), and the per-HLO profile has
// the same line in its source column.
TEST_F(TraceCliTest, KernelsOfAJaxModuleCarryTheirPythonLine) {
  const std::string module = std::string(XLENS_SOURCE_DIR) + "/tests/hlo/testdata/jax_train_step.hlo";
  std::string trace = (dir_ / "jax.json").string();
  RunResult r = RunXlens("run " + module + " --xla_hlo_profile --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::vector<Span>> runs = KernelsPerRun(Spans(ReadJson(trace)));
  ASSERT_FALSE(runs.empty());
  ASSERT_FALSE(runs[0].empty());
  std::map<std::string, std::string> source_of;
  bool predict = false;
  for (const Span& k : runs[0]) {
    ASSERT_TRUE(k.args.contains("source") && k.args["source"].is_string()) << k.name;
    ASSERT_TRUE(k.args.contains("stack") && k.args["stack"].is_string()) << k.name;
    std::string source = k.args["source"];
    std::string stack = k.args["stack"];
    // Every kernel of this module came from train_step.py, called from its <module> at line 14.
    EXPECT_THAT(source, ::testing::MatchesRegex("train_step\\.py:[0-9]+")) << k.name;
    EXPECT_THAT(stack, ::testing::EndsWith("train_step.py:14 (<module>)")) << k.name;
    source_of[k.name] = source;
    // The matmul of predict (line 4), called from loss (line 7) and train_step (line 11).
    if (source == "train_step.py:4") {
      predict = true;
      EXPECT_EQ(stack, "train_step.py:7:19 (loss); train_step.py:11:11 (train_step); train_step.py:14 (<module>)");
    }
  }
  EXPECT_TRUE(predict);
  // The profile's rows name the same lines as the spans of the same kernels.
  std::vector<std::string> rows;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) rows.push_back(line);
  for (const auto& [kernel, source] : source_of) {
    bool found = std::any_of(rows.begin(), rows.end(), [&](const std::string& row) {
      return row.find("  " + kernel + " ") != std::string::npos && row.ends_with("  " + source);
    });
    EXPECT_TRUE(found) << kernel << " at " << source << " in\n" << r.output;
  }
  EXPECT_THAT(r.output, ::testing::ContainsRegex("kernel +source"));
}

TEST_F(TraceCliTest, BadTracesAndPathsAreOneLineErrors) {
  std::string broken = Write("broken.json", "{\"traceEvents\":[{\"ph\":\"X\",\"ts\":\"soon\"}]}");
  RunResult r = RunXlens("trace summary " + broken);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("broken.json: event 0: \"ts\" must be a number"));
  RunResult missing = RunXlens("trace summary " + (dir_ / "missing.json").string());
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_THAT(missing.output, HasSubstr("cannot open"));
  RunResult unwritable = RunXlens("run " + kMnist + " --trace /nonexistent-dir/t.json");
  EXPECT_EQ(unwritable.exit_code, 1);
  EXPECT_THAT(unwritable.output, HasSubstr("/nonexistent-dir/t.json"));
  EXPECT_THAT(unwritable.output, HasSubstr("out2: f32[]")) << "the run's outputs are not lost";
}

// Hostile traces: each is one line on stderr and exit 1, or a summary whose text is safe.
TEST_F(TraceCliTest, HostileTracesNeverCrashOrReachTheTerminalRaw) {
  std::string overflow = Write("overflow.json", "{\"traceEvents\":[{\"ph\":\"X\",\"name\":\"k\",\"ts\":1e400}]}");
  RunResult r = RunXlens("trace summary " + overflow);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("overflow.json:1:"));
  EXPECT_THAT(r.output, HasSubstr("event 0: \"ts\": number out of range: 1e400"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;

  std::string names = Write("names.json",
                            "[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\\u0000b\",\"ts\":1,\"dur\":3},"
                            "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"a\\u0000c\",\"ts\":1,\"dur\":2},"
                            "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"\\u001b[2Jred\",\"ts\":1,\"dur\":1}]");
  RunResult summary = RunXlens("trace summary " + names);
  EXPECT_EQ(summary.exit_code, 0) << summary.output;
  EXPECT_THAT(summary.output, HasSubstr("Top kernels (3 distinct"));
  EXPECT_THAT(summary.output, HasSubstr("a\\x00b"));
  EXPECT_THAT(summary.output, HasSubstr("a\\x00c"));
  EXPECT_THAT(summary.output, HasSubstr("\\x1b[2Jred"));
  EXPECT_EQ(summary.output.find('\x1b'), std::string::npos);
  EXPECT_EQ(summary.output.find('\0'), std::string::npos);

  std::string deep = Write("deep.json", "{\"traceEvents\":[{\"args\":" + std::string(100000, '[') + "}]}");
  RunResult nested = RunXlens("trace summary " + deep);
  EXPECT_EQ(nested.exit_code, 1) << nested.output;
  EXPECT_THAT(nested.output, HasSubstr("nested deeper than 256 levels"));

  RunResult device = RunXlens("trace summary /dev/zero");
  EXPECT_EQ(device.exit_code, 1);
  EXPECT_THAT(device.output, HasSubstr("not a regular file"));
}

// A gzip bomb stops at the input limit with a message that says how to raise it.
TEST_F(TraceCliTest, GzipBombStopsAtTheInputLimit) {
  std::string text = "{\"traceEvents\":[";
  for (int i = 0; i < 30000; ++i) text += "{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"k\",\"ts\":1,\"dur\":2},";
  text += "{\"ph\":\"i\",\"ts\":1}]}";
  std::string plain = Write("bomb.json", text);
  ASSERT_EQ(std::system(("gzip -9 -f " + plain).c_str()), 0);
  RunResult limited = RunXlens("trace summary --max-input-size=1M " + plain + ".gz");
  EXPECT_EQ(limited.exit_code, 1) << limited.output;
  EXPECT_THAT(limited.output, HasSubstr("bomb.json.gz: uncompresses to more than 1 MiB, the limit on input files (raise it "
                                        "with --max-input-size=SIZE or XLENS_MAX_INPUT_SIZE)"));
  RunResult read = RunXlens("trace summary " + plain + ".gz");
  EXPECT_EQ(read.exit_code, 0) << read.output;
  EXPECT_THAT(read.output, HasSubstr("30001 events"));
}

TEST_F(TraceCliTest, CorpusModuleTrace) {
  std::string module = std::string(XLENS_SHARED_DIR) + "/corpus/hlo/tf_fully_connected_model.hlo";
  if (!std::filesystem::exists(module)) GTEST_SKIP() << "the shared corpus is not beside the clone: " << module;
  std::string trace = (dir_ / "corpus.json").string();
  RunResult r = RunXlens("run " + module + " --iterations 2 --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  json doc = ReadJson(trace);
  EXPECT_THAT(testing::CheckTraceSchema(doc), IsEmpty());
  std::vector<Span> spans = Spans(doc);
  std::vector<std::vector<Span>> runs = KernelsPerRun(spans);
  ASSERT_EQ(runs.size(), 3u);
  // One span per thunk the run reports (the module has no control flow: every thunk is a
  // kernel or a library call), in every run.
  std::smatch match;
  ASSERT_TRUE(std::regex_search(r.output, match, std::regex("([0-9]+) thunks \\(")));
  size_t thunks = std::stoul(match[1]);
  for (const auto& kernels : runs) EXPECT_EQ(kernels.size(), thunks);
  // The passes come before the first run.
  double first_run = 1e300, last_pass = 0;
  for (const Span& s : spans) {
    if (s.category == "execute") first_run = std::min(first_run, s.start);
    if (s.category == "pass") last_pass = std::max(last_pass, s.end);
  }
  EXPECT_GT(last_pass, 0);
  EXPECT_LT(last_pass, first_run);
}

}  // namespace
}  // namespace xlens
