// v1 loops and conditionals (TF1's while_loop and cond, as GraphDef text) made While and If: the
// rewritten graph holds no Enter/Merge/Switch/Exit/NextIteration/LoopCond, runs op by op to the
// original's numbers (a trip count and a branch that depend on the inputs), and what cannot be
// made functional is refused in one line naming the node.
#include "compiler/cluster/functionalize_control_flow.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <optional>

#include "cluster_test_util.h"
#include "compiler/graph/session.h"

namespace xlens::cluster {
namespace {

using cluster_testing::LoadGraph;
using cluster_testing::NodeText;
using graph::Tensor;
using ::testing::HasSubstr;
using ::testing::Not;

std::string T(const char* type) {
  return std::string("attr { key: \"T\" value { type: ") + type + " } }";
}
std::string Placeholder(const std::string& name, const char* type) {
  return NodeText(name, "Placeholder", {}, std::string("attr { key: \"dtype\" value { type: ") +
                                              type + " } }");
}
std::string ConstI32(const std::string& name, int v, std::vector<std::string> inputs = {}) {
  return NodeText(name, "Const", inputs,
                  "attr { key: \"dtype\" value { type: DT_INT32 } } attr { key: \"value\" value "
                  "{ tensor { dtype: DT_INT32 tensor_shape { } int_val: " +
                      std::to_string(v) + " } } }");
}
std::string ConstF32(const std::string& name, float v, std::vector<std::string> inputs = {}) {
  return NodeText(name, "Const", inputs,
                  "attr { key: \"dtype\" value { type: DT_FLOAT } } attr { key: \"value\" value "
                  "{ tensor { dtype: DT_FLOAT tensor_shape { } float_val: " +
                      std::to_string(v) + " } } }");
}
std::string Enter(const std::string& name, const std::string& in, const char* type,
                  bool constant = false) {
  return NodeText(name, "Enter", {in},
                  T(type) + " attr { key: \"frame_name\" value { s: \"while\" } } "
                            "attr { key: \"is_constant\" value { b: " +
                      (constant ? "true" : "false") + " } }");
}

// i = 0; acc = x; while (i < n) { i += 1; acc = acc * w }: TF1's while_loop, with w and n loop
// invariants (Enter is_constant) and the body's constant pinned to the loop by a control edge.
// `mul_input` is what the body multiplies by (a variant reads w without an Enter).
std::string Loop(const std::string& mul_input = "while/Enter_w") {
  return Placeholder("x", "DT_FLOAT") + Placeholder("n", "DT_INT32") + ConstF32("w", 3.0f) +
         ConstI32("i0", 0) + Enter("while/Enter", "i0", "DT_INT32") +
         Enter("while/Enter_1", "x", "DT_FLOAT") + Enter("while/Enter_w", "w", "DT_FLOAT", true) +
         Enter("while/Enter_n", "n", "DT_INT32", true) +
         NodeText("while/Merge", "Merge", {"while/Enter", "while/NextIteration"},
                  T("DT_INT32") + " attr { key: \"N\" value { i: 2 } }") +
         NodeText("while/Merge_1", "Merge", {"while/Enter_1", "while/NextIteration_1"},
                  T("DT_FLOAT") + " attr { key: \"N\" value { i: 2 } }") +
         NodeText("while/Less", "Less", {"while/Merge", "while/Enter_n"}, T("DT_INT32")) +
         NodeText("while/LoopCond", "LoopCond", {"while/Less"}) +
         NodeText("while/Switch", "Switch", {"while/Merge", "while/LoopCond"}, T("DT_INT32")) +
         NodeText("while/Switch_1", "Switch", {"while/Merge_1", "while/LoopCond"},
                  T("DT_FLOAT")) +
         NodeText("while/Identity", "Identity", {"while/Switch:1"}, T("DT_INT32")) +
         NodeText("while/Identity_1", "Identity", {"while/Switch_1:1"}, T("DT_FLOAT")) +
         ConstI32("while/one", 1, {"^while/Identity"}) +
         NodeText("while/add", "AddV2", {"while/Identity", "while/one"}, T("DT_INT32")) +
         NodeText("while/mul", "Mul", {"while/Identity_1", mul_input}, T("DT_FLOAT")) +
         NodeText("while/NextIteration", "NextIteration", {"while/add"}, T("DT_INT32")) +
         NodeText("while/NextIteration_1", "NextIteration", {"while/mul"}, T("DT_FLOAT")) +
         NodeText("while/Exit", "Exit", {"while/Switch"}, T("DT_INT32")) +
         NodeText("while/Exit_1", "Exit", {"while/Switch_1"}, T("DT_FLOAT")) +
         NodeText("out", "Identity", {"while/Exit_1"}, T("DT_FLOAT")) +
         NodeText("count", "Identity", {"while/Exit"}, T("DT_INT32"));
}

// out = p ? x * 2 : x + 1, TF1's cond: Switches on p, the branches' constants pinned to the
// pivots, one Merge.
std::string Cond(const std::string& outside_reader = "") {
  std::string text =
      Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
      NodeText("cond/Switch", "Switch", {"p", "p"}, T("DT_BOOL")) +
      NodeText("cond/switch_t", "Identity", {"cond/Switch:1"}, T("DT_BOOL")) +
      NodeText("cond/switch_f", "Identity", {"cond/Switch"}, T("DT_BOOL")) +
      NodeText("cond/pred_id", "Identity", {"p"}, T("DT_BOOL")) +
      NodeText("cond/Switch_1", "Switch", {"x", "cond/pred_id"}, T("DT_FLOAT")) +
      ConstF32("cond/two", 2.0f, {"^cond/switch_t"}) + ConstF32("cond/one", 1.0f, {"^cond/switch_f"}) +
      NodeText("cond/mul", "Mul", {"cond/Switch_1:1", "cond/two"}, T("DT_FLOAT")) +
      NodeText("cond/add", "AddV2", {"cond/Switch_1", "cond/one"}, T("DT_FLOAT")) +
      NodeText("cond/Merge", "Merge", {"cond/add", "cond/mul"},
               T("DT_FLOAT") + " attr { key: \"N\" value { i: 2 } }") +
      NodeText("out", "Identity", {"cond/Merge"}, T("DT_FLOAT"));
  if (!outside_reader.empty()) text += NodeText(outside_reader, "Identity", {"cond/mul"}, T("DT_FLOAT"));
  return text;
}

int CountOps(const graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const graph::Node* node : g.op_nodes()) n += node->type_string() == op;
  return n;
}

std::vector<Tensor> RunGraph(const graph::Graph& g, const std::vector<std::pair<std::string, Tensor>>& feeds,
                        const std::vector<std::string>& fetches) {
  auto session = graph::Session::Create(g.ToGraphDef(), graph::SessionOptions());
  EXPECT_TRUE(session.ok()) << session.status().message();
  if (!session.ok()) return {};
  auto out = (*session)->Run(feeds, fetches, {});
  EXPECT_TRUE(out.ok()) << out.status().message();
  return out.ok() ? *out : std::vector<Tensor>{};
}

TEST(FunctionalizeControlFlowTest, ALoopBecomesAWhileWithItsInvariantsCarried) {
  auto g = LoadGraph(Loop());
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(HasV1ControlFlow(*g));
  ASSERT_TRUE(FunctionalizeControlFlow(g.get()).ok());
  EXPECT_FALSE(HasV1ControlFlow(*g));
  EXPECT_EQ(CountOps(*g, "While"), 1);
  EXPECT_EQ(g->library().function.size(), 2u);
  // The trip count comes from n: a wrong count gives another power of 3.
  for (int n : {0, 2, 4}) {
    auto out = RunGraph(*g, {{"x", Tensor::Vector<float>(graph::DT_FLOAT, {1.0f, -2.0f})},
                        {"n", Tensor::Scalar<int32_t>(graph::DT_INT32, n)}},
                   {"out", "count"});
    ASSERT_EQ(out.size(), 2u);
    float scale = 1;
    for (int i = 0; i < n; ++i) scale *= 3;
    EXPECT_FLOAT_EQ(out[0].flat<float>()[0], scale);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[1], -2.0f * scale);
    EXPECT_EQ(out[1].flat<int32_t>()[0], n);
  }
}

