// A whole graph run as one must-compile function (--jit=compile, TensorFlow's jit_compile=True)
// with resource variables: the variables' nodes stay on the host, each variable the body touches
// is an argument (its current value an entry parameter), each one it writes an extra result
// written back after the run. Checked on the module the launch compiled (its parameters and
// results, read from the XLA dump) and on the values the session sees, with the variables
// carried through a While's state and out of an If's branches.
#include "compiler/cluster/must_compile_body.h"

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <ostream>
#include <regex>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "cluster_test_util.h"
#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/support/file_io.h"
#include "compiler/support/temporary_directory.h"

namespace xlens::cluster {
namespace {

namespace fs = std::filesystem;
using cluster_testing::kF32;
using cluster_testing::NodeText;
using graph::Tensor;

constexpr char kVarAttrs[] =
    "attr { key: \"dtype\" value { type: DT_FLOAT } } "
    "attr { key: \"shape\" value { shape { dim { size: 2 } } } }";
constexpr char kDtypeF32[] = "attr { key: \"dtype\" value { type: DT_FLOAT } }";
constexpr char kResourceAttrs[] =
    "attr { key: \"dtype\" value { type: DT_RESOURCE } } "
    "attr { key: \"shape\" value { shape { } } }";

std::string Var(const std::string& name) {
  return NodeText(name, "VarHandleOp", {},
                  std::string(kVarAttrs) + " attr { key: \"shared_name\" value { s: \"" + name +
                      "\" } }");
}
std::string X() {
  return NodeText("x", "Placeholder", {},
                  "attr { key: \"dtype\" value { type: DT_FLOAT } } "
                  "attr { key: \"shape\" value { shape { dim { size: 2 } } } }");
}

// A scalar Const node of `type` ("DT_INT32") holding `value` ("int_val: 0").
std::string ScalarConst(const std::string& name, const std::string& type,
                        const std::string& value) {
  return NodeText(name, "Const", {},
                  "attr { key: \"dtype\" value { type: " + type +
                      " } } attr { key: \"value\" value { tensor { dtype: " + type +
                      " tensor_shape { } " + value + " } } }");
}

// What the compiled module takes and gives: its entry parameters and its results.
struct ModuleInterface {
  int parameters = 0;
  int results = 0;
  bool operator==(const ModuleInterface&) const = default;
};
void PrintTo(const ModuleInterface& m, std::ostream* os) {
  *os << m.parameters << " parameters, " << m.results << " results";
}

ModuleInterface InterfaceOf(const std::string& text) {
  ModuleInterface m;
  std::smatch match;
  std::string entry = text.substr(text.find("ENTRY"));
  const std::regex parameter(R"( parameter\(\d+\))");
  m.parameters = static_cast<int>(std::distance(
      std::sregex_iterator(entry.begin(), entry.end(), parameter), std::sregex_iterator()));
  // The root: a tuple of N results, or one value.
  if (std::regex_search(entry, match, std::regex(R"(ROOT [^=]+= \(([^)]*)\) tuple\()"))) {
    const std::string elements = match[1].str();
    m.results = 1 + static_cast<int>(std::count(elements.begin(), elements.end(), ','));
  } else {
    m.results = 1;
  }
  return m;
}

// A session over `text` running it whole as the must-compile function "f", dumping the XLA
// modules it compiles into a directory of its own.
struct MustCompileRun {
  explicit MustCompileRun(const std::string& text) {
    auto dir = TemporaryDirectory::Create("must-compile-test");
    EXPECT_TRUE(dir.ok()) << dir.status().message();
    dump = std::make_unique<TemporaryDirectory>(std::move(*dir));
    FlagEnvironment env;
    env.xla_flags = "--xla_dump_to=" + dump->path();
    auto flags = ParseDebugOptions(env);
    EXPECT_TRUE(flags.ok()) << flags.status().message();
    jit = std::make_unique<XlaJit>(*flags, [](const std::string&) {});
    jit->set_must_compile_function("f");
    graph::SessionOptions options;
    jit->Install(&options);
    auto def = graph::ParseGraphDef(text, graph::GraphDefFormat::kText, "test.pbtxt");
    EXPECT_TRUE(def.ok()) << def.status().message();
    auto s = graph::Session::Create(*def, options);
    EXPECT_TRUE(s.ok()) << s.status().message();
    session = std::move(*s);
  }

