// Every differentiable op's symbolic gradient against central finite differences of the op
// itself, both run by the Session: for y = f(x1, ..., xn) and a random cotangent dy, the
// gradient of sum(y * dy) with respect to each element of each xi.
#include "compiler/graph/gradients.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/session.h"
#include "gradient_checker.h"

namespace xlens::graph {
namespace {

using testing::Build;
using testing::Case;
using testing::CheckGradient;

Output Bin(const char* op, const Scope& s, const std::vector<Output>& x) {
  return ops::AsOutput(ops::BuildOp(s, op, {x[0], x[1]}));
}
Output Un(const char* op, const Scope& s, const std::vector<Output>& x) {
  return ops::AsOutput(ops::BuildOp(s, op, {x[0]}));
}

Case Binary(const char* op, std::vector<int64_t> a, std::vector<int64_t> b, double lo = -2,
            double hi = 2, double blo = -2, double bhi = 2) {
  return {std::string(op) + " " + DimsToString(a) + " " + DimsToString(b),
          {{a, lo, hi}, {b, blo, bhi}},
          [op](const Scope& s, const std::vector<Output>& x) { return Bin(op, s, x); }};
}
Case Unary(const char* op, double lo = -2, double hi = 2) {
  return {op, {{{2, 3}, lo, hi}},
          [op](const Scope& s, const std::vector<Output>& x) { return Un(op, s, x); }};
}

TEST(GradientsTest, BroadcastingBinaryOps) {
  for (const char* op : {"AddV2", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"}) {
    CheckGradient(Binary(op, {2, 3}, {2, 3}));
    CheckGradient(Binary(op, {2, 3}, {3}));
    CheckGradient(Binary(op, {2, 1}, {1, 3}));
    CheckGradient(Binary(op, {}, {2, 3}));
  }
  for (const char* op : {"RealDiv", "DivNoNan"}) {
    CheckGradient(Binary(op, {2, 3}, {2, 3}, -2, 2, 0.5, 2));
    CheckGradient(Binary(op, {2, 3}, {3}, -2, 2, 0.5, 2));
  }
  CheckGradient(Binary("Pow", {2, 3}, {2, 3}, 0.5, 2, -1, 2));
  CheckGradient(Binary("Pow", {2, 3}, {}, 0.5, 2, -1, 2));
}

TEST(GradientsTest, BroadcastingWithUnknownDims) {
  // The shapes are only known at run time: BroadcastGradientArgs decides the reductions.
  Case c = Binary("Mul", {4, 3}, {3});
  c.args[0].declared = PartialShape({-1, 3});
  CheckGradient(c);
  Case d = Binary("Sub", {4}, {4});
  d.args[0].declared = PartialShape({-1});
  d.args[1].declared = PartialShape({-1});
  CheckGradient(d);
}

TEST(GradientsTest, UnaryOps) {
  for (const char* op : {"Square", "Neg", "Exp", "Tanh", "Sigmoid", "Sin", "Cos", "Identity"}) {
    CheckGradient(Unary(op));
  }
  for (const char* op : {"Sqrt", "Rsqrt", "Log", "Reciprocal"}) CheckGradient(Unary(op, 0.5, 3));
  // Away from the kinks.
  CheckGradient(Unary("Relu", 0.1, 2));
  CheckGradient(Unary("Relu", -2, -0.1));
  CheckGradient(Unary("Abs", 0.1, 2));
  CheckGradient(Unary("Abs", -2, -0.1));
}

TEST(GradientsTest, CastBetweenFloatTypes) {
  Case c{"Cast", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
           return ops::Cast(s, ops::Square(s, ops::Cast(s, x[0], DT_FLOAT)), DT_DOUBLE);
         }};
  c.dtype = DT_DOUBLE;
  // The float square in the middle limits the precision of the finite differences.
  Case f = c;
  f.dtype = DT_FLOAT;
  f.build = [](const Scope& s, const std::vector<Output>& x) {
    return ops::Cast(s, ops::Square(s, ops::Cast(s, x[0], DT_DOUBLE)), DT_FLOAT);
  };
  CheckGradient(f);
}

TEST(GradientsTest, SelectOps) {
  Tensor cond(DT_BOOL, {2, 3});
  for (int i = 0; i < 6; ++i) cond.flat<bool>()[i] = (i % 2) == 0;
  CheckGradient({"Select", {{{2, 3}}, {{2, 3}}}, [cond](const Scope& s, const std::vector<Output>& x) {
                   return ops::Select(s, ops::Const(s, cond), x[0], x[1]);
                 }});
  Tensor row(DT_BOOL, {3});
  for (int i = 0; i < 3; ++i) row.flat<bool>()[i] = i != 1;
  CheckGradient({"SelectV2", {{{2, 3}}, {{3}}}, [row](const Scope& s, const std::vector<Output>& x) {
                   return ops::SelectV2(s, ops::Const(s, row), x[0], x[1]);
                 }});
}

TEST(GradientsTest, MatMulAndBatchMatMul) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::vector<int64_t> a = ta ? std::vector<int64_t>{3, 2} : std::vector<int64_t>{2, 3};
      std::vector<int64_t> b = tb ? std::vector<int64_t>{4, 3} : std::vector<int64_t>{3, 4};
      CheckGradient({"MatMul", {{a}, {b}}, [ta, tb](const Scope& s, const std::vector<Output>& x) {
                       return ops::MatMul(s, x[0], x[1], ops::MatMulAttrs{ta, tb});
                     }});
    }
  }
  CheckGradient({"BatchMatMulV2", {{{2, 2, 3}}, {{3, 2}}},
                 [](const Scope& s, const std::vector<Output>& x) {
                   return ops::BatchMatMulV2(s, x[0], x[1]);
                 }});
  CheckGradient({"BatchMatMulV2 adj", {{{2, 3, 2}}, {{2, 2, 3}}},
                 [](const Scope& s, const std::vector<Output>& x) {
                   return ops::BatchMatMulV2(s, x[0], x[1], {true, true});
                 }});
}

