#include "compiler/aot/graph_lowering.h"

#include <gtest/gtest.h>

#include "compiler/graph/graph_def_io.h"
#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"

namespace xlens::aot {
namespace {

// relu(x @ w) with a resource variable w, an AssignAddVariableOp of w that `out` waits for, and a
// placeholder `unused` that no fetch needs.
constexpr const char* kGraph = R"(
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: -1 } dim { size: 3 } } } } }
node { name: "unused" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "w" op: "VarHandleOp" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 3 } dim { size: 2 } } } }
  attr { key: "shared_name" value { s: "w" } } }
node { name: "read" op: "ReadVariableOp" input: "w" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "mm" op: "MatMul" input: "x" input: "read" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "relu" op: "Relu" input: "mm" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "delta" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 3 } dim { size: 2 } } float_val: 1 } } } }
node { name: "upd" op: "AssignAddVariableOp" input: "w" input: "delta" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "out" op: "Identity" input: "relu" input: "^upd" attr { key: "T" value { type: DT_FLOAT } } }
)";

graph::GraphDef Graph() {
  auto def = graph::ParseGraphDef(kGraph, graph::GraphDefFormat::kText, "g.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  return def.ok() ? *def : graph::GraphDef{};
}

Tf2XlaConfig Config(const std::string& text) {
  auto config = ParseTf2XlaConfig(text, ConfigFormat::kText, "c.pbtxt");
  EXPECT_TRUE(config.ok()) << config.status().message();
  return config.ok() ? *config : Tf2XlaConfig{};
}

constexpr const char* kFeedAndFetch =
    "feed { id { node_name: \"x\" } shape { dim { size: 2 } dim { size: 3 } } name: \"x\" }\n"
    "fetch { id { node_name: \"relu\" } name: \"y\" }\n";

TEST(GraphLoweringTest, FeedsVariablesAndFetchesInConfigOrder) {
  auto lowered = LowerGraphForAot(Graph(), Config(std::string(kFeedAndFetch) +
                                                  "variable { node_name: \"w\" readonly: true }\n"),
                                  "g.pbtxt", "model");
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  const HloComputation& entry = *lowered->module->entry_computation();
  ASSERT_EQ(entry.num_parameters(), 2);
  EXPECT_EQ(entry.parameter_instruction(0)->shape().ToString(false), "f32[2,3]");
  EXPECT_EQ(entry.parameter_instruction(1)->shape().ToString(false), "f32[3,2]");
  ASSERT_EQ(lowered->args.size(), 1u);
  EXPECT_EQ(lowered->args[0].byte_size, 24);
  ASSERT_EQ(lowered->results.size(), 1u);
  EXPECT_EQ(lowered->results[0].name, "y");
  EXPECT_EQ(lowered->results[0].dimensions, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(lowered->variables.size(), 1u);
  EXPECT_EQ(lowered->variables[0].name, "w");  // named by its node, as tfcompile does
  EXPECT_EQ(lowered->variable_update_result, std::vector<int>{-1});
}

// Fetching `out` runs the assignment: a variable that is not readonly gets an extra result, a
// readonly one is an error naming it.
TEST(GraphLoweringTest, VariableUpdatesAreResults) {
  const std::string fetch_out =
      "feed { id { node_name: \"x\" } shape { dim { size: 2 } dim { size: 3 } } }\n"
      "fetch { id { node_name: \"out\" } }\n";
  auto lowered = LowerGraphForAot(Graph(), Config(fetch_out + "variable { node_name: \"w\" }\n"),
                                  "g.pbtxt", "model");
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(lowered->variable_update_result, std::vector<int>{1});
  auto readonly = LowerGraphForAot(
      Graph(), Config(fetch_out + "variable { node_name: \"w\" readonly: true }\n"), "g.pbtxt", "model");
  ASSERT_FALSE(readonly.ok());
  EXPECT_EQ(readonly.status().message(),
            "c.pbtxt:3:12: variable 'w' is readonly in the config, but the graph assigns it");
}

TEST(GraphLoweringTest, FrozenVariableIsAConstant) {
  graph::Tensor value(graph::DT_FLOAT, {3, 2});
  for (int i = 0; i < 6; ++i) value.flat<float>()[i] = static_cast<float>(i);
  auto lowered = LowerGraphForAot(Graph(), Config(kFeedAndFetch), "g.pbtxt", "model", {{"w", value}});
  ASSERT_TRUE(lowered.ok()) << lowered.status().message();
  EXPECT_EQ(lowered->module->entry_computation()->num_parameters(), 1);
  EXPECT_TRUE(lowered->variables.empty());
}

TEST(GraphLoweringTest, ErrorsNameTheConfigAndTheNode) {
  auto unlisted = LowerGraphForAot(Graph(), Config(kFeedAndFetch), "g.pbtxt", "model");
  ASSERT_FALSE(unlisted.ok());
  EXPECT_EQ(unlisted.status().message(),
            "c.pbtxt:2:14: fetch 'relu' reads variable 'w' (VarHandleOp), which the config does "
            "not list: add a `variable` entry, or freeze the graph");
  auto wrong_shape = LowerGraphForAot(
      Graph(),
      Config("feed { id { node_name: \"x\" } shape { dim { size: 2 } dim { size: 4 } } }\n"
             "fetch { id { node_name: \"relu\" } }\nvariable { node_name: \"w\" }\n"),
      "g.pbtxt", "model");
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_NE(wrong_shape.status().message().find("shape [2,4] does not fit node 'x''s float[?,3]"),
            std::string::npos)
      << wrong_shape.status().message();
  auto not_fed = LowerGraphForAot(Graph(), Config("fetch { id { node_name: \"relu\" } }\n"
                                                  "variable { node_name: \"w\" }\n"),
                                  "g.pbtxt", "model");
  ASSERT_FALSE(not_fed.ok());
  EXPECT_NE(not_fed.status().message().find("needs placeholder 'x', which the config does not feed"),
            std::string::npos)
      << not_fed.status().message();
}

}  // namespace
}  // namespace xlens::aot
