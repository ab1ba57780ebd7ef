// Shape functions and input checks of the nn ops, against what TensorFlow infers and refuses.
// Kernel values are checked against TensorFlow in op_kernels_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "compiler/graph/ops/register_ops.h"
#include "op_family_test_util.h"

namespace xlens::graph {
namespace {

AttrMap ConvAttrs(std::string padding, std::vector<int64_t> strides) {
  AttrListValue s;
  s.i = std::move(strides);
  return {{"T", AttrValue::Type(DT_FLOAT)},
          {"padding", AttrValue::String(std::move(padding))},
          {"strides", AttrValue::List(s)}};
}

AttrMap PoolAttrs(std::string padding, std::vector<int64_t> ksize, std::vector<int64_t> strides) {
  AttrMap attrs = ConvAttrs(std::move(padding), std::move(strides));
  AttrListValue k;
  k.i = std::move(ksize);
  attrs["ksize"] = AttrValue::List(k);
  return attrs;
}

class NnOpsTest : public ::testing::Test {
 protected:
  NnOpsTest() : runner_(&registry_) {}
  void SetUp() override { RegisterNnOps(registry_); }
  std::vector<PartialShape> Infer(const std::string& op, AttrMap attrs,
                                  std::vector<PartialShape> shapes,
                                  std::vector<const Tensor*> values = {}) {
    auto out = runner_.InferShapes(op, std::move(attrs), std::move(shapes), std::move(values));
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? *out : std::vector<PartialShape>{};
  }
  static PartialShape S(std::vector<int64_t> dims) { return PartialShape(std::move(dims)); }
  OpRegistry registry_;
  testing::LocalKernelRunner runner_;
};

TEST_F(NnOpsTest, ConvolutionAndPoolingShapes) {
  // TensorFlow: [1,7,6,3] * [3,2,3,4], SAME stride 2 -> [1,4,3,4]; VALID stride 1 -> [1,5,5,4].
  EXPECT_EQ(Infer("Conv2D", ConvAttrs("SAME", {1, 2, 2, 1}), {S({1, 7, 6, 3}), S({3, 2, 3, 4})})[0],
            S({1, 4, 3, 4}));
  EXPECT_EQ(Infer("Conv2D", ConvAttrs("VALID", {1, 1, 1, 1}), {S({-1, 7, 6, 3}), S({3, 2, 3, 4})})[0],
            S({-1, 5, 5, 4}));
  EXPECT_EQ(Infer("MaxPool", PoolAttrs("VALID", {1, 3, 2, 1}, {1, 2, 2, 1}), {S({2, 7, 6, 3})})[0],
            S({2, 3, 3, 3}));
  const Tensor sizes = Tensor::Vector<int32_t>(DT_INT32, {2, 7, 6, 3});
  EXPECT_EQ(Infer("Conv2DBackpropInput", ConvAttrs("SAME", {1, 1, 1, 1}),
                  {S({4}), S({3, 2, 3, 4}), S({2, 7, 6, 4})}, {&sizes, nullptr, nullptr})[0],
            S({2, 7, 6, 3}));
  auto bad = runner_.InferShapes("Conv2D", ConvAttrs("SAME", {1, 1, 1}),
                                 {S({1, 7, 6, 3}), S({3, 2, 3, 4})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("strides field must specify 4 dimensions"),
            std::string::npos);
}

TEST_F(NnOpsTest, LossAndBiasShapes) {
  AttrMap t = {{"T", AttrValue::Type(DT_FLOAT)}};
  auto xent = Infer("SoftmaxCrossEntropyWithLogits", t, {S({4, 6}), S({1, 6})});
  EXPECT_EQ(xent[0], S({4}));
  EXPECT_EQ(xent[1], S({4, 6}));
  AttrMap sparse = t;
  sparse["Tlabels"] = AttrValue::Type(DT_INT32);
  auto s = Infer("SparseSoftmaxCrossEntropyWithLogits", sparse, {S({-1, 10}), S({32})});
  EXPECT_EQ(s[0], S({32}));
  EXPECT_EQ(s[1], S({32, 10}));
  AttrMap nchw = t;
  nchw["data_format"] = AttrValue::String("NCHW");
  EXPECT_EQ(Infer("BiasAddGrad", nchw, {S({2, 3, 4, 4})})[0], S({3}));
  EXPECT_EQ(Infer("BiasAdd", t, {S({2, -1}), S({5})})[0], S({2, 5}));
  EXPECT_EQ(Infer("L2Loss", t, {S({3, 4})})[0], S({}));
}

TEST_F(NnOpsTest, ConvolutionKernelRefusesNchwOnTheCpu) {
  AttrMap attrs = ConvAttrs("VALID", {1, 1, 1, 1});
  attrs["data_format"] = AttrValue::String("NCHW");
  auto out = runner_.Run("Conv2D", attrs, {Tensor(DT_FLOAT, {1, 3, 4, 4}),
                                            Tensor(DT_FLOAT, {2, 2, 3, 1})});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("NHWC"), std::string::npos) << out.status().message();
}

// A grouped Conv2D (input depth 6, filter depth 2: three groups of two channels, two filters
// each) and its backprops, in f32 (oneDNN where the build has it) and f64 (the im2col path),
// against each group convolved on its own. SAME padding with stride 2 leaves an uneven border.
// With `in` 1 (one group) it is a grayscale image's first layer, whose input gradient takes its
// own path (a product and the taps added row by row).
template <typename T>
void CheckGroupedConvolution(testing::LocalKernelRunner& runner, DataType dtype, int64_t in = 6,
                             int64_t groups = 3, int64_t stride = 2) {
  const int64_t n = 2, rows = 5, cols = 6, ig = in / groups, out = 6, og = out / groups, k = 3;
  // SAME: with stride 2, rows padded 1 before (2 in all), columns 0 before (1 in all).
  const int64_t out_rows = (rows + stride - 1) / stride, out_cols = (cols + stride - 1) / stride;
  const int64_t pad_top = std::max<int64_t>((out_rows - 1) * stride + k - rows, 0) / 2;
  const int64_t pad_left = std::max<int64_t>((out_cols - 1) * stride + k - cols, 0) / 2;
  std::mt19937 gen(3);
  std::uniform_real_distribution<double> dist(-1, 1);
  auto random = [&](std::vector<int64_t> dims) {
    Tensor t(dtype, dims);
    for (T& v : t.flat<T>()) v = static_cast<T>(dist(gen));
    return t;
  };
  const Tensor x = random({n, rows, cols, in}), w = random({k, k, ig, out});
  const Tensor dy = random({n, out_rows, out_cols, out});
  auto X = [&](int64_t b, int64_t y, int64_t c, int64_t ch) { return ((b * rows + y) * cols + c) * in + ch; };
  auto Y = [&](int64_t b, int64_t y, int64_t c, int64_t o) { return ((b * out_rows + y) * out_cols + c) * out + o; };
  auto W = [&](int64_t ky, int64_t kx, int64_t i, int64_t o) { return ((ky * k + kx) * ig + i) * out + o; };
  std::vector<double> y(n * out_rows * out_cols * out), dx(x.num_elements()), dw(w.num_elements());
  for (int64_t b = 0; b < n; ++b)
    for (int64_t oy = 0; oy < out_rows; ++oy)
      for (int64_t ox = 0; ox < out_cols; ++ox)
        for (int64_t ky = 0; ky < k; ++ky)
          for (int64_t kx = 0; kx < k; ++kx) {
            const int64_t iy = oy * stride + ky - pad_top, ix = ox * stride + kx - pad_left;
            if (iy < 0 || iy >= rows || ix < 0 || ix >= cols) continue;
            for (int64_t q = 0; q < groups; ++q)
              for (int64_t o = q * og; o < (q + 1) * og; ++o)
                for (int64_t i = 0; i < ig; ++i) {
                  const double xv = x.flat<T>()[X(b, iy, ix, q * ig + i)];
                  const double wv = w.flat<T>()[W(ky, kx, i, o)];
                  const double gv = dy.flat<T>()[Y(b, oy, ox, o)];
                  y[Y(b, oy, ox, o)] += xv * wv;
                  dx[X(b, iy, ix, q * ig + i)] += gv * wv;
                  dw[W(ky, kx, i, o)] += gv * xv;
                }
          }
  auto expect_near = [](const Tensor& got, const std::vector<double>& want, const char* what) {
    ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
    double worst = 0;
    for (size_t e = 0; e < want.size(); ++e) worst = std::max(worst, std::abs(got.flat<T>()[e] - want[e]));
    EXPECT_LT(worst, 1e-4) << what;
  };
  AttrMap attrs = ConvAttrs("SAME", {1, stride, stride, 1});
  attrs["T"] = AttrValue::Type(dtype);
  auto forward = runner.Run("Conv2D", attrs, {x, w});
  ASSERT_TRUE(forward.ok()) << forward.status().message();
  expect_near((*forward)[0], y, "forward");
  const Tensor input_sizes = Tensor::Vector<int32_t>(DT_INT32, {int32_t(n), int32_t(rows), int32_t(cols), int32_t(in)});
  auto backprop_input = runner.Run("Conv2DBackpropInput", attrs, {input_sizes, w, dy});
  ASSERT_TRUE(backprop_input.ok()) << backprop_input.status().message();
  expect_near((*backprop_input)[0], dx, "backprop input");
  const Tensor filter_sizes = Tensor::Vector<int32_t>(DT_INT32, {int32_t(k), int32_t(k), int32_t(ig), int32_t(out)});
  auto backprop_filter = runner.Run("Conv2DBackpropFilter", attrs, {x, filter_sizes, dy});
  ASSERT_TRUE(backprop_filter.ok()) << backprop_filter.status().message();
  expect_near((*backprop_filter)[0], dw, "backprop filter");
}

TEST_F(NnOpsTest, GroupedConvolutionAgainstEachGroupAlone) {
  EXPECT_EQ(Infer("Conv2D", ConvAttrs("SAME", {1, 2, 2, 1}), {S({2, 5, 6, 6}), S({3, 3, 2, 6})})[0],
            S({2, 3, 3, 6}));
  CheckGroupedConvolution<float>(runner_, DT_FLOAT);
  CheckGroupedConvolution<double>(runner_, DT_DOUBLE);
  for (int64_t stride : {1, 2}) {
    SCOPED_TRACE("one input channel, stride " + std::to_string(stride));
    CheckGroupedConvolution<float>(runner_, DT_FLOAT, /*in=*/1, /*groups=*/1, stride);
  }
  // TensorFlow's words when the depths do not divide.
  auto uneven = runner_.InferShapes("Conv2D", ConvAttrs("SAME", {1, 1, 1, 1}),
                                    {S({1, 5, 5, 6}), S({3, 3, 4, 6})});
  ASSERT_FALSE(uneven.ok());
  EXPECT_NE(uneven.status().message().find("is not a multiple of input depth of filter"),
            std::string::npos);
  auto outputs = runner_.InferShapes("Conv2D", ConvAttrs("SAME", {1, 1, 1, 1}),
                                     {S({1, 5, 5, 6}), S({3, 3, 2, 4})});
  ASSERT_FALSE(outputs.ok());
  EXPECT_NE(outputs.status().message().find("not a multiple of the number of groups"),
            std::string::npos);
}

// ReluGrad and Relu6Grad mask by multiplying, as TensorFlow does: off at exactly 0 (and 6), a
// NaN or infinite gradient where the unit is off gives NaN, a negative one -0.
TEST_F(NnOpsTest, ReluGradsMultiplyByTheMask) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor dy(DT_FLOAT, {6}), x(DT_FLOAT, {6});
  const float dys[] = {2.0f, 3.0f, nan, inf, -4.0f, 5.0f};
  const float xs[] = {0.0f, 6.0f, 0.0f, -1.0f, -1.0f, 0.5f};
  for (int i = 0; i < 6; ++i) dy.flat<float>()[i] = dys[i], x.flat<float>()[i] = xs[i];
  for (const char* op : {"ReluGrad", "Relu6Grad"}) {
    auto out = runner_.Run(op, {{"T", AttrValue::Type(DT_FLOAT)}}, {dy, x});
    ASSERT_TRUE(out.ok()) << op << ": " << out.status().message();
    auto o = (*out)[0].flat<float>();
    const bool relu6 = std::string(op) == "Relu6Grad";
    EXPECT_EQ(o[0], 0.0f) << op;                     // exactly 0: off
    EXPECT_EQ(o[1], relu6 ? 0.0f : 3.0f) << op;      // exactly 6: off for Relu6 only
    EXPECT_TRUE(std::isnan(o[2])) << op << ": NaN * 0 is " << o[2];
    EXPECT_TRUE(std::isnan(o[3])) << op << ": inf * 0 is " << o[3];
    EXPECT_TRUE(o[4] == 0.0f && std::signbit(o[4])) << op << ": -4 * 0 is " << o[4];
    EXPECT_EQ(o[5], 5.0f) << op;
  }
}

// The same on a tensor long enough for the vectorised loops and their remainder, with the
// gradient's buffer forwarded to the output (nothing else holds it) and apart from it: both give
// TensorFlow's products element for element.
TEST_F(NnOpsTest, ReluGradInPlaceAndApartAgree) {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float dys[] = {2.0f, 3.0f, nan, inf, -4.0f, 5.0f, -1.5f};
  const float xs[] = {0.0f, 6.0f, 0.0f, -1.0f, -1.0f, 0.5f, 7.0f};
  constexpr int kN = 45;
  Tensor dy(DT_FLOAT, {kN}), x(DT_FLOAT, {kN});
  for (int i = 0; i < kN; ++i) dy.flat<float>()[i] = dys[i % 7], x.flat<float>()[i] = xs[i % 7];
  for (bool forwarded : {true, false}) {
    std::vector<Tensor> inputs;
    inputs.push_back(forwarded ? dy.Clone() : dy);
    inputs.push_back(x);
    const float* dy_buffer = inputs[0].flat<float>().data();
    auto out = runner_.Run("ReluGrad", {{"T", AttrValue::Type(DT_FLOAT)}}, std::move(inputs));
    ASSERT_TRUE(out.ok()) << out.status().message();
    auto o = (*out)[0].flat<float>();
    // The forwarded case must write over the gradient's buffer, else it tests nothing new.
    EXPECT_EQ(o.data() == dy_buffer, forwarded);
    for (int i = 0; i < kN; ++i) {
      const float want = dys[i % 7] * (xs[i % 7] > 0.0f ? 1.0f : 0.0f);
      if (std::isnan(want)) {
        EXPECT_TRUE(std::isnan(o[i])) << i << (forwarded ? " forwarded" : " apart");
      } else {
        EXPECT_EQ(o[i], want) << i << (forwarded ? " forwarded" : " apart");
        EXPECT_EQ(std::signbit(o[i]), std::signbit(want)) << i << (forwarded ? " forwarded" : " apart");
      }
    }
  }
}

// MaxPoolGrad with windows that do not overlap (2x2 at stride 2, the usual pooling) writes each
// pixel once instead of adding at the maxima: against the first maximum of each window taking
// its gradient, with rows and columns no VALID window reaches (7x5) and SAME's clipped windows.
TEST_F(NnOpsTest, MaxPoolGradOfDisjointWindowsAgainstTheFirstMaximum) {
  const int64_t n = 2, rows = 7, cols = 5, depth = 19;  // 19: vector loops and a remainder
  std::mt19937 gen(5);
  std::uniform_int_distribution<int> dist(-3, 3);  // small integers: ties within windows
  Tensor x(DT_FLOAT, {n, rows, cols, depth});
  for (float& v : x.flat<float>()) v = static_cast<float>(dist(gen));
  for (const char* padding : {"VALID", "SAME"}) {
    const bool same = std::string(padding) == "SAME";
    const int64_t out_rows = same ? 4 : 3, out_cols = same ? 3 : 2;  // SAME pads after only
    Tensor dy(DT_FLOAT, {n, out_rows, out_cols, depth});
    for (float& v : dy.flat<float>()) v = static_cast<float>(dist(gen)) + 0.5f;
    std::vector<float> want(x.num_elements(), 0.0f);
    auto at = [&](int64_t b, int64_t y, int64_t c, int64_t ch) { return ((b * rows + y) * cols + c) * depth + ch; };
    for (int64_t b = 0; b < n; ++b)
      for (int64_t oy = 0; oy < out_rows; ++oy)
        for (int64_t ox = 0; ox < out_cols; ++ox)
          for (int64_t ch = 0; ch < depth; ++ch) {
            int64_t best = -1;
            for (int64_t y = 2 * oy; y < std::min(2 * oy + 2, rows); ++y)
              for (int64_t c = 2 * ox; c < std::min(2 * ox + 2, cols); ++c)
                if (best < 0 || x.flat<float>()[at(b, y, c, ch)] > x.flat<float>()[best]) best = at(b, y, c, ch);
            want[best] += dy.flat<float>()[((b * out_rows + oy) * out_cols + ox) * depth + ch];
          }
    Tensor y(DT_FLOAT, {n, out_rows, out_cols, depth});  // MaxPoolGrad reads only its shape
    auto out = runner_.Run("MaxPoolGrad", PoolAttrs(padding, {1, 2, 2, 1}, {1, 2, 2, 1}), {x, y, dy});
    ASSERT_TRUE(out.ok()) << padding << ": " << out.status().message();
    auto got = (*out)[0].flat<float>();
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) ASSERT_EQ(got[i], want[i]) << padding << " element " << i;
  }
}

}  // namespace
}  // namespace xlens::graph
