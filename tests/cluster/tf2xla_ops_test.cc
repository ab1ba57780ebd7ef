// Differential tests of the op lowerings: each case builds a small function body (_Arg -> ops ->
// _Retval), runs it op by op with the graph front end's CPU kernels (checked against TensorFlow
// elsewhere), lowers it to HLO, runs the module on the reference evaluator, and compares.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <set>

#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/gradients.h"
#include "function_body_test_util.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::DataType;
using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

// Inputs in a range every op of the family accepts (positive for Log/Sqrt, small for Exp).
Tensor RandomTensor(DataType dtype, std::vector<int64_t> dims, std::mt19937& rng, double lo = -2,
                    double hi = 2) {
  Tensor t(dtype, std::move(dims));
  std::uniform_real_distribution<double> real(lo, hi);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if (graph::DataTypeIsFloating(dtype)) {
      t.SetFromDouble(i, real(rng));
    } else if (dtype == graph::DT_BOOL) {
      t.SetFromInt64(i, real(rng) > (lo + hi) / 2 ? 1 : 0);
    } else {
      t.SetFromInt64(i, static_cast<int64_t>(std::floor(real(rng))));
    }
  }
  return t;
}

// A function body under construction, with the values its arguments take.
class Body : public cluster_testing::FunctionBody {
 public:
  // Runs both ways and compares every output.
  void Check(double tolerance = 1e-5) {
    cluster_testing::BodyRuns runs;
    ASSERT_NO_FATAL_FAILURE(cluster_testing::RunBody(*this, 1e-5, &runs));
    ASSERT_EQ(runs.compiled.output_dtypes.size(), runs.expected.size());
    for (size_t i = 0; i < runs.evaluated.size(); ++i) {
      const Tensor& want = runs.expected[i];
      auto got = Tensor::FromLiteral(std::move(runs.evaluated[i]));
      ASSERT_TRUE(got.ok()) << got.status().message();
      EXPECT_EQ(got->dtype(), want.dtype()) << "output " << i;
      EXPECT_EQ(runs.compiled.output_dtypes[i], want.dtype()) << "output " << i;
      ASSERT_EQ(got->dims(), want.dims()) << "output " << i;
      EXPECT_EQ(runs.compiled.output_shapes[i], want.dims()) << "output " << i;
      for (int64_t k = 0; k < want.num_elements(); ++k) {
        const double w = want.GetAsDouble(k), g = got->GetAsDouble(k);
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << "output " << i << " element " << k;
          continue;
        }
        if (std::isinf(w)) {
          EXPECT_EQ(g, w) << "output " << i << " element " << k;
          continue;
        }
        EXPECT_NEAR(g, w, tolerance * (1 + std::abs(w)))
            << "output " << i << " element " << k << "\n"
            << runs.hlo;
      }
    }
  }
};

using UnaryBuilder = std::function<Output(const Scope&, Output)>;
using BinaryBuilder = std::function<Output(const Scope&, Output, Output)>;

struct UnaryCase {
  std::string name;
  UnaryBuilder build;
  double lo = -2, hi = 2;
};

TEST(Tf2XlaOpsTest, UnaryOpsMatchTheKernels) {
  const std::vector<UnaryCase> cases = {
      {"Abs", [](const Scope& s, Output x) { return ops::Abs(s, x); }},
      {"Neg", [](const Scope& s, Output x) { return ops::Neg(s, x); }},
      {"Exp", [](const Scope& s, Output x) { return ops::Exp(s, x); }},
      {"Log", [](const Scope& s, Output x) { return ops::Log(s, x); }, 0.1, 3},
      {"Sqrt", [](const Scope& s, Output x) { return ops::Sqrt(s, x); }, 0.1, 3},
      {"Rsqrt", [](const Scope& s, Output x) { return ops::Rsqrt(s, x); }, 0.1, 3},
      {"Sin", [](const Scope& s, Output x) { return ops::Sin(s, x); }},
      {"Cos", [](const Scope& s, Output x) { return ops::Cos(s, x); }},
      {"Tanh", [](const Scope& s, Output x) { return ops::Tanh(s, x); }},
      {"Sigmoid", [](const Scope& s, Output x) { return ops::Sigmoid(s, x); }},
      {"Relu", [](const Scope& s, Output x) { return ops::Relu(s, x); }},
      {"Square", [](const Scope& s, Output x) { return ops::Square(s, x); }},
      {"Sign", [](const Scope& s, Output x) { return ops::Sign(s, x); }},
      {"Reciprocal", [](const Scope& s, Output x) { return ops::Reciprocal(s, x); }, 0.5, 3},
      {"Floor", [](const Scope& s, Output x) { return ops::Floor(s, x); }},
      {"Identity", [](const Scope& s, Output x) { return ops::Identity(s, x); }},
      {"StopGradient", [](const Scope& s, Output x) { return ops::StopGradient(s, x); }},
      {"ZerosLike", [](const Scope& s, Output x) { return ops::ZerosLike(s, x); }},
      {"OnesLike", [](const Scope& s, Output x) { return ops::OnesLike(s, x); }},
      {"Softmax", [](const Scope& s, Output x) { return ops::Softmax(s, x); }},
      {"LogSoftmax", [](const Scope& s, Output x) { return ops::LogSoftmax(s, x); }},
      {"CastToInt", [](const Scope& s, Output x) { return ops::Cast(s, x, graph::DT_INT32); }},
      {"CastToBool", [](const Scope& s, Output x) { return ops::Cast(s, x, graph::DT_BOOL); }},
      {"CastToDouble",
       [](const Scope& s, Output x) { return ops::Cast(s, x, graph::DT_DOUBLE); }},
  };
  for (DataType dtype : {graph::DT_FLOAT, graph::DT_DOUBLE}) {
    for (const auto& c : cases) {
      for (const std::vector<int64_t>& dims :
           std::vector<std::vector<int64_t>>{{3, 4}, {2, 3, 5}}) {
        SCOPED_TRACE(c.name + " " + graph::DataTypeName(dtype));
        std::mt19937 rng(7);
        Body body;
        Output x = body.Arg(RandomTensor(dtype, dims, rng, c.lo, c.hi));
        body.Ret(c.build(body.root.WithOpName(c.name), x));
        body.Check(dtype == graph::DT_DOUBLE ? 1e-12 : 2e-6);
      }
    }
  }
}

