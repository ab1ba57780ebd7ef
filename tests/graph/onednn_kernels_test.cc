// The oneDNN calls of the op-by-op kernels against direct loops: convolutions forward (with bias
// and ReLU), backward data and backward weights, and matrix products, on geometries that split
// into parts by images, by output rows (with each part's own padding), by output channels, and
// products by rows, by columns and by blocks of the reduction.
#include "compiler/graph/ops/onednn_kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "compiler/support/thread_pool.h"

namespace xlens::graph::onednn {
namespace {

std::vector<float> Random(int64_t n, int seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Calls fn(n, oy, ox, ky, kx, iy, ix) for every tap of the convolution that reads the image.
template <typename Fn>
void ForEachTap(const ConvGeometry& g, Fn fn) {
  for (int64_t n = 0; n < g.batch; ++n)
    for (int64_t oy = 0; oy < g.out_rows; ++oy)
      for (int64_t ox = 0; ox < g.out_cols; ++ox)
        for (int64_t ky = 0; ky < g.k_rows; ++ky)
          for (int64_t kx = 0; kx < g.k_cols; ++kx) {
            const int64_t iy = oy * g.stride_rows + ky * g.dil_rows - g.pad_top;
            const int64_t ix = ox * g.stride_cols + kx * g.dil_cols - g.pad_left;
            if (iy < 0 || iy >= g.in_rows || ix < 0 || ix >= g.in_cols) continue;
            fn(n, oy, ox, ky, kx, iy, ix);
          }
}

struct Conv {
  ConvGeometry g;
  int64_t x_size() const { return g.batch * g.in_rows * g.in_cols * g.in_depth; }
  int64_t y_size() const { return g.batch * g.out_rows * g.out_cols * g.out_depth; }
  int64_t w_size() const { return g.k_rows * g.k_cols * g.in_depth * g.out_depth; }
  int64_t X(int64_t n, int64_t y, int64_t x, int64_t c) const {
    return ((n * g.in_rows + y) * g.in_cols + x) * g.in_depth + c;
  }
  int64_t Y(int64_t n, int64_t y, int64_t x, int64_t c) const {
    return ((n * g.out_rows + y) * g.out_cols + x) * g.out_depth + c;
  }
  int64_t W(int64_t ky, int64_t kx, int64_t i, int64_t o) const {
    return ((ky * g.k_cols + kx) * g.in_depth + i) * g.out_depth + o;
  }
};

// out = (in + pad_before + pad_after - effective) / stride + 1, TensorFlow's and oneDNN's.
ConvGeometry Geometry(int64_t batch, int64_t rows, int64_t cols, int64_t in_depth,
                      int64_t out_depth, int64_t k, int64_t stride, int64_t dilation,
                      int64_t pad_top, int64_t pad_bottom, int64_t pad_left, int64_t pad_right) {
  ConvGeometry g;
  g.batch = batch;
  g.in_rows = rows;
  g.in_cols = cols;
  g.in_depth = in_depth;
  g.out_depth = out_depth;
  g.k_rows = g.k_cols = k;
  g.stride_rows = g.stride_cols = stride;
  g.dil_rows = g.dil_cols = dilation;
  g.pad_top = pad_top;
  g.pad_bottom = pad_bottom;
  g.pad_left = pad_left;
  g.pad_right = pad_right;
  const int64_t effective = (k - 1) * dilation + 1;
  g.out_rows = (rows + pad_top + pad_bottom - effective) / stride + 1;
  g.out_cols = (cols + pad_left + pad_right - effective) / stride + 1;
  return g;
}

std::vector<ConvGeometry> Geometries() {
  return {
      Geometry(1, 33, 20, 16, 32, 3, 1, 1, 1, 1, 1, 1),  // one image, split by output rows
      Geometry(1, 33, 21, 16, 24, 3, 2, 1, 1, 1, 1, 1),  // rows, stride 2
      Geometry(1, 30, 18, 8, 32, 3, 1, 2, 2, 2, 2, 2),   // rows, dilation 2
      Geometry(1, 40, 12, 8, 32, 5, 3, 1, 0, 0, 0, 0),   // rows, VALID, stride 3
      Geometry(1, 26, 16, 16, 32, 3, 1, 1, 2, 0, 0, 1),  // rows, uneven explicit padding
      Geometry(5, 12, 10, 8, 16, 3, 1, 1, 1, 1, 1, 1),   // five images, split by images
      Geometry(3, 9, 7, 3, 5, 2, 2, 1, 0, 1, 0, 1),      // small: one part
      Geometry(1, 4, 4, 64, 64, 1, 1, 1, 0, 0, 0, 0),    // 1x1
      Geometry(1, 4, 4, 64, 128, 3, 1, 1, 1, 1, 1, 1),   // few positions: blocks of channels
      Geometry(1, 3, 5, 256, 100, 3, 2, 1, 1, 1, 1, 1),  // channels in blocks of 48, 48 and 4
  };
}

void ExpectNear(const std::vector<float>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::abs(got[i] - want[i]));
  EXPECT_LT(worst, 1e-3) << what;
}

class OneDnnKernelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!Available()) GTEST_SKIP() << "this build has no oneDNN";
  }
  ThreadPool pool_{1};  // two threads: the caller and one worker
};

