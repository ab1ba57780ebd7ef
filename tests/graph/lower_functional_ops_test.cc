// The lowering of TF2 control flow and function calls, checked against TensorFlow: the graphs of
// testdata/functions were written by the installed TensorFlow (generate.py) with its results for
// recorded inputs, and with TensorFlow's own lowered graph of each function (its
// before_mark_for_compilation dump, grappler off).
#include "compiler/graph/lower_functional_ops.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <set>

#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/graph/subgraph.h"
#include "graph/call_chain_util.h"
#include "graph/function_test_util.h"
#include "graph/graph_test_util.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using testing::FunctionsDir;
using testing::LoadRuns;
using testing::TensorsClose;

// Sin and Tanh may differ from TensorFlow's Eigen kernels by one ulp per call, and the nested
// case applies tanh three times in a loop (2 ulp seen); everything else is exact.
constexpr int64_t kMaxUlps = 3;

GraphDef Load(const std::string& name) {
  auto def = ReadGraphDef(FunctionsDir() + name + ".pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  return def.ok() ? *def : GraphDef{};
}

// Our session names the _Arg of feed "x" `_arg_x_0_<k>`; TensorFlow's function names it "x", and
// the lowering names input Switches after their source node.
std::string TfArgNames(const std::string& name) {
  static const std::regex arg("_arg_([A-Za-z0-9_.]*?)_0_[0-9]+");
  return std::regex_replace(name, arg, "$1");
}

class TensorFlowCaseTest : public ::testing::TestWithParam<std::string> {};

// Every recorded run of the function, through a Session (which lowers before running), gives
// TensorFlow's result.
TEST_P(TensorFlowCaseTest, SessionReproducesTensorFlow) {
  const std::string name = GetParam();
  GraphDef def = Load(name);
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto runs = LoadRuns(FunctionsDir(), name);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_FALSE(runs->empty());
  for (const auto& run : *runs) {
    auto got = (*session)->Run(run.feeds, run.fetch_names);
    ASSERT_TRUE(got.ok()) << got.status().message();
    for (size_t i = 0; i < got->size(); ++i) {
      EXPECT_TRUE(TensorsClose((*got)[i], run.expected[i], kMaxUlps)) << run.fetch_names[i];
    }
  }
  // The executed graph has no functional op left.
  for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
    for (const Node* n : g->op_nodes()) {
      EXPECT_THAT(n->type_string(), ::testing::Not(::testing::AnyOf(
                                        "If", "StatelessIf", "Case", "StatelessCase",
                                        "While", "StatelessWhile",
                                        "PartitionedCall", "StatefulPartitionedCall")))
          << n->name();
    }
  }
}

// The function as TensorFlow instantiates it (_Arg per input, _Retval per output), lowered: the
// nodes it creates have TensorFlow's names and ops, node for node.
TEST_P(TensorFlowCaseTest, LoweredGraphHasTensorFlowsNodes) {
  const std::string name = GetParam();
  GraphDef def = Load(name);
  auto graph = Graph::FromGraphDef(def);
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  auto runs = LoadRuns(FunctionsDir(), name);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  RunSignature sig;
  for (const auto& [feed, t] : (*runs)[0].feeds) sig.feeds.push_back(feed);
  sig.fetches = (*runs)[0].fetch_names;
  auto rewritten = RewriteGraphForExecution(**graph, sig);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  ASSERT_TRUE(LowerFunctionalOps(rewritten->get()).ok());

  auto tf_def = ReadGraphDef(FunctionsDir() + name + "_lowered.pbtxt");
  ASSERT_TRUE(tf_def.ok()) << tf_def.status().message();
  std::set<std::pair<std::string, std::string>> want, got;
  for (const NodeDef& n : tf_def->node) {
    if (n.op != "_Arg" && n.op != "_Retval") want.emplace(n.name, n.op);
  }
  for (const Node* n : (*rewritten)->op_nodes()) {
    if (n->type_string() != "_Arg" && n->type_string() != "_Retval") {
      got.emplace(TfArgNames(n->name()), n->type_string());
    }
  }
  std::vector<std::pair<std::string, std::string>> missing, extra;
  for (const auto& p : want) if (!got.count(p)) missing.push_back(p);
  for (const auto& p : got) if (!want.count(p)) extra.push_back(p);
  std::string report;
  for (const auto& [n, op] : missing) report += "\n  missing " + n + " (" + op + ")";
  for (const auto& [n, op] : extra) report += "\n  extra   " + n + " (" + op + ")";
  EXPECT_TRUE(missing.empty() && extra.empty()) << report;

  // And the edges between them are TensorFlow's (inputs in order, control inputs as a set).
  GraphDef ours = (*rewritten)->ToGraphDef();
  std::map<std::string, std::vector<std::string>> our_inputs;
  for (NodeDef& n : ours.node) {
    for (std::string& in : n.input) in = TfArgNames(in);
    our_inputs[TfArgNames(n.name)] = n.input;
  }
  for (const NodeDef& n : tf_def->node) {
    if (n.op == "_Arg" || n.op == "_Retval" || !our_inputs.count(n.name)) continue;
    std::vector<std::string> a = n.input, b = our_inputs[n.name];
    bool feeds_arg = false;
    for (const std::string& in : a) {
      for (const NodeDef& m : tf_def->node) {
        if (m.op == "_Arg" && (in == m.name || in == m.name + ":0")) feeds_arg = true;
      }
    }
    if (feeds_arg) continue;  // our _Arg nodes are named as the session names them
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    EXPECT_EQ(a, b) << "inputs of " << n.name;
  }
}

