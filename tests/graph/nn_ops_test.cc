// Shape functions and input checks of the nn ops, against what TensorFlow infers and refuses.
// Kernel values are checked against TensorFlow in op_kernels_test.cc.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace xlens::graph
