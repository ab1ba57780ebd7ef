// The training samples run as a user runs them, on the generated data set (so without Debian's
// dataset-fashion-mnist): linear_regression recovers y = 3x + 2 within 1% with and without the
// JIT and writes the dump files the walkthrough names; mnist_softmax and mlp_training follow the
// same loss curve with and without the JIT; the op-by-op step runs many kernels, the compiled one
// a few.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <regex>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/e2e/cli_test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// Losses with and without the JIT may differ by float rounding (another summation order in the
// fused reductions and the matmul library): at most this much, relative to the loss.
constexpr double kLossTolerance = 1e-5;

RunResult RunSample(const std::string& name, const std::string& args, const std::string& env = "") {
  return RunShellCommand(env + " " + std::string(XLENS_BINARY_DIR) + "/samples/" + name + " " + args + " 2>&1");
}

double Number(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) {
    ADD_FAILURE() << "no match for " << pattern << " in:\n" << text;
    return NAN;
  }
  return std::stod(m[1]);
}

// "step N: loss L" lines of the classifier samples.
std::map<int, double> StepLosses(const std::string& text) {
  std::map<int, double> losses;
  static const std::regex line(R"(step (\d+): loss ([-0-9.e+]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), line); it != std::sregex_iterator(); ++it) {
    losses[std::stoi((*it)[1])] = std::stod((*it)[2]);
  }
  return losses;
}

void ExpectSameCurve(const std::map<int, double>& off, const std::map<int, double>& on, size_t steps) {
  ASSERT_EQ(off.size(), steps);
  ASSERT_EQ(on.size(), steps);
  for (const auto& [step, loss] : off) {
    ASSERT_TRUE(on.count(step)) << "step " << step;
    EXPECT_NEAR(on.at(step), loss, kLossTolerance * std::fabs(loss)) << "step " << step;
  }
}

class TrainingSamplesTest : public CliTest {};

TEST_F(TrainingSamplesTest, LinearRegressionRecoversWAndBWithAndWithoutTheJit) {
  RunResult r = RunSample("linear_regression", "--steps 200");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string how : {"op by op:", "JIT auto:"}) {
    const double w = Number(r.output, how + R"(\s+W = ([-0-9.]+))");
    const double b = Number(r.output, how + R"(.*b = ([-0-9.]+))");
    EXPECT_NEAR(w, 3.0, 0.01 * 3.0) << how;
    EXPECT_NEAR(b, 2.0, 0.01 * 2.0) << how;
  }
  // The first loss is the mean squared error of the initial W and b on the data, computed here.
  double want = 0;
  for (int i = 0; i < 100; ++i) {
    const double x = static_cast<float>(-2.0 + 4.0 * i / 99);
    const double y = static_cast<float>(3.0 * x + 2.0);
    want += std::pow(-1.66361 * x + 0.13763 - y, 2) / 100;
  }
  // The table: "step  loss op by op  loss, JIT auto", each row one step, both columns close.
  static const std::regex row(R"(\n\s+(\d+)\s+([-0-9.e+]+)\s+([-0-9.e+]+))");
  int rows = 0;
  for (auto it = std::sregex_iterator(r.output.begin(), r.output.end(), row); it != std::sregex_iterator(); ++it) {
    const double off = std::stod((*it)[2]), on = std::stod((*it)[3]);
    if (std::stoi((*it)[1]) == 1) EXPECT_NEAR(off, want, 1e-5 * want);
    EXPECT_NEAR(on, off, kLossTolerance * std::fabs(off) + 1e-12) << "step " << (*it)[1];
    ++rows;
  }
  EXPECT_GE(rows, 10);
  // The last step: the whole update op by op (dozens of kernels), a few compiled kernels with the JIT.
  const double off_kernels = Number(r.output, R"(op by op:.*last step: (\d+) kernels)");
  const double on_kernels = Number(r.output, R"(JIT auto:.*last step: (\d+) kernel)");
  EXPECT_GE(off_kernels, 20);
  EXPECT_LE(on_kernels, off_kernels / 4);
}

