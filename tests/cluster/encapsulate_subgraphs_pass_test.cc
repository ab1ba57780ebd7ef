// EncapsulateSubgraphsPass against TensorFlow 2.21: for every graph TensorFlow dumped as
// encapsulate_subgraphs_before[_N] in the corpus, our pass must give what TensorFlow's
// encapsulate_subgraphs_after[_N] and encapsulate_fdef_<cluster> hold: the nodes outside the
// clusters with their ops and inputs, each call node's name, op, attrs and arguments (which
// outside tensor feeds each one, in TensorFlow's order: constants, then the rest, then
// resources), and each function's signature, control outputs and body ops. `_XlaHasReferenceVars`
// is checked against build_xla_ops[_N], the first dump taken after TensorFlow sets it.
//
// Named exceptions (what TensorFlow decides from state a dump does not keep):
//  * kCallNodeOrder: TensorFlow appends the call nodes in the iteration order of a hash map of
//    clusters; we append them in the order the clusters first appear. Compared as a set.
//  * kEdgeOrder: results are numbered in the order of the edge ids of TensorFlow's in-memory
//    graph, which the GraphDef does not keep; a function with several results is compared by
//    which tensor each result returns, the call's consumers by which tensor they read.
#include <filesystem>
#include <map>
#include <set>

#include <gtest/gtest.h>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/graph/function.h"
#include "compiler/graph/graph_def_io.h"
#include "tests/cluster/cluster_test_util.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using graph::GraphDef;
using graph::NodeDef;


// (variant dir, suffix "" or "_N") of every encapsulate_subgraphs_before dump.
std::vector<std::pair<std::string, std::string>> BeforeDumps() {
  return cluster_testing::TfDumpsNamed("encapsulate_subgraphs_before");
}

const NodeDef* FindNode(const GraphDef& g, const std::string& name) {
  for (const NodeDef& n : g.node) {
    if (n.name == name) return &n;
  }
  return nullptr;
}

