// Static shape inference against TensorFlow's own: every graph of the TF corpus, and every graph
// TensorFlow's clustering saw (before_mark_for_compilation*.pbtxt), loads, verifies, and gets
// the output shapes TensorFlow's shape refiner gives it (recorded by
// testdata/tf_shapes/generate.py from the same files).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::graph {
namespace {

namespace fs = std::filesystem;

TEST(GraphShapesTest, CorpusGraphsGetTensorFlowsShapes) {
  std::string corpus = std::string(XLENS_SHARED_DIR) + "/corpus/tf";
  if (!fs::exists(corpus)) GTEST_SKIP() << "the TF corpus is absent: " << corpus;
  std::ifstream in(std::string(XLENS_TESTDATA_DIR) + "/tf_shapes/shapes.json");
  ASSERT_TRUE(in) << "tf_shapes/shapes.json is missing";
  nlohmann::json expected = nlohmann::json::parse(in);
  int graphs = 0, outputs_checked = 0, outputs_more_specific = 0;
  for (const auto& [file, nodes] : expected.items()) {
    SCOPED_TRACE(file);
    auto def = ReadGraphDef(corpus + "/" + file);
    ASSERT_TRUE(def.ok()) << def.status().message();
    auto graph = Graph::FromGraphDef(*def, {.source_name = file});
    ASSERT_TRUE(graph.ok()) << graph.status().message();
    Status st = (*graph)->InferShapes();
    ASSERT_TRUE(st.ok()) << st.message();
    ++graphs;
    for (const auto& [name, shapes] : nodes.items()) {
      Node* node = (*graph)->FindNode(name);
      ASSERT_NE(node, nullptr) << name;
      ASSERT_EQ(node->num_outputs(), static_cast<int>(shapes.size())) << name;
      for (size_t i = 0; i < shapes.size(); ++i) {
        if (shapes[i].is_null()) continue;  // TensorFlow does not know the rank either
        const PartialShape& ours = node->output_shapes()[i];
        std::vector<int64_t> tf_dims = shapes[i].get<std::vector<int64_t>>();
        ASSERT_EQ(ours.rank(), static_cast<int64_t>(tf_dims.size()))
            << name << ":" << i << " ours " << ours.ToString() << ", TensorFlow "
            << PartialShape(tf_dims).ToString();
        for (size_t d = 0; d < tf_dims.size(); ++d) {
          if (tf_dims[d] >= 0) {
            ASSERT_EQ(ours.dim(d), tf_dims[d]) << name << ":" << i << " ours " << ours.ToString()
                                               << ", TensorFlow " << PartialShape(tf_dims).ToString();
          } else if (ours.dim(d) >= 0) {
            ++outputs_more_specific;
          }
        }
        ++outputs_checked;
      }
    }
  }
  EXPECT_GT(graphs, 60);
  EXPECT_GT(outputs_checked, 1000);
  RecordProperty("outputs_checked", outputs_checked);
  RecordProperty("outputs_more_specific", outputs_more_specific);
}

}  // namespace
}  // namespace xlens::graph
