// The 8-bit floats: formats, rounding, printing and parsing of constants, evaluation and .npy.
// The exhaustive comparison with ml_dtypes (every bit pattern, every midpoint) is
// float8_conversion_test.py; these cases pin the corners by hand.
#include "compiler/hlo/float8.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/npy.h"
#include "compiler/hlo/printer.h"
#include "evaluator_test_util.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

uint8_t Round(double value, PrimitiveType type) {
  return Float8FromDouble(value, *Float8FormatOf(type));
}
double Widen(uint8_t bits, PrimitiveType type) { return Float8ToDouble(bits, *Float8FormatOf(type)); }

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

TEST(Float8Test, LargestValuesAndSpecialPatterns) {
  EXPECT_EQ(Widen(0x7e, PrimitiveType::F8E4M3FN), 448);
  EXPECT_TRUE(std::isnan(Widen(0x7f, PrimitiveType::F8E4M3FN)));
  EXPECT_EQ(Widen(0x7b, PrimitiveType::F8E5M2), 57344);
  EXPECT_EQ(Widen(0x7c, PrimitiveType::F8E5M2), kInf);
  EXPECT_EQ(Widen(0x77, PrimitiveType::F8E4M3), 240);
  EXPECT_EQ(Widen(0x6f, PrimitiveType::F8E3M4), 15.5);
  EXPECT_EQ(Widen(0x7f, PrimitiveType::F8E4M3FNUZ), 240);
  EXPECT_EQ(Widen(0x7f, PrimitiveType::F8E5M2FNUZ), 57344);
  EXPECT_EQ(Widen(0x7f, PrimitiveType::F8E4M3B11FNUZ), 30);
  // The fnuz types: 0x80 is the NaN (negative, as ml_dtypes widens it), there is no -0.
  EXPECT_TRUE(std::isnan(Widen(0x80, PrimitiveType::F8E4M3FNUZ)));
  EXPECT_TRUE(std::signbit(Widen(0x80, PrimitiveType::F8E4M3FNUZ)));
  // Smallest subnormals.
  EXPECT_EQ(Widen(0x01, PrimitiveType::F8E4M3FN), std::ldexp(1.0, -9));
  EXPECT_EQ(Widen(0x01, PrimitiveType::F8E5M2), std::ldexp(1.0, -16));
  EXPECT_EQ(Widen(0x01, PrimitiveType::F8E4M3B11FNUZ), std::ldexp(1.0, -13));
}

TEST(Float8Test, RoundsToNearestEvenAndOverflowsToInfOrNan) {
  // 1.0625 is halfway between 1 and 1.125 in e4m3fn: to the even 1 (0x38); above it, up.
  EXPECT_EQ(Round(1.0625, PrimitiveType::F8E4M3FN), 0x38);
  EXPECT_EQ(Round(1.0625 + 1e-6, PrimitiveType::F8E4M3FN), 0x39);
  EXPECT_EQ(Round(1.1875, PrimitiveType::F8E4M3FN), 0x3a);  // halfway, up to even
  // No saturation: past 448 (464 still rounds down to it) e4m3fn gives NaN, e5m2 inf.
  EXPECT_EQ(Round(464, PrimitiveType::F8E4M3FN), 0x7e);
  EXPECT_EQ(Round(465, PrimitiveType::F8E4M3FN), 0x7f);
  EXPECT_EQ(Round(-1e9, PrimitiveType::F8E4M3FN), 0xff);
  EXPECT_EQ(Round(kInf, PrimitiveType::F8E4M3FN), 0x7f);
  EXPECT_EQ(Round(61439, PrimitiveType::F8E5M2), 0x7b);
  EXPECT_EQ(Round(61440, PrimitiveType::F8E5M2), 0x7c);  // halfway to 2^16: to even, inf
  EXPECT_EQ(Round(-kInf, PrimitiveType::F8E5M2), 0xfc);
  EXPECT_EQ(Round(1e9, PrimitiveType::F8E4M3FNUZ), 0x80);
  // NaN: the quiet pattern of IEEE-like types, with its sign; the fnuz NaN has none.
  EXPECT_EQ(Round(kNan, PrimitiveType::F8E5M2), 0x7e);
  EXPECT_EQ(Round(-kNan, PrimitiveType::F8E5M2), 0xfe);
  EXPECT_EQ(Round(kNan, PrimitiveType::F8E4M3), 0x7c);
  EXPECT_EQ(Round(kNan, PrimitiveType::F8E3M4), 0x78);
  EXPECT_EQ(Round(-kNan, PrimitiveType::F8E4M3FNUZ), 0x80);
  // Zeros: -0 keeps its sign except where the type has no -0.
  EXPECT_EQ(Round(-0.0, PrimitiveType::F8E4M3FN), 0x80);
  EXPECT_EQ(Round(-0.0, PrimitiveType::F8E5M2FNUZ), 0x00);
  EXPECT_EQ(Round(-1e-30, PrimitiveType::F8E4M3B11FNUZ), 0x00);
  // Subnormals: half the smallest rounds to even (zero), three quarters up to it.
  EXPECT_EQ(Round(std::ldexp(1.0, -10), PrimitiveType::F8E4M3FN), 0x00);
  EXPECT_EQ(Round(std::ldexp(3.0, -11), PrimitiveType::F8E4M3FN), 0x01);
  EXPECT_EQ(Round(std::ldexp(3.0, -10), PrimitiveType::F8E4M3FN), 0x02);  // 1.5 units: to even
  // A subnormal that rounds up to the smallest normal.
  EXPECT_EQ(Round(std::ldexp(3.5, -16), PrimitiveType::F8E5M2), 0x04);
  // An f64 rounds once: just above the tie, where rounding through f32 would land on it.
  EXPECT_EQ(Round(1.0625 + std::ldexp(1.0, -40), PrimitiveType::F8E4M3FN), 0x39);
}

