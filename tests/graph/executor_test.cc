#include "compiler/graph/executor.h"

#include <set>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/session.h"
#include "graph/graph_test_util.h"
#include "graph/kernel_test_util.h"
#include "profiler/host_tracer.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using testing::BinaryNode;
using testing::ConstNode;
using testing::FloatConst;
using testing::MakeNode;
using testing::PlaceholderNode;
using testing::UnaryNode;

NodeDef IntConst(std::string name, int32_t v, std::vector<std::string> control = {}) {
  NodeDef n = ConstNode(std::move(name), Tensor::Scalar<int32_t>(DT_INT32, v));
  n.input = std::move(control);
  return n;
}

NodeDef Enter(std::string name, std::string input, DataType t, bool is_constant = false) {
  return MakeNode(std::move(name), "Enter", {std::move(input)},
                  {{"T", AttrValue::Type(t)},
                   {"frame_name", AttrValue::String("while/while_context")},
                   {"is_constant", AttrValue::Bool(is_constant)}});
}

NodeDef Merge(std::string name, std::string a, std::string b, DataType t) {
  return MakeNode(std::move(name), "Merge", {std::move(a), std::move(b)},
                  {{"T", AttrValue::Type(t)}, {"N", AttrValue::Int(2)}});
}

NodeDef Switch(std::string name, std::string data, std::string pred, DataType t) {
  return MakeNode(std::move(name), "Switch", {std::move(data), std::move(pred)},
                  {{"T", AttrValue::Type(t)}});
}

float Scalar(const Tensor& t) { return static_cast<float>(t.GetAsDouble(0)); }

StatusOr<std::vector<Tensor>> RunGraph(const GraphDef& def,
                                       const std::vector<std::pair<std::string, Tensor>>& feeds,
                                       const std::vector<std::string>& fetches) {
  ASSIGN_OR_RETURN(auto session, Session::Create(def));
  return session->Run(feeds, fetches);
}

// if (pred) y = x * 2 else y = -x, built as TensorFlow 1 builds tf.cond.
GraphDef CondGraph() {
  GraphDef def;
  def.node.push_back(PlaceholderNode("x", DT_FLOAT, PartialShape::Scalar()));
  def.node.push_back(PlaceholderNode("pred", DT_BOOL, PartialShape::Scalar()));
  def.node.push_back(Switch("cond/Switch", "x", "pred", DT_FLOAT));
  def.node.push_back(UnaryNode("cond/switch_t", "Identity", "cond/Switch:1"));
  NodeDef two = FloatConst("cond/two", 2.0f);
  two.input = {"^cond/switch_t"};
  def.node.push_back(two);
  def.node.push_back(BinaryNode("cond/mul", "Mul", "cond/Switch:1", "cond/two"));
  def.node.push_back(UnaryNode("cond/neg", "Neg", "cond/Switch"));
  def.node.push_back(Merge("cond/Merge", "cond/neg", "cond/mul", DT_FLOAT));
  return def;
}

