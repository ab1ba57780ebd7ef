// The remapper: which chains after a convolution or product it fuses (as grappler's remapper
// does: bias, a Keras batch norm's per-channel scale and shift, a residual side input, an
// activation) and which it leaves (an intermediate with two consumers or fetched, a type other
// than f32, a scale that is not a constant), and that a fused graph computes what the unfused
// one does.
#include "compiler/graph/remapper.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "compiler/graph/session.h"
#include "graph/graph_test_util.h"

namespace xlens::graph {
namespace {

using testing::BinaryNode;
using testing::ConstNode;
using testing::MakeNode;
using testing::PlaceholderNode;
using testing::UnaryNode;

constexpr int64_t kChannels = 16;

Tensor RandomTensor(DataType dtype, std::vector<int64_t> dims, int seed) {
  Tensor t(dtype, dims);
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (dtype == DT_FLOAT) t.flat<float>()[i] = dist(gen);
    if (dtype == DT_DOUBLE) t.flat<double>()[i] = dist(gen);
  }
  return t;
}

AttrValue Ints(std::vector<int64_t> v) {
  AttrListValue l;
  l.i = std::move(v);
  return AttrValue::List(l);
}

NodeDef Conv(std::string name, std::string x, std::string w, DataType t = DT_FLOAT) {
  return MakeNode(std::move(name), "Conv2D", {std::move(x), std::move(w)},
                  {{"T", AttrValue::Type(t)}, {"strides", Ints({1, 1, 1, 1})},
                   {"padding", AttrValue::String("SAME")}, {"data_format", AttrValue::String("NHWC")}});
}

NodeDef BiasAdd(std::string name, std::string x, std::string b, DataType t = DT_FLOAT) {
  return MakeNode(std::move(name), "BiasAdd", {std::move(x), std::move(b)}, {{"T", AttrValue::Type(t)}});
}

// x [1,6,6,4] -> Conv2D 3x3x4x16 (+ what `tail` adds), with its constants; `dtype` throughout.
GraphDef ConvGraph(DataType dtype = DT_FLOAT) {
  GraphDef def;
  def.node.push_back(PlaceholderNode("x", dtype, PartialShape({1, 6, 6, 4})));
  def.node.push_back(ConstNode("w_value", RandomTensor(dtype, {3, 3, 4, kChannels}, 1)));
  def.node.push_back(UnaryNode("w", "Identity", "w_value", dtype));
  def.node.push_back(ConstNode("b", RandomTensor(dtype, {kChannels}, 2)));
  def.node.push_back(Conv("conv", "x", "w", dtype));
  return def;
}

// Keras 3's inference batch norm after a convolution with a bias: (y * scale) + shift, scale
// and shift [1,1,1,C] computed from constants (Rsqrt of the variance plus epsilon, times gamma).
void AddKerasBatchNorm(GraphDef& def, const std::string& input) {
  def.node.push_back(ConstNode("var", RandomTensor(DT_FLOAT, {1, 1, 1, kChannels}, 3)));
  def.node.push_back(ConstNode("eps", Tensor::Scalar<float>(DT_FLOAT, 1.5f)));
  def.node.push_back(BinaryNode("bn/add", "AddV2", "var", "eps"));
  def.node.push_back(UnaryNode("bn/rsqrt", "Rsqrt", "bn/add"));
  def.node.push_back(ConstNode("gamma", RandomTensor(DT_FLOAT, {1, 1, 1, kChannels}, 4)));
  def.node.push_back(BinaryNode("bn/scale", "Mul", "bn/rsqrt", "gamma"));
  def.node.push_back(ConstNode("shift", RandomTensor(DT_FLOAT, {1, 1, 1, kChannels}, 5)));
  def.node.push_back(BinaryNode("bn/mul", "Mul", input, "bn/scale"));
  def.node.push_back(BinaryNode("bn/out", "AddV2", "bn/mul", "shift"));
}

struct Ran {
  std::vector<Tensor> outputs;
  std::map<std::string, std::string> ops;  // node name -> op, of the graph that ran
  std::string fused_ops;                   // of the one fused node, comma-separated
};

Ran Run(const GraphDef& def, const std::vector<std::string>& fetches, bool remap,
        DataType dtype = DT_FLOAT) {
  SessionOptions options;
  options.remap = remap;
  auto session = Session::Create(def, options);
  EXPECT_TRUE(session.ok()) << session.status().message();
  Ran ran;
  if (!session.ok()) return ran;
  auto out = (*session)->Run({{"x", RandomTensor(dtype, {1, 6, 6, 4}, 9)}}, fetches);
  EXPECT_TRUE(out.ok()) << out.status().message();
  if (out.ok()) ran.outputs = *out;
  for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
    for (const Node* n : g->op_nodes()) {
      ran.ops[n->name()] = n->type_string();
      if (const AttrValue* f = FindAttr(n->attrs(), "fused_ops")) {
        for (const std::string& op : f->list().s) ran.fused_ops += (ran.fused_ops.empty() ? "" : ",") + op;
      }
    }
  }
  return ran;
}

