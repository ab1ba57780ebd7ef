// BuildXlaOpsPass against TensorFlow 2.21: for every graph the corpus has both as
// encapsulate_subgraphs_after[_N] and build_xla_ops[_N], our pass on TensorFlow's input gives
// TensorFlow's output: the same nodes (names and ops), the same inputs in the same order, and the
// same attrs on the launch ops (types, the function with its attrs, must_compile). The chain
// encapsulate_subgraphs -> build_xla_ops from encapsulate_subgraphs_before[_N] gives it too.
//
// Named exceptions:
//  * kConfigProto: the fallback's `config_proto` is the session's ConfigProto, serialized; it
//    says nothing about the graph and is not compared.
//  * kRefVarsAfterDump: TensorFlow sets `_XlaHasReferenceVars` on every node after it dumps
//    encapsulate_subgraphs_after, so its input dump lacks what its output has; on TensorFlow's
//    input that attr is not compared (the chain from the before dump compares it).
//  * kCallOrder: TensorFlow rewrites the call nodes in the order encapsulate_subgraphs appended
//    them (a hash map's); the launch ops of different clusters are compared as a set.
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using graph::AttrValue;
using graph::GraphDef;
using graph::NodeDef;


// (tf_dump dir, suffix) of every build_xla_ops dump with its encapsulate dumps beside it.
std::vector<std::pair<std::string, std::string>> Dumps() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [dump, suffix] : cluster_testing::TfDumpsNamed("build_xla_ops")) {
    if (fs::exists(fs::path(dump) / ("encapsulate_subgraphs_after" + suffix + ".pbtxt"))) {
      out.emplace_back(dump, suffix);
    }
  }
  return out;
}

std::map<std::string, const NodeDef*> ByName(const GraphDef& g) {
  std::map<std::string, const NodeDef*> out;
  for (const NodeDef& n : g.node) out[n.name] = &n;
  return out;
}

std::vector<std::string> DataInputs(const NodeDef& n) {
  std::vector<std::string> out;
  for (const std::string& s : n.input) {
    if (s.empty() || s[0] != '^') out.push_back(s);
  }
  return out;
}
std::set<std::string> ControlInputs(const NodeDef& n) {
  std::set<std::string> out;
  for (const std::string& s : n.input) {
    if (!s.empty() && s[0] == '^') out.insert(s);
  }
  return out;
}

bool IsLaunchOp(const NodeDef& n) {
  return n.op == "_XlaCompile" || n.op == "_XlaRun" || n.op == "_XlaMerge" ||
         n.name.find("/predicated_compilation_key") != std::string::npos ||
         n.name.find("/data_as_ctrl") != std::string::npos ||
         n.name.find("/int32_id_n") != std::string::npos ||
         n.name.find("/stateful_partitioned_call") != std::string::npos;
}

// A func attr without `_XlaHasReferenceVars` (kRefVarsAfterDump).
AttrValue WithoutRefVars(const AttrValue& v) {
  if (v.kind() != AttrValue::Kind::kFunc) return v;
  graph::NameAttrList f;
  f.name = v.func().name;
  f.attr = std::make_shared<graph::AttrMap>(*v.func().attr);
  f.attr->erase(kXlaHasReferenceVarsAttr);
  return AttrValue::Func(f);
}

// Compares our graph with TensorFlow's; returns the number of launch ops compared.
int Compare(const std::string& where, const GraphDef& ours, const GraphDef& tf,
            bool compare_ref_vars) {
  auto o = ByName(ours), t = ByName(tf);
  std::set<std::string> on, tn;
  for (const auto& [name, n] : o) on.insert(name);
  for (const auto& [name, n] : t) tn.insert(name);
  EXPECT_EQ(on, tn) << where << ": node names (kCallOrder: compared as a set)";
  int launch_ops = 0;
  for (const auto& [name, tnode] : t) {
    auto it = o.find(name);
    if (it == o.end()) continue;
    const NodeDef& onode = *it->second;
    EXPECT_EQ(onode.op, tnode->op) << where << ": " << name;
    EXPECT_EQ(onode.device, tnode->device) << where << ": " << name;
    EXPECT_EQ(DataInputs(onode), DataInputs(*tnode)) << where << ": data inputs of " << name;
    EXPECT_EQ(ControlInputs(onode), ControlInputs(*tnode))
        << where << ": control inputs of " << name;
    if (!IsLaunchOp(*tnode)) continue;
    ++launch_ops;
    std::set<std::string> okeys, tkeys;
    for (const auto& [k, v] : onode.attr) okeys.insert(k);
    for (const auto& [k, v] : tnode->attr) tkeys.insert(k);
    if (!compare_ref_vars) {
      okeys.erase(kXlaHasReferenceVarsAttr);
      tkeys.erase(kXlaHasReferenceVarsAttr);
    }
    EXPECT_EQ(okeys, tkeys) << where << ": attrs of " << name;
    for (const std::string& k : tkeys) {
      if (k == "config_proto" || !onode.attr.count(k)) continue;  // kConfigProto
      AttrValue ov = onode.attr.at(k), tv = tnode->attr.at(k);
      if (!compare_ref_vars) {
        ov = WithoutRefVars(ov);
        tv = WithoutRefVars(tv);
      }
      EXPECT_EQ(ov, tv) << where << ": attr " << k << " of " << name << ": ours "
                        << ov.DebugString() << ", TensorFlow's " << tv.DebugString();
    }
  }
  return launch_ops;
}

