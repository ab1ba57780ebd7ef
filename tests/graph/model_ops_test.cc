// The ops Keras models add: Einsum's equation parser (every form TensorFlow accepts and its
// refusals), Einsum's kernel on the corners (diagonals, traces, output diagonals, ellipsis
// broadcasting, empty operands), the special functions against known values, the resizes'
// pixel choice, ConcatOffset, and every new gradient against central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/ops/einsum_equation.h"
#include "compiler/graph/ops/image_resize.h"
#include "compiler/graph/ops/special_math.h"
#include "compiler/graph/session.h"
#include "gradient_checker.h"
#include "graph_test_util.h"

namespace xlens::graph {
namespace {

using testing::Case;
using testing::CheckGradient;

Output Einsum(const Scope& s, const std::vector<Output>& x, const std::string& eq) {
  std::vector<ops::Input> in(x.begin(), x.end());
  return ops::AsOutput(ops::BuildOpWithList(s, "Einsum", {in}, {{"equation", AttrValue::String(eq)}}));
}

Case EinsumCase(const std::string& eq, std::vector<std::vector<int64_t>> shapes) {
  Case c{"einsum " + eq, {}, [eq](const Scope& s, const std::vector<Output>& x) {
           return Einsum(s, x, eq);
         }};
  for (auto& d : shapes) c.args.push_back({d});
  return c;
}

// Runs `build` on constant operands and returns the one output (or the error).
StatusOr<Tensor> RunOp(const std::function<Output(const Scope&)>& build) {
  Scope root = Scope::NewRootScope();
  Output y = build(root);
  if (!root.ok()) return root.status();
  ASSIGN_OR_RETURN(auto session, Session::Create(root.graph()->ToGraphDef()));
  ASSIGN_OR_RETURN(auto out, session->Run({}, {y.name()}));
  return out[0];
}

std::vector<float> FloatsOf(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.num_elements(); ++i) v.push_back(static_cast<float>(t.GetAsDouble(i)));
  return v;
}

Tensor Floats(std::vector<int64_t> dims, std::vector<float> values) {
  Tensor t(DT_FLOAT, std::move(dims));
  for (size_t i = 0; i < values.size(); ++i) t.flat<float>()[i] = values[i];
  return t;
}

TEST(EinsumEquationTest, ParsesAndResolvesTensorFlowsForms) {
  auto eq = ParseEinsumEquation("...ij,...jk->...ik", 2);
  ASSERT_TRUE(eq.ok()) << eq.status().message();
  auto d = ResolveEinsum(*eq, {{2, 1, 3, 4}, {5, 4, 2}});
  ASSERT_TRUE(d.ok()) << d.status().message();
  EXPECT_EQ(d->output_dims, (std::vector<int64_t>{2, 5, 3, 2}));
  EXPECT_EQ(d->num_ellipsis_dims, 2);
  // An ellipsis only in the output stands for no dimensions; labels are any character.
  auto one = ParseEinsumEquation("ij->...ji", 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(ResolveEinsum(*one, {{3, 4}})->output_dims, (std::vector<int64_t>{4, 3}));
  auto space = ParseEinsumEquation("i j->j i", 1);
  ASSERT_TRUE(space.ok());
  EXPECT_EQ(ResolveEinsum(*space, {{2, 3, 4}})->output_dims, (std::vector<int64_t>{4, 3, 2}));
}

TEST(EinsumEquationTest, RefusesWhatTensorFlowRefuses) {
  EXPECT_NE(ParseEinsumEquation("ijk", 1).status().message().find("exactly one '->'"),
            std::string::npos);
  EXPECT_NE(ParseEinsumEquation("ij,ij,ij->i", 3).status().message().find("1 or 2 input"),
            std::string::npos);
  EXPECT_NE(ParseEinsumEquation("abc->abd", 1).status().message().find("label 'd'"),
            std::string::npos);
  EXPECT_FALSE(ParseEinsumEquation("...i...->i", 1).ok());
  auto eq = ParseEinsumEquation("bij,bjk->bik", 2);
  ASSERT_TRUE(eq.ok());
  EXPECT_NE(ResolveEinsum(*eq, {{2, 3, 4}, {1, 4, 5}}).status().message().find(
                "Expected dimension 2 at axis 0"),
            std::string::npos);
  EXPECT_NE(ResolveEinsum(*eq, {{2, 3}, {2, 4, 5}}).status().message().find(
                "Expected input 0 to have rank 3"),
            std::string::npos);
  auto ell = ParseEinsumEquation("...k->k", 1);
  ASSERT_TRUE(ell.ok());
  EXPECT_NE(ResolveEinsum(*ell, {{2, 3, 4}}).status().message().find("no ellipsis"),
            std::string::npos);
}

TEST(EinsumKernelTest, DiagonalsTracesAndOutputDiagonals) {
  const Tensor m = Floats({3, 3}, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  auto diag = RunOp([&](const Scope& s) { return Einsum(s, {ops::Const(s, m)}, "ii->i"); });
  ASSERT_TRUE(diag.ok()) << diag.status().message();
  EXPECT_EQ(FloatsOf(*diag), (std::vector<float>{1, 5, 9}));
  auto trace = RunOp([&](const Scope& s) { return Einsum(s, {ops::Const(s, m)}, "ii->"); });
  ASSERT_TRUE(trace.ok());
  EXPECT_EQ(trace->GetAsDouble(0), 15);
  const Tensor v = Floats({2}, {2, 3});
  auto on_diag = RunOp([&](const Scope& s) { return Einsum(s, {ops::Const(s, v)}, "i->ii"); });
  ASSERT_TRUE(on_diag.ok()) << on_diag.status().message();
  EXPECT_EQ(FloatsOf(*on_diag), (std::vector<float>{2, 0, 0, 3}));
  // Empty operands give empty or zero results, as matmul does.
  const Tensor empty(DT_FLOAT, {0, 3});
  auto sum = RunOp([&](const Scope& s) {
    return Einsum(s, {ops::Const(s, empty), ops::Const(s, m)}, "ij,jk->k");
  });
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(FloatsOf(*sum), (std::vector<float>{0, 0, 0}));
}

TEST(EinsumKernelTest, EllipsisBroadcastsSizeOneBatches) {
  const Tensor a = Floats({2, 1, 2}, {1, 2, 3, 4});    // two 1x2 rows
  const Tensor b = Floats({1, 2, 2}, {1, 0, 0, 10});  // one 2x2 matrix
  auto r = RunOp([&](const Scope& s) {
    return Einsum(s, {ops::Const(s, a), ops::Const(s, b)}, "...ij,...jk->...ik");
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->dims(), (std::vector<int64_t>{2, 1, 2}));
  EXPECT_EQ(FloatsOf(*r), (std::vector<float>{1, 20, 3, 40}));
}

// Integer einsums wrap as the element type does (the product and the summed-out label computed in
// uint64_t and truncated): int8 values whose products and sums overflow int8.
TEST(EinsumKernelTest, Int8ProductsWrapAsInt8) {
  Tensor a(DT_INT8, {2, 3, 2}), b(DT_INT8, {3, 2});
  for (int64_t i = 0; i < a.num_elements(); ++i) a.flat<int8_t>()[i] = int8_t(120 - 41 * i);
  for (int64_t i = 0; i < b.num_elements(); ++i) b.flat<int8_t>()[i] = int8_t(-100 + 53 * i);
  // Label i is summed within a alone, j contracted with b, k free in both.
  auto r = RunOp([&](const Scope& s) {
    return Einsum(s, {ops::Const(s, a), ops::Const(s, b)}, "ijk,jk->k");
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->dims(), (std::vector<int64_t>{2}));
  for (int64_t k = 0; k < 2; ++k) {
    int64_t want = 0;
    for (int64_t i = 0; i < 2; ++i)
      for (int64_t j = 0; j < 3; ++j)
        want += int64_t(a.flat<int8_t>()[(i * 3 + j) * 2 + k]) *
                int64_t(b.flat<int8_t>()[j * 2 + k]);
    EXPECT_EQ(r->flat<int8_t>()[k], static_cast<int8_t>(want)) << k;
  }
}

TEST(EinsumKernelTest, BuffersPastTheTensorLimitAreRefusedFirst) {
  // An outer product of two 2^20-element vectors would be 2^40 elements.
  const Tensor big(DT_FLOAT, {int64_t{1} << 20});
  auto r = RunOp([&](const Scope& s) {
    return Einsum(s.WithOpName("outer"), {ops::Const(s, big), ops::Const(s, big)}, "i,j->ij");
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'outer'"), std::string::npos);
  EXPECT_NE(r.status().message().find("tensor limit"), std::string::npos);
}

constexpr double kPiSquaredOver6 = 1.6449340668482264;

TEST(SpecialMathTest, KnownValues) {
  EXPECT_NEAR(special::Erfc(0.5), 0.4795001221869535, 1e-15);
  EXPECT_NEAR(special::Erfinv(0.5), 0.4769362762044699, 1e-13);
  EXPECT_NEAR(special::Erfinv(-0.999), -2.326753765513525, 1e-12);
  EXPECT_NEAR(special::Erfinv(1e-10), 8.862269254527579e-11, 1e-22);
  EXPECT_TRUE(std::isinf(special::Erfinv(1.0)));
  EXPECT_TRUE(std::isnan(special::Erfinv(1.5)));
  EXPECT_NEAR(special::Ndtri(0.975), 1.959963984540054, 1e-12);
  EXPECT_NEAR(special::Ndtri(1e-10), -6.361340902404056, 1e-10);
  EXPECT_NEAR(special::Digamma(1.0), -0.5772156649015329, 1e-13);
  EXPECT_NEAR(special::Digamma(-0.5), 0.03648997397857652, 1e-12);
  EXPECT_TRUE(std::isnan(special::Digamma(-2.0)));
  EXPECT_NEAR(special::Lgamma(-0.5), 1.2655121234846454, 1e-13);
  EXPECT_NEAR(special::Zeta(2.0, 1.0), kPiSquaredOver6, 1e-14);
  EXPECT_TRUE(std::isinf(special::Zeta(1.0, 2.0)));
  EXPECT_TRUE(std::isnan(special::Zeta(0.5, 2.0)));
  EXPECT_NEAR(special::Polygamma(1.0, 1.0), kPiSquaredOver6, 1e-13);
  EXPECT_NEAR(special::Polygamma(2.0, 1.0), -2.4041138063191885, 1e-12);
  EXPECT_NEAR(special::Polygamma(0.0, 1.0), -0.5772156649015329, 1e-13);
  EXPECT_TRUE(std::isnan(special::Polygamma(1.5, 1.0)));
}

TEST(ResizeTest, PixelsAndWeightsAreTensorFlows) {
  // half_pixel_centers: output 0 of 4 from 2 sits at -0.25, clamped to pixel 0 with lerp 0.75.
  auto taps = resize::BilinearTaps(4, 2, resize::Scale(2, 4, false), true);
  EXPECT_EQ(taps[0].lower, 0);
  EXPECT_EQ(taps[0].upper, 0);
  EXPECT_FLOAT_EQ(taps[0].lerp, 0.75f);
  EXPECT_EQ(taps[3].upper, 1);
  // align_corners: the corners map to the corners.
  auto nearest = resize::NearestTaps(5, 3, resize::Scale(3, 5, true), true, false);
  EXPECT_EQ(nearest, (std::vector<int64_t>{0, 1, 1, 2, 2}));
  auto half = resize::NearestTaps(3, 5, resize::Scale(5, 3, false), false, true);
  EXPECT_EQ(half, (std::vector<int64_t>{0, 2, 4}));
}

TEST(ResizeTest, HugeSizesAreRefusedBeforeAnyAllocation) {
  // An empty batch would allocate nothing: the size itself is refused, with the node named.
  const Tensor empty(DT_FLOAT, {0, 2, 2, 1});
  auto r = RunOp([&](const Scope& s) {
    return ops::AsOutput(ops::BuildOp(s.WithOpName("big"), "ResizeBilinear",
                                      {ops::Const(s, empty), ops::Input({2147483647, 2147483647})}));
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'big'"), std::string::npos);
  EXPECT_NE(r.status().message().find("tensor limit"), std::string::npos);
}

TEST(ConcatOffsetTest, OffsetsAlongTheAxisAndMismatchesRefused) {
  Tensor s0 = Tensor::Vector<int32_t>(DT_INT32, {2, 3, 5});
  Tensor s1 = Tensor::Vector<int32_t>(DT_INT32, {2, 4, 5});
  auto r = RunOp([&](const Scope& s) {
    return Output(ops::BuildOpWithList(s, "ConcatOffset",
                                            {{ops::Input(1)}, {ops::Const(s, s0), ops::Const(s, s1)}}),
                       1);
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->AsInt64Vector(), (std::vector<int64_t>{0, 3, 0}));
  Tensor bad = Tensor::Vector<int32_t>(DT_INT32, {2, 4, 6});
  auto e = RunOp([&](const Scope& s) {
    return Output(ops::BuildOpWithList(s, "ConcatOffset",
                                            {{ops::Input(1)}, {ops::Const(s, s0), ops::Const(s, bad)}}),
                       1);
  });
  EXPECT_NE(e.status().message().find("All dimensions except 1 must match"), std::string::npos);
}

TEST(VariableShapeTest, ShapeOfTheAssignedValueInTheAskedType) {
  using testing::ConstNode;
  using testing::MakeNode;
  GraphDef g;
  AttrMap handle = {{"dtype", AttrValue::Type(DT_FLOAT)},
                    {"shape", AttrValue::Shape(PartialShape({2, 3}))},
                    {"shared_name", AttrValue::String("v")}};
  g.node.push_back(MakeNode("v", "VarHandleOp", {}, handle));
  g.node.push_back(ConstNode("value", Tensor(DT_FLOAT, {2, 3})));
  g.node.push_back(MakeNode("assign", "AssignVariableOp", {"v", "value"},
                            {{"dtype", AttrValue::Type(DT_FLOAT)}}));
  g.node.push_back(MakeNode("shape", "VariableShape", {"v"},
                            {{"out_type", AttrValue::Type(DT_INT64)}}));
  auto s = Session::Create(g);
  ASSERT_TRUE(s.ok()) << s.status().message();
  auto early = (*s)->Run({}, {"shape"});
  ASSERT_FALSE(early.ok());
  EXPECT_NE(early.status().message().find("Could not find variable v"), std::string::npos);
  ASSERT_TRUE((*s)->Run({}, {}, {"assign"}).ok());
  auto shape = (*s)->Run({}, {"shape"});
  ASSERT_TRUE(shape.ok()) << shape.status().message();
  EXPECT_EQ((*shape)[0].dtype(), DT_INT64);
  EXPECT_EQ((*shape)[0].AsInt64Vector(), (std::vector<int64_t>{2, 3}));
}

TEST(MklFusedOpsTest, LayerNormOverTheLastDimension) {
  const Tensor x = Floats({2, 3}, {1, 2, 3, -1, 0, 5});
  const Tensor scale = Floats({3}, {1, 2, 3});
  const Tensor offset = Floats({3}, {0, 1, 0});
  auto r = RunOp([&](const Scope& s) {
    return ops::AsOutput(ops::BuildOp(s, "_MklLayerNorm",
                                      {ops::Const(s, x), ops::Const(s, scale), ops::Const(s, offset)},
                                      {{"epsilon", AttrValue::Float(0.001f)}}));
  });
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::vector<float> got = FloatsOf(*r);
  const double rows[2][3] = {{1, 2, 3}, {-1, 0, 5}};
  for (int i = 0; i < 2; ++i) {
    const double mean = (rows[i][0] + rows[i][1] + rows[i][2]) / 3;
    double var = 0;
    for (double v : rows[i]) var += (v - mean) * (v - mean) / 3;
    for (int c = 0; c < 3; ++c) {
      const double want = (rows[i][c] - mean) / std::sqrt(var + 0.001) * (c + 1) + (c == 1);
      EXPECT_NEAR(got[i * 3 + c], want, 1e-5) << i << "," << c;
    }
  }
  auto swish = RunOp([&](const Scope& s) {
    return ops::AsOutput(ops::BuildOp(s, "_MklSwish", {ops::Const(s, Floats({2}, {0, 2}))}));
  });
  ASSERT_TRUE(swish.ok()) << swish.status().message();
  EXPECT_NEAR(FloatsOf(*swish)[1], 2 / (1 + std::exp(-2.0)), 1e-6);
}

// _FusedMatMul's epilogues against the formula of each activation, and a fusion xlens does not
// run refused with its fused_ops named.
TEST(FusedOpsTest, MatMulEpiloguesAndRefusals) {
  const Tensor a = Floats({1, 2}, {1, -2});
  const Tensor b = Floats({2, 3}, {0.5, -1, 2, 1, 0.25, -0.5});
  const Tensor bias = Floats({3}, {0.1f, -0.2f, 0.3f});
  // a x b + bias = {-1.4, -1.7, 3.3}.
  const std::vector<double> pre = {1 * 0.5 - 2 * 1 + 0.1, 1 * -1 - 2 * 0.25 - 0.2,
                                   1 * 2 - 2 * -0.5 + 0.3};
  const std::vector<std::pair<std::string, std::function<double(double)>>> activations = {
      {"Relu", [](double x) { return x > 0 ? x : 0; }},
      {"Relu6", [](double x) { return std::min(std::max(x, 0.0), 6.0); }},
      {"Elu", [](double x) { return x < 0 ? std::exp(x) - 1 : x; }},
      {"LeakyRelu", [](double x) { return x > 0 ? x : 0.2 * x; }},
      {"Tanh", [](double x) { return std::tanh(x); }},
      {"Sigmoid", [](double x) { return 1 / (1 + std::exp(-x)); }},
      {"GeluExact", [](double x) { return 0.5 * x * std::erfc(-x / std::sqrt(2.0)); }},
      {"_FusedHardSwish", [](double x) { return x * std::min(std::max(x + 3, 0.0), 6.0) / 6; }},
      {"_MklSwish", [](double x) { return x / (1 + std::exp(-x)); }}};
  for (const auto& [name, f] : activations) {
    AttrListValue ops_list;
    ops_list.s = {"BiasAdd", name};
    auto r = RunOp([&](const Scope& s) {
      return ops::AsOutput(ops::BuildOpWithList(
          s, "_FusedMatMul", {{ops::Const(s, a)}, {ops::Const(s, b)}, {ops::Const(s, bias)}},
          {{"fused_ops", AttrValue::List(ops_list)}, {"num_args", AttrValue::Int(1)}}));
    });
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().message();
    for (int j = 0; j < 3; ++j) EXPECT_NEAR(FloatsOf(*r)[j], f(pre[j]), 1e-6) << name << " " << j;
  }
  AttrListValue bad;
  bad.s = {"Relu", "BiasAdd"};
  auto r = RunOp([&](const Scope& s) {
    return ops::AsOutput(ops::BuildOpWithList(
        s.WithOpName("odd"), "_FusedMatMul",
        {{ops::Const(s, a)}, {ops::Const(s, b)}, {ops::Const(s, bias)}},
        {{"fused_ops", AttrValue::List(bad)}, {"num_args", AttrValue::Int(1)}}));
  });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node 'odd'"), std::string::npos);
  EXPECT_NE(r.status().message().find("[Relu, BiasAdd]"), std::string::npos);
}

TEST(ModelGradientsTest, EinsumForms) {
  for (const Case& c : {EinsumCase("abc,cde->abde", {{2, 3, 4}, {4, 2, 2}}),
                        EinsumCase("bij,jk->b", {{2, 3, 4}, {4, 2}}),
                        EinsumCase("iij,jk->ki", {{3, 3, 2}, {2, 2}}),
                        EinsumCase("...ij,...jk->...ik", {{2, 1, 2, 3}, {3, 3, 2}}),
                        EinsumCase("...ij,jk->...ik", {{2, 2, 3}, {3, 2}}),
                        EinsumCase("i...j,...jk->...ik", {{2, 1, 3, 2}, {3, 2, 2}}),
                        EinsumCase("ii->", {{3, 3}}),
                        EinsumCase("abc->ca", {{2, 3, 2}}),
                        EinsumCase("ij->iij", {{2, 3}})}) {
    CheckGradient(c);
  }
  // Unknown static shapes: the broadcast ellipsis dimensions are found at run time.
  Case dynamic = EinsumCase("...ij,...jk->...ik", {{2, 1, 2, 3}, {3, 3, 2}});
  dynamic.args[0].declared = PartialShape({-1, -1, 2, 3});
  dynamic.args[1].declared = PartialShape::UnknownOfRank(3);
  CheckGradient(dynamic);
}

TEST(ModelGradientsTest, SpecialFunctionsAndResizes) {
  auto unary = [](const char* op, double lo, double hi) {
    return Case{op, {{{2, 3}, lo, hi}}, [op](const Scope& s, const std::vector<Output>& x) {
                  return ops::AsOutput(ops::BuildOp(s, op, {x[0]}));
                }};
  };
  for (const Case& c : {unary("Erf", -2, 2), unary("Erfc", -2, 2), unary("Erfinv", -0.9, 0.9),
                        unary("Ndtri", 0.05, 0.95), unary("Lgamma", 0.5, 4),
                        unary("Digamma", 0.5, 4)}) {
    CheckGradient(c);
  }
  for (bool training : {true, false}) {
    CheckGradient({std::string("FusedBatchNormV3 ") + (training ? "training" : "inference"),
                   {{{2, 2, 3, 2}}, {{2}, 0.5, 1.5}, {{2}}},
                   [training](const Scope& s, const std::vector<Output>& x) {
                     Tensor mean(DT_FLOAT, {training ? 0 : 2}), var(DT_FLOAT, {training ? 0 : 2});
                     for (int64_t i = 0; i < mean.num_elements(); ++i) {
                       mean.flat<float>()[i] = 0.25f * i;
                       var.flat<float>()[i] = 1.0f + i;
                     }
                     return ops::AsOutput(ops::BuildOp(
                         s, "FusedBatchNormV3",
                         {x[0], x[1], x[2], ops::Const(s, mean), ops::Const(s, var)},
                         {{"is_training", AttrValue::Bool(training)},
                          {"epsilon", AttrValue::Float(0.01f)}}));
                   },
                   DT_FLOAT});
  }
  for (bool half_pixel : {false, true}) {
    AttrMap attrs{{"half_pixel_centers", AttrValue::Bool(half_pixel)}};
    CheckGradient({"ResizeBilinear", {{{1, 3, 4, 2}}}, [attrs](const Scope& s, const std::vector<Output>& x) {
                     return ops::AsOutput(
                         ops::BuildOp(s, "ResizeBilinear", {x[0], ops::Input({5, 3})}, attrs));
                   }, DT_FLOAT});
  }
}

}  // namespace
}  // namespace xlens::graph
