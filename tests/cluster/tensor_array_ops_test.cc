// The TensorArray and stack lowerings (tf2xla/tensor_array_ops.cc, stack_ops.cc) against the
// executor's kernels: a function body of TensorArray ops (scattered, read and written at run-time
// indices, gathered, concatenated and split, with a gradient array written twice at one index)
// and of stack pushes and pops runs op by op and as HLO on the reference evaluator and the CPU
// backend, and every output agrees; arrays and stacks of no size bound are refused with the node
// named, in TensorFlow's words where it has them.
#include <gtest/gtest.h>

#include "cluster_test_util.h"
#include "function_body_test_util.h"
#include "tests/graph/while_test_util.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

class ArrayBody : public cluster_testing::FunctionBody {
 public:
  ArrayBody() : FunctionBody("arrays") {}

  // A float TensorArray of `size` elements, of `element_shape` when given, its elements readable
  // more than once: its handle (its flow is Output(handle.node, 1)).
  Output Array(int size, std::optional<std::vector<int64_t>> element_shape = std::nullopt) {
    graph::AttrMap attrs{{"dtype", AttrValue::Type(graph::DT_FLOAT)},
                         {"clear_after_read", AttrValue::Bool(false)}};
    if (element_shape) attrs["element_shape"] = AttrValue::Shape(graph::PartialShape(*element_shape));
    return Op("TensorArrayV3", {ops::Input(size)}, attrs);
  }

  void Check() { cluster_testing::CheckBufferBody(*this); }
};

Tensor Iota(std::vector<int64_t> dims) {
  Tensor t(graph::DT_FLOAT, dims);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.flat<float>()[i] = static_cast<float>(i) - 3;
  return t;
}

Tensor Int64s(std::vector<int64_t> v) { return Tensor::Vector<int64_t>(graph::DT_INT64, std::move(v)); }

const graph::AttrMap kFloatT{{"T", AttrValue::Type(graph::DT_FLOAT)}};
const graph::AttrMap kFloatDtype{{"dtype", AttrValue::Type(graph::DT_FLOAT)}};

TEST(TensorArrayXlaTest, AnArrayIsABufferReadAndWrittenAtRunTimeIndices) {
  ArrayBody b;
  Output x = b.Arg(Iota({4, 3}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 2));
  // Scattered out of order into an array whose element shape the scatter gives.
  Output rows = b.Array(4);
  Output scattered =
      b.Op("TensorArrayScatterV3", {rows, ops::Input({3, 1, 0, 2}), x, Output(rows.node, 1)},
           kFloatT);
  Output row = b.Op("TensorArrayReadV3", {rows, index, scattered}, kFloatDtype);
  b.Ret(row);
  b.Ret(b.Op("TensorArrayGatherV3", {rows, ops::Input({0, 2}), scattered}, kFloatDtype));
  // Written at a run-time index into an array of a known element shape; unwritten rows are zeros.
  Output out = b.Array(3, std::vector<int64_t>{3});
  Output written = b.Op("TensorArrayWriteV3", {out, index, row, Output(out.node, 1)}, kFloatT);
  written = b.Op("TensorArrayWriteV3", {out, ops::Input(0), row, written}, kFloatT);
  b.Ret(b.Op("TensorArrayReadV3", {out, index, written}, kFloatDtype));
  b.Ret(b.Op("TensorArrayGatherV3", {out, ops::Input({0, 2}), written}, kFloatDtype));
  b.Ret(b.Op("TensorArraySizeV3", {out, written}, {}));
  // Concatenated, and split again into two elements of one length.
  Output concat = b.Op("TensorArrayConcatV3", {rows, scattered}, kFloatDtype);
  b.Ret(concat);
  b.Ret(Output(concat.node, 1));
  Output halves = b.Array(2);
  Output split =
      b.Op("TensorArraySplitV3", {halves, concat, Int64s({6, 6}), Output(halves.node, 1)}, kFloatT);
  b.Ret(b.Op("TensorArrayReadV3", {halves, ops::Input(1), split}, kFloatDtype));
  b.Check();
}

