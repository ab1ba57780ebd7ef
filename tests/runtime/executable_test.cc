// Executables built from whole modules: control flow, aliasing and argument checks.
#include "compiler/runtime/executable.h"
#include "compiler/runtime/onednn_thunks.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/support/float_environment.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::ElementsAre;

// Each element lands where the layout puts it, for every element width, and the copy back
// restores row-major order: f32[3,4,5]{0,2,1} puts (i, j, k) at i + 3 * (k + 5 * j); the other
// layouts have minor dimensions longer than a tile, and not a multiple of it, or the same minor
// dimension as row-major order.
TEST(ExecutableTest, CopiesToAndFromALayoutPutEachElementWhereTheLayoutSays) {
  struct Case {
    std::vector<int64_t> dimensions, minor_to_major;
  };
  for (const Case& c : {Case{{3, 4, 5}, {0, 2, 1}}, Case{{2, 33, 18}, {1, 2, 0}},
                        Case{{40, 17}, {0, 1}}, Case{{3, 5, 7}, {2, 0, 1}}}) {
    for (PrimitiveType type : {PrimitiveType::S8, PrimitiveType::F16, PrimitiveType::F32,
                               PrimitiveType::F64, PrimitiveType::C128}) {
      Shape shape(type, c.dimensions);
      shape.set_layout(Layout{c.minor_to_major, ""});
      const int64_t width = ByteWidth(type), n = shape.num_elements();
      std::vector<uint8_t> row_major(n * width);
      for (size_t b = 0; b < row_major.size(); ++b) row_major[b] = static_cast<uint8_t>(b * 7 + b / 251);
      std::vector<char> laid_out(row_major.size());
      CopyToLayout(row_major.data(), shape, laid_out.data());
      // Element e's index, and from it its place: the sum of index times stride, each stride the
      // product of the dimensions more minor in the layout.
      for (int64_t e = 0; e < n; ++e) {
        int64_t physical = 0, rest = e;
        std::vector<int64_t> index(c.dimensions.size());
        for (int64_t d = shape.rank() - 1; d >= 0; --d) {
          index[d] = rest % c.dimensions[d];
          rest /= c.dimensions[d];
        }
        int64_t stride = 1;
        for (int64_t d : c.minor_to_major) {
          physical += index[d] * stride;
          stride *= c.dimensions[d];
        }
        ASSERT_EQ(0, std::memcmp(laid_out.data() + physical * width, row_major.data() + e * width, width))
            << shape.ToString(true) << " element " << e;
      }
      std::vector<uint8_t> back(row_major.size());
      CopyFromLayout(laid_out.data(), shape, back.data());
      EXPECT_EQ(back, row_major) << shape.ToString(true);
    }
  }
}

TEST(ExecutableTest, AWhileBodyThatSwapsItsStateIsStagedNotClobbered) {
  const char* text = R"(HloModule swap
cond {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  n = s32[] constant(3)
  ROOT lt = pred[] compare(i, n), direction=LT
}
body {
  s = (s32[], f32[3], f32[3]) parameter(0)
  i = s32[] get-tuple-element(s), index=0
  a = f32[3] get-tuple-element(s), index=1
  b = f32[3] get-tuple-element(s), index=2
  one = s32[] constant(1)
  j = s32[] add(i, one)
  ROOT t = (s32[], f32[3], f32[3]) tuple(j, b, a)
}
ENTRY e {
  a = f32[3] parameter(0)
  b = f32[3] parameter(1)
  z = s32[] constant(0)
  init = (s32[], f32[3], f32[3]) tuple(z, a, b)
  w = (s32[], f32[3], f32[3]) while(init), condition=cond, body=body
  ROOT r = f32[3] get-tuple-element(w), index=1
})";
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3}));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {4, 5, 6}));
  Literal out = testing::ExpectMatchesEvaluator(text, std::move(args));
  // Three swaps: the second array.
  auto d = out.data<float>();
  EXPECT_THAT(std::vector<float>(d.begin(), d.end()), ElementsAre(4, 5, 6));
}