INSTANTIATE_TEST_SUITE_P(Functions, TensorFlowCaseTest,
                         ::testing::Values("cond", "while", "nested", "call", "stateful",
                                           "case"));

TEST(LowerFunctionalOpsTest, SessionGraphKeepsTheLoweredNodeFetchable) {
  // A TF1-style graph (no _Arg/_Retval): the node named as the If is an IdentityN of its
  // outputs, so "cond:0" can still be fetched, as in TensorFlow.
  GraphDef def = Load("cond");
  auto graph = Graph::FromGraphDef(def);
  ASSERT_TRUE(graph.ok());
  ASSERT_TRUE(LowerFunctionalOps(graph->get()).ok());
  Node* cond = (*graph)->FindNode("cond");
  ASSERT_NE(cond, nullptr);
  EXPECT_EQ(cond->type_string(), "IdentityN");
  auto session = Session::Create((*graph)->ToGraphDef());
  ASSERT_TRUE(session.ok());
  auto runs = LoadRuns(FunctionsDir(), "cond");
  ASSERT_TRUE(runs.ok());
  auto got = (*session)->Run((*runs)[0].feeds, {"cond:0"});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_TRUE(TensorsClose((*got)[0], (*runs)[0].expected[0], 0));
}

TEST(LowerFunctionalOpsTest, WhileFrameIsNamedAfterTheNode) {
  auto graph = Graph::FromGraphDef(Load("while"));
  ASSERT_TRUE(graph.ok());
  ASSERT_TRUE(LowerFunctionalOps(graph->get()).ok());
  int enters = 0;
  for (const Node* n : (*graph)->op_nodes()) {
    if (!n->IsEnter()) continue;
    ++enters;
    EXPECT_EQ(n->attrs().at("frame_name").s(), "while");
    EXPECT_EQ(n->attrs().at("parallel_iterations").i(), 10);
    EXPECT_FALSE(n->attrs().at("is_constant").b());
  }
  EXPECT_EQ(enters, 5);  // loop counter, maximum iterations, i, v and the captured y
}

TEST(LowerFunctionalOpsTest, CallsMarkedNoInlineOrMustCompileAreKeptAndStillRun) {
  for (const char* attr : {"_noinline", "_XlaMustCompile"}) {
    GraphDef def = Load("call");
    bool marked = false;
    for (NodeDef& n : def.node) {
      if (n.op == "PartitionedCall" || n.op == "StatefulPartitionedCall") {
        n.attr[attr] = AttrValue::Bool(true);
        marked = true;
      }
    }
    ASSERT_TRUE(marked);
    auto graph = Graph::FromGraphDef(def);
    ASSERT_TRUE(graph.ok());
    EXPECT_FALSE(HasFunctionalOpsToLower(**graph));
    ASSERT_TRUE(LowerFunctionalOps(graph->get()).ok());
    EXPECT_NE((*graph)->FindNode("PartitionedCall"), nullptr);
    EXPECT_EQ((*graph)->FindNode("PartitionedCall")->type_string(), "PartitionedCall");
    // The kept call runs its function through the call kernel: TensorFlow's numbers.
    auto session = Session::Create(def);
    ASSERT_TRUE(session.ok());
    auto runs = LoadRuns(FunctionsDir(), "call");
    ASSERT_TRUE(runs.ok());
    auto got = (*session)->Run((*runs)[0].feeds, (*runs)[0].fetch_names);
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(TensorsClose((*got)[0], (*runs)[0].expected[0], 0)) << attr;
  }
}

