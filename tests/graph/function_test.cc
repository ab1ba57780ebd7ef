// Instantiating FunctionDefs into graphs: TensorFlow's own FunctionDefs (testdata/functions, from
// generate.py) run as graphs give TensorFlow's results; placeholders, list arguments and the
// FunctionDef input forms resolve as TensorFlow resolves them; bad functions are errors naming the
// function and the node.
#include "compiler/graph/function.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/executor.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "graph/call_chain_util.h"
#include "graph/function_test_util.h"
#include "graph/graph_test_util.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;
using testing::FunctionsDir;
using testing::LoadRuns;
using testing::MakeNode;
using testing::TensorsClose;

GraphDef Load(const std::string& name) {
  auto def = ReadGraphDef(FunctionsDir() + name + ".pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  return def.ok() ? *def : GraphDef{};
}

StatusOr<std::vector<Tensor>> RunBody(const FunctionBody& body, const std::vector<Tensor>& args) {
  ASSIGN_OR_RETURN(auto executor, Executor::Create(body.graph.get(), {}));
  return executor->Run(args);
}

NameAttrList Func(std::string name, AttrMap attrs = {}) {
  NameAttrList f;
  f.name = std::move(name);
  *f.attr = std::move(attrs);
  return f;
}

// TensorFlow's cond: with p true the result is the then-branch applied to x, with p false the
// else-branch. Each branch FunctionDef, instantiated and run alone, gives TensorFlow's number.
TEST(FunctionTest, TensorFlowBranchesGiveTensorFlowsResults) {
  GraphDef def = Load("cond");
  auto runs = LoadRuns(FunctionsDir(), "cond");
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  for (const auto& run : *runs) {
    Tensor x, p;
    for (const auto& [name, t] : run.feeds) (name == "x:0" ? x : p) = t;
    bool pred = p.flat<bool>()[0];
    auto body = InstantiateFunction(def.library, Func(pred ? "cond_true_4" : "cond_false_5"));
    ASSERT_TRUE(body.ok()) << body.status().message();
    ASSERT_EQ((*body)->arg_nodes.size(), 1u);
    ASSERT_EQ((*body)->ret_nodes.size(), 1u);
    EXPECT_EQ((*body)->arg_types[0], DT_FLOAT);
    EXPECT_EQ((*body)->ret_types[0], DT_FLOAT);
    auto got = RunBody(**body, {x});
    ASSERT_TRUE(got.ok()) << got.status().message();
    EXPECT_TRUE(TensorsClose((*got)[0], run.expected[0], 1)) << "pred=" << pred;
  }
}

TEST(FunctionTest, WhileBodyResolvesNodeOutputArgsAndPassThroughArgs) {
  // The body returns one argument unchanged ("while_mul_y": "while_mul_y_0") and reads node
  // outputs as "while/mul:z:0".
  GraphDef def = Load("while");
  const FunctionDef* body_def = nullptr;
  for (const FunctionDef& f : def.library.function) {
    if (f.signature.name.rfind("while_body", 0) == 0) body_def = &f;
  }
  ASSERT_NE(body_def, nullptr);
  auto body = InstantiateFunctionDef(*body_def, {}, def.library);
  ASSERT_TRUE(body.ok()) << body.status().message();
  ASSERT_EQ((*body)->arg_nodes.size(), 5u);
  ASSERT_EQ((*body)->ret_nodes.size(), 5u);
  Tensor v = Tensor::Vector<float>(DT_FLOAT, {1.0f, 2.0f});
  Tensor y = Tensor::Vector<float>(DT_FLOAT, {0.5f, 3.0f});
  auto got = RunBody(**body, {Tensor::Scalar<int32_t>(DT_INT32, 2),
                              Tensor::Scalar<int32_t>(DT_INT32, -1),
                              Tensor::Scalar<int32_t>(DT_INT32, 7), v, y});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0].flat<int32_t>()[0], 3);   // loop counter + 1
  EXPECT_EQ((*got)[1].flat<int32_t>()[0], -1);  // maximum iterations unchanged
  EXPECT_EQ((*got)[2].flat<int32_t>()[0], 8);   // i + 1
  EXPECT_EQ((*got)[3].flat<float>()[0], 1.0f * 0.5f + 0.5f);
  EXPECT_EQ((*got)[3].flat<float>()[1], 2.0f * 3.0f + 0.5f);
  EXPECT_TRUE((*got)[4].Identical(y));
}

