// Variables through their whole life, with TensorFlow's behaviour and messages: reference
// variables (VariableV2, Assign, AssignAdd/Sub, IsVariableInitialized) and resource variables
// (VarHandleOp, AssignVariableOp, ReadVariableOp, ...), run in a Session as TensorFlow runs them.
#include <gtest/gtest.h>

#include "compiler/graph/session.h"
#include "graph_test_util.h"
#include "kernel_test_util.h"

namespace xlens::graph {
namespace {

using testing::ConstNode;
using testing::MakeNode;

AttrMap VarAttrs(PartialShape shape) {
  return {{"dtype", AttrValue::Type(DT_FLOAT)}, {"shape", AttrValue::Shape(shape)}};
}

GraphDef RefVariableGraph() {
  GraphDef g;
  g.node.push_back(MakeNode("w", "VariableV2", {}, VarAttrs(PartialShape({2}))));
  g.node.push_back(ConstNode("init_value", Tensor::Vector<float>(DT_FLOAT, {1, 2})));
  g.node.push_back(ConstNode("delta", Tensor::Vector<float>(DT_FLOAT, {0.5f, 0.25f})));
  g.node.push_back(ConstNode("wrong", Tensor::Vector<float>(DT_FLOAT, {1, 2, 3})));
  AttrMap t = {{"T", AttrValue::Type(DT_FLOAT)}};
  g.node.push_back(MakeNode("w/Assign", "Assign", {"w", "init_value"}, t));
  g.node.push_back(MakeNode("w/AssignBad", "Assign", {"w", "wrong"}, t));
  g.node.push_back(MakeNode("w/AssignAdd", "AssignAdd", {"w", "delta"}, t));
  g.node.push_back(MakeNode("w/AssignSub", "AssignSub", {"w", "delta"}, t));
  g.node.push_back(MakeNode("w/read", "Identity", {"w"}, t));
  g.node.push_back(MakeNode("w/IsInitialized", "IsVariableInitialized", {"w"},
                            {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  return g;
}

TEST(StateOpsTest, ReferenceVariableLifecycle) {
  auto s = Session::Create(RefVariableGraph());
  ASSERT_TRUE(s.ok()) << s.status().message();
  Session& session = **s;
  auto init = session.Run({}, {"w/IsInitialized"});
  ASSERT_TRUE(init.ok()) << init.status().message();
  EXPECT_FALSE((*init)[0].flat<bool>()[0]);
  // Reading before initialisation: TensorFlow's FailedPrecondition text.
  auto early = session.Run({}, {"w/read"});
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("Attempting to use uninitialized value w"),
            std::string::npos)
      << early.status().message();
  auto bad = session.Run({}, {}, {"w/AssignBad"});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find(
                "Assign requires shapes of both tensors to match. lhs shape= [2] rhs shape= [3]"),
            std::string::npos)
      << bad.status().message();
  ASSERT_TRUE(session.Run({}, {}, {"w/Assign"}).ok());
  auto read = session.Run({}, {"w/read", "w/IsInitialized"});
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE((*read)[0].Identical(Tensor::Vector<float>(DT_FLOAT, {1, 2})));
  EXPECT_TRUE((*read)[1].flat<bool>()[0]);
  const Tensor before = (*read)[0];
  auto added = session.Run({}, {"w/AssignAdd"});
  ASSERT_TRUE(added.ok()) << added.status().message();
  EXPECT_TRUE((*added)[0].Identical(Tensor::Vector<float>(DT_FLOAT, {1.5f, 2.25f})));
  // A value read earlier does not change under the update.
  EXPECT_TRUE(before.Identical(Tensor::Vector<float>(DT_FLOAT, {1, 2})));
  ASSERT_TRUE(session.Run({}, {}, {"w/AssignSub"}).ok());
  ASSERT_TRUE(session.Run({}, {}, {"w/AssignSub"}).ok());
  auto last = session.Run({}, {"w/read"});
  ASSERT_TRUE(last.ok());
  EXPECT_TRUE((*last)[0].Identical(Tensor::Vector<float>(DT_FLOAT, {0.5f, 1.75f})));
}

GraphDef ResourceVariableGraph() {
  GraphDef g;
  AttrMap handle = VarAttrs(PartialShape({3}));
  handle["shared_name"] = AttrValue::String("v");
  g.node.push_back(MakeNode("v", "VarHandleOp", {}, handle));
  g.node.push_back(ConstNode("value", Tensor::Vector<float>(DT_FLOAT, {1, 2, 3})));
  g.node.push_back(ConstNode("indices", Tensor::Vector<int32_t>(DT_INT32, {2, 0})));
  AttrMap dtype = {{"dtype", AttrValue::Type(DT_FLOAT)}};
  g.node.push_back(MakeNode("v/Assign", "AssignVariableOp", {"v", "value"}, dtype));
  g.node.push_back(MakeNode("v/Add", "AssignAddVariableOp", {"v", "value"}, dtype));
  g.node.push_back(MakeNode("v/Sub", "AssignSubVariableOp", {"v", "indices"},
                            {{"dtype", AttrValue::Type(DT_INT32)}}));
  g.node.push_back(MakeNode("v/Read", "ReadVariableOp", {"v"}, dtype));
  g.node.push_back(MakeNode("v/IsInitialized", "VarIsInitializedOp", {"v"}));
  AttrMap gather = dtype;
  gather["Tindices"] = AttrValue::Type(DT_INT32);
  g.node.push_back(MakeNode("v/Gather", "ResourceGather", {"v", "indices"}, gather));
  g.node.push_back(MakeNode("v/Destroy", "DestroyResourceOp", {"v"}));
  return g;
}

TEST(StateOpsTest, AVarHandleOpHandsOutOneHandleTensorStepAfterStep) {
  // The handle depends on the node's attrs alone, so a step does not build it again (a
  // SavedModel's function opens hundreds of variables per call); the variable it names is the
  // same and still reads as assigned.
  auto s = Session::Create(ResourceVariableGraph());
  ASSERT_TRUE(s.ok()) << s.status().message();
  Session& session = **s;
  auto first = session.Run({}, {"v"});
  auto second = session.Run({}, {"v"});
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_TRUE((*first)[0].SharesBufferWith((*second)[0]));
  EXPECT_EQ((*second)[0].handle().name, "v");
  EXPECT_EQ((*second)[0].handle().dtype, DT_FLOAT);
  ASSERT_TRUE(session.Run({}, {}, {"v/Assign"}).ok());
  ASSERT_TRUE(session.Run({}, {}, {"v/Add"}).ok());
  auto read = session.Run({}, {"v/Read"});
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ((*read)[0].flat<float>()[2], 6.0f);
}

TEST(StateOpsTest, ResourceVariableLifecycle) {
  auto s = Session::Create(ResourceVariableGraph());
  ASSERT_TRUE(s.ok()) << s.status().message();
  Session& session = **s;
  auto early = session.Run({}, {"v/Read"});
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find(
                "Could not find variable v. This could mean that the variable has been deleted. "
                "In TF1, it can also mean the variable is uninitialized."),
            std::string::npos)
      << early.status().message();
  auto init = session.Run({}, {"v/IsInitialized"});
  ASSERT_TRUE(init.ok());
  EXPECT_FALSE((*init)[0].flat<bool>()[0]);
  ASSERT_TRUE(session.Run({}, {}, {"v/Assign"}).ok());
  ASSERT_TRUE(session.Run({}, {}, {"v/Add"}).ok());
  auto read = session.Run({}, {"v/Read", "v/Gather", "v/IsInitialized"});
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_TRUE((*read)[0].Identical(Tensor::Vector<float>(DT_FLOAT, {2, 4, 6})));
  EXPECT_TRUE((*read)[1].Identical(Tensor::Vector<float>(DT_FLOAT, {6, 2})));
  EXPECT_TRUE((*read)[2].flat<bool>()[0]);
  // The variable holds floats: an int32 update is refused.
  auto wrong = session.Run({}, {}, {"v/Sub"});
  EXPECT_FALSE(wrong.ok());
  ASSERT_TRUE(session.Run({}, {}, {"v/Destroy"}).ok());
  auto after = session.Run({}, {"v/IsInitialized"});
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE((*after)[0].flat<bool>()[0]);
}

}  // namespace
}  // namespace xlens::graph
