// DepthwiseConv2dNative and its backprops: the forward kernel against the definition written out
// as plain loops, the backprops as the forward op's adjoints, NCHW against NHWC, the threaded
// kernels against the single-threaded ones, the shape function, and the input checks with
// TensorFlow's sentences. Values against TensorFlow itself: conv_pool_vs_tensorflow.py.
#include <gtest/gtest.h>

#include "conv_window_test_util.h"
#include "kernel_test_util.h"
#include "op_family_test_util.h"

#include "compiler/graph/op_registry.h"

namespace xlens::graph {
namespace {

using testing::Dot;
using testing::Int32Vector;
using testing::Ints;
using testing::RandomFloats;

struct Case {
  std::vector<int64_t> input, filter;  // NHWC, [kh, kw, c, m]
  int64_t stride_h, stride_w, dil_h, dil_w;
  std::string padding;
  std::vector<int64_t> pads;  // top, bottom, left, right (EXPLICIT)
};

AttrMap Attrs(const Case& c, const std::string& format = "NHWC") {
  const bool cf = format == "NCHW";
  auto spatial = [&](int64_t h, int64_t w) {
    return cf ? std::vector<int64_t>{1, 1, h, w} : std::vector<int64_t>{1, h, w, 1};
  };
  AttrMap a = {{"T", AttrValue::Type(DT_FLOAT)},
               {"strides", Ints(spatial(c.stride_h, c.stride_w))},
               {"dilations", Ints(spatial(c.dil_h, c.dil_w))},
               {"padding", AttrValue::String(c.padding)},
               {"data_format", AttrValue::String(format)}};
  if (c.padding == "EXPLICIT") {
    a["explicit_paddings"] =
        cf ? Ints({0, 0, 0, 0, c.pads[0], c.pads[1], c.pads[2], c.pads[3]})
           : Ints({0, 0, c.pads[0], c.pads[1], c.pads[2], c.pads[3], 0, 0});
  }
  return a;
}

// The definition: out[n, oy, ox, c*m+q] = sum x[n, oy*s + ky*d - pad, ..., c] * f[ky, kx, c, q].
Tensor Reference(const Case& c, const Tensor& x, const Tensor& f) {
  const int64_t N = c.input[0], H = c.input[1], W = c.input[2], C = c.input[3];
  const int64_t KH = c.filter[0], KW = c.filter[1], M = c.filter[3];
  int64_t pt = 0, pl = 0, OH, OW;
  const int64_t eh = (KH - 1) * c.dil_h + 1, ew = (KW - 1) * c.dil_w + 1;
  if (c.padding == "SAME") {
    OH = (H + c.stride_h - 1) / c.stride_h;
    OW = (W + c.stride_w - 1) / c.stride_w;
    pt = std::max<int64_t>(0, (OH - 1) * c.stride_h + eh - H) / 2;
    pl = std::max<int64_t>(0, (OW - 1) * c.stride_w + ew - W) / 2;
  } else {
    const int64_t ph = c.padding == "EXPLICIT" ? c.pads[0] + c.pads[1] : 0;
    const int64_t pw = c.padding == "EXPLICIT" ? c.pads[2] + c.pads[3] : 0;
    if (c.padding == "EXPLICIT") pt = c.pads[0], pl = c.pads[2];
    OH = (H + ph - eh) / c.stride_h + 1;
    OW = (W + pw - ew) / c.stride_w + 1;
  }
  Tensor y(DT_FLOAT, {N, OH, OW, C * M});
  auto xf = x.flat<float>();
  auto ff = f.flat<float>();
  auto yf = y.flat<float>();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox)
        for (int64_t ch = 0; ch < C; ++ch)
          for (int64_t q = 0; q < M; ++q) {
            double sum = 0;
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                const int64_t iy = oy * c.stride_h + ky * c.dil_h - pt;
                const int64_t ix = ox * c.stride_w + kx * c.dil_w - pl;
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                sum += double(xf[((n * H + iy) * W + ix) * C + ch]) *
                       ff[((ky * KW + kx) * C + ch) * M + q];
              }
            yf[((n * OH + oy) * OW + ox) * C * M + ch * M + q] = float(sum);
          }
  return y;
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {{2, 7, 7, 4}, {3, 3, 4, 1}, 1, 1, 1, 1, "SAME", {}},
      {{1, 9, 8, 3}, {3, 3, 3, 2}, 2, 2, 1, 1, "SAME", {}},
      {{1, 10, 11, 5}, {5, 3, 5, 1}, 2, 1, 1, 1, "VALID", {}},
      {{2, 6, 9, 2}, {3, 2, 2, 3}, 1, 2, 1, 1, "EXPLICIT", {1, 2, 0, 3}},
      {{1, 9, 9, 6}, {3, 3, 6, 1}, 1, 1, 2, 2, "SAME", {}},
      {{1, 12, 10, 2}, {3, 3, 2, 2}, 2, 1, 2, 3, "VALID", {}},
      // A filter larger than the input: most taps fall in the padding.
      {{1, 4, 5, 2}, {7, 9, 2, 1}, 1, 2, 1, 1, "SAME", {}},
      {{1, 5, 4, 3}, {4, 3, 3, 1}, 3, 2, 2, 1, "EXPLICIT", {4, 1, 0, 5}},
  };
  return cases;
}