TEST(Tf2XlaOpsTest, IntegerUnaryOps) {
  std::mt19937 rng(3);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_INT32, {4, 5}, rng, -50, 50));
  body.Ret(ops::Abs(body.root, x));
  body.Ret(ops::Neg(body.root, x));
  body.Ret(ops::Square(body.root, x));
  body.Ret(ops::Sign(body.root, x));
  body.Ret(ops::Cast(body.root, x, graph::DT_FLOAT));
  body.Ret(ops::Cast(body.root, x, graph::DT_BOOL));
  body.Check(0);
}

TEST(Tf2XlaOpsTest, UnaryOpsCompositionAppliesTheChainInOrder) {
  std::mt19937 rng(5);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {6}, rng, 0.5, 2));
  graph::AttrListValue names;
  names.s = {"Sqrt", "Exp", "Neg", "Tanh"};
  graph::Node* n = body.root.WithOpName("Sqrt/unary_ops_composition")
                       .AddNode("_UnaryOpsComposition", {x},
                                {{"T", AttrValue::Type(graph::DT_FLOAT)},
                                 {"op_names", AttrValue::List(names)}});
  body.Ret(Output(n, 0));
  body.Check();
}

struct BinaryCase {
  std::string name;
  BinaryBuilder build;
  bool positive_rhs = false;
};

TEST(Tf2XlaOpsTest, BinaryOpsBroadcastAsTensorFlow) {
  const std::vector<BinaryCase> cases = {
      {"AddV2", [](const Scope& s, Output x, Output y) { return ops::Add(s, x, y); }},
      {"Sub", [](const Scope& s, Output x, Output y) { return ops::Sub(s, x, y); }},
      {"Mul", [](const Scope& s, Output x, Output y) { return ops::Mul(s, x, y); }},
      {"RealDiv", [](const Scope& s, Output x, Output y) { return ops::RealDiv(s, x, y); }, true},
      {"DivNoNan", [](const Scope& s, Output x, Output y) { return ops::DivNoNan(s, x, y); }},
      {"Maximum", [](const Scope& s, Output x, Output y) { return ops::Maximum(s, x, y); }},
      {"Minimum", [](const Scope& s, Output x, Output y) { return ops::Minimum(s, x, y); }},
      {"Pow", [](const Scope& s, Output x, Output y) { return ops::Pow(s, x, y); }},
      {"SquaredDifference",
       [](const Scope& s, Output x, Output y) { return ops::SquaredDifference(s, x, y); }},
      {"FloorDiv", [](const Scope& s, Output x, Output y) { return ops::FloorDiv(s, x, y); },
       true},
      {"FloorMod", [](const Scope& s, Output x, Output y) { return ops::FloorMod(s, x, y); },
       true},
      {"Equal", [](const Scope& s, Output x, Output y) { return ops::Equal(s, x, y); }},
      {"NotEqual", [](const Scope& s, Output x, Output y) { return ops::NotEqual(s, x, y); }},
      {"Less", [](const Scope& s, Output x, Output y) { return ops::Less(s, x, y); }},
      {"LessEqual", [](const Scope& s, Output x, Output y) { return ops::LessEqual(s, x, y); }},
      {"Greater", [](const Scope& s, Output x, Output y) { return ops::Greater(s, x, y); }},
      {"GreaterEqual",
       [](const Scope& s, Output x, Output y) { return ops::GreaterEqual(s, x, y); }},
  };
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> shapes = {
      {{2, 3}, {2, 3}}, {{2, 3}, {3}}, {{4, 1}, {1, 5}}, {{}, {2, 2}}, {{3, 1, 2}, {4, 1}},
  };
  for (DataType dtype : {graph::DT_FLOAT, graph::DT_INT32, graph::DT_DOUBLE, graph::DT_HALF,
                         graph::DT_INT64}) {
    for (const auto& c : cases) {
      const bool is_int = graph::DataTypeIsInteger(dtype);
      if (c.name == "Pow" && is_int) continue;       // negative exponents
      if (c.name == "DivNoNan" && is_int) continue;  // float only in TF
      for (const auto& [xs, ys] : shapes) {
        SCOPED_TRACE(c.name + " " + graph::DataTypeName(dtype) + " [" +
                     std::to_string(xs.size()) + "] vs [" + std::to_string(ys.size()) + "]");
        std::mt19937 rng(11);
        Body body;
        const bool is_pow = c.name == "Pow";
        Output x = body.Arg(RandomTensor(dtype, xs, rng, is_pow ? 0.5 : -9, is_pow ? 2 : 9));
        Tensor yv = RandomTensor(dtype, ys, rng, c.positive_rhs ? 1 : -3, 4);
        if (c.name == "DivNoNan") yv.SetFromDouble(0, 0);  // the case it exists for
        Output y = body.Arg(yv);
        body.Ret(c.build(body.root.WithOpName(c.name), x, y));
        body.Check(dtype == graph::DT_HALF ? 2e-3 : 2e-6);
      }
    }
  }
}

