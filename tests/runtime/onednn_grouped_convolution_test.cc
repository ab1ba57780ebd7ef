// Grouped and depthwise convolutions (feature_group_count > 1) on oneDNN's grouped primitives,
// against the reference evaluator: forward passes with strides, dilation, asymmetric padding,
// bias and activation epilogues, odd channel counts, depthwise with a channel multiplier, kernels
// read through transposes, NCHW modules, one image in bands of rows, and the two gradients JAX
// writes for a grouped convolution (the input's with feature groups, the kernel's with batch
// groups). Each case checks the thunk listing names the grouped
// oneDNN call, so one that fell back to Eigen fails. Large depthwise convolutions run in
// xlens's own loops instead (depthwise_convolution.h): those against the formula on every
// remainder of their tiles, and compiled modules against the evaluator.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <regex>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "../codegen/codegen_test_util.h"
#include "compiler/runtime/cpu_compiler.h"
#include "compiler/runtime/depthwise_convolution.h"
#include "compiler/runtime/measured_choice.h"
#include "compiler/runtime/onednn_thunks.h"
#include "compiler/support/cpu_features.h"
#include "compiler/support/thread_pool.h"
#include "test_util.h"

namespace xlens::runtime {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Module(const std::string& lhs, const std::string& rhs, const std::string& out,
                   const std::string& attributes, const std::string& rhs_op = "",
                   const std::string& epilogue = "") {
  std::string text = "HloModule g\nENTRY e {\n  a = " + lhs + " parameter(0)\n  b = " + rhs + " parameter(1)\n";
  text += rhs_op;
  const std::string kernel = rhs_op.empty() ? "b" : "rb";
  if (epilogue.empty()) return text + "  ROOT c = " + out + " convolution(a, " + kernel + "), " + attributes + "\n}\n";
  return text + "  c = " + out + " convolution(a, " + kernel + "), " + attributes + "\n" + epilogue + "}\n";
}

// Compiles `text`, expects `expected_call` (and no reference kernel of oneDNN's) in its thunk
// listing, and compares with the evaluator.
void ExpectGroupedOnOneDnn(const std::string& text, const std::string& expected_call,
                           const std::string& also = "") {
  SCOPED_TRACE(text);
  const StatusOr<std::string> compiled = testing::ThunkListing(text);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string& listing = *compiled;
  EXPECT_THAT(listing, HasSubstr("oneDNN " + expected_call));
  EXPECT_THAT(listing, HasSubstr(also));
  EXPECT_THAT(listing, Not(HasSubstr("kernel ref")));
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
}

// The tests that name the kernel a call runs on take the fixed rule between the depthwise loops
// and oneDNN's kernel, not a choice timed on the machine (measured_choice.h); MeasuredChoice
// below checks the timed one.
class OneDnnGroupedConvolutionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!OneDnnAvailable()) GTEST_SKIP() << "built without oneDNN (libdnnl-dev)";
    SetKernelChoiceMode(KernelChoiceMode::kRule);
  }
  void TearDown() override { SetKernelChoiceMode(KernelChoiceMode::kMeasured); }
};

TEST_F(OneDnnGroupedConvolutionTest, GroupedForwardWithEpilogues) {
  // 4 groups of 2 inputs to 3 outputs, stride 2x1, asymmetric padding, bias and relu fused.
  ExpectGroupedOnOneDnn(
      Module("f32[2,9,11,8]", "f32[3,2,2,12]", "f32[2,5,11,12]",
             "window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=b01f_01io->b01f, feature_group_count=4", "",
             "  bias = f32[12] parameter(2)\n  bb = f32[2,5,11,12] broadcast(bias), dimensions={3}\n"
             "  s = f32[2,5,11,12] add(c, bb)\n  z = f32[] constant(0)\n"
             "  zb = f32[2,5,11,12] broadcast(z), dimensions={}\n  ROOT r = f32[2,5,11,12] maximum(s, zb)\n"),
      "convolution[4 groups] + binary_add[bias] + relu");
  // Odd channels: 3 groups of 3 inputs to 2 outputs, kernel dilation, a residual added.
  ExpectGroupedOnOneDnn(
      Module("f32[3,8,8,9]", "f32[3,3,3,6]", "f32[3,7,6,6]",
             "window={size=3x3 pad=2_1x0_2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=3", "",
             "  res = f32[3,7,6,6] parameter(2)\n  ROOT r = f32[3,7,6,6] add(c, res)\n"),
      "convolution[3 groups] + binary_add");
  // 1-D, stride 2, the cropped remainder (negative high padding).
  ExpectGroupedOnOneDnn(Module("f32[3,20,6]", "f32[5,3,4]", "f32[3,8,4]",
                               "window={size=5 stride=2 pad=0_-1}, dim_labels=b0f_0io->b0f, feature_group_count=2"),
                        "convolution[2 groups]");
  // 3-D.
  ExpectGroupedOnOneDnn(
      Module("f32[1,5,6,4,4]", "f32[2,3,2,2,6]", "f32[1,4,6,3,6]",
             "window={size=2x3x2 pad=0_0x1_1x0_0}, dim_labels=b012f_012io->b012f, feature_group_count=2"),
      "convolution[2 groups]");
  // 1x1 grouped: stays a grouped convolution (the matmul path takes one group only).
  ExpectGroupedOnOneDnn(Module("f32[2,6,6,8]", "f32[1,1,4,6]", "f32[2,6,6,6]",
                               "window={size=1x1}, dim_labels=b01f_01io->b01f, feature_group_count=2"),
                        "convolution[2 groups]");
}