bool IsFunctionOp(const GraphDef& g, const std::string& op) {
  return g.library.Find(op) != nullptr;
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

// "cluster_1:2" -> the tensor the function returns as result 2 ("Sum:output:0").
std::string Resolve(const GraphDef& g, const std::string& input) {
  auto id = graph::ParseTensorName(input);
  if (!id.ok()) return input;
  const NodeDef* n = FindNode(g, id->node);
  if (!n) return input;
  const graph::FunctionDef* f = g.library.Find(n->op);
  if (!f || id->index < 0 || id->index >= static_cast<int>(f->signature.output_arg.size())) {
    return input;
  }
  return id->node + "->" + f->ret.at(f->signature.output_arg[id->index].name);
}

struct CaseResult {
  int clusters = 0;
  int outside_nodes = 0;
};

// Compares our encapsulation of `before` with TensorFlow's `after`; failures name the case.
void CompareWithTensorFlow(const std::string& where, const GraphDef& ours, const GraphDef& tf,
                           CaseResult* result) {
  CaseResult& r = *result;
  std::set<std::string> our_calls, tf_calls;
  for (const NodeDef& n : ours.node) {
    if (IsFunctionOp(ours, n.op)) our_calls.insert(n.name);
  }
  for (const NodeDef& n : tf.node) {
    if (IsFunctionOp(tf, n.op)) tf_calls.insert(n.name);
  }
  EXPECT_EQ(our_calls, tf_calls) << where << ": call nodes (kCallNodeOrder: compared as sets)";
  EXPECT_EQ(ours.node.size(), tf.node.size()) << where;
  for (const NodeDef& t : tf.node) {
    const NodeDef* o = FindNode(ours, t.name);
    if (!o) {
      ADD_FAILURE() << where << ": no node '" << t.name << "' (" << t.op << ")";
      continue;
    }
    EXPECT_EQ(o->op, t.op) << where << ": node " << t.name;
    EXPECT_EQ(o->device, t.device) << where << ": node " << t.name;
    std::vector<std::string> od = DataInputs(*o), td = DataInputs(t);
    ASSERT_EQ(od.size(), td.size()) << where << ": data inputs of " << t.name;
    for (size_t i = 0; i < td.size(); ++i) {
      // kEdgeOrder: which tensor an input reads, not which result number carries it.
      EXPECT_EQ(Resolve(ours, od[i]), Resolve(tf, td[i]))
          << where << ": input " << i << " of " << t.name;
    }
    EXPECT_EQ(ControlInputs(*o), ControlInputs(t)) << where << ": control inputs of " << t.name;
    if (!IsFunctionOp(tf, t.op)) {
      ++r.outside_nodes;
      continue;
    }
    ++r.clusters;
    for (const char* attr : {kXlaCompiledKernelAttr, kXlaNumConstantArgsAttr,
                             kXlaNumResourceArgsAttr}) {
      auto ta = t.attr.find(attr);
      auto oa = o->attr.find(attr);
      ASSERT_TRUE(ta != t.attr.end()) << where << ": TensorFlow's " << t.name << " has no " << attr;
      ASSERT_TRUE(oa != o->attr.end()) << where << ": " << t.name << " has no " << attr;
      EXPECT_EQ(oa->second, ta->second) << where << ": " << t.name << " " << attr;
    }
    const graph::FunctionDef* of = ours.library.Find(t.op);
    const graph::FunctionDef* tff = tf.library.Find(t.op);
    ASSERT_TRUE(of && tff) << where << ": function " << t.op;
    ASSERT_EQ(of->signature.input_arg.size(), tff->signature.input_arg.size()) << where;
    for (size_t i = 0; i < tff->signature.input_arg.size(); ++i) {
      EXPECT_EQ(of->signature.input_arg[i].name, tff->signature.input_arg[i].name)
          << where << ": " << t.op << " argument " << i;
      EXPECT_EQ(of->signature.input_arg[i].type, tff->signature.input_arg[i].type)
          << where << ": " << t.op << " argument " << i;
    }
    std::map<std::string, std::pair<std::string, graph::DataType>> our_rets, tf_rets;
    for (const auto& a : of->signature.output_arg) our_rets[a.name] = {of->ret.at(a.name), a.type};
    for (const auto& a : tff->signature.output_arg) tf_rets[a.name] = {tff->ret.at(a.name), a.type};
    EXPECT_EQ(our_rets, tf_rets) << where << ": results of " << t.op;
    std::set<std::string> oc(of->signature.control_output.begin(),
                             of->signature.control_output.end());
    std::set<std::string> tc(tff->signature.control_output.begin(),
                             tff->signature.control_output.end());
    EXPECT_EQ(oc, tc) << where << ": control outputs of " << t.op;
    std::map<std::string, std::string> obody, tbody;
    for (const NodeDef& n : of->node_def) obody[n.name] = n.op;
    for (const NodeDef& n : tff->node_def) tbody[n.name] = n.op;
    EXPECT_EQ(obody, tbody) << where << ": body of " << t.op;
    // The body's edges, in FunctionDef form, are TensorFlow's too.
    for (const NodeDef& tn : tff->node_def) {
      for (const NodeDef& on : of->node_def) {
        if (on.name != tn.name) continue;
        EXPECT_EQ(DataInputs(on), DataInputs(tn)) << where << ": " << t.op << "/" << tn.name;
        EXPECT_EQ(ControlInputs(on), ControlInputs(tn)) << where << ": " << t.op << "/" << tn.name;
      }
    }
  }
}

TEST(EncapsulateSubgraphsPassTest, MatchesTensorFlowOnEveryCorpusGraph) {
  auto dumps = BeforeDumps();
  if (dumps.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  int graphs = 0, clusters = 0, outside = 0, ref_checked = 0;
  std::vector<std::string> not_loaded;
  for (const auto& [dir, suffix] : dumps) {
    const std::string where = dir + "/encapsulate_subgraphs_before" + suffix;
    auto before = graph::ReadGraphDef(dir + "/encapsulate_subgraphs_before" + suffix + ".pbtxt");
    ASSERT_TRUE(before.ok()) << before.status().message();
    auto g = graph::Graph::FromGraphDef(*before);
    if (!g.ok()) {
      not_loaded.push_back(where + ": " + g.status().message());
      continue;
    }
    EncapsulateSubgraphsPass pass;
    auto out = pass.Run(**g);
    ASSERT_TRUE(out.ok()) << where << ": " << out.status().message();
    auto after = graph::ReadGraphDef(dir + "/encapsulate_subgraphs_after" + suffix + ".pbtxt");
    ASSERT_TRUE(after.ok()) << after.status().message();
    GraphDef ours = out->graph->ToGraphDef();
    CaseResult r;
    CompareWithTensorFlow(where, ours, *after, &r);
    ++graphs;
    clusters += r.clusters;
    outside += r.outside_nodes;

    // _XlaHasReferenceVars as TensorFlow's next dump has it on every node.
    auto built = graph::ReadGraphDef(dir + "/build_xla_ops" + suffix + ".pbtxt");
    if (!built.ok()) continue;
    for (const NodeDef& n : ours.node) {
      const NodeDef* t = FindNode(*built, n.name);
      if (!t) continue;
      auto ta = t->attr.find(kXlaHasReferenceVarsAttr);
      if (ta == t->attr.end()) continue;
      auto oa = n.attr.find(kXlaHasReferenceVarsAttr);
      ASSERT_TRUE(oa != n.attr.end()) << where << ": " << n.name;
      EXPECT_EQ(oa->second, ta->second) << where << ": " << kXlaHasReferenceVarsAttr << " of "
                                        << n.name;
      ++ref_checked;
    }
  }
  // Every graph of the corpus loads; a graph that does not is a gap of the op registry.
  EXPECT_TRUE(not_loaded.empty()) << not_loaded.size() << " graphs did not load, first: "
                                  << not_loaded.front();
  std::cout << "[ parity   ] " << graphs << " graphs, " << clusters << " clusters, " << outside
            << " outside nodes, " << ref_checked << " _XlaHasReferenceVars checked\n";
  EXPECT_GT(clusters, 40);
}

TEST(EncapsulateSubgraphsPassTest, ConstantsFirstResourcesLastOnLinearRegression) {
  std::string root = cluster_testing::TfCorpusDir();
  if (root.empty()) GTEST_SKIP() << "the TensorFlow corpus (../shared/corpus/tf) is absent";
  auto before =
      graph::ReadGraphDef(root + "/linreg_tf1/jit/tf_dump/encapsulate_subgraphs_before_2.pbtxt");
  ASSERT_TRUE(before.ok()) << before.status().message();
  auto g = graph::Graph::FromGraphDef(*before);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  graph::Node* call = out->graph->FindNode("cluster_1");
  ASSERT_NE(call, nullptr);
  // The declustered Shape feeds a compile-time constant (a Reshape's shape) inside the cluster,
  // the two variables are resources.
  ASSERT_EQ(call->num_inputs(), 5);
  EXPECT_EQ(call->input_node(0).first->name(), "gradients/sub_grad/Shape_1");
  EXPECT_EQ(call->input_type(0), graph::DT_INT32);
  EXPECT_EQ(call->input_type(3), graph::DT_RESOURCE);
  EXPECT_EQ(call->input_type(4), graph::DT_RESOURCE);
  EXPECT_EQ(graph::FindAttr(call->attrs(), kXlaNumConstantArgsAttr)->i(), 1);
  EXPECT_EQ(graph::FindAttr(call->attrs(), kXlaNumResourceArgsAttr)->i(), 2);
  EXPECT_EQ(graph::FindAttr(call->attrs(), kXlaHasReferenceVarsAttr)->b(), false);
}

TEST(EncapsulateSubgraphsPassTest, ControlEdgesAcrossTheClusterBoundary) {
  // x -> a -> b (cluster c0), b ->^ after (outside), before ->^ a: the call waits for `before`,
  // `after` waits for the call, and b is a control output of the function.
  GraphDef def;
  auto node = [&](std::string name, std::string op, std::vector<std::string> inputs,
                  std::string cluster) {
    NodeDef n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.input = std::move(inputs);
    if (n.op != "NoOp") n.attr["T"] = graph::AttrValue::Type(graph::DT_FLOAT);
    if (n.op == "Placeholder") {
      n.attr.erase("T");
      n.attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
    }
    if (!cluster.empty()) n.attr[kXlaClusterAttr] = graph::AttrValue::String(cluster);
    def.node.push_back(std::move(n));
  };
  node("x", "Placeholder", {}, "");
  node("before", "NoOp", {}, "");
  node("a", "Neg", {"x", "^before"}, "c0");
  node("b", "Exp", {"a"}, "c0");
  node("after", "NoOp", {"^b"}, "");
  node("y", "Identity", {"b"}, "");
  auto g = graph::Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  GraphDef ours = out->graph->ToGraphDef();
  const NodeDef* call = FindNode(ours, "c0");
  ASSERT_NE(call, nullptr);
  EXPECT_EQ(call->input, (std::vector<std::string>{"x", "^before"}));
  EXPECT_EQ(FindNode(ours, "after")->input, (std::vector<std::string>{"^c0"}));
  EXPECT_EQ(FindNode(ours, "y")->input, (std::vector<std::string>{"c0"}));
  const graph::FunctionDef* f = ours.library.Find("c0");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->signature.control_output, (std::vector<std::string>{"b"}));
  ASSERT_EQ(f->signature.input_arg.size(), 1u);
  EXPECT_EQ(f->signature.input_arg[0].name, "x_0_arg");
  ASSERT_EQ(f->signature.output_arg.size(), 1u);
  EXPECT_EQ(f->signature.output_arg[0].name, "b_0_retval");
  EXPECT_EQ(f->ret.at("b_0_retval"), "b:y:0");
}

TEST(EncapsulateSubgraphsPassTest, AClusterNamedAsAnOpIsAnError) {
  GraphDef def;
  NodeDef x;
  x.name = "x";
  x.op = "Placeholder";
  x.attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
  x.attr[kXlaClusterAttr] = graph::AttrValue::String("Neg");
  def.node.push_back(x);
  auto g = graph::Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("'x'"), std::string::npos) << out.status().message();
}