FunctionDef IdentityFunction() {
  // f(x: T) -> (y: T) { id = Identity[T=$T](x); y = id:output:0 }
  FunctionDef f;
  f.signature.name = "Id";
  OpDef::ArgDef x, y;
  x.name = "x";
  x.type_attr = "T";
  y.name = "y";
  y.type_attr = "T";
  f.signature.input_arg.push_back(x);
  f.signature.output_arg.push_back(y);
  OpDef::AttrDef t;
  t.name = "T";
  t.type = "type";
  f.signature.attr.push_back(t);
  f.node_def.push_back(MakeNode("id", "Identity", {"x"}, {{"T", AttrValue::Placeholder("T")}}));
  f.ret["y"] = "id:output:0";
  return f;
}

TEST(FunctionTest, PlaceholdersAreBoundFromTheCall) {
  FunctionDefLibrary lib;
  lib.function.push_back(IdentityFunction());
  for (DataType t : {DT_FLOAT, DT_INT32}) {
    auto body = InstantiateFunction(lib, Func("Id", {{"T", AttrValue::Type(t)}}));
    ASSERT_TRUE(body.ok()) << body.status().message();
    EXPECT_EQ((*body)->arg_types[0], t);
    EXPECT_EQ((*body)->ret_types[0], t);
    Node* id = (*body)->graph->FindNode("id");
    ASSERT_NE(id, nullptr);
    EXPECT_EQ(id->attrs().at("T").type(), t);
  }
  auto unbound = InstantiateFunction(lib, Func("Id"));
  ASSERT_FALSE(unbound.ok());
  EXPECT_THAT(unbound.status().message(), HasSubstr("function 'Id'"));
  EXPECT_THAT(unbound.status().message(), HasSubstr("'T'"));
}

TEST(FunctionTest, ListArgumentsAndListOutputs) {
  // f(xs: N * float) -> (ys: N * float) { n = IdentityN(xs:0, xs:1); ys = n:output:0 }
  FunctionDef f;
  f.signature.name = "Pair";
  OpDef::ArgDef xs, ys;
  xs.name = "xs";
  xs.type = DT_FLOAT;
  xs.number_attr = "N";
  ys = xs;
  ys.name = "ys";
  f.signature.input_arg.push_back(xs);
  f.signature.output_arg.push_back(ys);
  OpDef::AttrDef n;
  n.name = "N";
  n.type = "int";
  f.signature.attr.push_back(n);
  AttrListValue types;
  types.type = {DT_FLOAT, DT_FLOAT};
  f.node_def.push_back(
      MakeNode("n", "IdentityN", {"xs:1", "xs:0"}, {{"T", AttrValue::List(types)}}));
  f.ret["ys"] = "n:output:0";
  FunctionDefLibrary lib;
  lib.function.push_back(f);
  auto body = InstantiateFunction(lib, Func("Pair", {{"N", AttrValue::Int(2)}}));
  ASSERT_TRUE(body.ok()) << body.status().message();
  ASSERT_EQ((*body)->arg_nodes.size(), 2u);
  ASSERT_EQ((*body)->ret_nodes.size(), 2u);
  auto got = RunBody(**body, {Tensor::Scalar<float>(DT_FLOAT, 1), Tensor::Scalar<float>(DT_FLOAT, 2)});
  ASSERT_TRUE(got.ok()) << got.status().message();
  EXPECT_EQ((*got)[0].flat<float>()[0], 2.0f);  // swapped by the body
  EXPECT_EQ((*got)[1].flat<float>()[0], 1.0f);
}

