// Forward convolutions of few output positions as one product of their windows by the weights
// as they lie (compiler/runtime/few_position_convolution.h): the loops against a convolution
// summed in double precision over every remainder of the 32-column blocks and 8-position groups,
// parts of the rows and columns, padding on every side, and
// compiled modules against the reference evaluator on odd shapes, strides, padding, dilation,
// groups, 1-D and 3-D windows and epilogues, each checking the thunk listing names the path so a
// module that went back to oneDNN's kernels fails.
#include "compiler/runtime/few_position_convolution.h"

#include <random>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/onednn_thunks.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// out[b, pos..., o] of a channels-last convolution with weights (spatial..., input in group,
// output), directly from the formula.
std::vector<double> DirectConvolution(const FewPositionConvolution& c, const std::vector<float>& input,
                                      const std::vector<float>& weights) {
  const int64_t n = static_cast<int64_t>(c.dst_spatial.size());
  const int64_t inputs = c.input_channels / c.groups, outputs = c.output_channels / c.groups;
  std::vector<double> out(c.Positions() * c.output_channels, 0.0);
  std::vector<int64_t> pos(n), tap(n);
  int64_t taps = 1, image = c.input_channels;
  for (int64_t d = 0; d < n; ++d) taps *= c.kernel_spatial[d], image *= c.src_spatial[d];
  for (int64_t row = 0; row < c.Positions(); ++row) {
    int64_t r = row % (c.Positions() / c.images);
    const int64_t b = row / (c.Positions() / c.images);
    for (int64_t d = n - 1; d >= 0; --d) pos[d] = r % c.dst_spatial[d], r /= c.dst_spatial[d];
    for (int64_t t = 0; t < taps; ++t) {
      int64_t u = t, offset = 0;
      bool inside = true;
      for (int64_t d = n - 1; d >= 0; --d) tap[d] = u % c.kernel_spatial[d], u /= c.kernel_spatial[d];
      for (int64_t d = 0; d < n; ++d) {
        const int64_t x = pos[d] * c.strides[d] - c.padding_low[d] + tap[d] * (c.dilations[d] + 1);
        inside &= x >= 0 && x < c.src_spatial[d];
        offset = offset * c.src_spatial[d] + x;
      }
      if (!inside) continue;
      for (int64_t o = 0; o < c.output_channels; ++o) {
        const int64_t g = o / outputs;
        for (int64_t i = 0; i < inputs; ++i) {
          out[row * c.output_channels + o] += static_cast<double>(
              input[b * image + offset * c.input_channels + g * inputs + i] *
              static_cast<double>(weights[(t * inputs + i) * c.output_channels + o]));
        }
      }
    }
  }
  return out;
}

void ExpectLoopsMatch(FewPositionConvolution c, uint32_t seed) {
  c.Prepare();
  SCOPED_TRACE(::testing::Message() << "images " << c.images << " in " << c.input_channels << " out "
                                  << c.output_channels << " groups " << c.groups << " rank "
                                  << c.dst_spatial.size());
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uniform(-1.f, 1.f);
  int64_t input_size = c.images * c.input_channels, taps = 1;
  for (int64_t d : c.src_spatial) input_size *= d;
  for (int64_t d : c.kernel_spatial) taps *= d;
  std::vector<float> input(input_size), weights(taps * c.input_channels / c.groups * c.output_channels);
  for (float& x : input) x = uniform(rng);
  for (float& x : weights) x = uniform(rng);
  const int64_t depth = c.Depth(), n = c.output_channels, outputs = n / c.groups;
  std::vector<float> padded(c.PaddedSize(), 7.f);
  PadInput(c, input.data(), padded.data());
  const float* windows = c.NeedsPadding() ? padded.data() : input.data();
  const float canary = 12345.f;
  std::vector<float> out(c.Positions() * n + 16, canary);
  // Each group's columns in two calls (a block boundary at 16) and its rows in two shares.
  const int64_t half = c.Positions() / 2;
  for (int64_t g = 0; g < c.groups; ++g) {
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, half}, {half, c.Positions()}}) {
      FewPositionProduct(c, windows, weights.data(), out.data() + 8, g, r0, r1, 0, std::min<int64_t>(16, outputs));
      if (outputs > 16) FewPositionProduct(c, windows, weights.data(), out.data() + 8, g, r0, r1, 16, outputs);
    }
  }
  const std::vector<double> expected = DirectConvolution(c, input, weights);
  for (size_t e = 0; e < expected.size(); ++e) {
    ASSERT_NEAR(out[8 + e], expected[e], 1e-5 * (1 + depth)) << "at element " << e;
  }
  for (int e = 0; e < 8; ++e) {
    EXPECT_EQ(out[e], canary) << "written before the output";
    EXPECT_EQ(out[8 + c.Positions() * n + e], canary) << "written past the output";
  }
}