TEST(DepthwiseConvOpsTest, ForwardMatchesTheDefinition) {
  uint32_t seed = 1;
  for (const Case& c : Cases()) {
    Tensor x = RandomFloats(c.input, seed++), f = RandomFloats(c.filter, seed++);
    auto out = testing::RunOp("DepthwiseConv2dNative", {x, f}, Attrs(c));
    ASSERT_TRUE(out.ok()) << out.status().message();
    Tensor want = Reference(c, x, f);
    ASSERT_EQ((*out)[0].dims(), want.dims());
    EXPECT_LT(testing::MaxAbsDiff((*out)[0], want), 1e-5) << c.padding;
  }
}

TEST(DepthwiseConvOpsTest, BackpropsAreTheForwardOpsAdjoints) {
  uint32_t seed = 100;
  for (const Case& c : Cases()) {
    Tensor x = RandomFloats(c.input, seed++), f = RandomFloats(c.filter, seed++);
    auto y = testing::RunOp("DepthwiseConv2dNative", {x, f}, Attrs(c));
    ASSERT_TRUE(y.ok()) << y.status().message();
    Tensor dy = RandomFloats((*y)[0].dims(), seed++);
    auto dx = testing::RunOp("DepthwiseConv2dNativeBackpropInput", {Int32Vector(c.input), f, dy},
                             Attrs(c));
    auto df = testing::RunOp("DepthwiseConv2dNativeBackpropFilter", {x, Int32Vector(c.filter), dy},
                             Attrs(c));
    ASSERT_TRUE(dx.ok()) << dx.status().message();
    ASSERT_TRUE(df.ok()) << df.status().message();
    ASSERT_EQ((*dx)[0].dims(), c.input);
    ASSERT_EQ((*df)[0].dims(), c.filter);
    const double forward = Dot((*y)[0], dy);
    EXPECT_NEAR(Dot(x, (*dx)[0]), forward, 1e-4 * (1 + std::abs(forward)));
    EXPECT_NEAR(Dot(f, (*df)[0]), forward, 1e-4 * (1 + std::abs(forward)));
  }
}

TEST(DepthwiseConvOpsTest, NchwGivesTheTransposedNhwcResult) {
  const Case& c = Cases()[3];  // EXPLICIT, multiplier 3, stride 2
  Tensor x = RandomFloats(c.input, 7), f = RandomFloats(c.filter, 8);
  auto nhwc = testing::RunOp("DepthwiseConv2dNative", {x, f}, Attrs(c));
  auto nchw = testing::RunOp("DepthwiseConv2dNative", {testing::ToChannelsFirst(x), f},
                             Attrs(c, "NCHW"));
  ASSERT_TRUE(nhwc.ok() && nchw.ok()) << nchw.status().message();
  EXPECT_LT(testing::MaxAbsDiff(testing::ToChannelsFirst((*nhwc)[0]), (*nchw)[0]), 1e-6);
  Tensor dy = RandomFloats((*nhwc)[0].dims(), 9);
  auto df_nhwc = testing::RunOp("DepthwiseConv2dNativeBackpropFilter",
                                {x, Int32Vector(c.filter), dy}, Attrs(c));
  auto df_nchw = testing::RunOp(
      "DepthwiseConv2dNativeBackpropFilter",
      {testing::ToChannelsFirst(x), Int32Vector(c.filter), testing::ToChannelsFirst(dy)},
      Attrs(c, "NCHW"));
  ASSERT_TRUE(df_nhwc.ok() && df_nchw.ok()) << df_nchw.status().message();
  EXPECT_LT(testing::MaxAbsDiff((*df_nhwc)[0], (*df_nchw)[0]), 1e-5);
}

