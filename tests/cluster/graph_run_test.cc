// What `xlens graph run` and the Python session share: names looked up and fed values checked
// with the command line's messages (naming the graph and how the user gave the thing), variables
// given values (a VarHandleOp's, and a function graph's captured resource Placeholder fed a
// handle), captures without a value named, and the JIT installed (compile keeping the graph's
// control flow functional).
#include "compiler/cluster/graph_run.h"

#include <gtest/gtest.h>

#include "cluster_test_util.h"
#include "compiler/graph/graph_def_io.h"

namespace xlens::cluster {
namespace {

using cluster_testing::kF32;
using cluster_testing::NodeText;
using graph::Tensor;

constexpr char kPlaceholder[] =
    "attr { key: \"dtype\" value { type: DT_FLOAT } } "
    "attr { key: \"shape\" value { shape { dim { size: -1 } dim { size: 2 } } } }";

std::string GraphText() {
  return NodeText("x", "Placeholder", {}, kPlaceholder) +
         NodeText("y", "Neg", {"x"}, kF32) +
         NodeText("v", "VarHandleOp", {},
                  "attr { key: \"dtype\" value { type: DT_FLOAT } } "
                  "attr { key: \"shape\" value { shape { dim { size: 2 } } } } "
                  "attr { key: \"shared_name\" value { s: \"v\" } }") +
         NodeText("captured", "Placeholder", {},
                  "attr { key: \"dtype\" value { type: DT_RESOURCE } } "
                  "attr { key: \"shape\" value { shape { } } }") +
         NodeText("read", "ReadVariableOp", {"captured"},
                  "attr { key: \"dtype\" value { type: DT_FLOAT } }");
}

struct Loaded {
  graph::GraphDef def;
  std::unique_ptr<graph::Graph> graph;
  std::unique_ptr<graph::Session> session;
};

Loaded Load() {
  Loaded l;
  auto def = graph::ParseGraphDef(GraphText(), graph::GraphDefFormat::kText, "g.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  l.def = *def;
  auto g = BuildGraphToRun(l.def, "g.pbtxt");
  EXPECT_TRUE(g.ok()) << g.status().message();
  l.graph = std::move(*g);
  auto s = graph::Session::Create(l.def);
  EXPECT_TRUE(s.ok()) << s.status().message();
  l.session = std::move(*s);
  return l;
}

TEST(GraphRunTest, FindsTensorsAndNamesWhatIsMissing) {
  Loaded l = Load();
  auto found = FindGraphTensor(*l.graph, "g.pbtxt", "--fetch", "y:0", true);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->first->name(), "y");
  EXPECT_EQ(FindGraphTensor(*l.graph, "g.pbtxt", "feed_dict", "z:0", true).status().message(),
            "g.pbtxt: feed_dict 'z:0': the graph has no node named 'z'");
  EXPECT_EQ(FindGraphTensor(*l.graph, "g.pbtxt", "--fetch", "y:1", true).status().message(),
            "g.pbtxt: --fetch 'y:1': node 'y' (Neg) has 1 output");
  EXPECT_EQ(FindGraphTensor(*l.graph, "g.pbtxt", "--fetch", "^y", true).status().message(),
            "g.pbtxt: --fetch '^y': not a tensor name (NODE or NODE:INDEX)");
}

TEST(GraphRunTest, ChecksAFedValueAgainstThePlaceholder) {
  Loaded l = Load();
  const graph::Node& x = *l.graph->FindNode("x");
  EXPECT_TRUE(CheckFeed("g.pbtxt", x, 0, Tensor(graph::DT_FLOAT, {3, 2}), "a.npy").ok());
  EXPECT_EQ(CheckFeed("g.pbtxt", x, 0, Tensor(graph::DT_FLOAT, {3, 3}), "a.npy").message(),
            "g.pbtxt: feed 'x' (Placeholder): a.npy holds float[3,3], the graph expects "
            "float[?,2]");
  EXPECT_EQ(CheckFeed("g.pbtxt", x, 0, Tensor(graph::DT_INT32, {3, 2}), "the fed value").message(),
            "g.pbtxt: feed 'x' (Placeholder): the fed value holds int32[3,2], the graph expects "
            "float[?,2]");
}

TEST(GraphRunTest, AssignsVariablesAndCaptures) {
  Loaded l = Load();
  std::vector<std::pair<std::string, Tensor>> feeds;
  ASSERT_TRUE(AssignVariable(*l.graph, "g.pbtxt", "--assign", *l.session, "v",
                             Tensor::Vector<float>(graph::DT_FLOAT, {1, 2}), "v.npy", &feeds)
                  .ok());
  EXPECT_TRUE(feeds.empty());
  auto var = l.session->resources().Lookup("", "v");
  ASSERT_NE(var, nullptr);
  EXPECT_EQ(var->value.flat<float>()[1], 2.0f);
  EXPECT_EQ(AssignVariable(*l.graph, "g.pbtxt", "--assign", *l.session, "v",
                           Tensor(graph::DT_INT32, {2}), "v.npy", &feeds)
                .message(),
            "g.pbtxt: --assign 'v': v.npy holds int32[2], the variable is float[2]");
  EXPECT_EQ(AssignVariable(*l.graph, "g.pbtxt", "--assign", *l.session, "y", Tensor(), "y.npy",
                           &feeds)
                .message(),
            "g.pbtxt: --assign 'y': node 'y' is a Neg, not a variable (VarHandleOp, VariableV2)");

  EXPECT_EQ(CheckCapturesAssigned(*l.graph, "g.pbtxt", {"read:0"}, {}, feeds, "give them")
                .message(),
            "g.pbtxt: 1 captured variable (resource Placeholder) the run needs has no value: give "
            "them ('captured')");
  ASSERT_TRUE(AssignVariable(*l.graph, "g.pbtxt", "--assign", *l.session, "captured",
                             Tensor::Vector<float>(graph::DT_FLOAT, {5, 6}), "c.npy", &feeds)
                  .ok());
  ASSERT_EQ(feeds.size(), 1u);
  EXPECT_EQ(feeds[0].first, "captured");
  EXPECT_TRUE(CheckCapturesAssigned(*l.graph, "g.pbtxt", {"read:0"}, {}, feeds, "").ok());
  auto ran = l.session->Run(feeds, {"read:0"});
  ASSERT_TRUE(ran.ok()) << ran.status().message();
  EXPECT_EQ((*ran)[0].flat<float>()[1], 6.0f);
}

TEST(GraphRunTest, InstallsTheJitOnlyWhenAsked) {
  Loaded l = Load();
  graph::SessionOptions options;
  std::optional<graph::GraphDef> def_to_run;
  GraphJitOptions off;
  off.level = graph::GlobalJitLevel::kOn1;
  auto none = InstallGraphJit(off, l.def, &options, &def_to_run);
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
  EXPECT_TRUE(options.post_rewrite_passes.empty());
  EXPECT_FALSE(def_to_run.has_value());

  GraphJitOptions compile;
  compile.mode = "compile";
  compile.function_name = "f";
  auto jit = InstallGraphJit(compile, l.def, &options, &def_to_run);
  ASSERT_TRUE(jit.ok());
  EXPECT_NE(*jit, nullptr);
  EXPECT_EQ(options.post_rewrite_passes.size(), 1u);
  ASSERT_TRUE(def_to_run.has_value());
  EXPECT_EQ(def_to_run->node.size(), l.def.node.size());
}

}  // namespace
}  // namespace xlens::cluster