TEST(ExecutorTest, CondTakesOneBranch) {
  for (bool pred : {true, false}) {
    auto out = RunGraph(CondGraph(),
                        {{"x", Tensor::Scalar<float>(DT_FLOAT, 3.0f)},
                         {"pred", Tensor::Scalar<bool>(DT_BOOL, pred)}},
                        {"cond/Merge", "cond/Merge:1"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ(Scalar((*out)[0]), pred ? 6.0f : -3.0f);
    EXPECT_EQ((*out)[1].GetAsInt64(0), pred ? 1 : 0);
  }
}

TEST(ExecutorTest, FetchingTheUntakenBranchIsAnError) {
  auto out = RunGraph(CondGraph(),
                      {{"x", Tensor::Scalar<float>(DT_FLOAT, 3.0f)},
                       {"pred", Tensor::Scalar<bool>(DT_BOOL, false)}},
                      {"cond/mul"});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("'cond/mul' is dead"));
}

// i = 0; acc = a; while i < n: i += 1; acc *= c   (c a loop invariant), as tf.while_loop lowers.
GraphDef LoopGraph() {
  GraphDef def;
  def.node.push_back(PlaceholderNode("a", DT_FLOAT, PartialShape::Scalar()));
  def.node.push_back(PlaceholderNode("n", DT_INT32, PartialShape::Scalar()));
  def.node.push_back(FloatConst("c", 2.0f));
  def.node.push_back(IntConst("i0", 0));
  def.node.push_back(Enter("while/Enter", "i0", DT_INT32));
  def.node.push_back(Enter("while/Enter_1", "a", DT_FLOAT));
  def.node.push_back(Enter("while/Enter_c", "c", DT_FLOAT, /*is_constant=*/true));
  def.node.push_back(Enter("while/Enter_n", "n", DT_INT32, /*is_constant=*/true));
  def.node.push_back(Merge("while/Merge", "while/Enter", "while/NextIteration", DT_INT32));
  def.node.push_back(Merge("while/Merge_1", "while/Enter_1", "while/NextIteration_1", DT_FLOAT));
  def.node.push_back(BinaryNode("while/Less", "Less", "while/Merge", "while/Enter_n", DT_INT32));
  def.node.push_back(MakeNode("while/LoopCond", "LoopCond", {"while/Less"}));
  def.node.push_back(Switch("while/Switch", "while/Merge", "while/LoopCond", DT_INT32));
  def.node.push_back(Switch("while/Switch_1", "while/Merge_1", "while/LoopCond", DT_FLOAT));
  def.node.push_back(UnaryNode("while/Identity", "Identity", "while/Switch:1", DT_INT32));
  def.node.push_back(IntConst("while/one", 1, {"^while/Identity"}));
  def.node.push_back(BinaryNode("while/add", "AddV2", "while/Identity", "while/one", DT_INT32));
  def.node.push_back(BinaryNode("while/mul", "Mul", "while/Switch_1:1", "while/Enter_c"));
  def.node.push_back(UnaryNode("while/NextIteration", "NextIteration", "while/add", DT_INT32));
  def.node.push_back(UnaryNode("while/NextIteration_1", "NextIteration", "while/mul"));
  def.node.push_back(UnaryNode("while/Exit", "Exit", "while/Switch", DT_INT32));
  def.node.push_back(UnaryNode("while/Exit_1", "Exit", "while/Switch_1"));
  def.node.push_back(BinaryNode("result", "AddV2", "while/Exit_1", "c"));
  return def;
}

TEST(ExecutorTest, WhileLoopRunsItsIterations) {
  for (int n : {0, 1, 10}) {
    auto out = RunGraph(LoopGraph(),
                        {{"a", Tensor::Scalar<float>(DT_FLOAT, 1.5f)},
                         {"n", Tensor::Scalar<int32_t>(DT_INT32, n)}},
                        {"while/Exit", "result"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].GetAsInt64(0), n);
    EXPECT_EQ(Scalar((*out)[1]), 1.5f * static_cast<float>(1 << n) + 2.0f);
  }
}

TEST(ExecutorTest, RunawayLoopIsStopped) {
  auto g = Graph::FromGraphDef(LoopGraph());
  ASSERT_TRUE(g.ok());
  RunSignature sig{{"a", "n"}, {"result"}, {}};
  auto rewritten = RewriteGraphForExecution(**g, sig);
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  ExecutorOptions options;
  options.max_loop_iterations = 100;
  auto executor = Executor::Create(rewritten->get(), options);
  ASSERT_TRUE(executor.ok());
  auto out = (*executor)->Run({Tensor::Scalar<float>(DT_FLOAT, 1.0f),
                               Tensor::Scalar<int32_t>(DT_INT32, 1000)});
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("more than 100 iterations"));
}

// Runs `def` for one signature on an executor of its own, to read the run's figures.
struct StatsRun {
  StatusOr<std::vector<Tensor>> out = Status::Error("not run");
  ExecutorRunStats stats;
};
StatsRun RunWithStats(const GraphDef& def, const RunSignature& sig, const std::vector<Tensor>& args) {
  StatsRun r;
  auto g = Graph::FromGraphDef(def);
  if (!g.ok()) return {g.status(), {}};
  auto rewritten = RewriteGraphForExecution(**g, sig);
  if (!rewritten.ok()) return {rewritten.status(), {}};
  auto executor = Executor::Create(rewritten->get(), {});
  if (!executor.ok()) return {executor.status(), {}};
  r.out = (*executor)->Run(args);
  r.stats = (*executor)->last_run_stats();
  return r;
}

