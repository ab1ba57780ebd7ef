// Runs each sample as a user would (build/samples/NAME) and checks the story it tells against
// what TensorFlow 2.21 did with the same program (../shared/corpus/tf): the error text, the
// clusters and their reasons, the kernels with and without fusion, the compilations.
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/e2e/cli_test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

std::string CorpusDir() { return std::string(XLENS_SHARED_DIR) + "/corpus/tf"; }
#define SKIP_WITHOUT_CORPUS() \
  if (!fs::exists(CorpusDir())) GTEST_SKIP() << "the TF corpus is absent: " << CorpusDir()

using Ran = RunResult;

// Runs build/samples/NAME with `args` in `dir`, with only the flag variables in `env` ("NAME=value
// ..." as a shell writes them) set.
Ran RunSample(const std::string& name, const std::string& args, const fs::path& dir,
              const std::string& env = "") {
  return RunShellCommand("cd '" + dir.string() + "' && env -u XLA_FLAGS -u TF_XLA_FLAGS " +
                         "-u TF_DUMP_GRAPH_PREFIX " + env + " " + std::string(XLENS_BINARY_DIR) +
                         "/samples/" + name + " " + args + " 2>&1");
}

std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

nlohmann::json ReadJson(const fs::path& path) { return nlohmann::json::parse(ReadText(path)); }

// The first capture of `pattern` in `text`, "" when it does not match.
std::string Capture(const std::string& text, const std::string& pattern) {
  std::smatch m;
  return std::regex_search(text, m, std::regex(pattern)) ? m[1].str() : "";
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// "compiled: cluster_0 = {a, b}" lines -> the partition {{a, b}, ...}.
std::set<std::set<std::string>> CompiledPartition(const std::string& output) {
  std::set<std::set<std::string>> partition;
  std::regex line(R"(compiled: cluster_\d+ = \{([^}]*)\})");
  for (auto it = std::sregex_iterator(output.begin(), output.end(), line);
       it != std::sregex_iterator(); ++it) {
    std::set<std::string> nodes;
    std::stringstream list((*it)[1].str());
    for (std::string node; std::getline(list, node, ',');) {
      node.erase(0, node.find_first_not_of(' '));
      nodes.insert(node);
    }
    partition.insert(nodes);
  }
  return partition;
}

// TensorFlow's clusters from clusters.json, restricted to nodes `keep` accepts.
std::set<std::set<std::string>> TfPartition(const nlohmann::json& clusters,
                                            const std::function<bool(const nlohmann::json&)>& keep) {
  std::map<std::string, std::set<std::string>> by_cluster;
  for (const auto& [node, info] : clusters["nodes"].items()) {
    if (info["cluster"].is_null() || !keep(info)) continue;
    by_cluster[info["cluster"].get<std::string>()].insert(node);
  }
  std::set<std::set<std::string>> partition;
  for (auto& [name, nodes] : by_cluster) partition.insert(nodes);
  return partition;
}

class SamplesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("xlens_samples_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

TEST_F(SamplesTest, FusionDemoRunsThreeKernelsOpByOpAndOneFusedWithTheJit) {
  Ran ran = RunSample("fusion_demo", "--trace t.json", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("op by op (--jit=off): 3 kernels: mul (Mul), add (AddV2), Sum (Sum)"));
  EXPECT_THAT(ran.output, HasSubstr("with the JIT (--jit=on): 1 kernel: fusion (cpu_kernel)"));
  // Both results agree with the float64 reference the sample computes, to float32 rounding.
  const double op_by_op = std::stod(Capture(ran.output, R"(  result (-?[0-9.]+) \(float64)"));
  const double reference = std::stod(Capture(ran.output, R"(float64 reference (-?[0-9.]+))"));
  const double jitted = std::stod(Capture(ran.output, R"(  result (-?[0-9.]+), 1 compilation)"));
  EXPECT_NEAR(op_by_op, reference, 1e-4);
  EXPECT_NEAR(jitted, reference, 1e-4);
  // The trace written is the JIT run's: one generated kernel span, one compilation.
  nlohmann::json trace = ReadJson(dir_ / "t.json");
  int kernels = 0, compiles = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e.value("ph", std::string()) != "X") continue;
    const std::string category = e.value("cat", std::string());
    kernels += category == "cpu_kernel";
    compiles += category == "compile";
  }
  EXPECT_EQ(kernels, 1);
  EXPECT_EQ(compiles, 1);
}