TEST_F(OneDnnGroupedConvolutionTest, DepthwiseForward) {
  // 5 channels (odd), one group each: oneDNN's depthwise kernels.
  ExpectGroupedOnOneDnn(Module("f32[2,10,9,5]", "f32[3,3,1,5]", "f32[2,5,5,5]",
                               "window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, "
                               "feature_group_count=5"),
                        "convolution[5 groups]");
  // Channel multiplier 2, dilation, bias.
  ExpectGroupedOnOneDnn(
      Module("f32[2,9,9,3]", "f32[3,3,1,6]", "f32[2,9,9,6]",
             "window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=3", "",
             "  bias = f32[6] parameter(2)\n  bb = f32[2,9,9,6] broadcast(bias), dimensions={3}\n"
             "  ROOT r = f32[2,9,9,6] add(c, bb)\n"),
      "convolution[3 groups] + binary_add[bias]");
  // MobileNet-like: 32 channels, 3x3, stride 1, SAME.
  ExpectGroupedOnOneDnn(Module("f32[2,12,12,32]", "f32[3,3,1,32]", "f32[2,12,12,32]",
                               "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32"),
                        "convolution[32 groups]");
}

// Whether the oneDNN call of the module `text` (its last) reorders its weights; the module must
// also match the evaluator, and its thunk listing hold `also`.
bool ReordersWeights(const std::string& text, const std::string& also = "") {
  SCOPED_TRACE(text);
  auto module = ParseHloModule(text);
  EXPECT_TRUE(module.ok()) << module.status().message();
  if (!module.ok()) return true;
  auto exe = CompileForCpu(std::move(*module), {});
  EXPECT_TRUE(exe.ok()) << exe.status().message();
  if (!exe.ok()) return true;
  EXPECT_THAT((*exe)->ThunkSequenceText(), HasSubstr(also));
  const OneDnnThunk* call = nullptr;
  for (const auto& thunk : (*exe)->thunks()) {
    if (const auto* c = dynamic_cast<const OneDnnThunk*>(thunk.get())) call = c;
  }
  EXPECT_NE(call, nullptr);
  testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
  return call == nullptr || call->ReordersWeights();
}

TEST_F(OneDnnGroupedConvolutionTest, DepthwiseWeightsAreReadWhereTheyLie) {
  // HWIO depthwise weights over whole blocks of 16 (or 8) groups are the blocked layout of
  // oneDNN's forward depthwise kernel (hwioG16g) as they lie: no reorder on each call.
  const std::string depthwise = "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=";
  EXPECT_FALSE(ReordersWeights(Module("f32[3,10,9,32]", "f32[3,3,1,32]", "f32[3,10,9,32]", depthwise + "32")));
  // One image of 2.7M multiply-adds, in bands of rows on a pool of two or more threads; and one
  // of 7x7x1024, 0.45M multiply-adds by its groups, also in bands (counted over all channels, as
  // a depthwise call runs far below the FMA rate: whole on one thread it took 0.020 ms against
  // 0.013 in two bands).
  const std::string bands = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "; 1 part on";
  EXPECT_FALSE(ReordersWeights(Module("f32[1,7,7,1024]", "f32[3,3,1,1024]", "f32[1,7,7,1024]", depthwise + "1024"),
                               bands));
  EXPECT_FALSE(ReordersWeights(Module("f32[1,48,48,128]", "f32[3,3,1,128]", "f32[1,48,48,128]", depthwise + "128"),
                               bands));
  // Those that are not: 5 groups (a block padded to 16), a kernel stored OIHW, 4 groups of 2 to 3.
  EXPECT_TRUE(ReordersWeights(Module("f32[3,10,9,5]", "f32[3,3,1,5]", "f32[3,10,9,5]", depthwise + "5")));
  EXPECT_TRUE(ReordersWeights(Module("f32[3,10,9,32]", "f32[32,1,3,3]", "f32[3,10,9,32]", depthwise + "32",
                                     "  rb = f32[3,3,1,32] transpose(b), dimensions={2,3,1,0}\n")));
  EXPECT_TRUE(ReordersWeights(Module("f32[2,9,11,8]", "f32[3,2,2,12]", "f32[2,5,11,12]",
                                     "window={size=3x2 stride=2x1 pad=1_1x0_1}, dim_labels=b01f_01io->b01f, "
                                     "feature_group_count=4")));
}

TEST_F(OneDnnGroupedConvolutionTest, OtherLayouts) {
  // Kernel stored [out, in, h, w] (OIHW) and read through a transpose.
  ExpectGroupedOnOneDnn(Module("f32[2,8,8,8]", "f32[12,2,3,3]", "f32[2,6,6,12]",
                               "window={size=3x3}, dim_labels=b01f_01io->b01f, feature_group_count=4",
                               "  rb = f32[3,3,2,12] transpose(b), dimensions={2,3,1,0}\n"),
                        "convolution[4 groups]");
  // An NCHW module (TensorFlow's data_format): the activations reach oneDNN channels-last.
  ExpectGroupedOnOneDnn(Module("f32[2,6,8,8]", "f32[9,2,3,3]", "f32[2,9,8,8]",
                               "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01, feature_group_count=3"),
                        "convolution[3 groups]");
}

