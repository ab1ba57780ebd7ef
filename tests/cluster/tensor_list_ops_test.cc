// The TensorList lowerings (tf2xla/tensor_list_ops.cc) against the executor's list kernels: a
// function body of list ops (split, concatenated, read and written) runs op by op and as HLO on
// the reference evaluator and the CPU backend, and every output agrees; lists whose size is not
// known at compile time are refused with the node named.
#include <gtest/gtest.h>

#include "cluster_test_util.h"
#include "function_body_test_util.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::DataType;
using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

class ListBody : public cluster_testing::FunctionBody {
 public:
  ListBody() : FunctionBody("lists") {}

  // TensorListStack of a float list, its elements of `element_shape`; num_elements -1 leaves the
  // count unchecked.
  Output Stack(Output list, ops::Input element_shape, int64_t num_elements) {
    return Op("TensorListStack", {list, element_shape},
              {{"element_dtype", AttrValue::Type(graph::DT_FLOAT)},
               {"num_elements", AttrValue::Int(num_elements)}});
  }
  // Pushes `item` and then element 0 of `list` onto `empty`, and pops the last back: a list's
  // first writes, read back.
  Output PushTwiceAndPop(Output empty, Output item, Output list, graph::AttrMap elements) {
    Output pushed = Op("TensorListPushBack", {empty, item}, elements);
    Output first = Op("TensorListGetItem", {list, ops::Input(0), ops::Input({3})}, elements);
    pushed = Op("TensorListPushBack", {pushed, first}, elements);
    return Op("TensorListPopBack", {pushed, ops::Input({3})}, elements, 1);
  }

  void Check() { cluster_testing::CheckBufferBody(*this); }
};

Tensor Iota(std::vector<int64_t> dims) {
  Tensor t(graph::DT_FLOAT, dims);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.flat<float>()[i] = static_cast<float>(i) - 3;
  return t;
}

graph::AttrMap Elements(bool with_shape_type = false) {
  graph::AttrMap a{{"element_dtype", AttrValue::Type(graph::DT_FLOAT)}};
  if (with_shape_type) a["shape_type"] = AttrValue::Type(graph::DT_INT32);
  return a;
}

TEST(TensorListXlaTest, ListsBecomeBuffersReadAndWrittenAtRunTimeIndices) {
  ListBody b;
  Output x = b.Arg(Iota({4, 3}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 2));
  Output list = b.Op("TensorListFromTensor", {x, ops::Input({3})}, Elements(true));
  Output item = b.Op("TensorListGetItem", {list, index, ops::Input({3})}, Elements());
  Output reserved = b.Op("TensorListReserve", {ops::Input({3}), ops::Input(4)}, Elements(true));
  Output set = b.Op("TensorListSetItem", {reserved, index, item}, Elements());
  b.Ret(b.Stack(set, ops::Input({3}), 4));
  b.Ret(item);
  Output empty = b.Op("EmptyTensorList", {ops::Input({3}), ops::Input(2)}, Elements(true));
  b.Ret(b.PushTwiceAndPop(empty, item, list, Elements()));
  b.Ret(b.Op("TensorListLength", {set}, {}));
  b.Ret(b.Op("TensorListElementShape", {set}, {{"shape_type", AttrValue::Type(graph::DT_INT32)}}));
  b.Ret(b.Op("TensorListGather", {list, ops::Input({3, 0}), ops::Input({3})}, Elements()));
  // What gradients build for lists: zeros of one, the sum of two.
  Output zeros = b.Op("ZerosLike", {list}, {});
  Output other = b.Op("TensorListSetItem", {zeros, ops::Input(1), item}, Elements());
  Output sum(ops::BuildOpWithList(b.root, "AddN", {{set, other}}), 0);
  b.Ret(b.Stack(sum, ops::Input({3}), -1));
  b.Check();
}