int Count(const Ran& ran, const std::string& op) {
  int n = 0;
  for (const auto& [name, o] : ran.ops) n += o == op;
  return n;
}

// Runs `def` with and without the remapper; the outputs agree within 1e-4 of the largest value.
Ran RunBoth(const GraphDef& def, const std::vector<std::string>& fetches, DataType dtype = DT_FLOAT) {
  Ran fused = Run(def, fetches, true, dtype);
  Ran plain = Run(def, fetches, false, dtype);
  EXPECT_EQ(Count(plain, "_FusedConv2D") + Count(plain, "_FusedMatMul"), 0);
  EXPECT_EQ(fused.outputs.size(), plain.outputs.size());
  for (size_t i = 0; i < fused.outputs.size() && i < plain.outputs.size(); ++i) {
    const Tensor& a = fused.outputs[i];
    const Tensor& b = plain.outputs[i];
    EXPECT_EQ(a.dims(), b.dims());
    if (a.dims() != b.dims()) continue;
    double largest = 0, worst = 0;
    for (int64_t e = 0; e < a.num_elements(); ++e) {
      largest = std::max(largest, std::abs(b.GetAsDouble(e)));
      worst = std::max(worst, std::abs(a.GetAsDouble(e) - b.GetAsDouble(e)));
    }
    EXPECT_LE(worst, 1e-4 * std::max(1.0, largest)) << fetches[i];
  }
  return fused;
}

TEST(RemapperTest, ConvBiasReluBecomesOneFusedConvNamedAfterTheRelu) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(UnaryNode("relu", "Relu", "bias"));
  Ran ran = RunBoth(def, {"relu"});
  EXPECT_EQ(ran.ops["relu"], "_FusedConv2D");
  EXPECT_EQ(ran.ops.count("conv"), 0u);
  EXPECT_EQ(ran.ops.count("bias"), 0u);
  EXPECT_EQ(ran.fused_ops, "BiasAdd,Relu");
}

TEST(RemapperTest, KerasBatchNormIsFoldedIntoTheFilterWithTheResidualAndRelu) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  AddKerasBatchNorm(def, "bias");
  def.node.push_back(UnaryNode("residual", "Neg", "x"));
  def.node.push_back(Conv("side", "residual", "w"));  // a side input of the output's shape
  def.node.push_back(BinaryNode("add", "AddV2", "side", "bn/out"));
  def.node.push_back(UnaryNode("out", "Relu6", "add"));
  Ran ran = RunBoth(def, {"out"});
  EXPECT_EQ(ran.ops["out"], "_FusedConv2D");
  for (const char* gone : {"conv", "bias", "bn/mul", "bn/out", "add"}) EXPECT_EQ(ran.ops.count(gone), 0u) << gone;
  EXPECT_EQ(ran.fused_ops, "BiasAdd,Add,Relu6");
  EXPECT_EQ(ran.ops["side"], "Conv2D");  // its one consumer is the Add: nothing to fuse after it
}

