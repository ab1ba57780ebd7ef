// The random ops draw TensorFlow's numbers: every case of testdata/ops/random_cases.json
// (TensorFlow 2.21, see generate.py there), stateful ops over two runs of the same node, and the
// initial weights of the corpus's linear regression exactly as TensorFlow drew them.
#include <gtest/gtest.h>

#include <filesystem>

#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/support/file_io.h"
#include "kernel_test_util.h"

namespace xlens::graph {
namespace {

TEST(RandomOpsTest, EveryTensorFlowCase) {
  const auto cases = testing::LoadCases("random_cases.json");
  ASSERT_GT(cases.size(), 20u);
  for (const auto& c : cases) testing::CheckCase(c);
}

TEST(RandomOpsTest, EachNodeKeepsItsOwnStream) {
  AttrMap attrs = {{"dtype", AttrValue::Type(DT_FLOAT)}, {"T", AttrValue::Type(DT_INT32)},
                   {"seed", AttrValue::Int(7)}, {"seed2", AttrValue::Int(9)}};
  testing::KernelRunner a("RandomUniform", attrs), b("RandomUniform", attrs);
  const Tensor shape = Tensor::Vector<int32_t>(DT_INT32, {4});
  auto a1 = a.Run({shape}), a2 = a.Run({shape}), b1 = b.Run({shape});
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  EXPECT_TRUE((*a1)[0].Identical((*b1)[0]));   // same seeds, same first draw
  EXPECT_FALSE((*a1)[0].Identical((*a2)[0]));  // the stream moves on
}

TEST(RandomOpsTest, UnsupportedAlgorithmIsRefused) {
  auto out = testing::RunOp(
      "StatelessRandomUniformV2",
      {Tensor::Vector<int32_t>(DT_INT32, {2}), Tensor::Vector<uint64_t>(DT_UINT64, {1}),
       Tensor::Vector<uint64_t>(DT_UINT64, {0, 0}), Tensor::Scalar<int32_t>(DT_INT32, 7)},
      {{"dtype", AttrValue::Type(DT_FLOAT)}, {"Tshape", AttrValue::Type(DT_INT32)}});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("Unsupported algorithm id: 7"), std::string::npos);
}

// linreg_tf1 initialises its resource variables from RandomUniform (seed 0, seed2 from the
// graph seed); TensorFlow recorded the values it drew.
TEST(RandomOpsTest, LinearRegressionInitialWeightsAreTensorFlows) {
  const std::string dir = XLENS_SHARED_DIR "/corpus/tf/linreg_tf1/nojit";
  if (!std::filesystem::exists(dir + "/graph.pbtxt")) GTEST_SKIP() << "no corpus at " << dir;
  auto def = ReadGraphDef(dir + "/graph.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  // Only the variables and their initialisers (the training ops belong to other families).
  GraphDef init;
  for (const NodeDef& n : def->node) {
    if (n.name.rfind("weights", 0) == 0 || n.name.rfind("bias", 0) == 0) init.node.push_back(n);
  }
  init.versions = def->versions;
  auto session = Session::Create(init);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto ran = (*session)->Run({}, {}, {"weights/Assign", "bias/Assign"});
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  auto values = (*session)->Run({}, {"weights/Read/ReadVariableOp", "bias/Read/ReadVariableOp"});
  ASSERT_TRUE(values.ok()) << values.status().message();
  EXPECT_EQ((*values)[0].GetAsDouble(0), -1.6636104583740234);
  EXPECT_EQ((*values)[1].GetAsDouble(0), 0.13762938976287842);
}

}  // namespace
}  // namespace xlens::graph
