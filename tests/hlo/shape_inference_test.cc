#include "compiler/hlo/shape_inference.h"

#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/hlo/module.h"
#include "compiler/hlo/parser.h"

namespace xlens {
namespace {

using ::testing::HasSubstr;

// The shape inferred for the entry root of `text` (parsed without verification, so that a
// declared shape never hides what inference says).
StatusOr<Shape> InferRoot(const std::string& text) {
  StatusOr<std::unique_ptr<HloModule>> module = ParseHloModule(text, ParseOptions{.verify = false});
  if (!module.ok()) return Error("parse error: " + module.status().message());
  return InferShape(*(*module)->entry_computation()->root_instruction());
}

// `body` is the entry computation's instruction list; `prelude` holds called computations.
std::string Module(const std::string& body, const std::string& prelude = "") {
  return "HloModule m\n\n" + prelude + "\nENTRY main {\n" + body + "\n}\n";
}

void ExpectShape(const std::string& text, const std::string& expected) {
  StatusOr<Shape> shape = InferRoot(text);
  ASSERT_TRUE(shape.ok()) << shape.status().message() << "\n" << text;
  EXPECT_EQ(shape->ToString(), expected) << text;
  EXPECT_FALSE(shape->has_layout());
}

void ExpectError(const std::string& text, const std::string& message) {
  StatusOr<Shape> shape = InferRoot(text);
  ASSERT_FALSE(shape.ok()) << "inferred " << shape->ToString() << " for\n" << text;
  EXPECT_THAT(shape.status().message(), HasSubstr(message));
}

const char kAddF32[] = R"(
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT sum = f32[] add(a, b)
})";

// --- Elementwise ----------------------------------------------------------------------------

TEST(ShapeInferenceTest, ElementwiseUnaryKeepsTheOperandShape) {
  ExpectShape(Module("p = f32[2,3]{0,1} parameter(0)\nROOT e = f32[2,3] exponential(p)"),
              "f32[2,3]");
  ExpectShape(Module("p = s32[4] parameter(0)\nROOT n = s32[4] popcnt(p)"), "s32[4]");
  ExpectShape(Module("p = f16[2] parameter(0)\nROOT f = pred[2] is-finite(p)"), "pred[2]");
}

TEST(ShapeInferenceTest, ConvertTakesTheDeclaredElementType) {
  ExpectShape(Module("p = f32[2,3] parameter(0)\nROOT c = bf16[2,3] convert(p)"), "bf16[2,3]");
}

TEST(ShapeInferenceTest, BitcastConvertAddsOrDropsAMinorDimension) {
  ExpectShape(Module("p = f32[2] parameter(0)\nROOT c = s32[2] bitcast-convert(p)"), "s32[2]");
  ExpectShape(Module("p = f32[2] parameter(0)\nROOT c = u8[2,4] bitcast-convert(p)"), "u8[2,4]");
  ExpectShape(Module("p = u16[3,2] parameter(0)\nROOT c = f32[3] bitcast-convert(p)"), "f32[3]");
  ExpectError(Module("p = u16[3,4] parameter(0)\nROOT c = f32[3] bitcast-convert(p)"),
              "the minor dimension must have size 2");
}

TEST(ShapeInferenceTest, ComplexPartsAndAbsGiveTheComponentType) {
  ExpectShape(Module("p = c64[2] parameter(0)\nROOT r = f32[2] real(p)"), "f32[2]");
  ExpectShape(Module("p = c128[2] parameter(0)\nROOT i = f64[2] imag(p)"), "f64[2]");
  ExpectShape(Module("p = c64[2] parameter(0)\nROOT a = f32[2] abs(p)"), "f32[2]");
  ExpectShape(Module("a = f64[2] parameter(0)\nb = f64[2] parameter(1)\n"
                     "ROOT c = c128[2] complex(a, b)"),
              "c128[2]");
}

