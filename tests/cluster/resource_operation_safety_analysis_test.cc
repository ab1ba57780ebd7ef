#include "compiler/cluster/resource_operation_safety_analysis.h"

#include <gtest/gtest.h>

#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

using cluster_testing::LoadGraph;

TEST(ResourceOperationSafetyAnalysisTest, AWriteFollowedByAReadCannotShareACluster) {
  auto g = LoadGraph(R"(
node { name: "v" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { } } } attr { key: "shared_name" value { s: "v" } } }
node { name: "one" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 1 } } } }
node { name: "read0" op: "ReadVariableOp" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "assign" op: "AssignAddVariableOp" input: "v" input: "one" input: "^read0" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "read1" op: "ReadVariableOp" input: "v" input: "^assign" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "write" op: "AssignVariableOp" input: "v" input: "read1" attr { key: "dtype" value { type: DT_FLOAT } } }
)");
  ASSERT_NE(g, nullptr);
  auto pairs = ComputeIncompatibleResourceOperationPairs(*g);
  ASSERT_TRUE(pairs.ok()) << pairs.status().message();
  auto id = [&](const char* n) { return g->FindNode(n)->id(); };
  auto has = [&](const char* a, const char* b) {
    for (const auto& p : *pairs) {
      if (p.first == id(a) && p.second == id(b)) return true;
    }
    return false;
  };
  // read -> read-modify-write and anything -> write are safe in one cluster.
  EXPECT_FALSE(has("read0", "assign"));
  EXPECT_FALSE(has("assign", "write"));
  // A read-modify-write followed by a read would read the value from before the cluster.
  EXPECT_TRUE(has("assign", "read1"));
}

}  // namespace
}  // namespace xlens::cluster