TEST(ExecutorTest, LoopFreesEachIterationOnceDone) {
  // 5,000 iterations: without freeing, every iteration's state (and the values its Merge,
  // Switch and NextIteration nodes saw) stays until the loop ends.
  StatsRun r = RunWithStats(LoopGraph(), {{"a", "n"}, {"while/Exit", "result"}, {}},
                            {Tensor::Scalar<float>(DT_FLOAT, 1.0f),
                             Tensor::Scalar<int32_t>(DT_INT32, 5000)});
  ASSERT_TRUE(r.out.ok()) << r.out.status().message();
  EXPECT_EQ((*r.out)[0].GetAsInt64(0), 5000);
  EXPECT_GE(r.stats.iterations_started, 5000);
  // The root's iteration, and at most parallel_iterations (10) of the loop's.
  EXPECT_LE(r.stats.peak_live_iterations, 11);
  EXPECT_EQ(r.stats.peak_live_frames, 1);
  EXPECT_LE(r.stats.peak_held_values, 40);
}

NodeDef EnterFrame(std::string name, std::string input, DataType t, std::string frame,
                   bool is_constant = false) {
  NodeDef n = Enter(std::move(name), std::move(input), t, is_constant);
  n.attr["frame_name"] = AttrValue::String(std::move(frame));
  return n;
}

// for i < n: for j < m: acc += 1, the inner loop's frame entered once per outer iteration.
GraphDef NestedLoopGraph() {
  GraphDef def;
  def.node.push_back(PlaceholderNode("a", DT_FLOAT, PartialShape::Scalar()));
  def.node.push_back(PlaceholderNode("n", DT_INT32, PartialShape::Scalar()));
  def.node.push_back(PlaceholderNode("m", DT_INT32, PartialShape::Scalar()));
  def.node.push_back(IntConst("i0", 0));
  def.node.push_back(EnterFrame("o/Enter_i", "i0", DT_INT32, "outer"));
  def.node.push_back(EnterFrame("o/Enter_acc", "a", DT_FLOAT, "outer"));
  def.node.push_back(EnterFrame("o/Enter_n", "n", DT_INT32, "outer", true));
  def.node.push_back(EnterFrame("o/Enter_m", "m", DT_INT32, "outer", true));
  def.node.push_back(Merge("o/Merge_i", "o/Enter_i", "o/Next_i", DT_INT32));
  def.node.push_back(Merge("o/Merge_acc", "o/Enter_acc", "o/Next_acc", DT_FLOAT));
  def.node.push_back(BinaryNode("o/Less", "Less", "o/Merge_i", "o/Enter_n", DT_INT32));
  def.node.push_back(MakeNode("o/LoopCond", "LoopCond", {"o/Less"}));
  def.node.push_back(Switch("o/Switch_i", "o/Merge_i", "o/LoopCond", DT_INT32));
  def.node.push_back(Switch("o/Switch_acc", "o/Merge_acc", "o/LoopCond", DT_FLOAT));
  def.node.push_back(UnaryNode("o/Id_i", "Identity", "o/Switch_i:1", DT_INT32));
  def.node.push_back(UnaryNode("o/Id_acc", "Identity", "o/Switch_acc:1"));
  def.node.push_back(IntConst("o/j0", 0, {"^o/Id_i"}));
  def.node.push_back(EnterFrame("in/Enter_j", "o/j0", DT_INT32, "inner"));
  def.node.push_back(EnterFrame("in/Enter_acc", "o/Id_acc", DT_FLOAT, "inner"));
  def.node.push_back(EnterFrame("in/Enter_m", "o/Enter_m", DT_INT32, "inner", true));
  def.node.push_back(Merge("in/Merge_j", "in/Enter_j", "in/Next_j", DT_INT32));
  def.node.push_back(Merge("in/Merge_acc", "in/Enter_acc", "in/Next_acc", DT_FLOAT));
  def.node.push_back(BinaryNode("in/Less", "Less", "in/Merge_j", "in/Enter_m", DT_INT32));
  def.node.push_back(MakeNode("in/LoopCond", "LoopCond", {"in/Less"}));
  def.node.push_back(Switch("in/Switch_j", "in/Merge_j", "in/LoopCond", DT_INT32));
  def.node.push_back(Switch("in/Switch_acc", "in/Merge_acc", "in/LoopCond", DT_FLOAT));
  def.node.push_back(UnaryNode("in/Id_j", "Identity", "in/Switch_j:1", DT_INT32));
  def.node.push_back(IntConst("in/one", 1, {"^in/Id_j"}));
  def.node.push_back(BinaryNode("in/add_j", "AddV2", "in/Id_j", "in/one", DT_INT32));
  NodeDef fone = FloatConst("in/fone", 1.0f);
  fone.input = {"^in/Id_j"};
  def.node.push_back(fone);
  def.node.push_back(BinaryNode("in/add_acc", "AddV2", "in/Switch_acc:1", "in/fone"));
  def.node.push_back(UnaryNode("in/Next_j", "NextIteration", "in/add_j", DT_INT32));
  def.node.push_back(UnaryNode("in/Next_acc", "NextIteration", "in/add_acc"));
  def.node.push_back(UnaryNode("in/Exit_acc", "Exit", "in/Switch_acc"));
  def.node.push_back(IntConst("o/one", 1, {"^o/Id_i"}));
  def.node.push_back(BinaryNode("o/add_i", "AddV2", "o/Id_i", "o/one", DT_INT32));
  def.node.push_back(UnaryNode("o/Next_i", "NextIteration", "o/add_i", DT_INT32));
  def.node.push_back(UnaryNode("o/Next_acc", "NextIteration", "in/Exit_acc"));
  def.node.push_back(UnaryNode("o/Exit_acc", "Exit", "o/Switch_acc"));
  return def;
}

