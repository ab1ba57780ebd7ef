// Shape functions of the math ops infer what TensorFlow's do (static shapes from broadcasting,
// MatMul, reductions over constant axes; unknown dims carried as -1), and refuse what
// TensorFlow refuses with a message naming the node. Kernel values are checked against
// TensorFlow in op_kernels_test.cc.
#include <gtest/gtest.h>

#include "compiler/graph/ops/register_ops.h"
#include "op_family_test_util.h"

namespace xlens::graph {
namespace {

class MathOpsShapeTest : public ::testing::Test {
 protected:
  MathOpsShapeTest() : runner_(&registry_) {}
  void SetUp() override { RegisterMathOps(registry_); }

  PartialShape Infer(const std::string& op, AttrMap attrs, std::vector<PartialShape> shapes,
                     std::vector<const Tensor*> values = {}) {
    auto out = runner_.InferShapes(op, std::move(attrs), std::move(shapes), std::move(values));
    EXPECT_TRUE(out.ok()) << out.status().message();
    return out.ok() ? (*out)[0] : PartialShape();
  }
  static AttrMap T(DataType t = DT_FLOAT) { return {{"T", AttrValue::Type(t)}}; }
  static PartialShape S(std::vector<int64_t> dims) { return PartialShape(std::move(dims)); }

  OpRegistry registry_;
  testing::LocalKernelRunner runner_;
};

TEST_F(MathOpsShapeTest, Broadcasting) {
  EXPECT_EQ(Infer("AddV2", T(), {S({2, 1, 3}), S({4, 1})}), S({2, 4, 3}));
  EXPECT_EQ(Infer("Mul", T(), {S({-1, 3}), S({3})}), S({-1, 3}));
  EXPECT_EQ(Infer("Less", T(), {S({}), S({5, 2})}), S({5, 2}));
  EXPECT_TRUE(Infer("Sub", T(), {PartialShape(), S({3})}).unknown_rank());
  auto bad = runner_.InferShapes("AddV2", T(), {S({2, 3}), S({4})});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("node 'AddV2", 0), 0u) << bad.status().message();
}

TEST_F(MathOpsShapeTest, MatMul) {
  AttrMap attrs = T();
  EXPECT_EQ(Infer("MatMul", attrs, {S({2, 3}), S({3, 5})}), S({2, 5}));
  attrs["transpose_a"] = AttrValue::Bool(true);
  EXPECT_EQ(Infer("MatMul", attrs, {S({3, -1}), S({3, 5})}), S({-1, 5}));
  auto bad = runner_.InferShapes("MatMul", T(), {S({2, 3}), S({4, 5})});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Dimensions must be equal, but are 3 and 4"),
            std::string::npos);
  EXPECT_EQ(Infer("BatchMatMulV2", T(), {S({2, 1, 3, 4}), S({5, 4, 6})}), S({2, 5, 3, 6}));
}

TEST_F(MathOpsShapeTest, ReductionsWithConstantAndUnknownAxes) {
  AttrMap attrs = T();
  attrs["Tidx"] = AttrValue::Type(DT_INT32);
  const Tensor axes = Tensor::Vector<int32_t>(DT_INT32, {-1, 0});
  EXPECT_EQ(Infer("Sum", attrs, {S({2, 3, 4}), S({2})}, {nullptr, &axes}), S({3}));
  attrs["keep_dims"] = AttrValue::Bool(true);
  EXPECT_EQ(Infer("Mean", attrs, {S({2, 3, 4}), S({2})}, {nullptr, &axes}), S({1, 3, 1}));
  // Axes not known: the rank survives keep_dims, nothing else.
  EXPECT_EQ(Infer("Max", attrs, {S({2, 3, 4}), S({2})}), S({-1, -1, -1}));
  attrs["keep_dims"] = AttrValue::Bool(false);
  EXPECT_TRUE(Infer("Max", attrs, {S({2, 3, 4}), S({2})}).unknown_rank());
  const Tensor bad_axes = Tensor::Vector<int32_t>(DT_INT32, {3});
  auto bad = runner_.InferShapes("Sum", attrs, {S({2, 3, 4}), S({1})}, {nullptr, &bad_axes});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("Invalid reduction dimension 3 for input with 3 "
                                        "dimensions."),
            std::string::npos);
  const Tensor dim = Tensor::Scalar<int32_t>(DT_INT32, 1);
  AttrMap arg = T();
  EXPECT_EQ(Infer("ArgMax", arg, {S({3, -1, 2}), S({})}, {nullptr, &dim}), S({3, 2}));
}

TEST_F(MathOpsShapeTest, SelectAndCast) {
  EXPECT_EQ(Infer("SelectV2", T(), {S({3, 1}), S({1, 4}), S({})}), S({3, 4}));
  EXPECT_EQ(Infer("Select", T(), {S({3}), S({3, -1}), S({-1, 4})}), S({3, 4}));
  EXPECT_EQ(Infer("Cast", {{"SrcT", AttrValue::Type(DT_INT32)},
                           {"DstT", AttrValue::Type(DT_FLOAT)}},
                  {S({2, -1})}),
            S({2, -1}));
}

