// Small GraphDefs written as text, for the clustering passes' tests.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::cluster::testing {

inline std::string NodeText(const std::string& name, const std::string& op,
                            const std::vector<std::string>& inputs, const std::string& attrs = "") {
  std::string text = "node { name: \"" + name + "\" op: \"" + op + "\" ";
  for (const std::string& in : inputs) text += "input: \"" + in + "\" ";
  return text + attrs + " }\n";
}

inline constexpr char kF32[] = "attr { key: \"T\" value { type: DT_FLOAT } }";
inline constexpr char kPlaceholderF32[] = "attr { key: \"dtype\" value { type: DT_FLOAT } }";
inline constexpr char kPlaceholderBool[] = "attr { key: \"dtype\" value { type: DT_BOOL } }";

inline std::unique_ptr<graph::Graph> LoadGraph(const std::string& text) {
  auto def = graph::ParseGraphDef(text, graph::GraphDefFormat::kText, "test.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  if (!def.ok()) return nullptr;
  auto g = graph::Graph::FromGraphDef(*def);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return g.ok() ? std::move(*g) : nullptr;
}

}  // namespace xlens::cluster::testing
