#include "compiler/hlo/literal.h"
#include "compiler/hlo/literal_comparison.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

TEST(LiteralTest, ArraysAreRowMajorWhateverTheLayout) {
  Shape shape(PrimitiveType::S32, {2, 3});
  shape.set_layout(Layout{{0, 1}, ""});
  Literal lit(shape);
  for (int64_t i = 0; i < 6; ++i) lit.data<int32_t>()[i] = static_cast<int32_t>(i);
  std::vector<int64_t> index = {1, 0};
  EXPECT_EQ(lit.Get<int32_t>(index), 3);
  EXPECT_EQ(lit.ToStringWithoutShape(), "{ { 0, 1, 2 }, { 3, 4, 5 } }");
}

TEST(LiteralTest, FloatsPrintAsXlaPrintsThem) {
  EXPECT_EQ(FloatToHloString(0.1f, PrimitiveType::F32), "0.1");
  EXPECT_EQ(FloatToHloString(1.0f / 3.0f, PrimitiveType::F32), "0.333333343");
  EXPECT_EQ(FloatToHloString(1.0 / 3.0, PrimitiveType::F64), "0.33333333333333331");
  EXPECT_EQ(FloatToHloString(1e-5f, PrimitiveType::F32), "1e-05");
  EXPECT_EQ(FloatToHloString(65504, PrimitiveType::F16), "65504");
  EXPECT_EQ(FloatToHloString(-std::numeric_limits<double>::infinity(), PrimitiveType::F32), "-inf");
  EXPECT_EQ(FloatToHloString(std::nan(""), PrimitiveType::F32), "nan");
}

TEST(LiteralTest, RangesOfTypes) {
  EXPECT_TRUE(FitsFloatType(65504, PrimitiveType::F16));
  EXPECT_FALSE(FitsFloatType(-65520, PrimitiveType::F16));
  EXPECT_TRUE(FitsIntegerType(-128, PrimitiveType::S8));
  EXPECT_FALSE(FitsIntegerType(128, PrimitiveType::S8));
  EXPECT_TRUE(FitsIntegerType(7, PrimitiveType::S4));
  EXPECT_FALSE(FitsIntegerType(8, PrimitiveType::S4));
  EXPECT_FALSE(FitsIntegerType(-1, PrimitiveType::U32));
  EXPECT_TRUE(FitsUnsignedType(~uint64_t{0}, PrimitiveType::U64));
  EXPECT_FALSE(FitsUnsignedType(uint64_t{1} << 63, PrimitiveType::S64));
}

TEST(LiteralTest, HalfTypesRoundToNearestEven) {
  Literal lit(Shape(PrimitiveType::BF16, {2}));
  lit.SetFromDouble(0, 1.00390625);  // halfway between two bf16 values: rounds to even (1.0)
  lit.SetFromDouble(1, 1.01171875);  // halfway: rounds to even (1.015625)
  EXPECT_EQ(lit.GetAsDouble(0), 1.0);
  EXPECT_EQ(lit.GetAsDouble(1), 1.015625);
  Literal h(Shape(PrimitiveType::F16, {1}));
  h.SetFromDouble(0, 1.0 + 1.0 / 2048);  // halfway in f16: rounds to even (1.0)
  EXPECT_EQ(h.GetAsDouble(0), 1.0);
}

TEST(LiteralTest, TuplesAndEquality) {
  Literal a = Literal::MakeTuple({Literal::CreateR0<float>(PrimitiveType::F32, 1.5f),
                                  Literal::CreateR1<int32_t>(PrimitiveType::S32, {1, 2})});
  Literal b = Literal::MakeTuple({Literal::CreateR0<float>(PrimitiveType::F32, 1.5f),
                                  Literal::CreateR1<int32_t>(PrimitiveType::S32, {1, 2})});
  EXPECT_EQ(a, b);
  b.tuple_element(1).data<int32_t>()[1] = 3;
  EXPECT_FALSE(a == b);
  EXPECT_EQ(a.ToStringWithoutShape(), "(1.5, {1, 2})");
}

