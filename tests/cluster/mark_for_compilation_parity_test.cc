// mark_for_compilation against TensorFlow 2.21 itself: for every graph TensorFlow clustered in
// ../shared/corpus/tf, the graph exactly as TensorFlow's pass saw it
// (tf_dump/before_mark_for_compilation[_N].pbtxt) is clustered with the same TF_XLA_FLAGS and
// session jit level, and the partition of nodes into clusters must be TensorFlow's (the
// `_XlaCluster` attrs of mark_for_compilation[_N].pbtxt; cluster names may differ, the node sets
// may not). Where TensorFlow's log names why it refused a node ("Found uncompilable node X (op
// Y): reason"), our reason for X must say the same. Then partially_decluster must take out what
// TensorFlow took out before encapsulation (encapsulate_subgraphs_before[_N].pbtxt).
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/cluster/mark_for_compilation_pass.h"
#include "compiler/cluster/partially_decluster_pass.h"
#include "compiler/cluster/xla_cluster_util.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using graph::Graph;


std::string ReadText(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

using Partition = std::set<std::set<std::string>>;

// The partition a graph's _XlaCluster attrs describe.
Partition PartitionOf(const graph::GraphDef& def) {
  std::map<std::string, std::set<std::string>> by_cluster;
  for (const graph::NodeDef& node : def.node) {
    auto it = node.attr.find("_XlaCluster");
    if (it != node.attr.end()) by_cluster[it->second.s()].insert(node.name);
  }
  Partition partition;
  for (auto& [name, nodes] : by_cluster) partition.insert(nodes);
  return partition;
}

std::string Show(const Partition& p) {
  std::string out;
  for (const auto& cluster : p) {
    out += "{";
    for (const auto& n : cluster) out += n + " ";
    out += "} ";
  }
  return out;
}

struct Case {
  fs::path variant;
  std::string suffix;  // "", "_1", ...
};

std::vector<Case> CasesWithClusteringDumps() {
  std::vector<Case> cases;
  for (const auto& [dump, suffix] :
       cluster_testing::TfDumpsNamed("before_mark_for_compilation")) {
    cases.push_back({fs::path(dump).parent_path(), suffix});
  }
  return cases;
}

// The session-level jit of a TF1 run, as the corpus describes it.
graph::GlobalJitLevel SessionJitLevel(const fs::path& variant) {
  auto result = nlohmann::json::parse(ReadText(variant / "result.json"), nullptr, false);
  if (result.is_object() && result.contains("global_jit_level")) {
    auto level = graph::ParseGlobalJitLevel(result["global_jit_level"].get<std::string>());
    if (level.ok()) return *level;
  }
  std::string summary = ReadText(variant / "summary.json");
  auto j = nlohmann::json::parse(summary, nullptr, false);
  std::string description = j.is_object() ? j.value("description", "") : "";
  if (description.find("ON_1") != std::string::npos) return graph::GlobalJitLevel::kOn1;
  if (description.find("ON_2") != std::string::npos) return graph::GlobalJitLevel::kOn2;
  return graph::GlobalJitLevel::kDefault;
}

// "Found uncompilable node X (op Y): reason" lines of TensorFlow's log, by (node, op).
std::map<std::pair<std::string, std::string>, std::set<std::string>> UncompilableReasons(
    const fs::path& variant) {
  std::map<std::pair<std::string, std::string>, std::set<std::string>> reasons;
  std::ifstream in(variant / "log.txt");
  std::regex line(R"(Found uncompilable node (\S+) \(op (\S+)\): (.*)$)");
  for (std::string text; std::getline(in, text);) {
    std::smatch m;
    if (std::regex_search(text, m, line)) reasons[{m[1].str(), m[2].str()}].insert(m[3].str());
  }
  return reasons;
}

class MarkForCompilationParityTest : public ::testing::TestWithParam<Case> {};

TEST_P(MarkForCompilationParityTest, SamePartitionAndReasonsAsTensorFlow) {
  const Case& c = GetParam();
  fs::path dump = c.variant / "tf_dump";
  auto before = graph::ReadGraphDef((dump / ("before_mark_for_compilation" + c.suffix + ".pbtxt")).string());
  ASSERT_TRUE(before.ok()) << before.status().message();
  auto expected_def =
      graph::ReadGraphDef((dump / ("mark_for_compilation" + c.suffix + ".pbtxt")).string());
  ASSERT_TRUE(expected_def.ok()) << expected_def.status().message();

  auto env = nlohmann::json::parse(ReadText(c.variant / "env.json"));
  FlagEnvironment flag_env;
  flag_env.tf_xla_flags = env.value("TF_XLA_FLAGS", "");
  auto flags = ParseDebugOptions(flag_env);
  ASSERT_TRUE(flags.ok()) << flags.status().message();

  graph::GraphConstructorOptions load;
  load.allow_unknown_ops = true;
  auto g = Graph::FromGraphDef(*before, load);
  ASSERT_TRUE(g.ok()) << g.status().message();
  MarkForCompilationOptions options =
      MarkForCompilationOptionsFor(*flags, SessionJitLevel(c.variant));
  auto result = MarkForCompilationPass(options).Run(g->get());
  ASSERT_TRUE(result.ok()) << result.status().message();

  Partition ours = PartitionOf((*g)->ToGraphDef());
  Partition theirs = PartitionOf(*expected_def);
  EXPECT_EQ(ours, theirs) << "ours:   " << Show(ours) << "\nTensorFlow: " << Show(theirs);
  EXPECT_TRUE(result->had_candidates);

  // Every node left out has a reason, and TensorFlow's where it logged one.
  auto logged = UncompilableReasons(c.variant);
  for (graph::Node* node : (*g)->op_nodes()) {
    if (GetXlaClusterForNode(*node)) continue;
    auto it = result->unclustered.find(node->name());
    ASSERT_NE(it, result->unclustered.end()) << node->name();
    EXPECT_FALSE(it->second.empty()) << node->name();
    auto tf = logged.find({node->name(), node->type_string()});
    if (tf == logged.end()) continue;
    bool agrees = false;
    for (const std::string& reason : tf->second) {
      agrees |= it->second.find(reason) != std::string::npos;
    }
    EXPECT_TRUE(agrees) << node->name() << ": ours '" << it->second << "', TensorFlow '"
                        << *tf->second.begin() << "'";
  }

  // partially_decluster: what reached encapsulation in TensorFlow. TensorFlow numbers the
  // encapsulation dumps over every graph, the clustering dumps only over graphs with candidates,
  // so the matching dump is the one holding the same nodes.
  std::set<std::string> names;
  for (const graph::NodeDef& n : expected_def->node) names.insert(n.name);
  std::optional<graph::GraphDef> enc;
  for (const auto& f : fs::directory_iterator(dump)) {
    if (f.path().filename().string().rfind("encapsulate_subgraphs_before", 0) != 0) continue;
    auto candidate = graph::ReadGraphDef(f.path().string());
    ASSERT_TRUE(candidate.ok()) << candidate.status().message();
    std::set<std::string> candidate_names;
    for (const graph::NodeDef& n : candidate->node) candidate_names.insert(n.name);
    if (candidate_names == names) enc = std::move(*candidate);
  }
  if (!enc) return;
  // TensorFlow runs its passes on the graph TensorFlow clustered: start from TensorFlow's marks,
  // so this checks the declustering alone.
  auto marked = Graph::FromGraphDef(*expected_def, load);
  ASSERT_TRUE(marked.ok());
  ClusteringResult marked_result;
  for (graph::Node* node : (*marked)->op_nodes()) {
    if (auto cl = GetXlaClusterForNode(*node)) marked_result.clusters[*cl].push_back(node->name());
  }
  ASSERT_TRUE(PartiallyDeclusterPass().Run(marked->get(), &marked_result).ok());
  std::set<std::string> ours_declustered, theirs_declustered;
  std::map<std::string, bool> clustered_at_encapsulate;
  for (const graph::NodeDef& n : enc->node) {
    clustered_at_encapsulate[n.name] = n.attr.count("_XlaCluster") != 0;
  }
  for (const graph::NodeDef& n : expected_def->node) {
    auto it = clustered_at_encapsulate.find(n.name);
    if (n.attr.count("_XlaCluster") && it != clustered_at_encapsulate.end() && !it->second) {
      theirs_declustered.insert(n.name);
    }
  }
  for (const auto& [name, reason] : marked_result.declustered) ours_declustered.insert(name);
  EXPECT_EQ(ours_declustered, theirs_declustered);
}

std::string CaseName(const ::testing::TestParamInfo<Case>& info) {
  std::string name = info.param.variant.parent_path().filename().string() + "_" +
                     info.param.variant.filename().string() + info.param.suffix;
  for (char& ch : name) {
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  }
  return name;
}

INSTANTIATE_TEST_SUITE_P(Corpus, MarkForCompilationParityTest,
                         ::testing::ValuesIn(CasesWithClusteringDumps()), CaseName);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(MarkForCompilationParityTest);

TEST(MarkForCompilationParityCorpus, IsThereOrSkips) {
  if (cluster_testing::TfCorpusDir().empty()) GTEST_SKIP() << "the TF corpus is absent";
  EXPECT_GE(CasesWithClusteringDumps().size(), 40u);
}

}  // namespace
}  // namespace xlens::cluster