// A list of lists (what a loop inside a loop accumulates for its gradient): the element lists
// pushed whole, each part stacked, and popped back as lists their items are read from.
TEST(TensorListXlaTest, AListOfListsHoldsItsElementListsWhole) {
  ListBody b;
  Output x = b.Arg(Iota({3, 2}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 2));
  Output first = b.Op("TensorListFromTensor", {x, ops::Input({2})}, Elements(true));
  Output squares = b.Op("TensorListFromTensor", {b.Op("Mul", {x, x}, {}), ops::Input({2})},
                        Elements(true));
  // The second element list has had one element popped: its own push index travels with it.
  Output shorter = b.Op("TensorListPopBack", {squares, ops::Input({2})}, Elements());
  graph::AttrMap lists{{"element_dtype", AttrValue::Type(graph::DT_VARIANT)}};
  graph::AttrMap new_lists = lists;
  new_lists["shape_type"] = AttrValue::Type(graph::DT_INT32);
  Output outer = b.Op("EmptyTensorList", {ops::Input(-1), ops::Input(2)}, new_lists);
  outer = b.Op("TensorListPushBack", {outer, first}, lists);
  outer = b.Op("TensorListPushBack", {outer, shorter}, lists);
  Output rest = b.Op("TensorListPopBack", {outer, ops::Input(-1)}, lists);
  Output popped(rest.node, 1);
  b.Ret(b.Op("TensorListGetItem", {popped, ops::Input(1), ops::Input({2})}, Elements()));
  b.Ret(b.Op("TensorListPopBack", {popped, ops::Input({2})}, Elements(), 1));
  Output again = b.Op("TensorListGetItem", {rest, ops::Input(0), ops::Input(-1)}, lists);
  b.Ret(b.Op("TensorListGetItem", {again, index, ops::Input({2})}, Elements()));
  b.Check();
}

Tensor Int64s(std::vector<int64_t> v) {
  return Tensor::Vector<int64_t>(graph::DT_INT64, std::move(v));
}

// Pieces of one length become the buffer's elements, and concatenating gives the tensor back
// with the lengths as a constant; pieces of different lengths are refused, as tf2xla does.

TEST(TensorListXlaTest, SplitAndConcatReshapeTheBuffer) {
  ListBody b;
  Output x = b.Arg(Iota({6, 2}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 1));
  Output split =
      b.Op("TensorListSplit", {x, ops::Input({-1, 2}), Int64s({2, 2, 2})}, Elements(true));
  Output item = b.Op("TensorListGetItem", {split, index, ops::Input({2, 2})}, Elements());
  Output set = b.Op("TensorListSetItem", {split, ops::Input(2), item}, Elements());
  Output concat =
      b.Op("TensorListConcatV2", {set, ops::Input({-1, 2}), Int64s({})}, Elements(true));
  b.Ret(item);
  b.Ret(concat);
  b.Ret(Output(concat.node, 1));
  b.Check();

  ListBody uneven;
  Output y = uneven.Arg(Iota({6, 2}));
  Output pieces =
      uneven.Op("TensorListSplit", {y, ops::Input({-1, 2}), Int64s({2, 4})}, Elements(true));
  uneven.Ret(
      uneven.Op("TensorListConcatV2", {pieces, ops::Input({-1, 2}), Int64s({})}, Elements(true)));
  auto refused = uneven.Compile();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("All lengths must be the same"), std::string::npos)
      << refused.status().message();
}

TEST(TensorListXlaTest, AListOfUnknownSizeIsRefusedWithTheNode) {
  ListBody b;
  Output n = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 3));
  Output reserved = b.Op("TensorListReserve", {ops::Input({3}), n}, Elements(true));
  b.Ret(b.Stack(reserved, ops::Input({3}), -1));
  auto compiled = b.Compile();
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("TensorListReserve"), std::string::npos)
      << compiled.status().message();
  EXPECT_NE(compiled.status().message().find("compile-time constant"), std::string::npos)
      << compiled.status().message();

  ListBody unknown_shape;
  Output r = unknown_shape.Op("TensorListReserve", {ops::Input({-1}), ops::Input(2)},
                              Elements(true));
  unknown_shape.Ret(unknown_shape.Stack(r, ops::Input({-1}), -1));
  auto refused = unknown_shape.Compile();
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("no write has given an element shape"),
            std::string::npos)
      << refused.status().message();
}

// A list whose element shape is unknown is uninitialized until its first write: a PushBack or a
// SetItem gives it the item's shape (tf2xla's GetInitializedTensorListForElement).
TEST(TensorListXlaTest, TheFirstWriteGivesAnUninitializedListItsElementShape) {
  ListBody b;
  Output x = b.Arg(Iota({4, 3}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 2));
  Output list = b.Op("TensorListFromTensor", {x, ops::Input({3})}, Elements(true));
  Output item = b.Op("TensorListGetItem", {list, index, ops::Input({3})}, Elements());
  Output reserved = b.Op("TensorListReserve", {ops::Input({-1}), ops::Input(4)}, Elements(true));
  Output set = b.Op("TensorListSetItem", {reserved, index, item}, Elements());
  b.Ret(b.Stack(set, ops::Input({3}), 4));
  Output empty = b.Op("EmptyTensorList", {ops::Input(-1), ops::Input(3)}, Elements(true));
  b.Ret(b.PushTwiceAndPop(empty, item, list, Elements()));
  b.Check();
}

