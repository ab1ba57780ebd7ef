// The reference evaluator on data movement, reductions, dot, convolution, gather, scatter and
// sort, with hand-computed results.
#include "compiler/hlo/evaluator.h"

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "evaluator_test_util.h"

namespace xlens {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using xlens::testing::DoubleValues;
using xlens::testing::EvaluateText;
using xlens::testing::MakeLiteral;
using xlens::testing::Values;

Literal Eval(std::string_view text, const std::vector<Literal>& arguments = {}) {
  StatusOr<Literal> result = EvaluateText(text, arguments);
  EXPECT_TRUE(result.ok()) << result.status().message();
  return result.ok() ? std::move(result).value() : Literal();
}

// --- Data movement

TEST(EvaluatorOpsTest, BroadcastReshapeTranspose) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[2] constant({1, 2})
  b = s32[2,3] broadcast(a), dimensions={0}
  m = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  t = s32[3,2] transpose(m), dimensions={1,0}
  r = s32[3,2] reshape(m)
  s = s32[] constant(9)
  bs = s32[2,2] broadcast(s), dimensions={}
  ROOT out = (s32[2,3], s32[3,2], s32[3,2], s32[2,2]) tuple(b, t, r, bs)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(1, 1, 1, 2, 2, 2));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(2)), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(3)), ElementsAre(9, 9, 9, 9));
}

TEST(EvaluatorOpsTest, Transpose3d) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[2,2,3] iota(), iota_dimension=2
  b = s32[2,2,3] iota(), iota_dimension=0
  ten_scalar = s32[] constant(10)
  ten = s32[2,2,3] broadcast(ten_scalar), dimensions={}
  c = s32[2,2,3] multiply(b, ten)
  d = s32[2,2,3] add(a, c)
  ROOT t = s32[3,2,2] transpose(d), dimensions={2,0,1}
})");
  // d[i][j][k] = 10 i + k; t[k][i][j] = d[i][j][k].
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(0, 0, 10, 10, 1, 1, 11, 11, 2, 2, 12, 12));
}

TEST(EvaluatorOpsTest, BitcastIsAPhysicalReinterpretation) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  m = f32[2,3]{1,0} constant({ {1, 2, 3}, {4, 5, 6} })
  col = f32[3,2]{0,1} bitcast(m)
  flat = f32[6]{0} bitcast(m)
  ROOT out = (f32[3,2]{0,1}, f32[6]{0}) tuple(col, flat)
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(1, 4, 2, 5, 3, 6));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(1, 2, 3, 4, 5, 6));
}

TEST(EvaluatorOpsTest, SliceWithStrides) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[5] iota(), iota_dimension=0
  s = s32[3] slice(a), slice={[0:5:2]}
  m = s32[3,4] iota(), iota_dimension=1
  t = s32[2,2] slice(m), slice={[1:3], [1:4:2]}
  ROOT out = (s32[3], s32[2,2]) tuple(s, t)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(0, 2, 4));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(1, 3, 1, 3));
}

TEST(EvaluatorOpsTest, DynamicSliceClampsStartIndices) {
  constexpr std::string_view kText = R"(HloModule m
ENTRY e {
  a = s32[5] iota(), iota_dimension=0
  i = s32[] parameter(0)
  ROOT s = s32[2] dynamic-slice(a, i), dynamic_slice_sizes={2}
})";
  auto run = [&](int32_t start) {
    return Values<int32_t>(Eval(kText, {Literal::CreateR0<int32_t>(PrimitiveType::S32, start)}));
  };
  EXPECT_THAT(run(1), ElementsAre(1, 2));
  EXPECT_THAT(run(4), ElementsAre(3, 4));
  EXPECT_THAT(run(100), ElementsAre(3, 4));
  EXPECT_THAT(run(-2), ElementsAre(0, 1));
}

TEST(EvaluatorOpsTest, DynamicUpdateSliceClampsStartIndices) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  zero = f32[] constant(0)
  a = f32[3,4] broadcast(zero), dimensions={}
  u = f32[2,2] constant({ {1, 2}, {3, 4} })
  i = s64[] constant(10)
  j = s64[] constant(-3)
  ROOT d = f32[3,4] dynamic-update-slice(a, u, i, j)
})");
  EXPECT_THAT(Values<float>(result), ElementsAre(0, 0, 0, 0, 1, 2, 0, 0, 3, 4, 0, 0));
}

