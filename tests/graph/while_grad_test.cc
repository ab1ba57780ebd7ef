// The gradient of a functional While (grads/while_grad.cc) on graphs built with the builder API:
// against finite differences of the loop itself and against TensorFlow's gradients of the same
// tf.while_loop under tf.GradientTape (the reference values below are TensorFlow 2.21's, from
// tests/graph/while_grad_reference.py).
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/function.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/gradients.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"
#include "gradient_checker.h"
#include "while_test_util.h"

namespace xlens::graph {
namespace {

using testing::GrowUntil;
using testing::Recurrence;
using testing::While;

TEST(WhileGradTest, RecurrenceAgainstFiniteDifferences) {
  testing::CheckGradient({"recurrence",
                          {{{2, 3}, -1, 1}, {{3, 3}, -1, 1}, {{2, 3}, -1, 1}},
                          [](const Scope& s, const std::vector<Output>& x) {
                            return Recurrence(s, x[0], x[1], x[2]);
                          }});
  testing::CheckGradient({"stateless recurrence",
                          {{{2, 3}, -1, 1}, {{3, 3}, -1, 1}, {{2, 3}, -1, 1}},
                          [](const Scope& s, const std::vector<Output>& x) {
                            return Recurrence(s, x[0], x[1], x[2], "StatelessWhile");
                          }});
}

TEST(WhileGradTest, ComputedTripCountAgainstFiniteDifferences) {
  testing::CheckGradient({"grow until",
                          {{{3}, 0.1, 0.9}, {{3}, 0.5, 1.0}},
                          [](const Scope& s, const std::vector<Output>& x) {
                            return GrowUntil(s, x[0], x[1]);
                          }});
}

// A loop inside a loop: the outer body's gradient builds the inner loop's.
TEST(WhileGradTest, NestedLoopAgainstFiniteDifferences) {
  testing::CheckGradient(
      {"nested",
       {{{2, 3}, -1, 1}, {{3, 3}, -1, 1}, {{2, 3}, -1, 1}},
       [](const Scope& s, const std::vector<Output>& x) {
         Node* outer = While(
             s, {ops::Const(s, int32_t{0}), x[0], x[1], x[2]},
             [](const Scope& c, const std::vector<Output>& a) {
               return std::vector<Output>{ops::Less(c, a[0], ops::Input(2))};
             },
             [](const Scope& b, const std::vector<Output>& a) {
               Output v = Recurrence(b, ops::Mul(b, a[1], a[1]), a[2], a[3]);
               return std::vector<Output>{ops::Add(b, a[0], ops::Input(1)), v, a[2], a[3]};
             });
         return Output(outer, 1);
       }});
}

// A loop that writes each step's state into a TensorList (what a TF2 tf.TensorArray in a
// tf.while_loop becomes): the list is a loop variable, and its gradient a list too.
TEST(WhileGradTest, ListWrittenInTheLoopAgainstFiniteDifferences) {
  testing::CheckGradient(
      {"list loop variable",
       {{{2, 3}, -1, 1}, {{3, 3}, -1, 1}},
       [](const Scope& s, const std::vector<Output>& x) {
         return testing::ListLoop(s, x[0], x[1], DT_DOUBLE);
       }});
}

Tensor Floats(std::vector<int64_t> dims, std::vector<float> values) {
  Tensor t(DT_FLOAT, dims);
  for (size_t i = 0; i < values.size(); ++i) t.SetFromDouble(static_cast<int64_t>(i), values[i]);
  return t;
}

void ExpectNear(const Tensor& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.num_elements(), static_cast<int64_t>(want.size())) << what;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_NEAR(got.GetAsDouble(static_cast<int64_t>(i)), want[i],
                2e-6 * std::max(1.0f, std::abs(want[i])))
        << what << "[" << i << "]";
  }
}

// A body that draws random numbers (a stateful op in a While, seeded afresh for each node): the
// gradient pops what the forward pass drew, and the loss is computed from that same pass, so for
// v = v0 * r1 * r2 * r3 the gradient with respect to v0 = 1 sums to the loss, in one run. A
// gradient that drew again, or a loss from another run of the loop, would not.
TEST(WhileGradTest, RandomBodyGetsTheGradientOfWhatItDrew) {
  Scope root = Scope::NewRootScope();
  Output v0 = ops::Placeholder(root.WithOpName("v0"), DT_FLOAT);
  Node* loop = While(
      root, {ops::Const(root, int32_t{0}), v0},
      [](const Scope& c, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Less(c, a[0], ops::Input(3))};
      },
      [](const Scope& b, const std::vector<Output>& a) {
        Output r = ops::AsOutput(ops::BuildOp(b, "RandomUniform", {ops::Input({4})},
                                              {{"dtype", AttrValue::Type(DT_FLOAT)},
                                               {"seed", AttrValue::Int(0)},
                                               {"seed2", AttrValue::Int(0)}}));
        return std::vector<Output>{ops::Add(b, a[0], ops::Input(1)), ops::Mul(b, a[1], r)};
      });
  Output loss = ops::Sum(root, Output(loop, 1), ops::Input({0}));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {v0}, {}, &grads).ok());
  auto session = Session::Create(root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  for (int run = 0; run < 2; ++run) {
    auto got =
        (*session)->Run({{"v0", Floats({4}, {1, 1, 1, 1})}}, {loss.name(), grads[0].name()});
    ASSERT_TRUE(got.ok()) << got.status().message();
    double sum = 0;
    for (int64_t i = 0; i < 4; ++i) sum += (*got)[1].GetAsDouble(i);
    EXPECT_NEAR((*got)[0].GetAsDouble(0), sum, 1e-6) << "run " << run;
  }
}