TEST(LowerFunctionalOpsTest, UnloweredIfCaseAndWhileRunThroughTheirKernels) {
  // Without _lower_using_switch_merge TensorFlow leaves If/Case/While alone; their kernels run the
  // branches and the body on a nested executor and give the same numbers.
  for (const char* name : {"cond", "while", "nested", "case"}) {
    GraphDef def = Load(name);
    std::function<void(std::vector<NodeDef>&)> strip = [](std::vector<NodeDef>& nodes) {
      for (NodeDef& n : nodes) n.attr.erase("_lower_using_switch_merge");
    };
    strip(def.node);
    for (FunctionDef& f : def.library.function) strip(f.node_def);
    auto graph = Graph::FromGraphDef(def);
    ASSERT_TRUE(graph.ok());
    EXPECT_FALSE(HasFunctionalOpsToLower(**graph)) << name;
    auto session = Session::Create(def);
    ASSERT_TRUE(session.ok());
    auto runs = LoadRuns(FunctionsDir(), name);
    ASSERT_TRUE(runs.ok());
    for (const auto& run : *runs) {
      auto got = (*session)->Run(run.feeds, run.fetch_names);
      ASSERT_TRUE(got.ok()) << name << ": " << got.status().message();
      EXPECT_TRUE(TensorsClose((*got)[0], run.expected[0], kMaxUlps)) << name;
    }
  }
}

TEST(LowerFunctionalOpsTest, MissingBranchFunctionIsNamed) {
  GraphDef def = Load("cond");
  for (auto it = def.library.function.begin(); it != def.library.function.end(); ++it) {
    if (it->signature.name.find("true") != std::string::npos) {
      def.library.function.erase(it);
      break;
    }
  }
  auto graph = Graph::FromGraphDef(def);
  ASSERT_TRUE(graph.ok());
  Status st = LowerFunctionalOps(graph->get());
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("cond/then/_0"));
  EXPECT_THAT(st.message(), HasSubstr("is not in the graph's function library"));
}

Status LowerText(const GraphDef& def, std::unique_ptr<Graph>* out = nullptr) {
  ASSIGN_OR_RETURN(auto graph, Graph::FromGraphDef(def));
  Status st = LowerFunctionalOps(graph.get());
  if (out) *out = std::move(graph);
  return st;
}

TEST(LowerFunctionalOpsTest, FunctionThatCallsItselfIsRefusedByName) {
  Status st = LowerText(testing::SelfCallGraph(/*noinline=*/false));
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("node 'y' (PartitionedCall)"));
  EXPECT_THAT(st.message(), HasSubstr("function 'f' calls itself ('f' -> 'f')"));
  Status mutual = LowerText(testing::SelfCallGraph(/*noinline=*/false, /*mutual=*/true));
  ASSERT_FALSE(mutual.ok());
  EXPECT_THAT(mutual.message(), HasSubstr("('f' -> 'g' -> 'f')"));
}

TEST(LowerFunctionalOpsTest, RecursionThroughLoweredIfBranchesIsRefused) {
  // f(x) = If(true, f, t0)(x), marked for lowering: both branches are inlined, so f would be
  // inlined into itself without end.
  std::string lib = testing::FunctionText(
      "f", testing::TrueConstText("node_def", "p") +
               testing::IfText("node_def", "i", "p:output:0", "x", "f", "t0", true),
      "i:output:0");
  lib += testing::FunctionText("t0", testing::SquareText("node_def"), "s:y:0");
  GraphDef def = testing::ParseText(std::string(testing::kPlaceholderX) +
                                    testing::CallText("node", "y", "x", "f", false) +
                                    "library {\n" + lib + "}\n");
  Status st = LowerText(def);
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("function 'f' calls itself"));
}