FewPositionConvolution Conv2D(int64_t images, int64_t h, int64_t w, int64_t in, int64_t kh, int64_t kw, int64_t out,
                              int64_t stride, int64_t pad, int64_t groups = 1, int64_t dilation = 0) {
  FewPositionConvolution c;
  c.images = images;
  c.input_channels = in;
  c.output_channels = out;
  c.groups = groups;
  c.src_spatial = {h, w};
  c.kernel_spatial = {kh, kw};
  c.strides = {stride, stride};
  c.dilations = {dilation, dilation};
  c.padding_low = {pad, pad};
  for (int64_t d = 0; d < 2; ++d) {
    const int64_t extent = (c.kernel_spatial[d] - 1) * (dilation + 1) + 1;
    c.dst_spatial.push_back((c.src_spatial[d] + 2 * pad - extent) / stride + 1);
  }
  return c;
}

TEST(FewPositionConvolutionTest, LoopsMatchTheFormula) {
  uint32_t seed = 1;
  // Every column remainder of a 32-wide block and row groups of 1 to 8 and past them.
  for (int64_t out : {8, 15, 16, 17, 31, 32, 33, 47, 64, 70}) {
    for (int64_t size : {1, 2, 3, 4}) ExpectLoopsMatch(Conv2D(1, size, size, 5, 3, 3, out, 1, 1), seed++);
  }
  // Strides, padding reaching past the image, dilation, several images, odd channels.
  ExpectLoopsMatch(Conv2D(2, 5, 7, 3, 3, 2, 9, 2, 1), seed++);
  ExpectLoopsMatch(Conv2D(3, 6, 6, 7, 3, 3, 12, 1, 2, 1, 1), seed++);
  ExpectLoopsMatch(Conv2D(1, 4, 4, 128, 3, 3, 32, 1, 1), seed++);
  ExpectLoopsMatch(Conv2D(1, 2, 2, 900, 1, 1, 128, 1, 0), seed++);
  // 260 outputs over 20 positions: the first group of positions packs the weights for the next.
  ExpectLoopsMatch(Conv2D(1, 6, 6, 24, 2, 3, 260, 1, 0), seed++);
  // Groups: 3 groups of 4 inputs to 8 outputs; 2 groups of 5 to 11.
  ExpectLoopsMatch(Conv2D(2, 4, 5, 12, 3, 3, 24, 1, 1, 3), seed++);
  ExpectLoopsMatch(Conv2D(1, 5, 5, 10, 2, 2, 22, 2, 0, 2), seed++);
  // 1-D and 3-D.
  FewPositionConvolution one;
  one.images = 2, one.input_channels = 6, one.output_channels = 9;
  one.src_spatial = {11}, one.kernel_spatial = {4}, one.strides = {3}, one.dilations = {0}, one.padding_low = {1};
  one.dst_spatial = {3};
  ExpectLoopsMatch(one, seed++);
  FewPositionConvolution three;
  three.images = 1, three.input_channels = 4, three.output_channels = 10;
  three.src_spatial = {3, 4, 2}, three.kernel_spatial = {2, 3, 2}, three.strides = {1, 1, 1};
  three.dilations = {0, 0, 0}, three.padding_low = {0, 1, 1}, three.dst_spatial = {2, 4, 3};
  ExpectLoopsMatch(three, seed++);
}

