// The elemental emitter, op by op, on the corners of XLA's semantics: every result is checked
// against the reference evaluator (exactly, unless said otherwise) and against values known by
// hand.
#include "compiler/codegen/elemental_ir_emitter.h"

#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "codegen_test_util.h"
#include "compiler/hlo/native_types.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using testing::ExpectMatchesEvaluator;

template <typename T>
Literal R1(PrimitiveType type, std::vector<T> values) {
  return Literal::CreateR1<T>(type, values);
}
template <typename T>
std::vector<T> Values(const Literal& literal) {
  auto d = literal.data<T>();
  return {d.begin(), d.end()};
}

TEST(ElementalIrEmitterTest, IntegerDivisionByZeroAndOverflowFollowXla) {
  const char* text = R"(HloModule m
ENTRY e {
  a = s32[4] parameter(0)
  b = s32[4] parameter(1)
  d = s32[4] divide(a, b)
  r = s32[4] remainder(a, b)
  ROOT t = (s32[4], s32[4]) tuple(d, r)
})";
  const int32_t min = std::numeric_limits<int32_t>::min();
  std::vector<Literal> args;
  args.push_back(R1<int32_t>(PrimitiveType::S32, {7, min, -7, 5}));
  args.push_back(R1<int32_t>(PrimitiveType::S32, {0, -1, 2, -3}));
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_THAT(Values<int32_t>(out.tuple_element(0)), ElementsAre(-1, min, -3, -1));
  EXPECT_THAT(Values<int32_t>(out.tuple_element(1)), ElementsAre(7, 0, -1, 2));
}

TEST(ElementalIrEmitterTest, ShiftsBeyondTheWidthShiftEverythingOut) {
  const char* text = R"(HloModule m
ENTRY e {
  a = s32[3] parameter(0)
  b = s32[3] parameter(1)
  l = s32[3] shift-left(a, b)
  r = s32[3] shift-right-arithmetic(a, b)
  u = s32[3] shift-right-logical(a, b)
  ROOT t = (s32[3], s32[3], s32[3]) tuple(l, r, u)
})";
  std::vector<Literal> args;
  args.push_back(R1<int32_t>(PrimitiveType::S32, {1, -8, -8}));
  args.push_back(R1<int32_t>(PrimitiveType::S32, {32, 40, 1}));
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_THAT(Values<int32_t>(out.tuple_element(0)), ElementsAre(0, 0, -16));
  EXPECT_THAT(Values<int32_t>(out.tuple_element(1)), ElementsAre(0, -1, -4));
  EXPECT_THAT(Values<int32_t>(out.tuple_element(2)), ElementsAre(0, 0, 0x7ffffffc));
}

TEST(ElementalIrEmitterTest, FloatToIntegerConvertSaturatesAndMapsNanToZero) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[5] parameter(0)
  ROOT c = s32[5] convert(a)
})";
  std::vector<Literal> args;
  args.push_back(R1<float>(PrimitiveType::F32, {std::nanf(""), 1e10f, -1e10f, 3.7f, -3.7f}));
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_THAT(Values<int32_t>(out), ElementsAre(0, std::numeric_limits<int32_t>::max(),
                                                std::numeric_limits<int32_t>::min(), 3, -3));
}

TEST(ElementalIrEmitterTest, HalfAndBfloatRoundOncePerOperation) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f16[64] parameter(0)
  b = bf16[64] parameter(1)
  x = f16[64] multiply(a, a)
  y = f16[64] add(x, a)
  c = bf16[64] convert(y)
  d = bf16[64] divide(c, b)
  f = f64[64] convert(d)
  g = f16[64] convert(f)
  ROOT t = (f16[64], bf16[64], f16[64]) tuple(y, d, g)
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, ReducePrecisionAndTotalOrderCompare) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[6] parameter(0)
  r = f32[6] reduce-precision(a), exponent_bits=5, mantissa_bits=2
  z = f32[6] negate(a)
  c = pred[6] compare(a, z), direction=LT, type=TOTALORDER
  ROOT t = (f32[6], pred[6]) tuple(r, c)
})";
  std::vector<Literal> args;
  args.push_back(R1<float>(PrimitiveType::F32, {0.0f, 1.3f, 1e6f, 1e-7f, std::nanf(""), -2.6f}));
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_EQ(Values<float>(out.tuple_element(0))[1], 1.25f);
  EXPECT_TRUE(std::isinf(Values<float>(out.tuple_element(0))[2]));
  // -0 < +0 in the total order.
  EXPECT_EQ(out.tuple_element(1).data<bool>()[0], false);
}