TEST(BuildXlaOpsPassTest, MatchesTensorFlowOnItsOwnInput) {
  auto dumps = Dumps();
  if (dumps.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  int graphs = 0, launch_ops = 0;
  for (const auto& [dir, suffix] : dumps) {
    const std::string where = dir + "/build_xla_ops" + suffix;
    auto after = graph::ReadGraphDef(dir + "/encapsulate_subgraphs_after" + suffix + ".pbtxt");
    ASSERT_TRUE(after.ok()) << after.status().message();
    auto g = GraphFromGraphDefWithFunctions(*after);
    ASSERT_TRUE(g.ok()) << where << ": " << g.status().message();
    auto out = BuildXlaOpsPass().Run(*g->graph);
    ASSERT_TRUE(out.ok()) << where << ": " << out.status().message();
    auto tf = graph::ReadGraphDef(dir + "/build_xla_ops" + suffix + ".pbtxt");
    ASSERT_TRUE(tf.ok()) << tf.status().message();
    launch_ops += Compare(where, out->graph->ToGraphDef(), *tf, /*compare_ref_vars=*/false);
    ++graphs;
  }
  std::cout << "[ parity   ] " << graphs << " graphs, " << launch_ops << " launch ops\n";
  EXPECT_GT(launch_ops, 40 * 6);
}

TEST(BuildXlaOpsPassTest, EncapsulateThenBuildMatchesTensorFlow) {
  auto dumps = Dumps();
  if (dumps.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  int graphs = 0, launch_ops = 0;
  for (const auto& [dir, suffix] : dumps) {
    const std::string where = dir + "/build_xla_ops" + suffix + " (from the before dump)";
    auto before = graph::ReadGraphDef(dir + "/encapsulate_subgraphs_before" + suffix + ".pbtxt");
    ASSERT_TRUE(before.ok()) << before.status().message();
    auto g = graph::Graph::FromGraphDef(*before);
    ASSERT_TRUE(g.ok()) << where << ": " << g.status().message();
    auto encapsulated = EncapsulateSubgraphsPass().Run(**g);
    ASSERT_TRUE(encapsulated.ok()) << where << ": " << encapsulated.status().message();
    auto out = BuildXlaOpsPass().Run(*encapsulated->graph);
    ASSERT_TRUE(out.ok()) << where << ": " << out.status().message();
    auto tf = graph::ReadGraphDef(dir + "/build_xla_ops" + suffix + ".pbtxt");
    ASSERT_TRUE(tf.ok()) << tf.status().message();
    launch_ops += Compare(where, out->graph->ToGraphDef(), *tf, /*compare_ref_vars=*/true);
    ++graphs;
  }
  std::cout << "[ parity   ] " << graphs << " graphs, " << launch_ops << " launch ops\n";
  EXPECT_GT(launch_ops, 40 * 6);
}

// x -> c0{neg} -> y, c0 ->^ done: a small cluster call, written as encapsulate_subgraphs leaves
// it.
GraphDef SmallEncapsulatedGraph() {
  GraphDef def;
  graph::FunctionDef f;
  f.signature.name = "c0";
  f.signature.input_arg.push_back({"x_0_arg", "", graph::DT_FLOAT});
  f.signature.output_arg.push_back({"neg_0_retval", "", graph::DT_FLOAT});
  NodeDef neg;
  neg.name = "neg";
  neg.op = "Neg";
  neg.input = {"x_0_arg"};
  neg.attr["T"] = AttrValue::Type(graph::DT_FLOAT);
  f.node_def.push_back(neg);
  f.ret["neg_0_retval"] = "neg:y:0";
  def.library.function.push_back(f);
  NodeDef x;
  x.name = "x";
  x.op = "Placeholder";
  x.attr["dtype"] = AttrValue::Type(graph::DT_FLOAT);
  def.node.push_back(x);
  NodeDef call;
  call.name = "c0";
  call.op = "c0";
  call.input = {"x"};
  call.attr[kXlaCompiledKernelAttr] = AttrValue::Bool(true);
  call.attr[kXlaNumConstantArgsAttr] = AttrValue::Int(0);
  call.attr[kXlaNumResourceArgsAttr] = AttrValue::Int(0);
  def.node.push_back(call);
  NodeDef y;
  y.name = "y";
  y.op = "Identity";
  y.input = {"c0"};
  y.attr["T"] = AttrValue::Type(graph::DT_FLOAT);
  def.node.push_back(y);
  NodeDef done;
  done.name = "done";
  done.op = "NoOp";
  done.input = {"^c0"};
  def.node.push_back(done);
  return def;
}

TEST(BuildXlaOpsPassTest, WithoutLazyCompilationTheRunFeedsTheConsumers) {
  auto g = GraphFromGraphDefWithFunctions(SmallEncapsulatedGraph());
  ASSERT_TRUE(g.ok()) << g.status().message();
  BuildXlaOpsOptions options;
  options.lazy_compilation = false;
  auto out = BuildXlaOpsPass(options).Run(*g->graph);
  ASSERT_TRUE(out.ok()) << out.status().message();
  GraphDef def = out->graph->ToGraphDef();
  auto nodes = ByName(def);
  EXPECT_EQ(nodes.size(), 5u);  // x, y, done, xla_compile, xla_run
  ASSERT_TRUE(nodes.count("c0_1/xla_compile"));
  EXPECT_TRUE(nodes.at("c0_1/xla_compile")->attr.at("must_compile").b());
  EXPECT_EQ(nodes.at("c0_1/xla_run")->input, (std::vector<std::string>{"x", "c0_1/xla_compile"}));
  EXPECT_EQ(nodes.at("y")->input, (std::vector<std::string>{"c0_1/xla_run"}));
  EXPECT_EQ(nodes.at("done")->input, (std::vector<std::string>{"^c0_1/xla_run"}));
}

TEST(BuildXlaOpsPassTest, ControlOutputsWaitForWhicheverSideRan) {
  auto g = GraphFromGraphDefWithFunctions(SmallEncapsulatedGraph());
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = BuildXlaOpsPass().Run(*g->graph);
  ASSERT_TRUE(out.ok()) << out.status().message();
  GraphDef def = out->graph->ToGraphDef();
  auto nodes = ByName(def);
  EXPECT_EQ(nodes.at("y")->input, (std::vector<std::string>{"c0_1/merge_oidx_0"}));
  EXPECT_EQ(nodes.at("done")->input, (std::vector<std::string>{"^c0_1/data_as_ctrl"}));
  EXPECT_EQ(nodes.at("c0_1/ctrl_merge")->op, "Merge");
  EXPECT_EQ(nodes.at("c0_1/ctrl_merge")->input,
            (std::vector<std::string>{"c0_1/ctrl_as_data", "c0_1/ctrl_as_data_1"}));
  EXPECT_EQ(nodes.at("c0_1/ctrl_as_data")->input,
            (std::vector<std::string>{"^c0_1/stateful_partitioned_call"}));
  EXPECT_EQ(nodes.at("c0_1/ctrl_as_data_1")->input, (std::vector<std::string>{"^c0_1/xla_run"}));
  // The fallback is triggered by the other Identity now.
  EXPECT_EQ(nodes.at("c0_1/stateful_partitioned_call")->input,
            (std::vector<std::string>{"x", "^c0_1/data_as_ctrl_1"}));
  // The graph is executable in form: every input names a node and the whole is acyclic.
  EXPECT_TRUE(out->graph->TopologicalOrder().ok());
}

TEST(BuildXlaOpsPassTest, RejectsArgumentCountsThatDoNotFit) {
  GraphDef def = SmallEncapsulatedGraph();
  def.node[1].attr[kXlaNumResourceArgsAttr] = AttrValue::Int(1);  // the input is a float
  auto g = GraphFromGraphDefWithFunctions(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = BuildXlaOpsPass().Run(*g->graph);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'c0'"), std::string::npos) << out.status().message();
}

}  // namespace
}  // namespace xlens::cluster
