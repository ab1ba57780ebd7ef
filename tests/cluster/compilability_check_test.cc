#include "compiler/cluster/compilability_check.h"

#include <gtest/gtest.h>

#include "compiler/cluster/tensorflow_xla_ops.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

using cluster_testing::LoadGraph;

TEST(CompilabilityCheckTest, ReasonsInTensorFlowsWords) {
  auto g = LoadGraph(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "s" op: "AsString" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "u" op: "Unique" input: "x" attr { key: "T" value { type: DT_FLOAT } } attr { key: "out_idx" value { type: DT_INT32 } } }
node { name: "shape" op: "Const" attr { key: "dtype" value { type: DT_INT32 } } attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { dim { size: 1 } } int_val: 2 } } } }
node { name: "r" op: "RandomUniform" input: "shape" attr { key: "T" value { type: DT_INT32 } } attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "sin" op: "Sin" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "str" op: "Const" attr { key: "dtype" value { type: DT_STRING } } attr { key: "value" value { tensor { dtype: DT_STRING string_val: "a" } } } }
)");
  ASSERT_NE(g, nullptr);
  OperationFilter auto_clustering = OperationFilter::ForAutoClustering();
  auto reason = [&](const char* n) {
    return UncompilableReason(*g->FindNode(n), *g, auto_clustering);
  };
  EXPECT_EQ(reason("sin"), "");
  EXPECT_EQ(reason("s"),
            "No registered 'AsString' OpKernel for XLA_CPU_JIT devices compatible with node "
            "{{node s}}");
  EXPECT_EQ(reason("u"), "Unique op");
  EXPECT_EQ(reason("r"), "stateful random op");
  EXPECT_EQ(reason("str"),
            "No registered 'Const' OpKernel for XLA_CPU_JIT devices compatible with node "
            "{{node str}}");
  // A must-compile function may hold what auto-clustering leaves out.
  OperationFilter must = OperationFilter::ForMustCompile();
  EXPECT_EQ(UncompilableReason(*g->FindNode("r"), *g, must), "");
  EXPECT_EQ(UncompilableReason(*g->FindNode("u"), *g, must), "");
  EXPECT_NE(UncompilableReason(*g->FindNode("s"), *g, must), "");
}

// An op TensorFlow compiles but xlens cannot lower (here unknown to xlens, as `xlens cluster`
// loads such graphs for inspection) is said in xlens's words; one TensorFlow cannot compile
// either keeps TensorFlow's.
TEST(CompilabilityCheckTest, OpsTensorFlowCompilesAndXlensLacksAreSaidSo) {
  auto def = graph::ParseGraphDef(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "e" op: "Betainc" input: "x" input: "x" input: "x" }
node { name: "f" op: "FrobnicateV7" input: "x" }
)", graph::GraphDefFormat::kText, "test.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  auto g = graph::Graph::FromGraphDef(*def, {.allow_unknown_ops = true});
  ASSERT_TRUE(g.ok()) << g.status().message();
  OperationFilter filter = OperationFilter::ForAutoClustering();
  EXPECT_TRUE(TensorFlowCompilesForXlaCpu("Betainc"));
  EXPECT_FALSE(TensorFlowCompilesForXlaCpu("AsString"));
  EXPECT_EQ(UncompilableReason(*(*g)->FindNode("e"), **g, filter),
            "xlens has no XLA lowering for 'Betainc' yet (TensorFlow compiles it for XLA_CPU_JIT); "
            "node {{node e}}");
  EXPECT_EQ(UncompilableReason(*(*g)->FindNode("f"), **g, filter),
            "No registered 'FrobnicateV7' OpKernel for XLA_CPU_JIT devices compatible with node "
            "{{node f}}");
}

