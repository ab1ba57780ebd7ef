// mark_for_compilation on small graphs, one decision each, with the reason a user reads for every
// node left out. (Parity with TensorFlow on its own graphs: mark_for_compilation_parity_test.)
#include "compiler/cluster/mark_for_compilation_pass.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/cluster/partially_decluster_pass.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

using ::testing::HasSubstr;
using graph::Graph;

using cluster_testing::kF32;
using cluster_testing::NodeText;
const char* const kPlaceholder = cluster_testing::kPlaceholderF32;

std::unique_ptr<Graph> Load(const std::string& text) { return cluster_testing::LoadGraph(text); }

MarkForCompilationOptions AutoJit(int64_t min_cluster_size = 4) {
  MarkForCompilationOptions options;
  options.global_jit_level = graph::GlobalJitLevel::kOn2;
  options.cpu_global_jit_flag = true;
  options.min_cluster_size = min_cluster_size;
  return options;
}

ClusteringResult Cluster(Graph* g, const MarkForCompilationOptions& options) {
  auto result = MarkForCompilationPass(options).Run(g);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? *result : ClusteringResult{};
}

std::string Chain(int n) {
  std::string text = NodeText("x", "Placeholder", {}, kPlaceholder);
  const char* ops[] = {"Sin", "Cos", "Exp", "Tanh", "Neg", "Abs"};
  std::string prev = "x";
  for (int i = 0; i < n; ++i) {
    std::string name = "op" + std::to_string(i);
    text += NodeText(name, ops[i], {prev}, kF32);
    prev = name;
  }
  return text;
}

TEST(MarkForCompilationPassTest, ClustersAChainAndSaysWhyThePlaceholderStaysOut) {
  auto g = Load(Chain(4));
  ClusteringResult r = Cluster(g.get(), AutoJit());
  ASSERT_EQ(r.clusters.size(), 1u);
  EXPECT_EQ(r.clusters.begin()->second,
            (std::vector<std::string>{"op0", "op1", "op2", "op3"}));
  EXPECT_THAT(r.unclustered["x"],
              HasSubstr("No registered 'Placeholder' OpKernel for XLA_CPU_JIT devices compatible "
                        "with node {{node x}}"));
  // The attrs TensorFlow sets.
  const graph::Node* op0 = g->FindNode("op0");
  EXPECT_EQ(graph::FindAttr(op0->attrs(), "_XlaCluster")->s(), r.clusters.begin()->first);
  EXPECT_TRUE(graph::FindAttr(op0->attrs(), "_XlaAlreadyClustered")->b());
}

TEST(MarkForCompilationPassTest, AGraphCallingCompiledClustersIsNotClusteredAgain) {
  // encapsulate_subgraphs_after as TensorFlow dumps it: the chain is already the call of
  // cluster_0's function. Clustering it again would name a new cluster after an existing one.
  auto g = Load(Chain(4) + R"(
node { name: "cluster_0" op: "cluster_0" input: "x"
       attr { key: "_XlaCompiledKernel" value { b: true } } }
library {
  function {
    signature { name: "cluster_0" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "s" op: "Sin" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "s:y:0" }
  }
}
)");
  ASSERT_NE(g, nullptr);
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_EQ(r.unclustered["op0"], "the graph was clustered already");
  EXPECT_EQ(graph::FindAttr(g->FindNode("op0")->attrs(), "_XlaCluster"), nullptr);
}

TEST(MarkForCompilationPassTest, TooSmallAClusterIsDroppedWithItsSize) {
  auto g = Load(Chain(3) + NodeText("c", "Const", {},
                                    "attr { key: \"dtype\" value { type: DT_FLOAT } } attr { key: "
                                    "\"value\" value { tensor { dtype: DT_FLOAT float_val: 1 } } }") +
                NodeText("add", "AddV2", {"op2", "c"}, kF32));
  // Sin, Cos, Exp, AddV2 and a Const: four that count. With min 5 it is too small, and the Const
  // does not count.
  ClusteringResult r = Cluster(g.get(), AutoJit(5));
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_THAT(r.unclustered["op0"],
              HasSubstr("cluster too small (4 < --tf_xla_min_cluster_size=5; Const and Identity "
                        "do not count)"));
  g = Load(Chain(3) + NodeText("c", "Const", {},
                               "attr { key: \"dtype\" value { type: DT_FLOAT } } attr { key: "
                               "\"value\" value { tensor { dtype: DT_FLOAT float_val: 1 } } }") +
           NodeText("add", "AddV2", {"op2", "c"}, kF32));
  EXPECT_EQ(Cluster(g.get(), AutoJit(4)).clusters.size(), 1u);
}