TEST_F(OneDnnGroupedConvolutionTest, OneImageInBandsOfRows) {
  const std::string bands = ThreadPool::Default().parallelism() >= 2 ? "; 2 parts on the pool" : "; 1 part on";
  // 40x40x32 in 2 groups: 7M multiply-adds, enough to split one image's rows over the pool.
  ExpectGroupedOnOneDnn(Module("f32[1,40,40,32]", "f32[3,3,16,32]", "f32[1,40,40,32]",
                               "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2"),
                        "convolution[2 groups]", bands);
}

TEST_F(OneDnnGroupedConvolutionTest, InputGradientOfGroupedConvolution) {
  // The forward f32[2,9,11,4] (2 groups of 2) -> f32[2,5,11,6], stride 2x1, pad 1_1x1_1: its
  // input's gradient dilates the output's by the stride and slides the reversed kernel, 2 groups
  // of 3 outputs' gradients against 2 inputs each.
  ExpectGroupedOnOneDnn(Module("f32[2,5,11,6]", "f32[3,3,3,4]", "f32[2,9,11,4]",
                               "window={size=3x3 pad=1_1x1_1 lhs_dilate=2x1}, dim_labels=b01f_01io->b01f, "
                               "feature_group_count=2",
                               "  rb = f32[3,3,3,4] reverse(b), dimensions={0,1}\n"),
                        "convolution_backward_data[2 groups]");
  // Depthwise.
  ExpectGroupedOnOneDnn(Module("f32[2,5,11,5]", "f32[3,3,1,5]", "f32[2,9,11,5]",
                               "window={size=3x3 pad=1_1x1_1 lhs_dilate=2x1}, dim_labels=b01f_01io->b01f, "
                               "feature_group_count=5",
                               "  rb = f32[3,3,1,5] reverse(b), dimensions={0,1}\n"),
                        "convolution_backward_data[5 groups]");
}

TEST_F(OneDnnGroupedConvolutionTest, KernelGradientOfGroupedConvolution) {
  // The forward f32[2,9,11,8] (4 groups of 2) -> 12 features, SAME: the kernel's gradient is the
  // input (features as its batch, 4 batch groups) against the output's gradient.
  ExpectGroupedOnOneDnn(Module("f32[2,9,11,8]", "f32[2,9,11,12]", "f32[3,3,2,12]",
                               "window={size=9x11 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, batch_group_count=4"),
                        "convolution_backward_weights[4 groups]");
  // Stride 2 (the gradient's window dilation), 3 groups of 2 to 2, odd sizes.
  ExpectGroupedOnOneDnn(Module("f32[2,9,11,6]", "f32[2,5,6,6]", "f32[3,3,2,6]",
                               "window={size=5x6 pad=1_1x1_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf, "
                               "batch_group_count=3"),
                        "convolution_backward_weights[3 groups]");
  // Depthwise, 5 channels; 6 images so that parts of them add up on a pool of several threads.
  ExpectGroupedOnOneDnn(Module("f32[6,8,8,5]", "f32[6,8,8,5]", "f32[3,3,1,5]",
                               "window={size=8x8 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, batch_group_count=5"),
                        "convolution_backward_weights[5 groups]");
}

