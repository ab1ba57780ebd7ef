// The array ops against TensorFlow: every case of testdata/ops/array_cases.json (computed by
// TensorFlow 2.21, see generate.py there) through our kernel and shape function, plus what the
// cases cannot show: buffers shared instead of copied, and static shapes from partial knowledge.
#include <gtest/gtest.h>

#include "kernel_test_util.h"

namespace xlens::graph {
namespace {

using testing::KernelRunner;
using testing::RunOp;

TEST(ArrayOpsTest, EveryTensorFlowCase) {
  const auto cases = testing::LoadCases("array_cases.json");
  ASSERT_GT(cases.size(), 100u);
  for (const auto& c : cases) testing::CheckCase(c);
}

Tensor Iota(std::vector<int64_t> dims) {
  Tensor t(DT_FLOAT, dims);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.flat<float>()[i] = static_cast<float>(i);
  return t;
}

AttrMap TypeAttrs(std::initializer_list<std::pair<const char*, DataType>> types) {
  AttrMap attrs;
  for (const auto& [name, type] : types) attrs[name] = AttrValue::Type(type);
  return attrs;
}

TEST(ArrayOpsTest, ReshapeExpandDimsSqueezeIdentityShareTheBuffer) {
  const Tensor x = Iota({2, 3});
  auto r = RunOp("Reshape", {x, Tensor::Vector<int32_t>(DT_INT32, {3, -1})},
                 TypeAttrs({{"T", DT_FLOAT}, {"Tshape", DT_INT32}}));
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ((*r)[0].dims(), (std::vector<int64_t>{3, 2}));
  EXPECT_TRUE((*r)[0].SharesBufferWith(x));
  auto e = RunOp("ExpandDims", {x, Tensor::Scalar<int32_t>(DT_INT32, 0)},
                 TypeAttrs({{"T", DT_FLOAT}, {"Tdim", DT_INT32}}));
  ASSERT_TRUE(e.ok());
  EXPECT_TRUE((*e)[0].SharesBufferWith(x));
  auto s = RunOp("Squeeze", {(*e)[0]}, TypeAttrs({{"T", DT_FLOAT}}));
  ASSERT_TRUE(s.ok());
  EXPECT_EQ((*s)[0].dims(), x.dims());
  EXPECT_TRUE((*s)[0].SharesBufferWith(x));
  auto i = RunOp("Identity", {x}, TypeAttrs({{"T", DT_FLOAT}}));
  ASSERT_TRUE(i.ok());
  EXPECT_TRUE((*i)[0].SharesBufferWith(x));
}

TEST(ArrayOpsTest, ConstOutputsItsValueAndPlaceholderAsksToBeFed) {
  const Tensor v = Iota({2});
  auto c = RunOp("Const", {}, {{"dtype", AttrValue::Type(DT_FLOAT)},
                               {"value", AttrValue::TensorValue(v)}});
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE((*c)[0].Identical(v));
  KernelRunner p("Placeholder", {{"dtype", AttrValue::Type(DT_FLOAT)},
                                 {"shape", AttrValue::Shape(PartialShape({-1, 3}))}},
                 "x");
  auto r = p.Run({});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(
                "You must feed a value for placeholder tensor 'x' with dtype float and shape "
                "[?,3]"),
            std::string::npos)
      << r.status().message();
}

// Shape functions with partial knowledge, as TensorFlow's shape inference gives them.
PartialShape InferOne(const std::string& op, AttrMap attrs, std::vector<PartialShape> shapes,
                      std::vector<const Tensor*> values) {
  KernelRunner runner(op, std::move(attrs));
  EXPECT_TRUE(runner.status().ok()) << runner.status().message();
  InferenceContext c(runner.node(), &runner.node()->attrs(), shapes,
                     runner.node()->input_types(), runner.node()->output_types(), values);
  Status st = runner.node()->registration().shape_fn(c);
  EXPECT_TRUE(st.ok()) << st.message();
  return c.output(0);
}

TEST(ArrayOpsTest, ShapeFunctionsWithUnknownDimensions) {
  const Tensor shape = Tensor::Vector<int32_t>(DT_INT32, {-1, 6});
  // Reshape: -1 resolved from a fully known input; left unknown otherwise.
  EXPECT_EQ(InferOne("Reshape", TypeAttrs({{"T", DT_FLOAT}}),
                     {PartialShape({4, 3}), PartialShape({2})}, {nullptr, &shape}),
            PartialShape({2, 6}));
  EXPECT_EQ(InferOne("Reshape", TypeAttrs({{"T", DT_FLOAT}}),
                     {PartialShape({-1, 3}), PartialShape({2})}, {nullptr, &shape}),
            PartialShape({-1, 6}));
  // Shape: [rank].
  EXPECT_EQ(InferOne("Shape", TypeAttrs({{"T", DT_FLOAT}}), {PartialShape({-1, 3, 5})},
                     {nullptr}),
            PartialShape({3}));
  // StridedSlice on an unknown dimension keeps it unknown; shrink and new axes still apply.
  const Tensor b = Tensor::Vector<int32_t>(DT_INT32, {0, 1, 0});
  const Tensor e = Tensor::Vector<int32_t>(DT_INT32, {0, 3, 1});
  const Tensor s = Tensor::Vector<int32_t>(DT_INT32, {1, 1, 1});
  AttrMap ss = TypeAttrs({{"T", DT_FLOAT}, {"Index", DT_INT32}});
  ss["begin_mask"] = AttrValue::Int(1);
  ss["end_mask"] = AttrValue::Int(1);
  ss["shrink_axis_mask"] = AttrValue::Int(4);
  EXPECT_EQ(InferOne("StridedSlice", ss,
                     {PartialShape({-1, 5, 2}), PartialShape({3}), PartialShape({3}),
                      PartialShape({3})},
                     {nullptr, &b, &e, &s}),
            PartialShape({-1, 2}));
  // ConcatV2 sums the axis, other dimensions merge.
  const Tensor axis = Tensor::Scalar<int32_t>(DT_INT32, 1);
  AttrMap concat = TypeAttrs({{"T", DT_FLOAT}});
  concat["N"] = AttrValue::Int(2);
  EXPECT_EQ(InferOne("ConcatV2", concat,
                     {PartialShape({-1, 2}), PartialShape({4, 3}), PartialShape::Scalar()},
                     {nullptr, nullptr, &axis}),
            PartialShape({4, 5}));
}

TEST(ArrayOpsTest, TransposeOfALargeTensorMatchesTheDefinition) {
  const Tensor x = Iota({7, 5, 3, 4});
  auto t = RunOp("Transpose", {x, Tensor::Vector<int32_t>(DT_INT32, {3, 1, 0, 2})},
                 TypeAttrs({{"T", DT_FLOAT}, {"Tperm", DT_INT32}}));
  ASSERT_TRUE(t.ok());
  const Tensor& y = (*t)[0];
  ASSERT_EQ(y.dims(), (std::vector<int64_t>{4, 5, 7, 3}));
  for (int64_t a = 0; a < 4; ++a)
    for (int64_t b = 0; b < 5; ++b)
      for (int64_t c = 0; c < 7; ++c)
        for (int64_t d = 0; d < 3; ++d)
          ASSERT_EQ(y.flat<float>()[((a * 5 + b) * 7 + c) * 3 + d],
                    x.flat<float>()[((c * 5 + b) * 3 + d) * 4 + a]);
}

TEST(ArrayOpsTest, ErrorsNameTheNode) {
  KernelRunner r("Reshape", TypeAttrs({{"T", DT_FLOAT}}), "reshape_me");
  auto out = r.Run({Iota({6}), Tensor::Vector<int32_t>(DT_INT32, {4})});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "node 'reshape_me' (Reshape): Input to reshape is a tensor with 6 values, but the "
            "requested shape has 4");
}

}  // namespace
}  // namespace xlens::graph