Literal FloatsOf(PrimitiveType type, const std::vector<double>& values) {
  Literal lit(Shape(type, {static_cast<int64_t>(values.size())}));
  for (size_t i = 0; i < values.size(); ++i) lit.SetFromDouble(static_cast<int64_t>(i), values[i]);
  return lit;
}

TEST(LiteralComparisonTest, NonFiniteMismatchesNameTheElementAndBothValues) {
  const double inf = std::numeric_limits<double>::infinity();
  LiteralDifference diff;
  // exp(-95) is subnormal in f32: its log is -95 where an exponential flushed to 0 gives -inf.
  Status s = ExpectLiteralNear(FloatsOf(PrimitiveType::F32, {-95, 1, inf, 2}),
                               FloatsOf(PrimitiveType::F32, {-inf, 1, -inf, std::nan("")}),
                               ErrorSpec{1e-3, 1e-3}, &diff);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), ::testing::StartsWith("result element {0}: expected -95, got -inf; 3 "));
  EXPECT_THAT(s.message(), ::testing::Not(::testing::HasSubstr("abs error")));
  EXPECT_EQ(diff.max_abs_error, 0) << "the only finite pair is equal";
  EXPECT_EQ(diff.non_finite_mismatches, 3);

  // A finite mismatch first: the first non-finite one is named as well.
  s = ExpectLiteralNear(FloatsOf(PrimitiveType::F32, {1, 2, -95}),
                        FloatsOf(PrimitiveType::F32, {1.5, 2, -inf}), ErrorSpec{1e-3, 1e-3}, &diff);
  EXPECT_THAT(s.message(), ::testing::StartsWith("result element {0}: expected 1, got 1.5 (abs error 0.5, "));
  EXPECT_THAT(s.message(), ::testing::HasSubstr("first non-finite mismatch: element {2}: expected -95, got -inf"));
  EXPECT_EQ(diff.non_finite_mismatches, 1);
}

TEST(LiteralComparisonTest, EveryOutputOfATupleIsCountedAndTheFirstMismatchNamed) {
  const double inf = std::numeric_limits<double>::infinity();
  // out0 one -inf where -95 was expected; out1 three values 1 apart.
  Literal expected = Literal::MakeTuple({FloatsOf(PrimitiveType::F32, {-95, 1}),
                                         FloatsOf(PrimitiveType::F32, {1, 2, 3, 4})});
  Literal actual = Literal::MakeTuple({FloatsOf(PrimitiveType::F32, {-inf, 1}),
                                       FloatsOf(PrimitiveType::F32, {2, 3, 4, 4})});
  LiteralDifference diff;
  Status s = ExpectLiteralNear(expected, actual, ErrorSpec{1e-3, 1e-3}, &diff);
  EXPECT_THAT(s.message(), ::testing::StartsWith("result{0} element {0}: expected -95, got -inf"));
  EXPECT_EQ(diff.mismatches, 4);
  EXPECT_EQ(diff.non_finite_mismatches, 1);
  EXPECT_EQ(diff.finite_mismatches(), 3);
  EXPECT_EQ(diff.max_abs_error, 1);
  // Within the tolerance nothing counts, though the largest error is measured.
  LiteralDifference near;
  EXPECT_TRUE(ExpectLiteralNear(FloatsOf(PrimitiveType::F32, {1}), FloatsOf(PrimitiveType::F32, {1.0001}),
                                ErrorSpec{1e-3, 1e-3}, &near).ok());
  EXPECT_EQ(near.finite_mismatches(), 0);
  EXPECT_GT(near.max_abs_error, 0);
}