TEST(Tf2XlaOpsTest, FloorDivAndFloorModWithNegativeOperands) {
  for (DataType dtype : {graph::DT_INT32, graph::DT_FLOAT}) {
    Body body;
    Tensor x(dtype, {6}), y(dtype, {6});
    const std::vector<int> xs = {7, -7, 7, -7, 6, -6}, ys = {2, 2, -2, -2, 3, -4};
    for (int i = 0; i < 6; ++i) {
      x.SetFromInt64(i, xs[i]);
      y.SetFromInt64(i, ys[i]);
    }
    Output a = body.Arg(x), b = body.Arg(y);
    body.Ret(ops::FloorDiv(body.root, a, b));
    body.Ret(ops::FloorMod(body.root, a, b));
    body.Check(0);
  }
}

TEST(Tf2XlaOpsTest, LogicalAndSelect) {
  std::mt19937 rng(2);
  Body body;
  Output c = body.Arg(RandomTensor(graph::DT_BOOL, {3, 4}, rng));
  Output t = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
  Output e = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
  Output row = body.Arg(RandomTensor(graph::DT_BOOL, {3}, rng));
  Output col = body.Arg(RandomTensor(graph::DT_FLOAT, {4}, rng));
  body.Ret(ops::Select(body.root, c, t, e));
  body.Ret(ops::Select(body.root, row, t, e));
  body.Ret(ops::SelectV2(body.root, c, col, e));
  body.Ret(ops::AsOutput(graph::ops::BuildOp(body.root, "LogicalAnd", {c, ops::Less(body.root, t, e)})));
  body.Ret(ops::AsOutput(graph::ops::BuildOp(body.root, "LogicalNot", {c})));
  body.Check(0);
}

TEST(Tf2XlaOpsTest, ReductionsOverConstantAxes) {
  struct Reduce {
    std::string name;
    std::function<Output(const Scope&, Output, graph::ops::Input, bool)> build;
  };
  const std::vector<Reduce> reductions = {
      {"Sum", [](const Scope& s, Output x, graph::ops::Input a, bool k) { return ops::Sum(s, x, a, k); }},
      {"Mean", [](const Scope& s, Output x, graph::ops::Input a, bool k) { return ops::Mean(s, x, a, k); }},
      {"Max", [](const Scope& s, Output x, graph::ops::Input a, bool k) { return ops::Max(s, x, a, k); }},
      {"Min", [](const Scope& s, Output x, graph::ops::Input a, bool k) { return ops::Min(s, x, a, k); }},
      {"Prod", [](const Scope& s, Output x, graph::ops::Input a, bool k) { return ops::Prod(s, x, a, k); }},
  };
  const std::vector<std::vector<int32_t>> axes = {{0}, {1}, {-1}, {0, 2}, {}, {0, 1, 2}};
  for (DataType dtype : {graph::DT_FLOAT, graph::DT_INT32}) {
    for (const auto& r : reductions) {
      for (const auto& axis : axes) {
        for (bool keep : {false, true}) {
          SCOPED_TRACE(r.name + " " + graph::DataTypeName(dtype) + " axes " +
                       std::to_string(axis.size()) + (keep ? " keep" : ""));
          std::mt19937 rng(13);
          Body body;
          Output x = body.Arg(RandomTensor(dtype, {2, 3, 4}, rng, -3, 3));
          body.Ret(r.build(body.root, x, ops::Const(body.root, axis), keep));
          body.Check(2e-6);
        }
      }
    }
  }
}