TEST(EvaluatorOpsTest, Concatenate) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[2,1] constant({ {1}, {2} })
  b = s32[2,2] constant({ {3, 4}, {5, 6} })
  ROOT r = s32[2,3] concatenate(a, b), dimensions={1}
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(1, 3, 4, 2, 5, 6));
}

TEST(EvaluatorOpsTest, PadWithNegativeEdgesAndInteriorPadding) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[3] constant({1, 2, 3})
  z = s32[] constant(0)
  p = s32[5] pad(a, z), padding=-1_1_1
  m = s32[2,2] constant({ {1, 2}, {3, 4} })
  nine = s32[] constant(9)
  q = s32[3,3] pad(m, nine), padding=1_0x0_-1_2
  ROOT out = (s32[5], s32[3,3]) tuple(p, q)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(0, 2, 0, 3, 0));
  // Each row becomes {a, 9, 9, b} and the high padding of -1 drops b.
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(9, 9, 9, 1, 9, 9, 3, 9, 9));
}

TEST(EvaluatorOpsTest, Reverse) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  r0 = s32[2,3] reverse(a), dimensions={1}
  r1 = s32[2,3] reverse(a), dimensions={0,1}
  ROOT out = (s32[2,3], s32[2,3]) tuple(r0, r1)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(3, 2, 1, 6, 5, 4));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(6, 5, 4, 3, 2, 1));
}

// --- Reductions

constexpr std::string_view kAddF32 = R"(
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
)";

TEST(EvaluatorOpsTest, ReduceOverEachDimension) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddF32) + R"(
ENTRY e {
  a = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  z = f32[] constant(0)
  rows = f32[2] reduce(a, z), dimensions={1}, to_apply=add
  cols = f32[3] reduce(a, z), dimensions={0}, to_apply=add
  all = f32[] reduce(a, z), dimensions={0,1}, to_apply=add
  ROOT out = (f32[2], f32[3], f32[]) tuple(rows, cols, all)
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(6, 15));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(5, 7, 9));
  EXPECT_THAT(Values<float>(result.tuple_element(2)), ElementsAre(21));
}

TEST(EvaluatorOpsTest, ReduceInHalfRoundsEachStep) {
  Literal result = Eval(R"(HloModule m
add {
  x = f16[] parameter(0)
  y = f16[] parameter(1)
  ROOT s = f16[] add(x, y)
}
ENTRY e {
  a = f16[4] constant({2048, 1, 1, 1})
  z = f16[] constant(0)
  ROOT r = f16[] reduce(a, z), dimensions={0}, to_apply=add
})");
  EXPECT_THAT(DoubleValues(result), ElementsAre(2048));
}

TEST(EvaluatorOpsTest, VariadicReduceComputesArgmax) {
  Literal result = Eval(R"(HloModule m
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v1, v0), direction=GT
  v = f32[] select(gt, v1, v0)
  i = s32[] select(gt, i1, i0)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
ENTRY e {
  a = f32[2,4] constant({ {3, 9, 1, 9}, {-1, -5, 0, -2} })
  idx = s32[2,4] iota(), iota_dimension=1
  lo = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[2], s32[2]) reduce(a, idx, lo, zero), dimensions={1}, to_apply=argmax
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(9, 0));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(1, 2));
}

TEST(EvaluatorOpsTest, ReduceWindowWithStridePaddingAndDilations) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddF32) + R"(
ENTRY e {
  a = f32[4] constant({1, 2, 3, 4})
  z = f32[] constant(0)
  plain = f32[3] reduce-window(a, z), window={size=2}, to_apply=add
  padded = f32[3] reduce-window(a, z), window={size=2 stride=2 pad=1_1}, to_apply=add
  b = f32[3] constant({1, 2, 3})
  base = f32[4] reduce-window(b, z), window={size=2 lhs_dilate=2}, to_apply=add
  c = f32[5] constant({1, 2, 3, 4, 5})
  holes = f32[3] reduce-window(c, z), window={size=2 rhs_dilate=2}, to_apply=add
  ROOT out = (f32[3], f32[3], f32[4], f32[3]) tuple(plain, padded, base, holes)
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(3, 5, 7));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(1, 5, 4));
  EXPECT_THAT(Values<float>(result.tuple_element(2)), ElementsAre(1, 2, 2, 3));
  EXPECT_THAT(Values<float>(result.tuple_element(3)), ElementsAre(4, 6, 8));
}