TEST(FunctionTest, ErrorsNameTheFunctionAndTheNode) {
  FunctionDefLibrary lib;
  auto missing = InstantiateFunction(lib, Func("nope"));
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("function 'nope' is not in"));

  FunctionDef f = IdentityFunction();
  f.node_def[0].input = {"z"};
  lib.function.push_back(f);
  auto bad_input = InstantiateFunction(lib, Func("Id", {{"T", AttrValue::Type(DT_FLOAT)}}));
  ASSERT_FALSE(bad_input.ok());
  EXPECT_THAT(bad_input.status().message(), HasSubstr("node 'id'"));
  EXPECT_THAT(bad_input.status().message(), HasSubstr("function 'Id'"));
  EXPECT_THAT(bad_input.status().message(), HasSubstr("'z'"));

  lib.function[0] = IdentityFunction();
  lib.function[0].ret["y"] = "id:nosuch:0";
  auto bad_ret = InstantiateFunction(lib, Func("Id", {{"T", AttrValue::Type(DT_FLOAT)}}));
  ASSERT_FALSE(bad_ret.ok());
  EXPECT_THAT(bad_ret.status().message(), HasSubstr("id:nosuch:0"));

  lib.function[0] = IdentityFunction();
  lib.function[0].ret["y"] = "id:output:3";
  auto past = InstantiateFunction(lib, Func("Id", {{"T", AttrValue::Type(DT_FLOAT)}}));
  ASSERT_FALSE(past.ok());
  EXPECT_THAT(past.status().message(), HasSubstr("past"));

  lib.function[0] = IdentityFunction();
  lib.function[0].node_def[0].op = "NoSuchOp";
  auto unknown = InstantiateFunction(lib, Func("Id", {{"T", AttrValue::Type(DT_FLOAT)}}));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("node 'id' (NoSuchOp)"));
}

TEST(FunctionTest, GraphToFunctionDefRoundTrips) {
  // TensorFlow's then-branch, instantiated, written back as a FunctionDef and instantiated again,
  // computes the same numbers.
  GraphDef def = Load("cond");
  auto body = InstantiateFunction(def.library, Func("cond_true_4"));
  ASSERT_TRUE(body.ok());
  auto fdef = GraphToFunctionDef(*(*body)->graph, "again");
  ASSERT_TRUE(fdef.ok()) << fdef.status().message();
  EXPECT_EQ(fdef->signature.input_arg.size(), 1u);
  EXPECT_EQ(fdef->signature.output_arg.size(), 1u);
  for (const NodeDef& n : fdef->node_def) {
    for (const std::string& in : n.input) {
      // Node outputs in FunctionDef form, arguments by name.
      bool is_arg = in == fdef->signature.input_arg[0].name;
      EXPECT_TRUE(in[0] == '^' || in.find(':') != std::string::npos || is_arg) << in;
    }
  }
  FunctionDefLibrary lib;
  lib.function.push_back(*fdef);
  auto again = InstantiateFunction(lib, Func("again"));
  ASSERT_TRUE(again.ok()) << again.status().message();
  Tensor x = Tensor::Vector<float>(DT_FLOAT, {1.5f, -2.0f, 0.25f});
  auto a = RunBody(**body, {x});
  auto b = RunBody(**again, {x});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE((*a)[0].Identical((*b)[0]));
  EXPECT_EQ((*b)[0].flat<float>()[1], -2.0f * 2.0f + 1.0f);
}

StatusOr<std::vector<Tensor>> RunY(const GraphDef& def) {
  ASSIGN_OR_RETURN(auto session, Session::Create(def));
  return session->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {1.0f, 2.0f, 3.0f})}}, {"y"});
}