TEST(ShapeInferenceTest, BinaryOpsNeedTheSameDimensionsAndType) {
  ExpectShape(Module("a = f32[2,2] parameter(0)\nb = f32[2,2] parameter(1)\n"
                     "ROOT s = add(a, b)"),
              "f32[2,2]");
  ExpectShape(Module("a = s32[3] parameter(0)\nb = s32[3] parameter(1)\n"
                     "ROOT c = compare(a, b), direction=LT"),
              "pred[3]");
  ExpectError(Module("a = f32[2,2] parameter(0)\nb = f32[2,5] parameter(1)\n"
                     "ROOT s = f32[2,2] add(a, b)"),
              "operands must have the same dimensions");
  ExpectError(Module("a = f32[] parameter(0)\nb = f32[4] parameter(1)\n"
                     "ROOT s = f32[4] multiply(a, b)"),
              "operands must have the same dimensions");
  ExpectError(Module("a = f32[4] parameter(0)\nb = s32[4] parameter(1)\n"
                     "ROOT s = f32[4] add(a, b)"),
              "operands must have the same element type");
  ExpectError(Module("a = f32[4] parameter(0)\nb = f32[4] parameter(1)\n"
                     "ROOT s = f32[4] and(a, b)"),
              "and needs pred or integer operands");
}

TEST(ShapeInferenceTest, DynamicDimensionsPropagate) {
  ExpectShape(Module("a = f32[<=4,3] parameter(0)\nb = f32[<=4,3] parameter(1)\n"
                     "ROOT s = add(a, b)"),
              "f32[<=4,3]");
  ExpectShape(Module("a = f32[?,3] parameter(0)\nb = f32[2,3] parameter(1)\n"
                     "ROOT s = add(a, b)"),
              "f32[2,3]");
  ExpectShape(Module("a = f32[?,3] parameter(0)\nb = f32[<=2,3] parameter(1)\n"
                     "ROOT s = add(a, b)"),
              "f32[<=2,3]");
  ExpectShape(Module("a = f32[?,3] parameter(0)\nROOT n = negate(a)"), "f32[?,3]");
}

TEST(ShapeInferenceTest, SelectAcceptsAScalarOrMatchingPredicate) {
  ExpectShape(Module("p = pred[2] parameter(0)\na = f32[2] parameter(1)\nb = f32[2] parameter(2)\n"
                     "ROOT s = select(p, a, b)"),
              "f32[2]");
  ExpectShape(Module("p = pred[] parameter(0)\na = f32[2] parameter(1)\nb = f32[2] parameter(2)\n"
                     "ROOT s = select(p, a, b)"),
              "f32[2]");
  ExpectError(Module("p = pred[3] parameter(0)\na = f32[2] parameter(1)\nb = f32[2] parameter(2)\n"
                     "ROOT s = f32[2] select(p, a, b)"),
              "must be a scalar or have the dimensions of f32[2]");
  ExpectError(Module("p = s32[2] parameter(0)\na = f32[2] parameter(1)\nb = f32[2] parameter(2)\n"
                     "ROOT s = f32[2] select(p, a, b)"),
              "the predicate must be pred");
}

TEST(ShapeInferenceTest, ClampBoundsAreScalarsOrOperandShaped) {
  ExpectShape(Module("lo = f32[] parameter(0)\nx = f32[5] parameter(1)\nhi = f32[5] parameter(2)\n"
                     "ROOT c = clamp(lo, x, hi)"),
              "f32[5]");
  ExpectError(Module("lo = f32[2] parameter(0)\nx = f32[5] parameter(1)\nhi = f32[] parameter(2)\n"
                     "ROOT c = f32[5] clamp(lo, x, hi)"),
              "must be a scalar or have the dimensions of f32[5]");
}

// --- Shapes written in the text ---------------------------------------------------------------