// Both gradients of sum(sin(conv(x, w))) as jax.grad lowers them (jaxlib 0.10): the forward,
// the input's gradient reading the kernel through JAX's reshape and reverse, and the kernel's
// gradient with batch groups, all three on oneDNN and agreeing with the evaluator.
TEST_F(OneDnnGroupedConvolutionTest, JaxGradientsOfGroupedAndDepthwiseConvolutions) {
  struct Case {
    std::string text, groups;
  };
  const std::vector<Case> cases = {
      // 4 groups of 4 inputs to 6 outputs, stride 2x1, SAME.
      {R"(HloModule jit__lambda, entry_computation_layout={(f32[4,15,13,16]{3,2,1,0}, f32[3,3,4,24]{3,2,1,0})->(f32[4,15,13,16]{3,2,1,0}, f32[3,3,4,24]{3,2,1,0})}

ENTRY main.1 {
  x.1 = f32[4,15,13,16]{3,2,1,0} parameter(0)
  w.1 = f32[3,3,4,24]{3,2,1,0} parameter(1)
  conv_general_dilated.3 = f32[4,8,13,24]{3,2,1,0} convolution(x.1, w.1), window={size=3x3 stride=2x1 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4
  cos.1 = f32[4,8,13,24]{3,2,1,0} cosine(conv_general_dilated.3)
  reshape.3 = f32[3,3,4,4,6]{4,3,2,1,0} reshape(w.1)
  reshape.4 = f32[3,3,4,4,6]{4,2,3,1,0} transpose(reshape.3), dimensions={0,1,3,2,4}
  reshape.5 = f32[3,3,16,6]{3,2,1,0} reshape(reshape.4)
  rev.1 = f32[3,3,16,6]{3,2,1,0} reverse(reshape.5), dimensions={0,1}
  conv_general_dilated.5 = f32[4,15,13,16]{3,2,1,0} convolution(cos.1, rev.1), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x1}, dim_labels=b01f_01oi->b01f, feature_group_count=4
  conv_general_dilated.4 = f32[3,3,4,24]{3,2,1,0} convolution(x.1, cos.1), window={size=8x13 pad=1_1x1_1 rhs_dilate=2x1}, dim_labels=f01b_i01o->01bf, batch_group_count=4
  ROOT tuple.1 = (f32[4,15,13,16]{3,2,1,0}, f32[3,3,4,24]{3,2,1,0}) tuple(conv_general_dilated.5, conv_general_dilated.4)
})", "[4 groups]"},
      // Depthwise with a channel multiplier of 2 on 7 channels, stride 2, SAME.
      {R"(HloModule jit__lambda, entry_computation_layout={(f32[3,15,15,7]{3,2,1,0}, f32[3,3,1,14]{3,2,1,0})->(f32[3,15,15,7]{3,2,1,0}, f32[3,3,1,14]{3,2,1,0})}

ENTRY main.1 {
  x.1 = f32[3,15,15,7]{3,2,1,0} parameter(0)
  w.1 = f32[3,3,1,14]{3,2,1,0} parameter(1)
  conv_general_dilated.3 = f32[3,8,8,14]{3,2,1,0} convolution(x.1, w.1), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=7
  cos.1 = f32[3,8,8,14]{3,2,1,0} cosine(conv_general_dilated.3)
  reshape.1 = f32[3,3,7,2]{3,2,1,0} reshape(w.1)
  rev.1 = f32[3,3,7,2]{3,2,1,0} reverse(reshape.1), dimensions={0,1}
  conv_general_dilated.5 = f32[3,15,15,7]{3,2,1,0} convolution(cos.1, rev.1), window={size=3x3 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=b01f_01oi->b01f, feature_group_count=7
  conv_general_dilated.4 = f32[3,3,1,14]{3,2,1,0} convolution(x.1, cos.1), window={size=8x8 pad=1_1x1_1 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf, batch_group_count=7
  ROOT tuple.1 = (f32[3,15,15,7]{3,2,1,0}, f32[3,3,1,14]{3,2,1,0}) tuple(conv_general_dilated.5, conv_general_dilated.4)
})", "[7 groups]"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const StatusOr<std::string> compiled = testing::ThunkListing(c.text);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    const std::string& listing = *compiled;
    EXPECT_THAT(listing, HasSubstr("oneDNN convolution" + c.groups));
    EXPECT_THAT(listing, HasSubstr("oneDNN convolution_backward_data" + c.groups));
    EXPECT_THAT(listing, HasSubstr("oneDNN convolution_backward_weights" + c.groups));
    EXPECT_THAT(listing, Not(HasSubstr("kernel ref")));
    testing::ExpectMatchesEvaluator(c.text, {}, {2e-5, 2e-5});
  }
}

// out[b, oh, ow, c] of a depthwise convolution, directly from the formula, in double precision,
// with d's bias (from `bias`) and activation: XLA's maximum and minimum, a NaN kept.
std::vector<double> DirectDepthwise(const DepthwiseConvolution& d, const std::vector<float>& input,
                                    const std::vector<float>& weights, const std::vector<float>& bias = {}) {
  std::vector<double> out(d.OutputElements(), 0.0);
  for (int64_t b = 0; b < d.images; ++b) {
    for (int64_t oh = 0; oh < d.out_height; ++oh) {
      for (int64_t ow = 0; ow < d.out_width; ++ow) {
        for (int64_t kh = 0; kh < d.kernel_height; ++kh) {
          for (int64_t kw = 0; kw < 3; ++kw) {
            const int64_t ih = oh * d.stride_height - d.pad_top + kh, iw = ow * d.stride_width - d.pad_left + kw;
            if (ih < 0 || ih >= d.height || iw < 0 || iw >= d.width) continue;
            for (int64_t c = 0; c < d.channels; ++c) {
              out[((b * d.out_height + oh) * d.out_width + ow) * d.channels + c] +=
                  static_cast<double>(input[((b * d.height + ih) * d.width + iw) * d.channels + c]) *
                  weights[kh * d.weights_row_stride + kw * d.weights_tap_stride + c];
            }
          }
        }
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    double& x = out[i];
    if (d.bias) x += bias[i % d.channels];
    if (d.activation != DepthwiseActivation::kNone && !std::isnan(x)) x = std::max(x, 0.0);
    if (d.activation == DepthwiseActivation::kRelu6 && !std::isnan(x)) x = std::min(x, 6.0);
  }
  return out;
}

TEST(DepthwiseConvolutionTest, LoopsMatchTheFormula) {
  if (!CpuHasAvx512F()) GTEST_SKIP() << "the loops run on AVX-512 only";
  struct Case {
    int64_t height, width, channels, kernel_height, pad_top, pad_bottom, pad_left, pad_right;
  };
  // Widths leaving every remainder of the 7-position tiles (1-6 and none); padding none, SAME,
  // wider than the window's reach and cropping (negative); kernels 1, 3 and 5 rows high.
  for (const Case& k : {Case{5, 7, 64, 3, 1, 1, 1, 1}, Case{4, 9, 128, 3, 0, 0, 0, 0}, Case{6, 10, 64, 5, 2, 2, 1, 1},
                        Case{3, 11, 192, 1, 0, 0, 1, 1}, Case{5, 12, 64, 3, 2, 1, 2, 0},
                        Case{4, 13, 64, 3, -1, 1, 1, -1}, Case{3, 6, 128, 3, 1, 1, 1, 1}}) {
    DepthwiseConvolution d;
    d.images = 2;
    d.height = k.height;
    d.width = k.width;
    d.channels = k.channels;
    d.kernel_height = k.kernel_height;
    d.pad_top = k.pad_top;
    d.pad_left = k.pad_left;
    d.out_height = k.height + k.pad_top + k.pad_bottom - k.kernel_height + 1;
    d.out_width = k.width + k.pad_left + k.pad_right - 2;
    // Taps 3 rows apart as HWIO lies, and (the last case) the rows padded apart.
    d.weights_tap_stride = k.channels;
    d.weights_row_stride = k.height == 3 && k.width == 6 ? 5 * k.channels : 3 * k.channels;
    SCOPED_TRACE(::testing::Message() << k.height << "x" << k.width << "x" << k.channels << " kernel "
                                    << k.kernel_height << "x3 pad " << k.pad_top << "_" << k.pad_bottom << "x"
                                    << k.pad_left << "_" << k.pad_right);
    std::vector<float> input(d.images * d.height * d.width * d.channels), weights(k.kernel_height * d.weights_row_stride);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i * 7919) % 23) * 0.25f - 2.75f;
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>((i * 104729) % 17) * 0.125f - 1.0f;
    const std::vector<double> expected = DirectDepthwise(d, input, weights);
    // Streamed (a 64-byte aligned output) and stored (one float past it); the rows in two bands.
    std::vector<float> buffer(d.OutputElements() + 32);
    float* aligned = buffer.data() + (16 - reinterpret_cast<uintptr_t>(buffer.data()) % 64 / sizeof(float)) % 16;
    for (float* output : {aligned, aligned + 1}) {
      std::fill(buffer.begin(), buffer.end(), -1e30f);
      for (int64_t b = 0; b < d.images; ++b) {
        DepthwiseConvolutionRows(d, input.data(), weights.data(), nullptr, output, b, 0, d.out_height / 2);
        DepthwiseConvolutionRows(d, input.data(), weights.data(), nullptr, output, b, d.out_height / 2,
                                 d.out_height);
      }
      for (int64_t i = 0; i < d.OutputElements(); ++i) {
        ASSERT_NEAR(output[i], expected[i], 1e-4) << "element " << i;
      }
    }
  }
}

// Stride 2 across (and 1 or 2 down), channel counts that end their rows in a block of 16, 32 or
// 48 channels, a bias and a ReLU or ReLU6 applied in registers: against the formula, with a NaN,
// infinities and zeros in the input, so that outputs are NaN, +-inf, -0 before the activation
// and both sides of 6. The activations give +0 for -0, as XLA's maximum does.
TEST(DepthwiseConvolutionTest, StridesNarrowChannelBlocksAndEpilogues) {
  if (!CpuHasAvx512F()) GTEST_SKIP() << "the loops run on AVX-512 only";
  struct Case {
    int64_t height, width, channels, stride_height, stride_width, pad_top, pad_bottom, pad_left, pad_right;
    bool bias;
    DepthwiseActivation activation;
  };
  using A = DepthwiseActivation;
  // Widths whose outputs leave remainders of the 7-position tiles at stride 2; padding VALID,
  // SAME for stride 2 (0_1 on even sizes, 1_1 on odd ones) and wider; 16 to 144 channels.
  for (const Case& k : {Case{7, 16, 16, 2, 2, 0, 1, 0, 1, true, A::kRelu6}, Case{6, 15, 48, 1, 2, 1, 1, 1, 1, false, A::kRelu},
                        Case{5, 29, 96, 2, 2, 1, 1, 1, 1, true, A::kNone}, Case{4, 9, 144, 1, 1, 1, 1, 1, 1, true, A::kRelu6},
                        Case{5, 11, 32, 2, 2, 2, 0, 2, 2, false, A::kRelu6}, Case{3, 20, 80, 1, 2, 0, 0, 0, 0, true, A::kRelu}}) {
    DepthwiseConvolution d;
    d.images = 2;
    d.height = k.height;
    d.width = k.width;
    d.channels = k.channels;
    d.kernel_height = 3;
    d.stride_height = k.stride_height;
    d.stride_width = k.stride_width;
    d.pad_top = k.pad_top;
    d.pad_left = k.pad_left;
    d.out_height = (k.height + k.pad_top + k.pad_bottom - 3) / k.stride_height + 1;
    d.out_width = (k.width + k.pad_left + k.pad_right - 3) / k.stride_width + 1;
    d.weights_tap_stride = k.channels;
    d.weights_row_stride = 3 * k.channels;
    d.bias = k.bias;
    d.activation = k.activation;
    SCOPED_TRACE(::testing::Message() << k.height << "x" << k.width << "x" << k.channels << " stride "
                                    << k.stride_height << "x" << k.stride_width << " pad " << k.pad_top << "_"
                                    << k.pad_bottom << "x" << k.pad_left << "_" << k.pad_right << " bias " << k.bias
                                    << " activation " << static_cast<int>(k.activation));
    std::vector<float> input(d.images * d.height * d.width * d.channels), weights(3 * d.weights_row_stride);
    std::vector<float> bias(d.channels);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<float>((i * 7919) % 23) * 0.25f - 2.75f;
    for (size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<float>((i * 104729) % 17) * 0.125f - 1.0f;
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 7) - 3.0f;
    bias[1] = -0.0f;
    // Specials in the input, and a zero patch of an image where the window reads only zeros.
    const float inf = std::numeric_limits<float>::infinity();
    input[(d.width + 1) * d.channels + 3] = std::nanf("");
    input[(2 * d.width + 4) * d.channels + 5] = inf;
    input[(d.width + 6) * d.channels + 6] = -inf;
    for (int64_t p = 0; p < std::min<int64_t>(4, d.height) * d.width; ++p) {
      for (int64_t c = 0; c < d.channels; ++c) input[(d.height * d.width + p) * d.channels + c] = c % 2 ? -0.0f : 0.0f;
    }
    const std::vector<double> expected = DirectDepthwise(d, input, weights, bias);
    std::vector<float> buffer(d.OutputElements() + 32);
    float* aligned = buffer.data() + (16 - reinterpret_cast<uintptr_t>(buffer.data()) % 64 / sizeof(float)) % 16;
    for (float* output : {aligned, aligned + 1}) {
      std::fill(buffer.begin(), buffer.end(), -1e30f);
      for (int64_t b = 0; b < d.images; ++b) {
        DepthwiseConvolutionRows(d, input.data(), weights.data(), bias.data(), output, b, 0, d.out_height / 2);
        DepthwiseConvolutionRows(d, input.data(), weights.data(), bias.data(), output, b, d.out_height / 2,
                                 d.out_height);
      }
      int64_t nans = 0;
      for (int64_t i = 0; i < d.OutputElements(); ++i) {
        if (std::isnan(expected[i])) {
          ++nans;
          ASSERT_TRUE(std::isnan(output[i])) << "element " << i << ": " << output[i];
        } else if (std::isinf(expected[i])) {
          ASSERT_EQ(output[i], expected[i]) << "element " << i;
        } else {
          ASSERT_NEAR(output[i], expected[i], 1e-4) << "element " << i;
        }
        if (k.activation != A::kNone && output[i] == 0) {
          ASSERT_FALSE(std::signbit(output[i])) << "element " << i;
        }
      }
      EXPECT_GT(nans, 0);  // the NaN reached the output through the activation
    }
  }
}

// Below the size from which depthwise convolutions take xlens's loops whatever their post-ops,
// one that ends in a ReLU6 or ReLU takes them (with plain stores), and one with a bias only or
// none stays on oneDNN's kernel.
TEST_F(OneDnnGroupedConvolutionTest, BelowTheStreamingSizeOnlyAnActivationTakesTheLoops) {
  if (!CpuHasAvx512F()) GTEST_SKIP() << "the loops run on AVX-512 only";
  const std::string conv = "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=32";
  const std::string bias = "  bias = f32[32] parameter(2)\n  bb = f32[2,7,9,32] broadcast(bias), dimensions={3}\n"
                           "  s = f32[2,7,9,32] add(c, bb)\n";
  const std::string relu6 = bias + "  z = f32[] constant(0)\n  six = f32[] constant(6)\n"
                                   "  ROOT r = f32[2,7,9,32] clamp(z, s, six)\n";
  const std::string relu = "  z = f32[] constant(0)\n  zb = f32[2,7,9,32] broadcast(z), dimensions={}\n"
                           "  ROOT r = f32[2,7,9,32] maximum(c, zb)\n";
  ExpectGroupedOnOneDnn(Module("f32[2,7,9,32]", "f32[3,3,1,32]", "f32[2,7,9,32]", conv, "", relu6),
                        "convolution[32 groups] + binary_add[bias] + relu6", "kernel depthwise:avx512");
  ExpectGroupedOnOneDnn(Module("f32[2,7,9,32]", "f32[3,3,1,32]", "f32[2,7,9,32]", conv, "", relu),
                        "convolution[32 groups] + relu", "kernel depthwise:avx512");
  for (const std::string& text : {Module("f32[2,7,9,32]", "f32[3,3,1,32]", "f32[2,7,9,32]", conv),
                                  Module("f32[2,7,9,32]", "f32[3,3,1,32]", "f32[2,7,9,32]", conv, "",
                                         bias.substr(0, bias.rfind("  s =")) +
                                             "  ROOT s = f32[2,7,9,32] add(c, bb)\n")}) {
    const StatusOr<std::string> listing = testing::ThunkListing(text);
    ASSERT_TRUE(listing.ok()) << listing.status().message();
    EXPECT_THAT(*listing, Not(HasSubstr("kernel depthwise"))) << text;
  }
}

// Lowers the output size from which depthwise convolutions take xlens's loops for one test.
class DepthwiseLoopsTest : public OneDnnGroupedConvolutionTest {
 protected:
  void SetUp() override {
    OneDnnGroupedConvolutionTest::SetUp();
    if (!CpuHasAvx512F()) GTEST_SKIP() << "the loops run on AVX-512 only";
    SetDepthwiseMinOutputElements(0);
  }
  void TearDown() override {
    SetDepthwiseMinOutputElements(kDepthwiseMinOutputElements);
    OneDnnGroupedConvolutionTest::TearDown();
  }
};

TEST_F(DepthwiseLoopsTest, DepthwiseConvolutionsInOwnLoops) {
  const std::string depthwise = "dim_labels=b01f_01io->b01f, feature_group_count=";
  // SAME, 64 channels, a width of two tiles and a remainder.
  ExpectGroupedOnOneDnn(Module("f32[3,9,17,64]", "f32[3,3,1,64]", "f32[3,9,17,64]",
                               "window={size=3x3 pad=1_1x1_1}, " + depthwise + "64"),
                        "convolution[64 groups]", "kernel depthwise:avx512");
  // One image in bands of rows; a 5x3 kernel, VALID; the kernel stored [3, 5, 1, channels] (its
  // taps 5 rows apart, its rows one tap apart).
  ExpectGroupedOnOneDnn(Module("f32[1,12,10,128]", "f32[3,5,1,128]", "f32[1,8,8,128]",
                               "window={size=5x3}, " + depthwise + "128",
                               "  rb = f32[5,3,1,128] transpose(b), dimensions={1,0,2,3}\n"),
                        "convolution[128 groups]", "kernel depthwise:avx512");
  // Not theirs: 40 channels (not whole vectors of 16), stride 3 across, a dilated kernel, a
  // residual added, and a scaling after the ReLU6.
  const std::string on_onednn = "kernel depthwise";
  for (const std::string& text :
       {Module("f32[2,8,8,40]", "f32[3,3,1,40]", "f32[2,8,8,40]", "window={size=3x3 pad=1_1x1_1}, " + depthwise + "40"),
        Module("f32[2,9,9,64]", "f32[3,3,1,64]", "f32[2,9,3,64]",
               "window={size=3x3 stride=1x3 pad=1_1x0_0}, " + depthwise + "64"),
        Module("f32[2,9,9,64]", "f32[3,3,1,64]", "f32[2,9,9,64]",
               "window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, " + depthwise + "64"),
        Module("f32[2,8,8,64]", "f32[3,3,1,64]", "f32[2,8,8,64]", "window={size=3x3 pad=1_1x1_1}, " + depthwise + "64",
               "", "  res = f32[2,8,8,64] parameter(2)\n  ROOT r = f32[2,8,8,64] add(c, res)\n"),
        Module("f32[2,8,8,64]", "f32[3,3,1,64]", "f32[2,8,8,64]", "window={size=3x3 pad=1_1x1_1}, " + depthwise + "64",
               "", "  z = f32[] constant(0)\n  six = f32[] constant(6)\n  r6 = f32[2,8,8,64] clamp(z, c, six)\n"
               "  two = f32[] constant(2)\n  tb = f32[2,8,8,64] broadcast(two), dimensions={}\n"
               "  ROOT r = f32[2,8,8,64] multiply(r6, tb)\n")}) {
    const StatusOr<std::string> listing = testing::ThunkListing(text);
    ASSERT_TRUE(listing.ok()) << listing.status().message();
    EXPECT_THAT(*listing, Not(HasSubstr(on_onednn))) << text;
  }
}

// MobileNet's depthwise layers: 3x3, stride 1 or 2 with TensorFlow's SAME padding (0_1 on even
// sizes at stride 2), 48, 96 and 144 channels (blocks of 64 and a narrower one), a bias and
// ReLU6 as JAX writes it (min(max(x, 0), 6)) and as TensorFlow lowers it (clamp(0, x, 6)), or a
// ReLU: in the loops' registers, against the evaluator, with a NaN, infinities and -0 in the
// input and a bias that puts outputs on both sides of 0 and 6.
TEST_F(DepthwiseLoopsTest, MobileNetEpiloguesStridesAndChannelCounts) {
  const std::string depthwise = "dim_labels=b01f_01io->b01f, feature_group_count=";
  auto epilogue = [](const std::string& shape, int64_t channels, const std::string& activation) {
    std::string text = "  bias = f32[" + std::to_string(channels) + "] parameter(2)\n  bb = " + shape +
                       " broadcast(bias), dimensions={3}\n  s = " + shape + " add(c, bb)\n"
                       "  z = f32[] constant(0)\n  six = f32[] constant(6)\n";
    if (activation == "clamp") return text + "  ROOT r = " + shape + " clamp(z, s, six)\n";
    text += "  zb = " + shape + " broadcast(z), dimensions={}\n";
    if (activation == "relu") return text + "  ROOT r = " + shape + " maximum(s, zb)\n";
    text += "  m = " + shape + " maximum(s, zb)\n";
    return text + "  sb = " + shape + " broadcast(six), dimensions={}\n  ROOT r = " + shape + " minimum(sb, m)\n";
  };
  struct Case {
    std::string input, kernel, output, window;
    int64_t channels;
    std::string activation, call;
  };
  const std::vector<Case> cases = {
      {"f32[2,12,12,96]", "f32[3,3,1,96]", "f32[2,6,6,96]", "size=3x3 stride=2x2 pad=0_1x0_1", 96, "clamp",
       "convolution[96 groups] + binary_add[bias] + relu6"},
      {"f32[3,9,17,48]", "f32[3,3,1,48]", "f32[3,9,17,48]", "size=3x3 pad=1_1x1_1", 48, "minmax",
       "convolution[48 groups] + binary_add[bias] + relu6"},
      {"f32[1,13,15,144]", "f32[3,3,1,144]", "f32[1,7,8,144]", "size=3x3 stride=2x2 pad=1_1x1_1", 144, "relu",
       "convolution[144 groups] + binary_add[bias] + relu"},
  };
  for (const Case& c : cases) {
    const std::string text = Module(c.input, c.kernel, c.output, "window={" + c.window + "}, " + depthwise +
                                    std::to_string(c.channels), "", epilogue(c.output, c.channels, c.activation));
    SCOPED_TRACE(text);
    const StatusOr<std::string> compiled = testing::ThunkListing(text);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    const std::string& listing = *compiled;
    EXPECT_THAT(listing, HasSubstr("oneDNN " + c.call));
    EXPECT_THAT(listing, HasSubstr("kernel depthwise:avx512"));
    std::vector<Literal> arguments = testing::RandomArguments(text, 3);
    auto input = arguments[0].data<float>();
    const float inf = std::numeric_limits<float>::infinity();
    const float specials[] = {std::nanf(""), inf, -inf, -0.0f};
    for (size_t i = 0; i < 4; ++i) input[(i * 7919 + 13) % input.size()] = specials[i];
    auto bias = arguments[2].data<float>();
    for (size_t i = 0; i < bias.size(); ++i) bias[i] = static_cast<float>(i % 9) - 2.0f;  // -2 .. 6
    testing::ExpectMatchesEvaluator(text, std::move(arguments), {2e-5, 2e-5});
  }
}

// Timed against oneDNN's kernel at compile time, the depthwise loops or oneDNN's call runs, the
// listing says which with both times (the winner's first, never above the other's unless the
// loops were kept within the margin), a second compilation of the shape takes the cached choice,
// and either way the module matches the evaluator: the plain convolution (streaming stores from
// the lowered size up), MobileNet's bias and ReLU6, and constant weights.
TEST_F(DepthwiseLoopsTest, MeasuredChoice) {
  SetKernelChoiceMode(KernelChoiceMode::kMeasured);
  ClearMeasuredChoices();
  const std::string conv = "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=80";
  const std::string relu6 = "  bias = f32[80] parameter(2)\n  bb = f32[2,9,11,80] broadcast(bias), dimensions={3}\n"
                            "  s = f32[2,9,11,80] add(c, bb)\n  z = f32[] constant(0)\n  six = f32[] constant(6)\n"
                            "  ROOT r = f32[2,9,11,80] clamp(z, s, six)\n";
  // Constant weights: the trials run on scratch weights, the executable on the module's.
  std::string constant = "  rb = f32[3,3,1,80] constant({";
  for (int kh = 0; kh < 3; ++kh) {
    constant += kh ? ", {" : "{";
    for (int kw = 0; kw < 3; ++kw) {
      constant += kw ? ", {{" : "{{";
      for (int c = 0; c < 80; ++c) constant += (c ? ", " : "") + std::to_string((kh * 7 + kw * 3 + c) % 11 - 5);
      constant += "}}";
    }
    constant += "}";
  }
  constant += "})\n";
  for (const std::string& text : {Module("f32[2,9,11,80]", "f32[3,3,1,80]", "f32[2,9,11,80]", conv),
                                  Module("f32[2,9,11,80]", "f32[3,3,1,80]", "f32[2,9,11,80]", conv, "", relu6),
                                  Module("f32[2,9,11,80]", "f32[3,3,1,80]", "f32[2,9,11,80]", conv, constant)}) {
    SCOPED_TRACE(text);
    // The executable whose compilation timed the two against the evaluator; then the choice as
    // the listing of a second compilation states it.
    ClearMeasuredChoices();
    testing::ExpectMatchesEvaluator(text, {}, {2e-5, 2e-5});
    const StatusOr<std::string> compiled = testing::ThunkListing(text);
    ASSERT_TRUE(compiled.ok()) << compiled.status().message();
    const std::string& listing = *compiled;
    // The winner's name ends at the first comma: on a pool of one thread the loops' is
    // "depthwise:avx512, whole".
    const std::regex timed(
        R"(kernel ([^,;]+)(?:, whole)?, cached: timed ([0-9.]+) ms against (\S+) ([0-9.]+) ms(, within the 10% margin)?;)");
    std::smatch m;
    ASSERT_TRUE(std::regex_search(listing, m, timed)) << listing;
    const std::string winner = m[1].str(), loser = m[3].str();
    // One side is the loops, the other one of oneDNN's kernels (brdgmm_dw on AVX-512, jit_dw
    // where oneDNN's ISA is capped), never its reference loops.
    const std::string loops = "depthwise:avx512";
    const std::string library = winner == loops ? loser : winner;
    EXPECT_TRUE(winner == loops || loser == loops) << listing;
    EXPECT_TRUE(library.rfind("depthwise:", 0) != 0 && library.find("ref") == std::string::npos) << listing;
    // The winner is the faster, or the loops (the rule's pick) kept within the margin.
    if (m[5].matched) {
      EXPECT_EQ(winner, loops) << listing;
    } else {
      EXPECT_LE(std::stod(m[2].str()), std::stod(m[4].str())) << listing;
    }
  }
  ClearMeasuredChoices();
}

}  // namespace
}  // namespace xlens::runtime