TEST(MarkForCompilationPassTest, ACycleThroughAnUncompilableNodeSplitsTheCluster) {
  // a -> AsString -> StringToNumber -> c and a -> c: a and c cannot be one cluster.
  std::string text = NodeText("x", "Placeholder", {}, kPlaceholder) +
                     NodeText("a", "Sin", {"x"}, kF32) +
                     NodeText("s", "AsString", {"a"}, kF32) +
                     NodeText("n", "StringToNumber", {"s"},
                              "attr { key: \"out_type\" value { type: DT_FLOAT } }") +
                     NodeText("c", "AddV2", {"a", "n"}, kF32);
  auto g = Load(text);
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  EXPECT_EQ(r.clusters.size(), 2u);
  EXPECT_THAT(r.unclustered["s"], HasSubstr("No registered 'AsString' OpKernel"));
  // Both clusters of one node are kept with min 1; with min 2 each says why it did not grow.
  g = Load(text);
  r = Cluster(g.get(), AutoJit(2));
  EXPECT_THAT(r.unclustered["a"],
              HasSubstr("contracting the edge would create a cycle via [s,n]"));
}

TEST(MarkForCompilationPassTest, UniqueIsRefusedByNameAsInTensorFlow) {
  auto g = Load(NodeText("x", "Placeholder", {}, kPlaceholder) +
                NodeText("u", "Unique", {"x"},
                         "attr { key: \"T\" value { type: DT_FLOAT } } attr { key: \"out_idx\" "
                         "value { type: DT_INT32 } }"));
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  EXPECT_EQ(r.unclustered["u"], "uncompilable: Unique op");
}

TEST(MarkForCompilationPassTest, OnTheCpuAutoJitNeedsTheCpuGlobalJitFlag) {
  auto g = Load(Chain(4));
  MarkForCompilationOptions options = AutoJit();
  options.cpu_global_jit_flag = false;
  ClusteringResult r = Cluster(g.get(), options);
  EXPECT_TRUE(r.clusters.empty());
  EXPECT_FALSE(r.had_candidates);
  EXPECT_THAT(r.unclustered["op0"], HasSubstr("--tf_xla_cpu_global_jit"));
  // With the jit level off, it says so.
  options.global_jit_level = graph::GlobalJitLevel::kOff;
  g = Load(Chain(4));
  EXPECT_THAT(Cluster(g.get(), options).unclustered["op0"], HasSubstr("the jit level is OFF"));
}

TEST(MarkForCompilationPassTest, JitScopesCompileWithAutoJitOffAndNeverMerge) {
  auto scoped = [](const std::string& scope) {
    return std::string(kF32) + " attr { key: \"_XlaCompile\" value { b: true } } attr { key: "
                               "\"_XlaScope\" value { s: \"" + scope + "\" } }";
  };
  auto g = Load(NodeText("x", "Placeholder", {}, kPlaceholder) +
                NodeText("a", "Sin", {"x"}, scoped("jit_scope_0")) +
                NodeText("b", "Cos", {"a"}, scoped("jit_scope_1")) +
                NodeText("c", "Exp", {"b"}, kF32));
  MarkForCompilationOptions options;  // auto-jit off
  ClusteringResult r = Cluster(g.get(), options);
  // One cluster per scope, each kept below the minimum size because it was asked for.
  EXPECT_EQ(r.clusters.size(), 2u);
  EXPECT_THAT(r.unclustered["c"], HasSubstr("not in a jit_scope"));
}

