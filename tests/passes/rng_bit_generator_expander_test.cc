// rng-bit-generator-expander: the expansion computes what the evaluator computes (which the
// differential test holds to jaxlib's bits), for both algorithms, every value width, u64[2]
// and u64[3] states and shapes whose counts leave part of the last block unused; what XLA
// does not expand stays.
#include "compiler/passes/rng_bit_generator_expander.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;
using xlens::testing::RunPassOnText;

TEST(RngBitGeneratorExpanderTest, PhiloxExpandsToTheSameBitsAndState) {
  RngBitGeneratorExpander pass;
  auto module = RunPassOnText(pass, R"(HloModule m
ENTRY e {
  p = u64[2] parameter(0)
  q = u64[3] parameter(1)
  big = u64[3] constant({3, 18446744073709551614, 7})
  g0 = (u64[2], u32[3,5]) rng-bit-generator(p), algorithm=rng_philox
  g1 = (u64[3], u64[7]) rng-bit-generator(q), algorithm=rng_default
  g2 = (u64[3], u8[9]) rng-bit-generator(big), algorithm=rng_philox
  g3 = (u64[2], s32[]) rng-bit-generator(p), algorithm=rng_philox
  g4 = (u64[3], u16[2,2]) rng-bit-generator(big), algorithm=rng_philox
  g5 = u32[2,2] rng-bit-generator(q), algorithm=rng_default
  ROOT t = ((u64[2], u32[3,5]), (u64[3], u64[7]), (u64[3], u8[9]), (u64[2], s32[]), (u64[3], u16[2,2]), u32[2,2]) tuple(g0, g1, g2, g3, g4, g5)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kRngBitGenerator), 0);
}

TEST(RngBitGeneratorExpanderTest, ThreeFryExpandsToTheSameBitsAndState) {
  RngBitGeneratorExpander pass;
  auto module = RunPassOnText(pass, R"(HloModule m
ENTRY e {
  p = u64[2] parameter(0)
  g0 = (u64[2], u32[3,4,5]) rng-bit-generator(p), algorithm=rng_three_fry
  g1 = (u64[2], u32[3,5]) rng-bit-generator(p), algorithm=rng_three_fry
  g2 = (u64[2], u32[]) rng-bit-generator(p), algorithm=rng_three_fry
  g3 = (u64[2], u64[2,3]) rng-bit-generator(p), algorithm=rng_three_fry
  g4 = (u64[2], u16[7]) rng-bit-generator(p), algorithm=rng_three_fry
  ROOT t = ((u64[2], u32[3,4,5]), (u64[2], u32[3,5]), (u64[2], u32[]), (u64[2], u64[2,3]), (u64[2], u16[7])) tuple(g0, g1, g2, g3, g4)
})");
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kRngBitGenerator), 0);
}

TEST(RngBitGeneratorExpanderTest, LeavesStatesXlaDoesNotExpand) {
  RngBitGeneratorExpander pass;
  auto module = RunPassOnText(pass, R"(HloModule m
ENTRY e {
  p = u64[4] parameter(0)
  q = u64[3] parameter(1)
  g0 = (u64[4], u32[4]) rng-bit-generator(p), algorithm=rng_philox
  g1 = (u64[3], u32[4]) rng-bit-generator(q), algorithm=rng_three_fry
  ROOT t = ((u64[4], u32[4]), (u64[3], u32[4])) tuple(g0, g1)
})", /*expect_change=*/false, /*evaluable=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kRngBitGenerator), 2);
}

}  // namespace
}  // namespace xlens
