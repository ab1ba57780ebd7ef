#include "compiler/passes/reduce_precision_insertion.h"

#include <cmath>

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;

constexpr std::string_view kModule = R"(HloModule m
ENTRY e {
  p = f32[4] parameter(0)
  q = s32[4] parameter(1)
  e = f32[4] exponential(p), metadata={op_name="exp"}
  n = s32[4] negate(q)
  a = f32[4] add(e, p)
  ROOT t = (f32[4], s32[4], f32[4]) tuple(a, n, e)
})";

TEST(ReducePrecisionInsertionTest, UnconfiguredDoesNothing) {
  auto module = ParseModuleOrDie(kModule);
  ASSERT_NE(module, nullptr);
  ReducePrecisionInsertion pass;
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok());
  EXPECT_FALSE(*changed);
}

TEST(ReducePrecisionInsertionTest, RoundsSelectedFloatOutputsOnce) {
  auto module = ParseModuleOrDie(kModule);
  ASSERT_NE(module, nullptr);
  ReducePrecisionInsertion pass(5, 10, std::set<HloOpcode>{HloOpcode::kExp, HloOpcode::kNegate,
                                                           HloOpcode::kAdd});
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok()) << changed.status().message();
  EXPECT_TRUE(*changed);
  // exp and add are f32; the s32 negate is not rounded.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kReducePrecision), 2);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kReducePrecision);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kNegate);
  EXPECT_EQ(root->operand(2)->opcode(), HloOpcode::kReducePrecision);
  EXPECT_EQ(root->operand(2)->metadata.op_name, "exp");
  EXPECT_EQ(root->operand(2)->mantissa_bits_attr, 10);
  // The add reads the rounded exp too.
  EXPECT_EQ(root->operand(0)->operand(0)->operand(0), root->operand(2));
  auto again = RunPassChecked(pass, *module);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(*again);
  EXPECT_NE(CloneModule(*module), nullptr);
}

TEST(ReducePrecisionInsertionTest, ResultsAreRoundedToTheNarrowType) {
  auto module = ParseModuleOrDie(R"(HloModule m
ENTRY e {
  p = f32[] parameter(0)
  ROOT n = f32[] negate(p)
})");
  ASSERT_NE(module, nullptr);
  ReducePrecisionInsertion pass(8, 7, [](HloOpcode op) { return op == HloOpcode::kNegate; });
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok() && *changed);
  // 1 + 2^-10 is not a bf16 value (7 mantissa bits): it rounds to 1.
  Literal input = Literal::CreateR0<float>(PrimitiveType::F32, 1.0f + std::ldexp(1.0f, -10));
  auto result = EvaluateModule(*module, std::span<const Literal>(&input, 1));
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(0), -1.0);
}

}  // namespace
}  // namespace xlens
