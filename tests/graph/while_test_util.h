// Functional While loops built with the builder API, for the tests of a While's gradient (graph/)
// and of its compilation (cluster/): the cond and body functions are built as graphs of _Arg and
// _Retval nodes and written to the graph's library.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/function.h"
#include "compiler/graph/scope.h"

namespace xlens::graph::testing {

using Body = std::function<std::vector<Output>(const Scope&, const std::vector<Output>&)>;

// Adds to `graph`'s library a function `name` over arguments of `types` whose results `build`
// makes from the _Arg nodes.
inline void AddFunction(Graph* graph, const std::string& name, const std::vector<DataType>& types,
                 const Body& build) {
  Scope root = Scope::NewRootScope();
  std::vector<Output> args;
  for (size_t i = 0; i < types.size(); ++i) {
    NodeDef def;
    def.name = "arg" + std::to_string(i);
    def.op = "_Arg";
    def.attr["T"] = AttrValue::Type(types[i]);
    def.attr["index"] = AttrValue::Int(static_cast<int64_t>(i));
    auto node = root.graph()->AddNode(std::move(def));
    ASSERT_TRUE(node.ok()) << node.status().message();
    args.push_back(Output(*node));
  }
  std::vector<Output> results = build(root, args);
  ASSERT_TRUE(root.ok()) << root.status().message();
  for (size_t i = 0; i < results.size(); ++i) {
    NodeDef def;
    def.name = "ret" + std::to_string(i);
    def.op = "_Retval";
    def.attr["T"] = AttrValue::Type(results[i].type());
    def.attr["index"] = AttrValue::Int(static_cast<int64_t>(i));
    auto node = root.graph()->AddNode(std::move(def));
    ASSERT_TRUE(node.ok()) << node.status().message();
    root.graph()->AddEdge(results[i].node, results[i].index, *node, 0);
  }
  auto fdef = GraphToFunctionDef(*root.graph(), name);
  ASSERT_TRUE(fdef.ok()) << fdef.status().message();
  graph->library().function.push_back(*fdef);
  // Loops inside the function put their own functions in its graph's library.
  for (const FunctionDef& f : root.graph()->library().function) {
    if (!graph->library().Find(f.signature.name)) graph->library().function.push_back(f);
  }
}

// A While over `inputs` with the cond and body built here.
inline Node* While(const Scope& s, const std::vector<Output>& inputs, const Body& cond,
                   const Body& body, const std::string& op = "While") {
  std::vector<DataType> types;
  for (const Output& x : inputs) types.push_back(x.type());
  // Names unique across the graphs a test builds (a body's loops are built in a graph of their
  // own, whose op names start over).
  static int loops = 0;
  const std::string name = "loop" + std::to_string(loops++);
  AddFunction(s.graph(), name + "_cond", types, cond);
  AddFunction(s.graph(), name + "_body", types, body);
  AttrListValue list;
  list.type = types;
  NameAttrList c, b;
  c.name = name + "_cond";
  b.name = name + "_body";
  return s.AddNode(op, inputs, {{"T", AttrValue::List(list)}, {"cond", AttrValue::Func(c)},
                                {"body", AttrValue::Func(b)}});
}

// i < 4: v <- tanh(v @ w + x), w and x captured (passed through unchanged).
inline Output Recurrence(const Scope& s, const Output& v0, const Output& w, const Output& x,
                  const std::string& op = "While") {
  Node* loop = While(
      s, {ops::Const(s, int32_t{0}), v0, w, x},
      [](const Scope& c, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Less(c, a[0], ops::Input(4))};
      },
      [](const Scope& b, const std::vector<Output>& a) {
        Output v = ops::Tanh(b, ops::Add(b, ops::MatMul(b, a[1], a[2]), a[3]));
        return std::vector<Output>{ops::Add(b, a[0], ops::Input(1)), v, a[2], a[3]};
      },
      op);
  return Output(loop, 1);
}

// while sum(v) < 10: v <- 1.5 v + x * x (the trip count depends on v0 and x).
inline Output GrowUntil(const Scope& s, const Output& v0, const Output& x) {
  Node* loop = While(
      s, {v0, x},
      [](const Scope& c, const std::vector<Output>& a) {
        Output sum = ops::Sum(c, a[0], ops::Input(0));
        return std::vector<Output>{ops::Less(c, sum, ops::Input::Like(10.0))};
      },
      [](const Scope& b, const std::vector<Output>& a) {
        Output v = ops::Add(b, ops::Mul(b, a[0], ops::Input::Like(1.5)), ops::Mul(b, a[1], a[1]));
        return std::vector<Output>{v, a[1]};
      });
  return Output(loop, 0);
}

// i < 4: h <- tanh(h @ w), each step's h written at i into a TensorList of `dtype` [2, 3]
// elements (a TF2 TensorArray's form: the list is a loop variable); the list stacked, [4, 2, 3].
inline Output ListLoop(const Scope& s, const Output& h0, const Output& w, DataType dtype) {
  AttrMap elements{{"element_dtype", AttrValue::Type(dtype)},
                   {"shape_type", AttrValue::Type(DT_INT32)}};
  Output list = ops::AsOutput(
      ops::BuildOp(s, "TensorListReserve", {ops::Input({2, 3}), ops::Input(4)}, elements));
  Node* loop = While(
      s, {ops::Const(s, int32_t{0}), h0, w, list},
      [](const Scope& c, const std::vector<Output>& a) {
        return std::vector<Output>{ops::Less(c, a[0], ops::Input(4))};
      },
      [dtype](const Scope& b, const std::vector<Output>& a) {
        Output h = ops::Tanh(b, ops::MatMul(b, a[1], a[2]));
        Output l = ops::AsOutput(ops::BuildOp(b, "TensorListSetItem", {a[3], a[0], h},
                                              {{"element_dtype", AttrValue::Type(dtype)}}));
        return std::vector<Output>{ops::Add(b, a[0], ops::Input(1)), h, a[2], l};
      });
  return ops::AsOutput(ops::BuildOp(
      s, "TensorListStack", {Output(loop, 3), ops::Input({2, 3})},
      {{"element_dtype", AttrValue::Type(dtype)}, {"num_elements", AttrValue::Int(4)}}));
}

}  // namespace xlens::graph::testing