TEST(EncapsulateSubgraphsPassTest, IdenticalConstantsInsideAClusterAreFoldedIntoTheFirst) {
  // c and c/clone_0 hold the same value; TensorFlow's body optimization keeps c only.
  GraphDef def;
  auto constant = [&](const std::string& name) {
    NodeDef n;
    n.name = name;
    n.op = "Const";
    n.attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
    n.attr["value"] = graph::AttrValue::TensorValue(graph::Tensor::Scalar(graph::DT_FLOAT, 2.0f));
    n.attr[kXlaClusterAttr] = graph::AttrValue::String("cluster_0");
    def.node.push_back(n);
  };
  constant("c");
  constant("c/clone_0");
  NodeDef x;
  x.name = "x";
  x.op = "Placeholder";
  x.attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
  def.node.push_back(x);
  NodeDef m;
  m.name = "m";
  m.op = "Mul";
  m.input = {"x", "c/clone_0"};
  m.attr["T"] = graph::AttrValue::Type(graph::DT_FLOAT);
  m.attr[kXlaClusterAttr] = graph::AttrValue::String("cluster_0");
  def.node.push_back(m);
  NodeDef a = m;
  a.name = "a";
  a.op = "AddV2";
  a.input = {"m", "c"};
  def.node.push_back(a);
  auto g = graph::Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const graph::FunctionDef* f = out->graph->library().Find("cluster_0");
  ASSERT_NE(f, nullptr);
  std::vector<std::string> names;
  for (const NodeDef& n : f->node_def) names.push_back(n.name);
  EXPECT_EQ(names, (std::vector<std::string>{"c", "m", "a"}));
  EXPECT_EQ(f->node_def[1].input, (std::vector<std::string>{"x_0_arg", "c:output:0"}));
}