// What a While's gradient builds: the forward pass pushes TensorListElementShape and
// TensorListLength (constants at compile time) onto accumulators, the backward pass pops them
// into a TensorListReserve; popping a list of one constant element gives that constant, so the
// Reserve's size and element shape are known at compile time, as tf2xla resolves them.
TEST(TensorListXlaTest, ReserveOfConstantsPoppedFromAccumulatorsIsKnown) {
  ListBody b;
  Output x = b.Arg(Iota({4, 3}));
  Output index = b.Arg(Tensor::Scalar<int32_t>(graph::DT_INT32, 1));
  Output list = b.Op("TensorListFromTensor", {x, ops::Input({3})}, Elements(true));
  graph::AttrMap ints{{"element_dtype", AttrValue::Type(graph::DT_INT32)}};
  Output shape = b.Op("TensorListElementShape", {list},
                      {{"shape_type", AttrValue::Type(graph::DT_INT32)}});
  Output length = b.Op("TensorListLength", {list}, {});
  Output shapes = b.Op("EmptyTensorList", {ops::Input(-1), ops::Input(3)},
                       {{"element_dtype", AttrValue::Type(graph::DT_INT32)},
                        {"shape_type", AttrValue::Type(graph::DT_INT32)}});
  Output lengths = b.Op("EmptyTensorList", {ops::Input({}), ops::Input(3)},
                        {{"element_dtype", AttrValue::Type(graph::DT_INT32)},
                         {"shape_type", AttrValue::Type(graph::DT_INT32)}});
  for (int i = 0; i < 2; ++i) {
    shapes = b.Op("TensorListPushBack", {shapes, shape}, ints);
    lengths = b.Op("TensorListPushBack", {lengths, length}, ints);
  }
  Output popped_shape = b.Op("TensorListPopBack", {shapes, ops::Input(-1)}, ints, 1);
  Output popped_length = b.Op("TensorListPopBack", {lengths, ops::Input(-1)}, ints, 1);
  Output reserved = b.Op("TensorListReserve", {popped_shape, popped_length}, Elements(true));
  Output item = b.Op("TensorListGetItem", {list, index, ops::Input({3})}, Elements());
  Output set = b.Op("TensorListSetItem", {reserved, index, item}, Elements());
  b.Ret(b.Stack(set, ops::Input({3}), 4));
  b.Ret(item);
  b.Check();
}

// Loads `pbtxt` (a function graph of one f32[3] argument), compiles it and evaluates the module
// on {1, 2, 3}: the module and its outputs.
void CompileAndEvaluate(const char* pbtxt, std::unique_ptr<HloModule>* module,
                        std::vector<Tensor>* outputs) {
  std::unique_ptr<graph::Graph> g = cluster_testing::LoadGraph(pbtxt);
  ASSERT_NE(g, nullptr);
  XlaArgument x;
  x.dtype = graph::DT_FLOAT;
  x.shape = {3};
  auto compiled = CompileGraphToHlo(*g, {x}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  std::vector<Literal> params;
  params.push_back(*Tensor::Vector<float>(graph::DT_FLOAT, {1, 2, 3}).ToLiteral());
  auto evaluated = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().message() << "\n"
                              << compiled->module->ToString();
  for (Literal& literal : evaluated->tuple_elements()) {
    auto t = Tensor::FromLiteral(std::move(literal));
    ASSERT_TRUE(t.ok()) << t.status().message();
    outputs->push_back(std::move(*t));
  }
  *module = std::move(compiled->module);
}

// A loop's accumulator whose element shape only the body's PushBack fixes (what a While's
// gradient builds: EmptyTensorList with an unknown element shape): the body is compiled once to
// learn the shape, the list enters the loop as zeros of it, and the module holds one loop.
constexpr char kAccumulatorLoop[] = R"pb(
node { name: "x" op: "_Arg" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
node { name: "unknown" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: -1 } } } }
node { name: "four" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 4 } } } }
node { name: "acc" op: "EmptyTensorList" input: "unknown" input: "four"
  attr { key: "element_dtype" value { type: DT_FLOAT } } attr { key: "shape_type" value { type: DT_INT32 } } }