TEST(Float8Test, ConstantsPrintWithTheirOwnDigitsAndParseBack) {
  auto module = ParseHloModule(R"(HloModule m
ENTRY e {
  a = f8e5m2[4] constant({0.09375, 57344, -0.0, nan})
  b = f8e4m3fn[3] constant({0.1, 448, -inf})
  c = f8e4m3b11fnuz[2] constant({-0.0, nan})
  ROOT t = (f8e5m2[4], f8e4m3fn[3], f8e4m3b11fnuz[2]) tuple(a, b, c)
})");
  ASSERT_TRUE(module.ok()) << module.status().message();
  const std::string printed = PrintModule(**module);
  // As XLA prints them: %.{max_digits10}g, two digits for e5m2, three for the others.
  EXPECT_THAT(printed, HasSubstr("constant({0.094, 5.7e+04, -0, nan})"));
  EXPECT_THAT(printed, HasSubstr("constant({0.102, 448, -nan})"));
  EXPECT_THAT(printed, HasSubstr("constant({0, -nan})"));
  auto again = ParseHloModule(printed);
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_EQ(PrintModule(**again), printed);
  // A value past the largest finite one is refused, as for the other float types.
  auto too_large = ParseHloModule("HloModule m\nENTRY e {\n  ROOT a = f8e4m3fn[] constant(500)\n}\n");
  EXPECT_FALSE(too_large.ok());
}

TEST(Float8Test, EvaluatesInF32RoundingEachOperation) {
  auto result = testing::EvaluateText(R"(HloModule m
ENTRY e {
  a = f8e4m3fn[4] constant({1, 448, 0.5, 3})
  b = f8e4m3fn[4] constant({0.0625, 448, 0.001953125, 3})
  s = f8e4m3fn[4] add(a, b)
  m = f8e4m3fn[4] multiply(s, b)
  ROOT t = (f8e4m3fn[4], f8e4m3fn[4]) tuple(s, m)
})");
  ASSERT_TRUE(result.ok()) << result.status().message();
  const std::vector<double> sum = testing::DoubleValues(result->tuple_element(0));
  // 1 + 1/16 ties to 1; 448 + 448 has no e4m3fn: NaN; 0.5 + 2^-9 rounds back to 0.5; 6.
  EXPECT_EQ(sum[0], 1);
  EXPECT_TRUE(std::isnan(sum[1]));
  EXPECT_EQ(sum[2], 0.5);
  EXPECT_EQ(sum[3], 6);
  const std::vector<double> product = testing::DoubleValues(result->tuple_element(1));
  EXPECT_EQ(product[0], 0.0625);
  EXPECT_EQ(product[3], 18);
}

TEST(Float8Test, MixedDotAccumulatesInF32) {
  auto result = testing::EvaluateText(R"(HloModule m
ENTRY e {
  a = f8e4m3fn[1,4] constant({ { 1, 0.0625, 0.0625, 0.0625 } })
  b = f8e5m2[4,1] constant({ { 1 }, { 1 }, { 1 }, { 1 } })
  ROOT d = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  ASSERT_TRUE(result.ok()) << result.status().message();
  // Summed in f8 the small terms would vanish one by one (1 + 1/16 ties back to 1).
  EXPECT_EQ(result->GetAsDouble(0), 1.1875);
}

TEST(Float8Test, NpyHoldsTheValuesWidenedToFloat32) {
  Literal f8(Shape(PrimitiveType::F8E5M2FNUZ, {3}));
  f8.data<uint8_t>()[0] = 0x40;  // 1
  f8.data<uint8_t>()[1] = 0x80;  // NaN
  f8.data<uint8_t>()[2] = 0xc1;  // -1.25
  StatusOr<std::string> bytes = SerializeNpy(f8);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  EXPECT_THAT(*bytes, HasSubstr("'descr': '<f4'"));
  StatusOr<Literal> read = ParseNpy(*bytes, "f8.npy");
  ASSERT_TRUE(read.ok()) << read.status().message();
  ASSERT_EQ(read->shape().element_type(), PrimitiveType::F32);
  EXPECT_EQ(read->GetAsDouble(0), 1);
  EXPECT_TRUE(std::isnan(read->GetAsDouble(1)));
  EXPECT_EQ(read->GetAsDouble(2), -1.25);
}

}  // namespace
}  // namespace xlens