// A gradient array is made once per array and source, zeros of the array's shape; its writes add,
// so two reads of one element in the forward graph give the sum of their gradients.
TEST(TensorArrayXlaTest, AGradientArrayAddsItsWrites) {
  ArrayBody b;
  Output x = b.Arg(Iota({3, 2}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 1));
  Output forward = b.Array(3);
  Output flow = b.Op("TensorArrayScatterV3",
                     {forward, ops::Input({0, 1, 2}), x, Output(forward.node, 1)}, kFloatT);
  Output row = b.Op("TensorArrayReadV3", {forward, index, flow}, kFloatDtype);
  graph::AttrMap source{{"source", AttrValue::String("gradients")}};
  Output grad = b.Op("TensorArrayGradV3", {forward, flow}, source);
  Output gflow = b.Op("TensorArrayWriteV3", {grad, index, row, Output(grad.node, 1)}, kFloatT);
  // The same gradient array again, by source: the second write adds to the first.
  Output again = b.Op("TensorArrayGradV3", {forward, gflow}, source);
  gflow = b.Op("TensorArrayWriteV3", {again, index, row, Output(again.node, 1)}, kFloatT);
  gflow = b.Op("TensorArrayScatterV3", {again, ops::Input({2, 0}),
                                        b.Op("TensorArrayGatherV3",
                                             {forward, ops::Input({0, 0}), flow}, kFloatDtype),
                                        gflow},
               kFloatT);
  b.Ret(b.Op("TensorArrayGatherV3", {again, ops::Input({0, 1, 2}), gflow}, kFloatDtype));
  b.Check();
}

TEST(TensorArrayXlaTest, AStackIsABufferAndAnIndex) {
  ArrayBody b;
  Output x = b.Arg(Iota({2, 3}));
  Output stack = b.Op("StackV2", {ops::Input(4)}, {{"elem_type", AttrValue::Type(graph::DT_FLOAT)}});
  graph::AttrMap push{{"T", AttrValue::Type(graph::DT_FLOAT)}};
  graph::AttrMap pop{{"elem_type", AttrValue::Type(graph::DT_FLOAT)}};
  Output first = b.Op("StackPushV2", {stack, x}, push);
  Output doubled = b.Op("Mul", {x, ops::Const(b.root, 2.0f)}, kFloatT);
  Output second = b.Op("StackPushV2", {stack, doubled}, push);
  // The pops follow the pushes (control edges, as TensorFlow's gradients order them).
  graph::Node* top = ops::BuildOp(b.root.WithControlDependencies(std::vector<graph::Node*>{first.node, second.node}),
                                  "StackPopV2", {stack}, pop);
  graph::Node* below =
      ops::BuildOp(b.root.WithControlDependencies(std::vector<graph::Node*>{top}), "StackPopV2", {stack}, pop);
  b.Ret(Output(top, 0));
  b.Ret(Output(below, 0));
  ASSERT_TRUE(b.root.ok()) << b.root.status().message();
  auto compiled = b.Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  std::vector<Literal> params{*b.values[0].ToLiteral()};
  auto evaluated = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().message();
  std::vector<Literal> outputs = std::move(evaluated->tuple_elements());
  ASSERT_EQ(outputs.size(), 2u);
  auto top_value = Tensor::FromLiteral(std::move(outputs[0]));
  auto below_value = Tensor::FromLiteral(std::move(outputs[1]));
  ASSERT_TRUE(top_value.ok() && below_value.ok());
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(top_value->flat<float>()[i], 2.0f * (static_cast<float>(i) - 3));
    EXPECT_EQ(below_value->flat<float>()[i], static_cast<float>(i) - 3);
  }
}