TEST(Tf2XlaOpsTest, BooleanReductionsAndArgMax) {
  std::mt19937 rng(17);
  Body body;
  Output b = body.Arg(RandomTensor(graph::DT_BOOL, {3, 5}, rng));
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 5}, rng));
  Output i = body.Arg(RandomTensor(graph::DT_INT32, {3, 5}, rng, -2, 2));  // ties
  body.Ret(ops::AsOutput(graph::ops::BuildOp(body.root, "All", {b, graph::ops::Input(1)})));
  body.Ret(ops::AsOutput(graph::ops::BuildOp(body.root, "Any", {b, graph::ops::Input(0)})));
  body.Ret(ops::ArgMax(body.root, x, 1));
  body.Ret(ops::ArgMax(body.root, x, 0, graph::DT_INT32));
  body.Ret(ops::ArgMax(body.root, i, 1));
  body.Check(0);
}

TEST(Tf2XlaOpsTest, ShapeOpsAndReshapes) {
  std::mt19937 rng(19);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {2, 3, 4}, rng));
  Output v = body.Arg(RandomTensor(graph::DT_FLOAT, {1, 3, 1}, rng));
  body.Ret(ops::Shape(body.root, x));
  body.Ret(ops::Size(body.root, x));
  body.Ret(ops::Rank(body.root, x));
  body.Ret(ops::Reshape(body.root, x, {4, -1}));
  body.Ret(ops::Reshape(body.root, x, {24}));
  body.Ret(ops::ExpandDims(body.root, x, -1));
  body.Ret(ops::ExpandDims(body.root, x, 0));
  body.Ret(ops::Squeeze(body.root, v));
  body.Ret(ops::Squeeze(body.root, v, {2}));
  body.Ret(ops::Fill(body.root, ops::Shape(body.root, x), ops::Const(body.root, 1.5f)));
  body.Ret(ops::Fill(body.root, {2, 2}, ops::Sum(body.root, v, {0, 1, 2})));
  body.Ret(ops::Tile(body.root, v, {2, 1, 3}));
  body.Ret(ops::Transpose(body.root, x, {2, 0, 1}));
  body.Check(0);
}

TEST(Tf2XlaOpsTest, DataMovement) {
  std::mt19937 rng(23);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {4, 3}, rng));
  Output y = body.Arg(RandomTensor(graph::DT_FLOAT, {4, 3}, rng));
  Tensor idx = Tensor::Vector<int32_t>(graph::DT_INT32, {3, 0, 2, 2});
  Output indices = body.Arg(idx);
  body.Ret(ops::Pack(body.root, {x, y}, 0));
  body.Ret(ops::Pack(body.root, {x, y}, 2));
  body.Ret(ops::ConcatV2(body.root, {x, y}, 1));
  body.Ret(ops::ConcatV2(body.root, {x, y, x}, -2));
  body.Ret(ops::GatherV2(body.root, x, indices, 0));
  body.Ret(ops::GatherV2(body.root, x, Output(ops::Const(body.root, std::vector<int32_t>{2, 1})), 1));
  body.Ret(ops::Slice(body.root, x, {1, 0}, {2, -1}));
  body.Ret(ops::StridedSlice(body.root, x, {1, 0}, {4, 3}, {2, 1}));
  body.Ret(ops::StridedSlice(body.root, x, {0, 0}, {1, 3}, {1, 1},
                             graph::ops::StridedSliceAttrs{0, 0, 0, 0, 1}));
  body.Ret(ops::StridedSlice(body.root, x, {-1, 0}, {0, 3}, {-1, 1},
                             graph::ops::StridedSliceAttrs{0, 1, 0, 0, 0}));
  body.Ret(ops::Pad(body.root, x, ops::Const(body.root, Tensor([] {
                                      Tensor p(graph::DT_INT32, {2, 2});
                                      const int v[] = {1, 0, 2, 1};
                                      for (int i = 0; i < 4; ++i) p.SetFromInt64(i, v[i]);
                                      return p;
                                    }()))));
  body.Ret(ops::Range(body.root, 0, 10, 3));
  std::vector<Output> parts = ops::Unpack(body.root, x, 3, 1);
  for (const Output& p : parts) body.Ret(p);
  body.Check(0);
}

TEST(Tf2XlaOpsTest, MatMulAndBiasAdd) {
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      std::mt19937 rng(29);
      Body body;
      Output a = body.Arg(RandomTensor(graph::DT_FLOAT, ta ? std::vector<int64_t>{5, 3}
                                                           : std::vector<int64_t>{3, 5},
                                       rng));
      Output b = body.Arg(RandomTensor(graph::DT_FLOAT, tb ? std::vector<int64_t>{4, 5}
                                                           : std::vector<int64_t>{5, 4},
                                       rng));
      Output bias = body.Arg(RandomTensor(graph::DT_FLOAT, {4}, rng));
      Output mm = ops::MatMul(body.root, a, b, graph::ops::MatMulAttrs{}.TransposeA(ta).TransposeB(tb));
      body.Ret(mm);
      body.Ret(ops::BiasAdd(body.root, mm, bias));
      body.Check(1e-5);
    }
  }
  std::mt19937 rng(31);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {2, 3, 4}, rng));
  Output y = body.Arg(RandomTensor(graph::DT_FLOAT, {4, 5}, rng));
  body.Ret(ops::BatchMatMulV2(body.root, x, y));
  body.Ret(ops::BiasAddGrad(body.root, x));
  body.Check(1e-5);
}