TEST(ElementalIrEmitterTest, ComplexArithmeticAndFunctions) {
  const char* text = R"(HloModule m
ENTRY e {
  a = c64[8] parameter(0)
  b = c64[8] parameter(1)
  m = c64[8] multiply(a, b)
  d = c64[8] divide(m, b)
  x = c64[8] exponential(d)
  s = c64[8] sqrt(x)
  n = f32[8] abs(s)
  r = f32[8] real(s)
  ROOT t = (c64[8], f32[8], f32[8]) tuple(s, n, r)
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, PadWithNegativeAndInteriorPadding) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[3,4] parameter(0)
  z = f32[] constant(-9)
  ROOT p = f32[6,6] pad(a, z), padding=1_0_1x-1_0_1
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, GatherDynamicSliceAndUpdateClampTheirStarts) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[5,6] parameter(0)
  i = s32[3,2] parameter(1)
  g = f32[3,2,2] gather(a, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
  s = s32[] constant(4)
  t = s32[] constant(-3)
  ds = f32[3,3] dynamic-slice(a, s, t), dynamic_slice_sizes={3,3}
  u = f32[2,2] constant({{100, 101}, {102, 103}})
  dus = f32[5,6] dynamic-update-slice(a, u, s, s)
  ROOT r = (f32[3,2,2], f32[3,3], f32[5,6]) tuple(g, ds, dus)
})";
  std::vector<Literal> args;
  std::mt19937_64 rng(3);
  args.push_back(MakeRandomLiteral(Shape(PrimitiveType::F32, {5, 6}), rng).value());
  args.push_back(R1<int32_t>(PrimitiveType::S32, {0, 0, 4, 5, -2, 9}));
  args.back() = Literal(Shape(PrimitiveType::S32, {3, 2}));
  auto idx = args.back().data<int32_t>();
  const int32_t values[] = {0, 0, 4, 5, -2, 9};
  for (int i = 0; i < 6; ++i) idx[i] = values[i];
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  // The update lands at the clamped start (3, 4).
  EXPECT_EQ(out.tuple_element(2).data<float>()[3 * 6 + 4], 100.0f);
}

// Unsigned starts and indices are unsigned: a u64 of 2^63 or more is past every end, so it clamps
// to the end (dynamic-slice, dynamic-update-slice, gather) or is skipped (scatter), as the
// evaluator and XLA do. Read as s64 it was negative: clamped to 0, or wrapped.
TEST(ElementalIrEmitterTest, UnsignedStartsAndIndicesPastInt64MaxClampToTheEnd) {
  const char* text = R"(HloModule m
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
ENTRY e {
  a = f32[8] parameter(0)
  s = u64[] parameter(1)
  i = u64[2,1] parameter(2)
  w = u32[] parameter(3)
  ds = f32[2] dynamic-slice(a, s), dynamic_slice_sizes={2}
  ds32 = f32[2] dynamic-slice(a, w), dynamic_slice_sizes={2}
  u = f32[2] constant({100, 101})
  dus = f32[8] dynamic-update-slice(a, u, s)
  g = f32[2,3] gather(a, i), offset_dims={1}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={3}
  m = f32[2,2] constant({{1000, 1000}, {1000, 1000}})
  sc = f32[8] scatter(a, i, m), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
  ROOT r = (f32[2], f32[2], f32[8], f32[2,3], f32[8]) tuple(ds, ds32, dus, g, sc)
})";
  std::vector<Literal> args;
  args.push_back(R1<float>(PrimitiveType::F32, {0, 1, 2, 3, 4, 5, 6, 7}));
  args.push_back(Literal::CreateR0<uint64_t>(PrimitiveType::U64, uint64_t{1} << 63));
  args.push_back(Literal(Shape(PrimitiveType::U64, {2, 1})));
  args.back().data<uint64_t>()[0] = ~uint64_t{0};
  args.back().data<uint64_t>()[1] = 1;
  args.push_back(Literal::CreateR0<uint32_t>(PrimitiveType::U32, 0xffffffffu));
  Literal out = ExpectMatchesEvaluator(text, std::move(args));
  EXPECT_THAT(Values<float>(out.tuple_element(0)), ElementsAre(6, 7));
  EXPECT_THAT(Values<float>(out.tuple_element(1)), ElementsAre(6, 7));
  EXPECT_THAT(Values<float>(out.tuple_element(2)), ElementsAre(0, 1, 2, 3, 4, 5, 100, 101));
  EXPECT_THAT(Values<float>(out.tuple_element(3)), ElementsAre(5, 6, 7, 1, 2, 3));
  // Only index 1 is in range: the window at 2^64-1 is skipped.
  EXPECT_THAT(Values<float>(out.tuple_element(4)), ElementsAre(0, 1001, 1002, 3, 4, 5, 6, 7));
}

