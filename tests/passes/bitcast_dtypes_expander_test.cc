// bitcast-dtypes-expander: bitcasts between widths become same-width ops that compute what the
// evaluator's bitcast computes (lowest bits in element 0 of the narrow side's last dimension);
// same-width bitcasts stay.
#include "compiler/passes/bitcast_dtypes_expander.h"

#include <gtest/gtest.h>

#include "pass_test_util.h"

namespace xlens {
namespace {

using xlens::testing::CountOpcode;
using xlens::testing::RunPassOnText;

TEST(BitcastDtypesExpanderTest, NarrowToWideAndBackComputeTheSameBits) {
  BitcastDtypesExpander pass;
  auto module = RunPassOnText(pass, R"(HloModule m
ENTRY e {
  a = u32[3,2] parameter(0)
  b = s64[4] parameter(1)
  c = s8[2,4] parameter(2)
  w = u64[3] bitcast-convert(a)
  n = u32[4,2] bitcast-convert(b)
  s = s32[2] bitcast-convert(c)
  h = u16[2,2] bitcast-convert(s)
  ROOT t = (u64[3], u32[4,2], s32[2], u16[2,2]) tuple(w, n, s, h)
})");
  ASSERT_NE(module, nullptr);
  // Only the same-width bitcasts to and from the unsigned types remain (s64 -> u64, s8 -> u8,
  // u32 -> s32, s32 -> u32), never one between widths.
  for (const HloInstruction* i : module->entry_computation()->instructions()) {
    if (i->opcode() != HloOpcode::kBitcastConvert) continue;
    EXPECT_EQ(BitWidth(i->shape().element_type()),
              BitWidth(i->operand(0)->shape().element_type()))
        << i->name();
  }
}

TEST(BitcastDtypesExpanderTest, LeavesSameWidthBitcasts) {
  BitcastDtypesExpander pass;
  auto module = RunPassOnText(pass, R"(HloModule m
ENTRY e {
  a = u32[3] parameter(0)
  ROOT b = s32[3] bitcast-convert(a)
})", /*expect_change=*/false);
  ASSERT_NE(module, nullptr);
  EXPECT_EQ(CountOpcode(*module, HloOpcode::kBitcastConvert), 1);
}

}  // namespace
}  // namespace xlens