TEST(ShapeInferenceTest, ParameterConstantAndIotaUseTheirOwnShape) {
  ExpectShape(Module("ROOT p = f32[2,3]{0,1} parameter(0)"), "f32[2,3]");
  ExpectShape(Module("ROOT c = s32[3] constant({1, 2, 3})"), "s32[3]");
  ExpectShape(Module("ROOT i = s32[4,5] iota(), iota_dimension=1"), "s32[4,5]");
  ExpectError(Module("ROOT i = s32[4,5] iota(), iota_dimension=2"),
              "iota_dimension=2 is out of range for a result of rank 2");
}

TEST(ShapeInferenceTest, OmittedShapeIsAnErrorWhereItCannotBeDerived) {
  HloInstruction iota(HloOpcode::kIota, Shape());
  StatusOr<Shape> shape = InferShape(iota);
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.status().message(), HasSubstr("result shape must be written for iota"));

  HloInstruction parameter(HloOpcode::kParameter, Shape());
  EXPECT_THAT(InferShape(parameter).status().message(),
              HasSubstr("result shape must be written for parameter"));
}

TEST(ShapeInferenceTest, OpcodesWithoutInferenceKeepTheirDeclaredShape) {
  ExpectShape(Module("p = f32[8] parameter(0)\n"
                     "ROOT g = f32[16]{0} all-gather(p), dimensions={0}, replica_groups={{0,1}}"),
              "f32[16]");
  HloInstruction no_shape(HloOpcode::kAllGather, Shape());
  EXPECT_THAT(InferShape(no_shape).status().message(),
              HasSubstr("the shape of all-gather cannot be inferred"));
}

// --- Data movement ----------------------------------------------------------------------------

TEST(ShapeInferenceTest, BroadcastMapsOperandDimensionsIntoTheDeclaredShape) {
  ExpectShape(
      Module("p = f32[3] parameter(0)\nROOT b = f32[2,3]{0,1} broadcast(p), dimensions={1}"),
      "f32[2,3]");
  ExpectShape(Module("p = f32[] parameter(0)\nROOT b = f32[2,3] broadcast(p), dimensions={}"),
              "f32[2,3]");
  ExpectError(Module("p = f32[3] parameter(0)\nROOT b = f32[2,3] broadcast(p), dimensions={2}"),
              "dimensions={2} is out of range for a result of rank 2");
  ExpectError(Module("p = f32[3] parameter(0)\nROOT b = f32[2,3] broadcast(p), dimensions={0}"),
              "operand dimension 0 (size 3) is mapped to result dimension 0 of size 2");
  ExpectError(Module("p = f32[3,2] parameter(0)\nROOT b = f32[2,3] broadcast(p), dimensions={1}"),
              "must map each of the 2 operand dimensions");
}

TEST(ShapeInferenceTest, ReshapeKeepsTheElementCount) {
  ExpectShape(Module("p = f32[2,3] parameter(0)\nROOT r = f32[3,2] reshape(p)"), "f32[3,2]");
  ExpectError(Module("p = f32[2,3] parameter(0)\nROOT r = f32[7] reshape(p)"),
              "reshape cannot change the element count");
}

TEST(ShapeInferenceTest, BitcastKeepsTheByteSize) {
  ExpectShape(Module("p = f32[2,3]{1,0} parameter(0)\nROOT b = f32[3,2]{0,1} bitcast(p)"),
              "f32[3,2]");
  ExpectError(Module("p = f32[2,3] parameter(0)\nROOT b = f32[7] bitcast(p)"),
              "bitcast cannot change the byte size");
}

TEST(ShapeInferenceTest, TransposePermutesDimensions) {
  ExpectShape(Module("p = f32[2,3,4] parameter(0)\nROOT t = transpose(p), dimensions={2,0,1}"),
              "f32[4,2,3]");
  ExpectError(Module("p = f32[2,3] parameter(0)\nROOT t = f32[3,2] transpose(p), dimensions={0,0}"),
              "names dimension 0 twice");
  ExpectError(Module("p = f32[2,3] parameter(0)\nROOT t = f32[3,2] transpose(p), dimensions={0}"),
              "not a permutation");
}