// The graph that runs has lost the fed input's shape, so an Add whose operands look alike is
// fused; one that broadcasts when it runs is still added as the Add would.
TEST(RemapperTest, ASideInputThatBroadcastsAtRunTimeIsAddedAsTheAddWould) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(PlaceholderNode("s", DT_FLOAT, PartialShape({-1, -1, -1, 4})));
  def.node.push_back(Conv("side", "s", "w"));  // [?,?,?,C] in the graph, [1,1,1,C] in one run
  def.node.push_back(BinaryNode("add", "AddV2", "bias", "side"));
  def.node.push_back(UnaryNode("out", "Relu", "add"));
  std::vector<std::vector<Tensor>> outputs;
  for (bool remap : {true, false}) {
    SessionOptions options;
    options.remap = remap;
    auto session = Session::Create(def, options);
    ASSERT_TRUE(session.ok());
    for (std::vector<int64_t> dims : {std::vector<int64_t>{1, 6, 6, 4}, {1, 1, 1, 4}, {1, 1, 6, 4}}) {
      auto out = (*session)->Run({{"x", RandomTensor(DT_FLOAT, {1, 6, 6, 4}, 9)},
                                  {"s", RandomTensor(DT_FLOAT, dims, 8)}}, {"out"});
      ASSERT_TRUE(out.ok()) << out.status().message();
      outputs.push_back(*out);
    }
    for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
      EXPECT_EQ(g->FindNode("out")->type_string(), remap ? "_FusedConv2D" : "Relu");
    }
  }
  for (size_t i = 0; i < 3; ++i) {
    const Tensor& a = outputs[i][0];
    const Tensor& b = outputs[i + 3][0];
    ASSERT_EQ(a.dims(), b.dims());
    for (int64_t e = 0; e < a.num_elements(); ++e) EXPECT_NEAR(a.GetAsDouble(e), b.GetAsDouble(e), 1e-5);
  }
}

TEST(RemapperTest, BatchNormWithoutBiasAndWithoutActivation) {
  GraphDef def = ConvGraph();
  AddKerasBatchNorm(def, "conv");
  Ran ran = RunBoth(def, {"bn/out"});
  EXPECT_EQ(ran.ops["bn/out"], "_FusedConv2D");
  EXPECT_EQ(ran.fused_ops, "BiasAdd");
}

TEST(RemapperTest, AFetchedIntermediateEndsTheChain) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(UnaryNode("relu", "Relu", "bias"));
  // The BiasAdd is fetched too: TensorFlow fuses Conv2D + BiasAdd and leaves the Relu.
  Ran ran = RunBoth(def, {"relu", "bias"});
  EXPECT_EQ(ran.ops["bias"], "_FusedConv2D");
  EXPECT_EQ(ran.ops["relu"], "Relu");
  EXPECT_EQ(ran.fused_ops, "BiasAdd");
  // The convolution itself fetched: nothing is fused.
  Ran conv_fetched = RunBoth(def, {"relu", "conv"});
  EXPECT_EQ(conv_fetched.ops["conv"], "Conv2D");
  EXPECT_EQ(conv_fetched.ops["bias"], "BiasAdd");
  EXPECT_EQ(Count(conv_fetched, "_FusedConv2D"), 0);
}

TEST(RemapperTest, TwoConsumersEndTheChain) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(UnaryNode("relu", "Relu", "bias"));
  def.node.push_back(UnaryNode("neg", "Neg", "bias"));
  def.node.push_back(BinaryNode("sum", "AddV2", "relu", "neg"));
  Ran ran = RunBoth(def, {"sum"});
  EXPECT_EQ(ran.ops["bias"], "_FusedConv2D");
  EXPECT_EQ(ran.ops["relu"], "Relu");
  EXPECT_EQ(ran.fused_ops, "BiasAdd");
}

TEST(RemapperTest, AControlEdgeOutOfAnIntermediateEndsTheChain) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(UnaryNode("relu", "Relu", "bias"));
  def.node.push_back(MakeNode("after", "NoOp", {"^conv"}));
  SessionOptions options;
  auto session = Session::Create(def, options);
  ASSERT_TRUE(session.ok());
  auto out = (*session)->Run({{"x", RandomTensor(DT_FLOAT, {1, 6, 6, 4}, 9)}}, {"relu"}, {"after"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
    const Node* conv = g->FindNode("conv");
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->type_string(), "Conv2D");
  }
}

