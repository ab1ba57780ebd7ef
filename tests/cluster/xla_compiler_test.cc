// CompileGraphToHlo: the module's interface (parameters in argument order, outputs then resource
// updates), resource variables checked against the op-by-op executor with a real ResourceMgr,
// and the errors a user can meet, each one message naming the node.
#include "compiler/cluster/tf2xla/xla_compiler.h"

#include <gtest/gtest.h>

#include <random>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/executor.h"
#include "compiler/graph/function.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/scope.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/parser.h"
#include "cluster_test_util.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::DataType;
using graph::Output;
using graph::Scope;
using graph::Tensor;
namespace ops = graph::ops;

Output Arg(const Scope& root, int index, DataType dtype) {
  return Output(root.WithOpName("arg_" + std::to_string(index))
                    .AddNode("_Arg", {},
                             {{"T", AttrValue::Type(dtype)}, {"index", AttrValue::Int(index)}}),
                0);
}

void Ret(const Scope& root, int index, Output value) {
  root.WithOpName("retval_" + std::to_string(index))
      .AddNode("_Retval", {value},
               {{"T", AttrValue::Type(value.type())}, {"index", AttrValue::Int(index)}});
}

XlaArgument Param(DataType dtype, std::vector<int64_t> shape) {
  XlaArgument a;
  a.dtype = dtype;
  a.shape = std::move(shape);
  return a;
}

XlaArgument Resource(DataType dtype, std::vector<int64_t> shape, bool initialized = true) {
  XlaArgument a;
  a.kind = XlaArgument::Kind::kResource;
  a.dtype = dtype;
  a.shape = std::move(shape);
  a.initialized = initialized;
  return a;
}

Tensor Random(std::vector<int64_t> dims, std::mt19937& rng) {
  Tensor t(graph::DT_FLOAT, std::move(dims));
  std::uniform_real_distribution<float> d(-1, 1);
  for (auto& v : t.flat<float>()) v = d(rng);
  return t;
}

void ExpectNear(const Literal& got, const Tensor& want, double tol = 1e-6) {
  auto t = Tensor::FromLiteral(got);
  ASSERT_TRUE(t.ok());
  ASSERT_EQ(t->dims(), want.dims());
  for (int64_t i = 0; i < want.num_elements(); ++i) {
    EXPECT_NEAR(t->GetAsDouble(i), want.GetAsDouble(i), tol * (1 + std::abs(want.GetAsDouble(i))))
        << "element " << i;
  }
}

// The linear-regression training step of the corpus in miniature: read W and b, compute the
// loss and its gradient by hand-built ops, apply gradient descent to both, and return the loss.
// Arguments: 0 x, 1 y, 2 W (resource), 3 b (resource).
std::shared_ptr<graph::Graph> TrainStep() {
  Scope root = Scope::NewRootScope();
  Output x = Arg(root, 0, graph::DT_FLOAT);
  Output y = Arg(root, 1, graph::DT_FLOAT);
  Output w = Arg(root, 2, graph::DT_RESOURCE);
  Output b = Arg(root, 3, graph::DT_RESOURCE);
  Output wv = ops::ReadVariableOp(root.WithOpName("w_read"), w, graph::DT_FLOAT);
  Output bv = ops::ReadVariableOp(root.WithOpName("b_read"), b, graph::DT_FLOAT);
  Output pred = ops::Add(root, ops::Mul(root, x, wv), bv);
  Output err = ops::Sub(root, pred, y);
  Output loss = ops::Mean(root.WithOpName("loss"), ops::Square(root, err), {0});
  Output two_err = ops::Mul(root, err, ops::Const(root, 2.0f));
  Output gw = ops::Mean(root, ops::Mul(root, two_err, x), {0});
  Output gb = ops::Mean(root, two_err, {0});
  Output lr = ops::Const(root.WithOpName("lr"), 0.1f);
  graph::Node* uw = ops::ResourceApplyGradientDescent(root.WithOpName("update_w"), w, lr, gw);
  graph::Node* ub = ops::ResourceApplyGradientDescent(root.WithOpName("update_b"), b, lr, gb);
  // The loss is fetched after the updates are ordered, as TF1's train_op fetch does.
  Ret(root.WithControlDependencies(std::vector<graph::Node*>{uw, ub}), 0, loss);
  EXPECT_TRUE(root.ok()) << root.status().message();
  return root.graph_as_shared_ptr();
}