TEST_F(SamplesTest, FusionDemoNamesThePerPassDumpWhereTheFusionAppears) {
  Ran ran = RunSample("fusion_demo", "--xla_dump_to=dump --xla_dump_hlo_pass_re=.*", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("made by the pass 'fusion'"));
  const std::string file = Capture(ran.output, R"(it first appears in (\S+))");
  ASSERT_FALSE(file.empty()) << ran.output;
  EXPECT_THAT(file, HasSubstr(".fusion.after_fusion."));
  const std::string after = ReadText(dir_ / file);
  EXPECT_THAT(after, HasSubstr("kind=kInput"));
  // The step before the fusion pass has no fusion: the file named is where it first appears.
  const int step = std::stoi(Capture(file, R"(\.(\d{4})\.fusion\.after_fusion)"));
  std::string before_file;
  for (const auto& entry : fs::directory_iterator(dir_ / "dump")) {
    const std::string name = entry.path().filename().string();
    char tag[16];
    std::snprintf(tag, sizeof(tag), ".%04d.", step - 1);
    if (name.find(tag) != std::string::npos && name.ends_with(".txt")) before_file = entry.path();
  }
  ASSERT_FALSE(before_file.empty());
  EXPECT_THAT(ReadText(before_file), ::testing::Not(HasSubstr("fusion(")));
}

TEST_F(SamplesTest, FusionDemoUnderAutoClusteringIsLeftAloneAsTensorFlowLeftIt) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow's autojit run clustered nothing (3 ops < min size 4); with min size 1 it made
  // one cluster of the whole function.
  nlohmann::json tf = ReadJson(CorpusDir() + "/fusion_demo/autojit/clusters.json");
  EXPECT_TRUE(TfPartition(tf, [](const nlohmann::json&) { return true; }).empty());
  Ran ran = RunSample("fusion_demo", "--jit=auto", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("with the JIT (--jit=auto): 3 kernels"));
  EXPECT_THAT(ran.output, HasSubstr("left out: {Const, Identity, Sum, add, mul}: cluster too small (3 < --tf_xla_min_cluster_size=4"));

  nlohmann::json tf_min1 = ReadJson(CorpusDir() + "/fusion_demo/autojit_min1/clusters.json");
  auto partition = TfPartition(tf_min1, [](const nlohmann::json&) { return true; });
  ASSERT_EQ(partition, (std::set<std::set<std::string>>{{"Const", "mul", "add", "Sum"}}));
  Ran min1 = RunSample("fusion_demo", "--jit=auto --tf_xla_min_cluster_size=1", dir_);
  ASSERT_EQ(min1.exit_code, 0) << min1.output;
  EXPECT_THAT(min1.output, HasSubstr("with the JIT (--jit=auto): 1 kernel: fusion (cpu_kernel)"));
}

TEST_F(SamplesTest, FlagsComeFromTheEnvironmentAsTensorFlowReadsThem) {
  // A default session with auto-jit turned on by TF_XLA_FLAGS clusters as --jit=auto does, and
  // XLA_FLAGS and TF_DUMP_GRAPH_PREFIX say where the dumps go.
  Ran ran = RunSample("fusion_demo", "--jit=default", dir_,
                      "TF_XLA_FLAGS='--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                      "--tf_xla_min_cluster_size=1 --tf_xla_clustering_debug' "
                      "XLA_FLAGS=--xla_dump_to=xla TF_DUMP_GRAPH_PREFIX=tf");
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("with the JIT (--jit=default): 1 kernel: fusion (cpu_kernel)"));
  EXPECT_TRUE(fs::exists(dir_ / "xla/manifest.json"));
  EXPECT_TRUE(fs::exists(dir_ / "tf/mark_for_compilation.pbtxt"));
  Ran bad = RunSample("fusion_demo", "", dir_, "TF_XLA_FLAGS=--tf_xla_no_such_flag=1");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_THAT(bad.output, HasSubstr("tf_xla_no_such_flag"));
}

