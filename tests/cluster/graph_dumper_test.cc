// GraphDumper: TensorFlow's dump file names (`_N` for repeats), files our reader parses back,
// `.dot` files Graphviz renders with the clusters boxed and the reasons shown, the annotated
// variant checked against TensorFlow's mark_for_compilation_annotated dumps, the dumps of the
// encapsulation checked against TensorFlow's, and a dump that cannot be written reported as a
// Status.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <gtest/gtest.h>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/cluster_graph_dot.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/cluster/graph_dumper.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using graph::GraphDef;
using graph::NodeDef;


class GraphDumperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("xlens_graph_dumper_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  // XLENS_TEST_KEEP_DUMPS=1 keeps the files for a look at them.
  void TearDown() override {
    if (std::getenv("XLENS_TEST_KEEP_DUMPS")) {
      std::cout << "dumps kept in " << dir_ << "\n";
      return;
    }
    fs::remove_all(dir_);
  }

  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    if (!fs::is_directory(dir_)) return out;
    for (const auto& f : fs::directory_iterator(dir_)) out.push_back(f.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path dir_;
};

bool HaveDot() { return std::system("command -v dot >/dev/null 2>&1") == 0; }

// Renders `path` with Graphviz; "" on success, else what dot said.
std::string RenderWithDot(const fs::path& path) {
  fs::path svg = path;
  svg.replace_extension(".svg");
  fs::path err = path;
  err.replace_extension(".dot_err");
  std::string cmd = "dot -Tsvg '" + path.string() + "' -o '" + svg.string() + "' 2>'" +
                    err.string() + "'";
  int rc = std::system(cmd.c_str());
  std::ifstream in(err);
  std::stringstream ss;
  ss << in.rdbuf();
  fs::remove(err);
  bool rendered = rc == 0 && fs::exists(svg) && fs::file_size(svg) > 0;
  fs::remove(svg);
  return rendered ? "" : "dot failed (" + std::to_string(rc) + "): " + ss.str();
}

// x, y -> mul (cluster_0) -> add (cluster_0) -> out; s = AsString(x) left out.
GraphDef SmallClusteredGraph() {
  GraphDef def;
  auto node = [&](std::string name, std::string op, std::vector<std::string> inputs,
                  std::string cluster) {
    NodeDef n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.input = std::move(inputs);
    if (n.op == "Placeholder") {
      n.attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
    } else {
      n.attr["T"] = graph::AttrValue::Type(graph::DT_FLOAT);
    }
    if (!cluster.empty()) n.attr[kXlaClusterAttr] = graph::AttrValue::String(cluster);
    def.node.push_back(std::move(n));
  };
  node("x", "Placeholder", {}, "");
  node("y", "Placeholder", {}, "");
  node("mul", "Mul", {"x", "y"}, "cluster_0");
  node("add", "AddV2", {"mul", "y"}, "cluster_0");
  node("s", "AsString", {"x"}, "");
  node("out", "Identity", {"add", "^s"}, "");
  return def;
}

ClusteringResult SmallResult() {
  ClusteringResult r;
  r.clusters["cluster_0"] = {"mul", "add"};
  r.unclustered["s"] = "No registered 'AsString' OpKernel for XLA_CPU_JIT devices";
  r.unclustered["out"] = "cluster too small (1 < 4)";
  r.had_candidates = true;
  return r;
}

TEST_F(GraphDumperTest, NumbersRepeatedNamesAsTensorFlow) {
  GraphDumper dumper(dir_.string());
  GraphDef def = SmallClusteredGraph();
  for (int i = 0; i < 3; ++i) {
    auto path = dumper.Dump("mark_for_compilation", def);
    ASSERT_TRUE(path.ok()) << path.status().message();
  }
  auto other = dumper.Dump("before_mark_for_compilation", def);
  ASSERT_TRUE(other.ok()) << other.status().message();
  EXPECT_EQ(*other, (dir_ / "before_mark_for_compilation.pbtxt").string());
  EXPECT_EQ(dumper.PeekPath("mark_for_compilation"),
            (dir_ / "mark_for_compilation_3.pbtxt").string());
  EXPECT_EQ(Files(), (std::vector<std::string>{
                         "before_mark_for_compilation.dot", "before_mark_for_compilation.pbtxt",
                         "mark_for_compilation.dot", "mark_for_compilation.pbtxt",
                         "mark_for_compilation_1.dot", "mark_for_compilation_1.pbtxt",
                         "mark_for_compilation_2.dot", "mark_for_compilation_2.pbtxt"}));
  // A name is one path component, as TensorFlow makes it.
  auto slashed = dumper.Dump("a/b", def);
  ASSERT_TRUE(slashed.ok()) << slashed.status().message();
  EXPECT_EQ(*slashed, (dir_ / "a_b.pbtxt").string());
}

TEST_F(GraphDumperTest, DumpsParseBackAndRenderWithClustersAndReasons) {
  GraphDumper dumper(dir_.string());
  GraphDef def = SmallClusteredGraph();
  ClusteringResult result = SmallResult();
  auto path = dumper.Dump("mark_for_compilation", def, &result);
  ASSERT_TRUE(path.ok()) << path.status().message();
  auto back = graph::ReadGraphDef(*path);
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_EQ(back->node.size(), def.node.size());
  for (size_t i = 0; i < def.node.size(); ++i) {
    EXPECT_EQ(back->node[i].name, def.node[i].name);
    EXPECT_EQ(back->node[i].input, def.node[i].input);
    EXPECT_EQ(back->node[i].attr, def.node[i].attr);
  }
  std::ifstream in(dir_ / "mark_for_compilation.dot");
  std::stringstream dot;
  dot << in.rdbuf();
  EXPECT_NE(dot.str().find("subgraph \"cluster_cluster_0\""), std::string::npos) << dot.str();
  EXPECT_NE(dot.str().find("not clustered: No registered 'AsString' OpKernel"), std::string::npos)
      << dot.str();
  EXPECT_NE(dot.str().find("not clustered: cluster too small (1 < 4)"), std::string::npos);
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  EXPECT_EQ(RenderWithDot(dir_ / "mark_for_compilation.dot"), "");
}

TEST_F(GraphDumperTest, ReasonsAreCutInLabelsButWholeInTooltips) {
  GraphDef def = SmallClusteredGraph();
  ClusteringResult result = SmallResult();
  std::string long_reason(200, 'r');
  result.unclustered["s"] = long_reason;
  std::string dot = ClusterGraphToDot(def, &result, {"t", 20});
  EXPECT_NE(dot.find("not clustered: " + std::string(20, 'r') + "...\""), std::string::npos);
  EXPECT_NE(dot.find("tooltip=\"s (AsString): not clustered: " + long_reason + "\""),
            std::string::npos);
}

TEST_F(GraphDumperTest, AnnotatedDumpMatchesTensorFlow) {
  std::string root = cluster_testing::TfCorpusDir();
  if (root.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  int graphs = 0, nodes = 0;
  for (const auto& [dir, suffix] : cluster_testing::TfDumpsNamed("mark_for_compilation_annotated")) {
    const fs::path dump(dir);
    const fs::path file = dump / ("mark_for_compilation_annotated" + suffix + ".pbtxt");
    auto tf = graph::ReadGraphDef(file.string());
    auto marked = graph::ReadGraphDef((dump / ("mark_for_compilation" + suffix + ".pbtxt")).string());
    ASSERT_TRUE(tf.ok() && marked.ok()) << file;
    GraphDef ours = AnnotateForDump(*marked);
    ASSERT_EQ(ours.node.size(), tf->node.size()) << file;
    for (size_t i = 0; i < ours.node.size(); ++i) {
      EXPECT_EQ(ours.node[i].name, tf->node[i].name) << file;
      EXPECT_EQ(ours.node[i].input, tf->node[i].input) << file << ": " << tf->node[i].name;
      EXPECT_EQ(ours.node[i].attr, tf->node[i].attr) << file << ": " << tf->node[i].name;
      ++nodes;
    }
    ++graphs;
  }
  std::cout << "[ parity   ] " << graphs << " annotated graphs, " << nodes << " nodes\n";
  EXPECT_GT(graphs, 40);
}

TEST_F(GraphDumperTest, AnnotationFallsBackOnTheClusteringResult) {
  GraphDef def = SmallClusteredGraph();
  for (NodeDef& n : def.node) n.attr.erase(kXlaClusterAttr);
  ClusteringResult result = SmallResult();
  GraphDef annotated = AnnotateForDump(def, &result);
  EXPECT_EQ(annotated.node[2].name, "cluster_0/mul");
  EXPECT_EQ(annotated.node[2].input,
            (std::vector<std::string>{"unclustered/x", "unclustered/y"}));
  EXPECT_EQ(annotated.node[5].input,
            (std::vector<std::string>{"cluster_0/add", "^unclustered/s"}));
}

TEST_F(GraphDumperTest, EncapsulationDumpsAreTensorFlows) {
  std::string root = cluster_testing::TfCorpusDir();
  if (root.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  const std::string tf_dir = root + "/linreg_tf1/jit/tf_dump";
  auto before = graph::ReadGraphDef(tf_dir + "/encapsulate_subgraphs_before_2.pbtxt");
  ASSERT_TRUE(before.ok()) << before.status().message();
  auto g = graph::Graph::FromGraphDef(*before);
  ASSERT_TRUE(g.ok()) << g.status().message();
  GraphDumper dumper(dir_.string());
  EncapsulateSubgraphsPass encapsulate(&dumper);
  auto encapsulated = encapsulate.Run(**g);
  ASSERT_TRUE(encapsulated.ok()) << encapsulated.status().message();
  EXPECT_TRUE(encapsulate.dump_errors().empty());
  BuildXlaOpsPass build({}, &dumper);
  auto built = build.Run(*encapsulated->graph);
  ASSERT_TRUE(built.ok()) << built.status().message();
  std::vector<std::string> expected = {
      "build_xla_ops.dot",
      "build_xla_ops.pbtxt",
      "encapsulate_fdef_cluster_1.pbtxt",
      "encapsulate_fdef_graph_cluster_1.dot",
      "encapsulate_fdef_graph_cluster_1.pbtxt",
      "encapsulate_subgraphs_after.dot",
      "encapsulate_subgraphs_after.pbtxt",
      "encapsulate_subgraphs_before.dot",
      "encapsulate_subgraphs_before.pbtxt",
      "encapsulate_subgraphs_subgraph_cluster_1.dot",
      "encapsulate_subgraphs_subgraph_cluster_1.pbtxt"};
  EXPECT_EQ(Files(), expected);

  // The function-body dumps hold TensorFlow's nodes, ops and inputs (the _Arg and _Retval nodes
  // come in the order the edges met them, so nodes are compared by name).
  for (const char* name : {"encapsulate_subgraphs_subgraph_cluster_1",
                           "encapsulate_fdef_graph_cluster_1"}) {
    auto ours = graph::ReadGraphDef((dir_ / (std::string(name) + ".pbtxt")).string());
    auto tf = graph::ReadGraphDef(tf_dir + "/" + name + ".pbtxt");
    ASSERT_TRUE(ours.ok() && tf.ok()) << name;
    std::map<std::string, std::pair<std::string, std::vector<std::string>>> o, t;
    for (const NodeDef& n : ours->node) o[n.name] = {n.op, n.input};
    for (const NodeDef& n : tf->node) t[n.name] = {n.op, n.input};
    EXPECT_EQ(o, t) << name;
  }
  auto fdef = graph::ReadFunctionDef((dir_ / "encapsulate_fdef_cluster_1.pbtxt").string());
  ASSERT_TRUE(fdef.ok()) << fdef.status().message();
  auto tf_fdef = graph::ReadFunctionDef(tf_dir + "/encapsulate_fdef_cluster_1.pbtxt");
  ASSERT_TRUE(tf_fdef.ok()) << tf_fdef.status().message();
  EXPECT_EQ(fdef->signature.name, tf_fdef->signature.name);
  EXPECT_EQ(fdef->node_def.size(), tf_fdef->node_def.size());
  EXPECT_EQ(fdef->ret, tf_fdef->ret);
  EXPECT_EQ(fdef->control_ret, tf_fdef->control_ret);

  // Every graph dump parses back and loads; the one with call nodes through its library.
  for (const std::string& f : Files()) {
    fs::path p = dir_ / f;
    if (p.extension() != ".pbtxt" || f.rfind("encapsulate_fdef_cluster", 0) == 0) continue;
    auto def = graph::ReadGraphDef(p.string());
    ASSERT_TRUE(def.ok()) << def.status().message();
    auto loaded = GraphFromGraphDefWithFunctions(*def);
    EXPECT_TRUE(loaded.ok()) << f << ": " << loaded.status().message();
  }
  if (!HaveDot()) GTEST_SKIP() << "Graphviz's dot is not installed";
  for (const std::string& f : Files()) {
    if (fs::path(f).extension() == ".dot") {
      EXPECT_EQ(RenderWithDot(dir_ / f), "") << f;
    }
  }
}

// Running both passes over every graph of a run, in the run's order, with one dumper writes the
// files TensorFlow wrote: the same names, the same `_N` numbering.
TEST_F(GraphDumperTest, EveryRunDumpsTensorFlowsFileNames) {
  std::string root = cluster_testing::TfCorpusDir();
  if (root.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  int runs = 0, files = 0, identical = 0, differing = 0;
  for (const auto& c : fs::directory_iterator(root)) {
    if (!c.is_directory()) continue;
    for (const auto& v : fs::directory_iterator(c.path())) {
      fs::path tf_dir = v.path() / "tf_dump";
      if (!fs::is_directory(tf_dir)) continue;
      std::set<std::string> tf_files;
      std::vector<std::string> suffixes;
      for (const auto& f : fs::directory_iterator(tf_dir)) {
        std::string name = f.path().filename().string();
        if (name.rfind("encapsulate_", 0) == 0 || name.rfind("build_xla_ops", 0) == 0) {
          tf_files.insert(name);
        }
        const std::string prefix = "encapsulate_subgraphs_before";
        if (name.rfind(prefix, 0) == 0) {
          suffixes.push_back(name.substr(prefix.size(), name.size() - prefix.size() - 6));
        }
      }
      // Only runs where TensorFlow dumped both passes for every graph.
      bool complete = !suffixes.empty();
      for (const std::string& s : suffixes) {
        complete = complete && tf_files.count("build_xla_ops" + s + ".pbtxt");
      }
      if (!complete) continue;
      std::sort(suffixes.begin(), suffixes.end(), [](const std::string& a, const std::string& b) {
        return a.size() != b.size() ? a.size() < b.size() : a < b;
      });
      fs::path out = dir_ / (c.path().filename().string() + "_" + v.path().filename().string());
      GraphDumper dumper(out.string());
      bool several_clusters = false;
      for (const std::string& s : suffixes) {
        // kConfigProto: the session's ConfigProto, taken from TensorFlow's dump.
        BuildXlaOpsOptions options;
        auto tf_built = graph::ReadGraphDef((tf_dir / ("build_xla_ops" + s + ".pbtxt")).string());
        ASSERT_TRUE(tf_built.ok()) << tf_built.status().message();
        for (const NodeDef& n : tf_built->node) {
          if (n.op == "StatefulPartitionedCall" && n.attr.count("config_proto")) {
            options.config_proto = n.attr.at("config_proto").s();
          }
        }
        auto before = graph::ReadGraphDef(
            (tf_dir / ("encapsulate_subgraphs_before" + s + ".pbtxt")).string());
        ASSERT_TRUE(before.ok()) << before.status().message();
        auto g = graph::Graph::FromGraphDef(*before);
        ASSERT_TRUE(g.ok()) << g.status().message();
        EncapsulateSubgraphsPass encapsulate(&dumper);
        auto encapsulated = encapsulate.Run(**g);
        ASSERT_TRUE(encapsulated.ok()) << encapsulated.status().message();
        several_clusters = several_clusters || encapsulated->graph->library().function.size() >
                                                   before->library.function.size() + 1;
        BuildXlaOpsPass build(options, &dumper);
        ASSERT_TRUE(build.Run(*encapsulated->graph).ok());
      }
      std::set<std::string> ours;
      for (const auto& f : fs::directory_iterator(out)) {
        if (f.path().extension() == ".pbtxt") ours.insert(f.path().filename().string());
      }
      EXPECT_EQ(ours, tf_files) << tf_dir;
      ++runs;
      files += static_cast<int>(ours.size());
      for (const std::string& f : ours) {
        std::ifstream a(out / f, std::ios::binary), b(tf_dir / f, std::ios::binary);
        std::stringstream sa, sb;
        sa << a.rdbuf();
        sb << b.rdbuf();
        if (sa.str() == sb.str()) {
          ++identical;
        } else {
          // kCallNodeOrder: TensorFlow converts several clusters of one graph in a hash map's
          // order, which differs between processes, and dumps each body with the functions
          // converted before it. Everything else is byte for byte TensorFlow's.
          EXPECT_TRUE(several_clusters) << (tf_dir / f).string() << " differs from ours";
          ++differing;
        }
      }
    }
  }
  std::cout << "[ parity   ] " << runs << " runs, " << files << " dump files named as TensorFlow, "
            << identical << " byte for byte identical, " << differing
            << " in graphs of several clusters differ in order\n";
  EXPECT_GT(identical, 300);
  EXPECT_GT(runs, 20);
}

TEST_F(GraphDumperTest, AnUnwritableDumpIsAStatusNotAFailure) {
  fs::create_directories(dir_);
  std::ofstream(dir_ / "not_a_directory") << "x";
  GraphDumper dumper((dir_ / "not_a_directory").string());
  auto path = dumper.Dump("mark_for_compilation", SmallClusteredGraph());
  ASSERT_FALSE(path.ok());
  EXPECT_NE(path.status().message().find("mark_for_compilation"), std::string::npos)
      << path.status().message();

  // The passes go on and say what they could not dump.
  auto g = graph::Graph::FromGraphDef(SmallClusteredGraph());
  ASSERT_TRUE(g.ok()) << g.status().message();
  EncapsulateSubgraphsPass encapsulate(&dumper);
  auto out = encapsulate.Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(encapsulate.dump_errors().size(), 5u);  // before, subgraph, fdef_graph, fdef, after
  EXPECT_NE(out->graph->FindNode("cluster_0"), nullptr);
}

}  // namespace
}  // namespace xlens::cluster
