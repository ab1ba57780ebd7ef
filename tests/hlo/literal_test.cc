#include "compiler/hlo/literal.h"

#include <cmath>
#include <limits>

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