TEST_F(SamplesTest, JitScopeCompilesTheScopesAsTensorFlowDidAndSaysWhyNotTheRest) {
  SKIP_WITHOUT_CORPUS();
  // The graph as Python built it, clustered without grappler's rewrite of x + x: TensorFlow's
  // run with the arithmetic optimizer off.
  const fs::path tf = CorpusDir() + "/jit_scope/autojit_off_no_arith_opt";
  Ran ran = RunSample("jit_scope", "", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(CompiledPartition(ran.output),
            TfPartition(ReadJson(tf / "clusters.json"), [](const nlohmann::json&) { return true; }));
  const std::string tf_reason = Capture(ReadText(tf / "log.txt"), R"(Rejecting c_nocompile: (.*))");
  ASSERT_FALSE(tf_reason.empty());
  EXPECT_THAT(ran.output, HasSubstr("left out: {c_nocompile, c_nocompile/y}: " + tf_reason));
  EXPECT_THAT(ran.output, HasSubstr("not in a jit_scope"));
  EXPECT_THAT(ran.output, HasSubstr("2 compilations"));
  const double worst = std::stod(Capture(ran.output, R"(largest difference from float64: (\S+))"));
  EXPECT_LT(worst, 1e-5);

  // Auto-clustering: the unscoped nodes join scope 1's cluster; `out` cannot (a cycle through
  // c_nocompile). TensorFlow's grappler had rewritten `add`, so it is compared without it.
  nlohmann::json tf_on = ReadJson(CorpusDir() + "/jit_scope/autojit_on/clusters.json");
  Ran on = RunSample("jit_scope", "--jit=auto", dir_);
  ASSERT_EQ(on.exit_code, 0) << on.output;
  std::set<std::set<std::string>> ours;
  for (std::set<std::string> cluster : CompiledPartition(on.output)) {
    cluster.erase("add");
    ours.insert(cluster);
  }
  EXPECT_EQ(ours, TfPartition(tf_on, [](const nlohmann::json& n) {
              return n.value("in_runtime_graph", false);
            }));
  EXPECT_THAT(on.output, HasSubstr("left out: {out}: "));
  EXPECT_THAT(on.output, HasSubstr("would create a cycle"));
}

TEST_F(SamplesTest, JitScopeGraphCarriesTheScopeAttributesPythonSets) {
  SKIP_WITHOUT_CORPUS();
  Ran ran = RunSample("jit_scope", "--jit=off --write-graph g", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  nlohmann::json tf = ReadJson(CorpusDir() + "/jit_scope/autojit_off/result.json");
  const std::string graph = ReadText(dir_ / "g/graph.pbtxt");
  for (const auto& [node, attrs] : tf["python_side_xla_attrs"].items()) {
    // The node's block in the text GraphDef: from its name to the next node.
    const size_t at = graph.find("name: \"" + node + "\"");
    ASSERT_NE(at, std::string::npos) << node;
    const std::string block = graph.substr(at, graph.find("\nnode {", at) - at);
    const bool compile = attrs["_XlaCompile"].get<bool>();
    EXPECT_THAT(block, HasSubstr("_XlaCompile")) << node;
    EXPECT_THAT(block, HasSubstr(compile ? "b: true" : "b: false")) << node;
    EXPECT_THAT(block, HasSubstr(attrs["_XlaScope"].get<std::string>())) << node;
  }
}

TEST_F(SamplesTest, NotCompilableFailsWithTensorFlowsErrorUnderMustCompile) {
  SKIP_WITHOUT_CORPUS();
  Ran ran = RunSample("not_compilable", "", dir_);
  EXPECT_EQ(ran.exit_code, 1);
  EXPECT_EQ(Count(ran.output, "\n"), 1) << ran.output;  // one line
  EXPECT_THAT(ran.output, HasSubstr("not_compilable: Detected unsupported operations when trying "
                                    "to compile graph __inference_f[_XlaMustCompile=true] on "
                                    "XLA_CPU_JIT: Unique ("));
  EXPECT_THAT(ran.output, HasSubstr("{{node Unique}}){{node Unique}}"));

  // UniqueWithCounts, which TensorFlow 2.21 refuses too: its words, from the op on, verbatim.
  nlohmann::json tf = ReadJson(CorpusDir() + "/not_compilable/jit_compile/result.json");
  const std::string tf_text = tf["functions"]["unique_with_counts"]["exception"]["message"];
  const std::string tf_tail = tf_text.substr(tf_text.find(" on XLA_CPU_JIT: "),
                                             tf_text.find('\n') - tf_text.find(" on XLA_CPU_JIT: "));
  ASSERT_THAT(tf_tail, HasSubstr("UniqueWithCounts (No registered"));
  Ran counts = RunSample("not_compilable", "--op=UniqueWithCounts", dir_);
  EXPECT_EQ(counts.exit_code, 1);
  EXPECT_THAT(counts.output, HasSubstr("Detected unsupported operations when trying to compile "
                                       "graph __inference_f[_XlaMustCompile=true]" + tf_tail));
}

TEST_F(SamplesTest, NotCompilableRunsWithUniqueLeftOutOfTheClusterWithoutMustCompile) {
  SKIP_WITHOUT_CORPUS();
  const std::string tf_reason =
      Capture(ReadText(CorpusDir() + "/not_compilable/autojit/log.txt"),
              R"(Found uncompilable node Unique \(op Unique\): (.*))");
  ASSERT_EQ(tf_reason, "Unique op");
  Ran ran = RunSample("not_compilable", "--jit=auto", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("left out: {Unique}: uncompilable: " + tf_reason));
  EXPECT_EQ(CompiledPartition(ran.output),
            (std::set<std::set<std::string>>{{"mul/y", "mul", "add/y", "add", "Abs", "sub/y", "sub"}}));
  // unique(abs(x*3 + 1) - 2) of x = [1,2,1,3,2,5,1,7], computed here.
  const int x[8] = {1, 2, 1, 3, 2, 5, 1, 7};
  std::vector<int> y, idx;
  for (int v : x) {
    const int t = std::abs(v * 3 + 1) - 2;
    auto it = std::find(y.begin(), y.end(), t);
    idx.push_back(static_cast<int>(it - y.begin()));
    if (it == y.end()) y.push_back(t);
  }
  auto list = [](const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + std::to_string(v[i]);
    return "[" + s + "]";
  };
  EXPECT_THAT(ran.output, HasSubstr("y = int32 [" + std::to_string(y.size()) + "] " + list(y)));
  EXPECT_THAT(ran.output, HasSubstr("idx = int32 [8] " + list(idx)));
  EXPECT_THAT(ran.output, HasSubstr("1 compilation"));
}

TEST_F(SamplesTest, RecompileCompilesTwiceAndSaysWhyOnce) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow compiled the must-compile function once per shape: two HLO modules.
  int tf_modules = 0;
  for (const auto& e : fs::directory_iterator(CorpusDir() + "/recompile/dynamic_signature/xla")) {
    tf_modules += e.path().string().ends_with(".before_optimizations.txt");
  }
  ASSERT_EQ(tf_modules, 2);
  Ran ran = RunSample("recompile", "--trace t.json", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_EQ(Count(ran.output, "recompiling"), 1) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("recompiling __inference_f: argument shapes changed from "
                                    "(f32[1,10], f32[1,10]) to (f32[1,100], f32[1,100])"));
  EXPECT_THAT(ran.output, HasSubstr("call 3: a, b f32[1,10]: cached executable"));
  EXPECT_THAT(ran.output, HasSubstr(std::to_string(tf_modules) + " compilations, " +
                                    std::to_string(tf_modules) + " compile spans in the trace"));
  EXPECT_EQ(Count(ran.output, "(right)"), 3);
  int compiles = 0, recompile_markers = 0;
  const nlohmann::json trace = ReadJson(dir_ / "t.json");  // kept: the loop reads into it
  for (const auto& e : trace["traceEvents"]) {
    const std::string category = e.value("cat", std::string());
    const std::string name = e.value("name", std::string());
    if (category != "compile") continue;
    compiles += name.starts_with("compile ");
    recompile_markers += name.starts_with("recompile ");
  }
  EXPECT_EQ(compiles, tf_modules);
  EXPECT_EQ(recompile_markers, 1);
}

TEST_F(SamplesTest, RecompileUnderAutoClusteringIsLazyAsTensorFlowIs) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow logged "Not compiling for signature" once for the function's cluster on the
  // first [1,100] request, and compiled on the second.
  const std::string log = ReadText(CorpusDir() + "/recompile/autojit_dynamic_signature/log.txt");
  ASSERT_EQ(Count(log, "Not compiling for signature: cluster_1["), 1);
  Ran ran = RunSample("recompile", "--jit=auto --tf_xla_min_cluster_size=1", dir_);
  ASSERT_EQ(ran.exit_code, 0) << ran.output;
  EXPECT_THAT(ran.output, HasSubstr("call 2: a, b f32[1,100]: run op by op (lazy compilation"));
  EXPECT_THAT(ran.output, HasSubstr("call 3: a, b f32[1,100]: compiled again"));
  EXPECT_THAT(ran.output, HasSubstr("call 4: a, b f32[1,10]: cached executable"));
  EXPECT_EQ(Count(ran.output, "recompiling cluster_0"), 1);
  EXPECT_THAT(ran.output, HasSubstr("2 compilations, 2 compile spans"));
}