TEST(EncapsulateSubgraphsPassTest, AResultThatIsAnArgumentNamesItsNormalizedName) {
  // The cluster passes `sw/pred` on unchanged through an Identity (a lowered If's pivot): the
  // body's result is the argument itself, and must name it as the signature does.
  GraphDef def;
  auto node = [&](std::string name, std::string op, std::vector<std::string> inputs,
                  std::string cluster) {
    NodeDef n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.input = std::move(inputs);
    n.attr[n.op == "Placeholder" ? "dtype" : "T"] = graph::AttrValue::Type(graph::DT_FLOAT);
    if (!cluster.empty()) n.attr[kXlaClusterAttr] = graph::AttrValue::String(cluster);
    def.node.push_back(std::move(n));
  };
  node("sw/pred", "Placeholder", {}, "");
  node("pivot", "Identity", {"sw/pred"}, "c0");
  node("neg", "Neg", {"sw/pred"}, "c0");
  node("y", "Identity", {"pivot"}, "");
  node("z", "Identity", {"neg"}, "");
  auto g = graph::Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  const graph::FunctionDef* f = out->graph->library().Find("c0");
  ASSERT_NE(f, nullptr);
  ASSERT_EQ(f->signature.input_arg.size(), 1u);
  const std::string arg = f->signature.input_arg[0].name;
  EXPECT_EQ(arg, "sw_pred_0_arg");
  for (const auto& [name, value] : f->ret) {
    EXPECT_NE(value, "sw/pred_0_arg") << name << ": names the argument's node, not the argument";
  }
  // The function instantiates: every result resolves to an argument or a body node.
  auto body = graph::InstantiateFunction(out->graph->library(), [] {
    graph::NameAttrList c0;
    c0.name = "c0";
    return c0;
  }());
  EXPECT_TRUE(body.ok()) << body.status().message();
}

