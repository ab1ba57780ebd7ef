#include "compiler/passes/conv_canonicalization.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CloneModule;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;
using xlens::testing::SameResults;

std::unique_ptr<HloModule> Canonicalize(std::string_view text, bool expect_change = true) {
  ConvCanonicalization pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

const HloInstruction* OnlyConv(const HloModule& module) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kConvolution) return i;
  }
  return nullptr;
}

std::vector<int64_t> Permutation(const HloInstruction* transpose) {
  EXPECT_EQ(transpose->opcode(), HloOpcode::kTranspose) << transpose->ToString();
  if (transpose->opcode() != HloOpcode::kTranspose) return {};
  return transpose->dimensions();
}

TEST(ConvCanonicalizationTest, CanonicalConvolutionsStay) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,6,6,3] parameter(0)
  k = f32[3,3,3,4] parameter(1)
  x = f32[2,9,5] parameter(2)
  w = f32[2,5,7] parameter(3)
  c2 = f32[2,4,4,4] convolution(a, k), window={size=3x3}, dim_labels=b01f_01io->b01f
  c1 = f32[2,8,7] convolution(x, w), window={size=2}, dim_labels=b0f_0io->b0f
  ROOT t = (f32[2,4,4,4], f32[2,8,7]) tuple(c2, c1)
})", /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 0);
}

TEST(ConvCanonicalizationTest, NchwBecomesNhwcWithTransposesAroundIt) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,3,6,5] parameter(0)
  k = f32[4,3,3,2] parameter(1)
  ROOT c = f32[2,4,4,4] convolution(a, k), window={size=3x2}, dim_labels=bf01_oi01->bf01, operand_precision={highest,highest}, metadata={op_name="conv2d"}
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->convolution_dimension_numbers->ToString(), "b01f_01io->b01f");
  EXPECT_EQ(Permutation(conv->operand(0)), (std::vector<int64_t>{0, 2, 3, 1}));
  EXPECT_EQ(Permutation(conv->operand(1)), (std::vector<int64_t>{2, 3, 1, 0}));
  EXPECT_EQ(conv->operand(0)->shape().dimensions(), (std::vector<int64_t>{2, 6, 5, 3}));
  EXPECT_EQ(conv->operand(1)->shape().dimensions(), (std::vector<int64_t>{3, 2, 3, 4}));
  EXPECT_EQ(conv->shape().dimensions(), (std::vector<int64_t>{2, 4, 4, 4}));
  const HloInstruction* root = module->entry_computation()->root_instruction();
  EXPECT_EQ(Permutation(root), (std::vector<int64_t>{0, 3, 1, 2}));
  EXPECT_EQ(root->operand(0), conv);
  ASSERT_NE(conv->raw_attribute("operand_precision"), nullptr);
  EXPECT_EQ(*conv->raw_attribute("operand_precision"), "{highest,highest}");
  EXPECT_EQ(conv->metadata.op_name, "conv2d");
  EXPECT_EQ(root->metadata.op_name, "conv2d");
  EXPECT_EQ(conv->operand(0)->metadata.op_name, "conv2d");
}

TEST(ConvCanonicalizationTest, OddLabelsWithStridePaddingAndDilation) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[3,7,6,2] parameter(0)
  k = f32[3,2,2,5] parameter(1)
  ROOT c = f32[4,11,2,5] convolution(a, k), window={size=2x2 stride=2x1 pad=1_2x0_1 lhs_dilate=1x2 rhs_dilate=2x1}, dim_labels=f01b_i01o->01bf
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->convolution_dimension_numbers->ToString(), "b01f_01io->b01f");
  EXPECT_EQ(Permutation(conv->operand(0)), (std::vector<int64_t>{3, 1, 2, 0}));
  EXPECT_EQ(Permutation(conv->operand(1)), (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(conv->shape().dimensions(), (std::vector<int64_t>{2, 4, 11, 5}));
  EXPECT_EQ(Permutation(module->entry_computation()->root_instruction()),
            (std::vector<int64_t>{1, 2, 0, 3}));
  EXPECT_EQ(conv->window->ToString(),
            "size=2x2 stride=2x1 pad=1_2x0_1 lhs_dilate=1x2 rhs_dilate=2x1");
}

TEST(ConvCanonicalizationTest, OnlyTheNonCanonicalSideGetsATranspose) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,5,5,3] parameter(0)
  k = f32[2,2,3,4] parameter(1)
  ROOT c = f32[4,4,4,2] convolution(a, k), window={size=2x2}, dim_labels=b01f_01io->f01b
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(conv->operand(1)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 1);
  EXPECT_EQ(Permutation(module->entry_computation()->root_instruction()),
            (std::vector<int64_t>{3, 1, 2, 0}));
}

TEST(ConvCanonicalizationTest, ThreeSpatialDimensions) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,3,5,4,6] parameter(0)
  k = f32[2,2,3,3,4] parameter(1)
  ROOT c = f32[2,4,2,2,4] convolution(a, k), window={size=3x4x2 pad=1_1x0_0x0_0 stride=1x2x1}, dim_labels=bf201_o20i1->f0b12
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->convolution_dimension_numbers->ToString(), "b012f_012io->b012f");
  EXPECT_EQ(Permutation(conv->operand(0)), (std::vector<int64_t>{0, 3, 4, 2, 1}));
  EXPECT_EQ(Permutation(conv->operand(1)), (std::vector<int64_t>{2, 4, 1, 3, 0}));
}