TEST(FunctionalizeControlFlowTest, ASwitchAndMergeBecomeAnIfThatTakesTheRightBranch) {
  auto g = LoadGraph(Cond());
  ASSERT_NE(g, nullptr);
  ASSERT_TRUE(FunctionalizeControlFlow(g.get()).ok());
  EXPECT_FALSE(HasV1ControlFlow(*g));
  EXPECT_EQ(CountOps(*g, "If"), 1);
  for (bool p : {true, false}) {
    auto out = RunGraph(*g, {{"x", Tensor::Vector<float>(graph::DT_FLOAT, {1.5f, -4.0f})},
                        {"p", Tensor::Scalar<bool>(graph::DT_BOOL, p)}},
                   {"out"});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[0], p ? 3.0f : 2.5f);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[1], p ? -8.0f : -3.0f);
  }
}

TEST(FunctionalizeControlFlowTest, TwoConditionalsOnOnePredicateOneAfterTheOtherBecomeTwoIfs) {
  // out2 = p ? out * out : -out, on the same p as out's conditional.
  auto g = LoadGraph(
      Cond() + NodeText("cond_1/Switch", "Switch", {"out", "p"}, T("DT_FLOAT")) +
      NodeText("cond_1/mul", "Mul", {"cond_1/Switch:1", "cond_1/Switch:1"}, T("DT_FLOAT")) +
      NodeText("cond_1/neg", "Neg", {"cond_1/Switch"}, T("DT_FLOAT")) +
      NodeText("cond_1/Merge", "Merge", {"cond_1/neg", "cond_1/mul"},
               T("DT_FLOAT") + " attr { key: \"N\" value { i: 2 } }") +
      NodeText("out2", "Identity", {"cond_1/Merge"}, T("DT_FLOAT")));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(HasV1ControlFlow(*g));
  EXPECT_EQ(CountOps(*g, "If"), 2);
  for (bool p : {true, false}) {
    auto out = RunGraph(*g, {{"x", Tensor::Vector<float>(graph::DT_FLOAT, {1.5f, -4.0f})},
                             {"p", Tensor::Scalar<bool>(graph::DT_BOOL, p)}},
                        {"out2"});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[0], p ? 9.0f : -2.5f);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[1], p ? 64.0f : 3.0f);
  }
}