TEST(ExecutableTest, AnOutputWrittenInPlaceDoesNotClobberAnotherOutputsInput) {
  const std::string text = testing::ReadTestFile(std::string(XLENS_SOURCE_DIR) +
                                                 "/tests/runtime/testdata/in_place_multi_output.hlo");
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    testing::ExpectMatchesEvaluator(text, testing::RandomArguments(text, seed));
  }
}

TEST(ExecutableTest, AnOutOfRangeBranchIndexRunsTheLastBranch) {
  const char* text = R"(HloModule cond
b0 { p = f32[2] parameter(0)  ROOT n = f32[2] negate(p) }
b1 { p = f32[2] parameter(0)  ROOT e = f32[2] exponential(p) }
b2 { p = f32[2] parameter(0)  ROOT a = f32[2] abs(p) }
ENTRY e {
  i = s32[] parameter(0)
  x = f32[2] parameter(1)
  ROOT c = f32[2] conditional(i, x, x, x), branch_computations={b0, b1, b2}
})";
  for (int32_t index : {0, 1, 2, 7, -1}) {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR0<int32_t>(PrimitiveType::S32, index));
    args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {-0.5f, 2.0f}));
    testing::ExpectMatchesEvaluator(text, std::move(args), {1e-6, 1e-6});
  }
}

TEST(ExecutableTest, SubnormalsAreFlushedToZeroAsXlaDoes) {
  // Large enough for the pool to run it in chunks: every chunk must flush, and the caller's
  // floating-point environment must be as it was afterwards. (The evaluator keeps subnormals:
  // they are within any absolute tolerance of zero.)
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[65536] parameter(0)
  b = f32[65536] parameter(1)
  m = f32[65536] multiply(a, a)
  ROOT s = f32[65536] add(m, b)
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  const uint32_t before = GetFloatControl();
  std::vector<Literal> args;
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, std::vector<float>(65536, 1e-20f)));
  args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, std::vector<float>(65536, 1e-39f)));
  auto out = (*exe)->Execute(args);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(GetFloatControl() & ~0x3fu, before & ~0x3fu);
  auto d = out->data<float>();
  for (size_t i = 0; i < d.size(); ++i) ASSERT_EQ(d[i], 0.0f) << "element " << i;
}

TEST(ExecutableTest, RunsAgainWithNewArgumentsAndRejectsWrongOnes) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  ROOT s = f32[4] sine(a)
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  for (float v : {0.0f, 1.0f}) {
    std::vector<Literal> args;
    args.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {v, v, v, v}));
    auto out = (*exe)->Execute(args);
    ASSERT_TRUE(out.ok());
    EXPECT_FLOAT_EQ(out->data<float>()[3], std::sin(v));
  }
  std::vector<Literal> wrong;
  wrong.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {1, 2}));
  auto out = (*exe)->Execute(wrong);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), ::testing::HasSubstr("argument 0 is f32[2]"));
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::HasSubstr("kernel s"));
}

// Arguments passed where their owners keep them are read in place: the program must leave them
// as they were (an elementwise op on a parameter does not write over it), a parameter returned
// as it is comes back, and a later call with copied arguments reads its own values, not the
// borrowed buffers of the call before.
TEST(ExecutableTest, BorrowedArgumentsAreReadInPlaceAndLeftAsTheyWere) {
  const char* text = R"(HloModule m
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  n = f32[4] negate(a)
  s = f32[4] add(n, b)
  ROOT t = (f32[4], f32[4]) tuple(s, b)
})";
  auto module = ParseHloModule(text);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  Literal a = Literal::CreateR1<float>(PrimitiveType::F32, {1, 2, 3, 4});
  Literal b = Literal::CreateR1<float>(PrimitiveType::F32, {10, 20, 30, 40});
  std::vector<const Literal*> borrowed = {&a, &b};
  auto out = (*exe)->Execute(std::span<const Literal* const>(borrowed));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->tuple_element(0).data<float>(), ElementsAre(9, 18, 27, 36));
  EXPECT_THAT(out->tuple_element(1).data<float>(), ElementsAre(10, 20, 30, 40));
  EXPECT_THAT(a.data<float>(), ElementsAre(1, 2, 3, 4));
  EXPECT_THAT(b.data<float>(), ElementsAre(10, 20, 30, 40));
  std::vector<Literal> copied;
  copied.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {0, 0, 0, 1}));
  copied.push_back(Literal::CreateR1<float>(PrimitiveType::F32, {5, 5, 5, 5}));
  a = Literal::CreateR1<float>(PrimitiveType::F32, {7, 7, 7, 7});  // what a stale slot would read
  out = (*exe)->Execute(copied);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->tuple_element(0).data<float>(), ElementsAre(5, 5, 5, 4));
  EXPECT_THAT(out->tuple_element(1).data<float>(), ElementsAre(5, 5, 5, 5));
}

