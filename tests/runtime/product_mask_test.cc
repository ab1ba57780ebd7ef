#include "compiler/runtime/product_mask.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/parser.h"

namespace xlens::runtime {
namespace {

// A product fusion `p` over f32[2,6,6] and its consumer, a fusion whose computation is `body`
// (its parameter x is the product, y another f32[2,6,6]); `extra` adds instructions to the entry.
std::unique_ptr<HloModule> Module(const std::string& body, const std::string& extra = "") {
  const std::string text =
      "HloModule m\n"
      "product {\n  a = f32[2,6,4] parameter(0)\n  b = f32[2,6,4] parameter(1)\n"
      "  ROOT d = f32[2,6,6] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={2}, "
      "rhs_batch_dims={0}, rhs_contracting_dims={2}\n}\n"
      "consumer {\n  x = f32[2,6,6] parameter(0)\n  y = f32[2,6,6] parameter(1)\n" + body + "}\n"
      "ENTRY e {\n  a = f32[2,6,4] parameter(0)\n  b = f32[2,6,4] parameter(1)\n"
      "  y = f32[2,6,6] parameter(2)\n"
      "  p = f32[2,6,6] fusion(a, b), kind=kCustom, calls=product\n" + extra +
      "  ROOT c = f32[2,6,6] fusion(p, y), kind=kLoop, calls=consumer\n}\n";
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message() << "\n" << text;
  return module.ok() ? std::move(*module) : nullptr;
}

const HloInstruction& Product(const HloModule& module) {
  for (const HloInstruction* i : module.entry_computation()->instructions()) {
    if (i->name() == "p") return *i;
  }
  ADD_FAILURE() << "no p";
  return *module.entry_computation()->root_instruction();
}

// row >= column, as JAX's tril writes it (through a select of constants), broadcast over the batch.
const std::string kCausal =
    "  i0 = s32[6,6] iota(), iota_dimension=0\n  i1 = s32[6,6] iota(), iota_dimension=1\n"
    "  ge = pred[6,6] compare(i0, i1), direction=GE\n"
    "  on = pred[] constant(true)\n  onb = pred[6,6] broadcast(on), dimensions={}\n"
    "  off = pred[] constant(false)\n  offb = pred[6,6] broadcast(off), dimensions={}\n"
    "  tril = pred[6,6] select(ge, onb, offb)\n"
    "  mask = pred[2,6,6] broadcast(tril), dimensions={1,2}\n"
    "  n = f32[] constant(-1e9)\n  nb = f32[2,6,6] broadcast(n), dimensions={}\n";

std::vector<ColumnRange> Causal() {
  std::vector<ColumnRange> r;
  for (int64_t row = 0; row < 6; ++row) r.push_back({0, row + 1});
  return r;
}

TEST(ProductMaskTest, ACausalMaskReadsEachRowUpToItsDiagonal) {
  auto module = Module(kCausal + "  ROOT s = f32[2,6,6] select(mask, x, nb)\n");
  ASSERT_NE(module, nullptr);
  std::optional<std::vector<ColumnRange>> ranges = ReadColumnsPerRow(Product(*module));
  ASSERT_TRUE(ranges.has_value());
  EXPECT_EQ(*ranges, Causal());
}

TEST(ProductMaskTest, TheProductTakenWhereTheConditionIsFalseReadsTheOtherSide) {
  // select(mask, -1e9, x): the product is read above the diagonal, columns row+1..5; the last
  // row reads none.
  auto module = Module(kCausal + "  ROOT s = f32[2,6,6] select(mask, nb, x)\n");
  ASSERT_NE(module, nullptr);
  std::optional<std::vector<ColumnRange>> ranges = ReadColumnsPerRow(Product(*module));
  ASSERT_TRUE(ranges.has_value());
  std::vector<ColumnRange> expected;
  for (int64_t row = 0; row < 5; ++row) expected.push_back({row + 1, 6});
  expected.push_back({0, 0});
  EXPECT_EQ(*ranges, expected);
}

TEST(ProductMaskTest, TwoSelectsReadTheUnionOfTheirColumns) {
  // A band: row - column < 2 read by one select, the causal half by another; the product is
  // read where either takes it.
  auto module = Module(kCausal +
                       "  d = s32[6,6] subtract(i0, i1)\n  two = s32[] constant(2)\n"
                       "  twob = s32[6,6] broadcast(two), dimensions={}\n"
                       "  near = pred[6,6] compare(d, twob), direction=LT\n"
                       "  nearb = pred[2,6,6] broadcast(near), dimensions={1,2}\n"
                       "  s1 = f32[2,6,6] select(mask, x, nb)\n  s2 = f32[2,6,6] select(nearb, x, nb)\n"
                       "  ROOT s = f32[2,6,6] add(s1, s2)\n");
  ASSERT_NE(module, nullptr);
  std::optional<std::vector<ColumnRange>> ranges = ReadColumnsPerRow(Product(*module));
  ASSERT_TRUE(ranges.has_value());
  std::vector<ColumnRange> expected(6, ColumnRange{0, 6});  // row - column < 2 holds up to the end
  EXPECT_EQ(*ranges, expected);
}

TEST(ProductMaskTest, EveryOtherReadOrConditionReadsEverything) {
  const std::string causal = kCausal;
  // The product read outside a select too.
  auto module = Module(causal + "  s = f32[2,6,6] select(mask, x, nb)\n  ROOT r = f32[2,6,6] add(s, x)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
  // A condition that depends on a parameter.
  module = Module(causal + "  z = f32[2,6,6] broadcast(n), dimensions={}\n"
                           "  pos = pred[2,6,6] compare(y, z), direction=GT\n"
                           "  ROOT s = f32[2,6,6] select(pos, x, nb)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
  // A condition that differs between batch elements.
  module = Module(causal + "  ib = s32[2,6,6] iota(), iota_dimension=0\n"
                           "  zero = s32[] constant(0)\n  zb = s32[2,6,6] broadcast(zero), dimensions={}\n"
                           "  first = pred[2,6,6] compare(ib, zb), direction=EQ\n"
                           "  ROOT s = f32[2,6,6] select(first, x, nb)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
  // A second consumer of the product in the entry.
  module = Module(causal + "  ROOT s = f32[2,6,6] select(mask, x, nb)\n", "  other = f32[2,6,6] negate(p)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
  // The product selected against itself, and the product as the condition's input.
  module = Module(causal + "  ROOT s = f32[2,6,6] select(mask, x, x)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
}

// Row values spread over the columns: y's first column, a value per row.
const std::string kRowValues =
    "  ys = f32[2,6,1] slice(y), slice={[0:2], [0:6], [0:1]}\n  yr = f32[2,6] reshape(ys)\n"
    "  yb = f32[2,6,6] broadcast(yr), dimensions={0,1}\n";

// The consumer's columns outside which it is one value per row, as the product that reads it
// sees them.
std::optional<std::vector<ColumnRange>> UniformOutside(const std::string& body) {
  auto module = Module(kCausal + kRowValues + body);
  if (module == nullptr) return std::nullopt;
  return RowUniformOutsideColumns(*module->entry_computation()->root_instruction());
}

TEST(ProductMaskTest, SoftmaxOfMaskedScoresIsOneValueARowPastTheMask) {
  // exp(select(mask, x, -1e9) - row) / row, as a softmax of masked scores.
  const std::string softmax = "  s = f32[2,6,6] select(mask, x, nb)\n  d = f32[2,6,6] subtract(s, yb)\n"
                              "  e = f32[2,6,6] exponential(d)\n";
  EXPECT_EQ(UniformOutside(softmax + "  ROOT q = f32[2,6,6] divide(e, yb)\n"), Causal());
  // The select the other way round: uniform where the mask is true, up to each diagonal.
  std::vector<ColumnRange> upper;
  for (int64_t row = 0; row < 6; ++row) upper.push_back(row < 5 ? ColumnRange{row + 1, 6} : ColumnRange{0, 0});
  EXPECT_EQ(UniformOutside("  ROOT s = f32[2,6,6] select(mask, nb, x)\n"), upper);
  // A value that varies along the row past the mask: y itself, a broadcast along the columns, an
  // iota, a second select of y, no select at all.
  EXPECT_EQ(UniformOutside(softmax + "  ROOT q = f32[2,6,6] divide(e, y)\n"), std::nullopt);
  EXPECT_EQ(UniformOutside(softmax + "  yc = f32[2,6,6] broadcast(yr), dimensions={0,2}\n"
                                     "  ROOT q = f32[2,6,6] divide(e, yc)\n"),
            std::nullopt);
  EXPECT_EQ(UniformOutside(softmax + "  io = f32[2,6,6] iota(), iota_dimension=2\n"
                                     "  ROOT q = f32[2,6,6] multiply(e, io)\n"),
            std::nullopt);
  EXPECT_EQ(UniformOutside(softmax + "  t = f32[2,6,6] select(mask, y, nb)\n  ROOT q = f32[2,6,6] add(e, t)\n"),
            std::nullopt);
  EXPECT_EQ(UniformOutside("  ROOT q = f32[2,6,6] exponential(x)\n"), std::nullopt);
}

TEST(ProductMaskTest, ASelectBetweenRowValuesKeepsThePositionsItsConditionVariesOver) {
  const std::string softmax = "  s = f32[2,6,6] select(mask, x, nb)\n  d = f32[2,6,6] subtract(s, yb)\n"
                              "  e = f32[2,6,6] exponential(d)\n  q = f32[2,6,6] divide(e, yb)\n"
                              "  zero = f32[] constant(0)\n  zb = f32[2,6,6] broadcast(zero), dimensions={}\n"
                              "  half = f32[] constant(0.5)\n  hb = f32[2,6,6] broadcast(half), dimensions={}\n";
  // Columns 0-2 of every row, from iotas: both sides one value a row, the side taken not.
  const std::string left = "  c2 = s32[6,6] iota(), iota_dimension=1\n  three = s32[] constant(3)\n"
                           "  t2 = s32[6,6] broadcast(three), dimensions={}\n"
                           "  l2 = pred[6,6] compare(c2, t2), direction=LT\n"
                           "  left = pred[2,6,6] broadcast(l2), dimensions={1,2}\n";
  // softmax + select(column < 3, 0.5, 0): row r varies over columns 0 to max(r, 2).
  std::vector<ColumnRange> expected;
  for (int64_t row = 0; row < 6; ++row) expected.push_back({0, std::max<int64_t>(row + 1, 3)});
  EXPECT_EQ(UniformOutside(softmax + left + "  c = f32[2,6,6] select(left, hb, zb)\n"
                                            "  ROOT o = f32[2,6,6] add(q, c)\n"),
            expected);
  // softmax(where=mask): select(mask, p, 0) over the mask's own positions keeps them alone.
  EXPECT_EQ(UniformOutside(softmax + "  ROOT o = f32[2,6,6] select(mask, q, zb)\n"), Causal());
  // A condition worked out from nothing at compile time (y > 0) keeps nothing out.
  EXPECT_EQ(UniformOutside(softmax + "  pos = pred[2,6,6] compare(y, zb), direction=GT\n"
                                     "  c = f32[2,6,6] select(pos, hb, zb)\n  ROOT o = f32[2,6,6] add(q, c)\n"),
            std::nullopt);
  // A condition that is one value a row (row < 3, spread over the columns) leaves the
  // softmax's own columns.
  EXPECT_EQ(UniformOutside(softmax + "  r1 = s32[6] iota(), iota_dimension=0\n"
                                     "  three = s32[] constant(3)\n  t1 = s32[6] broadcast(three), dimensions={}\n"
                                     "  top1 = pred[6] compare(r1, t1), direction=LT\n"
                                     "  top = pred[2,6,6] broadcast(top1), dimensions={1}\n"
                                     "  c = f32[2,6,6] select(top, hb, zb)\n  ROOT o = f32[2,6,6] add(q, c)\n"),
            Causal());
}

const HloInstruction& Named(const HloComputation& computation, const std::string& name) {
  for (const HloInstruction* i : computation.instructions()) {
    if (i->name() == name) return *i;
  }
  ADD_FAILURE() << "no " << name;
  return *computation.root_instruction();
}

TEST(ProductMaskTest, SelectedPositionsTakeTheRuntimesConditionsAlone) {
  // The rule the benchmark's floors share (machine_limits walks the unoptimized module to the
  // selects): a causal condition is worked out, a block-causal one through a division is not.
  auto module = Module(kCausal + "  c2 = s32[] constant(2)\n  c2b = s32[6,6] broadcast(c2), dimensions={}\n"
                                 "  r = s32[6,6] divide(i0, c2b)\n  k = s32[6,6] divide(i1, c2b)\n"
                                 "  blocks = pred[6,6] compare(r, k), direction=GE\n"
                                 "  blocksb = pred[2,6,6] broadcast(blocks), dimensions={1,2}\n"
                                 "  s = f32[2,6,6] select(mask, x, nb)\n"
                                 "  ROOT t = f32[2,6,6] select(blocksb, s, nb)\n");
  ASSERT_NE(module, nullptr);
  const HloComputation& consumer = *Product(*module).users()[0]->fused_computation();
  const HloInstruction& x = Named(consumer, "x");
  std::optional<SelectedPositions> read = SelectedPositions::For(x.shape());
  ASSERT_TRUE(read.has_value());
  EXPECT_TRUE(read->empty());
  EXPECT_TRUE(read->AddSelect(Named(consumer, "s"), x));
  EXPECT_FALSE(read->empty());
  EXPECT_EQ(read->ColumnsPerRow(), Causal());
  EXPECT_FALSE(read->AddSelect(Named(consumer, "t"), Named(consumer, "s")));
  EXPECT_FALSE(read->AddSelect(Named(consumer, "t"), x));  // x is no operand of t
  EXPECT_EQ(read->ColumnsPerRow(), Causal());
}

TEST(ProductMaskTest, AConditionTooDeepToWorkOutReadsEverything) {
  // 100000 nots between the iota compare and the select: not worked out (nor recursed through to
  // the end of the stack), so every position counts as read.
  std::string chain = "  i0 = s32[6,6] iota(), iota_dimension=0\n  i1 = s32[6,6] iota(), iota_dimension=1\n"
                      "  c0 = pred[6,6] compare(i0, i1), direction=GE\n";
  constexpr int kDepth = 100000;
  for (int d = 1; d <= kDepth; ++d) {
    chain += "  c" + std::to_string(d) + " = pred[6,6] not(c" + std::to_string(d - 1) + ")\n";
  }
  chain += "  mask = pred[2,6,6] broadcast(c" + std::to_string(kDepth) + "), dimensions={1,2}\n"
           "  n = f32[] constant(-1e9)\n  nb = f32[2,6,6] broadcast(n), dimensions={}\n";
  auto module = Module(chain + "  ROOT s = f32[2,6,6] select(mask, x, nb)\n");
  ASSERT_NE(module, nullptr);
  EXPECT_FALSE(ReadColumnsPerRow(Product(*module)).has_value());
}

}  // namespace
}  // namespace xlens::runtime