AttrValue Ints(std::vector<int64_t> v) {
  AttrListValue l;
  l.i = std::move(v);
  return AttrValue::List(std::move(l));
}

TEST(GradientsTest, ActivationsAndAveragePooling) {
  CheckGradient(Unary("Relu6", -2, 8));
  CheckGradient(Unary("Softplus"));
  CheckGradient(Unary("Elu"));
  CheckGradient(Unary("Selu"));
  CheckGradient({"LeakyRelu", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   AttrMap attrs;
                   attrs["alpha"] = AttrValue::Float(0.3f);
                   return ops::AsOutput(ops::BuildOp(s, "LeakyRelu", {x[0]}, attrs));
                 }});
  for (const char* padding : {"VALID", "SAME"}) {
    CheckGradient({std::string("AvgPool ") + padding, {{{1, 5, 5, 2}}},
                   [padding](const Scope& s, const std::vector<Output>& x) {
                     AttrMap attrs;
                     attrs["ksize"] = Ints({1, 3, 3, 1});
                     attrs["strides"] = Ints({1, 2, 2, 1});
                     attrs["padding"] = AttrValue::String(padding);
                     return ops::AsOutput(ops::BuildOp(s, "AvgPool", {x[0]}, attrs));
                   }});
  }
}

TEST(GradientsTest, PadSliceAndSplit) {
  CheckGradient({"Pad", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   Output paddings = ops::Reshape(s, ops::Const(s, std::vector<int32_t>{1, 0, 2, 1}),
                                                  ops::ShapeConst(s, {2, 2}));
                   return ops::Pad(s, x[0], paddings);
                 }});
  CheckGradient({"Slice", {{{3, 4}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Slice(s, x[0], ops::Const(s, std::vector<int32_t>{1, 1}),
                                     ops::Const(s, std::vector<int32_t>{2, 2}));
                 }});
  // Only one piece of each split reaches the result: the others' gradients are zeros.
  CheckGradient({"Split", {{{2, 6}}}, [](const Scope& s, const std::vector<Output>& x) {
                   AttrMap attrs;
                   attrs["num_split"] = AttrValue::Int(3);
                   Node* split = ops::BuildOp(s, "Split", {ops::Const(s, 1), x[0]}, attrs);
                   return ops::Mul(s, Output(split, 1), Output(split, 1));
                 }});
  CheckGradient({"SplitV", {{{5, 2}}}, [](const Scope& s, const std::vector<Output>& x) {
                   AttrMap attrs;
                   attrs["num_split"] = AttrValue::Int(2);
                   Node* split = ops::BuildOp(
                       s, "SplitV",
                       {x[0], ops::Const(s, std::vector<int32_t>{2, 3}), ops::Const(s, 0)}, attrs);
                   return ops::Mul(s, Output(split, 0), Output(split, 0));
                 }});
}