// A product big enough to be split among threads gives the same numbers as one thread.
TEST(MathOpsKernelTest, ThreadedMatMulEqualsSingleThreaded) {
  OpRegistry registry;
  RegisterMathOps(registry);
  testing::LocalKernelRunner runner(&registry);
  auto node = *runner.AddNode("MatMul", {{"T", AttrValue::Type(DT_FLOAT)}});
  Tensor a(DT_FLOAT, {300, 200}), b(DT_FLOAT, {200, 100});
  for (int64_t i = 0; i < a.num_elements(); ++i) a.flat<float>()[i] = (i % 17) * 0.25f - 2;
  for (int64_t i = 0; i < b.num_elements(); ++i) b.flat<float>()[i] = (i % 13) * 0.5f - 3;
  auto single = runner.Run(*node, {a, b});
  ASSERT_TRUE(single.ok()) << single.status().message();
  // The exact product: every term is a multiple of 1/8 and sums stay far below 2^24.
  for (int64_t r : {0, 150, 299}) {
    for (int64_t c : {0, 99}) {
      double want = 0;
      for (int64_t k = 0; k < 200; ++k)
        want += double(a.flat<float>()[r * 200 + k]) * double(b.flat<float>()[k * 100 + c]);
      EXPECT_EQ((*single)[0].flat<float>()[r * 100 + c], static_cast<float>(want));
    }
  }
}

// Elementwise ops under every broadcasting pattern the row loops see (both operands of the
// output's shape, one a single element, one repeated along the leading dims, and the general
// case row by row with either operand broadcast along the innermost dim, its dims of size 1
// dropped and its neighbours merged first), on a non-commutative
// op so that swapped operands would show.
TEST(MathOpsKernelTest, BroadcastSubtractsElementByElement) {
  OpRegistry registry;
  RegisterMathOps(registry);
  testing::LocalKernelRunner runner(&registry);
  auto make = [](std::vector<int64_t> dims, int seed) {
    Tensor t(DT_INT32, dims);
    for (int64_t i = 0; i < t.num_elements(); ++i) t.flat<int32_t>()[i] = seed * 1000 + int32_t(i);
    return t;
  };
  // The operand's element at output element `out` (dims aligned at the right, size-1 dims
  // broadcast).
  auto at = [](const Tensor& t, const std::vector<int64_t>& out_dims, int64_t out) {
    int64_t index = 0, stride = 1;
    for (int64_t d = int64_t(out_dims.size()) - 1, td = t.rank() - 1; d >= 0; --d, --td) {
      const int64_t coord = out % out_dims[d];
      out /= out_dims[d];
      if (td < 0) continue;
      if (t.dim(td) != 1) index += coord * stride;
      stride *= t.dim(td);
    }
    return t.flat<int32_t>()[index];
  };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3}, {2, 3}},       {{2, 3}, {}},     {{}, {2, 3}},       {{4, 2, 3}, {2, 3}},
      {{2, 3}, {4, 2, 3}},    {{2, 1, 3}, {1, 4, 1}}, {{2, 4, 1}, {2, 1, 3}}, {{3, 1}, {2, 1, 1}},
      {{2, 3, 4}, {3, 1}},    {{1}, {2, 3}},
      // Size-1 dims dropped and neighbours walked alike merged into longer rows.
      {{5, 4, 1}, {5, 1, 1}}, {{2, 3, 4, 5}, {2, 3, 1, 1}}, {{1, 3, 1, 4}, {2, 1, 5, 1}}};
  for (const auto& [xd, yd] : shapes) {
    const Tensor x = make(xd, 1), y = make(yd, 2);
    auto out = runner.Run("Sub", {{"T", AttrValue::Type(DT_INT32)}}, {x, y});
    ASSERT_TRUE(out.ok()) << out.status().message();
    const Tensor& z = (*out)[0];
    for (int64_t i = 0; i < z.num_elements(); ++i) {
      ASSERT_EQ(z.flat<int32_t>()[i], at(x, z.dims(), i) - at(y, z.dims(), i))
          << DimsToString(xd) << " - " << DimsToString(yd) << " at " << i;
    }
  }
}

// Integer products wrap as the element type does (computed in uint64_t and truncated), with
// either operand transposed; the values overflow int32 in both the products and the sums, and
// the expected values are computed in 32-bit unsigned arithmetic.
TEST(MathOpsKernelTest, Int32MatMulWrapsAsInt32) {
  OpRegistry registry;
  RegisterMathOps(registry);
  testing::LocalKernelRunner runner(&registry);
  const int64_t m = 3, k = 5, n = 4;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      Tensor a(DT_INT32, ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k});
      Tensor b(DT_INT32, tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n});
      for (int64_t i = 0; i < a.num_elements(); ++i)
        a.flat<int32_t>()[i] = int32_t(2000000000 - 276543217 * i);
      for (int64_t i = 0; i < b.num_elements(); ++i)
        b.flat<int32_t>()[i] = int32_t(-1900000000 + 191234567 * i);
      auto out = runner.Run("MatMul",
                            {{"T", AttrValue::Type(DT_INT32)},
                             {"transpose_a", AttrValue::Bool(ta)},
                             {"transpose_b", AttrValue::Bool(tb)}},
                            {a, b});
      ASSERT_TRUE(out.ok()) << out.status().message();
      for (int64_t r = 0; r < m; ++r) {
        for (int64_t c = 0; c < n; ++c) {
          uint32_t want = 0;
          for (int64_t q = 0; q < k; ++q) {
            want += uint32_t(a.flat<int32_t>()[ta ? q * m + r : r * k + q]) *
                    uint32_t(b.flat<int32_t>()[tb ? c * k + q : q * n + c]);
          }
          EXPECT_EQ((*out)[0].flat<int32_t>()[r * n + c], static_cast<int32_t>(want))
              << ta << tb << " at " << r << "," << c;
        }
      }
    }
  }
}

}  // namespace
}  // namespace xlens::graph