// Inlining a chain of n calls costs time and names linear in n: no library copied per call, no
// name carrying the whole chain.
TEST(LowerFunctionalOpsTest, InliningACallChainIsLinear) {
  auto lower_seconds = [](int n, size_t* name_bytes, int* nodes) {
    GraphDef def = testing::CallChainGraph(n, /*noinline=*/false);
    auto start = std::chrono::steady_clock::now();
    std::unique_ptr<Graph> graph;
    Status st = LowerText(def, &graph);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_TRUE(st.ok()) << st.message();
    *name_bytes = 0;
    *nodes = graph ? graph->num_op_nodes() : 0;
    if (graph) {
      for (const Node* node : graph->op_nodes()) *name_bytes += node->name().size();
    }
    return seconds;
  };
  size_t small_names, big_names;
  int small_nodes, big_nodes;
  double small = lower_seconds(1000, &small_names, &small_nodes);
  double big = lower_seconds(4000, &big_names, &big_nodes);
  EXPECT_LE(big_nodes, 4 * small_nodes + 16);
  // Names stay bounded per node (TensorFlow's "c/c/.../c" would average 2 KB at 4000 deep).
  EXPECT_LE(big_names, 400u * big_nodes);
  // 4x the chain: linear takes ~4x; quadratic 16x. Generous for a loaded machine.
  EXPECT_LT(big, 10 * small + 0.5) << small << " s at 1000, " << big << " s at 4000";
}

TEST(LowerFunctionalOpsTest, DeepChainRunsInlined) {
  auto session = Session::Create(testing::CallChainGraph(10000, /*noinline=*/false));
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {1.0f, 2.0f, 3.0f})}}, {"y"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].flat<float>()[2], 9.0f);
}

// An If tree 24 deep whose branches both call the next level: inlining all of it would make
// 2^24 copies of the leaf. What would pass the expansion budget is kept and runs through its
// kernel (only the branch taken), so the graph stays the size of the file.
TEST(LowerFunctionalOpsTest, ExponentialIfTreeIsKeptNotExpanded) {
  std::unique_ptr<Graph> graph;
  ASSERT_TRUE(LowerText(testing::IfTreeGraph(24, /*lower=*/true), &graph).ok());
  EXPECT_LT(graph->num_op_nodes(), 1000);
  auto session = Session::Create(testing::IfTreeGraph(24, /*lower=*/true));
  ASSERT_TRUE(session.ok());
  auto out = (*session)->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {1.0f, 2.0f, 3.0f})}}, {"y"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].flat<float>()[1], 4.0f);
  // A small tree still lowers completely, as TensorFlow lowers it.
  std::unique_ptr<Graph> small;
  ASSERT_TRUE(LowerText(testing::IfTreeGraph(4, /*lower=*/true), &small).ok());
  EXPECT_FALSE(HasFunctionalOpsToLower(*small));
  for (const Node* n : small->op_nodes()) EXPECT_NE(n->type_string(), "If") << n->name();
}

// TensorFlow 1's v1 control flow straight from the corpus: a while loop, a cond and a tail, run
// through the executor's frames with both predicate values.
TEST(LowerFunctionalOpsTest, CorpusControlFlowTf1RunsInTheExecutor) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/tf/control_flow_tf1/jit/";
  auto def = ReadGraphDef(dir + "graph.pbtxt");
  if (!def.ok()) GTEST_SKIP() << "corpus case control_flow_tf1/jit not available";
  auto session = Session::Create(*def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto x = testing::LoadNpy(dir + "inputs/x.npy");
  ASSERT_TRUE(x.ok());
  for (bool pred : {false, true}) {
    auto want = testing::LoadNpy(dir + "outputs/pred_" + (pred ? "True" : "False") + ".npy");
    ASSERT_TRUE(want.ok());
    auto got = (*session)->Run({{"x", *x}, {"pred", Tensor::Scalar<bool>(DT_BOOL, pred)}}, {"out"});
    ASSERT_TRUE(got.ok()) << got.status().message();
    // TensorFlow ran this graph with its clusters compiled by XLA: transcendental functions
    // there are XLA's polynomial approximations, a few ulp from the kernels' results.
    EXPECT_TRUE(TensorsClose((*got)[0], *want, 8)) << "pred=" << pred;
  }
}

}  // namespace
}  // namespace xlens::graph
