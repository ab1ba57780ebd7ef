// The optimizer updates change the variable in place as TensorFlow's do: the expected values
// are TensorFlow 2.21's (ResourceApplyAdam / ResourceApplyMomentum run on the same numbers).
// Reference variables are found through the VariableV2 node feeding the op.
#include <gtest/gtest.h>

#include "compiler/graph/ops/register_ops.h"
#include "op_family_test_util.h"

namespace xlens::graph {
namespace {

class TrainingOpsTest : public ::testing::Test {
 protected:
  TrainingOpsTest() {
    RegisterMathOps(registry_);
    RegisterTrainingOps(registry_);
    // VariableV2 belongs to the state ops; its signature is enough here.
    REGISTER_OP(registry_, "VariableV2")
        .Output("ref: Ref(dtype)")
        .Attr("shape: shape")
        .Attr("dtype: type")
        .Attr("container: string = ''")
        .Attr("shared_name: string = ''")
        .SetIsStateful()
        .SetShapeFn(shape_fn::UnknownShape);
  }

  Tensor Vec(std::vector<float> v) { return Tensor::Vector<float>(DT_FLOAT, v); }
  Tensor Scalar(float v) { return Tensor::Scalar<float>(DT_FLOAT, v); }
  std::shared_ptr<Variable> NewVariable(const std::string& name, std::vector<float> v) {
    auto var = resources_.LookupOrCreate("", name, DT_FLOAT, PartialShape({3}));
    var->value = Vec(v);
    return var;
  }
  static void ExpectNear(const Tensor& t, std::vector<float> want) {
    ASSERT_EQ(t.num_elements(), static_cast<int64_t>(want.size()));
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_NEAR(t.flat<float>()[i], want[i], 2e-7f * std::max(1.0f, std::abs(want[i]))) << i;
  }

  OpRegistry registry_;
  ResourceMgr resources_;
};

TEST_F(TrainingOpsTest, ApplyGradientDescentUpdatesTheVariableBehindTheRef) {
  testing::LocalKernelRunner runner(&registry_);
  auto var_node = runner.AddNode("VariableV2", {{"shape", AttrValue::Shape(PartialShape({3}))},
                                                {"dtype", AttrValue::Type(DT_FLOAT)}}, "w");
  ASSERT_TRUE(var_node.ok()) << var_node.status().message();
  auto apply = runner.AddNode("ApplyGradientDescent", {{"T", AttrValue::Type(DT_FLOAT)}}, "sgd");
  ASSERT_TRUE(apply.ok()) << apply.status().message();
  runner.graph().AddEdge(*var_node, 0, *apply, 0);
  auto w = NewVariable("w", {1, 2, 3});
  const Tensor before = w->value;  // a reader's copy must keep its value
  auto out = runner.Run(**apply, {w->value, Scalar(0.5f), Vec({2, -4, 1})}, &resources_);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectNear(w->value, {0, 4, 2.5});
  ExpectNear((*out)[0], {0, 4, 2.5});
  ExpectNear(before, {1, 2, 3});

  auto bad = runner.Run(**apply, {w->value, Scalar(0.5f), Vec({1, 2})}, &resources_);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message().rfind("node 'sgd' (ApplyGradientDescent): var and delta do "
                                         "not have the same shape[3] [2]", 0), 0u)
      << bad.status().message();
}

TEST_F(TrainingOpsTest, UninitializedRefVariableIsAnError) {
  testing::LocalKernelRunner runner(&registry_);
  auto var_node = *runner.AddNode("VariableV2", {{"shape", AttrValue::Shape(PartialShape({3}))},
                                                 {"dtype", AttrValue::Type(DT_FLOAT)}}, "w");
  auto apply = *runner.AddNode("ApplyGradientDescent", {{"T", AttrValue::Type(DT_FLOAT)}}, "sgd");
  runner.graph().AddEdge(var_node, 0, apply, 0);
  auto out = runner.Run(*apply, {Vec({1, 2, 3}), Scalar(0.5f), Vec({2, -4, 1})}, &resources_);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "node 'sgd' (ApplyGradientDescent): Attempting to use uninitialized value w");
}

Tensor Handle(const std::string& name) {
  ResourceHandle h;
  h.name = name;
  h.dtype = DT_FLOAT;
  return Tensor::ResourceScalar(h);
}

TEST_F(TrainingOpsTest, ResourceApplyAdamMatchesTensorFlow) {
  testing::LocalKernelRunner runner(&registry_);
  auto node = *runner.AddNode("ResourceApplyAdam", {{"T", AttrValue::Type(DT_FLOAT)}}, "adam");
  auto var = NewVariable("v", {1, -2, 3});
  auto m = NewVariable("m", {0.1f, 0.2f, -0.3f});
  auto s = NewVariable("s", {0.01f, 0.02f, 0.03f});
  auto out = runner.Run(*node,
                        {Handle("v"), Handle("m"), Handle("s"), Scalar(0.9f), Scalar(0.999f),
                         Scalar(0.01f), Scalar(0.9f), Scalar(0.999f), Scalar(1e-7f),
                         Vec({0.5f, -1, 2})},
                        &resources_);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectNear(var->value, {0.9956250190734863f, -2.001746654510498f, 3.0012009143829346f});
  ExpectNear(m->value, {0.14000001549720764f, 0.07999996840953827f, -0.06999996304512024f});
  ExpectNear(s->value, {0.010239996947348118f, 0.0209799874573946f, 0.033969946205616f});
}

TEST_F(TrainingOpsTest, ResourceApplyMomentumNesterovMatchesTensorFlow) {
  testing::LocalKernelRunner runner(&registry_);
  auto node = *runner.AddNode("ResourceApplyMomentum", {{"T", AttrValue::Type(DT_FLOAT)},
                                                        {"use_nesterov", AttrValue::Bool(true)}},
                              "momentum");
  auto var = NewVariable("v", {1, -2, 3});
  auto accum = NewVariable("a", {0.1f, 0.2f, -0.3f});
  auto out = runner.Run(*node, {Handle("v"), Handle("a"), Scalar(0.1f), Vec({0.5f, -1, 2}),
                                Scalar(0.9f)},
                        &resources_);
  ASSERT_TRUE(out.ok()) << out.status().message();
  ExpectNear(var->value, {0.8968999981880188f, -1.826200008392334f, 2.6442999839782715f});
  ExpectNear(accum->value, {0.5899999737739563f, -0.8199999928474426f, 1.7300000190734863f});
}

TEST_F(TrainingOpsTest, MissingResourceVariableIsAnError) {
  testing::LocalKernelRunner runner(&registry_);
  auto node = *runner.AddNode("ResourceApplyGradientDescent", {{"T", AttrValue::Type(DT_FLOAT)}},
                              "sgd");
  auto out = runner.Run(*node, {Handle("nope"), Scalar(0.1f), Vec({1, 2, 3})}, &resources_);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("node 'sgd' (ResourceApplyGradientDescent): Error while "
                                        "reading resource variable nope"),
            std::string::npos)
      << out.status().message();
}

}  // namespace
}  // namespace xlens::graph