TEST(ExecutorTest, NestedLoopFreesFinishedFramesAndBoundsLiveIterations) {
  StatsRun r = RunWithStats(NestedLoopGraph(), {{"a", "n", "m"}, {"o/Exit_acc"}, {}},
                            {Tensor::Scalar<float>(DT_FLOAT, 0.5f),
                             Tensor::Scalar<int32_t>(DT_INT32, 40),
                             Tensor::Scalar<int32_t>(DT_INT32, 40)});
  ASSERT_TRUE(r.out.ok()) << r.out.status().message();
  EXPECT_EQ(Scalar((*r.out)[0]), 0.5f + 40 * 40);
  EXPECT_GE(r.stats.iterations_started, 40 * 40);
  // The outer counter does not wait for the inner loops, but parallel_iterations (10) holds it
  // back: at most 10 outer iterations, each with one inner frame of at most 10 iterations.
  EXPECT_LE(r.stats.peak_live_frames, 1 + 10);
  EXPECT_LE(r.stats.peak_live_iterations, 1 + 10 + 10 * 10);
}

TEST(ExecutorTest, LoopInsideAnUntakenBranchIsDead) {
  // The loop's input comes from the untaken side of a Switch: the whole frame is dead, and so
  // is its Exit, which a Merge then skips.
  GraphDef def = LoopGraph();
  def.node.push_back(PlaceholderNode("p", DT_BOOL, PartialShape::Scalar()));
  def.node.push_back(Switch("gate", "a", "p", DT_FLOAT));
  for (NodeDef& n : def.node) {
    if (n.name == "while/Enter_1") n.input = {"gate:1"};
  }
  def.node.push_back(UnaryNode("other", "Neg", "gate"));
  def.node.push_back(Merge("joined", "other", "while/Exit_1", DT_FLOAT));
  auto out = RunGraph(def,
                      {{"a", Tensor::Scalar<float>(DT_FLOAT, 4.0f)},
                       {"n", Tensor::Scalar<int32_t>(DT_INT32, 3)},
                       {"p", Tensor::Scalar<bool>(DT_BOOL, false)}},
                      {"joined"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Scalar((*out)[0]), -4.0f);
}

// Constants are folded once, as grappler folds them before TensorFlow's executor runs: the second
// run computes only what depends on the feeds and the stateful ops, and gets the same answers.
TEST(ExecutorTest, ConstantsAreComputedOnceStatefulOpsEveryRun) {
  GraphDef def;
  def.node.push_back(PlaceholderNode("x", DT_FLOAT, PartialShape({2})));
  def.node.push_back(ConstNode("c", Tensor::Vector<float>(DT_FLOAT, {1, 2})));
  def.node.push_back(FloatConst("three", 3));
  def.node.push_back(BinaryNode("scaled", "Mul", "c", "three"));
  def.node.push_back(BinaryNode("y", "AddV2", "x", "scaled"));
  def.node.push_back(ConstNode("shape", Tensor::Vector<int32_t>(DT_INT32, {2})));
  def.node.push_back(MakeNode("noise", "RandomUniform", {"shape"},
                              {{"T", AttrValue::Type(DT_INT32)}, {"dtype", AttrValue::Type(DT_FLOAT)}}));
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto first = (*session)->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {10, 20})}}, {"y", "noise"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  EXPECT_EQ((*first)[0].DebugString(), "float [2] [13, 26]");

  ASSERT_TRUE(profiler::TracerSession::Start());
  auto second = (*session)->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {1, 1})}}, {"y", "noise"});
  profiler::Trace trace = profiler::TracerSession::Stop();
  ASSERT_TRUE(second.ok()) << second.status().message();
  EXPECT_EQ((*second)[0].DebugString(), "float [2] [4, 7]");
  EXPECT_FALSE((*second)[1].Identical((*first)[1])) << "a stateful op was folded";
  std::set<std::string> ran;
  for (const profiler::TraceEvent& e : trace.events) {
    if (e.category == kTfOpCategory) ran.insert(e.name);
  }
  EXPECT_TRUE(ran.count("y") && ran.count("noise"));
  EXPECT_FALSE(ran.count("scaled") || ran.count("c") || ran.count("three") || ran.count("shape"));
}