TEST(ShapeInferenceTest, SliceWithStrides) {
  ExpectShape(Module("p = f32[10,8] parameter(0)\nROOT s = slice(p), slice={[1:8:3], [0:8]}"),
              "f32[3,8]");
  ExpectError(
      Module("p = f32[10,8] parameter(0)\nROOT s = f32[1,1] slice(p), slice={[0:11], [0:1]}"),
      "slice [0:11] of dimension 0 is out of range for size 10");
}

TEST(ShapeInferenceTest, DynamicSliceAndUpdate) {
  ExpectShape(Module("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\nj = s32[] parameter(2)\n"
                     "ROOT d = dynamic-slice(p, i, j), dynamic_slice_sizes={2,8}"),
              "f32[2,8]");
  ExpectError(Module("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\n"
                     "ROOT d = f32[2,8] dynamic-slice(p, i), dynamic_slice_sizes={2,8}"),
              "needs 2 start indices");
  ExpectError(Module("p = f32[10,8] parameter(0)\ni = s32[] parameter(1)\nj = s32[] parameter(2)\n"
                     "ROOT d = f32[2,9] dynamic-slice(p, i, j), dynamic_slice_sizes={2,9}"),
              "dynamic_slice_sizes={2,9} is out of range");
  ExpectShape(Module("p = bf16[10,8] parameter(0)\nu = bf16[2,8] parameter(1)\n"
                     "i = s32[] parameter(2)\nj = s32[] parameter(3)\n"
                     "ROOT d = dynamic-update-slice(p, u, i, j)"),
              "bf16[10,8]");
  ExpectError(Module("p = bf16[10,8] parameter(0)\nu = bf16[2,9] parameter(1)\n"
                     "i = s32[] parameter(2)\nj = s32[] parameter(3)\n"
                     "ROOT d = bf16[10,8] dynamic-update-slice(p, u, i, j)"),
              "does not fit");
}

TEST(ShapeInferenceTest, ConcatenateAddsAlongTheDimension) {
  ExpectShape(Module("a = f32[2,3] parameter(0)\nb = f32[2,5] parameter(1)\n"
                     "ROOT c = concatenate(a, b), dimensions={1}"),
              "f32[2,8]");
  ExpectError(Module("a = f32[2,1] parameter(0)\nb = f32[3,1] parameter(1)\n"
                     "ROOT c = f32[3,2] concatenate(a, b), dimensions={1}"),
              "Cannot concatenate arrays that differ in dimensions");
  ExpectError(Module("a = f32[2,1] parameter(0)\nb = f32[2,1] parameter(1)\n"
                     "ROOT c = f32[4,1] concatenate(a, b), dimensions={2}"),
              "dimensions={2} is out of range for operand of rank 2");
}

TEST(ShapeInferenceTest, PadWithEdgeAndInteriorPadding) {
  ExpectShape(Module("p = f32[4,3] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT q = pad(p, z), padding=1_2x0_-1_1"),
              "f32[7,4]");
  ExpectError(Module("p = f32[4,3] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT q = f32[7] pad(p, z), padding=1_2"),
              "has 1 dimensions, but the operand f32[4,3] has rank 2");
  ExpectError(Module("p = f32[4] parameter(0)\nz = s32[] constant(0)\n"
                     "ROOT q = f32[4] pad(p, z), padding=0_0"),
              "must be a scalar of the operand's type");
}

TEST(ShapeInferenceTest, ReverseChecksItsDimensions) {
  ExpectShape(Module("p = f32[4,3] parameter(0)\nROOT r = reverse(p), dimensions={0,1}"),
              "f32[4,3]");
  ExpectError(Module("p = f32[4,3] parameter(0)\nROOT r = f32[4,3] reverse(p), dimensions={3}"),
              "dimensions={3} is out of range for operand of rank 2");
}

// --- Reductions -------------------------------------------------------------------------------

