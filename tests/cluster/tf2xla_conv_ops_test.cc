// Differential tests of the depthwise, grouped 2-D and 3-D convolution and 3-D pooling lowerings (conv_ops.cc,
// pooling_ops.cc): each case builds a function body (_Arg -> op -> _Retval), runs it op by op
// with the graph front end's CPU kernels, lowers it to HLO, runs the module on the reference
// evaluator and on the CPU backend, and compares. Paddings (SAME, VALID, EXPLICIT), strides,
// dilations, depth multipliers and both data formats.
#include <gtest/gtest.h>

#include <cmath>
#include <algorithm>
#include <random>

#include "compiler/cluster/tf2xla/xla_compiler.h"
#include "compiler/graph/cc_ops.h"
#include "compiler/graph/executor.h"
#include "compiler/graph/ops/conv_geometry.h"
#include "compiler/graph/scope.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::cluster {
namespace {

using graph::AttrMap;
using graph::AttrValue;
using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

Tensor Random(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(graph::DT_FLOAT, std::move(dims));
  std::uniform_real_distribution<double> u(-1, 1);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.SetFromDouble(i, u(rng));
  return t;
}

Tensor Int32s(const std::vector<int64_t>& v) {
  return Tensor::Vector<int32_t>(graph::DT_INT32, std::vector<int32_t>(v.begin(), v.end()));
}

AttrValue Ints(std::vector<int64_t> v) {
  graph::AttrListValue l;
  l.i = std::move(v);
  return AttrValue::List(l);
}

// One op on run-time arguments (and constant shape arguments), lowered and run both ways.
void CheckOp(const std::string& op, const AttrMap& attrs, const std::vector<Tensor>& inputs,
             const std::vector<bool>& constant) {
  SCOPED_TRACE(op);
  Scope root = Scope::NewRootScope();
  std::vector<XlaArgument> args;
  std::vector<ops::Input> node_inputs;
  for (size_t i = 0; i < inputs.size(); ++i) {
    XlaArgument arg;
    arg.kind = constant[i] ? XlaArgument::Kind::kConstant : XlaArgument::Kind::kParameter;
    arg.dtype = inputs[i].dtype();
    arg.shape = inputs[i].dims();
    if (constant[i]) arg.constant_value = inputs[i];
    args.push_back(arg);
    graph::Node* n = root.WithOpName("arg_" + std::to_string(i))
                         .AddNode("_Arg", {},
                                  {{"T", AttrValue::Type(inputs[i].dtype())},
                                   {"index", AttrValue::Int(static_cast<int64_t>(i))}});
    node_inputs.push_back(Output(n, 0));
  }
  Output y = ops::AsOutput(ops::BuildOp(root, op, node_inputs, attrs));
  root.WithOpName("retval_0").AddNode(
      "_Retval", {y}, {{"T", AttrValue::Type(y.type())}, {"index", AttrValue::Int(0)}});
  ASSERT_TRUE(root.ok()) << root.status().message();

  auto executor = graph::Executor::Create(root.graph(), {});
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  auto expected = (*executor)->Run(inputs);
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  const Tensor& want = (*expected)[0];

  XlaCompileOptions options;
  options.module_name = "test_module";
  auto compiled = CompileGraphToHlo(*root.graph(), args, options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  std::vector<Literal> params;
  for (int arg : compiled->input_mapping) {
    auto lit = inputs[arg].ToLiteral();
    ASSERT_TRUE(lit.ok());
    params.push_back(std::move(*lit));
  }
  auto evaluated = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().message() << "\n"
                              << compiled->module->ToString();
  auto again = CompileGraphToHlo(*root.graph(), args, options);
  ASSERT_TRUE(again.ok());
  auto executable = runtime::CompileForCpu(std::move(again->module), {});
  ASSERT_TRUE(executable.ok()) << executable.status().message();
  auto ran = (*executable)->Execute(params);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  Status same = ExpectLiteralNear(*evaluated, *ran, ErrorSpec{1e-5, 1e-5});
  EXPECT_TRUE(same.ok()) << "CPU backend: " << same.message();

  auto got = Tensor::FromLiteral(std::move(*evaluated));
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ(got->dims(), want.dims());
  double worst = 0;
  for (int64_t k = 0; k < want.num_elements(); ++k)
    worst = std::max(worst, std::abs(got->GetAsDouble(k) - want.GetAsDouble(k)) /
                                (1 + std::abs(want.GetAsDouble(k))));
  EXPECT_LT(worst, 1e-5) << compiled->module->ToString();
}

// The forward output dims of a window op (the kernels' geometry) for its backprops' out_backprop.
std::vector<int64_t> OutputDims(const AttrMap& attrs, int spatial, bool pooling,
                                const std::vector<int64_t>& input,
                                const std::vector<int64_t>& window, int64_t out_depth) {
  auto a = graph::conv::GetWindowAttrs(attrs, "node", spatial, pooling);
  EXPECT_TRUE(a.ok()) << a.status().message();
  auto g = graph::conv::ComputeGeometry(*a, input, window, out_depth);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return graph::conv::OutputDims(*a, *g);
}

struct DepthwiseCase {
  std::vector<int64_t> input, filter;  // input in the case's format, filter [kh, kw, c, m]
  std::vector<int64_t> strides, dilations;
  std::string padding, format;
  std::vector<int64_t> explicit_paddings;
};

TEST(Tf2XlaConvOpsTest, DepthwiseAndItsBackpropsMatchTheKernels) {
  const std::vector<DepthwiseCase> cases = {
      {{2, 7, 7, 4}, {3, 3, 4, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME", "NHWC", {}},
      {{1, 9, 8, 3}, {3, 3, 3, 2}, {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME", "NHWC", {}},
      {{1, 10, 9, 2}, {3, 2, 2, 3}, {1, 2, 1, 1}, {1, 1, 2, 1}, "VALID", "NHWC", {}},
      {{2, 6, 7, 3}, {2, 3, 3, 2}, {1, 1, 2, 1}, {1, 1, 1, 1}, "EXPLICIT", "NHWC",
       {0, 0, 1, 2, 0, 3, 0, 0}},
      {{1, 4, 8, 8}, {3, 3, 4, 2}, {1, 1, 2, 2}, {1, 1, 1, 1}, "SAME", "NCHW", {}},
  };
  for (const DepthwiseCase& c : cases) {
    SCOPED_TRACE(c.padding + " " + c.format);
    std::mt19937 rng(5);
    AttrMap attrs = {{"strides", Ints(c.strides)},
                     {"dilations", Ints(c.dilations)},
                     {"padding", AttrValue::String(c.padding)},
                     {"data_format", AttrValue::String(c.format)}};
    if (!c.explicit_paddings.empty()) attrs["explicit_paddings"] = Ints(c.explicit_paddings);
    const std::vector<int64_t> out = OutputDims(attrs, 2, false, c.input,
                                                {c.filter[0], c.filter[1]},
                                                c.filter[2] * c.filter[3]);
    Tensor x = Random(c.input, rng), f = Random(c.filter, rng), dy = Random(out, rng);
    CheckOp("DepthwiseConv2dNative", attrs, {x, f}, {false, false});
    CheckOp("DepthwiseConv2dNativeBackpropInput", attrs, {Int32s(c.input), f, dy},
            {true, false, false});
    CheckOp("DepthwiseConv2dNativeBackpropFilter", attrs, {x, Int32s(c.filter), dy},
            {false, true, false});
  }
}

// Grouped Conv2D (an input depth a multiple of the filter's, as Keras's grouped and depthwise
// layers emit it) and its backprops: feature groups in HLO, the kernels' groups op by op.
TEST(Tf2XlaConvOpsTest, GroupedConv2DAndItsBackpropsMatchTheKernels) {
  struct Case {
    std::vector<int64_t> input, filter, strides, dilations;
    std::string padding;
  };
  const std::vector<Case> cases = {
      {{2, 7, 7, 6}, {3, 3, 2, 6}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},      // three groups
      {{1, 9, 8, 4}, {3, 3, 1, 8}, {1, 2, 2, 1}, {1, 1, 1, 1}, "SAME"},      // depthwise, x2
      {{1, 14, 14, 8}, {7, 7, 1, 8}, {1, 1, 1, 1}, {1, 1, 1, 1}, "SAME"},    // ConvNeXt's 7x7
      {{2, 10, 9, 6}, {3, 2, 3, 4}, {1, 1, 2, 1}, {1, 2, 1, 1}, "VALID"},    // two groups
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.padding + " groups " + std::to_string(c.input[3] / c.filter[2]));
    std::mt19937 rng(8);
    AttrMap attrs = {{"strides", Ints(c.strides)},
                     {"dilations", Ints(c.dilations)},
                     {"padding", AttrValue::String(c.padding)},
                     {"data_format", AttrValue::String("NHWC")}};
    const std::vector<int64_t> out =
        OutputDims(attrs, 2, false, c.input, {c.filter[0], c.filter[1]}, c.filter[3]);
    Tensor x = Random(c.input, rng), f = Random(c.filter, rng), dy = Random(out, rng);
    CheckOp("Conv2D", attrs, {x, f}, {false, false});
    CheckOp("Conv2DBackpropInput", attrs, {Int32s(c.input), f, dy}, {true, false, false});
    CheckOp("Conv2DBackpropFilter", attrs, {x, Int32s(c.filter), dy}, {false, true, false});
  }
}

TEST(Tf2XlaConvOpsTest, Conv3DAndItsBackpropsMatchTheKernels) {
  struct Case {
    std::vector<int64_t> input, filter, strides, dilations;
    std::string padding, format;
  };
  const std::vector<Case> cases = {
      {{1, 5, 5, 5, 2}, {3, 3, 3, 2, 3}, {1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, "SAME", "NDHWC"},
      {{2, 6, 5, 7, 2}, {2, 3, 2, 2, 2}, {1, 2, 1, 2, 1}, {1, 1, 1, 1, 1}, "VALID", "NDHWC"},
      {{1, 6, 6, 6, 2}, {2, 2, 2, 2, 2}, {1, 1, 1, 1, 1}, {1, 2, 1, 2, 1}, "SAME", "NDHWC"},
      {{1, 2, 5, 6, 5}, {3, 2, 3, 2, 3}, {1, 1, 2, 1, 2}, {1, 1, 1, 1, 1}, "SAME", "NCDHW"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.padding + " " + c.format);
    std::mt19937 rng(9);
    const AttrMap attrs = {{"strides", Ints(c.strides)},
                           {"dilations", Ints(c.dilations)},
                           {"padding", AttrValue::String(c.padding)},
                           {"data_format", AttrValue::String(c.format)}};
    const std::vector<int64_t> out = OutputDims(
        attrs, 3, false, c.input, {c.filter[0], c.filter[1], c.filter[2]}, c.filter[4]);
    Tensor x = Random(c.input, rng), f = Random(c.filter, rng), dy = Random(out, rng);
    CheckOp("Conv3D", attrs, {x, f}, {false, false});
    CheckOp("Conv3DBackpropInputV2", attrs, {Int32s(c.input), f, dy}, {true, false, false});
    CheckOp("Conv3DBackpropFilterV2", attrs, {x, Int32s(c.filter), dy}, {false, true, false});
  }
}

TEST(Tf2XlaConvOpsTest, Pooling3DAndItsGradientsMatchTheKernels) {
  struct Case {
    std::vector<int64_t> input, ksize, strides;
    std::string padding, format;
  };
  const std::vector<Case> cases = {
      {{1, 4, 4, 4, 2}, {1, 2, 2, 2, 1}, {1, 2, 2, 2, 1}, "VALID", "NDHWC"},
      {{2, 5, 6, 7, 3}, {1, 3, 2, 3, 1}, {1, 2, 2, 1, 1}, "SAME", "NDHWC"},
      {{1, 3, 5, 4, 6}, {1, 1, 2, 3, 2}, {1, 1, 2, 1, 2}, "SAME", "NCDHW"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.padding + " " + c.format);
    std::mt19937 rng(13);
    const AttrMap attrs = {{"ksize", Ints(c.ksize)},
                           {"strides", Ints(c.strides)},
                           {"padding", AttrValue::String(c.padding)},
                           {"data_format", AttrValue::String(c.format)}};
    const bool cf = c.format == "NCDHW";
    const std::vector<int64_t> window = cf ? std::vector<int64_t>{c.ksize[2], c.ksize[3], c.ksize[4]}
                                           : std::vector<int64_t>{c.ksize[1], c.ksize[2], c.ksize[3]};
    const std::vector<int64_t> out =
        OutputDims(attrs, 3, true, c.input, window, c.input[cf ? 1 : 4]);
    // Distinct values: no ties for the maximum (where TensorFlow's kernel and its XLA lowering
    // share the gradient differently).
    Tensor x = Random(c.input, rng), dy = Random(out, rng);
    CheckOp("MaxPool3D", attrs, {x}, {false});
    CheckOp("AvgPool3D", attrs, {x}, {false});
    CheckOp("AvgPool3DGrad", attrs, {Int32s(c.input), dy}, {true, false});
    // MaxPool3DGrad takes the forward output: computed by the kernel, then fed.
    auto pooled_graph = [&](const Tensor& in) -> Tensor {
      Scope root = Scope::NewRootScope();
      graph::Node* xa = root.WithOpName("x").AddNode(
          "_Arg", {}, {{"T", AttrValue::Type(graph::DT_FLOAT)}, {"index", AttrValue::Int(0)}});
      Output y = ops::AsOutput(ops::BuildOp(root, "MaxPool3D", {Output(xa, 0)}, attrs));
      root.WithOpName("r").AddNode("_Retval", {y},
                                    {{"T", AttrValue::Type(graph::DT_FLOAT)},
                                     {"index", AttrValue::Int(0)}});
      auto executor = graph::Executor::Create(root.graph(), {});
      EXPECT_TRUE(executor.ok());
      auto r = (*executor)->Run({in});
      EXPECT_TRUE(r.ok());
      return (*r)[0];
    };
    const Tensor pooled = pooled_graph(x);
    CheckOp("MaxPool3DGrad", attrs, {x, pooled, dy}, {false, false, false});
    // MaxPool3DGradGrad: XLA's lowering compares the input at bfloat16 precision, so the input
    // holds values distinct at that precision (8 significant bits, exponents spread), shuffled.
    Tensor distinct(graph::DT_FLOAT, c.input);
    std::vector<int64_t> order(distinct.num_elements());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
    std::shuffle(order.begin(), order.end(), rng);
    for (int64_t i = 0; i < distinct.num_elements(); ++i) {
      const int64_t k = order[i];
      const double magnitude = std::ldexp(128 + (k / 2) % 128, static_cast<int>(k / 256) - 8);
      distinct.SetFromDouble(i, k % 2 ? -magnitude : magnitude);
    }
    CheckOp("MaxPool3DGradGrad", attrs, {distinct, pooled_graph(distinct), Random(c.input, rng)},
            {false, false, false});
  }
}

}  // namespace
}  // namespace xlens::cluster