node { name: "loop" op: "StatelessWhile" input: "zero" input: "x" input: "acc"
  attr { key: "T" value { list { type: DT_INT32 type: DT_FLOAT type: DT_VARIANT } } }
  attr { key: "cond" value { func { name: "cond" } } } attr { key: "body" value { func { name: "body" } } } }
node { name: "stack" op: "TensorListStack" input: "loop:2" input: "unknown"
  attr { key: "element_dtype" value { type: DT_FLOAT } } attr { key: "num_elements" value { i: 4 } } }
node { name: "ret" op: "_Retval" input: "stack" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "ret1" op: "_Retval" input: "loop:1" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 1 } } }
library {
  function {
    signature { name: "cond" input_arg { name: "i" type: DT_INT32 } input_arg { name: "v" type: DT_FLOAT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "out" type: DT_BOOL } }
    node_def { name: "limit" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 4 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "limit:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "out" value: "less:z:0" }
  }
  function {
    signature { name: "body" input_arg { name: "i" type: DT_INT32 } input_arg { name: "v" type: DT_FLOAT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "i_next" type: DT_INT32 }
                output_arg { name: "v_next" type: DT_FLOAT } output_arg { name: "l_next" type: DT_VARIANT } }
    node_def { name: "twice" op: "AddV2" input: "v" input: "v" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "push" op: "TensorListPushBack" input: "l" input: "twice:z:0"
               attr { key: "element_dtype" value { type: DT_FLOAT } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 1 } } } }
    node_def { name: "next" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "i_next" value: "next:z:0" }
    ret { key: "v_next" value: "twice:z:0" }
    ret { key: "l_next" value: "push:output_handle:0" }
  }
}
)pb";

TEST(TensorListXlaTest, ALoopAccumulatorTakesItsElementShapeFromAFirstCompilationOfTheBody) {
  std::unique_ptr<HloModule> module;
  std::vector<Tensor> outputs;
  ASSERT_NO_FATAL_FAILURE(CompileAndEvaluate(kAccumulatorLoop, &module, &outputs));
  const std::string text = module->ToString();
  // One loop, its cond and body: the first compilation left nothing behind.
  EXPECT_EQ(module->computations().size(), 3u) << text;
  EXPECT_NE(text.find("f32[4,3]"), std::string::npos) << text;
  ASSERT_EQ(outputs.size(), 2u);
  EXPECT_EQ(outputs[0].dims(), (std::vector<int64_t>{4, 3}));
  const std::vector<float> want{2, 4, 6, 4, 8, 12, 8, 16, 24, 16, 32, 48};
  for (int i = 0; i < 12; ++i) EXPECT_EQ(outputs[0].flat<float>()[i], want[i]) << i;
}

// The gradient's pattern across two loops: the forward loop pushes TensorListLength (a constant)
// onto an accumulator each turn, the backward loop pops it as the size of a TensorListReserve.
// The accumulator leaves the first loop as a list of one constant element, so the pop is that
// constant and the Reserve compiles; its row summed back doubles v each turn.
constexpr char kPoppedSizeLoops[] = R"pb(
node { name: "x" op: "_Arg" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "zero" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
node { name: "scalar" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { } } } } } }
node { name: "four" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 4 } } } }
node { name: "rows" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 5 } dim { size: 3 } } float_val: 0 } } } }
node { name: "three" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
  attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } int_val: 3 } } } }
node { name: "list" op: "TensorListFromTensor" input: "rows" input: "three"
  attr { key: "element_dtype" value { type: DT_FLOAT } } attr { key: "shape_type" value { type: DT_INT32 } } }
node { name: "acc" op: "EmptyTensorList" input: "scalar" input: "four"
  attr { key: "element_dtype" value { type: DT_INT32 } } attr { key: "shape_type" value { type: DT_INT32 } } }
node { name: "forward" op: "StatelessWhile" input: "zero" input: "list" input: "acc"
  attr { key: "T" value { list { type: DT_INT32 type: DT_VARIANT type: DT_VARIANT } } }
  attr { key: "cond" value { func { name: "cond" } } } attr { key: "body" value { func { name: "forward_body" } } } }
node { name: "backward" op: "StatelessWhile" input: "zero" input: "x" input: "forward:2"
  attr { key: "T" value { list { type: DT_INT32 type: DT_FLOAT type: DT_VARIANT } } }
  attr { key: "cond" value { func { name: "cond2" } } } attr { key: "body" value { func { name: "backward_body" } } } }
