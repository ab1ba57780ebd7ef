// A node whose op names a function of the graph's library (encapsulate_subgraphs' `op:
// "cluster_0"`, a body calling another function by name) loads with the function's signature and
// runs the function's body, nested calls included, as TensorFlow's FunctionLibraryDefinition
// resolves it; an op of the registry is never shadowed, and a name in neither is still unknown.
#include "compiler/graph/function_call_op.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"

namespace xlens::graph {
namespace {

using ::testing::HasSubstr;

// scale_add(x, y) = x * 3 + y, written as TensorFlow writes a cluster function; twice(x) calls
// scale_add by op name (a nested call) with x for both arguments.
constexpr const char* kLibrary = R"(
library {
  function {
    signature {
      name: "scale_add"
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "y" type: DT_FLOAT }
      output_arg { name: "out" type: DT_FLOAT }
    }
    node_def {
      name: "three"
      op: "Const"
      attr { key: "dtype" value { type: DT_FLOAT } }
      attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 3 } } }
    }
    node_def { name: "mul" op: "Mul" input: "x" input: "three:output:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "add" op: "AddV2" input: "mul:z:0" input: "y"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "add:z:0" }
  }
  function {
    signature {
      name: "twice"
      input_arg { name: "x" type: DT_FLOAT }
      output_arg { name: "out" type: DT_FLOAT }
    }
    node_def { name: "call" op: "scale_add" input: "x" input: "x" }
    ret { key: "out" value: "call:out:0" }
  }
}
)";

GraphDef Parse(const std::string& nodes) {
  auto def = ParseGraphDef(nodes + kLibrary, GraphDefFormat::kText, "test.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  return def.ok() ? *def : GraphDef{};
}

constexpr const char* kCallNodes = R"(
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "b" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "cluster_0" op: "scale_add" input: "a" input: "b"
       attr { key: "_XlaCompiledKernel" value { b: true } } }
node { name: "nested" op: "twice" input: "cluster_0" }
)";

TEST(FunctionCallOpTest, LibraryFunctionLoadsAsAnOpWithItsSignature) {
  auto g = Graph::FromGraphDef(Parse(kCallNodes));
  ASSERT_TRUE(g.ok()) << g.status().message();
  const Node* call = (*g)->FindNode("cluster_0");
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->num_inputs(), 2);
  ASSERT_EQ(call->num_outputs(), 1);
  EXPECT_EQ(call->output_type(0), DT_FLOAT);
  EXPECT_TRUE(call->has_kernel());
  EXPECT_FALSE(call->registration().has_xla_kernel);
  EXPECT_TRUE((*g)->InferShapes().ok());
  // Written back as it came: the op is the function's name.
  GraphDef back = (*g)->ToGraphDef();
  bool found = false;
  for (const NodeDef& n : back.node) found |= n.name == "nested" && n.op == "twice";
  EXPECT_TRUE(found);
}

TEST(FunctionCallOpTest, RunningACallRunsTheFunctionBodyAndItsNestedCalls) {
  auto session = Session::Create(Parse(kCallNodes));
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"a", Tensor::Vector<float>(DT_FLOAT, {1.0f, -2.0f})},
                              {"b", Tensor::Vector<float>(DT_FLOAT, {0.5f, 10.0f})}},
                             {"cluster_0", "nested"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  // cluster_0 = a*3 + b; nested = cluster_0*3 + cluster_0.
  EXPECT_EQ((*out)[0].flat<float>()[0], 3.5f);
  EXPECT_EQ((*out)[0].flat<float>()[1], 4.0f);
  EXPECT_EQ((*out)[1].flat<float>()[0], 14.0f);
  EXPECT_EQ((*out)[1].flat<float>()[1], 16.0f);
}

TEST(FunctionCallOpTest, WrongArityIsAnErrorNamingTheNode) {
  auto g = Graph::FromGraphDef(Parse(R"(
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "scale_add" input: "a" }
)"));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("node 'c' (scale_add)"));
}

TEST(FunctionCallOpTest, NameInNeitherRegistryNorLibraryIsUnknown) {
  auto g = Graph::FromGraphDef(Parse(R"(
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "c" op: "no_such_function" input: "a" }
)"));
  ASSERT_FALSE(g.ok());
  EXPECT_THAT(g.status().message(), HasSubstr("unknown op 'no_such_function'"));
}

TEST(FunctionCallOpTest, AFunctionNeverShadowsARegisteredOp) {
  // A library function named "Neg" that adds 1: the node still runs the registry's Neg.
  GraphDef def = Parse(R"(
node { name: "a" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "n" op: "Neg" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
)");
  FunctionDef neg = def.library.function[0];
  neg.signature.name = "Neg";
  def.library.function.push_back(neg);
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"a", Tensor::Vector<float>(DT_FLOAT, {2.0f})}}, {"n"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].flat<float>()[0], -2.0f);
}

}  // namespace
}  // namespace xlens::graph