  void SetVariable(const std::string& name, std::vector<float> value) {
    auto var = session->resources().LookupOrCreate("", name, graph::DT_FLOAT,
                                                   graph::PartialShape({2}));
    std::lock_guard<std::mutex> lock(var->mu);
    var->value = Tensor::Vector<float>(graph::DT_FLOAT, value);
  }
  std::vector<float> Variable(const std::string& name) {
    auto var = session->resources().Lookup("", name);
    EXPECT_NE(var, nullptr) << name;
    if (var == nullptr) return {};
    std::lock_guard<std::mutex> lock(var->mu);
    return {var->value.flat<float>()[0], var->value.flat<float>()[1]};
  }
  std::vector<std::vector<float>> Run(std::vector<float> x, const std::vector<std::string>& fetches,
                                      const std::vector<std::string>& targets = {}) {
    auto out = session->Run({{"x", Tensor::Vector<float>(graph::DT_FLOAT, x)}}, fetches, targets);
    EXPECT_TRUE(out.ok()) << out.status().message();
    std::vector<std::vector<float>> values;
    if (!out.ok()) return values;
    for (const Tensor& t : *out) values.push_back({t.flat<float>()[0], t.flat<float>()[1]});
    return values;
  }
  // The one module compiled so far, before optimization.
  ModuleInterface Module() {
    std::vector<std::string> found;
    for (const auto& f : fs::directory_iterator(dump->path())) {
      const std::string name = f.path().filename().string();
      if (name.find("before_optimizations.txt") != std::string::npos) found.push_back(f.path());
    }
    EXPECT_EQ(found.size(), 1u);
    if (found.size() != 1) return {};
    auto text = ReadFile(found[0]);
    EXPECT_TRUE(text.ok());
    return InterfaceOf(*text);
  }