TEST(EvaluatorOpsTest, VariadicReduceWindow) {
  Literal result = Eval(R"(HloModule m
sum2 {
  a0 = f32[] parameter(0)
  a1 = s32[] parameter(1)
  x0 = f32[] parameter(2)
  x1 = s32[] parameter(3)
  s0 = f32[] add(a0, x0)
  s1 = s32[] maximum(a1, x1)
  ROOT t = (f32[], s32[]) tuple(s0, s1)
}
ENTRY e {
  a = f32[2,2] constant({ {1, 2}, {3, 4} })
  b = s32[2,2] constant({ {5, -1}, {0, 7} })
  z = f32[] constant(0)
  m = s32[] constant(-100)
  ROOT r = (f32[1,2], s32[1,2]) reduce-window(a, b, z, m), window={size=2x1}, to_apply=sum2
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(4, 6));
  EXPECT_THAT(Values<int32_t>(result.tuple_element(1)), ElementsAre(5, 7));
}

TEST(EvaluatorOpsTest, SelectAndScatter) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddF32) + R"(
ge {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=GE
}
ENTRY e {
  operand = f32[6] constant({1, 5, 3, 2, 7, 7})
  source = f32[3] constant({10, 20, 30})
  z = f32[] constant(0)
  ROOT s = f32[6] select-and-scatter(operand, source, z), window={size=2 stride=2}, select=ge, scatter=add
})");
  // Ties keep the first element: the window {7, 7} selects index 4.
  EXPECT_THAT(Values<float>(result), ElementsAre(0, 10, 20, 0, 30, 0));
}

TEST(EvaluatorOpsTest, SelectAndScatterAccumulatesOverlappingWindows) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddF32) + R"(
ge {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT c = pred[] compare(x, y), direction=GE
}
ENTRY e {
  operand = f32[4] constant({1, 9, 3, 2})
  source = f32[4] constant({1, 2, 4, 8})
  z = f32[] constant(0)
  ROOT s = f32[4] select-and-scatter(operand, source, z), window={size=2 pad=0_1}, select=ge, scatter=add
})");
  // Windows {1,9} {9,3} {3,2} {2,pad} select indices 1, 1, 2, 3.
  EXPECT_THAT(Values<float>(result), ElementsAre(0, 3, 4, 8));
}

// --- Dot and convolution

TEST(EvaluatorOpsTest, MatrixProduct) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  b = f32[3,2] constant({ {7, 8}, {9, 10}, {11, 12} })
  ROOT d = f32[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
})");
  EXPECT_THAT(Values<float>(result), ElementsAre(58, 64, 139, 154));
}

TEST(EvaluatorOpsTest, BatchDotWithTransposedOperands) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = f64[2,2,2] constant({ { {1, 2}, {3, 4} }, { {5, 6}, {7, 8} } })
  b = f64[2,2,2] constant({ { {1, 0}, {0, 1} }, { {0, 1}, {1, 0} } })
  ROOT d = f64[2,2,2] dot(a, b), lhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_batch_dims={0}, rhs_contracting_dims={2}
})");
  // Batch 0: a0^T * b0^T = a0^T; batch 1: a1^T * b1^T where b1 swaps columns.
  EXPECT_THAT(Values<double>(result), ElementsAre(1, 3, 2, 4, 7, 5, 8, 6));
}

TEST(EvaluatorOpsTest, IntegerDotAccumulatesInTheResultType) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = s8[1,2] constant({ {100, -128} })
  b = s8[2,1] constant({ {100}, {-128} })
  wide = s32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  narrow = s8[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (s32[1,1], s8[1,1]) tuple(wide, narrow)
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(26384));
  EXPECT_THAT(Values<int8_t>(result.tuple_element(1)), ElementsAre(16));
}