TEST(FunctionalizeControlFlowTest, ABodyReadingAValueOfTheGraphWithoutAnEnterIsRefusedByName) {
  auto g = LoadGraph(Loop("w"));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'while/mul'"));
  EXPECT_THAT(s.message(), HasSubstr("'w'"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\n")));
}

TEST(FunctionalizeControlFlowTest, ABranchValueReadWithoutAMergeIsRefusedByName) {
  auto g = LoadGraph(Cond("after") +
                     NodeText("result", "_Retval", {"after"},
                              T("DT_FLOAT") + " attr { key: \"index\" value { i: 0 } }"));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'cond/mul' of a branch is read by 'after'"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\n")));
}

std::string Merge(const std::string& name, const std::string& a, const std::string& b) {
  return NodeText(name, "Merge", {a, b}, T("DT_FLOAT") + " attr { key: \"N\" value { i: 2 } }");
}
std::string Unary(const std::string& name, const std::string& op, const std::string& in) {
  return NodeText(name, op, {in}, T("DT_FLOAT"));
}
std::string Binary(const std::string& name, const std::string& op, const std::string& a,
                   const std::string& b) {
  return NodeText(name, op, {a, b}, T("DT_FLOAT"));
}
std::string SwitchF(const std::string& name, const std::string& value, const std::string& pred) {
  return NodeText(name, "Switch", {value, pred}, T("DT_FLOAT"));
}

// One fetch of `g` on its own (a dead fetch fails the whole run), nullopt where the run fails.
std::optional<Tensor> RunFetch(const graph::Graph& g,
                               const std::vector<std::pair<std::string, Tensor>>& feeds,
                               const std::string& fetch) {
  auto session = graph::Session::Create(g.ToGraphDef(), graph::SessionOptions());
  if (!session.ok()) return std::nullopt;
  auto out = (*session)->Run(feeds, {fetch}, {});
  if (!out.ok() || out->size() != 1) return std::nullopt;
  return (*out)[0];
}