TEST(LiteralComparisonTest, NarrowFloatsAreHeldToTheirOwnTypesTolerance) {
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::F16), 1e-2);
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::BF16), 1e-2);
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::F8E4M3FN), 0.125);
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::F8E5M2), 0.25);
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::F32), 0);
  EXPECT_EQ(NarrowFloatTolerance(PrimitiveType::F64), 0);
  // f8 and f4 widen the relative tolerance only: near zero they are held to their subnormals'
  // spacing, so that small values stay apart.
  EXPECT_EQ(NarrowFloatAbsoluteTolerance(PrimitiveType::F16), 1e-2);
  EXPECT_EQ(NarrowFloatAbsoluteTolerance(PrimitiveType::F8E4M3FN), 0x1p-9);
  EXPECT_EQ(NarrowFloatAbsoluteTolerance(PrimitiveType::F8E8M0FNU), 0);
  const ErrorSpec widened_f32{1e-3, 1e-3, /*widen_for_narrow_floats=*/true};
  EXPECT_FALSE(ExpectLiteralNear(FloatsOf(PrimitiveType::F8E4M3FN, {0.0625}),
                                 FloatsOf(PrimitiveType::F8E4M3FN, {0.03125}), widened_f32).ok());
  EXPECT_FALSE(ExpectLiteralNear(FloatsOf(PrimitiveType::F8E4M3FN, {0}),
                                 FloatsOf(PrimitiveType::F8E4M3FN, {0.1}), widened_f32).ok());
  EXPECT_TRUE(ExpectLiteralNear(FloatsOf(PrimitiveType::F8E4M3FN, {1}),
                                FloatsOf(PrimitiveType::F8E4M3FN, {1.125}), widened_f32).ok());
  // Two f16 sums of the same 65536 values taken in different orders (0.5% apart).
  const ErrorSpec f32_spec{1e-3, 1e-3};
  const ErrorSpec widened{1e-3, 1e-3, /*widen_for_narrow_floats=*/true};
  for (PrimitiveType type : {PrimitiveType::F16, PrimitiveType::BF16}) {
    Literal a = FloatsOf(type, {31.6875});
    Literal b = FloatsOf(type, {31.84375});
    EXPECT_FALSE(ExpectLiteralNear(a, b, f32_spec).ok());
    EXPECT_TRUE(ExpectLiteralNear(a, b, widened).ok()) << PrimitiveTypeName(type);
    EXPECT_FALSE(ExpectLiteralNear(a, FloatsOf(type, {32.5}), widened).ok()) << PrimitiveTypeName(type);
  }
  // f32 keeps the tolerance given, in a tuple beside an f16 that is widened.
  Literal expected = Literal::MakeTuple({FloatsOf(PrimitiveType::F16, {31.6875}),
                                         FloatsOf(PrimitiveType::F32, {31.6875})});
  Literal actual = Literal::MakeTuple({FloatsOf(PrimitiveType::F16, {31.84375}),
                                       FloatsOf(PrimitiveType::F32, {31.84375})});
  Status s = ExpectLiteralNear(expected, actual, widened);
  EXPECT_THAT(s.message(), ::testing::StartsWith("result{1} element {0}: expected 31.6875, got 31.84375"));
}

TEST(ShapeTest, PrintsDynamicAndTupleShapes) {
  Shape s(PrimitiveType::F32, {4, Shape::kUnboundedSize, 3});
  s.set_dynamic_dimension(0, true);
  EXPECT_EQ(s.ToString(), "f32[<=4,?,3]");
  s.SetDefaultLayout();
  EXPECT_EQ(s.ToString(), "f32[<=4,?,3]{2,1,0}");
  Shape t = Shape::Tuple({Shape::Scalar(PrimitiveType::PRED), Shape::Token(), Shape::Tuple({})});
  EXPECT_EQ(t.ToString(), "(pred[], token[], ())");
  EXPECT_EQ(shape_util::ByteSizeOf(Shape(PrimitiveType::C128, {3})), 48);
}

}  // namespace
}  // namespace xlens