TEST(Tf2XlaOpsTest, CrossEntropyGivesLossAndBackprop) {
  std::mt19937 rng(37);
  Body body;
  Output logits = body.Arg(RandomTensor(graph::DT_FLOAT, {6, 10}, rng, -5, 5));
  Tensor labels(graph::DT_INT64, {6});
  for (int i = 0; i < 6; ++i) labels.SetFromInt64(i, (i * 7) % 10);
  Output l = body.Arg(labels);
  auto sparse = ops::SparseSoftmaxCrossEntropyWithLogitsOp(body.root, logits, l);
  body.Ret(sparse.loss);
  body.Ret(sparse.backprop);
  Output dense_labels = ops::Softmax(body.root, body.Arg(RandomTensor(graph::DT_FLOAT, {6, 10}, rng)));
  auto dense = ops::SoftmaxCrossEntropyWithLogitsOp(body.root, logits, dense_labels);
  body.Ret(dense.loss);
  body.Ret(dense.backprop);
  body.Check(1e-5);
}

TEST(Tf2XlaOpsTest, AddNAndActivationGradients) {
  std::mt19937 rng(41);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng, 0.2, 2));
  Output dy = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
  body.Ret(ops::AddN(body.root, {x, dy, x}));
  body.Ret(ops::TanhGrad(body.root, ops::Tanh(body.root, x), dy));
  body.Ret(ops::SigmoidGrad(body.root, ops::Sigmoid(body.root, x), dy));
  body.Ret(ops::ReluGrad(body.root, dy, ops::Sub(body.root, x, ops::Const(body.root, 1.0f))));
  body.Ret(ops::SqrtGrad(body.root, ops::Sqrt(body.root, x), dy));
  body.Ret(ops::RsqrtGrad(body.root, ops::Rsqrt(body.root, x), dy));
  body.Check(1e-5);
}

// A gradient graph built as Python builds it: Shape -> BroadcastGradientArgs -> Sum(axes) ->
// Reshape(shape) chains that the lowering must resolve to static HLO.
TEST(Tf2XlaOpsTest, GradientGraphsLowerToStaticHlo) {
  std::mt19937 rng(43);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {5, 3}, rng));
  Output w = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 2}, rng));
  Output b = body.Arg(RandomTensor(graph::DT_FLOAT, {2}, rng));
  Output y = body.Arg(RandomTensor(graph::DT_FLOAT, {5, 2}, rng));
  Output pred = ops::Add(body.root, ops::MatMul(body.root, x, w), b);
  Output loss = ops::Mean(body.root, ops::Square(body.root, ops::Sub(body.root, pred, y)), {0, 1});
  std::vector<Output> grads;
  ASSERT_TRUE(graph::AddSymbolicGradients(body.root, {loss}, {w, b}, {}, &grads).ok());
  body.Ret(loss);
  body.Ret(grads[0]);
  body.Ret(grads[1]);
  body.Check(1e-5);
  auto compiled = body.Compile();
  ASSERT_TRUE(compiled.ok());
  bool saw_bga = false;
  for (graph::Node* n : body.root.graph()->op_nodes()) saw_bga |= n->type_string() == "BroadcastGradientArgs";
  EXPECT_TRUE(saw_bga) << "the gradient graph should exercise BroadcastGradientArgs";
}

TEST(Tf2XlaOpsTest, ConstantArgumentsFoldIntoTheModule) {
  std::mt19937 rng(47);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {2, 6}, rng));
  Output shape = body.ConstArg(Tensor::Vector<int32_t>(graph::DT_INT32, {3, 4}));
  Output scale = body.ConstArg(Tensor::Scalar<float>(graph::DT_FLOAT, 2.5f));
  body.Ret(ops::Mul(body.root, ops::Reshape(body.root, x, shape), scale));
  body.Ret(ops::Add(body.root, scale, scale));  // all-constant: folded, still an output
  body.Check(0);
  auto compiled = body.Compile();
  ASSERT_TRUE(compiled.ok());
  EXPECT_EQ(compiled->input_mapping, (std::vector<int>{0}));
  EXPECT_EQ(compiled->module->entry_computation()->num_parameters(), 1);
}

