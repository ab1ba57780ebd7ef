#include "compiler/graph/graph.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "graph/graph_test_util.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using testing::BinaryNode;
using testing::FloatConst;
using testing::MakeNode;
using testing::PlaceholderNode;
using testing::UnaryNode;

GraphDef SmallGraph() {
  GraphDef def;
  def.node.push_back(PlaceholderNode("x", DT_FLOAT, PartialShape({2, 3})));
  def.node.push_back(FloatConst("c", 2.0f));
  def.node.push_back(BinaryNode("mul", "Mul", "x", "c"));
  def.node.push_back(UnaryNode("neg", "Neg", "mul"));
  def.node.push_back(MakeNode("done", "NoOp", {"^neg"}));
  return def;
}

TEST(GraphTest, BuildsEdgesBothWaysAndTypes) {
  auto g = Graph::FromGraphDef(SmallGraph());
  ASSERT_TRUE(g.ok()) << g.status().message();
  Node* mul = (*g)->FindNode("mul");
  ASSERT_NE(mul, nullptr);
  EXPECT_EQ(mul->num_inputs(), 2);
  EXPECT_EQ(mul->output_type(0), DT_FLOAT);
  EXPECT_EQ(mul->input_node(0).first->name(), "x");
  EXPECT_EQ(mul->input_node(1).first->name(), "c");
  Node* done = (*g)->FindNode("done");
  ASSERT_EQ(done->in_edges().size(), 1u);
  EXPECT_TRUE(done->in_edges()[0]->IsControlEdge());
  Node* neg = (*g)->FindNode("neg");
  EXPECT_EQ(neg->out_edges().size(), 1u);
}

TEST(GraphTest, RoundTripsThroughGraphDef) {
  GraphDef def = SmallGraph();
  auto g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok());
  GraphDef out = (*g)->ToGraphDef();
  ASSERT_EQ(out.node.size(), def.node.size());
  for (size_t i = 0; i < def.node.size(); ++i) {
    EXPECT_EQ(out.node[i].name, def.node[i].name);
    EXPECT_EQ(out.node[i].input, def.node[i].input);
  }
  // Defaults the op declares are added (Placeholder has none; Const none; check an op with one).
}

TEST(GraphTest, InfersShapesThroughBroadcasting) {
  auto g = Graph::FromGraphDef(SmallGraph());
  ASSERT_TRUE(g.ok());
  ASSERT_TRUE((*g)->InferShapes().ok());
  EXPECT_EQ((*g)->FindNode("neg")->output_shapes()[0].ToString(), "[2,3]");
}

TEST(GraphTest, DanglingInputNamesTheNode) {
  GraphDef def = SmallGraph();
  def.node[3].input = {"nope"};
  auto g = Graph::FromGraphDef(def, {.source_name = "model.pbtxt"});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("model.pbtxt"));
  EXPECT_THAT(g.status().message(), HasSubstr("node 'neg' (Neg)"));
  EXPECT_THAT(g.status().message(), HasSubstr("'nope'"));
}

// A model that needs ops xlens lacks needs several: one load names them all (the incomplete beta
// function's Betainc and BesselI0e, say), each with its first nodes.
TEST(GraphTest, EveryUnknownOpIsNamedAtOnce) {
  GraphDef def = SmallGraph();
  def.node.push_back(MakeNode("scores", "Betainc", {"neg"}));
  def.node.push_back(MakeNode("gelu", "BesselI0e", {"scores"}));
  def.node.push_back(MakeNode("out", "Betainc", {"gelu"}));
  auto g = Graph::FromGraphDef(def, {.source_name = "model.pbtxt"});
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("node 'scores' (Betainc): unknown op 'Betainc'"));
  EXPECT_THAT(g.status().message(),
              HasSubstr("2 more nodes use ops xlens does not know: 'BesselI0e' (gelu), 'Betainc' "
                        "(out)"));
}

TEST(GraphTest, OutputIndexOutOfRange) {
  GraphDef def = SmallGraph();
  def.node[3].input = {"mul:3"};
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("asks for output 3"));
}

