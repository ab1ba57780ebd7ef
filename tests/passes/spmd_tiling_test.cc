#include "compiler/passes/spmd_tiling.h"

#include <gtest/gtest.h>

namespace xlens {
namespace {

Tiling Parse(std::string_view text, int64_t rank, int64_t n) {
  auto s = HloSharding::Parse(text);
  EXPECT_TRUE(s.ok()) << s.status().message();
  auto t = Tiling::FromSharding(*s, rank, n);
  EXPECT_TRUE(t.ok()) << t.status().message();
  return *t;
}

TEST(SpmdTilingTest, ReadsAndPrintsXlasForms) {
  EXPECT_EQ(Parse("{replicated}", 2, 4).ToString(), "{replicated}");
  Tiling t = Parse("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 2, 4);
  EXPECT_EQ(t.tiles, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(t.rep, 2);
  EXPECT_EQ(t.devices, (std::vector<int64_t>{0, 2, 1, 3}));
  EXPECT_EQ(t.TileDims({16, 32}), (std::vector<int64_t>{16, 16}));
  EXPECT_EQ(t.Offset({16, 32}, 1, 1), 16);  // device 1 holds columns 16..31
  EXPECT_FALSE(Tiling::FromSharding(HloSharding::Manual(), 2, 4).ok());
}

TEST(SpmdTilingTest, PartiallyManualPiecesAreTheManualAxisCutsWithTheRestWhole) {
  // shard_map manual over 'data' of a (data=2, model=2) mesh: the body's f32[2,8] is a piece of
  // the global f32[4,8] cut by rows over 'data', whole over 'model'.
  auto s = HloSharding::Parse("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dims={manual}}");
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto t = ManualPieces(*s, {4, 8}, {2, 8}, 4);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->tiles, (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(t->rep, 2);
  EXPECT_EQ(t->devices, (std::vector<int64_t>{0, 1, 2, 3}));  // data 0: devices 0, 1
  EXPECT_FALSE(ManualPieces(*s, {4, 8}, {3, 8}, 4).ok());      // 3 rows do not divide 4
  EXPECT_FALSE(ManualPieces(*s, {8, 8}, {2, 8}, 4).ok());      // 4 pieces, 2 manual groups
  EXPECT_FALSE(ManualPieces(HloSharding::Replicated(), {4}, {4}, 4).ok());
}

TEST(SpmdTilingTest, ProjectEmbedAndReplicateKeepWhoHoldsWhat) {
  Tiling grid = Parse("{devices=[2,2]<=[4]}", 2, 4);  // rows over {0,1}|{2,3}
  // Keeping dim 0 only: columns become copies, devices 0 and 1 hold the same rows.
  Tiling rows = grid.Project({0});
  EXPECT_EQ(rows.ToString(), "{devices=[2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(grid.ReplicateDims({0}).ToString(), "{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  auto embedded = rows.Embed({-1, 0});
  ASSERT_TRUE(embedded.ok());
  EXPECT_EQ(embedded->tiles, (std::vector<int64_t>{1, 2}));
  EXPECT_FALSE(grid.Embed({0}).ok());  // dim 1 is tiled and has no place
  EXPECT_EQ(grid.GroupsAlong({1}), (std::vector<std::vector<int64_t>>{{0, 1}, {2, 3}}));
  EXPECT_EQ(grid.GroupsAlong({0}), (std::vector<std::vector<int64_t>>{{0, 2}, {1, 3}}));
}

TEST(SpmdTilingTest, MergeCombinesCompatibleCutsOnly) {
  Tiling rows = Parse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 2, 4);
  Tiling cols = Parse("{devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}", 2, 4);
  auto merged = MergeTilings(rows, cols);
  ASSERT_TRUE(merged.has_value());
  EXPECT_EQ(merged->ToString(), "{devices=[2,2]<=[4]}");
  // Rows over {0,1}|{2,3} and columns over the same pairs cannot both hold.
  Tiling cols_same = Parse("{devices=[1,2,2]<=[4] last_tile_dim_replicate}", 2, 4);
  EXPECT_FALSE(MergeTilings(rows, cols_same).has_value());
}

TEST(SpmdTilingTest, SliceSufficesWhenEveryPieceLiesInsideTheHeldOne) {
  Tiling two = Parse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}", 2, 4);
  Tiling four = Parse("{devices=[4,1]<=[4]}", 2, 4);
  Tiling four_reversed = Parse("{devices=[4,1]3,2,1,0}", 2, 4);
  Tiling whole = Tiling::Replicated(2, 4);
  EXPECT_TRUE(SliceSuffices(two, four, {8, 6}));
  EXPECT_FALSE(SliceSuffices(two, four_reversed, {8, 6}));
  EXPECT_TRUE(SliceSuffices(whole, four_reversed, {7, 6}));
  EXPECT_FALSE(SliceSuffices(four, two, {8, 6}));
}

}  // namespace
}  // namespace xlens
