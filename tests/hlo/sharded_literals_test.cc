#include "compiler/hlo/sharded_literals.h"

#include <numeric>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

HloSharding S(std::string_view text) {
  auto parsed = HloSharding::Parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *parsed : HloSharding();
}

// An s32 array whose elements are 0, 1, 2, ... in row-major order.
Literal Iota(std::vector<int64_t> dims) {
  Literal lit(Shape(PrimitiveType::S32, std::move(dims)));
  auto data = lit.data<int32_t>();
  std::iota(data.begin(), data.end(), 0);
  return lit;
}

std::vector<int32_t> Values(const Literal& lit) {
  auto data = lit.data<int32_t>();
  return {data.begin(), data.end()};
}

std::vector<Literal> MustSplit(const Literal& global, std::string_view sharding, int64_t devices,
                               TilePadding pad = TilePadding::kPadToTileShape) {
  auto split = SplitLiteral(global, S(sharding), devices, pad);
  EXPECT_TRUE(split.ok()) << split.status().message();
  return split.ok() ? std::move(*split) : std::vector<Literal>{};
}

TEST(ShardedLiteralsTest, TiledSplitGivesEachDeviceItsTile) {
  Literal global = Iota({4, 4});
  // [2,2] tiles, devices in transposed order: device 1 holds the bottom-left tile.
  std::vector<Literal> pieces = MustSplit(global, "{devices=[2,2]<=[2,2]T(1,0)}", 4);
  ASSERT_EQ(pieces.size(), 4u);
  EXPECT_THAT(pieces[0].shape().dimensions(), ElementsAre(2, 2));
  EXPECT_THAT(Values(pieces[0]), ElementsAre(0, 1, 4, 5));
  EXPECT_THAT(Values(pieces[1]), ElementsAre(8, 9, 12, 13));
  EXPECT_THAT(Values(pieces[2]), ElementsAre(2, 3, 6, 7));
  auto back = AssembleLiteral(pieces, S("{devices=[2,2]<=[2,2]T(1,0)}"), global.shape());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(Values(*back), Values(global));
}

TEST(ShardedLiteralsTest, UnevenTilesArePaddedOrExact) {
  Literal global = Iota({5, 2});
  // 5 rows over 4 devices: tiles of 2 rows; device 2 has one row, device 3 none.
  std::vector<Literal> padded = MustSplit(global, "{devices=[4,1]<=[4]}", 4);
  EXPECT_THAT(padded[2].shape().dimensions(), ElementsAre(2, 2));
  EXPECT_THAT(Values(padded[2]), ElementsAre(8, 9, 0, 0));
  EXPECT_THAT(Values(padded[3]), ElementsAre(0, 0, 0, 0));
  std::vector<Literal> exact = MustSplit(global, "{devices=[4,1]<=[4]}", 4, TilePadding::kExact);
  EXPECT_THAT(exact[2].shape().dimensions(), ElementsAre(1, 2));
  EXPECT_THAT(exact[3].shape().dimensions(), ElementsAre(0, 2));
  for (const auto& pieces : {&padded, &exact}) {
    auto back = AssembleLiteral(*pieces, S("{devices=[4,1]<=[4]}"), global.shape());
    ASSERT_TRUE(back.ok()) << back.status().message();
    EXPECT_EQ(Values(*back), Values(global));
  }
}

TEST(ShardedLiteralsTest, PartialReplicationCopiesTilesAndChecksTheCopies) {
  Literal global = Iota({4, 3});
  const char* sharding = "{devices=[2,1,2]<=[4] last_tile_dim_replicate}";
  std::vector<Literal> pieces = MustSplit(global, sharding, 4);
  EXPECT_EQ(Values(pieces[0]), Values(pieces[1]));
  EXPECT_THAT(Values(pieces[3]), ElementsAre(6, 7, 8, 9, 10, 11));
  ASSERT_TRUE(AssembleLiteral(pieces, S(sharding), global.shape()).ok());
  pieces[3].data<int32_t>()[4] = 99;
  auto bad = AssembleLiteral(pieces, S(sharding), global.shape());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("devices 2 and 3 disagree on the value at offset [2,0]"));
}