TEST(ShapeInferenceTest, ReduceDropsTheReducedDimensions) {
  ExpectShape(Module("p = f32[2,3,4] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = reduce(p, z), dimensions={0,2}, to_apply=add",
                     kAddF32),
              "f32[3]");
  ExpectError(Module("p = f32[2,3] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = f32[2] reduce(p, z), dimensions={3}, to_apply=add",
                     kAddF32),
              "dimensions={3} is out of range for operand of rank 2");
  ExpectError(Module("p = s32[2,3] parameter(0)\nz = s32[] constant(0)\n"
                     "ROOT r = s32[2] reduce(p, z), dimensions={1}, to_apply=add",
                     kAddF32),
              "parameter 0 of the reducer %add must be s32[]");
}

TEST(ShapeInferenceTest, VariadicReduceReturnsATuple) {
  const char* argmax = R"(
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GT
  v = f32[] select(gt, v0, v1)
  i = s32[] select(gt, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
})";
  ExpectShape(Module("p = f32[5,7] parameter(0)\nidx = s32[5,7] iota(), iota_dimension=1\n"
                     "lo = f32[] constant(-inf)\nzero = s32[] constant(0)\n"
                     "ROOT r = reduce(p, idx, lo, zero), dimensions={1}, to_apply=argmax",
                     argmax),
              "(f32[5], s32[5])");
  ExpectError(
      Module("p = f32[5,7] parameter(0)\nidx = s32[5,7] iota(), iota_dimension=1\n"
             "lo = f32[] constant(-inf)\n"
             "ROOT r = (f32[5], s32[5]) reduce(p, idx, lo), dimensions={1}, to_apply=argmax",
             argmax),
      "N inputs followed by N init values");
}

TEST(ShapeInferenceTest, ReduceWindowAppliesPaddingAndStrides) {
  ExpectShape(Module("p = f32[8,8] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = reduce-window(p, z), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                     "to_apply=add",
                     kAddF32),
              "f32[4,4]");
  ExpectShape(Module("p = f32[4] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = reduce-window(p, z), window={size=2 lhs_dilate=2 rhs_dilate=2}, "
                     "to_apply=add",
                     kAddF32),
              "f32[5]");
  ExpectError(Module("p = f32[8,8] parameter(0)\nz = f32[] constant(0)\n"
                     "ROOT r = f32[4] reduce-window(p, z), window={size=3}, to_apply=add",
                     kAddF32),
              "window has 1 dimensions, but the operand f32[8,8] has rank 2");
}

TEST(ShapeInferenceTest, SelectAndScatterNeedsAWindowedSource) {
  const char* computations = R"(
ge {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = pred[] compare(a, b), direction=GE
}
add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
})";
  ExpectShape(Module("p = f32[4,6] parameter(0)\ns = f32[2,3] parameter(1)\nz = f32[] constant(0)\n"
                     "ROOT r = select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, "
                     "select=ge, scatter=add",
                     computations),
              "f32[4,6]");
  ExpectError(Module("p = f32[4,6] parameter(0)\ns = f32[2,2] parameter(1)\nz = f32[] constant(0)\n"
                     "ROOT r = f32[4,6] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, "
                     "select=ge, scatter=add",
                     computations),
              "the source f32[2,2] must have the dimensions of the windowed operand f32[2,3]");
  ExpectError(Module("p = f32[4,6] parameter(0)\ns = f32[2,3] parameter(1)\nz = f32[] constant(0)\n"
                     "ROOT r = f32[4,6] select-and-scatter(p, s, z), window={size=2x2 stride=2x2}, "
                     "select=add, scatter=add",
                     computations),
              "the select computation %add must return pred[]");
}

TEST(ShapeInferenceTest, SortReturnsATupleForSeveralOperands) {
  const char* less = R"(
less {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  c = s32[] parameter(2)
  d = s32[] parameter(3)
  ROOT lt = pred[] compare(a, b), direction=LT
})";
  ExpectShape(Module("k = f32[3,8] parameter(0)\nv = s32[3,8] parameter(1)\n"
                     "ROOT s = sort(k, v), dimensions={1}, to_apply=less",
                     less),
              "(f32[3,8], s32[3,8])");
  ExpectError(Module("k = f32[3,8] parameter(0)\n"
                     "ROOT s = f32[3,8] sort(k), dimensions={1}, to_apply=less",
                     less),
              "the comparator %less must take 2 parameter(s), but takes 4");
}