// A node calling a function of the library (encapsulate_subgraphs' `op: "cluster_0"`) is
// compilable when its body is: the body's _Arg and _Retval are its parameters and results, not
// feeds; an op of the body that cannot compile is named.
TEST(CompilabilityCheckTest, FunctionCallIsJudgedByItsBody) {
  auto def = graph::ParseGraphDef(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "good" op: "sin_fn" input: "x" }
node { name: "bad" op: "str_fn" input: "x" }
library {
  function {
    signature { name: "sin_fn" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "out" type: DT_FLOAT } }
    node_def { name: "s" op: "Sin" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "s:y:0" }
  }
  function {
    signature { name: "str_fn" input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "out" type: DT_STRING } }
    node_def { name: "t" op: "AsString" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "t:output:0" }
  }
}
)", graph::GraphDefFormat::kText, "test.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  auto g = graph::Graph::FromGraphDef(*def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  OperationFilter filter = OperationFilter::ForAutoClustering();
  EXPECT_EQ(UncompilableReason(*(*g)->FindNode("good"), **g, filter), "");
  EXPECT_EQ(UncompilableReason(*(*g)->FindNode("bad"), **g, filter),
            "unsupported op t: No registered 'AsString' OpKernel for XLA_CPU_JIT devices "
            "compatible with node {{node t}}");
}

// Function calls compile when their bodies do (TensorFlow's IsCompilableCall): a PartitionedCall's
// `f` as an op naming the function. A body that reads a variable it is passed (Keras's jit_compile
// `_conv_xla`, called with its kernel) keeps the call out of auto-clusters, as TensorFlow's
// "resource variable op in called function" does; a must-compile function compiles it.
TEST(CompilabilityCheckTest, CallsCompileWhenTheirBodiesDo) {
  auto g = LoadGraph(R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "v" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } } attr { key: "shape" value { shape { } } } }
node { name: "pure" op: "PartitionedCall" input: "x"
  attr { key: "Tin" value { list { type: DT_FLOAT } } } attr { key: "Tout" value { list { type: DT_FLOAT } } }
  attr { key: "f" value { func { name: "sine" } } } }
node { name: "by_name" op: "sine" input: "x" }
node { name: "reads" op: "StatefulPartitionedCall" input: "v" input: "x"
  attr { key: "Tin" value { list { type: DT_RESOURCE type: DT_FLOAT } } } attr { key: "Tout" value { list { type: DT_FLOAT } } }
  attr { key: "_XlaMustCompile" value { b: true } }
  attr { key: "f" value { func { name: "scale" } } } }
node { name: "strings" op: "PartitionedCall" input: "x"
  attr { key: "Tin" value { list { type: DT_FLOAT } } } attr { key: "Tout" value { list { type: DT_STRING } } }
  attr { key: "f" value { func { name: "text" } } } }
library {
  function {
    signature { name: "sine" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_FLOAT } }
    node_def { name: "s" op: "Sin" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "s:y:0" }
  }
  function {
    signature { name: "scale" input_arg { name: "h" type: DT_RESOURCE } input_arg { name: "a" type: DT_FLOAT }
                output_arg { name: "y" type: DT_FLOAT } is_stateful: true }
    node_def { name: "read" op: "ReadVariableOp" input: "h" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "mul" op: "Mul" input: "read:value:0" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "mul:z:0" }
  }
  function {
    signature { name: "text" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "y" type: DT_STRING } }
    node_def { name: "s" op: "AsString" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "y" value: "s:output:0" }
  }
}
)");
  ASSERT_NE(g, nullptr);
  OperationFilter auto_clustering = OperationFilter::ForAutoClustering();
  OperationFilter must = OperationFilter::ForMustCompile();
  auto reason = [&](const char* n, const OperationFilter& filter) {
    return UncompilableReason(*g->FindNode(n), *g, filter);
  };
  EXPECT_EQ(reason("pure", auto_clustering), "");
  EXPECT_EQ(reason("by_name", auto_clustering), "");
  EXPECT_EQ(reason("reads", auto_clustering),
            "unsupported op read: resource variable op in called function");
  EXPECT_EQ(reason("reads", must), "");
  EXPECT_NE(reason("strings", must).find("unsupported op s: No registered 'AsString'"),
            std::string::npos)
      << reason("strings", must);
}

}  // namespace
}  // namespace xlens::cluster