TEST(GraphTest, WrongInputCount) {
  GraphDef def = SmallGraph();
  def.node[2].input = {"x"};
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("node 'mul' (Mul): has 1 data input, the op takes 2"));
}

TEST(GraphTest, UnknownOpSuggestsTheClosest) {
  GraphDef def = SmallGraph();
  def.node[3].op = "Negg";
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("unknown op 'Negg'"));
  EXPECT_THAT(g.status().message(), HasSubstr("did you mean 'Neg'"));
  // Allowed for inspection.
  auto loose = Graph::FromGraphDef(def, {.allow_unknown_ops = true});
  ASSERT_TRUE(loose.ok()) << loose.status().message();
  EXPECT_FALSE((*loose)->FindNode("neg")->has_kernel());
}

TEST(GraphTest, WrongAttrKind) {
  GraphDef def = SmallGraph();
  def.node[2].attr["T"] = AttrValue::Int(1);
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("attr 'T' is a int, expected a type"));
}

TEST(GraphTest, DisallowedType) {
  GraphDef def = SmallGraph();
  def.node[2].attr["T"] = AttrValue::Type(DT_STRING);
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("not in the allowed types"));
}

TEST(GraphTest, TypeMismatchOnAnEdge) {
  GraphDef def = SmallGraph();
  def.node.push_back(PlaceholderNode("i", DT_INT32, PartialShape({2, 3})));
  def.node[2].input = {"x", "i"};
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("input 1 ('i') is int32, expected float"));
}

TEST(GraphTest, DataInputAfterControlInput) {
  GraphDef def = SmallGraph();
  def.node[2].input = {"^c", "x", "c"};
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("comes after a control input"));
}

TEST(GraphTest, DuplicateName) {
  GraphDef def = SmallGraph();
  def.node.push_back(FloatConst("c", 1.0f));
  auto g = Graph::FromGraphDef(def);
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("duplicate node name"));
}

TEST(GraphTest, CycleIsNamed) {
  GraphDef def;
  def.node.push_back(BinaryNode("a", "AddV2", "b", "b"));
  def.node.push_back(UnaryNode("b", "Neg", "a"));
  auto g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok());
  auto order = (*g)->TopologicalOrder();
  ASSERT_FALSE(order.ok());
  EXPECT_THAT(order.status().message(), HasSubstr("cycle"));
  // Forwards along the edges, closing where it started: b feeds a, a feeds b.
  EXPECT_THAT(order.status().message(), HasSubstr("'b' -> 'a' -> 'b'"));
}

TEST(GraphTest, TopologicalOrderPutsInputsFirst) {
  GraphDef def;
  def.node.push_back(UnaryNode("late", "Neg", "early"));
  def.node.push_back(FloatConst("early", 1.0f));
  auto g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok());
  auto order = (*g)->TopologicalOrder();
  ASSERT_TRUE(order.ok());
  ASSERT_EQ(order->size(), 2u);
  EXPECT_EQ((*order)[0]->name(), "early");
}

TEST(GraphTest, NewNameUniquifies) {
  auto g = Graph::FromGraphDef(SmallGraph());
  ASSERT_TRUE(g.ok());
  EXPECT_EQ((*g)->NewName("mul"), "mul_1");
  EXPECT_EQ((*g)->NewName("fresh"), "fresh");
}

TEST(GraphTest, RemoveNodeDropsItsEdges) {
  auto g = Graph::FromGraphDef(SmallGraph());
  ASSERT_TRUE(g.ok());
  Node* neg = (*g)->FindNode("neg");
  (*g)->RemoveNode(neg);
  EXPECT_EQ((*g)->FindNode("neg"), nullptr);
  EXPECT_TRUE((*g)->FindNode("mul")->out_edges().empty());
  EXPECT_TRUE((*g)->FindNode("done")->in_edges().empty());
  EXPECT_EQ((*g)->num_op_nodes(), 4);
}

}  // namespace
}  // namespace xlens::graph