node { name: "ret" op: "_Retval" input: "backward:1" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "ret1" op: "_Retval" input: "backward:0" attr { key: "T" value { type: DT_INT32 } } attr { key: "index" value { i: 1 } } }
library {
  function {
    signature { name: "cond" input_arg { name: "i" type: DT_INT32 } input_arg { name: "a" type: DT_VARIANT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "out" type: DT_BOOL } }
    node_def { name: "limit" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 4 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "limit:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "out" value: "less:z:0" }
  }
  function {
    signature { name: "cond2" input_arg { name: "i" type: DT_INT32 } input_arg { name: "v" type: DT_FLOAT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "out" type: DT_BOOL } }
    node_def { name: "limit" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 4 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "limit:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "out" value: "less:z:0" }
  }
  function {
    signature { name: "forward_body" input_arg { name: "i" type: DT_INT32 } input_arg { name: "a" type: DT_VARIANT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "i_next" type: DT_INT32 }
                output_arg { name: "a_next" type: DT_VARIANT } output_arg { name: "l_next" type: DT_VARIANT } }
    node_def { name: "length" op: "TensorListLength" input: "a" }
    node_def { name: "push" op: "TensorListPushBack" input: "l" input: "length:length:0"
               attr { key: "element_dtype" value { type: DT_INT32 } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 1 } } } }
    node_def { name: "next" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "i_next" value: "next:z:0" }
    ret { key: "a_next" value: "a" }
    ret { key: "l_next" value: "push:output_handle:0" }
  }
  function {
    signature { name: "backward_body" input_arg { name: "i" type: DT_INT32 } input_arg { name: "v" type: DT_FLOAT }
                input_arg { name: "l" type: DT_VARIANT } output_arg { name: "i_next" type: DT_INT32 }
                output_arg { name: "v_next" type: DT_FLOAT } output_arg { name: "l_next" type: DT_VARIANT } }
    node_def { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { } } } } } }
    node_def { name: "pop" op: "TensorListPopBack" input: "l" input: "shape:output:0"
               attr { key: "element_dtype" value { type: DT_INT32 } } }
    node_def { name: "three" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } int_val: 3 } } } }
    node_def { name: "reserve" op: "TensorListReserve" input: "three:output:0" input: "pop:tensor:0"
               attr { key: "element_dtype" value { type: DT_FLOAT } } attr { key: "shape_type" value { type: DT_INT32 } } }
    node_def { name: "index" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 2 } } } }
    node_def { name: "set" op: "TensorListSetItem" input: "reserve:handle:0" input: "index:output:0" input: "v"
               attr { key: "element_dtype" value { type: DT_FLOAT } } }
    node_def { name: "stack" op: "TensorListStack" input: "set:output_handle:0" input: "three:output:0"
               attr { key: "element_dtype" value { type: DT_FLOAT } } attr { key: "num_elements" value { i: -1 } } }
    node_def { name: "axis" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 } } } }
    node_def { name: "sum" op: "Sum" input: "stack:tensor:0" input: "axis:output:0"
               attr { key: "T" value { type: DT_FLOAT } } attr { key: "Tidx" value { type: DT_INT32 } }
               attr { key: "keep_dims" value { b: false } } }
    node_def { name: "doubled" op: "AddV2" input: "sum:output:0" input: "v" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 1 } } } }
    node_def { name: "next" op: "AddV2" input: "i" input: "one:output:0" attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "i_next" value: "next:z:0" }
    ret { key: "v_next" value: "doubled:z:0" }
    ret { key: "l_next" value: "pop:output_handle:0" }
  }
}
)pb";

TEST(TensorListXlaTest, ASizePoppedFromALoopAccumulatorOfConstantsIsKnownInTheNextLoop) {
  std::unique_ptr<HloModule> module;
  std::vector<Tensor> outputs;
  ASSERT_NO_FATAL_FAILURE(CompileAndEvaluate(kPoppedSizeLoops, &module, &outputs));
  const std::string text = module->ToString();
  // The Reserve of the popped size 5 (the length of the forward loop's list of 5 rows).
  EXPECT_NE(text.find("f32[5,3]"), std::string::npos) << text;
  ASSERT_EQ(outputs.size(), 2u);
  const std::vector<float> want{16, 32, 48};
  for (int i = 0; i < 3; ++i) EXPECT_EQ(outputs[0].flat<float>()[i], want[i]) << i;
}

}  // namespace
}  // namespace xlens::cluster
