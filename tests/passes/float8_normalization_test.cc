#include "compiler/passes/float8_normalization.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;

std::unique_ptr<HloModule> Normalize(std::string_view text, bool expect_change = true) {
  Float8Normalization pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

const HloInstruction* Only(const HloModule& module, HloOpcode opcode) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == opcode) return i;
  }
  return nullptr;
}

TEST(Float8NormalizationTest, MixedFloat8DotRunsOverF32AndRoundsOnce) {
  auto module = Normalize(R"(HloModule m
ENTRY e {
  a = f8e4m3fn[4,16] parameter(0)
  b = f8e5m2[16,8] parameter(1)
  ROOT d = bf16[4,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* dot = Only(*module, HloOpcode::kDot);
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->shape().element_type(), PrimitiveType::F32);
  EXPECT_EQ(dot->operand(0)->shape().element_type(), PrimitiveType::F32);
  EXPECT_EQ(dot->operand(1)->shape().element_type(), PrimitiveType::F32);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->opcode(), HloOpcode::kConvert);
  EXPECT_EQ(root->shape().element_type(), PrimitiveType::BF16);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kConvert), 3);
}

TEST(Float8NormalizationTest, ConvolutionWithF32ResultNeedsNoConvertAfter) {
  auto module = Normalize(R"(HloModule m
ENTRY e {
  img = f8e4m3fn[1,6,6,2] parameter(0)
  k = f32[3,3,2,3] parameter(1)
  ROOT c = f32[1,6,6,3] convolution(img, k), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(root->opcode(), HloOpcode::kConvolution);
  EXPECT_EQ(root->operand(0)->opcode(), HloOpcode::kConvert);
  EXPECT_EQ(root->operand(1)->opcode(), HloOpcode::kParameter);
}

TEST(Float8NormalizationTest, OtherTypesStay) {
  Normalize(R"(HloModule m
ENTRY e {
  a = bf16[4,16] parameter(0)
  b = bf16[16,8] parameter(1)
  d = bf16[4,8] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  x = f8e4m3fn[4] parameter(2)
  y = f8e4m3fn[4] add(x, x)
  ROOT t = (bf16[4,8], f8e4m3fn[4]) tuple(d, y)
})", /*expect_change=*/false);
}

}  // namespace
}  // namespace xlens
