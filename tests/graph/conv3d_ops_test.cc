// Conv3D and its backprops: the forward kernel against the definition written out as plain
// loops, the backprops as the forward op's adjoints (strides, dilations, both paddings), NCDHW
// against NDHWC, the shape function, and the input checks. Values against TensorFlow itself:
// conv_pool_vs_tensorflow.py.
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
  std::vector<int64_t> input, filter;  // NDHWC, [kd, kh, kw, in, out]
  std::vector<int64_t> strides, dilations;
  std::string padding;
};

AttrMap Attrs(const Case& c, bool channels_first = false) {
  auto spatial = [&](const std::vector<int64_t>& v) {
    return channels_first ? std::vector<int64_t>{1, 1, v[0], v[1], v[2]}
                          : std::vector<int64_t>{1, v[0], v[1], v[2], 1};
  };
  return {{"T", AttrValue::Type(DT_FLOAT)},
          {"strides", Ints(spatial(c.strides))},
          {"dilations", Ints(spatial(c.dilations))},
          {"padding", AttrValue::String(c.padding)},
          {"data_format", AttrValue::String(channels_first ? "NCDHW" : "NDHWC")}};
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {{1, 5, 5, 5, 3}, {3, 3, 3, 3, 4}, {1, 1, 1}, {1, 1, 1}, "SAME"},
      {{2, 7, 6, 5, 2}, {2, 3, 2, 2, 3}, {2, 1, 2}, {1, 1, 1}, "VALID"},
      {{1, 8, 8, 8, 2}, {3, 3, 3, 2, 2}, {2, 2, 2}, {1, 1, 1}, "SAME"},
      {{1, 7, 7, 7, 2}, {2, 2, 2, 2, 3}, {1, 1, 1}, {2, 1, 2}, "SAME"},
  };
  return cases;
}

// out[n, o.., co] = sum over the window and ci of x[n, o*s + k*d - pad, .., ci] * f[k.., ci, co];
// VALID only (the adjoint test covers SAME).
Tensor Reference(const Case& c, const Tensor& x, const Tensor& f) {
  const auto& in = c.input;
  const auto& k = c.filter;
  std::vector<int64_t> out = {in[0]};
  for (int d = 0; d < 3; ++d)
    out.push_back((in[1 + d] - ((k[d] - 1) * c.dilations[d] + 1)) / c.strides[d] + 1);
  out.push_back(k[4]);
  Tensor y(DT_FLOAT, out);
  auto xf = x.flat<float>();
  auto ff = f.flat<float>();
  auto yf = y.flat<float>();
  int64_t i = 0;
  for (int64_t n = 0; n < out[0]; ++n)
    for (int64_t a = 0; a < out[1]; ++a)
      for (int64_t b = 0; b < out[2]; ++b)
        for (int64_t e = 0; e < out[3]; ++e)
          for (int64_t co = 0; co < out[4]; ++co, ++i) {
            double sum = 0;
            for (int64_t ka = 0; ka < k[0]; ++ka)
              for (int64_t kb = 0; kb < k[1]; ++kb)
                for (int64_t ke = 0; ke < k[2]; ++ke)
                  for (int64_t ci = 0; ci < k[3]; ++ci) {
                    const int64_t ia = a * c.strides[0] + ka * c.dilations[0];
                    const int64_t ib = b * c.strides[1] + kb * c.dilations[1];
                    const int64_t ie = e * c.strides[2] + ke * c.dilations[2];
                    sum += double(xf[(((n * in[1] + ia) * in[2] + ib) * in[3] + ie) * in[4] + ci]) *
                           ff[(((ka * k[1] + kb) * k[2] + ke) * k[3] + ci) * k[4] + co];
                  }
            yf[i] = float(sum);
          }
  return y;
}

TEST(Conv3DOpsTest, ForwardMatchesTheDefinition) {
  const Case& c = Cases()[1];
  Tensor x = RandomFloats(c.input, 1), f = RandomFloats(c.filter, 2);
  auto out = testing::RunOp("Conv3D", {x, f}, Attrs(c));
  ASSERT_TRUE(out.ok()) << out.status().message();
  Tensor want = Reference(c, x, f);
  ASSERT_EQ((*out)[0].dims(), want.dims());
  EXPECT_LT(testing::MaxAbsDiff((*out)[0], want), 1e-5);
}