TEST(EvaluatorOpsTest, Bfloat16DotAccumulatesInF32) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = bf16[1,3] constant({ {256, 1, 1} })
  b = bf16[3,1] constant({ {1}, {1}, {1} })
  f = f32[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  h = bf16[1,1] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT out = (f32[1,1], bf16[1,1]) tuple(f, h)
})");
  EXPECT_THAT(Values<float>(result.tuple_element(0)), ElementsAre(258));
  EXPECT_THAT(DoubleValues(result.tuple_element(1)), ElementsAre(258));
}

TEST(EvaluatorOpsTest, ComplexDot) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  a = c64[2] constant({(1, 1), (0, 2)})
  b = c64[2] constant({(2, 0), (1, 1)})
  ROOT d = c64[] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}
})");
  // (1+i)2 + 2i(1+i) = 2+2i + 2i-2 = 4i.
  EXPECT_THAT(Values<complex64>(result), ElementsAre(complex64(0, 4)));
}

constexpr std::string_view kConvInput = R"(
  x = f32[1,1,5] constant({ { {1, 2, 3, 4, 5} } })
  k = f32[1,1,2] constant({ { {1, 2} } })
)";

std::vector<float> Conv1d(std::string_view window, int64_t out_size) {
  const std::string text = "HloModule m\nENTRY e {\n" + std::string(kConvInput) +
                           fmt::format("  ROOT c = f32[1,1,{}] convolution(x, k), window={{{}}}, "
                                       "dim_labels=bf0_oi0->bf0\n}}\n",
                                       out_size, window);
  return Values<float>(Eval(text));
}

TEST(EvaluatorOpsTest, ConvolutionWindowAttributes) {
  // out[i] = x[i] + 2 x[i+1] over the (padded, dilated) input.
  EXPECT_THAT(Conv1d("size=2", 4), ElementsAre(5, 8, 11, 14));
  EXPECT_THAT(Conv1d("size=2 pad=1_1", 6), ElementsAre(2, 5, 8, 11, 14, 5));
  EXPECT_THAT(Conv1d("size=2 stride=2", 2), ElementsAre(5, 11));
  EXPECT_THAT(Conv1d("size=2 rhs_dilate=2", 3), ElementsAre(7, 10, 13));
  EXPECT_THAT(Conv1d("size=2 lhs_dilate=2", 8), ElementsAre(1, 4, 2, 6, 3, 8, 4, 10));
  EXPECT_THAT(Conv1d("size=2 rhs_reversal=1", 4), ElementsAre(4, 7, 10, 13));
  EXPECT_THAT(Conv1d("size=2 pad=-1_0", 3), ElementsAre(8, 11, 14));
}

TEST(EvaluatorOpsTest, ConvolutionWithFeatureGroups) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  x = f32[1,2,3] constant({ { {1, 2, 3}, {10, 20, 30} } })
  k = f32[4,1,1] constant({ { {1} }, { {-1} }, { {2} }, { {3} } })
  ROOT c = f32[1,4,3] convolution(x, k), window={size=1}, dim_labels=bf0_oi0->bf0, feature_group_count=2
})");
  EXPECT_THAT(Values<float>(result),
              ElementsAre(1, 2, 3, -1, -2, -3, 20, 40, 60, 30, 60, 90));
}

TEST(EvaluatorOpsTest, ConvolutionWithBatchGroups) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  x = f32[2,1,3] constant({ { {1, 2, 3} }, { {10, 20, 30} } })
  k = f32[2,1,2] constant({ { {1, 1} }, { {1, -1} } })
  ROOT c = f32[1,2,2] convolution(x, k), window={size=2}, dim_labels=bf0_oi0->bf0, batch_group_count=2
})");
  // Output feature 0 reads batch 0 with {1, 1}; feature 1 reads batch 1 with {1, -1}.
  EXPECT_THAT(Values<float>(result), ElementsAre(3, 5, -10, -10));
}

TEST(EvaluatorOpsTest, Convolution2dInNhwcWithIntegerAccumulation) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  x = s32[1,3,3,1] iota(), iota_dimension=1
  k = s32[2,2,1,2] constant({ { { {1, 0} }, { {1, 0} } }, { { {0, 1} }, { {0, 1} } } })
  ROOT c = s32[1,2,2,2] convolution(x, k), window={size=2x2}, dim_labels=b01f_01io->b01f
})");
  // x[h][w] = h. Feature 0 sums row h twice, feature 1 sums row h+1 twice.
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(0, 2, 0, 2, 2, 4, 2, 4));
}