TEST_F(OneDnnKernelsTest, ConvolutionForwardWithBiasAndRelu) {
  for (const ConvGeometry& g : Geometries()) {
    SCOPED_TRACE(testing::Message() << "batch " << g.batch << " rows " << g.in_rows << " stride "
                                    << g.stride_rows << " dilation " << g.dil_rows);
    Conv c{g};
    std::vector<float> x = Random(c.x_size(), 1), w = Random(c.w_size(), 2), b = Random(g.out_depth, 3);
    std::vector<double> want(c.y_size(), 0.0);
    ForEachTap(g, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
      for (int64_t o = 0; o < g.out_depth; ++o)
        for (int64_t i = 0; i < g.in_depth; ++i)
          want[c.Y(n, oy, ox, o)] += double(x[c.X(n, iy, ix, i)]) * w[c.W(ky, kx, i, o)];
    });
    std::vector<float> y(c.y_size(), -7.f);
    ASSERT_TRUE(Conv2DForward(g, x.data(), w.data(), nullptr, false, y.data(), &pool_, nullptr).ok());
    ExpectNear(y, want, "plain");
    // A packed constant filter: packed once, read on the second call.
    PackedFilter packed;
    std::vector<double> fused = want;
    for (size_t e = 0; e < fused.size(); ++e) fused[e] = std::max(0.0, fused[e] + b[e % g.out_depth]);
    for (int call = 0; call < 2; ++call) {
      std::fill(y.begin(), y.end(), -7.f);
      ASSERT_TRUE(Conv2DForward(g, x.data(), w.data(), b.data(), true, y.data(), &pool_, &packed).ok());
      ExpectNear(y, fused, "bias and relu");
    }
  }
}

// The epilogue as post-ops: the side input y holds on entry added, then each activation, on
// every way of splitting a call (by images, by rows, by blocks of channels, whose parts compute
// beside the output and must start from the side input's channels).
TEST_F(OneDnnKernelsTest, ConvolutionForwardWithSumAndActivations) {
  const std::pair<Eltwise, double (*)(double)> activations[] = {
      {Eltwise::kNone, [](double v) { return v; }},
      {Eltwise::kRelu, [](double v) { return std::max(0.0, v); }},
      {Eltwise::kRelu6, [](double v) { return std::min(6.0, std::max(0.0, v)); }},
      {Eltwise::kElu, [](double v) { return v < 0 ? std::expm1(v) : v; }},
      {Eltwise::kLeakyRelu, [](double v) { return v < 0 ? 0.3 * v : v; }},
      {Eltwise::kTanh, [](double v) { return std::tanh(v); }},
      {Eltwise::kSigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }},
  };
  for (const ConvGeometry& g : Geometries()) {
    SCOPED_TRACE(testing::Message() << "batch " << g.batch << " rows " << g.in_rows << " out_depth "
                                    << g.out_depth);
    Conv c{g};
    std::vector<float> x = Random(c.x_size(), 1), w = Random(c.w_size(), 2), b = Random(g.out_depth, 3);
    std::vector<float> side = Random(c.y_size(), 4);
    std::vector<double> conv(c.y_size(), 0.0);
    ForEachTap(g, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
      for (int64_t o = 0; o < g.out_depth; ++o)
        for (int64_t i = 0; i < g.in_depth; ++i)
          conv[c.Y(n, oy, ox, o)] += double(x[c.X(n, iy, ix, i)]) * w[c.W(ky, kx, i, o)];
    });
    PackedFilter packed;
    for (const auto& [eltwise, f] : activations) {
      for (bool sum : {false, true}) {
        SCOPED_TRACE(testing::Message() << "activation " << static_cast<int>(eltwise) << " sum " << sum);
        PostOps post;
        post.sum = sum;
        post.eltwise = eltwise;
        post.alpha = 0.3f;
        std::vector<double> want(c.y_size());
        for (size_t e = 0; e < want.size(); ++e) {
          want[e] = f(conv[e] + b[e % g.out_depth] + (sum ? side[e] : 0.0));
        }
        std::vector<float> y = sum ? side : std::vector<float>(c.y_size(), -7.f);
        ASSERT_TRUE(Conv2DForward(g, x.data(), w.data(), b.data(), post, y.data(), &pool_, &packed).ok());
        ExpectNear(y, want, "post-ops");
      }
    }
  }
}