TEST(Tf2XlaOpsTest, EveryInstructionCarriesTheNodesMetadata) {
  std::mt19937 rng(53);
  Body body;
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {4}, rng));
  Output y = body.Arg(RandomTensor(graph::DT_FLOAT, {2, 4}, rng));
  body.Ret(ops::Mul(body.root.WithOpName("outer/mul"), x, y));
  auto compiled = body.Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const HloComputation* entry = compiled->module->entry_computation();
  int multiplies = 0;
  for (const HloInstruction* instr : entry->instructions()) {
    if (instr->opcode() == HloOpcode::kParameter) {
      EXPECT_EQ(instr->metadata.op_name, "XLA_Args");
      continue;
    }
    EXPECT_EQ(instr->metadata.op_type, "Mul") << instr->ToString();
    EXPECT_EQ(instr->metadata.op_name, "outer/mul");
    EXPECT_EQ(instr->metadata.source_file, "dummy_file_name");
    EXPECT_EQ(instr->metadata.source_line, 10);
    multiplies += instr->opcode() == HloOpcode::kMultiply;
  }
  EXPECT_EQ(multiplies, 1);
  EXPECT_EQ(entry->root_instruction()->opcode(), HloOpcode::kMultiply);
}

TEST(Tf2XlaOpsTest, RegistryCoversTheCorpusOps) {
  for (const char* op :
       {"AddV2", "BroadcastGradientArgs", "Cast", "Const", "Cos", "DivNoNan", "Exp", "ExpandDims",
        "Fill", "GatherV2", "Identity", "MatMul", "Mean", "Mul", "Prod", "ReadVariableOp",
        "RealDiv", "Reshape", "ResourceApplyGradientDescent", "Shape", "Sin", "Sub", "Sum", "Tanh",
        "Tile", "Square", "SparseSoftmaxCrossEntropyWithLogits", "_UnaryOpsComposition",
        "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp", "ArgMax", "Equal",
        "Softmax", "LogSoftmax", "BiasAdd", "Relu", "Sigmoid", "Neg", "Maximum", "Minimum",
        "Sqrt", "Rsqrt", "Log", "Pow", "SquaredDifference", "Select", "SelectV2", "ZerosLike",
        "OnesLike", "Pack", "ConcatV2", "Transpose", "Squeeze", "StopGradient", "Snapshot", "Max",
        "Min", "All", "Any", "Range", "FloorMod", "FloorDiv", "AddN"}) {
    EXPECT_NE(XlaOpRegistry::Global().Find(op), nullptr) << op;
  }
}

// Output size of a conv/pool dimension as TensorFlow computes it.
int64_t WindowedSize(int64_t in, int64_t k, int64_t stride, const std::string& padding) {
  return padding == "SAME" ? (in + stride - 1) / stride : (in - k + stride) / stride;
}

TEST(Tf2XlaOpsTest, PoolingMatchesTheKernels) {
  for (const std::string padding : {"VALID", "SAME"}) {
    for (const std::vector<int64_t>& k : std::vector<std::vector<int64_t>>{{1, 2, 2, 1}, {1, 3, 2, 1}}) {
      for (const std::vector<int64_t>& st : std::vector<std::vector<int64_t>>{{1, 2, 2, 1}, {1, 1, 2, 1}}) {
        SCOPED_TRACE(padding + " k" + std::to_string(k[1]) + " s" + std::to_string(st[1]));
        std::mt19937 rng(59);
        Body body;
        Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {2, 5, 6, 3}, rng));
        ops::PoolAttrs attrs;
        attrs.ksize = k;
        attrs.strides = st;
        attrs.padding = padding;
        Output pooled = ops::MaxPool(body.root, x, attrs);
        const int64_t oh = WindowedSize(5, k[1], st[1], padding);
        const int64_t ow = WindowedSize(6, k[2], st[2], padding);
        Output grad = body.Arg(RandomTensor(graph::DT_FLOAT, {2, oh, ow, 3}, rng));
        body.Ret(pooled);
        body.Ret(ops::MaxPoolGrad(body.root, x, pooled, grad, attrs));
        body.Ret(ops::AsOutput(ops::BuildOp(body.root, "AvgPool", {x},
                                            {{"ksize", AttrValue::List([&] {
                                                graph::AttrListValue l;
                                                l.i = k;
                                                return l;
                                              }())},
                                             {"strides", AttrValue::List([&] {
                                                graph::AttrListValue l;
                                                l.i = st;
                                                return l;
                                              }())},
                                             {"padding", AttrValue::String(padding)}})));
        body.Ret(ops::AsOutput(ops::BuildOp(
            body.root, "AvgPoolGrad",
            {ops::Const(body.root, std::vector<int32_t>{2, 5, 6, 3}), grad},
            {{"ksize", AttrValue::List([&] {
                graph::AttrListValue l;
                l.i = k;
                return l;
              }())},
             {"strides", AttrValue::List([&] {
                graph::AttrListValue l;
                l.i = st;
                return l;
              }())},
             {"padding", AttrValue::String(padding)}})));
        body.Check(1e-5);
      }
    }
  }
}