TEST(RemapperTest, OtherTypesAreNotFused) {
  GraphDef def = ConvGraph(DT_DOUBLE);
  def.node.push_back(BiasAdd("bias", "conv", "b", DT_DOUBLE));
  def.node.push_back(UnaryNode("relu", "Relu", "bias", DT_DOUBLE));
  Ran ran = RunBoth(def, {"relu"}, DT_DOUBLE);
  EXPECT_EQ(ran.ops["conv"], "Conv2D");
  EXPECT_EQ(Count(ran, "_FusedConv2D"), 0);
}

TEST(RemapperTest, AScaleThatIsNotAConstantIsNotFolded) {
  GraphDef def = ConvGraph();
  def.node.push_back(BiasAdd("bias", "conv", "b"));
  def.node.push_back(PlaceholderNode("scale", DT_FLOAT, PartialShape({kChannels})));
  def.node.push_back(BinaryNode("mul", "Mul", "bias", "scale"));
  def.node.push_back(UnaryNode("relu", "Relu", "mul"));
  SessionOptions options;
  for (bool remap : {true, false}) {
    options.remap = remap;
    auto session = Session::Create(def, options);
    ASSERT_TRUE(session.ok());
    auto out = (*session)->Run({{"x", RandomTensor(DT_FLOAT, {1, 6, 6, 4}, 9)},
                                {"scale", RandomTensor(DT_FLOAT, {kChannels}, 8)}},
                               {"relu"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
      EXPECT_EQ(g->FindNode("mul")->type_string(), "Mul");
      EXPECT_EQ(g->FindNode("bias")->type_string(), remap ? "_FusedConv2D" : "BiasAdd");
    }
  }
}

TEST(RemapperTest, MatMulBiasAddReluBecomesFusedMatMul) {
  GraphDef def;
  def.node.push_back(PlaceholderNode("x", DT_FLOAT, PartialShape({1, 6, 6, 4})));
  def.node.push_back(ConstNode("shape", Tensor::Vector<int32_t>(DT_INT32, {4, 36})));
  def.node.push_back(MakeNode("flat", "Reshape", {"x", "shape"},
                              {{"T", AttrValue::Type(DT_FLOAT)}, {"Tshape", AttrValue::Type(DT_INT32)}}));
  def.node.push_back(ConstNode("w", RandomTensor(DT_FLOAT, {36, kChannels}, 1)));
  def.node.push_back(MakeNode("mm", "MatMul", {"flat", "w"}, {{"T", AttrValue::Type(DT_FLOAT)}}));
  def.node.push_back(ConstNode("b", RandomTensor(DT_FLOAT, {kChannels}, 2)));
  def.node.push_back(BiasAdd("bias", "mm", "b"));
  def.node.push_back(MakeNode("act", "LeakyRelu", {"bias"},
                              {{"T", AttrValue::Type(DT_FLOAT)}, {"alpha", AttrValue::Float(0.3f)}}));
  Ran ran = RunBoth(def, {"act"});
  EXPECT_EQ(ran.ops["act"], "_FusedMatMul");
  EXPECT_EQ(ran.fused_ops, "BiasAdd,LeakyRelu");
}

// A v1 loop (as a frozen TF2 graph has it), four times v <- tanh(v @ w): the product and Tanh
// fuse with a zero bias, which must be a constant of the loop's frame (one of the root frame
// feeding the body is an error of the executor: "inputs from two different loop frames").
GraphDef LoopGraph() {
  GraphDef def;
  auto typed = [](NodeDef n, DataType t) {
    n.attr["T"] = AttrValue::Type(t);
    return n;
  };
  auto enter = [&](std::string name, std::string in, DataType t) {
    NodeDef n = typed(MakeNode(std::move(name), "Enter", {std::move(in)}), t);
    n.attr["frame_name"] = AttrValue::String("loop");
    return n;
  };
  auto merge = [&](std::string name, std::string a, std::string b, DataType t) {
    NodeDef n = typed(MakeNode(std::move(name), "Merge", {std::move(a), std::move(b)}), t);
    n.attr["N"] = AttrValue::Int(2);
    return n;
  };
  auto with_control = [](NodeDef n, std::string control) {
    n.input.push_back("^" + control);
    return n;
  };
  def.node.push_back(ConstNode("i0", Tensor::Scalar<int32_t>(DT_INT32, 0)));
  def.node.push_back(ConstNode("v0", RandomTensor(DT_FLOAT, {2, 3}, 1)));
  def.node.push_back(enter("i_enter", "i0", DT_INT32));
  def.node.push_back(enter("v_enter", "v0", DT_FLOAT));
  def.node.push_back(merge("i_merge", "i_enter", "i_next", DT_INT32));
  def.node.push_back(merge("v_merge", "v_enter", "v_next", DT_FLOAT));
  def.node.push_back(with_control(ConstNode("limit", Tensor::Scalar<int32_t>(DT_INT32, 4)), "i_merge"));
  def.node.push_back(BinaryNode("cond", "Less", "i_merge", "limit", DT_INT32));
  def.node.push_back(MakeNode("loop_cond", "LoopCond", {"cond"}));
  def.node.push_back(typed(MakeNode("i_switch", "Switch", {"i_merge", "loop_cond"}), DT_INT32));
  def.node.push_back(typed(MakeNode("v_switch", "Switch", {"v_merge", "loop_cond"}), DT_FLOAT));
  def.node.push_back(UnaryNode("i_body", "Identity", "i_switch:1", DT_INT32));
  def.node.push_back(with_control(ConstNode("one", Tensor::Scalar<int32_t>(DT_INT32, 1)), "i_body"));
  def.node.push_back(BinaryNode("i_inc", "AddV2", "i_body", "one", DT_INT32));
  def.node.push_back(UnaryNode("v_body", "Identity", "v_switch:1"));
  def.node.push_back(with_control(ConstNode("shape", Tensor::Vector<int32_t>(DT_INT32, {2, 3})), "v_body"));
  def.node.push_back(MakeNode("v_known", "Reshape", {"v_body", "shape"},
                              {{"T", AttrValue::Type(DT_FLOAT)}, {"Tshape", AttrValue::Type(DT_INT32)}}));
  def.node.push_back(with_control(ConstNode("w", RandomTensor(DT_FLOAT, {3, 3}, 2)), "v_body"));
  def.node.push_back(MakeNode("mm", "MatMul", {"v_known", "w"}, {{"T", AttrValue::Type(DT_FLOAT)}}));
  def.node.push_back(UnaryNode("act", "Tanh", "mm"));
  def.node.push_back(UnaryNode("i_next", "NextIteration", "i_inc", DT_INT32));
  def.node.push_back(UnaryNode("v_next", "NextIteration", "act"));
  def.node.push_back(UnaryNode("v_exit", "Exit", "v_switch:0"));
  def.node.push_back(UnaryNode("result", "Identity", "v_exit"));
  return def;
}

TEST(RemapperTest, AChainInsideALoopGetsItsConstantsInTheLoopsFrame) {
  std::vector<Tensor> results;
  for (bool remap : {true, false}) {
    SessionOptions options;
    options.remap = remap;
    auto session = Session::Create(LoopGraph(), options);
    ASSERT_TRUE(session.ok()) << session.status().message();
    auto got = (*session)->Run({}, {"result"});
    ASSERT_TRUE(got.ok()) << got.status().message();
    results.push_back((*got)[0]);
    for (const auto& [key, g] : (*session)->ExecutedGraphs()) {
      EXPECT_EQ(g->FindNode("act")->type_string(), remap ? "_FusedMatMul" : "Tanh");
    }
  }
  ASSERT_EQ(results[0].dims(), results[1].dims());
  for (int64_t e = 0; e < results[0].num_elements(); ++e) {
    EXPECT_NEAR(results[0].GetAsDouble(e), results[1].GetAsDouble(e), 1e-5);
  }
}

TEST(RemapperTest, ComputesConstantFollowsStatelessOpsOfConstants) {
  GraphDef def = ConvGraph();
  AddKerasBatchNorm(def, "conv");
  auto graph = Graph::FromGraphDef(def);
  ASSERT_TRUE(graph.ok());
  EXPECT_TRUE(ComputesConstant(*(*graph)->FindNode("bn/scale")));
  EXPECT_TRUE(ComputesConstant(*(*graph)->FindNode("w")));
  EXPECT_FALSE(ComputesConstant(*(*graph)->FindNode("conv")));
  EXPECT_FALSE(ComputesConstant(*(*graph)->FindNode("x")));
}

}  // namespace
}  // namespace xlens::graph