TEST(ElementalIrEmitterTest, ReduceWindowWithBaseDilationAndPadding) {
  const char* text = R"(HloModule m
add { a = f32[] parameter(0)  b = f32[] parameter(1)  ROOT r = f32[] add(a, b) }
ENTRY e {
  a = f32[4,5] parameter(0)
  z = f32[] constant(0)
  ROOT w = f32[4,5] reduce-window(a, z), window={size=2x3 stride=2x1 pad=1_1x1_1 lhs_dilate=2x1}, to_apply=add
})";
  ExpectMatchesEvaluator(text, {}, {1e-6, 1e-6});
}

TEST(ElementalIrEmitterTest, ConvolutionWithFeatureGroupsAndDilation) {
  const char* text = R"(HloModule m
ENTRY e {
  x = f32[2,7,7,4] parameter(0)
  k = f32[3,3,2,6] parameter(1)
  ROOT c = f32[2,4,7,6] convolution(x, k), window={size=3x3 stride=2x1 pad=1_1x1_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=2
})";
  ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
}

TEST(ElementalIrEmitterTest, TransposeBitcastAndReshapeAcrossLayouts) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[4,6]{0,1} parameter(0)
  t = f32[6,4]{1,0} transpose(a), dimensions={1,0}
  r = f32[3,8]{1,0} reshape(t)
  v = f32[2,3,4]{2,1,0} reshape(r)
  ROOT c = f32[2,3,4]{0,1,2} copy(v)
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, ReshapedRowMajorArraysAreReadAtTheRowMajorPosition) {
  // A reshape between row-major arrays reads its operand at the result's own row-major position
  // (no division per dimension): through an elementwise op, from a parameter beside one of the
  // result's shape, through two reshapes in a row; an operand in another layout is still read
  // through its own index.
  const char* text = R"(HloModule m
ENTRY e {
  x = f32[4,3,5,2]{3,2,1,0} parameter(0)
  y = f32[4,30]{1,0} parameter(1)
  z = f32[4,30]{0,1} parameter(2)
  c = f32[] constant(0)
  cb = f32[4,3,5,2]{3,2,1,0} broadcast(c), dimensions={}
  m = f32[4,3,5,2]{3,2,1,0} maximum(x, cb)
  r = f32[4,30]{1,0} reshape(m)
  a = f32[4,30]{1,0} add(r, y)
  ry = f32[4,3,5,2]{3,2,1,0} reshape(y)
  rz = f32[4,3,5,2]{3,2,1,0} reshape(z)
  b = f32[4,3,5,2]{3,2,1,0} multiply(ry, rz)
  r2 = f32[12,10]{1,0} reshape(b)
  r3 = f32[6,20]{1,0} reshape(r2)
  ROOT t = (f32[4,30]{1,0}, f32[6,20]{1,0}) tuple(a, r3)
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, VariadicReduceArgmax) {
  const std::string text = std::string("HloModule m\n") + testing::kArgmax + R"(
ENTRY e {
  a = f32[5,9] parameter(0)
  i = s32[5,9] iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  z = s32[] constant(0)
  ROOT r = (f32[5], s32[5]) reduce(a, i, lo, z), dimensions={1}, to_apply=argmax
})";
  ExpectMatchesEvaluator(text);
}

TEST(ElementalIrEmitterTest, UnsupportedOpcodesAreNamedNotCrashed) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[8] parameter(0)
  ROOT c = f32[8] custom-call(a), custom_call_target="my_op"
})";
  auto result = testing::CompileAndRun(text, testing::RandomArguments(text));
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), ::testing::HasSubstr("custom-call \"my_op\""));
}

}  // namespace
}  // namespace xlens