TEST(Tf2XlaOpsTest, ConvolutionsAndTheirGradientsMatchTheKernels) {
  struct ConvCase {
    std::string padding;
    int64_t stride, dilation;
  };
  for (const ConvCase& c : std::vector<ConvCase>{{"VALID", 1, 1}, {"SAME", 1, 1}, {"VALID", 2, 1},
                                                 {"SAME", 2, 1}, {"SAME", 1, 2}, {"VALID", 3, 1}}) {
    SCOPED_TRACE(c.padding + " stride " + std::to_string(c.stride) + " dilation " +
                 std::to_string(c.dilation));
    std::mt19937 rng(61);
    Body body;
    const std::vector<int64_t> in = {2, 7, 6, 3}, f = {3, 2, 3, 4};
    Output x = body.Arg(RandomTensor(graph::DT_FLOAT, in, rng));
    Output w = body.Arg(RandomTensor(graph::DT_FLOAT, f, rng));
    ops::ConvAttrs attrs;
    attrs.strides = {1, c.stride, c.stride, 1};
    attrs.dilations = {1, c.dilation, c.dilation, 1};
    attrs.padding = c.padding;
    auto out_size = [&](int64_t i, int64_t k) {
      return WindowedSize(i, (k - 1) * c.dilation + 1, c.stride, c.padding);
    };
    const std::vector<int64_t> out = {2, out_size(7, 3), out_size(6, 2), 4};
    Output dy = body.Arg(RandomTensor(graph::DT_FLOAT, out, rng));
    body.Ret(ops::Conv2D(body.root, x, w, attrs));
    body.Ret(ops::Conv2DBackpropInput(body.root, ops::Const(body.root, std::vector<int32_t>{2, 7, 6, 3}),
                                      w, dy, attrs));
    body.Ret(ops::Conv2DBackpropFilter(body.root, x,
                                       ops::Const(body.root, std::vector<int32_t>{3, 2, 3, 4}), dy,
                                       attrs));
    body.Check(1e-5);
  }
}

TEST(Tf2XlaOpsTest, CumsumInEveryDirection) {
  for (bool exclusive : {false, true}) {
    for (bool reverse : {false, true}) {
      for (int32_t axis : {0, 1, -1}) {
        SCOPED_TRACE(std::to_string(exclusive) + std::to_string(reverse) + std::to_string(axis));
        std::mt19937 rng(67);
        Body body;
        Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
        body.Ret(ops::AsOutput(ops::BuildOp(body.root, "Cumsum", {x, axis},
                                            {{"exclusive", AttrValue::Bool(exclusive)},
                                             {"reverse", AttrValue::Bool(reverse)}})));
        body.Check(1e-6);
      }
    }
  }
}

TEST(Tf2XlaOpsTest, StridedSliceAndItsGradient) {
  struct SliceCase {
    std::vector<int32_t> begin, end, strides;
    ops::StridedSliceAttrs attrs;  // begin, end, ellipsis, new_axis, shrink masks
  };
  const std::vector<SliceCase> cases = {
      {{1, 0}, {4, 3}, {2, 1}, {}},                      // x[1:4:2, 0:3]
      {{0, 1}, {1, 3}, {1, 1}, {0, 0, 0, 0, 1}},         // x[0, 1:3]
      {{-1, 0}, {0, 3}, {-1, 1}, {0, 1, 0, 0, 0}},       // x[::-1] from the last row
      {{3, 2}, {0, 0}, {-2, -1}, {}},                    // x[3:0:-2, 2:0:-1]
      {{0, 0}, {0, 0}, {1, 2}, {3, 3, 0, 0, 0}},         // x[:, ::2]
      {{0, 1}, {0, 2}, {1, 1}, {0, 0, 1, 0, 2}},         // x[..., 1]
      {{0, 0, 1}, {0, 0, 3}, {1, 1, 1}, {1, 1, 0, 2, 0}},  // x[:, None, 1:3]
      {{0, 0, 0}, {0, 0, 0}, {1, 1, -1}, {5, 5, 2, 1, 0}},  // x[None, ..., ::-1]
      {{2}, {4}, {1}, {}},                               // x[2:4] (the rest implied)
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    std::mt19937 rng(71);
    Body body;
    Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {5, 3}, rng));
    const SliceCase& c = cases[i];
    Output sliced = ops::StridedSlice(body.root, x, ops::Const(body.root, c.begin),
                                      ops::Const(body.root, c.end),
                                      ops::Const(body.root, c.strides), c.attrs);
    Output dy = ops::Mul(body.root, sliced, ops::Const(body.root, 3.0f));
    body.Ret(sliced);
    body.Ret(ops::StridedSliceGrad(body.root, ops::Const(body.root, std::vector<int32_t>{5, 3}),
                                   ops::Const(body.root, c.begin), ops::Const(body.root, c.end),
                                   ops::Const(body.root, c.strides), dy, c.attrs));
    body.Check(0);
  }
}

