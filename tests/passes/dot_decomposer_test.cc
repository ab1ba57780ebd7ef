#include "compiler/passes/dot_decomposer.h"

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

std::unique_ptr<HloModule> Decompose(std::string_view text, bool expect_change = true) {
  DotDecomposer pass;
  return xlens::testing::RunPassOnText(pass, text, expect_change);
}

const HloInstruction* OnlyDot(const HloModule& module) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->opcode() == HloOpcode::kDot) return i;
  }
  return nullptr;
}

TEST(DotDecomposerTest, CanonicalDotsStay) {
  Decompose(R"(HloModule m
ENTRY e {
  a = f32[2,3,4] parameter(0)
  b = f32[2,4,5] parameter(1)
  c = f32[3,4] parameter(2)
  v = f32[4] parameter(3)
  bmm = f32[2,3,5] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  mv = f32[3] dot(c, v), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = (f32[2,3,5], f32[3]) tuple(bmm, mv)
})", /*expect_change=*/false);
}

TEST(DotDecomposerTest, TransposesBatchAndContractingIntoPlace) {
  auto module = Decompose(R"(HloModule m
ENTRY e {
  a = f32[4,2,3] parameter(0)
  b = f32[2,5,4] parameter(1)
  ROOT d = f32[2,3,5] dot(a, b), lhs_batch_dims={1}, lhs_contracting_dims={0}, rhs_batch_dims={0}, rhs_contracting_dims={2}, metadata={op_name="einsum"}
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* dot = OnlyDot(*module);
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->operand(0)->shape().dimensions(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(dot->operand(1)->shape().dimensions(), (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(dot->dot_dimension_numbers->lhs_contracting_dimensions, (std::vector<int64_t>{2}));
  EXPECT_EQ(dot->dot_dimension_numbers->rhs_contracting_dimensions, (std::vector<int64_t>{1}));
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 2);
  EXPECT_EQ(dot->operand(0)->metadata.op_name, "einsum");
}

TEST(DotDecomposerTest, FlattensSeveralContractingAndFreeDimensions) {
  auto module = Decompose(R"(HloModule m
ENTRY e {
  a = f32[2,3,4,5] parameter(0)
  b = f32[3,6,5,7] parameter(1)
  ROOT d = f32[2,4,6,7] dot(a, b), lhs_contracting_dims={1,3}, rhs_contracting_dims={0,2}
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* dot = OnlyDot(*module);
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->operand(0)->shape().dimensions(), (std::vector<int64_t>{8, 15}));
  EXPECT_EQ(dot->operand(1)->shape().dimensions(), (std::vector<int64_t>{15, 42}));
  EXPECT_EQ(dot->shape().dimensions(), (std::vector<int64_t>{8, 42}));
  EXPECT_EQ(module->entry_computation()->root_instruction()->opcode(), HloOpcode::kReshape);
}

TEST(DotDecomposerTest, OuterProductAndIntegerTypes) {
  auto module = Decompose(R"(HloModule m
ENTRY e {
  a = s8[3] parameter(0)
  b = s8[4] parameter(1)
  ROOT d = s32[3,4] dot(a, b), lhs_contracting_dims={}, rhs_contracting_dims={}
})");
  ASSERT_NE(module, nullptr);
  const HloInstruction* dot = OnlyDot(*module);
  ASSERT_NE(dot, nullptr);
  EXPECT_EQ(dot->operand(0)->shape().dimensions(), (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(dot->operand(1)->shape().dimensions(), (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(dot->shape().element_type(), PrimitiveType::S32);
}

TEST(DotDecomposerTest, CorpusModulesComputeTheSame) {
  xlens::testing::CorpusPassSummary summary;
  if (!xlens::testing::CheckPassOverCorpus([] { return std::make_unique<DotDecomposer>(); },
                                           &summary)) {
    GTEST_SKIP() << "the shared corpus (" << XLENS_SHARED_DIR << ") is absent";
  }
  EXPECT_GT(summary.checked, 30);
  std::string names;
  for (const std::string& n : summary.changed_names) names += " " + n;
  std::cout << "dot-decomposer changed " << summary.changed << " of " << summary.checked
            << " corpus modules:" << names << "\n";
}

}  // namespace
}  // namespace xlens