TEST(ShapeInferenceTest, MapTakesTheElementTypeOfItsComputation) {
  const char* to_int = R"(
to_int {
  a = f32[] parameter(0)
  ROOT c = s32[] convert(a)
})";
  ExpectShape(
      Module("p = f32[4] parameter(0)\nROOT m = map(p), dimensions={0}, to_apply=to_int", to_int),
      "s32[4]");
}

// --- Contractions, gather, scatter -----------------------------------------------------------

TEST(ShapeInferenceTest, DotGeneralOrdersBatchThenFreeDimensions) {
  ExpectShape(Module("a = f32[8,2,3] parameter(0)\nb = f32[8,3,5] parameter(1)\n"
                     "ROOT d = dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, "
                     "lhs_contracting_dims={2}, rhs_contracting_dims={1}"),
              "f32[8,2,5]");
  ExpectShape(Module("a = s8[2,3] parameter(0)\nb = s8[3,5] parameter(1)\n"
                     "ROOT d = s32[2,5] dot(a, b), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}"),
              "s32[2,5]");
  ExpectError(Module("a = f32[2,3] parameter(0)\nb = f32[4,5] parameter(1)\n"
                     "ROOT d = f32[2,5] dot(a, b), lhs_contracting_dims={1}, "
                     "rhs_contracting_dims={0}"),
              "contracting dimension sizes must match: lhs dimension 1 has size 3, rhs dimension "
              "0 has size 4");
  ExpectError(Module("a = f32[2,3] parameter(0)\nb = f32[3,5] parameter(1)\n"
                     "ROOT d = f32[2,5] dot(a, b), lhs_contracting_dims={2}, "
                     "rhs_contracting_dims={0}"),
              "lhs_contracting_dims={2} is out of range for operand of rank 2");
}

TEST(ShapeInferenceTest, ConvolutionFollowsDimLabelsAndWindow) {
  ExpectShape(Module("x = f32[1,8,8,3] parameter(0)\nw = f32[3,3,3,16] parameter(1)\n"
                     "ROOT c = convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, "
                     "dim_labels=b01f_01io->b01f"),
              "f32[1,4,4,16]");
  ExpectShape(Module("x = f32[2,6,10] parameter(0)\nw = f32[3,5,12] parameter(1)\n"
                     "ROOT c = convolution(x, w), window={size=3}, dim_labels=b0f_0io->bf0, "
                     "feature_group_count=2"),
              "f32[2,12,4]");
  ExpectError(Module("x = f32[1,8,8,3] parameter(0)\nw = f32[3,3,4,16] parameter(1)\n"
                     "ROOT c = f32[1,6,6,16] convolution(x, w), window={size=3x3}, "
                     "dim_labels=b01f_01io->b01f"),
              "must equal the kernel's input feature size 4");
  ExpectError(Module("x = f32[1,8,8,3] parameter(0)\nw = f32[3,3,3,16] parameter(1)\n"
                     "ROOT c = f32[1,6,6,16] convolution(x, w), window={size=2x3}, "
                     "dim_labels=b01f_01io->b01f"),
              "window size 2 of spatial dimension 0 must equal the kernel's size 3");
}