TEST_F(SamplesTest, CommittedGraphsAreWhatTheProgramsBuild) {
  for (const std::string name : {"fusion_demo", "jit_scope", "not_compilable", "recompile"}) {
    Ran ran = RunSample(name, "--jit=off --write-graph " + name, dir_);
    ASSERT_EQ(ran.exit_code, 0) << name << ": " << ran.output;
    EXPECT_EQ(ReadText(dir_ / name / "graph.pbtxt"),
              ReadText(fs::path(XLENS_SOURCE_DIR) / "samples/graphs" / name / "graph.pbtxt"))
        << name << ": run it with --write-graph samples/graphs/" << name;
  }
}

// `xlens` run on a committed graph, in `dir`.
Ran RunXlens(const std::string& args, const fs::path& dir) {
  return RunShellCommand("cd '" + dir.string() + "' && env -u XLA_FLAGS -u TF_XLA_FLAGS " +
                         "-u TF_DUMP_GRAPH_PREFIX " + std::string(XLENS_BINARY_DIR) +
                         "/compiler/cli/xlens " + args + " 2>&1");
}

TEST_F(SamplesTest, TheCommandLineTellsTheSameStoryFromTheCommittedGraphs) {
  SKIP_WITHOUT_CORPUS();
  const std::string graphs = std::string(XLENS_SOURCE_DIR) + "/samples/graphs/";
  // The jit_scope graph clusters in `xlens cluster` as in the sample: the two scopes.
  Ran cluster = RunXlens("cluster -v " + graphs + "jit_scope/graph.pbtxt", dir_);
  ASSERT_EQ(cluster.exit_code, 0) << cluster.output;
  Ran sample = RunSample("jit_scope", "", dir_);
  for (const auto& nodes : CompiledPartition(sample.output)) {
    for (const std::string& node : nodes) EXPECT_THAT(cluster.output, HasSubstr("  " + node + " ("));
  }
  EXPECT_THAT(cluster.output, HasSubstr("c_nocompile (Mul): kXlaCompileAttr(_XlaCompile) is false."));
  // The not_compilable graph fails under `xlens graph run --jit=compile` with the sample's error,
  // fed TensorFlow's own input.
  Ran run = RunXlens("graph run " + graphs + "not_compilable/graph.pbtxt --jit=compile "
                     "--function=__inference_f --fetch Identity --feed x=" + CorpusDir() +
                     "/not_compilable/jit_compile/inputs/x.npy", dir_);
  EXPECT_EQ(run.exit_code, 1);
  Ran failed = RunSample("not_compilable", "", dir_);
  const std::string error = failed.output.substr(failed.output.find("Detected"));
  EXPECT_THAT(run.output, HasSubstr(error)) << run.output;
}

TEST_F(SamplesTest, BadArgumentsAreOneLineAndExitOne) {
  for (const std::string name : {"fusion_demo", "jit_scope", "not_compilable", "recompile"}) {
    for (const std::string args : {"--jit=maybe", "--frobnicate", "--xla_dump_tu=x", "--trace"}) {
      Ran ran = RunSample(name, args, dir_);
      EXPECT_EQ(ran.exit_code, 1) << name << " " << args;
      EXPECT_EQ(Count(ran.output, "\n"), 1) << name << " " << args << ": " << ran.output;
      EXPECT_THAT(ran.output, HasSubstr(name + ": ")) << args;
    }
    Ran help = RunSample(name, "--help", dir_);
    EXPECT_EQ(help.exit_code, 0);
    EXPECT_THAT(help.output, HasSubstr("--jit=off|default|auto|on"));
  }
  Ran typo = RunSample("fusion_demo", "--xla_dump_tu=x", dir_);
  EXPECT_THAT(typo.output, HasSubstr("did you mean --xla_dump_to?"));
}

}  // namespace
}  // namespace xlens