// d/d(v0, w, x) of sum(v * c) after four steps of the recurrence, as TensorFlow computes it.
TEST(WhileGradTest, RecurrenceMatchesTensorFlow) {
  Scope root = Scope::NewRootScope();
  Output v0 = ops::Placeholder(root.WithOpName("v0"), DT_FLOAT);
  Output w = ops::Placeholder(root.WithOpName("w"), DT_FLOAT);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output v = Recurrence(root, v0, w, x);
  Output c = ops::Const(root, Floats({2, 3}, {1.0f, -2.0f, 0.5f, 0.25f, 1.5f, -1.0f}));
  Output loss = ops::Sum(root, ops::Mul(root, v, c), ops::Input({0, 1}));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {v0, w, x}, {}, &grads).ok());
  auto session = Session::Create(root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  std::vector<float> w_values;
  for (int i = 0; i < 9; ++i) w_values.push_back(0.1f * static_cast<float>(i - 4));
  auto got = (*session)->Run(
      {{"v0", Floats({2, 3}, {0.1f, 0.2f, 0.3f, -0.4f, 0.5f, -0.6f})},
       {"w", Floats({3, 3}, w_values)},
       {"x", Floats({2, 3}, {0.3f, -0.2f, 0.1f, 0.05f, 0.0f, -0.1f})}},
      {v.name(), grads[0].name(), grads[1].name(), grads[2].name()});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectNear((*got)[0], {0.2359197735786438f, -0.24552184343338013f, 0.05820164084434509f,
                         0.01159173808991909f, -0.06047940254211426f, -0.1806928664445877f},
             "v");
  ExpectNear((*got)[1], {0.0028023815248161554f, -0.0042625898495316505f, -0.011327560991048813f,
                         0.028238510712981224f, 0.008356377482414246f, -0.011525755748152733f},
             "dv0");
  ExpectNear((*got)[2], {0.29330000281333923f, -0.4392717182636261f, 0.030032247304916382f,
                         -0.2661038935184479f, 0.3566717207431793f, -0.012879529967904091f,
                         0.1176488846540451f, -0.40185311436653137f, 0.15215805172920227f},
             "dw");
  ExpectNear((*got)[3], {1.0532701015472412f, -1.95380437374115f, 0.22910812497138977f,
                         -0.012046389281749725f, 1.3973965644836426f, -0.9019730091094971f},
             "dx");
}

// The trip count (4 here) comes from the loop's own values; a wrong count gives other numbers.
TEST(WhileGradTest, ComputedTripCountMatchesTensorFlow) {
  Scope root = Scope::NewRootScope();
  Output v0 = ops::Placeholder(root.WithOpName("v0"), DT_FLOAT);
  Output x = ops::Placeholder(root.WithOpName("x"), DT_FLOAT);
  Output v = GrowUntil(root, v0, x);
  Output loss = ops::Sum(root, ops::Mul(root, v, v), ops::Input({0}));
  std::vector<Output> grads;
  ASSERT_TRUE(AddSymbolicGradients(root, {loss}, {v0, x}, {}, &grads).ok());
  auto session = Session::Create(root.graph()->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto got = (*session)->Run({{"v0", Floats({3}, {0.2f, 0.7f, 0.4f})},
                              {"x", Floats({3}, {0.6f, 0.9f, 0.5f})}},
                             {v.name(), grads[0].name(), grads[1].name()});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ExpectNear((*got)[0], {2.385000228881836f, 6.2099995613098145f, 2.5375001430511475f}, "v");
  ExpectNear((*got)[1], {16.098751068115234f, 41.91749954223633f, 17.12812614440918f}, "dv0");
  ExpectNear((*got)[2], {27.18900489807129f, 106.19098663330078f, 24.106250762939453f}, "dx");
}

// A forward graph TensorFlow wrote (testdata/while_grad/generate.py: a TensorArray recurrence
// in a StatelessWhile, its lists loop variables, under maximum_iterations) differentiated here:
// TensorFlow's GradientTape gradient of the same loss.
TEST(WhileGradTest, TensorFlowsForwardGraphGetsTensorFlowsGradient) {
  const std::string dir = std::string(XLENS_TESTDATA_DIR) + "/while_grad/";
  auto def = ReadGraphDef(dir + "rnn_forward.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  auto graph = Graph::FromGraphDef(*def);
  ASSERT_TRUE(graph.ok()) << graph.status().message();
  Node* x = (*graph)->FindNode("x");
  Node* loss = (*graph)->FindNode("Identity");
  ASSERT_TRUE(x != nullptr && loss != nullptr);
  std::vector<Output> grads;
  Status st = AddSymbolicGradients(Scope::ForGraph(graph->get()), {Output(loss)}, {Output(x)},
                                   {}, &grads);
  ASSERT_TRUE(st.ok()) << st.message();
  auto session = Session::Create((*graph)->ToGraphDef());
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto x_value = ReadNpy(dir + "x.npy");
  auto want = ReadNpy(dir + "dloss_dx.npy");
  ASSERT_TRUE(x_value.ok() && want.ok());
  auto feed = Tensor::FromLiteral(std::move(*x_value));
  auto expected = Tensor::FromLiteral(std::move(*want));
  ASSERT_TRUE(feed.ok() && expected.ok());
  auto got = (*session)->Run({{"x", *feed}}, {grads[0].name()});
  ASSERT_TRUE(got.ok()) << got.status().message();
  ASSERT_EQ((*got)[0].dims(), expected->dims());
  for (int64_t i = 0; i < expected->num_elements(); ++i) {
    EXPECT_NEAR((*got)[0].GetAsDouble(i), expected->GetAsDouble(i), 2e-6) << i;
  }
}

}  // namespace
}  // namespace xlens::graph