TEST(ShapeInferenceTest, GatherCombinesBatchAndOffsetDimensions) {
  ExpectShape(Module("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                     "ROOT g = gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, "
                     "start_index_map={0}, index_vector_dim=1, slice_sizes={1,7}"),
              "f32[4,7]");
  ExpectShape(Module("p = f32[5,7,3] parameter(0)\ni = s32[2,6] parameter(1)\n"
                     "ROOT g = gather(p, i), offset_dims={0,3}, collapsed_slice_dims={1}, "
                     "start_index_map={1}, index_vector_dim=2, slice_sizes={5,1,2}"),
              "f32[5,2,6,2]");
  ExpectError(Module("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                     "ROOT g = f32[4,7] gather(p, i), offset_dims={1}, collapsed_slice_dims={0}, "
                     "start_index_map={0}, index_vector_dim=1, slice_sizes={2,7}"),
              "slice size 2 of collapsed or batching dimension 0 must be <= 1");
}

TEST(ShapeInferenceTest, ScatterReturnsTheOperandShape) {
  ExpectShape(Module("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                     "u = f32[4,7] parameter(2)\n"
                     "ROOT s = scatter(p, i, u), update_window_dims={1}, "
                     "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     "index_vector_dim=1, to_apply=add",
                     kAddF32),
              "f32[5,7]");
  ExpectError(Module("p = f32[5,7] parameter(0)\ni = s32[4,1] parameter(1)\n"
                     "u = f32[3,7] parameter(2)\n"
                     "ROOT s = f32[5,7] scatter(p, i, u), update_window_dims={1}, "
                     "inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, "
                     "index_vector_dim=1, to_apply=add",
                     kAddF32),
              "update scatter dimension 0 has size 3");
}

TEST(ShapeInferenceTest, ScatterUpdateMayReturnAOneElementTuple) {
  const char* update = R"(
update {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  s = f32[] add(a, b)
  ROOT t = (f32[]) tuple(s)
})";
  ExpectShape(Module("p = f32[5] parameter(0)\ni = s32[2,1] parameter(1)\nu = f32[2] parameter(2)\n"
                     "ROOT s = scatter(p, i, u), update_window_dims={}, inserted_window_dims={0}, "
                     "scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=update",
                     update),
              "f32[5]");
}

TEST(ShapeInferenceTest, RngBitGeneratorReturnsStateAndValuesOrValues) {
  ExpectShape(Module("s = u64[2] parameter(0)\n"
                     "ROOT r = (u64[2], u32[4,4]) rng-bit-generator(s), algorithm=rng_default"),
              "(u64[2], u32[4,4])");
  ExpectShape(Module("s = u64[2] parameter(0)\n"
                     "ROOT r = u32[4,4] rng-bit-generator(s), algorithm=rng_default"),
              "u32[4,4]");
  ExpectError(Module("s = u64[2] parameter(0)\n"
                     "ROOT r = (u64[3], u32[4,4]) rng-bit-generator(s), algorithm=rng_default"),
              "rng-bit-generator must return (state, values) with state u64[2]");
}

// --- Tuples and control flow -------------------------------------------------------------------

TEST(ShapeInferenceTest, TupleAndGetTupleElement) {
  ExpectShape(Module("a = f32[2] parameter(0)\nb = s32[] parameter(1)\nROOT t = tuple(a, b)"),
              "(f32[2], s32[])");
  ExpectShape(Module("p = (f32[2], s32[]) parameter(0)\nROOT g = get-tuple-element(p), index=1"),
              "s32[]");
  ExpectError(Module("p = (f32[2], s32[]) parameter(0)\n"
                     "ROOT g = s32[] get-tuple-element(p), index=2"),
              "index=2 is out of range for a tuple of 2 elements");
}

TEST(ShapeInferenceTest, FusionAndCallReturnTheRootOfTheirComputation) {
  const char* fused = R"(
fused {
  a = f32[4] parameter(0)
  ROOT c = s32[4] convert(a)
})";
  ExpectShape(Module("p = f32[4] parameter(0)\nROOT f = fusion(p), kind=kLoop, calls=fused", fused),
              "s32[4]");
  ExpectShape(Module("p = f32[4] parameter(0)\nROOT f = call(p), to_apply=fused", fused), "s32[4]");
  ExpectError(
      Module("p = f32[5] parameter(0)\nROOT f = s32[4] fusion(p), kind=kLoop, calls=fused", fused),
      "parameter 0 of the fused computation %fused must have shape f32[5]");
}