// An elementwise kernel writes over an input buffer nothing else holds (TensorFlow's
// forward_input), and never over one that another tensor still shares.
TEST(ExecutorTest, ElementwiseKernelsForwardAnUnsharedInputBuffer) {
  testing::KernelRunner add("AddV2", {{"T", AttrValue::Type(DT_FLOAT)}});
  Tensor x = Tensor::Vector<float>(DT_FLOAT, {1, 2, 3});
  const void* x_data = x.raw_data();
  std::vector<Tensor> inputs;  // not an initializer list, whose copies would share x
  inputs.push_back(std::move(x));
  inputs.push_back(Tensor::Scalar<float>(DT_FLOAT, 10));
  auto in_place = add.Run(std::move(inputs));
  ASSERT_TRUE(in_place.ok()) << in_place.status().message();
  EXPECT_EQ((*in_place)[0].DebugString(), "float [3] [11, 12, 13]");
  EXPECT_EQ((*in_place)[0].raw_data(), x_data);

  Tensor kept = Tensor::Vector<float>(DT_FLOAT, {1, 2, 3});
  auto copied = add.Run({kept, Tensor::Scalar<float>(DT_FLOAT, 10)});
  ASSERT_TRUE(copied.ok()) << copied.status().message();
  EXPECT_EQ((*copied)[0].DebugString(), "float [3] [11, 12, 13]");
  EXPECT_NE((*copied)[0].raw_data(), kept.raw_data());
  EXPECT_EQ(kept.DebugString(), "float [3] [1, 2, 3]");
}