// x[i] and x[:, i] with i an argument (a loop's index): begin and end known only at run time,
// the slice a dynamic-slice and its gradient a dynamic-update-slice, negative i from the end; a
// range whose size would depend on them is refused with the node.
TEST(Tf2XlaOpsTest, StridedSliceAtARunTimeIndex) {
  for (int32_t at : {3, -2}) {
    SCOPED_TRACE(at);
    std::mt19937 rng(79);
    Body body;
    Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {5, 3}, rng));
    Output i = body.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, at));
    Output row_begin = ops::AsOutput(ops::BuildOpWithList(body.root, "Pack", {{i}}));
    Output row_end = ops::AsOutput(
        ops::BuildOpWithList(body.root, "Pack", {{ops::Add(body.root, i, ops::Input(1))}}));
    Output row = ops::StridedSlice(body.root, x, row_begin, row_end, ops::Input({1}),
                                   ops::StridedSliceAttrs{0, 0, 0, 0, 1});
    Output j = ops::Sub(body.root, i, ops::Input(1));  // 2 and -3 of the 3 columns
    Output col_begin =
        ops::AsOutput(ops::BuildOpWithList(body.root, "Pack", {{ops::Input(0), j}}));
    Output col = ops::StridedSlice(body.root, x, col_begin, col_begin, ops::Input({1, 1}),
                                   ops::StridedSliceAttrs{1, 1, 0, 0, 2});
    body.Ret(row);
    body.Ret(col);
    body.Ret(ops::StridedSliceGrad(body.root, ops::Const(body.root, std::vector<int32_t>{5, 3}),
                                   row_begin, row_end, ops::Input({1}),
                                   ops::Mul(body.root, row, ops::Const(body.root, 3.0f)),
                                   ops::StridedSliceAttrs{0, 0, 0, 0, 1}));
    body.Check(0);
  }
  std::mt19937 rng(83);
  Body range;
  Output x = range.Arg(RandomTensor(graph::DT_FLOAT, {5, 3}, rng));
  Output i = range.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 1));
  Output begin = ops::AsOutput(ops::BuildOpWithList(range.root, "Pack", {{i}}));
  range.Ret(ops::StridedSlice(range.root, x, begin, ops::Input({4}), ops::Input({1})));
  auto refused = range.Compile();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("whose size would depend on it"), std::string::npos)
      << refused.status().message();
}

TEST(Tf2XlaOpsTest, SegmentSumsTopKAndActivations) {
  std::mt19937 rng(73);
  Body body;
  Output data = body.Arg(RandomTensor(graph::DT_FLOAT, {6, 3}, rng));
  Output ids = body.Arg(Tensor::Vector<int32_t>(graph::DT_INT32, {2, 0, 2, 3, 0, 1}));
  body.Ret(ops::UnsortedSegmentSum(body.root, data, ids, 5));
  Output predictions = body.Arg(RandomTensor(graph::DT_FLOAT, {4, 6}, rng));
  Output targets = body.Arg(Tensor::Vector<int32_t>(graph::DT_INT32, {0, 5, 3, 2}));
  for (int32_t k : {1, 2, 4}) {
    body.Ret(ops::AsOutput(ops::BuildOp(body.root, "InTopKV2", {predictions, targets, k})));
  }
  Output x = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
  Output g = body.Arg(RandomTensor(graph::DT_FLOAT, {3, 4}, rng));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "LeakyRelu", {x}, {{"alpha", AttrValue::Float(0.3f)}})));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "LeakyReluGrad", {g, x}, {{"alpha", AttrValue::Float(0.3f)}})));
  Output selu = ops::AsOutput(ops::BuildOp(body.root, "Selu", {x}));
  body.Ret(selu);
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "SeluGrad", {g, selu})));
  Output elu = ops::AsOutput(ops::BuildOp(body.root, "Elu", {x}));
  body.Ret(elu);
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "EluGrad", {g, elu})));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "Softplus", {x})));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "SoftplusGrad", {g, x})));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "Relu6", {ops::Mul(body.root, x, ops::Const(body.root, 5.0f))})));
  body.Ret(ops::AsOutput(ops::BuildOp(body.root, "CheckNumerics", {x}, {{"message", AttrValue::String("x")}})));
  body.Check(1e-5);
}

// Every op the registry says XLA compiles has a lowering, but for those left out on purpose.
TEST(Tf2XlaOpsTest, EveryCompilableOpHasALowering) {
  const std::set<std::string> left_out = {
      // The compiler handles these itself.
      "_Arg", "_Retval",
      // Ref-variable updates: TensorFlow never clusters them ("Identity with unsafe cast").
      "ApplyAdam", "ApplyGradientDescent", "ApplyMomentum",
      // Random numbers: XLA's generators do not reproduce the CPU kernels' streams. The
      // stateless ones are lowered as TensorFlow's XLA lowers them.
      "RandomStandardNormal", "RandomUniform", "RandomUniformInt", "TruncatedNormal",
      // Dynamic shapes (bounded dynamic dimensions), and resource deletion.
      "Unique", "Where", "DestroyResourceOp"};
  std::vector<std::string> missing;
  const auto& registry = graph::OpRegistry::Global();
  for (const std::string& op : registry.OpNames()) {
    if (registry.Find(op)->has_xla_kernel && XlaOpRegistry::Global().Find(op) == nullptr &&
        left_out.count(op) == 0) {
      missing.push_back(op);
    }
  }
  EXPECT_TRUE(missing.empty()) << "no lowering for: " << ::testing::PrintToString(missing);
}

}  // namespace
}  // namespace xlens::cluster