// Raw arrays (a NumPy array's buffer) go the same two ways: read in place by a module without
// control flow, copied into the arena by one with a while loop, whose body reads the parameter's
// own place; a later call sees its own arrays either way. A wrong count is refused.
TEST(ExecutableTest, ArraysAreReadInPlaceOrCopiedAsTheModuleAllows) {
  const char* plain = R"(HloModule plain
ENTRY e {
  a = f32[4] parameter(0)
  b = f32[4] parameter(1)
  ROOT s = f32[4] subtract(a, b)
})";
  const char* looped = R"(HloModule looped
cond {
  c = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  three = s32[] constant(3)
  ROOT lt = pred[] compare(i, three), direction=LT
}
body {
  c = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(c), index=0
  one = s32[] constant(1)
  next = s32[] add(i, one)
  x = f32[4] get-tuple-element(c), index=1
  twice = f32[4] add(x, x)
  ROOT t = (s32[], f32[4]) tuple(next, twice)
}
ENTRY e {
  a = f32[4] parameter(0)
  zero = s32[] constant(0)
  init = (s32[], f32[4]) tuple(zero, a)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  ROOT r = f32[4] get-tuple-element(w), index=1
})";
  auto plain_module = ParseHloModule(plain);
  auto looped_module = ParseHloModule(looped);
  ASSERT_TRUE(plain_module.ok() && looped_module.ok());
  auto plain_exe = CompileForCpu(std::move(*plain_module), {});
  auto looped_exe = CompileForCpu(std::move(*looped_module), {});
  ASSERT_TRUE(plain_exe.ok()) << plain_exe.status().message();
  ASSERT_TRUE(looped_exe.ok()) << looped_exe.status().message();
  EXPECT_TRUE((*plain_exe)->borrows_arguments());
  EXPECT_FALSE((*looped_exe)->borrows_arguments());
  alignas(16) float a[4] = {5, 6, 7, 8};
  alignas(16) float b[4] = {1, 1, 1, 1};
  std::vector<const void*> arrays = {a, b};
  auto out = (*plain_exe)->ExecuteOnArrays(arrays);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->data<float>(), ElementsAre(4, 5, 6, 7));
  EXPECT_THAT(a, ElementsAre(5, 6, 7, 8));
  b[0] = 5;
  out = (*plain_exe)->ExecuteOnArrays(arrays);
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_THAT(out->data<float>(), ElementsAre(0, 5, 6, 7));
  for (float scale : {1.0f, 2.0f}) {
    alignas(16) float x[4] = {scale, 2 * scale, 0, -1};
    std::vector<const void*> one = {x};
    auto looped_out = (*looped_exe)->ExecuteOnArrays(one);
    ASSERT_TRUE(looped_out.ok()) << looped_out.status().message();
    EXPECT_THAT(looped_out->data<float>(), ElementsAre(8 * scale, 16 * scale, 0, -8));
  }
  std::vector<const void*> too_few = {a};
  auto refused = (*plain_exe)->ExecuteOnArrays(too_few);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().message(), "plain takes 2 arguments, 1 given");
}