TEST(DepthwiseConvOpsTest, ThreadedKernelsGiveTheSingleThreadedResult) {
  // Big enough to be split over the pool's threads; LocalKernelRunner runs without a pool.
  const Case c = {{4, 32, 32, 16}, {3, 3, 16, 1}, 1, 1, 1, 1, "SAME", {}};
  Tensor x = RandomFloats(c.input, 11), f = RandomFloats(c.filter, 12);
  auto threaded = testing::RunOp("DepthwiseConv2dNative", {x, f}, Attrs(c));
  testing::LocalKernelRunner inline_runner(&OpRegistry::Global());
  auto single = inline_runner.Run("DepthwiseConv2dNative", Attrs(c), {x, f});
  ASSERT_TRUE(threaded.ok() && single.ok());
  EXPECT_EQ(testing::MaxAbsDiff((*threaded)[0], (*single)[0]), 0.f);
  Tensor dy = RandomFloats((*single)[0].dims(), 13);
  auto df_threaded = testing::RunOp("DepthwiseConv2dNativeBackpropFilter",
                                    {x, Int32Vector(c.filter), dy}, Attrs(c));
  auto df_single = inline_runner.Run("DepthwiseConv2dNativeBackpropFilter", Attrs(c),
                                     {x, Int32Vector(c.filter), dy});
  ASSERT_TRUE(df_threaded.ok() && df_single.ok());
  EXPECT_LT(testing::MaxAbsDiff((*df_threaded)[0], (*df_single)[0]), 1e-3);
}

TEST(DepthwiseConvOpsTest, ShapeFunctionMultipliesTheDepth) {
  testing::LocalKernelRunner runner(&OpRegistry::Global());
  Case c = Cases()[1];
  auto shapes = runner.InferShapes("DepthwiseConv2dNative", Attrs(c),
                                   {PartialShape({-1, 9, 8, 3}), PartialShape({3, 3, 3, 2})});
  ASSERT_TRUE(shapes.ok()) << shapes.status().message();
  EXPECT_EQ((*shapes)[0], PartialShape({-1, 5, 4, 6}));
  auto nchw = runner.InferShapes("DepthwiseConv2dNative", Attrs(c, "NCHW"),
                                 {PartialShape({1, 3, 9, 8}), PartialShape({3, 3, 3, 2})});
  ASSERT_TRUE(nchw.ok()) << nchw.status().message();
  EXPECT_EQ((*nchw)[0], PartialShape({1, 6, 5, 4}));
}

TEST(DepthwiseConvOpsTest, RefusesWhatTensorFlowRefuses) {
  const Case& c = Cases()[0];
  auto depth = testing::RunOp("DepthwiseConv2dNative",
                              {RandomFloats({1, 5, 5, 3}, 1), RandomFloats({3, 3, 4, 1}, 2)},
                              Attrs(c));
  ASSERT_FALSE(depth.ok());
  EXPECT_NE(depth.status().message().find("input and filter must have the same depth: 3 vs 4"),
            std::string::npos)
      << depth.status().message();
  AttrMap bad_pads = Attrs(c);
  bad_pads["padding"] = AttrValue::String("EXPLICIT");
  bad_pads["explicit_paddings"] = Ints({1, 1, 0, 0, 0, 0, 0, 0});
  auto pads = testing::RunOp("DepthwiseConv2dNative",
                             {RandomFloats({1, 5, 5, 4}, 1), RandomFloats({3, 3, 4, 1}, 2)},
                             bad_pads);
  ASSERT_FALSE(pads.ok());
  EXPECT_NE(pads.status().message().find("batch or depth"), std::string::npos);
  AttrMap stride = Attrs(c);
  stride["strides"] = Ints({1, 1, 1, 2});
  auto strided = testing::RunOp("DepthwiseConv2dNative",
                                {RandomFloats({1, 5, 5, 4}, 1), RandomFloats({3, 3, 4, 1}, 2)},
                                stride);
  ASSERT_FALSE(strided.ok());
  EXPECT_NE(strided.status().message().find("strides in the batch and depth"), std::string::npos);
  // An out_backprop of the wrong shape is refused, not read past its end.
  auto dx = testing::RunOp("DepthwiseConv2dNativeBackpropInput",
                           {Int32Vector({1, 5, 5, 4}), RandomFloats({3, 3, 4, 1}, 2),
                            RandomFloats({1, 4, 5, 4}, 3)},
                           Attrs(c));
  ASSERT_FALSE(dx.ok());
  EXPECT_NE(dx.status().message().find("out_backprop has shape [1,4,5,4], expected [1,5,5,4]"),
            std::string::npos)
      << dx.status().message();
}

}  // namespace
}  // namespace xlens::graph