TEST(Conv3DOpsTest, BackpropsAreTheForwardOpsAdjoints) {
  uint32_t seed = 10;
  for (const Case& c : Cases()) {
    Tensor x = RandomFloats(c.input, seed++), f = RandomFloats(c.filter, seed++);
    auto y = testing::RunOp("Conv3D", {x, f}, Attrs(c));
    ASSERT_TRUE(y.ok()) << y.status().message();
    Tensor dy = RandomFloats((*y)[0].dims(), seed++);
    AttrMap bi = Attrs(c);
    bi["Tshape"] = AttrValue::Type(DT_INT32);
    auto dx = testing::RunOp("Conv3DBackpropInputV2", {Int32Vector(c.input), f, dy}, bi);
    auto df = testing::RunOp("Conv3DBackpropFilterV2", {x, Int32Vector(c.filter), dy}, Attrs(c));
    ASSERT_TRUE(dx.ok()) << dx.status().message();
    ASSERT_TRUE(df.ok()) << df.status().message();
    const double forward = Dot((*y)[0], dy);
    EXPECT_NEAR(Dot(x, (*dx)[0]), forward, 1e-4 * (1 + std::abs(forward)));
    EXPECT_NEAR(Dot(f, (*df)[0]), forward, 1e-4 * (1 + std::abs(forward)));
  }
}

TEST(Conv3DOpsTest, NcdhwGivesTheTransposedNdhwcResult) {
  const Case& c = Cases()[2];
  Tensor x = RandomFloats(c.input, 3), f = RandomFloats(c.filter, 4);
  auto last = testing::RunOp("Conv3D", {x, f}, Attrs(c));
  auto first = testing::RunOp("Conv3D", {testing::ToChannelsFirst(x), f}, Attrs(c, true));
  ASSERT_TRUE(last.ok() && first.ok()) << first.status().message();
  EXPECT_LT(testing::MaxAbsDiff(testing::ToChannelsFirst((*last)[0]), (*first)[0]), 1e-5);
}

TEST(Conv3DOpsTest, ShapeAndChecks) {
  testing::LocalKernelRunner runner(&OpRegistry::Global());
  auto shapes = runner.InferShapes("Conv3D", Attrs(Cases()[2], true),
                                   {PartialShape({-1, 2, 8, 8, 7}), PartialShape({3, 3, 3, 2, 5})});
  ASSERT_TRUE(shapes.ok()) << shapes.status().message();
  EXPECT_EQ((*shapes)[0], PartialShape({-1, 5, 4, 4, 4}));
  // TensorFlow's CPU kernel refuses grouped 3-D convolutions.
  auto grouped = testing::RunOp("Conv3D",
                                {RandomFloats({1, 4, 4, 4, 4}, 1), RandomFloats({2, 2, 2, 2, 4}, 2)},
                                Attrs(Cases()[0]));
  ASSERT_FALSE(grouped.ok());
  EXPECT_NE(grouped.status().message().find("input and filter must have the same depth: 4 vs 2"),
            std::string::npos)
      << grouped.status().message();
  // filter_sizes come from the graph: a patch past the kernel's bound is refused, not allocated.
  AttrMap valid = Attrs(Cases()[0]);
  auto huge = testing::RunOp("Conv3DBackpropFilterV2",
                             {RandomFloats({1, 4, 4, 4, 2}, 1), Int32Vector({1024, 1024, 64, 2, 1}),
                              RandomFloats({1, 4, 4, 4, 1}, 2)},
                             valid);
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("more than this kernel takes"), std::string::npos)
      << huge.status().message();
  AttrMap four = Attrs(Cases()[0]);
  four["strides"] = Ints({1, 1, 1, 1, 1, 1});
  auto strides = testing::RunOp(
      "Conv3D", {RandomFloats({1, 4, 4, 4, 3}, 1), RandomFloats({3, 3, 3, 3, 4}, 2)}, four);
  ASSERT_FALSE(strides.ok());
  EXPECT_NE(strides.status().message().find("must specify 5 dimensions"), std::string::npos);
}

}  // namespace
}  // namespace xlens::graph