// Calls kept by the lowering (_noinline) run call by call on nested executors: a function that
// calls itself stops at the depth limit with one short message naming it, not a stack overflow.
TEST(RunFunctionTest, RecursionAtRunTimeStopsAtTheDepthLimit) {
  auto out = RunY(testing::SelfCallGraph(/*noinline=*/true));
  ASSERT_FALSE(out.ok());
  const std::string message = out.status().message();
  EXPECT_THAT(message, HasSubstr("function 'f' is called " + std::to_string(kMaxCallDepth + 1) +
                                 " calls deep"));
  EXPECT_THAT(message, HasSubstr("limit of " + std::to_string(kMaxCallDepth)));
  EXPECT_LT(message.size(), 600u) << message;  // not one prefix per level
  EXPECT_EQ(CurrentCallDepth(), 0);
}

TEST(RunFunctionTest, NestedIfsThatNeverEndStopAtTheDepthLimit) {
  // f(x) = If(true, f, t0)(x), run by the If kernel (not lowered).
  std::string lib = testing::FunctionText(
      "f", testing::TrueConstText("node_def", "p") +
               testing::IfText("node_def", "i", "p:output:0", "x", "f", "t0", false),
      "i:output:0");
  lib += testing::FunctionText("t0", testing::SquareText("node_def"), "s:y:0");
  GraphDef def = testing::ParseText(std::string(testing::kPlaceholderX) +
                                    testing::TrueConstText("node", "p") +
                                    testing::IfText("node", "y", "p", "x", "f", "t0", false) +
                                    "library {\n" + lib + "}\n");
  auto out = RunY(def);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("function 'f' is called"));
}

TEST(RunFunctionTest, ChainBelowTheLimitRunsAndOneAboveIsRefused) {
  auto below = RunY(testing::CallChainGraph(kMaxCallDepth - 10, /*noinline=*/true));
  ASSERT_TRUE(below.ok()) << below.status().message();
  EXPECT_EQ((*below)[0].flat<float>()[2], 9.0f);
  auto above = RunY(testing::CallChainGraph(kMaxCallDepth + 10, /*noinline=*/true));
  ASSERT_FALSE(above.ok());
  EXPECT_THAT(above.status().message(), HasSubstr("calls deep"));
}

}  // namespace
}  // namespace xlens::graph

namespace xlens::graph {
namespace {

// A FunctionDef on its own (an encapsulate_fdef dump) reads as its body's graph: it loads, holds
// one _Arg per input and one _Retval per output, and runs to the branch's own result.
TEST(FunctionDefAsGraphDefTest, BranchFunctionLoadsAndRunsAsAGraph) {
  GraphDef def = Load("cond");
  const FunctionDef* branch = def.library.Find("cond_true_4");
  ASSERT_NE(branch, nullptr);
  auto as_graph = FunctionDefAsGraphDef(*branch);
  ASSERT_TRUE(as_graph.ok()) << as_graph.status().message();
  int args = 0, rets = 0;
  for (const NodeDef& n : as_graph->node) {
    args += n.op == "_Arg";
    rets += n.op == "_Retval";
  }
  EXPECT_EQ(args, 1);
  EXPECT_EQ(rets, 1);
  auto g = Graph::FromGraphDef(*as_graph);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto executor = Executor::Create(g->get(), {});
  ASSERT_TRUE(executor.ok()) << executor.status().message();
  Tensor x = Tensor::Vector<float>(DT_FLOAT, {1.0f, -2.0f});
  auto got = (*executor)->Run({x});
  ASSERT_TRUE(got.ok()) << got.status().message();
  auto body = InstantiateFunction(def.library, Func("cond_true_4"));
  ASSERT_TRUE(body.ok());
  auto want = RunBody(**body, {x});
  ASSERT_TRUE(want.ok());
  EXPECT_TRUE(TensorsClose((*got)[0], (*want)[0], 0));
}

TEST(FunctionDefAsGraphDefTest, UnboundPlaceholderIsNamed) {
  FunctionDef f;
  f.signature.name = "poly";
  OpDef::ArgDef in;
  in.name = "x";
  in.type_attr = "T";
  f.signature.input_arg.push_back(in);
  auto as_graph = FunctionDefAsGraphDef(f);
  ASSERT_FALSE(as_graph.ok());
  EXPECT_THAT(as_graph.status().message(), HasSubstr("'T'"));
}

}  // namespace
}  // namespace xlens::graph