TEST(ShardedLiteralsTest, ReplicatedAndMaximal) {
  Literal global = Iota({3});
  std::vector<Literal> copies = MustSplit(global, "{replicated}", 3);
  for (const Literal& c : copies) EXPECT_EQ(Values(c), Values(global));
  copies[2].data<int32_t>()[0] = 7;
  EXPECT_THAT(AssembleLiteral(copies, S("{replicated}"), global.shape()).status().message(),
              HasSubstr("devices 0 and 2 disagree"));
  // Maximal: only the owner's value counts.
  auto owner = AssembleLiteral(copies, S("{maximal device=2}"), global.shape());
  ASSERT_TRUE(owner.ok());
  EXPECT_THAT(Values(*owner), ElementsAre(7, 1, 2));
}

TEST(ShardedLiteralsTest, TuplesSplitLeafByLeaf) {
  Literal global = Literal::MakeTuple({Iota({2}), Literal::MakeTuple({Iota({4, 2})})});
  const char* sharding = "{{replicated}, {devices=[2,1]0,1}}";
  std::vector<Literal> pieces = MustSplit(global, sharding, 2);
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_THAT(Values(pieces[1].tuple_element(0)), ElementsAre(0, 1));
  EXPECT_THAT(Values(pieces[1].tuple_element(1).tuple_element(0)), ElementsAre(4, 5, 6, 7));
  auto back = AssembleLiteral(pieces, S(sharding), global.shape());
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(*back, global);
}

TEST(ShardedLiteralsTest, WhatCannotBeSplitSaysWhy) {
  Literal global = Iota({4, 2});
  EXPECT_THAT(SplitLiteral(global, S("{manual}"), 2).status().message(),
              HasSubstr("no global value"));
  EXPECT_THAT(SplitLiteral(global, S("{devices=[2,1,2]<=[4] last_tile_dims={manual}}"), 4)
                  .status().message(), HasSubstr("manual subgroup"));
  EXPECT_THAT(SplitLiteral(global, S("{devices=[2,1]0,1}"), 4).status().message(),
              HasSubstr("uses 2 devices but the module has 4"));
  EXPECT_THAT(SplitLiteral(global, S("{devices=[2]0,1}"), 2).status().message(),
              HasSubstr("rank 2"));
  std::vector<Literal> pieces = MustSplit(global, "{devices=[2,1]0,1}", 2);
  pieces[1] = Iota({3, 2});
  EXPECT_THAT(AssembleLiteral(pieces, S("{devices=[2,1]0,1}"), global.shape()).status().message(),
              HasSubstr("device 1's value has shape s32[3,2]; expected s32[2,2]"));
}

TEST(ShardedLiteralsTest, EntryShardingsComeFromTheModule) {
  auto module = ParseHloModule(R"(HloModule m, num_partitions=2
ENTRY %main (a: f32[4], b: f32[2]) -> (f32[4], f32[2]) {
  %a = f32[4]{0} parameter(0), sharding={devices=[2]<=[2]}
  %b = f32[2]{0} parameter(1)
  ROOT %t = (f32[4]{0}, f32[2]{0}) tuple(%a, %b), sharding={{devices=[2]<=[2]}, {replicated}}
}
)");
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto params = EntryParameterShardings(**module);
  ASSERT_TRUE(params.ok()) << params.status().message();
  ASSERT_EQ(params->size(), 2u);
  EXPECT_EQ((*params)[0].ToString(), "{devices=[2]<=[2]}");
  EXPECT_TRUE((*params)[1].IsReplicated());
  auto root = EntryRootSharding(**module);
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE(root->IsTuple());
}

}  // namespace
}  // namespace xlens
