#include "compiler/passes/dce.h"

#include <gtest/gtest.h>

#include <fmt/format.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

TEST(DceTest, RemovesDeadChainsAndKeepsRootsParametersAndSideEffects) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  unused = f32[4] parameter(1)
  a = f32[4] negate(p)
  b = f32[4] exponential(a)
  side = f32[4] custom-call(p), custom_call_target="log_it", custom_call_has_side_effect=true
  ROOT r = f32[4] abs(p)
})");
  auto before = xlens::testing::CloneModule(*module);
  HloDce dce;
  auto changed = RunPassChecked(dce, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kNegate), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kExp), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kParameter), 2);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kCustomCall), 1);
  auto again = RunPassChecked(dce, *module);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
}

// What the call-inliner leaves behind a chain of nested calls: 2,000 computations, each called
// only by the dead one before it. All go, and the entry's callees stay.
TEST(DceTest, RemovesAWholeDeadChainOfComputations) {
  constexpr int kDepth = 2000;
  std::string text = "HloModule chain\nadd { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }\n";
  text += fmt::format("c{} {{ p = f32[] parameter(0) ROOT r = f32[] negate(p) }}\n", kDepth - 1);
  for (int i = kDepth - 2; i >= 0; --i) {
    text += fmt::format("c{} {{ p = f32[] parameter(0) ROOT r = f32[] call(p), to_apply=c{} }}\n", i, i + 1);
  }
  text += "ENTRY main { p = f32[4] parameter(0) z = f32[] constant(0) "
          "ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add }\n";
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  ASSERT_EQ(module->computation_count(), kDepth + 2);
  auto changed = HloDce().Run(*module);
  ASSERT_TRUE(changed.ok() && *changed);
  EXPECT_EQ(module->computation_count(), 2);  // the entry and its reducer
}

TEST(DceTest, RemovesComputationsNothingCalls) {
  auto module = ParseModuleOrDie(R"(HloModule m
add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }
unused { a = f32[] parameter(0) ROOT n = f32[] negate(a) }
ENTRY e {
  p = f32[4] parameter(0)
  z = f32[] constant(0)
  ROOT r = f32[] reduce(p, z), dimensions={0}, to_apply=add
})");
  auto before = xlens::testing::CloneModule(*module);
  HloDce dce;
  auto changed = RunPassChecked(dce, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_TRUE(*changed);
  EXPECT_EQ(module->computation_count(), 2);
  EXPECT_EQ(module->GetComputationWithName("unused"), nullptr);
  EXPECT_TRUE(SameResults(*before, *module));
}

}  // namespace
}  // namespace xlens
