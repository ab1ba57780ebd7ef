#include "compiler/cluster/deadness_analysis.h"

#include <gtest/gtest.h>

#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

using cluster_testing::kF32;
using cluster_testing::LoadGraph;
using cluster_testing::NodeText;

std::unique_ptr<DeadnessAnalysis> Analyze(const graph::Graph& g) {
  auto frames = BuildControlFlowInfo(g);
  EXPECT_TRUE(frames.ok()) << frames.status().message();
  auto d = DeadnessAnalysis::Run(g, *frames);
  EXPECT_TRUE(d.ok()) << d.status().message();
  return std::move(*d);
}

const char kCond[] = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "p" op: "Placeholder" attr { key: "dtype" value { type: DT_BOOL } } }
node { name: "pred_id" op: "Identity" input: "p" attr { key: "T" value { type: DT_BOOL } } }
node { name: "sw" op: "Switch" input: "x" input: "pred_id" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "psw" op: "Switch" input: "p" input: "p" attr { key: "T" value { type: DT_BOOL } } }
node { name: "switch_t" op: "Identity" input: "psw:1" attr { key: "T" value { type: DT_BOOL } } }
node { name: "t" op: "Sin" input: "sw:1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "f" op: "Cos" input: "sw" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "Const" input: "^switch_t" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 1 } } } }
node { name: "m" op: "Merge" input: "t" input: "f" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "after" op: "Exp" input: "m" attr { key: "T" value { type: DT_FLOAT } } }
)";

TEST(DeadnessAnalysisTest, BranchesOfASwitchDifferAndTheMergeIsAlwaysAlive) {
  auto g = LoadGraph(kCond);
  ASSERT_NE(g, nullptr);
  auto d = Analyze(*g);
  auto pred = [&](const char* name) { return d->PredicateFor(*g->FindNode(name)); };
  EXPECT_EQ(pred("x"), "#true");
  EXPECT_NE(pred("t"), pred("f"));
  EXPECT_EQ(pred("t"), "p:0");   // the Identity pred_id is looked through
  EXPECT_EQ(pred("f"), "~p:0");
  // A constant that waits on the true branch of Switch(p, p) has the branch's condition.
  EXPECT_EQ(pred("c"), pred("t"));
  // (p) | (~p) simplifies to true: after the Merge the value is alive again.
  EXPECT_EQ(pred("after"), "#true");
}

TEST(DeadnessAnalysisTest, EveryMergeOfALoopSharesTheFramesSymbol) {
  const char* loop = R"(
node { name: "i0" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 int_val: 0 } } } }
node { name: "x0" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 1 } } } }
node { name: "ei" op: "Enter" input: "i0" attr { key: "T" value { type: DT_INT32 } } attr { key: "frame_name" value { s: "L" } } }
node { name: "ex" op: "Enter" input: "x0" attr { key: "T" value { type: DT_FLOAT } } attr { key: "frame_name" value { s: "L" } } }
node { name: "mi" op: "Merge" input: "ei" input: "ni" attr { key: "T" value { type: DT_INT32 } } attr { key: "N" value { i: 2 } } }
node { name: "mx" op: "Merge" input: "ex" input: "nx" attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 2 } } }
node { name: "lim" op: "Const" input: "^mi" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 int_val: 3 } } } }
node { name: "less" op: "Less" input: "mi" input: "lim" attr { key: "T" value { type: DT_INT32 } } }
node { name: "lc" op: "LoopCond" input: "less" }
node { name: "si" op: "Switch" input: "mi" input: "lc" attr { key: "T" value { type: DT_INT32 } } }
node { name: "sx" op: "Switch" input: "mx" input: "lc" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "ident" op: "Identity" input: "si:1" attr { key: "T" value { type: DT_INT32 } } }
node { name: "one" op: "Const" input: "^ident" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 int_val: 1 } } } }
node { name: "inc" op: "AddV2" input: "ident" input: "one" attr { key: "T" value { type: DT_INT32 } } }
node { name: "body" op: "Sin" input: "sx:1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "ni" op: "NextIteration" input: "inc" attr { key: "T" value { type: DT_INT32 } } }
node { name: "nx" op: "NextIteration" input: "body" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "exit" op: "Exit" input: "sx" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "after" op: "Exp" input: "exit" attr { key: "T" value { type: DT_FLOAT } } }
)";
  auto g = LoadGraph(loop);
  ASSERT_NE(g, nullptr);
  auto d = Analyze(*g);
  auto pred = [&](const char* name) { return d->PredicateFor(*g->FindNode(name)); };
  // The two loop variables' bodies run under the same condition (optimistic mode), so the loop
  // body can be one cluster.
  EXPECT_EQ(pred("inc"), pred("body"));
  EXPECT_NE(pred("inc"), pred("less"));
  // What leaves the loop is alive when the loop was entered.
  EXPECT_EQ(pred("after"), "#true");
}

}  // namespace
}  // namespace xlens::cluster
