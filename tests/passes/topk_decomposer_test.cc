#include "compiler/passes/topk_decomposer.h"

#include <cmath>
#include <cstdio>
#include <iostream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "corpus_pass_check.h"
#include "pass_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using xlens::testing::CountOpcode;
using xlens::testing::ParseModuleOrDie;
using xlens::testing::RunPassChecked;

// Ties, signed zeros, infinities and a NaN: the total order puts NaN above everything and -0
// below +0, and the stable sort keeps equal values in index order.
constexpr const char* kTopK = R"(HloModule m
ENTRY e {
  x = f32[2,5] constant({{1, 3, 3, nan, -0}, {0, -0, 2, 2, -inf}})
  ROOT t = (f32[2,3], s32[2,3]) topk(x), k=3, largest=%s
})";

std::unique_ptr<HloModule> Decomposed(const char* largest) {
  char text[512];
  std::snprintf(text, sizeof(text), kTopK, largest);
  auto module = ParseModuleOrDie(text);
  if (module == nullptr) return nullptr;
  TopkDecomposer pass;
  auto changed = RunPassChecked(pass, *module);
  EXPECT_TRUE(changed.ok() && *changed) << (changed.ok() ? "no change" : changed.status().message());
  auto again = RunPassChecked(pass, *module);
  EXPECT_TRUE(again.ok() && !*again);
  return module;
}

std::vector<float> Floats(const Literal& literal) {
  auto d = literal.data<float>();
  return {d.begin(), d.end()};
}

std::vector<int32_t> Ints(const Literal& literal) {
  auto d = literal.data<int32_t>();
  return {d.begin(), d.end()};
}

TEST(TopkDecomposerTest, BecomesAStableSortOfValuesAndIndicesThenSlices) {
  auto module = Decomposed("true");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTopK), 0);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSlice), 2);
  const HloInstruction* sort = nullptr;
  for (const HloInstruction* i : module->entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kSort) sort = i;
  }
  ASSERT_NE(sort, nullptr);
  EXPECT_TRUE(sort->is_stable());
  EXPECT_EQ(sort->dimensions(), (std::vector<int64_t>{1}));
  EXPECT_EQ(sort->operand(1)->opcode(), HloOpcode::kIota);
  EXPECT_EQ(sort->operand(1)->shape().element_type(), PrimitiveType::S32);
  const HloInstruction* compare = sort->to_apply()->root_instruction();
  EXPECT_EQ(sort->to_apply()->num_parameters(), 4);
  EXPECT_EQ(compare->comparison_direction, ComparisonDirection::kGt);
  EXPECT_EQ(compare->comparison_type, ComparisonType::kFloatTotalOrder);
  EXPECT_EQ(compare->operand(0)->parameter_number(), 0);
  EXPECT_EQ(compare->operand(1)->parameter_number(), 1);
}

TEST(TopkDecomposerTest, LargestComesFirstInTheTotalOrderAndTiesKeepTheLowerIndex) {
  auto module = Decomposed("true");
  ASSERT_NE(module, nullptr);
  auto result = EvaluateModule(*module, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::vector<float> values = Floats(result->tuple_element(0));
  EXPECT_TRUE(std::isnan(values[0]));
  EXPECT_THAT(std::vector<float>(values.begin() + 1, values.end()), ElementsAre(3, 3, 2, 2, 0));
  EXPECT_FALSE(std::signbit(values[5]));  // +0 (index 0) above -0 (index 1)
  EXPECT_THAT(Ints(result->tuple_element(1)), ElementsAre(3, 1, 2, 2, 3, 0));
}

TEST(TopkDecomposerTest, SmallestComesFirstWithLargestFalse) {
  auto module = Decomposed("false");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(module->entry_computation()->root_instruction()->operand(0)->operand(0)->operand(0)
                ->to_apply()->root_instruction()->comparison_direction,
            ComparisonDirection::kLt);
  auto result = EvaluateModule(*module, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  std::vector<float> values = Floats(result->tuple_element(0));
  EXPECT_THAT(values, ElementsAre(0, 1, 3, -INFINITY, 0, 0));
  EXPECT_TRUE(std::signbit(values[0]));
  EXPECT_TRUE(std::signbit(values[4]));
  EXPECT_THAT(Ints(result->tuple_element(1)), ElementsAre(4, 0, 1, 4, 1, 0));
}

TEST(TopkDecomposerTest, IntegersAndBatchesComputeWhatTheEvaluatorsTopkDoes) {
  // The evaluator's own topk is the oracle where it has one.
  const char* text = R"(HloModule m
ENTRY e {
  x = s32[3,2,9] parameter(0)
  y = f32[4,6]{0,1} parameter(1)
  a = (s32[3,2,4], s32[3,2,4]) topk(x), k=4, largest=true
  b = (f32[4,1], s32[4,1]) topk(y), k=1, largest=false
  ROOT t = ((s32[3,2,4], s32[3,2,4]), (f32[4,1], s32[4,1])) tuple(a, b)
})";
  auto module = ParseModuleOrDie(text);
  ASSERT_NE(module, nullptr);
  auto before = xlens::testing::CloneModule(*module);
  TopkDecomposer pass;
  auto changed = RunPassChecked(pass, *module);
  ASSERT_TRUE(changed.ok() && *changed);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSort), 2);
  std::vector<Literal> args;
  args.push_back(Literal(Shape(PrimitiveType::S32, {3, 2, 9})));
  args.push_back(Literal(Shape(PrimitiveType::F32, {4, 6})));
  if (!EvaluateModule(*before, args).ok()) GTEST_SKIP() << "the evaluator has no topk";
  EXPECT_TRUE(xlens::testing::SameResults(*before, *module, 3, ErrorSpec{0, 0}));
}

TEST(TopkDecomposerTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<TopkDecomposer>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "topk-decomposer changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