TEST_F(TrainingSamplesTest, LinearRegressionWritesTheDumpFilesTheWalkthroughNames) {
  const fs::path tf = dir_ / "tf", xla = dir_ / "xla";
  RunResult r = RunSample("linear_regression",
                          "--steps 5 --tf_xla_clustering_debug --xla_dump_hlo_pass_re=.* --xla_dump_to=" + xla.string(),
                          "TF_DUMP_GRAPH_PREFIX=" + tf.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // TensorFlow's clustering dumps, by TensorFlow's names.
  for (const char* name : {"before_mark_for_compilation.pbtxt", "mark_for_compilation.pbtxt",
                           "mark_for_compilation_annotated.pbtxt", "encapsulate_subgraphs_before.pbtxt",
                           "encapsulate_subgraphs_after.pbtxt", "build_xla_ops.pbtxt"}) {
    EXPECT_TRUE(fs::exists(tf / name)) << name;
  }
  // XLA's: the module before and after, a file per pass that changed the module (XLA's rule for
  // --xla_dump_hlo_pass_re), and the LLVM IR. Conv canonicalization and reduce precision change
  // nothing in this graph (no convolution, no --xla_reduce_precision): they have no file, and
  // the sample says from the manifest that they ran.
  std::map<std::string, int> found;
  for (const auto& e : fs::directory_iterator(xla)) {
    const std::string f = e.path().filename().string();
    for (const char* part : {".before_optimizations.txt", "after_optimizations.txt", ".optimization.",
                             ".simplification.", ".layout-assignment.", ".fusion.after_fusion.",
                             ".ir-no-opt.ll", ".ir-with-opt.ll", "manifest.json"}) {
      if (f.find(part) != std::string::npos) ++found[part];
    }
  }
  for (const char* part : {".before_optimizations.txt", "after_optimizations.txt", ".optimization.",
                           ".simplification.", ".layout-assignment.", ".fusion.after_fusion.",
                           ".ir-no-opt.ll", ".ir-with-opt.ll", "manifest.json"}) {
    EXPECT_GE(found[part], 1) << "no dump file with " << part;
  }
  // The sample names each phase, and every file it names exists.
  for (const char* phase : {"Mark For Compilation Pass", "Encapsulate Subgraph Pass", "Build Xla Launch Ops Pass",
                            "Optimization:", "Simplification:", "Conv Canonicalization:", "Layout Assignment:",
                            "Fusion:", "Reduce Precision:", "LLVM IR:"}) {
    EXPECT_THAT(r.output, HasSubstr(phase));
  }
  EXPECT_THAT(r.output, HasSubstr("Conv Canonicalization: 1 pass run, 0 changed the module"));
  EXPECT_THAT(r.output, HasSubstr("Reduce Precision: 1 pass run, 0 changed the module"));
  ASSERT_NE(r.output.find("The walkthrough's phases"), std::string::npos) << r.output;
  const std::string story = r.output.substr(r.output.find("The walkthrough's phases"));
  static const std::regex listed(R"(\n    (\S+))");
  int files = 0;
  for (auto it = std::sregex_iterator(story.begin(), story.end(), listed); it != std::sregex_iterator(); ++it) {
    fs::path p = (*it)[1].str();
    if (p.is_relative()) p = xla / p;
    EXPECT_TRUE(fs::exists(p)) << p;
    ++files;
  }
  EXPECT_GE(files, 20);
}

TEST_F(TrainingSamplesTest, MnistSoftmaxFollowsTheSameLossWithAndWithoutTheJit) {
  const std::string args = "--tiny --steps 20 --log-every 1 --trace ";
  RunResult off = RunSample("mnist_softmax", args + (dir_ / "off.json").string() + " --jit=off");
  RunResult on = RunSample("mnist_softmax", args + (dir_ / "on.json").string() + " --jit=auto");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  ASSERT_EQ(on.exit_code, 0) << on.output;
  ExpectSameCurve(StepLosses(off.output), StepLosses(on.output), 20);
  // ln(10) at the start (W and b are zeros), and the generated classes are learnt.
  EXPECT_NEAR(StepLosses(off.output).at(1), std::log(10.0), 1e-5);
  EXPECT_GT(Number(off.output, R"(test accuracy: ([0-9.]+))"), 0.9);
  EXPECT_NEAR(Number(on.output, R"(test accuracy: ([0-9.]+))"), Number(off.output, R"(test accuracy: ([0-9.]+))"), 0.01);
  // Op by op: dozens of kernels, none compiled. With the JIT: a few compiled kernels (fusions and
  // the matmul library calls), a handful of times fewer.
  const double off_total = Number(off.output, R"(last step: (\d+) kernels \(0 compiled)");
  EXPECT_GE(off_total, 30);
  const double on_compiled = Number(on.output, R"(last step: \d+ kernels? \((\d+) compiled)");
  const double on_total = Number(on.output, R"(last step: (\d+) kernel)");
  EXPECT_GE(on_compiled, 1);
  EXPECT_LE(on_total, off_total / 3);
  EXPECT_THAT(on.output, HasSubstr("(cpu_kernel)"));
  // The timelines as a trace viewer shows them: op by op, the forward product fused with its bias
  // (as grappler's remapper fuses them, under the bias add's name), the gradients' MatMuls and no
  // launch; with the JIT, the cluster's _XlaRun and, under it, the compiled kernels.
  auto spans = [](const fs::path& path) {
    std::ifstream in(path);
    nlohmann::json trace = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    struct Span {
      std::string first, second, op;  // name, category, the executor's op
    };
    std::vector<Span> out;  // the complete events
    if (!trace.is_object() || !trace.contains("traceEvents")) return out;
    for (const auto& e : trace["traceEvents"]) {
      if (e.value("ph", "") != "X") continue;
      std::string op;
      if (e.contains("args") && e["args"].is_object()) op = e["args"].value("op", "");
      out.push_back({e.value("name", ""), e.value("cat", ""), op});
    }
    return out;
  };
  auto has = [](const auto& list, auto pred) { return std::any_of(list.begin(), list.end(), pred); };
  const auto off_spans = spans(dir_ / "off.json"), on_spans = spans(dir_ / "on.json");
  ASSERT_FALSE(off_spans.empty());
  ASSERT_FALSE(on_spans.empty());
  EXPECT_TRUE(has(off_spans, [](const auto& e) { return e.first == "add" && e.op == "_FusedMatMul"; }));
  EXPECT_TRUE(has(off_spans, [](const auto& e) { return e.op == "MatMul"; }));
  EXPECT_FALSE(has(off_spans, [](const auto& e) { return e.first.ends_with("/xla_run"); }));
  EXPECT_TRUE(has(on_spans, [](const auto& e) { return e.first.ends_with("/xla_run"); }));
  EXPECT_TRUE(has(on_spans, [](const auto& e) { return e.second == "cpu_kernel"; }));
  EXPECT_LT(on_spans.size(), off_spans.size() / 2);
}

TEST_F(TrainingSamplesTest, MlpTrainingFollowsTheSameLossWithAndWithoutTheJit) {
  RunResult off = RunSample("mlp_training", "--tiny --steps 20 --log-every 1 --jit=off");
  RunResult on = RunSample("mlp_training", "--tiny --steps 20 --log-every 1");
  ASSERT_EQ(off.exit_code, 0) << off.output;
  ASSERT_EQ(on.exit_code, 0) << on.output;
  ExpectSameCurve(StepLosses(off.output), StepLosses(on.output), 20);
  EXPECT_LT(StepLosses(on.output).at(20), StepLosses(on.output).at(1) / 2);
  EXPECT_GE(Number(on.output, R"(last step: \d+ kernels? \((\d+) compiled)"), 1);
  EXPECT_LT(Number(on.output, R"(last step: (\d+) kernel)"), Number(off.output, R"(last step: (\d+) kernel)"));
}

TEST_F(TrainingSamplesTest, WithoutTheDataSetTheSampleSaysHowToGetIt) {
  RunResult r = RunSample("mnist_softmax", "--data " + (dir_ / "absent").string());
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.output, HasSubstr("mnist_softmax: no Fashion-MNIST at"));
  EXPECT_THAT(r.output, HasSubstr("apt-get install dataset-fashion-mnist"));
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST_F(TrainingSamplesTest, CommittedGraphsAreWhatTheProgramsBuild) {
  for (const std::string name : {"linear_regression", "mnist_softmax", "mlp_training"}) {
    const std::string args = name == "linear_regression" ? "--steps 1" : "--tiny --steps 1";
    RunResult r = RunSample(name, args + " --jit=off --write-graph " + (dir_ / name).string());
    ASSERT_EQ(r.exit_code, 0) << name << ": " << r.output;
    auto read = [](const fs::path& p) {
      std::ifstream in(p);
      return std::string(std::istreambuf_iterator<char>(in), {});
    };
    const std::string written = read(dir_ / name / "graph.pbtxt");
    EXPECT_FALSE(written.empty()) << name;
    EXPECT_EQ(written, read(fs::path(XLENS_SOURCE_DIR) / "samples/graphs" / name / "graph.pbtxt"))
        << name << ": run it with --write-graph samples/graphs/" << name;
  }
}

TEST_F(TrainingSamplesTest, BadCountsAreOneLineAndExitOne) {
  for (const auto& [name, args] : std::vector<std::pair<std::string, std::string>>{
           {"linear_regression", "--steps 0"}, {"mnist_softmax", "--tiny --steps x"},
           {"mnist_softmax", "--tiny --learning-rate -1"}, {"mlp_training", "--tiny --log-every 0"}}) {
    RunResult r = RunSample(name, args);
    EXPECT_EQ(r.exit_code, 1) << name << " " << args;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << name << " " << args << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(name + ": --")) << args;
  }
}

}  // namespace
}  // namespace xlens