TEST(ConvCanonicalizationTest, FeatureGroups) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,6,5,5] parameter(0)
  k = f32[9,2,3,3] parameter(1)
  ROOT c = f32[2,9,3,3] convolution(a, k), window={size=3x3}, dim_labels=bf01_oi01->bf01, feature_group_count=3
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->feature_group_count(), 3);
  EXPECT_EQ(conv->operand(1)->shape().dimensions(), (std::vector<int64_t>{3, 3, 2, 9}));
}

TEST(ConvCanonicalizationTest, BatchGroupsAndIntegerTypes) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = s8[4,3,5,2] parameter(0)
  k = s8[2,3,2,6] parameter(1)
  ROOT c = s32[6,2,2,3] convolution(a, k), window={size=2x3}, dim_labels=b01f_01io->fb01, batch_group_count=2
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* conv = OnlyConv(*module);
  ASSERT_NE(conv, nullptr);
  EXPECT_EQ(conv->batch_group_count(), 2);
  EXPECT_EQ(conv->shape().element_type(), PrimitiveType::S32);
  EXPECT_EQ(conv->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(conv->shape().dimensions(), (std::vector<int64_t>{2, 2, 3, 6}));
}

TEST(ConvCanonicalizationTest, ConvolutionsInCalledComputationsAndWithLayouts) {
  auto module = Canonicalize(R"(HloModule m
body {
  a = f32[2,3,5]{2,1,0} parameter(0)
  k = f32[4,3,2]{2,1,0} parameter(1)
  ROOT c = f32[2,4,4]{2,1,0} convolution(a, k), window={size=2}, dim_labels=bf0_oi0->bf0
}
ENTRY e {
  a = f32[2,3,5]{2,1,0} parameter(0)
  k = f32[4,3,2]{2,1,0} parameter(1)
  ROOT r = f32[2,4,4]{2,1,0} call(a, k), to_apply=body
})");
  ASSERT_NE(module, nullptr);
  const HloComputation* body = module->GetComputationWithName("body");
  ASSERT_NE(body, nullptr);
  const HloInstruction* root = body->root_instruction();
  EXPECT_EQ(Permutation(root), (std::vector<int64_t>{0, 2, 1}));
  EXPECT_TRUE(root->shape().has_layout());
  EXPECT_EQ(root->operand(0)->convolution_dimension_numbers->ToString(), "b0f_0io->b0f");
}

// The dimension orders of the non-canonical convolutions in the corpus, at shapes the evaluator
// runs quickly.
TEST(ConvCanonicalizationTest, CorpusDimensionOrdersAtSmallShapes) {
  auto module = Canonicalize(R"(HloModule m
ENTRY e {
  a = f32[2,5,5,3] parameter(0)
  k = f32[2,2,4,3] parameter(1)
  x = f32[4,4,2,3] parameter(2)
  w = f32[5,3,3,3] parameter(3)
  y = f32[4,3,2,5] parameter(4)
  v = f32[2,6,2,3] parameter(5)
  oi = f32[2,4,4,4] convolution(a, k), window={size=2x2}, dim_labels=b01f_01oi->b01f
  back = f32[5,6,6,2] convolution(x, w), window={size=3x3 pad=2_2x2_2}, dim_labels=01bf_o01i->f01b
  dilated = f32[2,3,6,3] convolution(y, v), window={size=2x3 stride=3x1 lhs_dilate=2x1}, dim_labels=0bf1_0oi1->0bf1
  ROOT t = (f32[2,4,4,4], f32[5,6,6,2], f32[2,3,6,3]) tuple(oi, back, dilated)
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  const HloInstruction* oi = root->operand(0);
  ASSERT_EQ(oi->opcode(), HloOpcode::kConvolution);
  EXPECT_EQ(oi->convolution_dimension_numbers->ToString(), "b01f_01io->b01f");
  EXPECT_EQ(oi->operand(0)->opcode(), HloOpcode::kParameter);
  EXPECT_EQ(Permutation(oi->operand(1)), (std::vector<int64_t>{0, 1, 3, 2}));
  EXPECT_EQ(Permutation(root->operand(1)), (std::vector<int64_t>{3, 1, 2, 0}));
  EXPECT_EQ(Permutation(root->operand(2)), (std::vector<int64_t>{1, 0, 3, 2}));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 7);
}

// The full-size corpus modules with non-canonical convolutions are too large to evaluate here;
// the rewrite must still verify and leave only canonical convolutions.
TEST(ConvCanonicalizationTest, LargeCorpusConvolutionsBecomeCanonical) {
  const std::string dir = std::string(XLENS_SHARED_DIR) + "/corpus/hlo/";
  if (!std::filesystem::exists(dir)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  for (const char* name : {"conv_nhwc_layout3021_colon_name", "conv_backward_input_reverse",
                           "conv_lhs_dilate_strided"}) {
    SCOPED_TRACE(name);
    std::ifstream file(dir + name + ".hlo");
    ASSERT_TRUE(file) << "missing corpus module";
    std::stringstream text;
    text << file.rdbuf();
    auto module = ParseModuleOrDie(text.str());
    ASSERT_NE(module, nullptr);
    const Shape root_shape = module->entry_computation()->root_instruction()->shape();
    ConvCanonicalization pass;
    auto changed = RunPassChecked(pass, *module);
    ASSERT_TRUE(changed.ok()) << changed.status().message();
    EXPECT_TRUE(*changed);
    const HloInstruction* conv = OnlyConv(*module);
    ASSERT_NE(conv, nullptr);
    EXPECT_EQ(conv->convolution_dimension_numbers->ToString(), "b01f_01io->b01f");
    EXPECT_EQ(module->entry_computation()->root_instruction()->shape(), root_shape);
  }
}

TEST(ConvCanonicalizationTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus(
          [] { return std::make_unique<ConvCanonicalization>(); }, &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "conv-canonicalization changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
