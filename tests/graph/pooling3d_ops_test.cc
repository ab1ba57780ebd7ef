// The 3-D poolings and their gradients on small cases whose values TensorFlow 2.21's CPU kernels
// gave (ties, SAME windows clipped to the input, NaN), NCDHW against NDHWC, and the checks.
#include <gtest/gtest.h>

#include <cmath>

#include "conv_window_test_util.h"
#include "kernel_test_util.h"

namespace xlens::graph {
namespace {

using testing::Int32Vector;
using testing::Ints;
using testing::RandomFloats;

AttrMap PoolAttrs(const std::string& padding, std::vector<int64_t> ksize,
                  std::vector<int64_t> strides, const std::string& format = "NDHWC") {
  return {{"T", AttrValue::Type(DT_FLOAT)},
          {"ksize", Ints(std::move(ksize))},
          {"strides", Ints(std::move(strides))},
          {"padding", AttrValue::String(padding)},
          {"data_format", AttrValue::String(format)}};
}

Tensor Floats(std::vector<int64_t> dims, std::vector<float> values) {
  Tensor t(DT_FLOAT, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) t.flat<float>()[i] = values[i];
  return t;
}

std::vector<float> Values(const Tensor& t) {
  auto f = t.flat<float>();
  return std::vector<float>(f.begin(), f.end());
}

const std::vector<int64_t> k2 = {1, 2, 2, 2, 1};

TEST(Pooling3DOpsTest, MaxPoolGradGivesEveryTiedMaximumTheGradient) {
  // TensorFlow: [1,3,3,0,2,3,1,1] pooled 2x2x2 -> 3; the gradient 5 goes to all three 3s.
  Tensor x = Floats({1, 2, 2, 2, 1}, {1, 3, 3, 0, 2, 3, 1, 1});
  auto y = testing::RunOp("MaxPool3D", {x}, PoolAttrs("VALID", k2, k2));
  ASSERT_TRUE(y.ok()) << y.status().message();
  EXPECT_EQ(Values((*y)[0]), std::vector<float>{3});
  AttrMap grad_attrs = PoolAttrs("VALID", k2, k2);
  grad_attrs["TInput"] = AttrValue::Type(DT_FLOAT);
  auto dx = testing::RunOp("MaxPool3DGrad", {x, (*y)[0], Floats({1, 1, 1, 1, 1}, {5})},
                           grad_attrs);
  ASSERT_TRUE(dx.ok()) << dx.status().message();
  EXPECT_EQ(Values((*dx)[0]), (std::vector<float>{0, 5, 5, 0, 0, 5, 0, 0}));
}

TEST(Pooling3DOpsTest, MaxPoolSkipsNaN) {
  Tensor x = Floats({1, 2, 2, 2, 1}, {1, NAN, 3, 0, 2, 3, 1, 1});
  auto y = testing::RunOp("MaxPool3D", {x}, PoolAttrs("VALID", k2, k2));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(Values((*y)[0]), std::vector<float>{3});
}

TEST(Pooling3DOpsTest, MaxPoolGradGradTakesTheGradientAtTheMaximum) {
  Tensor x = Floats({1, 2, 2, 2, 1}, {1, 2, 3, 4, 5, 6, 7, 8});
  auto out = testing::RunOp("MaxPool3DGradGrad",
                            {x, Floats({1, 1, 1, 1, 1}, {8}),
                             Floats({1, 2, 2, 2, 1}, {0, 1, 2, 3, 4, 5, 6, 7})},
                            PoolAttrs("VALID", k2, k2));
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ(Values((*out)[0]), std::vector<float>{7});
}

TEST(Pooling3DOpsTest, AveragesLeaveThePaddingOut) {
  // TensorFlow: a 3x3x3 input, 2x2x2 windows with stride 2, SAME: the last window along each
  // axis covers one element, so the gradient of one is shared by 8, 4, 2 or 1 elements.
  auto dx = testing::RunOp("AvgPool3DGrad",
                           {Int32Vector({1, 3, 3, 3, 1}), Floats({1, 2, 2, 2, 1}, {1, 1, 1, 1, 1, 1, 1, 1})},
                           PoolAttrs("SAME", k2, k2));
  ASSERT_TRUE(dx.ok()) << dx.status().message();
  const std::vector<float> want = {0.125, 0.125, 0.25, 0.125, 0.125, 0.25, 0.25, 0.25, 0.5,
                                   0.125, 0.125, 0.25, 0.125, 0.125, 0.25, 0.25, 0.25, 0.5,
                                   0.25,  0.25,  0.5,  0.25,  0.25,  0.5,  0.5,  0.5,  1};
  EXPECT_EQ(Values((*dx)[0]), want);
  Tensor ones(DT_FLOAT, {1, 3, 3, 3, 1});
  for (float& v : ones.flat<float>()) v = 1;
  auto y = testing::RunOp("AvgPool3D", {ones}, PoolAttrs("SAME", k2, k2));
  ASSERT_TRUE(y.ok());
  EXPECT_EQ(Values((*y)[0]), std::vector<float>(8, 1.f));
}

TEST(Pooling3DOpsTest, NcdhwGivesTheTransposedNdhwcResult) {
  Tensor x = RandomFloats({2, 5, 6, 7, 3}, 4);
  for (const char* op : {"MaxPool3D", "AvgPool3D"}) {
    auto last = testing::RunOp(op, {x}, PoolAttrs("SAME", {1, 3, 2, 2, 1}, {1, 2, 2, 1, 1}));
    auto first = testing::RunOp(op, {testing::ToChannelsFirst(x)},
                                PoolAttrs("SAME", {1, 1, 3, 2, 2}, {1, 1, 2, 2, 1}, "NCDHW"));
    ASSERT_TRUE(last.ok() && first.ok()) << first.status().message();
    EXPECT_LT(testing::MaxAbsDiff(testing::ToChannelsFirst((*last)[0]), (*first)[0]), 1e-6) << op;
  }
}

TEST(Pooling3DOpsTest, RefusesPoolingOverDepthAndWrongGradients) {
  auto depth = testing::RunOp("MaxPool3D", {RandomFloats({1, 4, 4, 4, 2}, 1)},
                              PoolAttrs("SAME", {1, 2, 2, 2, 2}, k2));
  ASSERT_FALSE(depth.ok());
  EXPECT_NE(depth.status().message().find("Pooling is not yet supported on the depth dimension."),
            std::string::npos);
  auto grad = testing::RunOp("AvgPool3DGrad",
                             {Int32Vector({1, 4, 4, 4, 2}), RandomFloats({1, 3, 2, 2, 2}, 1)},
                             PoolAttrs("VALID", k2, k2));
  ASSERT_FALSE(grad.ok());
  EXPECT_NE(grad.status().message().find("grad has shape [1,3,2,2,2], expected [1,2,2,2,2]"),
            std::string::npos)
      << grad.status().message();
}

}  // namespace
}  // namespace xlens::graph
