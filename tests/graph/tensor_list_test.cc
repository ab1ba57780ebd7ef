// The TensorList value and the list and TensorArray kernels: what they hold after each op, the
// sharing rule (a list another tensor holds is copied before it changes, one held only by the
// kernel's input is changed in place), and TensorFlow's errors for bad indices, types and shapes.
#include "compiler/graph/tensor_list.h"

#include <gtest/gtest.h>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/scope.h"
#include "compiler/graph/session.h"
#include "tests/graph/kernel_test_util.h"

namespace xlens::graph {
namespace {

using testing::KernelRunner;
using testing::RunOp;

AttrMap ListAttrs(DataType element = DT_FLOAT) {
  return {{"element_dtype", AttrValue::Type(element)}, {"shape_type", AttrValue::Type(DT_INT32)}};
}

Tensor Floats(std::vector<float> v, std::vector<int64_t> dims) {
  Tensor t(DT_FLOAT, dims);
  for (size_t i = 0; i < v.size(); ++i) t.flat<float>()[i] = v[i];
  return t;
}

Tensor I32(int32_t v) { return Tensor::Scalar<int32_t>(DT_INT32, v); }
Tensor Shape(std::vector<int32_t> dims) { return Tensor::Vector<int32_t>(DT_INT32, dims); }

const TensorList& ListIn(const Tensor& t) {
  return *static_cast<const TensorList*>(t.variants()[0].get());
}

Tensor Reserve(int n, std::vector<int32_t> shape) {
  auto out = RunOp("TensorListReserve", {Shape(shape), I32(n)}, ListAttrs());
  EXPECT_TRUE(out.ok()) << out.status().message();
  return (*out)[0];
}

TEST(TensorListTest, ReserveSetGetStack) {
  Tensor list = Reserve(3, {2});
  EXPECT_EQ(ListIn(list).tensors.size(), 3u);
  EXPECT_EQ(ListIn(list).element_shape.ToString(), "[2]");

  auto set = RunOp("TensorListSetItem", {list, I32(1), Floats({5, 6}, {2})},
                   {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(set.ok()) << set.status().message();
  auto item = RunOp("TensorListGetItem", {(*set)[0], I32(1), Shape({2})},
                    {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(item.ok()) << item.status().message();
  EXPECT_EQ((*item)[0].DebugString(), "float [2] [5, 6]");
  // An unset element reads as zeros of the element shape.
  auto unset = RunOp("TensorListGetItem", {(*set)[0], I32(0), Shape({-1})},
                     {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(unset.ok()) << unset.status().message();
  EXPECT_EQ((*unset)[0].DebugString(), "float [2] [0, 0]");

  auto stacked = RunOp("TensorListStack", {(*set)[0], Shape({2})},
                       {{"element_dtype", AttrValue::Type(DT_FLOAT)},
                        {"num_elements", AttrValue::Int(3)}});
  ASSERT_TRUE(stacked.ok()) << stacked.status().message();
  EXPECT_EQ((*stacked)[0].DebugString(), "float [3,2] [0, 0, 5, 6, 0, 0]");
}

TEST(TensorListTest, SetItemCopiesASharedListAndTakesOverAnUnsharedOne) {
  Tensor list = Reserve(2, {1});
  const VariantValue* original = list.variants()[0].get();
  // `list` is still held here: the kernel must not change it.
  auto set = RunOp("TensorListSetItem", {list, I32(0), Floats({7}, {1})},
                   {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(set.ok());
  EXPECT_FALSE(ListIn(list).tensors[0].IsInitialized());
  EXPECT_NE((*set)[0].variants()[0].get(), original);

  // Handed over (nothing else holds it): the same list comes out, changed.
  Tensor mine = (*set)[0];
  const VariantValue* before = mine.variants()[0].get();
  set->clear();
  std::vector<Tensor> inputs;  // not an initializer list, whose elements are copied
  inputs.push_back(std::move(mine));
  inputs.push_back(I32(1));
  inputs.push_back(Floats({8}, {1}));
  auto again = RunOp("TensorListSetItem", std::move(inputs),
                     {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(again.ok());
  EXPECT_EQ((*again)[0].variants()[0].get(), before);
  EXPECT_EQ(ListIn((*again)[0]).tensors[1].DebugString(), "float [1] [8]");
}

TEST(TensorListTest, FromTensorPushPopLengthElementShape) {
  auto from = RunOp("TensorListFromTensor", {Floats({1, 2, 3, 4, 5, 6}, {3, 2}), Shape({-1})},
                    ListAttrs());
  ASSERT_TRUE(from.ok()) << from.status().message();
  EXPECT_EQ(ListIn((*from)[0]).tensors.size(), 3u);
  EXPECT_EQ(ListIn((*from)[0]).tensors[2].DebugString(), "float [2] [5, 6]");

  auto pushed = RunOp("TensorListPushBack", {(*from)[0], Floats({7, 8}, {2})},
                      {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(pushed.ok());
  auto length = RunOp("TensorListLength", {(*pushed)[0]}, {});
  ASSERT_TRUE(length.ok());
  EXPECT_EQ((*length)[0].GetAsInt64(0), 4);

  auto popped = RunOp("TensorListPopBack", {(*pushed)[0], Shape({2})},
                      {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(popped.ok());
  EXPECT_EQ((*popped)[1].DebugString(), "float [2] [7, 8]");
  EXPECT_EQ(ListIn((*popped)[0]).tensors.size(), 3u);

  auto shape = RunOp("TensorListElementShape", {(*from)[0]},
                     {{"shape_type", AttrValue::Type(DT_INT32)}});
  ASSERT_TRUE(shape.ok());
  EXPECT_EQ((*shape)[0].DebugString(), "int32 [1] [-1]");
  auto unknown = RunOp("EmptyTensorList", {Tensor::Scalar<int32_t>(DT_INT32, -1), I32(-1)},
                       ListAttrs());
  ASSERT_TRUE(unknown.ok());
  auto scalar_shape = RunOp("TensorListElementShape", {(*unknown)[0]},
                            {{"shape_type", AttrValue::Type(DT_INT64)}});
  ASSERT_TRUE(scalar_shape.ok());
  EXPECT_EQ((*scalar_shape)[0].DebugString(), "int64 [] [-1]");
}

TEST(TensorListTest, TensorFlowsErrors) {
  Tensor list = Reserve(2, {2});
  AttrMap attrs{{"element_dtype", AttrValue::Type(DT_FLOAT)}};
  auto bad_index = RunOp("TensorListGetItem", {list, I32(2), Shape({2})}, attrs);
  ASSERT_FALSE(bad_index.ok());
  EXPECT_NE(bad_index.status().message().find("Trying to access element 2 in a list with 2 "
                                              "elements."),
            std::string::npos);
  auto bad_shape = RunOp("TensorListSetItem", {list, I32(0), Floats({1, 2, 3}, {3})}, attrs);
  ASSERT_FALSE(bad_shape.ok());
  EXPECT_NE(bad_shape.status().message().find("incompatible shape"), std::string::npos);
  auto bad_type = RunOp("TensorListSetItem", {list, I32(0), Tensor::Vector<int32_t>(DT_INT32, {1, 2})},
                        {{"element_dtype", AttrValue::Type(DT_INT32)}});
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(bad_type.status().message().find("Invalid data types"), std::string::npos);
  auto empty = RunOp("EmptyTensorList", {Shape({2}), I32(-1)}, ListAttrs());
  ASSERT_TRUE(empty.ok());
  auto pop = RunOp("TensorListPopBack", {(*empty)[0], Shape({2})}, attrs);
  ASSERT_FALSE(pop.ok());
  EXPECT_NE(pop.status().message().find("Trying to pop from an empty list."), std::string::npos);
  auto negative = RunOp("TensorListReserve", {Shape({2}), I32(-1)}, ListAttrs());
  ASSERT_FALSE(negative.ok());
  // An unset element of a list whose element shape is unknown cannot be stacked.
  Tensor unknown = Reserve(2, {-1});
  auto stack = RunOp("TensorListStack", {unknown, Shape({-1})},
                     {{"element_dtype", AttrValue::Type(DT_FLOAT)}, {"num_elements", AttrValue::Int(-1)}});
  ASSERT_FALSE(stack.ok());
}

TEST(TensorListTest, GatherScatterSplitConcat) {
  auto scattered = RunOp("TensorListScatterV2",
                         {Floats({1, 2, 3, 4}, {2, 2}), Tensor::Vector<int32_t>(DT_INT32, {2, 0}),
                          Shape({2}), I32(3)},
                         ListAttrs());
  ASSERT_TRUE(scattered.ok()) << scattered.status().message();
  auto gathered = RunOp("TensorListGather",
                        {(*scattered)[0], Tensor::Vector<int32_t>(DT_INT32, {0, 1, 2}), Shape({2})},
                        {{"element_dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(gathered.ok()) << gathered.status().message();
  EXPECT_EQ((*gathered)[0].DebugString(), "float [3,2] [3, 4, 0, 0, 1, 2]");

  auto split = RunOp("TensorListSplit",
                     {Floats({1, 2, 3, 4, 5}, {5}), Shape({-1}),
                      Tensor::Vector<int64_t>(DT_INT64, {2, 3})},
                     ListAttrs());
  ASSERT_TRUE(split.ok()) << split.status().message();
  auto concat = RunOp("TensorListConcatV2",
                      {(*split)[0], Shape({-1}), Tensor::Vector<int64_t>(DT_INT64, {})},
                      ListAttrs());
  ASSERT_TRUE(concat.ok()) << concat.status().message();
  EXPECT_EQ((*concat)[0].DebugString(), "float [5] [1, 2, 3, 4, 5]");
  EXPECT_EQ((*concat)[1].DebugString(), "int64 [2] [2, 3]");
}

TEST(TensorListTest, ZerosLikeAndAddNOfLists) {
  auto from = RunOp("TensorListFromTensor", {Floats({1, 2, 3, 4}, {2, 2}), Shape({2})}, ListAttrs());
  ASSERT_TRUE(from.ok());
  auto zeros = RunOp("ZerosLike", {(*from)[0]}, {{"T", AttrValue::Type(DT_VARIANT)}});
  ASSERT_TRUE(zeros.ok()) << zeros.status().message();
  EXPECT_EQ(ListIn((*zeros)[0]).tensors[1].DebugString(), "float [2] [0, 0]");
  auto sum = RunOp("AddN", {(*from)[0], (*from)[0]},
                   {{"T", AttrValue::Type(DT_VARIANT)}, {"N", AttrValue::Int(2)}});
  ASSERT_TRUE(sum.ok()) << sum.status().message();
  EXPECT_EQ(ListIn((*sum)[0]).tensors[1].DebugString(), "float [2] [6, 8]");
}

TEST(TensorArrayTest, WriteReadGatherScatterAndGradients) {
  KernelRunner make("TensorArrayV3", {{"dtype", AttrValue::Type(DT_FLOAT)},
                                       {"element_shape", AttrValue::Shape(PartialShape({2}))},
                                       {"clear_after_read", AttrValue::Bool(false)}},
                    "ta");
  auto made = make.Run({I32(3)});
  ASSERT_TRUE(made.ok()) << made.status().message();
  Tensor handle = (*made)[0], flow = (*made)[1];
  auto wrote = RunOp("TensorArrayWriteV3", {handle, I32(1), Floats({1, 2}, {2}), flow},
                     {{"T", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(wrote.ok()) << wrote.status().message();
  auto twice = RunOp("TensorArrayWriteV3", {handle, I32(1), Floats({1, 2}, {2}), flow},
                     {{"T", AttrValue::Type(DT_FLOAT)}});
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.status().message().find("because it has already been written to"),
            std::string::npos);
  auto past = RunOp("TensorArrayWriteV3", {handle, I32(3), Floats({1, 2}, {2}), flow},
                    {{"T", AttrValue::Type(DT_FLOAT)}});
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("array is not resizeable"), std::string::npos);

  auto gathered = RunOp("TensorArrayGatherV3",
                        {handle, Tensor::Vector<int32_t>(DT_INT32, {1, 0}), flow},
                        {{"dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(gathered.ok()) << gathered.status().message();
  EXPECT_EQ((*gathered)[0].DebugString(), "float [2,2] [1, 2, 0, 0]");  // unwritten: zeros

  // The gradient array of one source is made once and sums what is written twice.
  AttrMap grad_attrs{{"source", AttrValue::String("gradients")}};
  auto g1 = RunOp("TensorArrayGradV3", {handle, flow}, grad_attrs);
  auto g2 = RunOp("TensorArrayGradV3", {handle, flow}, grad_attrs);
  ASSERT_TRUE(g1.ok() && g2.ok());
  EXPECT_EQ((*g1)[0].handle().object, (*g2)[0].handle().object);
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(RunOp("TensorArrayWriteV3", {(*g1)[0], I32(0), Floats({1, 1}, {2}), flow},
                      {{"T", AttrValue::Type(DT_FLOAT)}})
                    .ok());
  }
  auto read = RunOp("TensorArrayReadV3", {(*g2)[0], I32(0), flow},
                    {{"dtype", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(read.ok()) << read.status().message();
  EXPECT_EQ((*read)[0].DebugString(), "float [2] [2, 2]");
  auto size = RunOp("TensorArraySizeV3", {handle, flow}, {});
  ASSERT_TRUE(size.ok());
  EXPECT_EQ((*size)[0].GetAsInt64(0), 3);
}

TEST(TensorArrayTest, StackPushPopInOrder) {
  auto stack = RunOp("StackV2", {I32(2)}, {{"elem_type", AttrValue::Type(DT_FLOAT)}});
  ASSERT_TRUE(stack.ok()) << stack.status().message();
  Tensor h = (*stack)[0];
  AttrMap push{{"T", AttrValue::Type(DT_FLOAT)}};
  ASSERT_TRUE(RunOp("StackPushV2", {h, Floats({1}, {1})}, push).ok());
  ASSERT_TRUE(RunOp("StackPushV2", {h, Floats({2}, {1})}, push).ok());
  EXPECT_FALSE(RunOp("StackPushV2", {h, Floats({3}, {1})}, push).ok());  // max_size 2
  AttrMap pop{{"elem_type", AttrValue::Type(DT_FLOAT)}};
  auto a = RunOp("StackPopV2", {h}, pop);
  auto b = RunOp("StackPopV2", {h}, pop);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ((*a)[0].GetAsDouble(0), 2);
  EXPECT_EQ((*b)[0].GetAsDouble(0), 1);
  auto empty = RunOp("StackPopV2", {h}, pop);
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("is empty"), std::string::npos);
}

}  // namespace
}  // namespace xlens::graph

namespace xlens::graph {
namespace {

// The list gradients built by xlens's own autodiff: y = sum(stack(set(reserve, 1, get(from(x),
// 2) * 3))^2) + sum(pop(push(empty, x[0]))) runs to the hand-derived gradient.
TEST(TensorListGradientTest, ListGradientsGiveTheHandDerivedValues) {
  Scope root = Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT, PartialShape({3, 2}));
  AttrMap elements{{"element_dtype", AttrValue::Type(DT_FLOAT)}};
  AttrMap with_shape_type = elements;
  with_shape_type["shape_type"] = AttrValue::Type(DT_INT32);
  Output list = ops::AsOutput(ops::BuildOp(root, "TensorListFromTensor", {x, ops::Input({2})},
                                           with_shape_type));
  Output item = ops::AsOutput(
      ops::BuildOp(root, "TensorListGetItem", {list, ops::Input(2), ops::Input({2})}, elements));
  Output reserved = ops::AsOutput(ops::BuildOp(
      root, "TensorListReserve", {ops::Input({2}), ops::Input(3)}, with_shape_type));
  Output set = ops::AsOutput(ops::BuildOp(
      root, "TensorListSetItem",
      {reserved, ops::Input(1), ops::Mul(root, item, ops::Input::Like(3.0))}, elements));
  AttrMap stack_attrs = elements;
  stack_attrs["num_elements"] = AttrValue::Int(3);
  Output stacked = ops::AsOutput(
      ops::BuildOp(root, "TensorListStack", {set, ops::Input({2})}, stack_attrs));
  Output empty = ops::AsOutput(ops::BuildOp(root, "EmptyTensorList",
                                            {ops::Input({2}), ops::Input(-1)}, with_shape_type));
  Output first = ops::AsOutput(
      ops::BuildOp(root, "TensorListGetItem", {list, ops::Input(0), ops::Input({2})}, elements));
  Output pushed =
      ops::AsOutput(ops::BuildOp(root, "TensorListPushBack", {empty, first}, elements));
  Node* popped = ops::BuildOp(root, "TensorListPopBack", {pushed, ops::Input({2})}, elements);
  ASSERT_NE(popped, nullptr) << root.status().message();
  Output y = ops::Add(root, ops::Sum(root, ops::Square(root, stacked), ops::Input({0, 1})),
                      ops::Sum(root, Output(popped, 1), ops::Input({0})));
  std::vector<Output> grads;
  Status st = AddSymbolicGradients(root, {y}, {x}, {}, &grads);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_TRUE(grads[0].valid());
  auto session = Session::Create(root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  Tensor xv = Floats({1, 2, 3, 4, 5, 6}, {3, 2});
  auto out = (*session)->Run({{"x", xv}}, {grads[0].name()}, {});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // d/dx: row 2 gets 2 * 9 * x (the squared, tripled item), row 0 gets ones (the popped item).
  EXPECT_EQ((*out)[0].DebugString(), "float [3,2] [1, 1, 0, 0, 90, 108]");
}

}  // namespace
}  // namespace xlens::graph