// --- Gather and scatter

TEST(EvaluatorOpsTest, GatherRowsClampingStartIndices) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  operand = s32[3,2] constant({ {1, 2}, {3, 4}, {5, 6} })
  indices = s32[3] constant({2, 0, 7})
  ROOT g = s32[3,2] gather(operand, indices), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(5, 6, 1, 2, 5, 6));
}

TEST(EvaluatorOpsTest, GatherWindowsWithIndexVectors) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  operand = s32[3,3] constant({ {1, 2, 3}, {4, 5, 6}, {7, 8, 9} })
  indices = s32[2,2] constant({ {0, 1}, {2, 2} })
  ROOT g = s32[2,2,2] gather(operand, indices), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0,1}, index_vector_dim=1, slice_sizes={2,2}
})");
  // The second start (2, 2) is clamped to (1, 1).
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(2, 3, 5, 6, 5, 6, 8, 9));
}

TEST(EvaluatorOpsTest, GatherWithBatchingDimensions) {
  Literal result = Eval(R"(HloModule m
ENTRY e {
  operand = s32[2,3] constant({ {1, 2, 3}, {4, 5, 6} })
  indices = s32[2] constant({2, 1})
  ROOT g = s32[2] gather(operand, indices), offset_dims={}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={0}, index_vector_dim=1, slice_sizes={1,1}
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(3, 5));
}

constexpr std::string_view kAddS32 = R"(
add {
  x = s32[] parameter(0)
  y = s32[] parameter(1)
  ROOT s = s32[] add(x, y)
}
)";

TEST(EvaluatorOpsTest, ScatterAddSkipsOutOfBoundsIndices) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddS32) + R"(
ENTRY e {
  operand = s32[3] constant({0, 0, 0})
  indices = s32[5] constant({0, 2, 0, 5, -1})
  updates = s32[5] constant({1, 2, 3, 4, 5})
  ROOT s = s32[3] scatter(operand, indices, updates), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(4, 0, 2));
}