TEST(ExecutableTest, CanonicalConvolutionsRunAsIm2colAndEigen) {
  // Strides, padding, input and kernel dilation in 2D, and a 1D case, each against the evaluator;
  // a grouped convolution stays on the generated kernel.
  const char* texts[] = {
      R"(HloModule c
ENTRY e {
  x = f32[3,9,11,5] parameter(0)
  k = f32[3,2,5,7] parameter(1)
  ROOT c = f32[3,5,11,7] convolution(x, k), window={size=3x2 stride=2x1 pad=1_1x0_1 rhs_dilate=1x1}, dim_labels=b01f_01io->b01f
})",
      R"(HloModule c
ENTRY e {
  x = f32[2,6,6,4] parameter(0)
  k = f32[2,2,4,3] parameter(1)
  ROOT c = f32[2,10,5,3] convolution(x, k), window={size=2x2 pad=0_0x1_0 lhs_dilate=2x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f
})",
      R"(HloModule c
ENTRY e {
  x = f64[4,20,3] parameter(0)
  k = f64[5,3,2] parameter(1)
  ROOT c = f64[4,16,2] convolution(x, k), window={size=5}, dim_labels=b0f_0io->b0f
})"};
  for (const char* text : texts) {
    auto module = ParseHloModule(text);
    ASSERT_TRUE(module.ok()) << module.status().message();
    auto exe = CompileForCpu(std::move(*module), {});
    ASSERT_TRUE(exe.ok()) << exe.status().message();
    // An f32 convolution oneDNN takes runs there (onednn_thunks_test.cc); the rest here.
    const bool onednn = OneDnnAvailable() && std::string_view(text).find("lhs_dilate") == std::string_view::npos &&
                        std::string_view(text).find("f64") == std::string_view::npos;
    EXPECT_THAT((*exe)->ThunkSequenceText(),
                ::testing::HasSubstr(onednn ? "oneDNN convolution" : "im2col + Eigen"));
    testing::ExpectMatchesEvaluator(text, {}, {1e-5, 1e-5});
  }
  const char* grouped = R"(HloModule c
ENTRY e {
  x = f32[2,7,7,4] parameter(0)
  k = f32[3,3,2,6] parameter(1)
  ROOT c = f32[2,5,5,6] convolution(x, k), window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=2
})";
  auto module = ParseHloModule(grouped);
  ASSERT_TRUE(module.ok());
  auto exe = CompileForCpu(std::move(*module), {});
  ASSERT_TRUE(exe.ok()) << exe.status().message();
  EXPECT_THAT((*exe)->ThunkSequenceText(), ::testing::Not(::testing::HasSubstr("im2col")));
  testing::ExpectMatchesEvaluator(grouped, {}, {1e-5, 1e-5});
}

TEST(ExecutableTest, FusionMakesFewerKernelsThanOpsAndTheSameResult) {
  const char* text = R"(HloModule chain
ENTRY e {
  a = f32[1000] parameter(0)
  b = f32[1000] parameter(1)
  m = f32[1000] multiply(a, b)
  s = f32[1000] add(m, a)
  t = f32[1000] tanh(s)
  ROOT n = f32[1000] subtract(t, b)
})";
  CompileOptions unfused;
  unfused.optimize.filter.disabled = {"fusion", "multi-output-fusion"};
  auto m1 = ParseHloModule(text);
  auto m2 = ParseHloModule(text);
  auto fused_exe = CompileForCpu(std::move(*m1), {});
  auto unfused_exe = CompileForCpu(std::move(*m2), unfused);
  ASSERT_TRUE(fused_exe.ok() && unfused_exe.ok());
  EXPECT_EQ((*fused_exe)->kernels().size(), 1u);
  EXPECT_EQ((*unfused_exe)->kernels().size(), 4u);
  testing::ExpectMatchesEvaluator(text, {}, {1e-6, 1e-6}, unfused);
}

}  // namespace
}  // namespace xlens::runtime
