#include "compiler/hlo/shardy_shardings.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

ShardyMeshes Meshes(std::string_view text) {
  auto meshes = ParseShardyMeshes(text);
  EXPECT_TRUE(meshes.ok()) << meshes.status().message();
  return meshes.ok() ? *meshes : ShardyMeshes();
}

std::string Convert(std::string_view sharding, const ShardyMeshes& meshes) {
  auto converted = ShardingFromShardy(sharding, meshes);
  if (!converted.ok()) return "error: " + converted.status().message();
  return converted->ToString();
}

// The pairs below are what XLA itself turns these Shardy shardings into (jaxlib 0.10.2's
// before_optimizations modules carry both).
TEST(ShardyShardingsTest, ConvertsAsXlaDoes) {
  ShardyMeshes grid = Meshes(R"({mesh = #sdy.mesh<["data"=2, "model"=4]>})");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{"data"}, {}]>)", grid),
            "{devices=[2,1,4]<=[8] last_tile_dim_replicate}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{}, {"model"}]>)", grid),
            "{devices=[1,4,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{"model"}, {}]>)", grid),
            "{devices=[4,1,2]<=[2,4]T(1,0) last_tile_dim_replicate}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{"data"}, {"model"}]>)", grid),
            "{devices=[2,4]<=[8]}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{"model", "data"}]>)", grid),
            "{devices=[8]<=[2,4]T(1,0)}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{}, {}]>)", grid), "{replicated}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{?}, {"data", ?}p1], replicated={"model"}>)", grid),
            "{devices=[1,2,4]<=[8] last_tile_dim_replicate}");
  // A sub-axis: the first half of "model" (size 2 after pre-size 1).
  EXPECT_EQ(Convert(R"(#sdy.sharding<@mesh, [{"model":(1)2}, {}]>)", grid),
            "{devices=[2,1,4]<=[2,2,2]T(1,0,2) last_tile_dim_replicate}");
  // Inline meshes, device ids, maximal meshes.
  EXPECT_EQ(Convert(R"(#sdy.sharding<mesh<["a"=2], device_ids=[1,0]>, [{"a"}]>)", grid),
            "{devices=[2]1,0}");
  EXPECT_EQ(Convert(R"(#sdy.sharding<mesh<[], device_ids=[3]>, []>)", grid), "{maximal device=3}");
}

TEST(ShardyShardingsTest, PerValueShardings) {
  ShardyMeshes line = Meshes(R"({mesh = #sdy.mesh<["x"=4]>})");
  auto values = ShardingsFromShardyPerValue(
      R"(#sdy.sharding_per_value<[<@mesh, [{"x"}, {}]>, <@mesh, []>]>)", line);
  ASSERT_TRUE(values.ok()) << values.status().message();
  ASSERT_EQ(values->size(), 2u);
  EXPECT_EQ((*values)[0].ToString(), "{devices=[4,1]<=[4]}");
  EXPECT_EQ((*values)[1].ToString(), "{replicated}");
}

TEST(ShardyShardingsTest, ReadFromAModuleAsJaxWritesIt) {
  auto module = ParseHloModule(R"(HloModule m, num_partitions=4, frontend_attributes={xla.sdy.meshes={mesh = #sdy.mesh<["x"=4]>}}
ENTRY %main (a: f32[8,2]) -> f32[8,2] {
  %a = f32[8,2]{1,0} parameter(0), sharding={devices=[4,1]<=[4]}, frontend_attributes={xla.sdy.sharding="#sdy.sharding<@mesh, [{\"x\"}, {}]>"}
  ROOT %r = f32[8,2]{1,0} custom-call(%a), custom_call_target="xla.sdy.FuncResultSharding", custom_call_has_side_effect=true, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@mesh, [{}, {}]>]>"}
}
)");
  ASSERT_TRUE(module.ok()) << module.status().message();
  auto meshes = ModuleShardyMeshes(**module);
  ASSERT_TRUE(meshes.ok()) << meshes.status().message();
  const HloComputation* entry = (*module)->entry_computation();
  auto param = InstructionShardySharding(*entry->parameter_instruction(0), *meshes);
  ASSERT_TRUE(param.ok()) << param.status().message();
  ASSERT_EQ(param->size(), 1u);
  EXPECT_EQ((*param)[0].ToString(), *entry->parameter_instruction(0)->raw_attribute("sharding"));
  auto root = InstructionShardySharding(*entry->root_instruction(), *meshes);
  ASSERT_TRUE(root.ok());
  EXPECT_TRUE((*root)[0].IsReplicated());
}

TEST(ShardyShardingsTest, MalformedAnnotationsSayWhere) {
  ShardyMeshes line = Meshes(R"({mesh = #sdy.mesh<["x"=4]>})");
  EXPECT_THAT(Convert(R"(#sdy.sharding<@other, [{"x"}]>)", line), HasSubstr("no mesh named @other"));
  EXPECT_THAT(Convert(R"(#sdy.sharding<@mesh, [{"y"}]>)", line), HasSubstr("no axis \"y\""));
  EXPECT_THAT(Convert(R"(#sdy.sharding<@mesh, [{"x"}, {"x"}]>)", line),
              HasSubstr("shards two dimensions"));
  EXPECT_THAT(Convert(R"(#sdy.sharding<@mesh, [{"x":(3)2}]>)", line), HasSubstr("does not divide"));
  EXPECT_THAT(Convert(R"(#sdy.sharding<@mesh, [{"x"})", line), HasSubstr("xla.sdy.sharding:1:"));
  EXPECT_THAT(ParseShardyMeshes(R"({mesh = #sdy.mesh<["x"=0]>})").status().message(),
              HasSubstr("has size 0"));
  EXPECT_THAT(ParseShardyMeshes(R"({m = #sdy.mesh<["x"=2], device_ids=[0]>})").status().message(),
              HasSubstr("device_ids lists 1"));
  EXPECT_THAT(ParseShardyMeshes(R"({m = #sdy.mesh<["x"=65536, "y"=65536]>})").status().message(),
              HasSubstr("more than"));
}

TEST(ShardyShardingsTest, NamesFromTheTextAreEscapedInMessages) {
  // Axis and mesh names of raw bytes (invalid UTF-8, a terminal escape) reach a message escaped.
  ShardyMeshes line = Meshes(R"({mesh = #sdy.mesh<["x"=4]>})");
  std::string axis = Convert("#sdy.sharding<@mesh, [{\"\x97\x9e\x1b[2J\"}]>", line);
  EXPECT_THAT(axis, HasSubstr("no axis \"\\x97\\x9e\\x1b[2J\""));
  std::string mesh = Convert("#sdy.sharding<@m\x1b, [{\"x\"}]>", line);
  EXPECT_EQ(mesh.find('\x1b'), std::string::npos) << mesh;
  std::string twice = ParseShardyMeshes("{m = #sdy.mesh<[\"\x07\"=2, \"\x07\"=2]>}").status().message();
  EXPECT_THAT(twice, HasSubstr("\"\\x07\" is named twice"));
  for (const std::string& m : {axis, mesh, twice}) {
    EXPECT_EQ(m.find('\x97'), std::string::npos) << m;
    EXPECT_EQ(m.find('\x07'), std::string::npos) << m;
  }
}

}  // namespace
}  // namespace xlens
