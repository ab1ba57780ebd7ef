// `xlens graph` as a user runs it: on a TensorFlow-written graph (samples/graphs/linreg_tf1,
// TensorFlow 2.21's linear regression) checked against the numbers TensorFlow recorded, and on a
// corpus of broken graphs and command lines (tests/graph/testdata/broken/cases.txt), each of which
// must end in exit 1 with one line naming the file and what is wrong.
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/hlo/npy.h"
#include "e2e/cli_test_util.h"

namespace xlens {
namespace {

const std::string kGraphTestdata = std::string(XLENS_SOURCE_DIR) + "/tests/graph/testdata";
const std::string kSamples = std::string(XLENS_SOURCE_DIR) + "/samples/graphs";

std::string Trim(std::string s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t\r");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size())) {
    s.replace(at, from.size(), to);
  }
  return s;
}

// The stderr line of a failed run (RunXlens merges the streams; a failed command prints nothing
// else).
void ExpectOneLineError(const RunResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.output;
  ASSERT_FALSE(r.output.empty()) << what;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << what << ": not one line:\n" << r.output;
  EXPECT_EQ(r.output.rfind("xlens: ", 0), 0u) << what << "\n" << r.output;
}

TEST(GraphCliTest, BrokenCorpusEndsInOneLineNamingTheFileAndTheNode) {
  std::ifstream manifest(kGraphTestdata + "/broken/cases.txt");
  ASSERT_TRUE(manifest) << "tests/graph/testdata/broken/cases.txt";
  std::string line;
  int cases = 0;
  while (std::getline(manifest, line)) {
    if (Trim(line).empty() || Trim(line)[0] == '#') continue;
    std::vector<std::string> columns;
    std::stringstream split(line);
    for (std::string column; std::getline(split, column, '|');) columns.push_back(Trim(column));
    ASSERT_GE(columns.size(), 2u) << line;
    std::string args = Replace(Replace(columns[0], "{dir}", kGraphTestdata + "/broken"),
                               "{testdata}", kGraphTestdata);
    RunResult r = RunXlens(args);
    ExpectOneLineError(r, columns[0]);
    for (size_t i = 1; i < columns.size(); ++i) {
      EXPECT_TRUE(std::regex_search(r.output, std::regex(columns[i])))
          << columns[0] << "\n  message: " << r.output << "  does not match /" << columns[i] << "/";
    }
    ++cases;
  }
  EXPECT_GE(cases, 25);
}

// The reader-level corpus of graph_def_io (bytes protobuf cannot take) through every command.
TEST(GraphCliTest, ReaderCorpusEndsInOneLineNamingTheFile) {
  const std::string dir = kGraphTestdata + "/broken_graphdefs";
  if (!std::filesystem::is_directory(dir)) GTEST_SKIP() << dir << " is not in this checkout";
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    for (const char* command : {"verify", "print", "dot"}) {
      RunResult r = RunXlens(std::string("graph ") + command + " " + entry.path().string());
      ExpectOneLineError(r, name);
      EXPECT_NE(r.output.find(name), std::string::npos) << command << " " << name << ": " << r.output;
    }
  }
}