// A NaN in the input is 0 after a fused Relu and stays NaN after a fused LeakyRelu, as
// TensorFlow's _FusedConv2D gives on its default oneDNN path (2.21).
TEST_F(OneDnnKernelsTest, ANanThroughAFusedReluIsZeroAsInTensorFlow) {
  const ConvGeometry g = Geometry(5, 12, 10, 8, 16, 3, 1, 1, 1, 1, 1, 1);
  Conv c{g};
  std::vector<float> x = Random(c.x_size(), 1), w = Random(c.w_size(), 2), b = Random(g.out_depth, 3);
  x[c.X(0, 5, 5, 3)] = std::nanf("");
  for (Eltwise eltwise : {Eltwise::kRelu, Eltwise::kLeakyRelu}) {
    SCOPED_TRACE(testing::Message() << "activation " << static_cast<int>(eltwise));
    PostOps post;
    post.eltwise = eltwise;
    post.alpha = 0.2f;
    std::vector<float> y(c.y_size(), -7.f);
    ASSERT_TRUE(Conv2DForward(g, x.data(), w.data(), b.data(), post, y.data(), &pool_, nullptr).ok());
    for (int64_t o = 0; o < g.out_depth; ++o) {
      const float v = y[c.Y(0, 5, 5, o)];
      if (eltwise == Eltwise::kRelu) {
        EXPECT_EQ(v, 0.f) << o;
      } else {
        EXPECT_TRUE(std::isnan(v)) << o;
      }
      EXPECT_FALSE(std::isnan(y[c.Y(1, 5, 5, o)])) << o;
    }
  }
}

TEST_F(OneDnnKernelsTest, ConvolutionBackwardDataAndWeights) {
  for (const ConvGeometry& g : Geometries()) {
    SCOPED_TRACE(testing::Message() << "batch " << g.batch << " rows " << g.in_rows << " stride "
                                    << g.stride_rows << " dilation " << g.dil_rows);
    Conv c{g};
    std::vector<float> x = Random(c.x_size(), 4), w = Random(c.w_size(), 5), dy = Random(c.y_size(), 6);
    std::vector<double> dx(c.x_size(), 0.0), dw(c.w_size(), 0.0);
    ForEachTap(g, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
      for (int64_t o = 0; o < g.out_depth; ++o)
        for (int64_t i = 0; i < g.in_depth; ++i) {
          dx[c.X(n, iy, ix, i)] += double(dy[c.Y(n, oy, ox, o)]) * w[c.W(ky, kx, i, o)];
          dw[c.W(ky, kx, i, o)] += double(dy[c.Y(n, oy, ox, o)]) * x[c.X(n, iy, ix, i)];
        }
    });
    std::vector<float> got_dx(c.x_size(), -7.f), got_dw(c.w_size(), -7.f);
    ASSERT_TRUE(Conv2DBackwardData(g, w.data(), dy.data(), got_dx.data(), &pool_, nullptr).ok());
    ExpectNear(got_dx, dx, "backward data");
    ASSERT_TRUE(Conv2DBackwardWeights(g, x.data(), dy.data(), got_dw.data(), &pool_).ok());
    ExpectNear(got_dw, dw, "backward weights");
  }
}

TEST_F(OneDnnKernelsTest, MatMulByRowsAndByColumns) {
  struct Case {
    int64_t m, k, n;
    bool ta, tb, bias;
  };
  for (const Case& t : {Case{256, 64, 48, false, false, false}, Case{1, 512, 1024, false, false, true},
                        Case{3, 256, 700, false, true, false}, Case{70, 33, 500, true, false, true},
                        Case{64, 128, 96, true, true, false}, Case{5, 7, 9, false, false, false},
                        Case{2, 2048, 64, false, true, true}, Case{1, 1000, 37, false, false, false}}) {
    SCOPED_TRACE(testing::Message() << t.m << "x" << t.k << "x" << t.n << " ta " << t.ta << " tb " << t.tb);
    std::vector<float> a = Random(t.m * t.k, 7), b = Random(t.k * t.n, 8), bias = Random(t.n, 9);
    std::vector<double> want(t.m * t.n, 0.0);
    for (int64_t i = 0; i < t.m; ++i)
      for (int64_t j = 0; j < t.n; ++j) {
        double s = t.bias ? bias[j] : 0.0;
        for (int64_t q = 0; q < t.k; ++q) {
          s += double(t.ta ? a[q * t.m + i] : a[i * t.k + q]) * (t.tb ? b[j * t.k + q] : b[q * t.n + j]);
        }
        want[i * t.n + j] = s;
      }
    std::vector<float> out(t.m * t.n, -7.f);
    ASSERT_TRUE(MatMul(a.data(), t.ta, b.data(), t.tb, t.m, t.k, t.n, t.bias ? bias.data() : nullptr,
                       out.data(), &pool_).ok());
    ExpectNear(out, want, "matmul");
  }
}