TEST(EvaluatorOpsTest, ScatterSkipsWindowsThatDoNotFit) {
  Literal result = Eval(std::string("HloModule m\n") + std::string(kAddS32) + R"(
ENTRY e {
  operand = s32[4] constant({0, 0, 0, 0})
  indices = s32[2,1] constant({ {3}, {1} })
  updates = s32[2,2] constant({ {1, 2}, {10, 20} })
  ROOT s = s32[4] scatter(operand, indices, updates), update_window_dims={1}, inserted_window_dims={}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(0, 10, 20, 0));
}

TEST(EvaluatorOpsTest, ScatterWithBatchingDimensionsOverwrites) {
  Literal result = Eval(R"(HloModule m
assign {
  x = s32[] parameter(0)
  ROOT y = s32[] parameter(1)
}
ENTRY e {
  operand = s32[2,3] constant({ {0, 0, 0}, {0, 0, 0} })
  indices = s32[2] constant({2, 0})
  updates = s32[2] constant({7, 9})
  ROOT s = s32[2,3] scatter(operand, indices, updates), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=1, to_apply=assign
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(0, 0, 7, 9, 0, 0));
}

TEST(EvaluatorOpsTest, VariadicScatterWithTupleCombiner) {
  Literal result = Eval(R"(HloModule m
combine {
  a = s32[] parameter(0)
  b = f32[] parameter(1)
  x = s32[] parameter(2)
  y = f32[] parameter(3)
  s = s32[] add(a, x)
  m = f32[] multiply(b, y)
  ROOT t = (s32[], f32[]) tuple(s, m)
}
ENTRY e {
  o0 = s32[2] constant({1, 1})
  o1 = f32[2] constant({1, 1})
  indices = s32[3] constant({1, 1, 0})
  u0 = s32[3] constant({10, 20, 30})
  u1 = f32[3] constant({2, 3, 4})
  ROOT s = (s32[2], f32[2]) scatter(o0, o1, indices, u0, u1), update_window_dims={}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=combine
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(31, 31));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(4, 6));
}

// --- Sort

TEST(EvaluatorOpsTest, StableSortOfKeysAndValues) {
  Literal result = Eval(R"(HloModule m
less {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  c = f32[] parameter(2)
  d = f32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
}
ENTRY e {
  keys = s32[6] constant({3, 1, 2, 1, 3, 0})
  values = f32[6] constant({0, 1, 2, 3, 4, 5})
  ROOT s = (s32[6], f32[6]) sort(keys, values), dimensions={0}, is_stable=true, to_apply=less
})");
  EXPECT_THAT(Values<int32_t>(result.tuple_element(0)), ElementsAre(0, 1, 1, 2, 3, 3));
  EXPECT_THAT(Values<float>(result.tuple_element(1)), ElementsAre(5, 1, 3, 2, 0, 4));
}

TEST(EvaluatorOpsTest, SortAlongTheMajorDimensionDescending) {
  Literal result = Eval(R"(HloModule m
greater {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT gt = pred[] compare(a, b), direction=GT
}
ENTRY e {
  a = f32[3,2] constant({ {1, 6}, {3, 4}, {2, 5} })
  ROOT s = f32[3,2] sort(a), dimensions={0}, to_apply=greater
})");
  EXPECT_THAT(Values<float>(result), ElementsAre(3, 6, 2, 5, 1, 4));
}

TEST(EvaluatorOpsTest, SortWithTotalOrderPlacesNanLast) {
  Literal result = Eval(R"(HloModule m
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT lt = pred[] compare(a, b), direction=LT, type=TOTALORDER
}
ENTRY e {
  a = f32[5] constant({nan, 1, -inf, -0, 0})
  ROOT s = f32[5] sort(a), dimensions={0}, to_apply=less
})");
  std::vector<float> values = Values<float>(result);
  EXPECT_EQ(values[0], -std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(values[1]));
  EXPECT_FALSE(std::signbit(values[2]));
  EXPECT_EQ(values[3], 1.0f);
  EXPECT_TRUE(std::isnan(values[4]));
}

TEST(EvaluatorOpsTest, SortWithAMultiInstructionComparator) {
  Literal result = Eval(R"(HloModule m
by_magnitude {
  a = s32[] parameter(0)
  b = s32[] parameter(1)
  abs_a = s32[] abs(a)
  abs_b = s32[] abs(b)
  fa = f32[] convert(abs_a)
  fb = f32[] convert(abs_b)
  gt = pred[] compare(fa, fb), direction=GT
  eq = pred[] compare(fa, fb), direction=EQ
  neg = pred[] compare(a, b), direction=LT
  tie = pred[] and(eq, neg)
  ROOT r = pred[] or(gt, tie)
}
ENTRY e {
  a = s32[5] constant({1, -4, 4, -2, 3})
  ROOT s = s32[5] sort(a), dimensions={0}, to_apply=by_magnitude
})");
  EXPECT_THAT(Values<int32_t>(result), ElementsAre(-4, 4, 3, -2, 1));
}

TEST(EvaluatorOpsTest, ReducerThatCallsAnotherComputation) {
  Literal result = Eval(R"(HloModule m
inner {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT m = f32[] multiply(x, y)
}
product {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] call(a, b), to_apply=inner
}
ENTRY e {
  a = f32[2,4] constant({ {1, 2, 3, 4}, {5, 6, 7, 8} })
  one = f32[] constant(1)
  ROOT r = f32[2] reduce(a, one), dimensions={1}, to_apply=product
})");
  EXPECT_THAT(Values<float>(result), ElementsAre(24, 1680));
}

TEST(EvaluatorOpsTest, ErrorsNameTheInstructionInsideCalledComputations) {
  StatusOr<Literal> result = EvaluateText(R"(HloModule m
body {
  p = f32[2] parameter(0)
  ROOT r = f32[2] custom-call(p), custom_call_target="inner"
}
ENTRY e {
  a = f32[2] constant({1, 2})
  ROOT f = f32[2] fusion(a), kind=kLoop, calls=body
})");
  ASSERT_FALSE(result.ok());
  EXPECT_THAT(result.status().message(), HasSubstr("evaluating %f"));
  EXPECT_THAT(result.status().message(), HasSubstr("evaluating %r"));
  EXPECT_THAT(result.status().message(), HasSubstr("inner"));
}

}  // namespace
}  // namespace xlens