  std::unique_ptr<TemporaryDirectory> dump;
  std::unique_ptr<XlaJit> jit;
  std::unique_ptr<graph::Session> session;
};

TEST(MustCompileHostNodesTest, VariablesStayOutsideTheirUsersStayIn) {
  auto g = cluster_testing::LoadGraph(
      Var("v") +
      NodeText("captured", "Placeholder", {}, kResourceAttrs) +
      NodeText("ref", "VariableV2", {}, kVarAttrs) +
      NodeText("ref/read", "Identity", {"ref"}, kF32) +
      NodeText("read", "ReadVariableOp", {"v"}, kDtypeF32) +
      NodeText("read_captured", "ReadVariableOp", {"captured"}, kDtypeF32) +
      NodeText("sum", "AddV2", {"read", "ref/read"}, kF32) +
      // A handle made after something the body computes cannot be an input of the body.
      NodeText("late", "VarHandleOp", {"^sum"}, kVarAttrs));
  ASSERT_NE(g, nullptr);
  std::map<std::string, std::string> host = MustCompileHostNodes(*g);
  std::vector<std::string> names;
  for (const auto& [name, reason] : host) names.push_back(name);
  EXPECT_THAT(names, ::testing::ElementsAre("captured", "ref", "ref/read", "v"));
  EXPECT_THAT(host["v"], ::testing::HasSubstr("input of the compiled function"));
  EXPECT_THAT(host["captured"], ::testing::HasSubstr("captured resource variable"));
}

TEST(MustCompileHostNodesTest, ControlFlowStaysFunctionalCallsAreUntouched) {
  auto def = graph::ParseGraphDef(
      NodeText("loop", "While", {}, "attr { key: \"_lower_using_switch_merge\" value { b: true } }") +
          NodeText("call", "StatefulPartitionedCall", {},
                   "attr { key: \"_lower_using_switch_merge\" value { b: true } }") +
          "library { function { signature { name: \"f\" } node_def { name: \"branch\" op: "
          "\"StatelessIf\" attr { key: \"_lower_using_switch_merge\" value { b: true } } } } }",
      graph::GraphDefFormat::kText, "test.pbtxt");
  ASSERT_TRUE(def.ok()) << def.status().message();
  KeepFunctionalControlFlow(&*def);
  EXPECT_EQ(graph::FindAttr(def->node[0].attr, "_lower_using_switch_merge"), nullptr);
  EXPECT_NE(graph::FindAttr(def->node[1].attr, "_lower_using_switch_merge"), nullptr);
  EXPECT_EQ(graph::FindAttr(def->library.function[0].node_def[0].attr,
                            "_lower_using_switch_merge"),
            nullptr);
}

TEST(MustCompileVariablesTest, AVariableReadAfterItsOwnUpdateSeesTheUpdate) {
  MustCompileRun run(Var("v") + X() +
                     NodeText("update", "AssignAddVariableOp", {"v", "x"}, kDtypeF32) +
                     NodeText("read", "ReadVariableOp", {"v", "^update"}, kDtypeF32) +
                     NodeText("out", "Mul", {"read", "x"}, kF32));
  run.SetVariable("v", {1, 2});
  EXPECT_EQ(run.Run({10, 20}, {"out"}), (std::vector<std::vector<float>>{{110, 440}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{11, 22}));
  // The variable carries over: the second step starts from the first's update.
  EXPECT_EQ(run.Run({10, 20}, {"out"}), (std::vector<std::vector<float>>{{210, 840}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{21, 42}));
  // x and v's value in; the fetch and v's new value out.
  EXPECT_EQ(run.Module(), (ModuleInterface{2, 2}));
  XlaJitRecord record = run.jit->record();
  ASSERT_EQ(record.graphs.size(), 1u);
  EXPECT_THAT(record.graphs[0].result.unclustered.at("v"),
              ::testing::HasSubstr("the variable is an input of the compiled function"));
  EXPECT_EQ(record.graphs[0].result.clusters.at("f").size(), 3u);
}

TEST(MustCompileVariablesTest, TwoAssignsToOneVariableGiveOneUpdateTheLastValue) {
  MustCompileRun run(Var("v") + X() +
                     NodeText("first", "AssignVariableOp", {"v", "x"}, kDtypeF32) +
                     NodeText("r1", "ReadVariableOp", {"v", "^first"}, kDtypeF32) +
                     NodeText("square", "Mul", {"r1", "r1"}, kF32) +
                     NodeText("second", "AssignVariableOp", {"v", "square", "^first"}, kDtypeF32) +
                     NodeText("r2", "ReadVariableOp", {"v", "^second"}, kDtypeF32) +
                     NodeText("out", "AddV2", {"r1", "r2"}, kF32));
  run.SetVariable("v", {100, 100});
  EXPECT_EQ(run.Run({2, 3}, {"out"}), (std::vector<std::vector<float>>{{6, 12}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{4, 9}));
  // v is written before it is read: its old value still enters as a parameter (TensorFlow's
  // XlaCompiler passes every initialized resource), and leaves once, as its last value.
  EXPECT_EQ(run.Module(), (ModuleInterface{2, 2}));
}

TEST(MustCompileVariablesTest, AVariableOnlyReadIsAParameterAndNoResult) {
  MustCompileRun run(Var("w") + Var("v") + X() +
                     NodeText("rw", "ReadVariableOp", {"w"}, kDtypeF32) +
                     NodeText("update", "AssignSubVariableOp", {"v", "rw"}, kDtypeF32) +
                     NodeText("out", "Mul", {"rw", "x"}, kF32));
  run.SetVariable("w", {3, 4});
  run.SetVariable("v", {10, 10});
  EXPECT_EQ(run.Run({1, 2}, {"out"}, {"update"}), (std::vector<std::vector<float>>{{3, 8}}));
  EXPECT_EQ(run.Run({1, 2}, {"out"}, {"update"}), (std::vector<std::vector<float>>{{3, 8}}));
  EXPECT_EQ(run.Variable("w"), (std::vector<float>{3, 4}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{4, 2}));
  // x, w and v in; the fetch and v out, w not.
  EXPECT_EQ(run.Module(), (ModuleInterface{3, 2}));
}

// A loop that turns three times: v = v * 0.5 + x + w; w is only read.
constexpr char kWhileLibrary[] = R"(
library {
  function {
    signature {
      name: "cond"
      input_arg { name: "i" type: DT_INT32 }
      input_arg { name: "v" type: DT_RESOURCE }
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "w" type: DT_RESOURCE }
      output_arg { name: "out" type: DT_BOOL }
    }
    node_def { name: "limit" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 3 } } } }
    node_def { name: "less" op: "Less" input: "i" input: "limit:output:0"
               attr { key: "T" value { type: DT_INT32 } } }
    ret { key: "out" value: "less:z:0" }
  }
  function {
    signature {
      name: "body"
      input_arg { name: "i" type: DT_INT32 }
      input_arg { name: "v" type: DT_RESOURCE }
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "w" type: DT_RESOURCE }
      output_arg { name: "i_next" type: DT_INT32 }
      output_arg { name: "v_out" type: DT_RESOURCE }
      output_arg { name: "x_out" type: DT_FLOAT }
      output_arg { name: "w_out" type: DT_RESOURCE }
    }
    node_def { name: "read" op: "ReadVariableOp" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "read_w" op: "ReadVariableOp" input: "w" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "half" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
               attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { } float_val: 0.5 } } } }
    node_def { name: "scaled" op: "Mul" input: "read:value:0" input: "half:output:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "plus_x" op: "AddV2" input: "scaled:z:0" input: "x"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "sum" op: "AddV2" input: "plus_x:z:0" input: "read_w:value:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "assign" op: "AssignVariableOp" input: "v" input: "sum:z:0"
               attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "one" op: "Const" attr { key: "dtype" value { type: DT_INT32 } }
               attr { key: "value" value { tensor { dtype: DT_INT32 tensor_shape { } int_val: 1 } } } }
    node_def { name: "next" op: "AddV2" input: "i" input: "one:output:0"
               attr { key: "T" value { type: DT_INT32 } } }
    node_def { name: "v_id" op: "Identity" input: "v" input: "^assign"
               attr { key: "T" value { type: DT_RESOURCE } } }
    ret { key: "i_next" value: "next:z:0" }
    ret { key: "v_out" value: "v_id:output:0" }
    ret { key: "x_out" value: "x" }
    ret { key: "w_out" value: "w" }
  }
}
)";

