#include "compiler/hlo/sharding.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

HloSharding MustParse(std::string_view text) {
  auto parsed = HloSharding::Parse(text);
  EXPECT_TRUE(parsed.ok()) << parsed.status().message();
  return parsed.ok() ? *parsed : HloSharding();
}

// XLA's own printing reads back unchanged.
TEST(HloShardingTest, XlasTextPrintsBackUnchanged) {
  for (std::string_view text : {
           "{replicated}", "{manual}", "{unknown}", "{maximal device=1}", "{devices=[2,1]0,1}",
           "{devices=[4,1]<=[4]}", "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
           "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}",
           "{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}",
           "{devices=[2,2]0,2,1,3 last_tile_dims={manual}}",
           "{{replicated}, {devices=[2]0,1}}", "{{maximal device=0}, {manual}, {replicated}}", "{}",
           "{replicated metadata={op_name=\"a\"}}",
           "{devices=[2]0,1 metadata={{op_name=\"a\"}, {op_name=\"b\"}}}",
           "{replicated shard_as 1}", "{devices=[2]<=[2] shard_like 0}"}) {
    EXPECT_EQ(MustParse(text).ToString(), text);
  }
}

TEST(HloShardingTest, KindsAndTileAssignments) {
  HloSharding tiled = MustParse("{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_TRUE(tiled.IsTiled());
  EXPECT_TRUE(tiled.replicate_on_last_tile_dim());
  EXPECT_EQ(tiled.TiledDataRank(), 2);
  EXPECT_THAT(tiled.tile_assignment().devices(), ElementsAre(0, 4, 1, 5, 2, 6, 3, 7));
  EXPECT_EQ(MustParse("{maximal device=3}").device(), 3);
  HloSharding subgroups = MustParse("{devices=[2,1,2,2]<=[8] last_tile_dims={manual, replicated}}");
  EXPECT_EQ(subgroups.TiledDataRank(), 2);
  EXPECT_THAT(subgroups.subgroups(),
              ElementsAre(HloSharding::Subgroup::kManual, HloSharding::Subgroup::kReplicated));
  HloSharding tuple = MustParse("{{replicated}, {devices=[2]0,1}}");
  ASSERT_TRUE(tuple.IsTuple());
  EXPECT_TRUE(tuple.LeafSharding(1).IsTiled());
}

TEST(HloShardingTest, CanonicalizedAsXlasParserDoes) {
  // The replicated last dim holds every device: replicated.
  EXPECT_EQ(MustParse("{devices=[1,1,4]<=[4] last_tile_dim_replicate}").ToString(), "{replicated}");
  // A replicated last dim of one device says nothing.
  EXPECT_EQ(MustParse("{devices=[2,1,1]0,1 last_tile_dim_replicate}").ToString(),
            "{devices=[2,1]0,1}");
  // One replicated subgroup is last_tile_dim_replicate; size-1 subgroups go.
  EXPECT_EQ(MustParse("{devices=[2,2]<=[4] last_tile_dims={replicated}}").ToString(),
            "{devices=[2,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(MustParse("{devices=[4,1]<=[4] last_tile_dims={manual}}").ToString(),
            "{devices=[4]<=[4]}");
  // Nothing tiled, everything manual: manual.
  EXPECT_EQ(MustParse("{devices=[1,4]<=[4] last_tile_dims={manual}}").ToString(), "{manual}");
  // Equal whichever way the devices were written.
  EXPECT_EQ(MustParse("{devices=[2,2]<=[2,2]T(1,0)}"), MustParse("{devices=[2,2]0,2,1,3}"));
}

TEST(HloShardingTest, UnevenTilesFollowXlasCeilingRule) {
  HloSharding s = MustParse("{devices=[4,1]<=[4]}");
  // 7 rows over 4 devices: tiles of 2, the last one short.
  EXPECT_THAT(s.TileDims({7, 3}), ElementsAre(2, 3));
  auto last = s.DeviceExtent({7, 3}, 3);
  ASSERT_TRUE(last.has_value());
  EXPECT_THAT(last->offsets, ElementsAre(6, 0));
  EXPECT_THAT(last->limits, ElementsAre(7, 3));
  // 5 rows over 4 devices: tiles of 2; device 3's tile starts past the end and is empty.
  auto empty = s.DeviceExtent({5, 3}, 3);
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->offsets[0], empty->limits[0]);
  EXPECT_FALSE(s.DeviceExtent({5, 3}, 9).has_value());
  // Partial replication: devices 0 and 1 hold the same tile.
  HloSharding partial = MustParse("{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  EXPECT_EQ(partial.DeviceExtent({4, 2}, 0)->offsets, partial.DeviceExtent({4, 2}, 1)->offsets);
  EXPECT_THAT(partial.DeviceExtent({4, 2}, 2)->offsets, ElementsAre(2, 0));
  // Replicated: everything everywhere.
  EXPECT_THAT(HloSharding::Replicated().DeviceExtent({4, 2}, 5)->limits, ElementsAre(4, 2));
}

TEST(HloShardingTest, ValidateAgainstShapeAndDevices) {
  Shape matrix(PrimitiveType::F32, {8, 4});
  EXPECT_TRUE(MustParse("{devices=[2,2]<=[4]}").Validate(matrix, 4).ok());
  EXPECT_THAT(MustParse("{devices=[4]<=[4]}").Validate(matrix, 4).message(),
              HasSubstr("tiles 1 dims but the shape f32[8,4] has rank 2"));
  EXPECT_THAT(MustParse("{devices=[2,2]<=[4]}").Validate(matrix, 8).message(),
              HasSubstr("uses 4 devices but the module has 8"));
  EXPECT_THAT(MustParse("{devices=[2,1]0,5}").Validate(matrix, 4).message(),
              HasSubstr("names device 5"));
  EXPECT_THAT(MustParse("{maximal device=4}").Validate(matrix, 4).message(),
              HasSubstr("names device 4"));
  Shape pair = Shape::Tuple({Shape(PrimitiveType::F32, {}), matrix});
  EXPECT_TRUE(MustParse("{{replicated}, {devices=[2,1]0,1}}").Validate(pair, 2).ok());
  EXPECT_THAT(MustParse("{{replicated}}").Validate(pair, 2).message(),
              HasSubstr("has 1 elements but the shape"));
  EXPECT_THAT(MustParse("{{replicated}}").Validate(matrix, 2).message(),
              HasSubstr("not a tuple"));
  // The empty tuple has one sharding, as XLA counts it.
  EXPECT_TRUE(MustParse("{{replicated}}").Validate(Shape::Tuple({}), 2).ok());
  // A non-tuple sharding applies to every leaf.
  EXPECT_TRUE(MustParse("{replicated}").Validate(pair, 2).ok());
}

void ExpectError(std::string_view text, std::string_view expected, std::string_view where) {
  auto parsed = HloSharding::Parse(text, "s");
  ASSERT_FALSE(parsed.ok()) << text;
  EXPECT_THAT(parsed.status().message(), HasSubstr(std::string(expected))) << text;
  EXPECT_THAT(parsed.status().message(), HasSubstr(std::string(where))) << text;
}

TEST(HloShardingTest, MalformedTextIsOneErrorAtItsPosition) {
  ExpectError("{devices=[2,2]0,1,2}", "need 4 device ids", "s:1:");
  ExpectError("{devices=[2]0,0}", "device 0 appears twice", "s:1:15");
  ExpectError("{devices=[2,1]0,1,2}", "more device ids", "s:1:");
  ExpectError("{devices=[65536,65536]<=[4294967296]}", "more than", "s:1:10");
  ExpectError("{devices=[4]<=[2,2]T(0,2)}", "not a permutation", "s:1:");
  ExpectError("{devices=[4]<=[2,2]T(1,0}", "to close the iota transpose", "s:1:");
  ExpectError("{maximal}", "names its device", "s:1:2");
  ExpectError("{replicated device=1}", "belongs to a maximal", "s:1:1");
  ExpectError("{replicated manual}", "two kinds", "s:1:13");
  ExpectError("{replicated last_tile_dim_replicate}", "belong to a tiled", "s:1:13");
  ExpectError("{devices=[2]0,1 last_tile_dims={bogus}}", "subgroup kind", "s:1:");
  ExpectError("{devices=[2]0,1 last_tile_dims={manual, replicated}}", "2 subgroup dims",
              "s:1:17");
  ExpectError("{bogus}", "unknown sharding attribute 'bogus'", "s:1:2");
  ExpectError("{replicated", "not closed", "s:1:1");
  ExpectError("{}x", "expected the end", "s:1:3");
  ExpectError("{{replicated}, replicated}", "tuple element", "s:1:16");
  ExpectError("{{{replicated}}}", "holds no tuples", "s:1:");
  ExpectError("{devices=[2]0,1 devices=[2]0,1}", "twice", "s:1:");
  ExpectError("{maximal device=-1}", "negative", "s:1:17");
  ExpectError("replicated", "to open a sharding", "s:1:1");
}

// The module parser reads every sharding= as above and checks it against its instruction's shape
// and the header's num_partitions, naming the place; what it accepts prints back verbatim.
TEST(HloShardingTest, ModuleParserChecksShardingsWhereWritten) {
  auto module_with = [](std::string_view sharding, std::string_view header = "") {
    return fmt::format(R"(HloModule m{}

ENTRY %main (a: f32[8,4]) -> f32[8,4] {{
  %a = f32[8,4]{{1,0}} parameter(0), sharding={}
  ROOT %n = f32[8,4]{{1,0}} negate(%a)
}}
)", header, sharding);
  };
  auto ok = ParseHloModule(module_with("{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                                       ", num_partitions=4"));
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(*(*ok)->entry_computation()->parameter_instruction(0)->raw_attribute("sharding"),
            "{devices=[2,1,2]<=[4] last_tile_dim_replicate}");
  struct Bad { std::string_view sharding, header, message; };
  for (const Bad& bad : std::vector<Bad>{
           {"{devices=[2,2]0,1,2,2}", "", "<text>:4:65: device 2 appears twice"},
           {"{devices=[4]<=[4]}", "", "tiles 1 dims but the shape f32[8,4] has rank 2 on a"},
           {"{maximal device=5}", ", num_partitions=4", "names device 5 but the module has "
                                                         "num_partitions=4"},
           {"{devices=[2,2]<=[4]T(1,0)}", "", "iota transpose"},
           {"{{replicated}}", "", "not a tuple"}}) {
    auto parsed = ParseHloModule(module_with(bad.sharding, bad.header));
    ASSERT_FALSE(parsed.ok()) << bad.sharding;
    EXPECT_THAT(parsed.status().message(), HasSubstr(std::string(bad.message))) << bad.sharding;
  }
}

}  // namespace
}  // namespace xlens
