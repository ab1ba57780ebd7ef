// Ops of TensorFlow's runtime graphs: _DeviceArg and _DeviceRetval (a multi-device function's
// arguments and results) load and run fed by name, and _SwitchN (the n-way Switch TensorFlow
// lowers Case to) sends its data to one output, the last for an index out of range, and leaves
// the others dead, so a Merge after it takes the one branch that ran.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"

namespace xlens::graph {
namespace {

GraphDef Parse(const std::string& text) {
  auto def = ParseGraphDef(text, GraphDefFormat::kText, "runtime.pbtxt");
  EXPECT_TRUE(def.ok()) << def.status().message();
  return def.ok() ? *def : GraphDef{};
}

TEST(RuntimeGraphOpsTest, DeviceArgAndRetvalLoadAndRunFedByName) {
  GraphDef def = Parse(R"(
node { name: "x" op: "_DeviceArg" device: "/job:localhost/replica:0/task:0/device:CPU:1"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
node { name: "neg" op: "Neg" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "out" op: "_DeviceRetval" input: "neg"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "index" value { i: 0 } } }
)");
  auto g = Graph::FromGraphDef(def);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_FALSE((*g)->FindNode("x")->registration().has_xla_kernel);
  auto session = Session::Create(def);
  ASSERT_TRUE(session.ok()) << session.status().message();
  auto out = (*session)->Run({{"x", Tensor::Vector<float>(DT_FLOAT, {1.5f})}}, {"neg"});
  ASSERT_TRUE(out.ok()) << out.status().message();
  EXPECT_EQ((*out)[0].flat<float>()[0], -1.5f);
}

// data -> _SwitchN(3 ways) -> branch b multiplies by 10^b (its constant behind a pivot, as the
// lowering puts it) -> Merge.
constexpr const char* kSwitchN = R"(
node { name: "data" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } }
node { name: "index" op: "Placeholder" attr { key: "dtype" value { type: DT_INT32 } } }
node { name: "sw" op: "_SwitchN" input: "data" input: "index"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "num_outs" value { i: 3 } } }
node { name: "p1" op: "Identity" input: "sw:1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "p2" op: "Identity" input: "sw:2" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c1" op: "Const" input: "^p1" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 10 } } } }
node { name: "c2" op: "Const" input: "^p2" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape {} float_val: 100 } } } }
node { name: "b0" op: "Identity" input: "sw" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "b1" op: "Mul" input: "sw:1" input: "c1" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "b2" op: "Mul" input: "sw:2" input: "c2" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "merge" op: "Merge" input: "b0" input: "b1" input: "b2"
       attr { key: "T" value { type: DT_FLOAT } } attr { key: "N" value { i: 3 } } }
)";

TEST(RuntimeGraphOpsTest, SwitchNTakesTheIndexedOutputAndTheLastOutOfRange) {
  auto session = Session::Create(Parse(kSwitchN));
  ASSERT_TRUE(session.ok()) << session.status().message();
  const std::vector<std::pair<int32_t, float>> cases = {
      {0, 2.0f}, {1, 20.0f}, {2, 200.0f}, {3, 200.0f}, {-1, 200.0f}, {99, 200.0f}};
  for (const auto& [index, want] : cases) {
    auto out = (*session)->Run({{"data", Tensor::Scalar(DT_FLOAT, 2.0f)},
                                {"index", Tensor::Scalar<int32_t>(DT_INT32, index)}},
                               {"merge", "merge:1"});
    ASSERT_TRUE(out.ok()) << out.status().message();
    EXPECT_EQ((*out)[0].flat<float>()[0], want) << "index " << index;
    EXPECT_EQ((*out)[1].flat<int32_t>()[0], index >= 0 && index < 3 ? index : 2)
        << "index " << index;
  }
}

}  // namespace
}  // namespace xlens::graph