TEST(MustCompileVariablesTest, AVariableUpdatedInAWhileBodyIsCarriedThroughTheLoop) {
  MustCompileRun run(
      Var("v") + Var("w") + X() +
      ScalarConst("zero", "DT_INT32", "int_val: 0") +
      NodeText("loop", "While", {"zero", "v", "x", "w"},
               "attr { key: \"T\" value { list { type: DT_INT32 type: DT_RESOURCE type: DT_FLOAT "
               "type: DT_RESOURCE } } } attr { key: \"cond\" value { func { name: \"cond\" } } } "
               "attr { key: \"body\" value { func { name: \"body\" } } }") +
      NodeText("read", "ReadVariableOp", {"loop:1"}, kDtypeF32) +
      NodeText("out", "Identity", {"read"}, kF32) + kWhileLibrary);
  run.SetVariable("v", {8, 16});
  run.SetVariable("w", {1, 0});
  // 8 -> 4+2+1 = 7 -> 3.5+3 = 6.5 -> 3.25+3 = 6.25; 16 -> 8+4 = 12 -> 6+4 = 10 -> 5+4 = 9.
  EXPECT_EQ(run.Run({2, 4}, {"out"}), (std::vector<std::vector<float>>{{6.25f, 9}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{6.25f, 9}));
  EXPECT_EQ(run.Variable("w"), (std::vector<float>{1, 0}));
  // The next step starts from the loop's last value.
  EXPECT_EQ(run.Run({2, 4}, {"out"}), (std::vector<std::vector<float>>{{6.03125f, 8.125f}}));
  // x, v and w in; the fetch and v out: the loop carried w but never wrote it.
  EXPECT_EQ(run.Module(), (ModuleInterface{3, 2}));
}

// then: v += x, the new v out; else: x - w, v untouched; w only read.
constexpr char kIfLibrary[] = R"(
library {
  function {
    signature {
      name: "then_fn"
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "v" type: DT_RESOURCE }
      input_arg { name: "w" type: DT_RESOURCE }
      output_arg { name: "out" type: DT_FLOAT }
    }
    node_def { name: "read" op: "ReadVariableOp" input: "v" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "sum" op: "AddV2" input: "read:value:0" input: "x"
               attr { key: "T" value { type: DT_FLOAT } } }
    node_def { name: "assign" op: "AssignVariableOp" input: "v" input: "sum:z:0"
               attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "result" op: "Identity" input: "sum:z:0" input: "^assign"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "result:output:0" }
  }
  function {
    signature {
      name: "else_fn"
      input_arg { name: "x" type: DT_FLOAT }
      input_arg { name: "v" type: DT_RESOURCE }
      input_arg { name: "w" type: DT_RESOURCE }
      output_arg { name: "out" type: DT_FLOAT }
    }
    node_def { name: "read_w" op: "ReadVariableOp" input: "w" attr { key: "dtype" value { type: DT_FLOAT } } }
    node_def { name: "diff" op: "Sub" input: "x" input: "read_w:value:0"
               attr { key: "T" value { type: DT_FLOAT } } }
    ret { key: "out" value: "diff:z:0" }
  }
}
)";

