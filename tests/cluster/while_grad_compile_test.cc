// A While's gradient (graph/grads/while_grad.cc) compiled as one function, as --jit=compile
// does: the accumulating forward loop and the backward loop that pops its lists lower to XLA
// whiles over buffers (the lists' sizes known from the forward trip count), and the compiled
// module gives the executor's numbers.
#include <gtest/gtest.h>

#include "compiler/graph/gradients.h"
#include "function_body_test_util.h"
#include "tests/graph/while_test_util.h"

namespace xlens::cluster {
namespace {

using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

Tensor Values(std::vector<int64_t> dims, float scale) {
  Tensor t(graph::DT_FLOAT, dims);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    t.flat<float>()[i] = scale * static_cast<float>((i * 7) % 5 - 2);
  }
  return t;
}

// Arguments in, `build`'s loss and its gradients out; run by the executor and compiled for the
// CPU, the two agree.
void CheckCompiledGradient(
    const std::vector<Tensor>& values,
    const std::function<Output(const Scope&, const std::vector<Output>&)>& build) {
  cluster_testing::FunctionBody body("while_grad");
  std::vector<Output> xs;
  for (const Tensor& value : values) xs.push_back(body.Arg(value));
  Output loss = build(body.root, xs);
  std::vector<Output> grads;
  ASSERT_TRUE(graph::AddSymbolicGradients(body.root, {loss}, xs, {}, &grads).ok());
  body.Ret(loss);
  for (const Output& grad : grads) body.Ret(grad);
  ASSERT_TRUE(body.root.ok()) << body.root.status().message();

  auto expected = body.RunOpByOp();
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  auto compiled = body.Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  auto params = body.Params(*compiled);
  ASSERT_TRUE(params.ok()) << params.status().message();
  auto ran = cluster_testing::RunOnCpu(std::move(*compiled), *params);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  std::vector<Literal> outputs = cluster_testing::SplitOutputs(std::move(*ran));
  ASSERT_EQ(outputs.size(), expected->size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    auto got = Tensor::FromLiteral(std::move(outputs[i]));
    ASSERT_TRUE(got.ok());
    const Tensor& want = (*expected)[i];
    ASSERT_EQ(got->dims(), want.dims()) << "output " << i;
    for (int64_t k = 0; k < want.num_elements(); ++k) {
      EXPECT_NEAR(got->GetAsDouble(k), want.GetAsDouble(k),
                  1e-5 * std::max(1.0, std::abs(want.GetAsDouble(k))))
          << "output " << i << "[" << k << "]";
    }
  }
}

TEST(WhileGradCompileTest, RecurrenceGradientCompiles) {
  CheckCompiledGradient({Values({2, 3}, 0.2f), Values({3, 3}, 0.3f), Values({2, 3}, 0.1f)},
                        [](const Scope& s, const std::vector<Output>& x) {
                          Output v = graph::testing::Recurrence(s, x[0], x[1], x[2]);
                          return ops::Sum(s, ops::Mul(s, v, v), ops::Input({0, 1}));
                        });
}

// The trip count is computed from the values (at most 20, as TF2's while_loop writes
// maximum_iterations: a counter and its limit as the first loop variables, the cond their
// LogicalAnd with the user's): the backward loop runs as many times as the forward one did,
// which only the run knows.
TEST(WhileGradCompileTest, ComputedTripCountGradientCompiles) {
  Tensor v0(graph::DT_FLOAT, {3}), x(graph::DT_FLOAT, {3});
  for (int i = 0; i < 3; ++i) {
    v0.flat<float>()[i] = 0.2f + 0.25f * static_cast<float>(i);
    x.flat<float>()[i] = 0.6f + 0.1f * static_cast<float>(i);
  }
  CheckCompiledGradient({v0, x}, [](const Scope& s, const std::vector<Output>& a) {
    graph::Node* loop = graph::testing::While(
        s, {ops::Const(s, int32_t{0}), ops::Const(s, int32_t{20}), a[0], a[1]},
        [](const Scope& c, const std::vector<Output>& v) {
          Output sum = ops::Sum(c, v[2], ops::Input(0));
          Output more = ops::Less(c, sum, ops::Input::Like(10.0));
          return std::vector<Output>{ops::AsOutput(ops::BuildOp(
              c, "LogicalAnd", {ops::Less(c, v[0], v[1]), more}))};
        },
        [](const Scope& b, const std::vector<Output>& v) {
          Output next = ops::Add(b, ops::Mul(b, v[2], ops::Input::Like(1.5)),
                                 ops::Mul(b, v[3], v[3]));
          return std::vector<Output>{ops::Add(b, v[0], ops::Input(1)), v[1], next, v[3]};
        });
    Output v = Output(loop, 2);
    return ops::Sum(s, ops::Mul(s, v, v), ops::Input({0}));
  });
}

// A TensorList written in the loop (a TF2 TensorArray's form) is a loop variable: the forward
// loop accumulates its state, a list of lists.
TEST(WhileGradCompileTest, ListLoopVariableGradientCompiles) {
  CheckCompiledGradient(
      {Values({2, 3}, 0.2f), Values({3, 3}, 0.3f)},
      [](const Scope& s, const std::vector<Output>& x) {
        Output stacked = graph::testing::ListLoop(s, x[0], x[1], graph::DT_FLOAT);
        return ops::Sum(s, ops::Mul(s, stacked, stacked), ops::Input({0, 1, 2}));
      });
}

}  // namespace
}  // namespace xlens::cluster
