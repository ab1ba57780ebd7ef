#include "compiler/hlo/shape.h"

#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace xlens {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

TEST(ShapeTest, SizesNeverWrap) {
  // 2^32 * 2^32 wrapped to 0, and a literal of that shape got an empty buffer.
  Shape wide(PrimitiveType::F32, {4294967296, 4294967296});
  EXPECT_EQ(wide.num_elements(), kMax);
  EXPECT_EQ(shape_util::ByteSizeOf(wide), kMax);
  Shape bytes_overflow(PrimitiveType::F32, {int64_t{1} << 62});
  EXPECT_EQ(bytes_overflow.num_elements(), int64_t{1} << 62);
  EXPECT_EQ(shape_util::ByteSizeOf(bytes_overflow), kMax);
  EXPECT_EQ(shape_util::ByteSizeOf(Shape::Tuple({bytes_overflow, Shape(PrimitiveType::F32, {1})})),
            kMax);
  EXPECT_EQ(Shape(PrimitiveType::F32, {0, 4294967296, 4294967296}).num_elements(), 0);
  EXPECT_EQ(Shape(PrimitiveType::F32, {3, 5}).num_elements(), 15);
}

TEST(ShapeTest, CheckedSizes) {
  EXPECT_EQ(shape_util::CheckedElementCount(Shape(PrimitiveType::F32, {3, 5})), 15);
  EXPECT_EQ(shape_util::CheckedByteSize(Shape(PrimitiveType::F32, {3, 5})), 60);
  EXPECT_EQ(shape_util::CheckedElementCount(Shape(PrimitiveType::F32, {4294967296, 4294967296})),
            std::nullopt);
  EXPECT_EQ(shape_util::CheckedElementCount(Shape(PrimitiveType::F32, {0, 4294967296, 4294967296})),
            std::nullopt);
  EXPECT_EQ(shape_util::CheckedByteSize(Shape(PrimitiveType::F32, {int64_t{1} << 61})),
            std::nullopt);
  EXPECT_EQ(shape_util::CheckedByteSize(Shape(PrimitiveType::F32, {0, int64_t{1} << 61})),
            std::nullopt);
  EXPECT_EQ(shape_util::CheckedByteSize(Shape(PrimitiveType::F32, {(int64_t{1} << 61) - 1})),
            kMax - 3);
  Shape half(PrimitiveType::F32, {int64_t{1} << 60});
  EXPECT_EQ(shape_util::CheckedByteSize(Shape::Tuple({half, half})), std::nullopt);
  EXPECT_EQ(shape_util::CheckedByteSize(Shape::Tuple({half})), int64_t{1} << 62);
  // Unbounded dynamic dimensions have no size to overflow.
  EXPECT_EQ(shape_util::CheckedByteSize(Shape(PrimitiveType::F32, {Shape::kUnboundedSize, 4})), 16);
}

TEST(ShapeTest, CheckShapeSizeNamesTheLeafAndItsCount) {
  Status status = shape_util::CheckShapeSize(
      Shape::Tuple({Shape(PrimitiveType::F32, {2}),
                    Shape(PrimitiveType::S32, {4294967296, 4294967296, 4294967296})}));
  EXPECT_THAT(status.message(), HasSubstr("s32[4294967296,4294967296,4294967296] has "
                                          "79228162514264337593543950336 elements"));
  EXPECT_TRUE(shape_util::CheckShapeSize(Shape(PrimitiveType::F32, {1024, 1024})).ok());
}

}  // namespace
}  // namespace xlens