TEST(MustCompileVariablesTest, AVariableWrittenInOneBranchOfAnIfIsAResultOfBoth) {
  MustCompileRun run(
      Var("v") + Var("w") + X() +
      ScalarConst("axis", "DT_INT32", "int_val: 0") +
      NodeText("total", "Sum", {"x", "axis"},
               "attr { key: \"T\" value { type: DT_FLOAT } } attr { key: \"Tidx\" value { type: "
               "DT_INT32 } } attr { key: \"keep_dims\" value { b: false } }") +
      ScalarConst("zero", "DT_FLOAT", "float_val: 0") +
      NodeText("positive", "Greater", {"total", "zero"}, kF32) +
      NodeText("branch", "If", {"positive", "x", "v", "w"},
               "attr { key: \"Tcond\" value { type: DT_BOOL } } attr { key: \"Tin\" value { list "
               "{ type: DT_FLOAT type: DT_RESOURCE type: DT_RESOURCE } } } attr { key: \"Tout\" "
               "value { list { type: DT_FLOAT } } } attr { key: \"then_branch\" value { func { "
               "name: \"then_fn\" } } } attr { key: \"else_branch\" value { func { name: "
               "\"else_fn\" } } }") +
      NodeText("out", "Identity", {"branch"}, kF32) + kIfLibrary);
  run.SetVariable("v", {1, 2});
  run.SetVariable("w", {10, 20});
  EXPECT_EQ(run.Run({1, 2}, {"out"}), (std::vector<std::vector<float>>{{2, 4}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{2, 4}));
  // The other branch, from the same executable: v keeps its value, w is read.
  EXPECT_EQ(run.Run({-1, -2}, {"out"}), (std::vector<std::vector<float>>{{-11, -22}}));
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{2, 4}));
  EXPECT_EQ(run.Variable("w"), (std::vector<float>{10, 20}));
  // x, v and w in; the fetch and v out (both branches return v's value).
  EXPECT_EQ(run.Module(), (ModuleInterface{3, 2}));
}

TEST(MustCompileVariablesTest, InitializersRunOpByOpWhileTheJitIsPaused) {
  MustCompileRun run(Var("v") + X() +
                     NodeText("initial", "Const", {},
                              "attr { key: \"dtype\" value { type: DT_FLOAT } } attr { key: "
                              "\"value\" value { tensor { dtype: DT_FLOAT tensor_shape { dim { "
                              "size: 2 } } float_val: 5 float_val: 7 } } }") +
                     NodeText("init", "AssignVariableOp", {"v", "initial"}, kDtypeF32) +
                     NodeText("read", "ReadVariableOp", {"v"}, kDtypeF32) +
                     NodeText("out", "Mul", {"read", "x"}, kF32));
  run.jit->set_paused(true);
  ASSERT_TRUE(run.session->Run({}, {}, {"init"}).ok());
  run.jit->set_paused(false);
  // Nothing was clustered or compiled for the initializer's run.
  EXPECT_TRUE(run.jit->record().graphs.empty());
  EXPECT_EQ(run.Variable("v"), (std::vector<float>{5, 7}));
  EXPECT_EQ(run.Run({1, 2}, {"out"}), (std::vector<std::vector<float>>{{5, 14}}));
  EXPECT_EQ(run.jit->record().graphs.size(), 1u);
}

TEST(MustCompileVariablesTest, AnUninitializedVariableIsNamed) {
  MustCompileRun run(Var("v") + X() + NodeText("read", "ReadVariableOp", {"v"}, kDtypeF32) +
                     NodeText("out", "Mul", {"read", "x"}, kF32));
  auto out = run.session->Run({{"x", Tensor::Vector<float>(graph::DT_FLOAT, {1, 2})}}, {"out"});
  ASSERT_FALSE(out.ok());
  // Named as the graph names the variable, not as the compiled function's argument.
  EXPECT_THAT(out.status().message(),
              ::testing::HasSubstr("reads variable 'v' (argument 1), which is uninitialized"));
}

}  // namespace
}  // namespace xlens::cluster
