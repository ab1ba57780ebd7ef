#include "compiler/cluster/graph_cycles.h"

#include <gtest/gtest.h>

namespace xlens::cluster {
namespace {

TEST(GraphCyclesTest, RefusesAnEdgeThatClosesACycle) {
  GraphCycles g;
  for (int i = 0; i < 4; ++i) g.NewNode();
  EXPECT_TRUE(g.InsertEdge(0, 1));
  EXPECT_TRUE(g.InsertEdge(1, 2));
  EXPECT_TRUE(g.InsertEdge(2, 3));
  EXPECT_FALSE(g.InsertEdge(3, 0));
  EXPECT_FALSE(g.HasEdge(3, 0));
  EXPECT_TRUE(g.IsReachable(0, 3));
  EXPECT_FALSE(g.IsReachable(3, 0));
}

TEST(GraphCyclesTest, RanksFollowEdgesInsertedAgainstTheInitialOrder) {
  GraphCycles g;
  for (int i = 0; i < 3; ++i) g.NewNode();
  // 2 -> 0 contradicts the initial ranks (ids): the order is repaired.
  EXPECT_TRUE(g.InsertEdge(2, 0));
  EXPECT_TRUE(g.InsertEdge(0, 1));
  std::vector<int32_t> post = g.AllNodesInPostOrder();
  auto pos = [&](int n) { return std::find(post.begin(), post.end(), n) - post.begin(); };
  // Post order: successors first.
  EXPECT_LT(pos(1), pos(0));
  EXPECT_LT(pos(0), pos(2));
}

TEST(GraphCyclesTest, ContractEdgeMergesUnlessAnotherPathExists) {
  GraphCycles g;
  for (int i = 0; i < 4; ++i) g.NewNode();
  // 0 -> 1 -> 3 and 0 -> 2 -> 3: contracting 0 -> 3 would make a cycle through 1 (and 2).
  g.InsertEdge(0, 1);
  g.InsertEdge(1, 3);
  g.InsertEdge(0, 2);
  g.InsertEdge(2, 3);
  g.InsertEdge(0, 3);
  EXPECT_FALSE(g.ContractEdge(0, 3).has_value());
  EXPECT_TRUE(g.HasEdge(0, 3));  // unchanged
  // 0 -> 1 has no other path: merged; the kept node has every edge of both.
  std::optional<int32_t> kept = g.ContractEdge(0, 1);
  ASSERT_TRUE(kept.has_value());
  int32_t gone = *kept == 0 ? 1 : 0;
  EXPECT_TRUE(g.IsFree(gone));
  EXPECT_TRUE(g.HasEdge(*kept, 3));
  EXPECT_TRUE(g.HasEdge(*kept, 2));
  std::vector<int32_t> post = g.AllNodesInPostOrder();
  EXPECT_EQ(post.size(), 3u);
}

TEST(GraphCyclesTest, ErasingKeepsTensorFlowsOrder) {
  OrderedNodeSet set;
  for (int v : {5, 6, 7, 8}) set.Insert(v);
  set.Erase(6);  // the last element moves into the hole
  EXPECT_EQ(set.GetSequence(), (std::vector<int32_t>{5, 8, 7}));
  EXPECT_FALSE(set.Insert(5));
}

TEST(GraphCyclesTest, FindPathNamesTheNodesOnTheWay) {
  GraphCycles g;
  for (int i = 0; i < 3; ++i) g.NewNode();
  g.InsertEdge(0, 1);
  g.InsertEdge(1, 2);
  EXPECT_EQ(g.FindPath(0, 2), (std::vector<int32_t>{0, 1, 2}));
  EXPECT_TRUE(g.FindPath(2, 0).empty());
}

}  // namespace
}  // namespace xlens::cluster
