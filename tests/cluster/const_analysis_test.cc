#include "compiler/cluster/const_analysis.h"

#include <gtest/gtest.h>

#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

using cluster_testing::LoadGraph;

TEST(ConstAnalysisTest, ReshapesShapeIsConstantBackToItsSourceButNotThroughAShapeOp) {
  auto g = LoadGraph(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "y" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "shape" op: "Shape" input: "y" attr { key: "T" value { type: DT_FLOAT } } attr { key: "out_type" value { type: DT_INT32 } } }
node { name: "neg" op: "Neg" input: "shape" attr { key: "T" value { type: DT_INT32 } } }
node { name: "r" op: "Reshape" input: "x" input: "neg" attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tshape" value { type: DT_INT32 } } }
node { name: "axes" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 int_val: 0 } } } }
node { name: "sum" op: "Sum" input: "r" input: "axes" attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tidx" value { type: DT_INT32 } } }
)");
  ASSERT_NE(g, nullptr);
  auto c = BackwardsConstAnalysis(*g);
  ASSERT_TRUE(c.ok()) << c.status().message();
  auto is_const = [&](const char* n) { return (*c)[g->FindNode(n)->id()]; };
  EXPECT_TRUE(is_const("neg"));
  EXPECT_TRUE(is_const("shape"));
  EXPECT_FALSE(is_const("y"));  // Shape needs only y's shape
  EXPECT_TRUE(is_const("axes"));
  EXPECT_FALSE(is_const("x"));
  EXPECT_FALSE(is_const("r"));
  EXPECT_EQ(CompileTimeConstInputIndices(*g->FindNode("r")), std::vector<int>{1});
}

}  // namespace
}  // namespace xlens::cluster
