#include "compiler/passes/sharding_propagation.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;

std::string ShardingOf(const HloModule& module, std::string_view name) {
  const HloInstruction* instr = module.entry_computation()->GetInstructionWithName(name);
  if (instr == nullptr) return "<no " + std::string(name) + ">";
  const std::string* s = instr->raw_attribute("sharding");
  return s == nullptr ? "<none>" : *s;
}

TEST(ShardingPropagationTest, DotMergesTheActivationsRowsWithTheWeightsColumns) {
  // x is cut by rows over 'data', w by columns over 'model': the product is cut both ways (XLA's
  // MergeSharding), and the broadcast constant beside it takes the product's tiling rather than
  // staying whole.
  auto module = ParseModuleOrDie(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[8,16] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}
  w = f32[16,32] parameter(1), sharding={devices=[1,2,2]<=[2,2]T(1,0) last_tile_dim_replicate}
  d = f32[8,32] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  z = f32[] constant(0)
  zb = f32[8,32] broadcast(z), dimensions={}
  ROOT r = f32[8,32] maximum(d, zb)
})");
  ShardingPropagation pass;
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(ShardingOf(*module, "d"), "{devices=[2,2]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "zb"), "{devices=[2,2]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "r"), "{devices=[2,2]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "z"), "{replicated}");
}

TEST(ShardingPropagationTest, SqueezesAndExpandsCarryTheTiledDim) {
  // A scan's step takes a slice [1,16,8] of the stacked batch and squeezes it: the batch's cut
  // follows it through the dims of size 1 both ways.
  auto module = ParseModuleOrDie(R"(HloModule m, num_partitions=4
ENTRY e {
  x = f32[1,16,8] parameter(0), sharding={devices=[1,4,1]<=[4]}
  s = f32[16,8] reshape(x)
  n = f32[16,8] negate(s)
  ROOT e = f32[16,1,8,1] reshape(n)
})");
  ShardingPropagation pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  EXPECT_EQ(ShardingOf(*module, "s"), "{devices=[4,1]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "e"), "{devices=[4,1,1,1]<=[4]}");
}

TEST(ShardingPropagationTest, ReduceTransposeAndReshapeCarryTheTiledDim) {
  auto module = ParseModuleOrDie(R"(HloModule m, num_partitions=4
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[8,6,4] parameter(0), sharding={devices=[1,4,1]<=[4]}
  t = f32[6,8,4] transpose(x), dimensions={1,0,2}
  r = f32[6,32] reshape(t)
  z = f32[] constant(0)
  s = f32[6] reduce(r, z), dimensions={1}, to_apply=add
  ROOT u = f32[8,4] reduce(x, z), dimensions={1}, to_apply=add
})");
  ShardingPropagation pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  EXPECT_EQ(ShardingOf(*module, "t"), "{devices=[4,1,1]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "r"), "{devices=[4,1]<=[4]}");
  EXPECT_EQ(ShardingOf(*module, "s"), "{devices=[4]<=[4]}");
  // Reducing the tiled dim leaves copies of partial results, whole on every device.
  EXPECT_EQ(ShardingOf(*module, "u"), "{replicated}");
}

TEST(ShardingPropagationTest, BackwardFromTheRootAndStatedShardingsStay) {
  auto module = ParseModuleOrDie(R"(HloModule m, num_partitions=2
ENTRY e {
  x = f32[4,6] parameter(0), sharding={replicated}
  n = f32[4,6] negate(x)
  c = f32[4,6] custom-call(n), custom_call_target="Sharding", sharding={devices=[1,2]<=[2]}
  ROOT e = f32[4,6] exponential(c), sharding={devices=[2,1]<=[2]}
})");
  ShardingPropagation pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  EXPECT_EQ(ShardingOf(*module, "x"), "{replicated}");
  EXPECT_EQ(ShardingOf(*module, "n"), "{devices=[1,2]<=[2]}");
  EXPECT_EQ(ShardingOf(*module, "c"), "{devices=[1,2]<=[2]}");
  EXPECT_EQ(ShardingOf(*module, "e"), "{devices=[2,1]<=[2]}");
}

TEST(ShardingPropagationTest, ManualCodeStaysManual) {
  auto module = ParseModuleOrDie(R"(HloModule m, num_partitions=2
ENTRY e {
  x = f32[4,6] parameter(0), sharding={devices=[2,1]<=[2]}
  l = f32[2,6] custom-call(x), custom_call_target="SPMDFullToShardShape", sharding={manual}
  c = f32[] constant(2)
  b = f32[2,6] broadcast(c), dimensions={}
  m = f32[2,6] multiply(l, b)
  ROOT g = f32[4,6] custom-call(m), custom_call_target="SPMDShardToFullShape", sharding={devices=[2,1]<=[2]}
})");
  ShardingPropagation pass;
  ASSERT_TRUE(RunPassChecked(pass, *module).ok());
  EXPECT_EQ(ShardingOf(*module, "m"), "{manual}");
  EXPECT_EQ(ShardingOf(*module, "b"), "{manual}");
}

TEST(ShardingPropagationTest, OnePartitionIsLeftAlone) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  x = f32[4] parameter(0)
  ROOT n = f32[4] negate(x)
})");
  ShardingPropagation pass;
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
  EXPECT_EQ(ShardingOf(*module, "n"), "<none>");
}

}  // namespace
}  // namespace xlens