TEST(MarkForCompilationPassTest, FlagsExcludeOpsAndStopOnFuel) {
  MarkForCompilationOptions options = AutoJit(1);
  options.ops_to_cluster = "Sin,Exp";
  auto g = Load(Chain(4));
  ClusteringResult r = Cluster(g.get(), options);
  EXPECT_EQ(r.unclustered["op1"],
            "Rejecting TF operation Cos as it is not listed in --tf_xla_ops_to_cluster.");
  options = AutoJit(1);
  options.fuel->store(2);
  g = Load(Chain(4));
  r = Cluster(g.get(), options);
  EXPECT_THAT(r.unclustered["op3"], HasSubstr("--tf_xla_clustering_fuel"));
  options = AutoJit(1);
  options.ops_to_cluster = "NoSuchOp";
  g = Load(Chain(4));
  auto bad = MarkForCompilationPass(options).Run(g.get());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "The operation 'NoSuchOp' passed to --tf_xla_ops_to_cluster is not supported by XLA.");
}

TEST(MarkForCompilationPassTest, JitLevelComesFromTheFlagsOverTheSessionAsInTensorFlow) {
  auto level = [](const std::string& tf_xla_flags, graph::GlobalJitLevel session) {
    FlagEnvironment env;
    env.tf_xla_flags = tf_xla_flags;
    auto flags = ParseDebugOptions(env);
    EXPECT_TRUE(flags.ok()) << flags.status().message();
    return EffectiveJitLevel(*flags, session);
  };
  using L = graph::GlobalJitLevel;
  EXPECT_EQ(level("", L::kDefault), L::kOff);  // DEFAULT means off
  EXPECT_EQ(level("", L::kOn1), L::kOn1);
  EXPECT_EQ(level("--tf_xla_auto_jit=2", L::kDefault), L::kOn2);
  EXPECT_EQ(level("--tf_xla_auto_jit=-1", L::kOn1), L::kOff);  // the flag wins
  EXPECT_EQ(level("--tf_xla_auto_jit=0", L::kOn2), L::kOn2);    // 0: as the session says
  EXPECT_EQ(level("--tf_xla_auto_jit=fusible", L::kDefault), L::kOn1);
  // "fusible" restricts the ops, as TensorFlow's FUSIBLE list does.
  FlagEnvironment env;
  env.tf_xla_flags = "--tf_xla_auto_jit=fusible --tf_xla_cpu_global_jit";
  MarkForCompilationOptions options =
      MarkForCompilationOptionsFor(*ParseDebugOptions(env), L::kDefault);
  EXPECT_EQ(options.ops_to_cluster, "FUSIBLE");
  auto g = Load(Chain(4));
  options.min_cluster_size = 1;
  EXPECT_EQ(Cluster(g.get(), options).clusters.size(), 1u);
}

TEST(MarkForCompilationPassTest, XlaCompileFalseKeepsANodeOut) {
  auto g = Load(Chain(3) + NodeText("d", "Tanh", {"op2"},
                                    std::string(kF32) +
                                        " attr { key: \"_XlaCompile\" value { b: false } }"));
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  EXPECT_EQ(r.unclustered["d"], "kXlaCompileAttr(_XlaCompile) is false.");
}

TEST(MarkForCompilationPassTest, BranchesOfASwitchAreNotMerged) {
  auto g = Load(NodeText("x", "Placeholder", {}, kPlaceholder) +
                NodeText("p", "Placeholder", {}, "attr { key: \"dtype\" value { type: DT_BOOL } }") +
                NodeText("sw", "Switch", {"x", "p"}, kF32) +
                NodeText("f", "Sin", {"sw"}, kF32) + NodeText("t", "Cos", {"sw:1"}, kF32) +
                NodeText("f2", "Exp", {"f"}, kF32) + NodeText("t2", "Exp", {"t"}, kF32) +
                NodeText("m", "Merge", {"f2", "t2"},
                         std::string(kF32) + " attr { key: \"N\" value { i: 2 } }"));
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  ASSERT_EQ(r.clusters.size(), 2u);
  for (const auto& [name, nodes] : r.clusters) EXPECT_EQ(nodes.size(), 2u);
}