TEST(ExecutorTest, ControlDependenciesOrderSideEffects) {
  // A variable assigned, then read after a control edge: the read sees the new value.
  GraphDef def;
  def.node.push_back(MakeNode("v", "VarHandleOp", {},
                              {{"dtype", AttrValue::Type(DT_FLOAT)},
                               {"shape", AttrValue::Shape(PartialShape::Scalar())},
                               {"shared_name", AttrValue::String("v")}}));
  def.node.push_back(FloatConst("init_value", 5.0f));
  def.node.push_back(MakeNode("assign", "AssignVariableOp", {"v", "init_value"},
                              {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  def.node.push_back(MakeNode("read", "ReadVariableOp", {"v", "^assign"},
                              {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({}, {"read"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Scalar((*out)[0]), 5.0f);
}

TEST(ExecutorTest, VariablesKeepTheirValueAcrossRuns) {
  GraphDef def;
  def.node.push_back(MakeNode("v", "VarHandleOp", {},
                              {{"dtype", AttrValue::Type(DT_FLOAT)},
                               {"shape", AttrValue::Shape(PartialShape::Scalar())},
                               {"shared_name", AttrValue::String("v")}}));
  def.node.push_back(FloatConst("zero", 0.0f));
  def.node.push_back(FloatConst("one", 1.0f));
  def.node.push_back(MakeNode("init", "AssignVariableOp", {"v", "zero"},
                              {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  def.node.push_back(MakeNode("inc", "AssignAddVariableOp", {"v", "one"},
                              {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  def.node.push_back(MakeNode("read", "ReadVariableOp", {"v"},
                              {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto before = (*session)->Run({}, {"read"});
  ASSERT_FALSE(before.ok());  // not initialised yet
  ASSERT_TRUE((*session)->Run({}, {}, {"init"}).ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*session)->Run({}, {}, {"inc"}).ok());
  auto out = (*session)->Run({}, {"read"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Scalar((*out)[0]), 3.0f);
  // Three signatures were run, each rewritten once.
  EXPECT_EQ((*session)->ExecutedGraphs().size(), 3u);
}

TEST(ExecutorTest, RewriteNamesArgsAndRetvalsAsTensorFlow) {
  auto g = Graph::FromGraphDef(CondGraph());
  ASSERT_TRUE(g.ok());
  auto rewritten = RewriteGraphForExecution(**g, {{"x", "pred"}, {"cond/Merge"}, {}});
  ASSERT_TRUE(rewritten.ok()) << rewritten.status().message();
  EXPECT_NE((*rewritten)->FindNode("_arg_x_0_0"), nullptr);
  EXPECT_NE((*rewritten)->FindNode("_arg_pred_0_1"), nullptr);
  EXPECT_NE((*rewritten)->FindNode("_retval_cond/Merge_0_0"), nullptr);
  // The placeholders are no longer needed.
  EXPECT_EQ((*rewritten)->FindNode("x"), nullptr);
}

TEST(ExecutorTest, BadFeedsAndFetchesAreNamed) {
  auto session = Session::Create(CondGraph());
  ASSERT_TRUE(session.ok());
  auto missing = (*session)->Run({}, {"nope"});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("no node named 'nope'"));
  auto wrong_type = (*session)->Run({{"x", Tensor::Scalar<int32_t>(DT_INT32, 1)},
                                     {"pred", Tensor::Scalar<bool>(DT_BOOL, true)}},
                                    {"cond/Merge"});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_THAT(wrong_type.status().message(), HasSubstr("feed 'x' is int32"));
  auto unfed = (*session)->Run({}, {"cond/Merge"});
  ASSERT_FALSE(unfed.ok());
}

// A call repeated with the same names (the fast path) and with its feeds in another order (the
// same prepared graph) binds each value to its own placeholder, and a value of the wrong type or
// shape is still refused on the repeated call.
TEST(ExecutorTest, RepeatedCallsBindFeedsByName) {
  GraphDef def;
  def.node.push_back(PlaceholderNode("a", DT_FLOAT, PartialShape({2})));
  def.node.push_back(PlaceholderNode("b", DT_FLOAT, PartialShape({2})));
  def.node.push_back(BinaryNode("d", "Sub", "a", "b"));
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto run = [&](std::vector<std::pair<std::string, Tensor>> feeds) {
    auto out = (*session)->Run(feeds, {"d"});
    return out.ok() ? (*out)[0].DebugString() : out.status().message();
  };
  const Tensor one = Tensor::Vector<float>(DT_FLOAT, {1, 1});
  const Tensor ten = Tensor::Vector<float>(DT_FLOAT, {10, 20});
  EXPECT_EQ(run({{"a", ten}, {"b", one}}), "float [2] [9, 19]");
  EXPECT_EQ(run({{"a", ten}, {"b", one}}), "float [2] [9, 19]");
  EXPECT_EQ(run({{"b", ten}, {"a", one}}), "float [2] [-9, -19]");
  EXPECT_EQ(run({{"b", ten}, {"a", one}}), "float [2] [-9, -19]");
  EXPECT_EQ(run({{"a", one}, {"b", ten}}), "float [2] [-9, -19]");
  EXPECT_THAT(run({{"a", one}, {"b", Tensor::Vector<int32_t>(DT_INT32, {1, 2})}}),
              HasSubstr("feed 'b' is int32"));
  EXPECT_THAT(run({{"a", one}, {"b", Tensor::Vector<float>(DT_FLOAT, {1, 2, 3})}}),
              HasSubstr("feed 'b' has shape [3]"));
  EXPECT_EQ(run({{"a", one}, {"b", ten}}), "float [2] [-9, -19]");
}

}  // namespace
}  // namespace xlens::graph