TEST(FewPositionConvolutionTest, TakesForwardHwioConvolutionsOfFewPositions) {
  const int64_t saved = FewPositionLimit();
  SetFewPositionLimit(64);
  OneDnnConvolution c;
  c.kind = OneDnnConvolution::Kind::kForward;
  c.images = 1, c.input_channels = 128, c.output_channels = 32;
  c.src_spatial = {4, 4}, c.dst_spatial = {4, 4}, c.kernel_spatial = {3, 3};
  c.strides = {1, 1}, c.dilations = {0, 0}, c.padding_low = {1, 1}, c.padding_high = {1, 1};
  c.weights_strides = {1, 32, 3 * 128 * 32, 128 * 32};  // HWIO
  EXPECT_TRUE(FewPositionConvolutionOf(c).has_value());
  OneDnnConvolution oihw = c;
  oihw.weights_strides = {128 * 9, 9, 3, 1};
  EXPECT_FALSE(FewPositionConvolutionOf(oihw).has_value()) << "weights that are not [taps x inputs, outputs]";
  OneDnnConvolution many = c;
  many.src_spatial = many.dst_spatial = {9, 8};
  EXPECT_FALSE(FewPositionConvolutionOf(many).has_value()) << "72 positions";
  OneDnnConvolution depthwise = c;
  depthwise.groups = 32, depthwise.input_channels = 32, depthwise.group_stride = 1;
  depthwise.weights_strides = {1, 32, 3 * 32, 32};
  EXPECT_FALSE(FewPositionConvolutionOf(depthwise).has_value()) << "one output per group";
  OneDnnConvolution heavy = c;
  heavy.input_channels = 512, heavy.output_channels = 512;
  heavy.weights_strides = {1, 512, 3 * 512 * 512, 512 * 512};
  EXPECT_FALSE(FewPositionConvolutionOf(heavy).has_value()) << "9 MB of weights";
  OneDnnConvolution mebibyte = c;  // a 1x1 layer of 1024 inputs to 256 outputs
  mebibyte.input_channels = 1024, mebibyte.output_channels = 256, mebibyte.kernel_spatial = {1, 1};
  mebibyte.padding_low = mebibyte.padding_high = {0, 0};
  mebibyte.weights_strides = {1, 256, 1024 * 256, 1024 * 256};
  EXPECT_FALSE(FewPositionConvolutionOf(mebibyte).has_value()) << "1 MiB of weights";
  mebibyte.input_channels = 1020;
  EXPECT_TRUE(FewPositionConvolutionOf(mebibyte).has_value()) << "just under 1 MiB";
  OneDnnConvolution backward = c;
  backward.kind = OneDnnConvolution::Kind::kBackwardData;
  EXPECT_FALSE(FewPositionConvolutionOf(backward).has_value());
  SetFewPositionLimit(0);
  EXPECT_FALSE(FewPositionConvolutionOf(c).has_value());
  SetFewPositionLimit(saved);
}

class FewPositionThunkTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
    saved_ = FewPositionLimit();
    SetFewPositionLimit(64);  // also without AVX-512, where the plain loops run
  }
  void TearDown() override { SetFewPositionLimit(saved_); }
  int64_t saved_ = 0;
};

std::string Module(const std::string& lhs, const std::string& rhs, const std::string& out,
                   const std::string& attributes, const std::string& epilogue = "") {
  std::string text = "HloModule f\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs + " parameter(1)\n";
  if (epilogue.empty()) return text + "  ROOT c = " + out + " convolution(a, b), " + attributes + "\n}\n";
  return text + "  c = " + out + " convolution(a, b), " + attributes + "\n" + epilogue + "}\n";
}