TEST(EncapsulateSubgraphsPassTest, NormalizesArgumentNamesAsTensorFlow) {
  EXPECT_EQ(NormalizeFunctionArgName("_arg_x_observed_0_0_0_arg"), "arg_x_observed_0_0_0_arg");
  EXPECT_EQ(NormalizeFunctionArgName("gradients/sub_grad/Shape_1_0_arg"),
            "gradients_sub_grad_shape_1_0_arg");
  EXPECT_EQ(NormalizeFunctionArgName("Sum_0_retval"), "sum_0_retval");
}

// A constant wanted from an IdentityN (or While) output wants only the input it passes on, as
// TensorFlow's const analysis: the other inputs (a loop's variables among them) stay arguments,
// and a resource handle is never a compile-time constant.
TEST(EncapsulateSubgraphsPassTest, AConstantThroughIdentityNWantsOnlyItsOwnInput) {
  GraphDef def;
  auto node = [&](std::string name, std::string op, std::vector<std::string> inputs,
                  std::string cluster) -> NodeDef& {
    NodeDef n;
    n.name = std::move(name);
    n.op = std::move(op);
    n.input = std::move(inputs);
    if (!cluster.empty()) n.attr[kXlaClusterAttr] = graph::AttrValue::String(cluster);
    def.node.push_back(std::move(n));
    return def.node.back();
  };
  node("x", "Placeholder", {}, "").attr["dtype"] = graph::AttrValue::Type(graph::DT_FLOAT);
  node("shape", "Placeholder", {}, "").attr["dtype"] = graph::AttrValue::Type(graph::DT_INT32);
  graph::AttrListValue types;
  types.type = {graph::DT_FLOAT, graph::DT_INT32};
  node("pass", "IdentityN", {"x", "shape"}, "c0").attr["T"] =
      graph::AttrValue::List(std::move(types));
  NodeDef& reshape = node("reshape", "Reshape", {"pass", "pass:1"}, "c0");
  reshape.attr["T"] = graph::AttrValue::Type(graph::DT_FLOAT);
  reshape.attr["Tshape"] = graph::AttrValue::Type(graph::DT_INT32);
  node("y", "Identity", {"reshape"}, "").attr["T"] = graph::AttrValue::Type(graph::DT_FLOAT);
  auto g = graph::Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  auto out = EncapsulateSubgraphsPass().Run(**g);
  ASSERT_TRUE(out.ok()) << out.status().message();
  graph::Node* call = out->graph->FindNode("c0");
  ASSERT_NE(call, nullptr);
  ASSERT_EQ(call->num_inputs(), 2);
  EXPECT_EQ(graph::FindAttr(call->attrs(), kXlaNumConstantArgsAttr)->i(), 1);
  EXPECT_EQ(call->input_node(0).first->name(), "shape");
  EXPECT_EQ(call->input_node(1).first->name(), "x");
}

}  // namespace
}  // namespace xlens::cluster