TEST(ShapeInferenceTest, WhileBodyMustPreserveTheLoopState) {
  const char* loop = R"(
cond {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[2]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  x = f32[2] get-tuple-element(s), index=1
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[2]) tuple(j, x)
}
bad_body {
  s = (s32[], f32[2]) parameter(0)
  ROOT i = s32[] get-tuple-element(s), index=0
})";
  ExpectShape(
      Module("p = (s32[], f32[2]) parameter(0)\nROOT w = while(p), condition=cond, body=body",
             loop),
      "(s32[], f32[2])");
  ExpectError(Module("p = (s32[], f32[2]) parameter(0)\n"
                     "ROOT w = (s32[], f32[2]) while(p), condition=cond, body=bad_body",
                     loop),
              "the while body %bad_body returns s32[], but the loop state is (s32[], f32[2])");
  ExpectError(Module("p = (s32[], f32[2]) parameter(0)\n"
                     "ROOT w = (s32[], f32[2]) while(p), condition=body, body=body",
                     loop),
              "the while condition %body must return pred[]");
}

TEST(ShapeInferenceTest, ConditionalBranchesMustAgree) {
  const char* branches = R"(
b0 {
  a = f32[2] parameter(0)
  ROOT n = f32[2] negate(a)
}
b1 {
  a = s32[] parameter(0)
  ROOT c = f32[2] broadcast(f32[] constant(1)), dimensions={}
}
b2 {
  a = s32[] parameter(0)
  ROOT c = f32[3] broadcast(f32[] constant(1)), dimensions={}
})";
  ExpectShape(Module("k = s32[] parameter(0)\nx = f32[2] parameter(1)\ny = s32[] parameter(2)\n"
                     "ROOT c = conditional(k, x, y), branch_computations={b0, b1}",
                     branches),
              "f32[2]");
  ExpectShape(Module("k = pred[] parameter(0)\nx = f32[2] parameter(1)\ny = s32[] parameter(2)\n"
                     "ROOT c = conditional(k, x, y), true_computation=b0, false_computation=b1",
                     branches),
              "f32[2]");
  ExpectError(Module("k = s32[] parameter(0)\nx = f32[2] parameter(1)\ny = s32[] parameter(2)\n"
                     "ROOT c = f32[2] conditional(k, x, y), branch_computations={b0, b2}",
                     branches),
              "branch 1 %b2 returns f32[3], but branch 0 returns f32[2]");
  ExpectError(Module("k = s32[] parameter(0)\nx = f32[2] parameter(1)\n"
                     "ROOT c = f32[2] conditional(k, x), branch_computations={b0, b1}",
                     branches),
              "conditional has 2 branches but 1 branch operands");
}

TEST(ShapeInferenceTest, AllReduceAndOptimizationBarrierKeepOperandShapes) {
  ExpectShape(Module("a = f32[4] parameter(0)\nb = f32[2] parameter(1)\n"
                     "ROOT r = all-reduce(a, b), replica_groups={}, to_apply=add",
                     kAddF32),
              "(f32[4], f32[2])");
  ExpectShape(Module("a = (f32[4], s32[]) parameter(0)\nROOT b = opt-barrier(a)"),
              "(f32[4], s32[])");
}

TEST(ShapeInferenceTest, ParserFillsInOmittedShapes) {
  StatusOr<std::unique_ptr<HloModule>> module =
      ParseHloModule(Module("p = f32[2,3] parameter(0)\nz = f32[] constant(0)\n"
                            "ROOT r = reduce(p, z), dimensions={0}, to_apply=add",
                            kAddF32));
  ASSERT_TRUE(module.ok()) << module.status().message();
  EXPECT_EQ((*module)->entry_computation()->root_instruction()->shape().ToString(false), "f32[3]");
}

}  // namespace
}  // namespace xlens