TEST(GraphCliTest, VerifyCountsNodesAndInferredShapes) {
  RunResult r = RunXlens("graph verify " + kGraphTestdata + "/add.pbtxt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output, "OK: 4 nodes, shapes inferred for 4 of 4\n");
}

TEST(GraphCliTest, PrintShowsEveryNodeWithItsInferredOutputs) {
  RunResult r = RunXlens("graph print " + kGraphTestdata + "/add.pbtxt");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("add = AddV2[T=float](x, c) -> float[2]\n"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("x = Placeholder[dtype=float, shape=[2]]() -> float[2]\n"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("4 nodes, 4 ops: AddV2 1, Const 1, Identity 1, Placeholder 1\n"),
            std::string::npos)
      << r.output;
}

TEST(GraphCliTest, RunComputesTheFetchAndWritesItAsNpy) {
  const std::string out = (std::filesystem::temp_directory_path() /
                           ("xlens_graph_run_" + std::to_string(::getpid())))
                              .string();
  RunResult r = RunXlens("graph run " + kGraphTestdata + "/add.pbtxt --feed x=" + kGraphTestdata +
                         "/x2.npy --fetch out --fetch c --outputs " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto out0 = ReadNpy(out + "/out0.npy");
  auto out1 = ReadNpy(out + "/out1.npy");
  ASSERT_TRUE(out0.ok() && out1.ok()) << r.output;
  // x2.npy is [10, 20]; c is [1, 2].
  EXPECT_EQ(out0->ToStringWithoutShape(), "{11, 22}");
  EXPECT_EQ(out1->ToStringWithoutShape(), "{1, 2}");
  std::filesystem::remove_all(out);
}

TEST(GraphCliTest, DotDrawsTensorBoardStylesAndLabelsEdgesWithTypes) {
  RunResult r = RunXlens("graph dot " + kGraphTestdata + "/add.pbtxt");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("shape=invhouse"), std::string::npos) << r.output;  // the placeholder
  EXPECT_NE(r.output.find("class=\"const\""), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("label=\"float [2]\""), std::string::npos) << r.output;
  RunResult cut = RunXlens("graph dot " + kGraphTestdata + "/add.pbtxt --node c --radius 1");
  ASSERT_EQ(cut.exit_code, 0) << cut.output;
  EXPECT_NE(cut.output.find("2 nodes not shown"), std::string::npos) << cut.output;
}

// TensorFlow 2.21 trained this graph for 50 steps from W = -1.66361, b = 0.13763
// (samples/graphs/linreg_tf1/README.md); the op-by-op run from the same values must give TensorFlow's
// loss curve.
TEST(GraphCliTest, LinregTrainsLikeTensorFlow) {
  const std::string dir = kSamples + "/linreg_tf1";
  RunResult r = RunXlens("graph run " + dir + "/graph.pbtxt --init init --assign weights=" + dir +
                         "/W_init.npy --assign bias=" + dir + "/b_init.npy --feed x_observed=" +
                         dir + "/x_observed.npy --feed y_observed=" + dir +
                         "/y_observed.npy --fetch Mean --target GradientDescent --steps 50");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto curve = ReadNpy(dir + "/loss_curve.npy");
  ASSERT_TRUE(curve.ok());
  for (int step : {1, 2, 25, 50}) {
    std::string prefix = "step " + std::to_string(step) + ": Mean = ";
    size_t at = r.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << r.output;
    double loss = std::stod(r.output.substr(at + prefix.size()));
    double want = curve->GetAsDouble(step - 1);
    EXPECT_NEAR(loss, want, 1e-4 * std::abs(want)) << "step " << step;
  }
}

// With the JIT, the training step is one launch of its cluster: the trace holds a span named
// after the cluster with the compiled kernels inside it, beside the tf_op spans of the nodes the
// executor still runs; and the losses are TensorFlow's.
TEST(GraphCliTest, LinregWithTheJitLaunchesItsClusterAsOneSpanWithTheKernelsInside) {
  const std::string dir = kSamples + "/linreg_tf1";
  const std::string trace =
      (std::filesystem::temp_directory_path() /
       ("xlens_graph_jit_trace_" + std::to_string(::getpid()) + ".json"))
          .string();
  RunResult r = RunXlens("graph run " + dir + "/graph.pbtxt --init init --feed x_observed=" + dir +
                         "/x_observed.npy --feed y_observed=" + dir +
                         "/y_observed.npy --fetch Mean --target GradientDescent --steps 50"
                         " --jit=auto --jit-level=ON_1 --tf_xla_cpu_global_jit --trace " + trace);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("xlens graph run: graph 1: cluster_"), std::string::npos) << r.output;
  auto curve = ReadNpy(dir + "/loss_curve.npy");
  ASSERT_TRUE(curve.ok());
  for (int step : {1, 50}) {
    std::string prefix = "step " + std::to_string(step) + ": Mean = ";
    size_t at = r.output.find(prefix);
    ASSERT_NE(at, std::string::npos) << r.output;
    EXPECT_NEAR(std::stod(r.output.substr(at + prefix.size())), curve->GetAsDouble(step - 1),
                1e-4 * std::abs(curve->GetAsDouble(step - 1)));
  }
  std::ifstream in(trace);
  ASSERT_TRUE(in) << trace;
  nlohmann::json j = nlohmann::json::parse(in);
  struct Span {
    std::string name, cat;
    double ts, dur;
  };
  std::vector<Span> spans;
  for (const auto& e : j["traceEvents"]) {
    if (e.value("ph", "") != "X") continue;
    spans.push_back({e.value("name", ""), e.value("cat", ""), e.value("ts", 0.0), e.value("dur", 0.0)});
  }
  int launches = 0, kernels_inside = 0, tf_ops = 0;
  for (const Span& launch : spans) {
    if (launch.cat != "execute" || launch.name.rfind("cluster_", 0) != 0) continue;
    ++launches;
    for (const Span& k : spans) {
      if (k.cat == "cpu_kernel" && k.ts >= launch.ts && k.ts + k.dur <= launch.ts + launch.dur + 1e-3) {
        ++kernels_inside;
      }
    }
  }
  for (const Span& s : spans) tf_ops += s.cat == "tf_op";
  EXPECT_GE(launches, 50);  // one per training step, plus the init's
  EXPECT_GE(kernels_inside, 50);
  EXPECT_GT(tf_ops, 0);  // what stays outside the clusters runs op by op
  std::filesystem::remove(trace);
}

// TensorFlow's TF1 while/cond graph under the JIT: the loop body and the taken branch run as
// compiled clusters inside the loop and cond frames, and the result is TensorFlow's for both
// values of the predicate.
TEST(GraphCliTest, WhileAndCondRunWithTheJitAsInTensorFlow) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/tf/control_flow_tf1/jit";
  if (!std::filesystem::exists(dir)) GTEST_SKIP() << "the TF corpus is absent: " << dir;
  const std::string tmp =
      (std::filesystem::temp_directory_path() / ("xlens_cf_jit_" + std::to_string(::getpid())))
          .string();
  std::filesystem::create_directories(tmp);
  for (bool pred : {true, false}) {
    Literal p = Literal::CreateR0<bool>(PrimitiveType::PRED, pred);
    ASSERT_TRUE(WriteNpy(tmp + "/pred.npy", p).ok());
    RunResult r = RunXlens("graph run " + dir + "/graph.pbtxt --jit=auto --jit-level=ON_1"
                           " --tf_xla_cpu_global_jit --feed x=" + dir + "/inputs/x.npy --feed pred=" +
                           tmp + "/pred.npy --fetch out --outputs " + tmp);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("cluster_4"), std::string::npos) << r.output;  // five clusters
    auto got = ReadNpy(tmp + "/out0.npy");
    auto want = ReadNpy(dir + std::string("/outputs/pred_") + (pred ? "True" : "False") + ".npy");
    ASSERT_TRUE(got.ok() && want.ok());
    ASSERT_EQ(got->element_count(), want->element_count());
    for (int64_t i = 0; i < want->element_count(); ++i) {
      EXPECT_NEAR(got->GetAsDouble(i), want->GetAsDouble(i), 1e-5) << "pred " << pred << " at " << i;
    }
  }
  std::filesystem::remove_all(tmp);
}

}  // namespace
}  // namespace xlens