TEST(MarkForCompilationPassTest, AGraphWithACycleOutsideLoopsIsAnError) {
  graph::GraphDef def;
  auto parsed = graph::ParseGraphDef(NodeText("a", "Sin", {"b"}, kF32) +
                                         NodeText("b", "Cos", {"a"}, kF32),
                                     graph::GraphDefFormat::kText, "test.pbtxt");
  ASSERT_TRUE(parsed.ok());
  auto g = Graph::FromGraphDef(*parsed);
  ASSERT_TRUE(g.ok());
  auto r = MarkForCompilationPass(AutoJit(1)).Run(g->get());
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("cycle"));
}

TEST(MarkForCompilationPassTest, TfOneCondBranchesSwitchOnAnIdentityOfThePredicateAndStillCluster) {
  // TensorFlow 2.21's TF1 while/cond graph as Python built it (before grappler): each branch
  // switches on cond/pred_id, an Identity of the predicate, while its constants wait on
  // Switch(pred, pred). Both are the same condition: each branch is one cluster, as TensorFlow
  // makes of its runtime graph (five clusters: before the loop, the body, two branches, after).
  std::string path = std::string(XLENS_SHARED_DIR) + "/corpus/tf/control_flow_tf1/jit/graph.pbtxt";
  auto def = graph::ReadGraphDef(path);
  if (!def.ok()) GTEST_SKIP() << "the TF corpus is absent: " << path;
  auto g = Graph::FromGraphDef(*def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  MarkForCompilationOptions options = AutoJit();
  options.global_jit_level = graph::GlobalJitLevel::kOn1;
  ClusteringResult r = Cluster(g->get(), options);
  EXPECT_EQ(r.clusters.size(), 5u);
  auto same_cluster = [&](const std::string& a, const std::string& b) {
    for (const auto& [name, nodes] : r.clusters) {
      bool has_a = std::find(nodes.begin(), nodes.end(), a) != nodes.end();
      bool has_b = std::find(nodes.begin(), nodes.end(), b) != nodes.end();
      if (has_a || has_b) return has_a && has_b;
    }
    return false;
  };
  EXPECT_TRUE(same_cluster("cond/Sin", "cond/mul/y"));
  EXPECT_TRUE(same_cluster("cond/Tanh", "cond/mul_1/y"));
  EXPECT_FALSE(same_cluster("cond/Sin", "cond/Tanh"));
  EXPECT_TRUE(same_cluster("while/Sin", "while/mul_2"));
}

TEST(PartiallyDeclusterPassTest, AMustBeConstantShapeFromOutsideLeavesTheCluster) {
  // shape = Shape(x) feeds Reshape's shape inside the cluster; computed from x alone, it is
  // taken out so the cluster gets it as a constant.
  auto g = Load(NodeText("x", "Placeholder", {}, kPlaceholder) +
                NodeText("shape", "Shape", {"x"},
                         std::string(kF32) + " attr { key: \"out_type\" value { type: DT_INT32 } }") +
                NodeText("s", "Sin", {"x"}, kF32) +
                NodeText("r", "Reshape", {"s", "shape"},
                         std::string(kF32) + " attr { key: \"Tshape\" value { type: DT_INT32 } }") +
                NodeText("e", "Exp", {"r"}, kF32));
  ClusteringResult r = Cluster(g.get(), AutoJit(1));
  ASSERT_EQ(r.clusters.size(), 1u);
  ASSERT_TRUE(PartiallyDeclusterPass().Run(g.get(), &r).ok());
  EXPECT_THAT(r.declustered["shape"], HasSubstr("must-be-constant"));
  EXPECT_EQ(graph::FindAttr(g->FindNode("shape")->attrs(), "_XlaCluster"), nullptr);
  EXPECT_EQ(r.ReasonFor("shape"), r.declustered["shape"]);
}

}  // namespace
}  // namespace xlens::cluster
