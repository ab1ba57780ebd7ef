#include "compiler/passes/batched_chain_split.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;

// Attention over 4 batch elements as JAX lowers it after dot-decomposer (k read through a
// transpose), its softmax between the products, and `extra` before the second product.
std::string Attention(const std::string& extra = "", const std::string& probabilities = "p",
                      const std::string& root = "ROOT r") {
  return R"(HloModule m
max { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] maximum(a, b) }
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  q = f32[4,16,8] parameter(0)
  k = f32[4,16,8] parameter(1)
  v = f32[4,16,8] parameter(2)
  mask = f32[4,16,16] parameter(3)
  kt = f32[4,8,16] transpose(k), dimensions={0,2,1}
  s = f32[4,16,16] dot(q, kt), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
  c = f32[] constant(0.125)
  cb = f32[4,16,16] broadcast(c), dimensions={}
  scaled = f32[4,16,16] multiply(s, cb)
  masked = f32[4,16,16] add(scaled, mask)
  lo = f32[] constant(-inf)
  m = f32[4,16] reduce(masked, lo), dimensions={2}, to_apply=max
  m1 = f32[4,16,1] reshape(m)
  m2 = f32[4,16] reshape(m1)
  mb = f32[4,16,16] broadcast(m2), dimensions={0,1}
  d = f32[4,16,16] subtract(masked, mb)
  x = f32[4,16,16] exponential(d)
  z = f32[] constant(0)
  sum = f32[4,16] reduce(x, z), dimensions={2}, to_apply=add
  sb = f32[4,16,16] broadcast(sum), dimensions={0,1}
  p = f32[4,16,16] divide(x, sb)
)" + extra + "  " + root + " = f32[4,16,8] dot(" + probabilities +
         R"(, v), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}
)" + (root == "ROOT r" ? "" : "  ROOT t = (f32[4,16,8], f32[4,16,16]) tuple(r, p)\n") + "}\n";
}

TEST(BatchedChainSplitTest, AttentionBecomesOneChainPerBatchElement) {
  BatchedChainSplit pass(/*min_bytes=*/2048, /*max_chain_bytes=*/1024);
  auto module = xlens::testing::RunPassOnText(pass, Attention());
  ASSERT_NE(module, nullptr);
  // Four chains of two products each, their results joined; every chain's reads are slices of
  // q, k (under its transpose, kept for the product to read in place), v and the mask.
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDot), 8);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kTranspose), 4);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kSlice), 16);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kExp), 4);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kConcatenate);
  EXPECT_EQ(root->operand_count(), 4);
  for (const HloInstruction* dot : root->operands()) {
    EXPECT_EQ(dot->opcode(), HloOpcode::kDot);
    EXPECT_EQ(dot->shape().dimensions(), (std::vector<int64_t>{1, 16, 8}));
  }
}

TEST(BatchedChainSplitTest, AChainTakesAsManyBatchElementsAsItsBoundAllows) {
  // 1 KiB of scores per batch element, 2 KiB allowed a chain: two chains of two.
  BatchedChainSplit pass(/*min_bytes=*/4096, /*max_chain_bytes=*/2048);
  auto module = xlens::testing::RunPassOnText(pass, Attention());
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kDot), 4);
  const HloInstruction* root = module->entry_computation()->root_instruction();
  ASSERT_EQ(root->opcode(), HloOpcode::kConcatenate);
  ASSERT_EQ(root->operand_count(), 2);
  EXPECT_EQ(root->operand(1)->shape().dimensions(), (std::vector<int64_t>{2, 16, 8}));
}

TEST(BatchedChainSplitTest, AnIntermediateFittingTheCachesStaysWhole) {
  BatchedChainSplit pass;  // the scores are 4 KiB
  xlens::testing::RunPassOnText(pass, Attention(), /*expect_change=*/false);
}

TEST(BatchedChainSplitTest, AnIntermediateReadElsewhereStaysWhole) {
  BatchedChainSplit pass(/*min_bytes=*/2048, /*max_chain_bytes=*/1024);
  xlens::testing::RunPassOnText(pass, Attention("", "p", "r"), /*expect_change=*/false);
}

TEST(BatchedChainSplitTest, WorkAcrossBatchElementsStaysWhole) {
  // Normalised over the batch dimension: each chain would need the others' scores.
  BatchedChainSplit pass(/*min_bytes=*/2048, /*max_chain_bytes=*/1024);
  xlens::testing::RunPassOnText(pass,
                                Attention("  z2 = f32[] constant(0)\n"
                                          "  across = f32[16,16] reduce(p, z2), dimensions={0}, to_apply=add\n"
                                          "  ab = f32[4,16,16] broadcast(across), dimensions={1,2}\n"
                                          "  pa = f32[4,16,16] divide(p, ab)\n",
                                          "pa"),
                                /*expect_change=*/false);
}

}  // namespace
}  // namespace xlens
