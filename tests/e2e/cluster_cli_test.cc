// `xlens cluster` as a user runs it, on graphs TensorFlow 2.21 itself clustered
// (../shared/corpus/tf: the graph as TensorFlow's mark_for_compilation saw it, with the flags and
// jit level of that run): the partition must be TensorFlow's (its mark_for_compilation dump), the
// nodes TensorFlow's log calls uncompilable must be left out with TensorFlow's reason, what
// partially_decluster took out must be what TensorFlow took out before encapsulating, and the
// dumps must carry TensorFlow's names. Broken graphs and command lines end in exit 1 with one line.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "e2e/cli_test_util.h"

namespace xlens {
namespace {

namespace fs = std::filesystem;

const std::string kCorpus = std::string(XLENS_SHARED_DIR) + "/corpus/tf";
const std::string kLinregDump = kCorpus + "/linreg_tf1/jit/tf_dump";
const std::string kMinSizeDump = kCorpus + "/min_cluster_size/default/tf_dump";
// The training-step graph of the linear regression (TensorFlow's third clustered graph), with
// the session's ON_1 and --tf_xla_cpu_global_jit of that run.
const std::string kLinregArgs =
    kLinregDump + "/before_mark_for_compilation_2.pbtxt --jit-level=ON_1 --tf_xla_cpu_global_jit";

#define SKIP_WITHOUT_CORPUS()                                                           \
  if (!fs::exists(kLinregDump) || !fs::exists(kMinSizeDump))                           \
  GTEST_SKIP() << "the TF corpus is absent (XLENS_SHARED_DIR=" << XLENS_SHARED_DIR << ")"

std::string ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The nodes of a GraphDef as TensorFlow writes it in text form: name -> _XlaCluster ("" for
// none). TensorFlow writes one field per line, a node's name first, its attrs indented below.
std::map<std::string, std::string> ClusterAttrs(const fs::path& pbtxt) {
  std::map<std::string, std::string> nodes;
  std::istringstream in(ReadText(pbtxt));
  std::string line, current;
  bool in_cluster_attr = false;
  const std::regex name(R"re(^  name: "(.*)"$)re"), s(R"re(^\s+s: "(.*)"$)re");
  std::smatch m;
  while (std::getline(in, line)) {
    if (std::regex_match(line, m, name)) {
      current = m[1].str();
      nodes[current] = "";
    } else if (line.find("key: \"_XlaCluster\"") != std::string::npos) {
      in_cluster_attr = true;
    } else if (in_cluster_attr && std::regex_match(line, m, s)) {
      nodes[current] = m[1].str();
      in_cluster_attr = false;
    }
  }
  return nodes;
}

using Partition = std::set<std::set<std::string>>;

Partition PartitionOfDump(const fs::path& pbtxt) {
  std::map<std::string, std::set<std::string>> by_cluster;
  for (const auto& [node, cluster] : ClusterAttrs(pbtxt)) {
    if (!cluster.empty()) by_cluster[cluster].insert(node);
  }
  Partition p;
  for (auto& [name, nodes] : by_cluster) p.insert(nodes);
  return p;
}

Partition PartitionOfJson(const nlohmann::json& j) {
  Partition p;
  for (const auto& [name, nodes] : j["clusters"].items()) {
    p.insert(nodes.get<std::set<std::string>>());
  }
  return p;
}

std::string Show(const Partition& p) {
  std::string out;
  for (const auto& c : p) {
    out += "{";
    for (const auto& n : c) out += n + " ";
    out += "} ";
  }
  return out;
}

// Sets an environment variable for the xlens runs of one test.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_) {
      ::setenv(name_, old_->c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void ExpectOneLineError(const RunResult& r, const std::string& what) {
  EXPECT_EQ(r.exit_code, 1) << what << "\n" << r.output;
  ASSERT_FALSE(r.output.empty()) << what;
  EXPECT_EQ(r.output.find('\n'), r.output.size() - 1) << what << ": not one line:\n" << r.output;
  EXPECT_EQ(r.output.rfind("xlens: ", 0), 0u) << what << "\n" << r.output;
}

class ClusterCliTest : public CliTest {
 protected:
  void SetUp() override {
    CliTest::SetUp();
    // The flags of the test's own environment must not leak into the runs.
    ::unsetenv("TF_XLA_FLAGS");
    ::unsetenv("TF_DUMP_GRAPH_PREFIX");
  }

  nlohmann::json RunJson(const std::string& args) {
    const std::string json = (dir_ / "clusters.json").string();
    RunResult r = RunXlens("cluster " + args + " --json " + json);
    EXPECT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json j = nlohmann::json::parse(ReadText(json), nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "--json wrote no JSON: " << ReadText(json);
    return j;
  }
};

TEST_F(ClusterCliTest, PrintsTheClustersAndWhyEveryOtherNodeWasLeftOut) {
  SKIP_WITHOUT_CORPUS();
  RunResult r = RunXlens("cluster " + kLinregArgs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // TensorFlow put all 40 nodes of the training step in one cluster (its dump), and left out the
  // two variables and the graph's _Arg/_Retval nodes.
  size_t clustered = 0;
  for (const auto& [node, cluster] : ClusterAttrs(kLinregDump + "/mark_for_compilation_2.pbtxt")) {
    clustered += !cluster.empty();
  }
  ASSERT_EQ(clustered, 40u);
  EXPECT_NE(r.output.find("cluster_0: 40 nodes ("), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("ResourceApplyGradientDescent x2"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("left out (5 of 45 nodes):\n"), std::string::npos) << r.output;
  // Every node TensorFlow's log calls uncompilable (in this graph) is listed with its reason.
  const auto nodes = ClusterAttrs(kLinregDump + "/before_mark_for_compilation_2.pbtxt");
  std::ifstream log(kCorpus + "/linreg_tf1/jit/log.txt");
  const std::regex found(R"(Found uncompilable node (\S+) \(op (\S+)\): (.*)$)");
  int checked = 0;
  for (std::string line; std::getline(log, line);) {
    std::smatch m;
    if (!std::regex_search(line, m, found) || !nodes.count(m[1].str())) continue;
    const std::string expected = "  " + m[1].str() + " (" + m[2].str() + "): uncompilable: " +
                                 m[3].str() + "\n";
    EXPECT_NE(r.output.find(expected), std::string::npos) << expected << "in\n" << r.output;
    ++checked;
  }
  EXPECT_GE(checked, 2);
  // -v lists the members, and marks the one partially_decluster took out.
  RunResult v = RunXlens("cluster -v " + kLinregArgs);
  ASSERT_EQ(v.exit_code, 0) << v.output;
  EXPECT_NE(v.output.find("  gradients/sub_grad/Shape_1 (Shape) [declustered]\n"), std::string::npos)
      << v.output;
  EXPECT_NE(v.output.find("  GradientDescent (NoOp)\n"), std::string::npos) << v.output;
}

TEST_F(ClusterCliTest, JsonHoldsTensorFlowsPartitionWithAReasonForEveryOtherNode) {
  SKIP_WITHOUT_CORPUS();
  struct Run {
    std::string dump_dir, suffix, flags;
  };
  for (const Run& run : {Run{kLinregDump, "_2", "--jit-level=ON_1 --tf_xla_cpu_global_jit"},
                         Run{kMinSizeDump, "_1", "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"}}) {
    SCOPED_TRACE(run.dump_dir + run.suffix);
    const std::string before = run.dump_dir + "/before_mark_for_compilation" + run.suffix + ".pbtxt";
    nlohmann::json j = RunJson(before + " " + run.flags);
    ASSERT_TRUE(j.is_object());
    // The documented structure, and nothing else.
    std::set<std::string> keys;
    for (const auto& [key, value] : j.items()) keys.insert(key);
    EXPECT_EQ(keys, (std::set<std::string>{"clusters", "declustered", "unclustered"}));
    ASSERT_TRUE(j["clusters"].is_object() && j["unclustered"].is_object() &&
                j["declustered"].is_object());
    for (const auto& [name, nodes] : j["clusters"].items()) {
      EXPECT_TRUE(std::regex_match(name, std::regex("cluster_[0-9]+"))) << name;
      ASSERT_TRUE(nodes.is_array()) << name;
    }
    for (const auto& [node, reason] : j["unclustered"].items()) {
      ASSERT_TRUE(reason.is_string()) << node;
      EXPECT_FALSE(reason.get<std::string>().empty()) << node;
    }
    // The partition is TensorFlow's.
    Partition ours = PartitionOfJson(j);
    Partition tf = PartitionOfDump(run.dump_dir + "/mark_for_compilation" + run.suffix + ".pbtxt");
    ASSERT_FALSE(tf.empty());
    EXPECT_EQ(ours, tf) << "xlens: " << Show(ours) << "\nTensorFlow: " << Show(tf);
    // Every node of the graph is in exactly one cluster or has a reason.
    std::map<std::string, int> seen;
    for (const auto& c : ours) {
      for (const auto& n : c) ++seen[n];
    }
    for (const auto& [node, reason] : j["unclustered"].items()) ++seen[node];
    for (const auto& [node, cluster] : ClusterAttrs(before)) {
      EXPECT_EQ(seen[node], 1) << node;
      seen.erase(node);
    }
    EXPECT_TRUE(seen.empty()) << seen.begin()->first << " is not a node of the graph";
    // What partially_decluster took out is what TensorFlow took out before encapsulating: in a
    // cluster of mark_for_compilation's dump, in none of encapsulate_subgraphs_before's.
    const auto marked = ClusterAttrs(run.dump_dir + "/mark_for_compilation" + run.suffix + ".pbtxt");
    const auto kept = ClusterAttrs(run.dump_dir + "/encapsulate_subgraphs_before" + run.suffix + ".pbtxt");
    std::set<std::string> tf_declustered, our_declustered;
    for (const auto& [node, cluster] : marked) {
      auto it = kept.find(node);
      if (!cluster.empty() && it != kept.end() && it->second.empty()) tf_declustered.insert(node);
    }
    for (const auto& [node, reason] : j["declustered"].items()) our_declustered.insert(node);
    EXPECT_EQ(our_declustered, tf_declustered);
  }
}

TEST_F(ClusterCliTest, DumpsTensorFlowsClusteringGraphsUnderTheDumpPrefix) {
  SKIP_WITHOUT_CORPUS();
  // The settings as TensorFlow reads them: both from the environment, and the debug flag on the
  // command line instead.
  for (bool flag_on_command_line : {false, true}) {
    SCOPED_TRACE(flag_on_command_line ? "--tf_xla_clustering_debug on the command line"
                                      : "TF_XLA_FLAGS=--tf_xla_clustering_debug");
    const fs::path dump = dir_ / (flag_on_command_line ? "dump_cli" : "dump_env");
    ScopedEnv prefix("TF_DUMP_GRAPH_PREFIX", dump.string());
    std::optional<ScopedEnv> flags;
    if (!flag_on_command_line) flags.emplace("TF_XLA_FLAGS", "--tf_xla_clustering_debug");
    RunResult r = RunXlens("cluster " + kLinregArgs +
                           (flag_on_command_line ? " --tf_xla_clustering_debug" : ""));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("clustering graphs dumped under"), std::string::npos) << r.output;
    for (const char* name :
         {"before_mark_for_compilation", "mark_for_compilation", "mark_for_compilation_annotated",
          "encapsulate_subgraphs_before", "encapsulate_subgraphs_after",
          "encapsulate_subgraphs_subgraph_cluster_0", "build_xla_ops"}) {
      // TensorFlow names the same files, with _2 for the third graph of its process.
      EXPECT_TRUE(fs::exists(kLinregDump + "/" + name + "_2.pbtxt") ||
                  fs::exists(kLinregDump + "/" + name + ".pbtxt"))
          << name << " is not one of TensorFlow's names";
      EXPECT_TRUE(fs::is_regular_file(dump / (std::string(name) + ".pbtxt"))) << name;
      const std::string dot = ReadText(dump / (std::string(name) + ".dot"));
      EXPECT_EQ(dot.rfind("digraph", 0), 0u) << name << ".dot: " << dot.substr(0, 80);
    }
    // The graphs are the clustering's: mark_for_compilation's attrs are TensorFlow's partition,
    // and build_xla_ops launches the cluster.
    EXPECT_EQ(PartitionOfDump(dump / "mark_for_compilation.pbtxt"),
              PartitionOfDump(kLinregDump + "/mark_for_compilation_2.pbtxt"));
    const std::string built = ReadText(dump / "build_xla_ops.pbtxt");
    EXPECT_NE(built.find("op: \"_XlaCompile\""), std::string::npos);
    EXPECT_NE(built.find("op: \"_XlaRun\""), std::string::npos);
  }
}

TEST_F(ClusterCliTest, WithoutTheDebugFlagNothingIsDumped) {
  SKIP_WITHOUT_CORPUS();
  const fs::path dump = dir_ / "dump";
  ScopedEnv prefix("TF_DUMP_GRAPH_PREFIX", dump.string());
  RunResult r = RunXlens("cluster " + kLinregArgs);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(fs::exists(dump) && !fs::is_empty(dump));
}

TEST_F(ClusterCliTest, AnUnknownFlagInTfXlaFlagsIsTensorFlowsFatalMessage) {
  SKIP_WITHOUT_CORPUS();
  // TensorFlow: "F... parse_flags_from_env.cc:234] Unknown flag in TF_XLA_FLAGS:
  // --tf_xla_no_such_flag=1", exit 1 (corpus/tf/flag_probe/unknown_flag).
  ScopedEnv flags("TF_XLA_FLAGS", "--tf_xla_no_such_flag=1");
  RunResult r = RunXlens("cluster " + kLinregArgs);
  ExpectOneLineError(r, "unknown flag");
  EXPECT_EQ(r.output.rfind("xlens: Unknown flag in TF_XLA_FLAGS: --tf_xla_no_such_flag=1", 0), 0u)
      << r.output;
}

TEST_F(ClusterCliTest, BrokenInputsEndInOneLineNamingTheProblem) {
  const std::string x = R"(node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } })"
                        "\n";
  auto node = [](const std::string& name, const std::string& op, const std::string& a,
                 const std::string& b) {
    return "node { name: \"" + name + "\" op: \"" + op + "\" input: \"" + a + "\" input: \"" + b +
           "\" attr { key: \"T\" value { type: DT_FLOAT } } }\n";
  };
  const std::string good = Write("good.pbtxt", x + node("a", "AddV2", "x", "x") +
                                                   node("b", "Mul", "a", "x") +
                                                   node("c", "Sub", "b", "a") +
                                                   node("d", "AddV2", "c", "b"));
  // The good graph clusters (4 ops reach the default minimum), so the failures below are the
  // inputs' own.
  RunResult ok = RunXlens("cluster " + good + " --jit-level=ON_1 --tf_xla_cpu_global_jit");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("cluster_0: 4 nodes (AddV2 x2, Mul, Sub)"), std::string::npos) << ok.output;

  const std::string cycle = Write("cycle.pbtxt", x + node("a", "AddV2", "x", "b") +
                                                     node("b", "Mul", "a", "x"));
  const std::string truncated = Write("truncated.pbtxt", x + "node { name: \"a\" op: \"AddV2\" inp");
  const std::string junk = Write("junk.pb", std::string("\x0a\xff\xff\xff\x7f\x0a\x0a\x0a", 8));
  const std::string unknown_op = Write("unknown_op.pbtxt", x + node("a", "Frobnicate", "x", "x"));
  struct Case {
    std::string args, pattern;
  };
  const std::vector<Case> cases = {
      {good + " --jit-level=ON_3", "--jit-level: unknown global_jit_level 'ON_3'"},
      {good + " --jit-level=", "--jit-level"},
      {(dir_ / "missing.pbtxt").string(), "missing.pbtxt: cannot open: No such file"},
      {cycle, "cycle.pbtxt: the graph has a cycle"},
      {truncated, "truncated.pbtxt"},
      {junk, "junk.pb: not a binary GraphDef"},
      {good + " --tf_xla_min_cluster_size=abc", "--tf_xla_min_cluster_size=abc: expected an integer"},
      {good + " --jit-level=ON_1 --tf_xla_cpu_global_jit --tf_xla_ops_to_cluster=NoSuchOp",
       "'NoSuchOp' passed to --tf_xla_ops_to_cluster is not supported by XLA"},
      {good + " --tf_xla_no_such_flag", "unknown flag --tf_xla_no_such_flag"},
      {good + " --no-such-option", "--no-such-option"},
  };
  for (const Case& c : cases) {
    RunResult r = RunXlens("cluster " + c.args);
    ExpectOneLineError(r, c.args);
    EXPECT_NE(r.output.find(c.pattern), std::string::npos) << c.args << "\n  " << r.output
                                                           << "  does not say: " << c.pattern;
  }
  // A --json that cannot be written fails the command, with one line on stderr naming it after
  // the report on stdout.
  RunResult unwritable =
      RunXlens("cluster " + good + " --json " + (dir_ / "no" / "such" / "dir" / "out.json").string());
  EXPECT_EQ(unwritable.exit_code, 1) << unwritable.output;
  EXPECT_TRUE(std::regex_search(unwritable.output,
                                std::regex("(^|\n)xlens: --json: [^\n]*out\\.json: cannot create[^\n]*\n")))
      << unwritable.output;
  // An op xlens does not know is simply not clusterable, as for TensorFlow's graphs.
  RunResult unknown = RunXlens("cluster " + unknown_op + " --jit-level=ON_1 --tf_xla_cpu_global_jit");
  EXPECT_EQ(unknown.exit_code, 0) << unknown.output;
  EXPECT_NE(unknown.output.find("  a (Frobnicate): "), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace xlens
