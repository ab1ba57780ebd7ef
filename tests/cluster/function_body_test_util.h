// A function body (_Arg -> ops -> _Retval) built node by node, for the op lowerings' tests: it
// runs op by op with the executor's kernels (checked against TensorFlow elsewhere), and lowered
// to HLO on the reference evaluator and the CPU backend, whose outputs the tests compare.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "compiler/cluster/tf2xla/xla_compiler.h"
#include "compiler/graph/cc_ops.h"
#include "compiler/graph/executor.h"
#include "compiler/graph/scope.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal_comparison.h"
#include "compiler/runtime/cpu_compiler.h"

namespace xlens::cluster::cluster_testing {

class FunctionBody {
 public:
  explicit FunctionBody(std::string module_name = "test_module")
      : module_name_(std::move(module_name)) {}

  graph::Scope root = graph::Scope::NewRootScope();
  std::vector<graph::Tensor> values;  // each argument's value, by index
  std::vector<XlaArgument> args;

  // A run-time argument (an entry parameter).
  graph::Output Arg(graph::Tensor value) {
    return AddArg(std::move(value), XlaArgument::Kind::kParameter);
  }
  // A compile-time constant argument.
  graph::Output ConstArg(graph::Tensor value) {
    return AddArg(std::move(value), XlaArgument::Kind::kConstant);
  }
  // The body's next output.
  void Ret(graph::Output out) {
    const int index = num_rets_++;
    root.WithOpName("retval_" + std::to_string(index))
        .AddNode("_Retval", {out},
                 {{"T", graph::AttrValue::Type(out.type())}, {"index", graph::AttrValue::Int(index)}});
  }
  // Output `output` of a new `op` node.
  graph::Output Op(const std::string& op, const std::vector<graph::ops::Input>& inputs,
                   graph::AttrMap attrs, int output = 0) {
    graph::Node* n = graph::ops::BuildOp(root, op, inputs, std::move(attrs));
    return n == nullptr ? graph::Output() : graph::Output(n, output);
  }

  // The outputs of the body run op by op by the executor.
  StatusOr<std::vector<graph::Tensor>> RunOpByOp() const {
    RETURN_IF_ERROR(root.status());
    ASSIGN_OR_RETURN(auto executor, graph::Executor::Create(root.graph(), {}));
    return executor->Run(values);
  }
  // The body lowered to an HLO module.
  StatusOr<XlaCompilationResult> Compile() const {
    RETURN_IF_ERROR(root.status());
    XlaCompileOptions options;
    options.module_name = module_name_;
    return CompileGraphToHlo(*root.graph(), args, options);
  }
  // The entry parameters of `compiled`: the values of the arguments it takes, in its order.
  StatusOr<std::vector<Literal>> Params(const XlaCompilationResult& compiled) const {
    std::vector<Literal> params;
    for (int arg : compiled.input_mapping) {
      ASSIGN_OR_RETURN(Literal param, values[arg].ToLiteral());
      params.push_back(std::move(param));
    }
    return params;
  }

 private:
  graph::Output AddArg(graph::Tensor value, XlaArgument::Kind kind) {
    const int index = static_cast<int>(values.size());
    XlaArgument arg;
    arg.kind = kind;
    arg.dtype = value.dtype();
    arg.shape = value.dims();
    if (kind == XlaArgument::Kind::kConstant) arg.constant_value = value;
    args.push_back(arg);
    graph::Node* n = root.WithOpName("arg_" + std::to_string(index))
                         .AddNode("_Arg", {},
                                  {{"T", graph::AttrValue::Type(value.dtype())},
                                   {"index", graph::AttrValue::Int(index)}});
    values.push_back(std::move(value));
    return graph::Output(n, 0);
  }

  std::string module_name_;
  int num_rets_ = 0;
};

// `compiled`'s module compiled for the CPU backend and run on `params`.
inline StatusOr<Literal> RunOnCpu(XlaCompilationResult compiled, const std::vector<Literal>& params) {
  ASSIGN_OR_RETURN(auto executable, runtime::CompileForCpu(std::move(compiled.module), {}));
  return executable->Execute(params);
}

// A module's outputs, one literal each: the root tuple's elements, or a single output's value (the
// root itself).
inline std::vector<Literal> SplitOutputs(Literal root) {
  if (!root.shape().IsTuple()) {
    std::vector<Literal> one;
    one.push_back(std::move(root));
    return one;
  }
  return std::move(root.tuple_elements());
}

// What a body gave run both ways.
struct BodyRuns {
  std::vector<graph::Tensor> expected;  // the executor's outputs
  std::vector<Literal> evaluated;       // the reference evaluator's, one per output
  XlaCompilationResult compiled;        // the module the evaluator ran
  std::string hlo;                      // its text
};

// Runs `body` op by op, and lowered to HLO on the reference evaluator and (lowered again) on the
// CPU backend, which must give the evaluator's outputs within `cpu_tolerance`. Call it under
// ASSERT_NO_FATAL_FAILURE: after a fatal failure `runs` is incomplete.
inline void RunBody(const FunctionBody& body, double cpu_tolerance, BodyRuns* runs) {
  ASSERT_TRUE(body.root.ok()) << body.root.status().message();
  auto expected = body.RunOpByOp();
  ASSERT_TRUE(expected.ok()) << expected.status().message();
  runs->expected = std::move(*expected);
  auto compiled = body.Compile();
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  runs->compiled = std::move(*compiled);
  runs->hlo = runs->compiled.module->ToString();
  auto params = body.Params(runs->compiled);
  ASSERT_TRUE(params.ok()) << params.status().message();
  auto evaluated = EvaluateModule(*runs->compiled.module, *params);
  ASSERT_TRUE(evaluated.ok()) << evaluated.status().message() << "\n" << runs->hlo;
  auto again = body.Compile();
  ASSERT_TRUE(again.ok()) << again.status().message();
  auto ran = RunOnCpu(std::move(*again), *params);
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  Status same = ExpectLiteralNear(*evaluated, *ran, ErrorSpec{cpu_tolerance, cpu_tolerance});
  EXPECT_TRUE(same.ok()) << "CPU backend: " << same.message() << "\n" << runs->hlo;
  runs->evaluated = SplitOutputs(std::move(*evaluated));
  ASSERT_EQ(runs->evaluated.size(), runs->expected.size());
}

// Every output of the module the executor's, bit for bit.
inline void ExpectIdenticalOutputs(BodyRuns& runs) {
  for (size_t i = 0; i < runs.evaluated.size() && i < runs.expected.size(); ++i) {
    auto got = graph::Tensor::FromLiteral(std::move(runs.evaluated[i]));
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(got->Identical(runs.expected[i]))
        << "output " << i << ": " << got->DebugString() << " vs " << runs.expected[i].DebugString();
  }
}

// The check of the lowerings to buffers (lists, arrays, stacks): the executor, the evaluator and
// the CPU backend give the same outputs, the module reading and writing rows at run-time indices.
inline void CheckBufferBody(const FunctionBody& body) {
  BodyRuns runs;
  ASSERT_NO_FATAL_FAILURE(RunBody(body, 1e-6, &runs));
  EXPECT_NE(runs.hlo.find("dynamic-slice("), std::string::npos) << runs.hlo;
  EXPECT_NE(runs.hlo.find("dynamic-update-slice("), std::string::npos) << runs.hlo;
  ExpectIdenticalOutputs(runs);
}

}  // namespace xlens::cluster::cluster_testing