// What a v1 loop gradient compiled in an XLA context holds: a loop passed an array it reads, a
// stack made before it and first pushed inside it (uninitialized when the loop starts), and the
// array's gradient taken in every iteration and gathered after the loop by its source. The loop
// carries all three: the stack starts as zeros of the shape the body's first compilation gives
// it, the gradient array is made before the loop and its writes add up across iterations.
TEST(TensorArrayXlaTest, ALoopCarriesArraysStacksAndTheGradientsItsBodyTakes) {
  ArrayBody b;
  Output x = b.Arg(Iota({4, 3}));
  Output rows = b.Array(4);
  // Shifted off zero: a gradient array adds its first write to zeros, which turns a -0 into 0.
  Output shifted = ops::Add(b.root, x, ops::Const(b.root, 0.25f));
  Output flow = b.Op("TensorArrayScatterV3",
                     {rows, ops::Input({0, 1, 2, 3}), shifted, Output(rows.node, 1)}, kFloatT);
  Output stack =
      b.Op("StackV2", {ops::Input(4)}, {{"elem_type", AttrValue::Type(graph::DT_FLOAT)}});
  graph::AttrMap source{{"source", AttrValue::String("gradients")}};
  Output h0 = ops::Const(b.root, Tensor::Vector<float>(graph::DT_FLOAT, {0.5f, -0.25f, 0.0f}));
  graph::Node* loop = graph::testing::While(
      b.root, {ops::Const(b.root, 0), h0, rows, flow, stack},
      [](const Scope& s, const std::vector<Output>& v) {
        return std::vector<Output>{ops::Less(s, v[0], ops::Const(s, 4))};
      },
      [&](const Scope& s, const std::vector<Output>& v) {
        auto op = [&](const std::string& name, const std::vector<ops::Input>& in,
                      graph::AttrMap attrs) { return Output(ops::BuildOp(s, name, in, attrs), 0); };
        Output row = op("TensorArrayReadV3", {v[2], v[0], v[3]}, kFloatDtype);
        Output h = ops::Tanh(s, ops::Add(s, ops::Mul(s, v[1], ops::Const(s, 0.9f)), row));
        Output pushed = op("StackPushV2", {v[4], h}, kFloatT);
        Output grad = op("TensorArrayGradV3", {v[2], v[3]}, source);
        Output gflow = op("TensorArrayWriteV3",
                          {grad, v[0], ops::Mul(s, pushed, row), Output(grad.node, 1)}, kFloatT);
        return std::vector<Output>{ops::Add(s, v[0], ops::Const(s, 1)), h, v[2], gflow, v[4]};
      });
  ASSERT_NE(loop, nullptr) << b.root.status().message();
  b.Ret(Output(loop, 1));
  graph::AttrMap pop{{"elem_type", AttrValue::Type(graph::DT_FLOAT)}};
  graph::Node* top = ops::BuildOp(b.root.WithControlDependencies(std::vector<graph::Node*>{loop}),
                                  "StackPopV2", {Output(loop, 4)}, pop);
  graph::Node* below =
      ops::BuildOp(b.root.WithControlDependencies(std::vector<graph::Node*>{top}), "StackPopV2",
                   {Output(loop, 4)}, pop);
  b.Ret(Output(top, 0));
  b.Ret(Output(below, 0));
  Output grad = b.Op("TensorArrayGradV3", {Output(loop, 2), Output(loop, 3)}, source);
  b.Ret(b.Op("TensorArrayGatherV3", {grad, ops::Input({0, 1, 2, 3}), Output(grad.node, 1)},
             kFloatDtype));
  b.Check();
}

TEST(TensorArrayXlaTest, UnboundedArraysAndStacksAreRefusedWithTheNode) {
  ArrayBody stack;
  Output x = stack.Arg(Iota({3}));
  Output s =
      stack.Op("StackV2", {ops::Input(-1)}, {{"elem_type", AttrValue::Type(graph::DT_FLOAT)}});
  stack.Ret(stack.Op("StackPushV2", {s, x}, kFloatT));
  auto refused = stack.Compile();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("StackV2"), std::string::npos)
      << refused.status().message();
  EXPECT_NE(refused.status().message().find("set the maximum_iterations parameter"),
            std::string::npos)
      << refused.status().message();

  ArrayBody dynamic;
  Output y = dynamic.Arg(Iota({3}));
  Output a = dynamic.Op("TensorArrayV3", {ops::Input(2)},
                        {{"dtype", AttrValue::Type(graph::DT_FLOAT)},
                         {"dynamic_size", AttrValue::Bool(true)}});
  dynamic.Ret(dynamic.Op("TensorArrayWriteV3", {a, ops::Input(0), y, Output(a.node, 1)}, kFloatT));
  auto also_refused = dynamic.Compile();
  ASSERT_FALSE(also_refused.ok());
  EXPECT_NE(also_refused.status().message().find("dynamic size"), std::string::npos)
      << also_refused.status().message();

  // A read before any write gave the elements a shape.
  ArrayBody unread;
  Output i = unread.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 0));
  Output empty = unread.Array(2);
  unread.Ret(unread.Op("TensorArrayReadV3", {empty, i, Output(empty.node, 1)}, kFloatDtype));
  auto unshaped = unread.Compile();
  ASSERT_FALSE(unshaped.ok());
  EXPECT_NE(unshaped.status().message().find("before any write gave its elements a shape"),
            std::string::npos)
      << unshaped.status().message();
}

}  // namespace
}  // namespace xlens::cluster