// The graph `text` made functional, with every fetch that the original computes (on x and each
// value of the predicates) coming out the same; one that is dead in the original is skipped.
void ExpectConvertedToTheSameValues(const std::string& text, const std::vector<std::string>& preds,
                                    const std::vector<std::string>& fetches) {
  auto original = LoadGraph(text);
  auto converted = LoadGraph(text);
  ASSERT_NE(original, nullptr);
  ASSERT_NE(converted, nullptr);
  Status s = FunctionalizeControlFlow(converted.get());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(HasV1ControlFlow(*converted));
  int compared = 0;
  for (int bits = 0; bits < (1 << preds.size()); ++bits) {
    std::vector<std::pair<std::string, Tensor>> feeds = {
        {"x", Tensor::Vector<float>(graph::DT_FLOAT, {1.5f, -4.0f})}};
    std::string where;
    for (size_t i = 0; i < preds.size(); ++i) {
      const bool v = (bits >> i) & 1;
      feeds.push_back({preds[i], Tensor::Scalar<bool>(graph::DT_BOOL, v)});
      where += preds[i] + "=" + (v ? "true " : "false ");
    }
    for (const std::string& fetch : fetches) {
      std::optional<Tensor> want = RunFetch(*original, feeds, fetch);
      if (!want) continue;
      std::optional<Tensor> got = RunFetch(*converted, feeds, fetch);
      ASSERT_TRUE(got.has_value()) << fetch << " at " << where << "is not computed any more";
      ASSERT_EQ(got->num_elements(), want->num_elements());
      for (int64_t k = 0; k < want->num_elements(); ++k) {
        EXPECT_FLOAT_EQ(got->flat<float>()[k], want->flat<float>()[k]) << fetch << " at " << where;
      }
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

TEST(FunctionalizeControlFlowTest, ASwitchReadBesideItsMergeIsRefusedNamingTheReader) {
  // y reads the Switch's true output and the Merge: it is under no branch of an If.
  auto g = LoadGraph(Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
                     SwitchF("sw", "x", "p") + Unary("neg", "Neg", "sw:1") +
                     Merge("m", "sw", "neg") + Binary("y", "AddV2", "sw:1", "m") +
                     Unary("out", "Identity", "m"));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("its Switch 'sw' is read by 'y' outside both branches"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\n")));
}

TEST(FunctionalizeControlFlowTest, ABranchValueTheNextConditionalReadsAfterTheMergeConverts) {
  // g, under p's true branch, feeds f (which feeds nothing) and y, which reads the first Merge
  // and is joined by the second: two conditionals on p, the first's If must not read g (dead
  // when p is false), and the second must keep out1.
  const std::string text =
      Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") + SwitchF("sw", "x", "p") +
      Binary("sq", "Mul", "sw:1", "sw:1") + Merge("m1", "sw", "sq") + Unary("g", "Neg", "sw:1") +
      Unary("f", "Exp", "g") + Binary("y", "AddV2", "g", "m1") + Merge("m2", "sw", "y") +
      Unary("out1", "Identity", "m1") + Unary("out2", "Identity", "m2");
  ExpectConvertedToTheSameValues(text, {"p"}, {"out1", "out2"});
}

TEST(FunctionalizeControlFlowTest, ConditionalsOnOnePredicateInsideAndOutsideAnotherStayApart) {
  // An inner conditional on p inside q's true branch, and another on p outside it: one If for
  // both would read q's branch, dead when q is false, and kill the outer one's value.
  const std::string text =
      Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") + Placeholder("q", "DT_BOOL") +
      SwitchF("sq", "x", "q") + SwitchF("sp", "sq:1", "p") + Unary("ip", "Neg", "sp:1") +
      Merge("im", "sp", "ip") + Unary("oe", "Abs", "sq") + Merge("om", "oe", "im") +
      SwitchF("sc", "x", "p") + Unary("ct", "Square", "sc:1") + Merge("cm", "sc", "ct") +
      Unary("out_outer", "Identity", "om") + Unary("out_c", "Identity", "cm");
  ExpectConvertedToTheSameValues(text, {"p", "q"}, {"out_outer", "out_c"});
}

TEST(FunctionalizeControlFlowTest, ASwitchFeedingTwoMergesBecomesOneIfWithTwoOutputs) {
  const std::string text = Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
                           SwitchF("sw", "x", "p") + Unary("n", "Neg", "sw:1") +
                           Merge("m1", "sw", "n") + Unary("e", "Abs", "sw") +
                           Merge("m2", "e", "sw:1") + Unary("out1", "Identity", "m1") +
                           Unary("out2", "Identity", "m2");
  ExpectConvertedToTheSameValues(text, {"p"}, {"out1", "out2"});
  auto g = LoadGraph(text);
  ASSERT_TRUE(FunctionalizeControlFlow(g.get()).ok());
  EXPECT_EQ(CountOps(*g, "If"), 1);
}

TEST(FunctionalizeControlFlowTest, MergesSharingABranchNodeAndReadingALateValueBecomeOneIf) {
  // n feeds both Merges, so they are one If; the second also reads z, five ops deep, later in
  // the graph's order than the first Merge yet not after it: still one If, the right values.
  std::string text = Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
                     SwitchF("sw", "x", "p") + Unary("n", "Neg", "sw:1") + Merge("m1", "sw", "n");
  std::string z = "x";
  for (int i = 0; i < 5; ++i) {
    text += Unary("z" + std::to_string(i), "Abs", z);
    z = "z" + std::to_string(i);
  }
  text += Binary("k", "AddV2", "n", z) + Merge("m2", "sw", "k") +
          Unary("out1", "Identity", "m1") + Unary("out2", "Identity", "m2");
  ExpectConvertedToTheSameValues(text, {"p"}, {"out1", "out2"});
  auto g = LoadGraph(text);
  ASSERT_TRUE(FunctionalizeControlFlow(g.get()).ok());
  EXPECT_EQ(CountOps(*g, "If"), 1);
}

TEST(FunctionalizeControlFlowTest, ABranchReadingWhatItsOwnMergeGivesIsRefusedByName) {
  // k, in the branch n shares with m1, reads w, computed from m1: no If can hold both.
  auto g = LoadGraph(Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
                     SwitchF("sw", "x", "p") + Unary("n", "Neg", "sw:1") +
                     Merge("m1", "sw", "n") + Unary("w", "Exp", "m1") +
                     Binary("k", "AddV2", "n", "w") + Merge("m2", "sw", "k") +
                     Unary("out", "Identity", "m2"));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("its Merge 'm1' gives is read back into its own branches"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\n")));
}

TEST(FunctionalizeControlFlowTest, ANodeOfOneBranchReadingTheOthersSwitchIsRefusedByName) {
  auto g = LoadGraph(Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") +
                     SwitchF("sw", "x", "p") + Unary("n", "Neg", "sw:1") +
                     Binary("b", "AddV2", "sw", "n") + Merge("m", "b", "n") +
                     Unary("out", "Identity", "m"));
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'b' reads both of its branches"));
  EXPECT_THAT(s.message(), Not(HasSubstr("\n")));
}

TEST(FunctionalizeControlFlowTest, AConditionalOnThePredicateOfTheBranchItLiesInConverts) {
  // TF1's cond(p, lambda: cond(p, ...), ...): the inner Switch on p lies in p's true branch, so
  // its false output never runs and its Merge gives its true branch.
  const std::string text =
      Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") + SwitchF("sw", "x", "p") +
      Unary("t", "Neg", "sw:1") + SwitchF("sw2", "t", "p") + Unary("i1", "Abs", "sw2") +
      Unary("i2", "Square", "sw2:1") + Merge("im", "i1", "i2") + Merge("m", "sw", "im") +
      Unary("out", "Identity", "m");
  ExpectConvertedToTheSameValues(text, {"p"}, {"out"});
}

TEST(FunctionalizeControlFlowTest, TwoThousandConditionalsInAChainConvert) {
  // x = p ? x + 1 : x - 1, 2000 times on one p: each conditional is rewritten looking only at
  // itself, not at the whole graph again.
  constexpr int kConds = 2000;
  std::string text = Placeholder("x", "DT_FLOAT") + Placeholder("p", "DT_BOOL") + ConstF32("one", 1);
  std::string value = "x";
  for (int i = 0; i < kConds; ++i) {
    const std::string c = "c" + std::to_string(i) + "/";
    text += SwitchF(c + "sw", value, "p") + Binary(c + "t", "AddV2", c + "sw:1", "one") +
            Binary(c + "e", "Sub", c + "sw", "one") + Merge(c + "m", c + "e", c + "t");
    value = c + "m";
  }
  text += Unary("out", "Identity", value);
  auto g = LoadGraph(text);
  ASSERT_NE(g, nullptr);
  Status s = FunctionalizeControlFlow(g.get());
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_FALSE(HasV1ControlFlow(*g));
  EXPECT_EQ(CountOps(*g, "If"), kConds);
  for (bool p : {true, false}) {
    auto out = RunGraph(*g, {{"x", Tensor::Vector<float>(graph::DT_FLOAT, {1.5f, -4.0f})},
                             {"p", Tensor::Scalar<bool>(graph::DT_BOOL, p)}},
                        {"out"});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_FLOAT_EQ(out[0].flat<float>()[0], p ? 2001.5f : -1998.5f);
  }
}

TEST(FunctionalizeControlFlowTest, AGraphWithoutV1ControlFlowIsLeftAlone) {
  auto g = LoadGraph(Placeholder("x", "DT_FLOAT") + NodeText("y", "Neg", {"x"}, T("DT_FLOAT")));
  ASSERT_NE(g, nullptr);
  const int before = g->num_op_nodes();
  ASSERT_TRUE(FunctionalizeControlFlow(g.get()).ok());
  EXPECT_EQ(g->num_op_nodes(), before);
  EXPECT_TRUE(g->library().function.empty());
}

}  // namespace
}  // namespace xlens::cluster