TEST(GradientsTest, Reductions) {
  auto reduce = [](const char* op, std::vector<int32_t> axes, bool keep) {
    return [op, axes, keep](const Scope& s, const std::vector<Output>& x) {
      AttrMap m;
      m["keep_dims"] = AttrValue::Bool(keep);
      return ops::AsOutput(ops::BuildOp(s, op, {x[0], ops::Const(s, axes)}, m));
    };
  };
  for (const char* op : {"Sum", "Mean", "Max", "Prod"}) {
    const double lo = std::string(op) == "Prod" ? 0.5 : -2;
    CheckGradient({std::string(op) + " all", {{{2, 3}, lo, 2}}, reduce(op, {0, 1}, false)});
    CheckGradient({std::string(op) + " axis 1", {{{2, 3}, lo, 2}}, reduce(op, {1}, false)});
    CheckGradient({std::string(op) + " axis -2 keep", {{{2, 3}, lo, 2}}, reduce(op, {-2}, true)});
    Case dyn{std::string(op) + " unknown dims", {{{4, 3}, lo, 2, PartialShape({-1, 3})}},
             reduce(op, {0}, false)};
    CheckGradient(dyn);
  }
}

TEST(GradientsTest, ShapeOps) {
  CheckGradient({"Reshape", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Reshape(s, x[0], ops::Input({3, 2}));
                 }});
  CheckGradient({"Transpose", {{{2, 3, 2}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Transpose(s, x[0], ops::Input({2, 0, 1}));
                 }});
  CheckGradient({"ExpandDims", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::ExpandDims(s, x[0], ops::Input(1));
                 }});
  CheckGradient({"Squeeze", {{{2, 1, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Squeeze(s, x[0], {1});
                 }});
  CheckGradient({"ConcatV2", {{{2, 3}}, {{2, 2}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::ConcatV2(s, {x[0], x[1]}, ops::Input(-1));
                 }});
  CheckGradient({"Pack", {{{2, 3}}, {{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Pack(s, {x[0], x[1]}, 1);
                 }});
  CheckGradient({"Fill", {{{}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Fill(s, ops::Input({2, 3}), x[0]);
                 }});
  CheckGradient({"Tile", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Tile(s, x[0], ops::Input({2, 1}));
                 }});
  CheckGradient({"StridedSlice", {{{4, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::StridedSlice(s, x[0], ops::Input({1, 0}), ops::Input({4, 3}),
                                            ops::Input({2, 1}));
                 }});
  CheckGradient({"GatherV2", {{{4, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::GatherV2(s, x[0], ops::Input({2, 0, 2}), ops::Input(0));
                 }});
}

TEST(GradientsTest, NnOps) {
  CheckGradient({"BiasAdd", {{{2, 3}}, {{3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::BiasAdd(s, x[0], x[1]);
                 }});
  CheckGradient({"Softmax", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Softmax(s, x[0]);
                 }});
  CheckGradient({"LogSoftmax", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::LogSoftmax(s, x[0]);
                 }});
  // The labels must be distributions: the op's backprop (its gradient for the logits) is
  // softmax - labels, the derivative only where each row of labels sums to 1 (TensorFlow's
  // gradient disagrees with finite differences otherwise too). Softmax makes them so under
  // every perturbation, and its gradient carries the labels' gradient back to x1.
  CheckGradient({"SoftmaxCrossEntropyWithLogits", {{{2, 3}}, {{2, 3}}},
                 [](const Scope& s, const std::vector<Output>& x) {
                   return ops::SoftmaxCrossEntropyWithLogitsOp(s, x[0], ops::Softmax(s, x[1]))
                       .loss;
                 }});
  CheckGradient({"SparseSoftmaxCrossEntropyWithLogits", {{{3, 4}}},
                 [](const Scope& s, const std::vector<Output>& x) {
                   return ops::SparseSoftmaxCrossEntropyWithLogitsOp(s, x[0], ops::Input({1, 3, 0}))
                       .loss;
                 }});
  ops::ConvAttrs conv;
  conv.padding = "SAME";
  CheckGradient({"Conv2D", {{{1, 4, 4, 2}}, {{3, 3, 2, 2}}},
                 [conv](const Scope& s, const std::vector<Output>& x) {
                   return ops::Conv2D(s, x[0], x[1], conv);
                 },
                 DT_FLOAT});
  CheckGradient({"MaxPool", {{{1, 4, 4, 1}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::MaxPool(s, x[0], ops::PoolAttrs{});
                 },
                 DT_FLOAT});
}

AttrValue IntList(std::vector<int64_t> values) {
  AttrListValue l;
  l.i = std::move(values);
  return AttrValue::List(l);
}

// A node of `op` on `inputs` with `attrs` (its type attrs inferred).
Build OpWith(std::string op, AttrMap attrs, std::function<std::vector<ops::Input>(
                                                const std::vector<Output>&)> inputs) {
  return [=](const Scope& s, const std::vector<Output>& x) {
    return ops::AsOutput(ops::BuildOp(s, op, inputs(x), attrs));
  };
}

TEST(GradientsTest, DepthwiseAnd3DConvolutionsAndPooling) {
  const AttrMap depthwise = {{"strides", IntList({1, 2, 1, 1})},
                             {"padding", AttrValue::String("EXPLICIT")},
                             {"explicit_paddings", IntList({0, 0, 1, 0, 0, 2, 0, 0})},
                             {"dilations", IntList({1, 1, 2, 1})}};
  auto x01 = [](const std::vector<Output>& x) { return std::vector<ops::Input>{x[0], x[1]}; };
  CheckGradient({"DepthwiseConv2dNative", {{{1, 5, 4, 2}}, {{2, 2, 2, 2}}},
                 OpWith("DepthwiseConv2dNative", depthwise, x01)});
  // The backprops as ops of their own (second-order gradients): input_sizes / filter_sizes are
  // constants, the other two inputs differentiated.
  CheckGradient({"DepthwiseConv2dNativeBackpropInput", {{{2, 2, 2, 2}}, {{1, 3, 4, 4}}},
                 OpWith("DepthwiseConv2dNativeBackpropInput", depthwise,
                        [](const std::vector<Output>& x) {
                          return std::vector<ops::Input>{ops::Input({1, 5, 4, 2}), x[0], x[1]};
                        })});
  CheckGradient({"DepthwiseConv2dNativeBackpropFilter", {{{1, 5, 4, 2}}, {{1, 3, 4, 4}}},
                 OpWith("DepthwiseConv2dNativeBackpropFilter", depthwise,
                        [](const std::vector<Output>& x) {
                          return std::vector<ops::Input>{x[0], ops::Input({2, 2, 2, 2}), x[1]};
                        })});
  const AttrMap conv3d = {{"strides", IntList({1, 2, 1, 1, 1})},
                          {"padding", AttrValue::String("SAME")},
                          {"dilations", IntList({1, 1, 1, 2, 1})}};
  CheckGradient({"Conv3D", {{{1, 3, 3, 4, 2}}, {{2, 2, 2, 2, 2}}}, OpWith("Conv3D", conv3d, x01)});
  CheckGradient({"Conv3DBackpropInputV2", {{{2, 2, 2, 2, 2}}, {{1, 2, 3, 4, 2}}},
                 OpWith("Conv3DBackpropInputV2", conv3d, [](const std::vector<Output>& x) {
                   return std::vector<ops::Input>{ops::Input({1, 3, 3, 4, 2}), x[0], x[1]};
                 })});
  CheckGradient({"Conv3DBackpropFilterV2", {{{1, 3, 3, 4, 2}}, {{1, 2, 3, 4, 2}}},
                 OpWith("Conv3DBackpropFilterV2", conv3d, [](const std::vector<Output>& x) {
                   return std::vector<ops::Input>{x[0], ops::Input({2, 2, 2, 2, 2}), x[1]};
                 })});
  const AttrMap pool = {{"ksize", IntList({1, 2, 2, 2, 1})},
                        {"strides", IntList({1, 2, 1, 2, 1})},
                        {"padding", AttrValue::String("SAME")}};
  auto x0 = [](const std::vector<Output>& x) { return std::vector<ops::Input>{x[0]}; };
  CheckGradient({"AvgPool3D", {{{1, 3, 3, 3, 2}}}, OpWith("AvgPool3D", pool, x0)});
  CheckGradient({"AvgPool3DGrad", {{{1, 2, 3, 2, 2}}},
                 OpWith("AvgPool3DGrad", pool, [](const std::vector<Output>& x) {
                   return std::vector<ops::Input>{ops::Input({1, 3, 3, 3, 2}), x[0]};
                 })});
  // MaxPool3D has no double kernel (as in TensorFlow); distinct values keep the maxima apart.
  CheckGradient({"MaxPool3D", {{{1, 3, 3, 3, 2}}}, OpWith("MaxPool3D", pool, x0), DT_FLOAT});
}

TEST(GradientsTest, SharedTensorsSumTheirGradients) {
  // x feeds three consumers: the gradients are summed with AddN.
  CheckGradient({"x*x + sin(x)", {{{2, 3}}}, [](const Scope& s, const std::vector<Output>& x) {
                   return ops::Add(s, ops::Mul(s, x[0], x[0]), ops::Sin(s, x[0]));
                 }});
}

TEST(GradientsTest, DefaultOutputGradientIsOnesNamedAsTensorFlowDoes) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({3}));
  Output y = ops::Sum(root, ops::Square(root, x), ops::Input({0}));
  std::vector<Output> grads;
  Status st = AddSymbolicGradients(root, {y}, {x}, {}, &grads);
  ASSERT_TRUE(st.ok()) << st.message();
  Graph* g = root.graph();
  ASSERT_NE(g->FindNode("gradients/grad_ys_0"), nullptr);
  EXPECT_EQ(g->FindNode("gradients/grad_ys_0")->type_string(), "Fill");
  EXPECT_EQ(g->FindNode("gradients/Shape")->type_string(), "Const");
  EXPECT_NE(g->FindNode("gradients/grad_ys_0/Const"), nullptr);
  EXPECT_NE(g->FindNode("gradients/Sum_grad/Reshape/shape"), nullptr);
  EXPECT_NE(g->FindNode("gradients/Square_grad/Mul_1"), nullptr);
  // A second call gets its own scope.
  std::vector<Output> again;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x}, {}, &again).ok());
  EXPECT_NE(g->FindNode("gradients_1/grad_ys_0"), nullptr);
}

TEST(GradientsTest, UnreachableInputHasNoGradientAndNonDifferentiableOpIsAnError) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({3}));
  Output z = ops::Placeholder(root.WithOpName("z"), DT_FLOAT, PartialShape({3}));
  Output y = ops::Square(root, x);
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {y}, {x, z}, {}, &grads).ok());
  EXPECT_TRUE(grads[0].valid());
  EXPECT_FALSE(grads[1].valid());
}

}  // namespace
}  // namespace xlens::graph