// Grouped convolutions (TensorFlow's Conv2D with an input depth a multiple of the filter's, as
// Keras's depthwise layers emit it) against each group convolved on its own: the filter is
// [k, k, in_depth / groups, out_depth], group q reading input channels [q * ig, (q + 1) * ig) and
// writing output channels [q * og, (q + 1) * og).
TEST_F(OneDnnKernelsTest, GroupedConvolutionsAgainstEachGroupAlone) {
  auto grouped = [](ConvGeometry g, int64_t groups) {
    g.groups = groups;
    return g;
  };
  const std::vector<ConvGeometry> geometries = {
      grouped(Geometry(1, 14, 14, 16, 16, 7, 1, 1, 3, 3, 3, 3), 16),  // depthwise 7x7 (ConvNeXt)
      grouped(Geometry(1, 20, 9, 8, 6, 3, 2, 1, 1, 1, 1, 1), 2),      // two groups, rows
      grouped(Geometry(3, 9, 7, 12, 24, 3, 1, 2, 2, 2, 2, 2), 3),     // images, dilation 2
      grouped(Geometry(1, 4, 4, 8, 16, 3, 1, 1, 1, 1, 1, 1), 8),      // channel multiplier 2
  };
  for (const ConvGeometry& g : geometries) {
    SCOPED_TRACE(testing::Message() << "groups " << g.groups << " batch " << g.batch << " rows "
                                    << g.in_rows << " in " << g.in_depth << " out " << g.out_depth);
    const int64_t ig = g.in_depth / g.groups, og = g.out_depth / g.groups;
    Conv c{g};
    const int64_t w_size = g.k_rows * g.k_cols * ig * g.out_depth;
    auto W = [&](int64_t ky, int64_t kx, int64_t i, int64_t o) {
      return ((ky * g.k_cols + kx) * ig + i) * g.out_depth + o;
    };
    std::vector<float> x = Random(c.x_size(), 10), w = Random(w_size, 11), dy = Random(c.y_size(), 12);
    std::vector<double> y(c.y_size(), 0.0), dx(c.x_size(), 0.0), dw(w_size, 0.0);
    ForEachTap(g, [&](int64_t n, int64_t oy, int64_t ox, int64_t ky, int64_t kx, int64_t iy, int64_t ix) {
      for (int64_t q = 0; q < g.groups; ++q)
        for (int64_t o = q * og; o < (q + 1) * og; ++o)
          for (int64_t i = 0; i < ig; ++i) {
            const int64_t xi = c.X(n, iy, ix, q * ig + i), yi = c.Y(n, oy, ox, o);
            y[yi] += double(x[xi]) * w[W(ky, kx, i, o)];
            dx[xi] += double(dy[yi]) * w[W(ky, kx, i, o)];
            dw[W(ky, kx, i, o)] += double(dy[yi]) * x[xi];
          }
    });
    std::vector<float> got_y(c.y_size(), -7.f), got_dx(c.x_size(), -7.f), got_dw(w_size, -7.f);
    PackedFilter packed;
    for (int call = 0; call < 2; ++call) {
      ASSERT_TRUE(Conv2DForward(g, x.data(), w.data(), nullptr, false, got_y.data(), &pool_, &packed).ok());
      ExpectNear(got_y, y, "forward");
    }
    ASSERT_TRUE(Conv2DBackwardData(g, w.data(), dy.data(), got_dx.data(), &pool_, nullptr).ok());
    ExpectNear(got_dx, dx, "backward data");
    ASSERT_TRUE(Conv2DBackwardWeights(g, x.data(), dy.data(), got_dw.data(), &pool_).ok());
    ExpectNear(got_dw, dw, "backward weights");
  }
}

}  // namespace
}  // namespace xlens::graph::onednn