TEST(XlaCompilerTest, ResourceUpdatesAreExtraOutputsAndMatchTheExecutor) {
  std::shared_ptr<graph::Graph> g = TrainStep();
  std::mt19937 rng(1);
  Tensor x = Random({8}, rng), y = Random({8}, rng);
  Tensor w0 = Tensor::Scalar<float>(graph::DT_FLOAT, 0.7f);
  Tensor b0 = Tensor::Scalar<float>(graph::DT_FLOAT, -0.3f);

  auto compiled = CompileGraphToHlo(
      *g, {Param(graph::DT_FLOAT, {8}), Param(graph::DT_FLOAT, {8}), Resource(graph::DT_FLOAT, {}),
           Resource(graph::DT_FLOAT, {})},
      {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->input_mapping, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(compiled->resource_updates, (std::vector<int>{2, 3}));
  ASSERT_EQ(compiled->output_dtypes.size(), 3u);
  EXPECT_EQ(compiled->module->entry_computation_layout()->ToString(),
            "(f32[8]{0}, f32[8]{0}, f32[], f32[])->(f32[], f32[], f32[])");

  // The executor, with the variables in a ResourceMgr.
  graph::ResourceMgr resources;
  auto var_w = resources.LookupOrCreate("", "w", graph::DT_FLOAT, graph::PartialShape(std::vector<int64_t>{}));
  auto var_b = resources.LookupOrCreate("", "b", graph::DT_FLOAT, graph::PartialShape(std::vector<int64_t>{}));
  var_w->value = w0.Clone();
  var_b->value = b0.Clone();
  graph::ExecutorOptions options;
  options.resources = &resources;
  auto executor = graph::Executor::Create(g.get(), options);
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  graph::ResourceHandle hw, hb;
  hw.name = "w";
  hb.name = "b";
  auto expected = (*executor)->Run({x, y, Tensor::ResourceScalar(hw), Tensor::ResourceScalar(hb)});
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  std::vector<Literal> params;
  for (const Tensor& t : {x, y, w0, b0}) params.push_back(*t.ToLiteral());
  auto result = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(result.ok()) << result.status().message();
  ExpectNear(result->tuple_element(0), (*expected)[0]);
  ExpectNear(result->tuple_element(1), var_w->value);
  ExpectNear(result->tuple_element(2), var_b->value);
}

// Runs a body whose arguments are values and variables both ways: the executor with the
// variables in a ResourceMgr, the module on the evaluator; compares the results and every
// variable the body updated.
void CheckWithVariables(const graph::Graph& g, const std::vector<Tensor>& values,
                        const std::vector<bool>& is_variable, double tol = 1e-6) {
  std::vector<XlaArgument> args;
  graph::ResourceMgr resources;
  std::vector<Tensor> executor_args;
  std::vector<std::shared_ptr<graph::Var>> vars(values.size());
  for (size_t i = 0; i < values.size(); ++i) {
    if (is_variable[i]) {
      args.push_back(Resource(values[i].dtype(), values[i].dims()));
      const std::string name = "v" + std::to_string(i);
      vars[i] = resources.LookupOrCreate("", name, values[i].dtype(), values[i].shape());
      vars[i]->value = values[i].Clone();
      graph::ResourceHandle h;
      h.name = name;
      executor_args.push_back(Tensor::ResourceScalar(h));
    } else {
      args.push_back(Param(values[i].dtype(), values[i].dims()));
      executor_args.push_back(values[i]);
    }
  }
  auto compiled = CompileGraphToHlo(g, args, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  graph::ExecutorOptions options;
  options.resources = &resources;
  auto executor = graph::Executor::Create(&g, options);
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  auto expected = (*executor)->Run(executor_args);
  ASSERT_TRUE(expected.ok()) << expected.status().message();

  std::vector<Literal> params;
  for (int arg : compiled->input_mapping) params.push_back(*values[arg].ToLiteral());
  auto result = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(result.ok()) << result.status().message();
  const size_t num_outputs = expected->size() + compiled->resource_updates.size();
  std::vector<const Literal*> outputs;
  if (num_outputs == 1) {
    outputs.push_back(&*result);
  } else {
    for (const Literal& l : result->tuple_elements()) outputs.push_back(&l);
  }
  ASSERT_EQ(outputs.size(), num_outputs);
  for (size_t i = 0; i < expected->size(); ++i) {
    SCOPED_TRACE("output " + std::to_string(i));
    ExpectNear(*outputs[i], (*expected)[i], tol);
  }
  for (size_t k = 0; k < compiled->resource_updates.size(); ++k) {
    const int arg = compiled->resource_updates[k];
    SCOPED_TRACE("variable " + std::to_string(arg));
    ASSERT_TRUE(is_variable[arg]);
    ExpectNear(*outputs[expected->size() + k], vars[arg]->value, tol);
  }
}

TEST(XlaCompilerTest, OptimizerUpdatesMatchTheKernels) {
  std::mt19937 rng(5);
  for (bool nesterov : {false, true}) {
    SCOPED_TRACE(nesterov ? "nesterov" : "plain");
    // Momentum: var, accum, then lr, grad, momentum.
    Scope root = Scope::NewRootScope();
    Output var = Arg(root, 0, graph::DT_RESOURCE), accum = Arg(root, 1, graph::DT_RESOURCE);
    Output grad = Arg(root, 2, graph::DT_FLOAT);
    ops::BuildOp(root.WithOpName("momentum"), "ResourceApplyMomentum",
                 {var, accum, ops::Const(root, 0.1f), grad, ops::Const(root, 0.9f)},
                 {{"use_nesterov", AttrValue::Bool(nesterov)}});
    ASSERT_TRUE(root.ok()) << root.status().message();
    CheckWithVariables(*root.graph(), {Random({3, 2}, rng), Random({3, 2}, rng), Random({3, 2}, rng)},
                       {true, true, false});

    // Adam: var, m, v, then beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad.
    Scope adam = Scope::NewRootScope();
    std::vector<ops::Input> inputs = {Arg(adam, 0, graph::DT_RESOURCE),
                                      Arg(adam, 1, graph::DT_RESOURCE),
                                      Arg(adam, 2, graph::DT_RESOURCE)};
    for (float c : {0.81f, 0.998f, 0.01f, 0.9f, 0.999f, 1e-7f}) inputs.push_back(ops::Const(adam, c));
    inputs.push_back(Arg(adam, 3, graph::DT_FLOAT));
    ops::BuildOp(adam.WithOpName("adam"), "ResourceApplyAdam", inputs,
                 {{"use_nesterov", AttrValue::Bool(nesterov)}});
    ASSERT_TRUE(adam.ok()) << adam.status().message();
    Tensor v = Random({4}, rng);
    for (auto& x : v.flat<float>()) x = x * x;  // a second moment is not negative
    CheckWithVariables(*adam.graph(), {Random({4}, rng), Random({4}, rng), v, Random({4}, rng)},
                       {true, true, true, false}, 1e-5);
  }
}

TEST(XlaCompilerTest, GathersAndInitializationChecksOnVariables) {
  std::mt19937 rng(9);
  Scope root = Scope::NewRootScope();
  Output table = Arg(root, 0, graph::DT_RESOURCE);
  Output ids = Arg(root, 1, graph::DT_INT32);
  Ret(root, 0, ops::AsOutput(ops::BuildOp(root.WithOpName("gather"), "ResourceGather", {table, ids},
                                          {{"dtype", AttrValue::Type(graph::DT_FLOAT)}})));
  Ret(root, 1, ops::AsOutput(ops::BuildOp(root.WithOpName("initialized"), "VarIsInitializedOp",
                                          {table})));
  ASSERT_TRUE(root.ok()) << root.status().message();
  CheckWithVariables(*root.graph(),
                     {Random({5, 3}, rng), Tensor::Vector<int32_t>(graph::DT_INT32, {4, 0, 4})},
                     {true, false});
}

TEST(XlaCompilerTest, AssignsAndReadsSeeTheLatestValue) {
  Scope root = Scope::NewRootScope();
  Output v = Arg(root, 0, graph::DT_RESOURCE);
  Output x = Arg(root, 1, graph::DT_FLOAT);
  graph::Node* assign = ops::AssignVariableOp(root.WithOpName("assign"), v, x);
  graph::Node* add = ops::BuildOp(root.WithOpName("assign_add").WithControlDependencies(
                                      std::vector<graph::Node*>{assign}),
                                  "AssignAddVariableOp", {v, x});
  graph::Node* sub = ops::BuildOp(root.WithOpName("assign_sub").WithControlDependencies(
                                      std::vector<graph::Node*>{add}),
                                  "AssignSubVariableOp",
                                  {v, ops::Const(root, std::vector<float>{1, 1, 1})});
  Output read = ops::ReadVariableOp(
      root.WithOpName("read").WithControlDependencies(std::vector<graph::Node*>{sub}), v,
      graph::DT_FLOAT);
  Ret(root, 0, read);
  ASSERT_TRUE(root.ok()) << root.status().message();
  // The variable starts uninitialized: it is no parameter, and the assignment initializes it.
  auto compiled = CompileGraphToHlo(
      *root.graph(), {Resource(graph::DT_FLOAT, {3}, false), Param(graph::DT_FLOAT, {3})}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->input_mapping, (std::vector<int>{1}));
  EXPECT_EQ(compiled->resource_updates, (std::vector<int>{0}));
  Tensor xv = Tensor::Vector<float>(graph::DT_FLOAT, {1, 2, 3});
  std::vector<Literal> params;
  params.push_back(*xv.ToLiteral());
  auto result = EvaluateModule(*compiled->module, params);
  ASSERT_TRUE(result.ok()) << result.status().message();
  Tensor want = Tensor::Vector<float>(graph::DT_FLOAT, {1, 3, 5});  // 2x - 1
  ExpectNear(result->tuple_element(0), want);
  ExpectNear(result->tuple_element(1), want);
}

TEST(XlaCompilerTest, ReadingAnUninitializedVariableNamesIt) {
  Scope root = Scope::NewRootScope();
  Output v = Arg(root.WithOpName("weights_0_arg"), 0, graph::DT_RESOURCE);
  Ret(root, 0, ops::ReadVariableOp(root.WithOpName("weights/read"), v, graph::DT_FLOAT));
  auto compiled = CompileGraphToHlo(*root.graph(), {Resource(graph::DT_FLOAT, {2}, false)}, {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("weights/read"), std::string::npos)
      << compiled.status().message();
  EXPECT_NE(compiled.status().message().find("uninitialized"), std::string::npos)
      << compiled.status().message();
}

TEST(XlaCompilerTest, AnOpWithoutALoweringIsNamed) {
  Scope root = Scope::NewRootScope();
  Output x = Arg(root, 0, graph::DT_INT32);
  Output s = ops::AsOutput(ops::BuildOp(root.WithOpName("to_string"), "AsString", {x}));
  Ret(root, 0, ops::AsOutput(ops::BuildOp(root.WithOpName("length"), "StringToNumber", {s})));
  ASSERT_TRUE(root.ok()) << root.status().message();
  auto compiled = CompileGraphToHlo(*root.graph(), {Param(graph::DT_INT32, {2})}, {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().message(), "no XLA lowering for op 'AsString' (node 'to_string')");
}

TEST(XlaCompilerTest, ACompileTimeConstantInputThatIsNotConstantIsNamed) {
  Scope root = Scope::NewRootScope();
  Output x = Arg(root, 0, graph::DT_FLOAT);
  Output axes = Arg(root, 1, graph::DT_INT32);
  Ret(root, 0, ops::Sum(root.WithOpName("total"), x, axes));
  ASSERT_TRUE(root.ok());
  auto compiled = CompileGraphToHlo(
      *root.graph(), {Param(graph::DT_FLOAT, {2, 3}), Param(graph::DT_INT32, {1})}, {});
  ASSERT_FALSE(compiled.ok());
  const std::string m = compiled.status().message();
  EXPECT_NE(m.find("node 'total' (Sum)"), std::string::npos) << m;
  EXPECT_NE(m.find("reduction_indices"), std::string::npos) << m;
  EXPECT_NE(m.find("compile-time constant"), std::string::npos) << m;

  // The same body compiles when the axes are given as a constant argument.
  XlaArgument axes_arg;
  axes_arg.kind = XlaArgument::Kind::kConstant;
  axes_arg.dtype = graph::DT_INT32;
  axes_arg.shape = {1};
  axes_arg.constant_value = Tensor::Vector<int32_t>(graph::DT_INT32, {1});
  auto ok = CompileGraphToHlo(*root.graph(), {Param(graph::DT_FLOAT, {2, 3}), axes_arg}, {});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->output_shapes, (std::vector<std::vector<int64_t>>{{2}}));
}

TEST(XlaCompilerTest, ConstantsTooLargeToFoldAreBuiltInHlo) {
  // 2^22 elements: past what the host folds, so Fill becomes a broadcast in the module.
  Scope root = Scope::NewRootScope();
  Output big = ops::Fill(root.WithOpName("big"), {1024, 4096}, ops::Const(root, 0.5f));
  Ret(root, 0, ops::Sum(root.WithOpName("total"), big, {0, 1}));
  ASSERT_TRUE(root.ok()) << root.status().message();
  auto compiled = CompileGraphToHlo(*root.graph(), {}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  bool broadcast = false;
  for (const HloInstruction* i : compiled->module->entry_computation()->instructions()) {
    broadcast |= i->opcode() == HloOpcode::kBroadcast && i->metadata.op_name == "big";
  }
  EXPECT_TRUE(broadcast) << compiled->module->ToString();
  auto result = EvaluateModule(*compiled->module, {});
  ASSERT_TRUE(result.ok()) << result.status().message();
  EXPECT_EQ(result->GetAsDouble(0), 0.5 * 1024 * 4096);
}

TEST(XlaCompilerTest, ArgumentsThatDoNotFitTheBodyAreErrors) {
  Scope root = Scope::NewRootScope();
  Ret(root, 0, ops::Neg(root, Arg(root, 0, graph::DT_FLOAT)));
  auto wrong_type = CompileGraphToHlo(*root.graph(), {Param(graph::DT_INT32, {2})}, {});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.status().message().find("arg_0"), std::string::npos);
  auto too_few = CompileGraphToHlo(*root.graph(), {}, {});
  ASSERT_FALSE(too_few.ok());
  EXPECT_NE(too_few.status().message().find("index 0"), std::string::npos)
      << too_few.status().message();
}

TEST(XlaCompilerTest, ModuleTextRoundTripsThroughTheParser) {
  std::shared_ptr<graph::Graph> g = TrainStep();
  XlaCompileOptions options;
  options.module_name = "cluster_0__XlaCompiledKernel_true__XlaHasReferenceVars_false__"
                        "XlaNumConstantArgs_0__XlaNumResourceArgs_2_.1";
  auto compiled = CompileGraphToHlo(
      *g, {Param(graph::DT_FLOAT, {8}), Param(graph::DT_FLOAT, {8}), Resource(graph::DT_FLOAT, {}),
           Resource(graph::DT_FLOAT, {})},
      options);
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  const std::string text = compiled->module->ToString();
  auto parsed = ParseHloModule(text);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message() << "\n" << text;
  EXPECT_EQ((*parsed)->ToString(), text);
  EXPECT_NE(text.find("op_name=\"XLA_Args\""), std::string::npos);
  EXPECT_NE(text.find("op_name=\"XLA_Retvals\""), std::string::npos);
  EXPECT_NE(text.find("op_type=\"ResourceApplyGradientDescent\" op_name=\"update_w\""),
            std::string::npos)
      << text;
}

TEST(XlaCompilerTest, FunctionBodiesComeFromTheLibrary) {
  Scope root = Scope::NewRootScope();
  Ret(root, 0, ops::Exp(root.WithOpName("e"), Arg(root, 0, graph::DT_FLOAT)));
  auto fdef = graph::GraphToFunctionDef(*root.graph(), "cluster_7");
  ASSERT_TRUE(fdef.ok()) << fdef.status().message();
  graph::FunctionDefLibrary library;
  library.function.push_back(*fdef);
  auto body = FunctionBodyForCompilation(library, "cluster_7");
  ASSERT_TRUE(body.ok()) << body.status().message();
  auto compiled = CompileGraphToHlo(*(*body)->graph, {Param(graph::DT_FLOAT, {4})}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->module->entry_computation()->root_instruction()->opcode(), HloOpcode::kExp);
  EXPECT_FALSE(FunctionBodyForCompilation(library, "cluster_8").ok());
}

// A function call inside a compiled function is lowered in place: Keras's jit_compile
// `_conv_xla` in miniature. `scale` (called by StatefulPartitionedCall, marked _XlaMustCompile as
// Keras marks it) reads the caller's variable, adds x * v to it, and calls `twice` by op name;
// the module has no call left, its numbers and the variable's update are the executor's, and
// the inlined instructions are named as TensorFlow's inlining names the nodes.
constexpr char kCallGraph[] = R"pb(
node { name: "x" op: "_Arg" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "v" op: "_Arg" attr { key: "T" value { type: DT_RESOURCE } } attr { key: "index" value { i: 1 } } }
node { name: "call" op: "StatefulPartitionedCall" input: "v" input: "x"
  attr { key: "Tin" value { list { type: DT_RESOURCE type: DT_FLOAT } } }
  attr { key: "Tout" value { list { type: DT_FLOAT } } }
  attr { key: "_XlaMustCompile" value { b: true } }
  attr { key: "f" value { func { name: "scale" } } } }
node { name: "out" op: "Neg" input: "call" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "ret" op: "_Retval" input: "out" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
library {
  function {
    signature { name: "scale" input_arg { name: "h" type: DT_RESOURCE } input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "y" type: DT_FLOAT } is_stateful: true }
    node_def { name: "read" op: "ReadVariableOp" input: "h" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "mul" op: "Mul" input: "read:value:0" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "add" op: "AssignAddVariableOp" input: "h" input: "mul:z:0" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "inner" op: "twice" input: "mul:z:0" input: "^add" }
    ret { key: "y" value: "inner:y:0" }
  }
  function {
    signature { name: "twice" input_arg { name: "b" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "sum" op: "AddV2" input: "b" input: "b" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "sum:z:0" }
  }
}
)pb";

TEST(XlaCompilerTest, FunctionCallsAreLoweredInPlace) {
  std::unique_ptr<graph::Graph> g = cluster_testing::LoadGraph(kCallGraph);
  ASSERT_NE(g, nullptr);
  std::mt19937 rng(9);
  CheckWithVariables(*g, {Random({5}, rng), Random({5}, rng)}, {false, true});
  auto compiled = CompileGraphToHlo(
      *g, {Param(graph::DT_FLOAT, {5}), Resource(graph::DT_FLOAT, {5})}, {});
  ASSERT_TRUE(compiled.ok()) << compiled.status().message();
  EXPECT_EQ(compiled->resource_updates, (std::vector<int>{1}));
  EXPECT_EQ(compiled->module->computations().size(), 1u);
  const std::string text = compiled->module->ToString();
  EXPECT_NE(text.find("op_type=\"Mul\" op_name=\"call/mul\""), std::string::npos) << text;
  EXPECT_NE(text.find("op_type=\"AddV2\" op_name=\"call/inner/sum\""), std::string::npos) << text;
}

TEST(XlaCompilerTest, AFunctionThatCallsItselfIsAnErrorNamingIt) {
  std::unique_ptr<graph::Graph> g = cluster_testing::LoadGraph(R"pb(
node { name: "x" op: "_Arg" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "call" op: "PartitionedCall" input: "x"
  attr { key: "Tin" value { list { type: DT_FLOAT } } } attr { key: "Tout" value { list { type: DT_FLOAT } } }
  attr { key: "f" value { func { name: "forever" } } } }
node { name: "ret" op: "_Retval" input: "call" attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
library { function {
  signature { name: "forever" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
  node_def { name: "again" op: "forever" input: "a" }
  ret { key: "y" value: "again:y:0" } } }
)pb");
  ASSERT_NE(g, nullptr);
  auto compiled = CompileGraphToHlo(*g, {Param(graph::DT_FLOAT, {2})}, {});
  ASSERT_FALSE(compiled.ok());
  EXPECT_NE(compiled.status().message().find("node 'call' (PartitionedCall): in function 'forever'"),
            std::string::npos)
      << compiled.status().message();
  EXPECT_NE(compiled.status().message().find("calls nest deeper than"), std::string::npos)
      << compiled.status().message();
}

}  // namespace
}  // namespace xlens::cluster