void ExpectFewPositions(const std::string& text, const std::string& expected_call) {
  SCOPED_TRACE(text);
  const StatusOr<std::string> compiled = testing::ThunkListing(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string& listing = *compiled;
  EXPECT_THAT(listing, HasSubstr("oneDNN " + expected_call + ";"));
  EXPECT_THAT(listing, HasSubstr("kernel few-positions:"));
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
}

TEST_F(FewPositionThunkTest, SmallConvolutionsMatchTheEvaluator) {
  // DenseNet's 3x3 layer on a 2x2 image.
  ExpectFewPositions(Module("f32[1,2,2,40]", "f32[3,3,40,32]", "f32[1,2,2,32]",
                            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
                     "convolution");
  // Odd sizes, stride 2, asymmetric padding, two images, 37 outputs (a block and a remainder).
  ExpectFewPositions(Module("f32[2,7,5,3]", "f32[3,2,3,37]", "f32[2,4,3,37]",
                            "window={size=3x2 stride=2x2 pad=1_1x0_1}, dim_labels=b01f_01io->b01f"),
                     "convolution");
  // Kernel dilation, the cropped remainder of a stride (negative high padding).
  ExpectFewPositions(Module("f32[1,9,10,6]", "f32[3,3,6,9]", "f32[1,2,2,9]",
                            "window={size=3x3 stride=2x3 pad=0_-1x0_-1 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f"),
                     "convolution");
  // 3 groups of 4 inputs to 8 outputs each.
  ExpectFewPositions(Module("f32[1,4,4,12]", "f32[3,3,4,24]", "f32[1,4,4,24]",
                            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=3"),
                     "convolution[3 groups]");
  // A 1x1 window on 2x2 images, which would otherwise be a matmul on the weights as they lie.
  ExpectFewPositions(Module("f32[1,2,2,300]", "f32[1,1,300,40]", "f32[1,2,2,40]",
                            "window={size=1x1}, dim_labels=b01f_01io->b01f"),
                     "convolution");
  // 1-D and 3-D windows.
  ExpectFewPositions(Module("f32[2,11,6]", "f32[4,6,9]", "f32[2,3,9]",
                            "window={size=4 stride=3 pad=1_0}, dim_labels=b0f_0io->b0f"),
                     "convolution");
  ExpectFewPositions(Module("f32[1,3,4,2,4]", "f32[2,3,2,4,10]", "f32[1,2,4,3,10]",
                            "window={size=2x3x2 pad=0_0x1_1x1_1}, dim_labels=b012f_012io->b012f"),
                     "convolution");
}

TEST_F(FewPositionThunkTest, EpiloguesAfterTheProduct) {
  // A bias and ReLU, then a residual added before the activation.
  ExpectFewPositions(
      Module("f32[1,3,3,16]", "f32[3,3,16,20]", "f32[1,3,3,20]",
             "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
             "  bias = f32[20] parameter(2)\n  bb = f32[1,3,3,20] broadcast(bias), dimensions={3}\n"
             "  s = f32[1,3,3,20] add(c, bb)\n  z = f32[] constant(0)\n"
             "  zb = f32[1,3,3,20] broadcast(z), dimensions={}\n  ROOT r = f32[1,3,3,20] maximum(s, zb)\n"),
      "convolution + binary_add[bias] + relu");
  ExpectFewPositions(Module("f32[1,4,4,8]", "f32[2,2,8,8]", "f32[1,4,4,8]",
                            "window={size=2x2 pad=0_1x0_1}, dim_labels=b01f_01io->b01f",
                            "  res = f32[1,4,4,8] parameter(2)\n  ROOT r = f32[1,4,4,8] add(c, res)\n"),
                     "convolution + binary_add");
}

TEST_F(FewPositionThunkTest, LeavesOtherConvolutionsToOneDnn) {
  // 81 positions, a depthwise kernel, a kernel's gradient: oneDNN's primitives as before.
  for (const std::string& text :
       {Module("f32[1,9,9,8]", "f32[3,3,8,16]", "f32[1,9,9,16]", "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f"),
        Module("f32[1,4,4,16]", "f32[3,3,1,16]", "f32[1,4,4,16]",
               "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=16")}) {
    SCOPED_TRACE(text);
    const StatusOr<std::string> compiled = testing::ThunkListing(text);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    const std::string& listing = *compiled;
    EXPECT_THAT(listing, HasSubstr("oneDNN convolution"));
    EXPECT_THAT(listing, Not(HasSubstr("few-positions")));
    testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
  }
}

}  // namespace
}  // namespace xlens::runtime
