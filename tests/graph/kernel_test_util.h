// Runs one op's kernel (and its shape function) on given tensors, without an executor: builds
// the node with Graph::AddNode and calls the registered kernel with an OpKernelContext. Also
// reads the cases TensorFlow computed (testdata/ops/*_cases.json, see generate.py there) and
// checks our kernel and shape function against each.
#pragma once

#include <cmath>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/shape_inference.h"
#include "compiler/support/thread_pool.h"

namespace xlens::graph::testing {

// One node of `op` in its own graph, run as often as asked with the same KernelState (a
// stateful kernel continues where it left off, as in a session).
class KernelRunner {
 public:
  KernelRunner(const std::string& op, AttrMap attrs, const std::string& name = "node") {
    NodeDef def;
    def.name = name;
    def.op = op;
    def.attr = std::move(attrs);
    auto node = graph_.AddNode(std::move(def));
    status_ = node.status();
    if (node.ok()) node_ = *node;
  }
  const Status& status() const { return status_; }
  Node* node() const { return node_; }
  ResourceMgr& resources() { return *resources_; }
  void set_resources(std::shared_ptr<ResourceMgr> r) { resources_ = std::move(r); }

  StatusOr<std::vector<Tensor>> Run(std::vector<Tensor> inputs) {
    if (!status_.ok()) return status_;
    OpKernelContext ctx(*node_, std::move(inputs), {}, resources_.get(), &state_,
                        &ThreadPool::Default());
    if (!node_->registration().kernel) return Status::Error("no kernel for " + node_->name());
    RETURN_IF_ERROR(node_->registration().kernel(ctx));
    return ctx.outputs();
  }

  // The shape function's output shapes when every input is the given constant.
  StatusOr<std::vector<PartialShape>> InferShapes(const std::vector<Tensor>& inputs) {
    if (!status_.ok()) return status_;
    std::vector<PartialShape> shapes;
    std::vector<const Tensor*> values;
    for (const Tensor& t : inputs) {
      shapes.push_back(t.shape());
      values.push_back(&t);
    }
    InferenceContext c(node_, &node_->attrs(), shapes, node_->input_types(),
                       node_->output_types(), values);
    RETURN_IF_ERROR(node_->registration().shape_fn(c));
    return c.outputs();
  }

 private:
  Graph graph_;
  Node* node_ = nullptr;
  Status status_;
  std::shared_ptr<ResourceMgr> resources_ = std::make_shared<ResourceMgr>();
  KernelState state_;
};

inline StatusOr<std::vector<Tensor>> RunOp(const std::string& op, std::vector<Tensor> inputs,
                                           AttrMap attrs) {
  KernelRunner runner(op, std::move(attrs));
  return runner.Run(std::move(inputs));
}

// ---- the JSON form of generate.py -----------------------------------------------------------

inline Tensor TensorFromJson(const nlohmann::json& j) {
  const DataType dtype = *ParseDataTypeEnumName(j["dtype"].get<std::string>());
  Tensor t(dtype, j["shape"].get<std::vector<int64_t>>());
  const auto& values = j["values"];
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    const auto& v = values[i];
    if (dtype == DT_STRING) {
      t.strings()[i] = v.get<std::string>();
    } else if (dtype == DT_BOOL) {
      t.flat<bool>()[i] = v.get<bool>();
    } else if (dtype == DT_UINT64) {
      t.flat<uint64_t>()[i] = v.get<uint64_t>();
    } else if (DataTypeIsInteger(dtype)) {
      t.SetFromInt64(i, v.get<int64_t>());
    } else if (v.is_string()) {  // "inf", "-inf", "nan"
      t.SetFromDouble(i, std::strtod(v.get<std::string>().c_str(), nullptr));
    } else {
      t.SetFromDouble(i, v.get<double>());
    }
  }
  return t;
}

inline AttrMap AttrsFromJson(const nlohmann::json& j) {
  AttrMap attrs;
  for (const auto& [name, v] : j.items()) {
    if (v.contains("type")) {
      attrs[name] = AttrValue::Type(*ParseDataTypeEnumName(v["type"].get<std::string>()));
    } else if (v.contains("i")) {
      attrs[name] = AttrValue::Int(v["i"].get<int64_t>());
    } else if (v.contains("b")) {
      attrs[name] = AttrValue::Bool(v["b"].get<bool>());
    } else if (v.contains("f")) {
      attrs[name] = AttrValue::Float(v["f"].get<float>());
    } else if (v.contains("s")) {
      attrs[name] = AttrValue::String(v["s"].get<std::string>());
    } else if (v.contains("shape")) {
      attrs[name] = AttrValue::Shape(v["unknown_rank"].get<bool>()
                                         ? PartialShape::UnknownRank()
                                         : PartialShape(v["shape"].get<std::vector<int64_t>>()));
    } else if (v.contains("list_type")) {
      AttrListValue l;
      for (const auto& t : v["list_type"]) l.type.push_back(*ParseDataTypeEnumName(t.get<std::string>()));
      attrs[name] = AttrValue::List(l);
    } else if (v.contains("list_i")) {
      AttrListValue l;
      l.i = v["list_i"].get<std::vector<int64_t>>();
      attrs[name] = AttrValue::List(l);
    } else if (v.contains("list_s")) {
      AttrListValue l;
      l.s = v["list_s"].get<std::vector<std::string>>();
      attrs[name] = AttrValue::List(l);
    }
  }
  return attrs;
}

// Exact comparison: same dtype, dims and elements (floats bit for bit, as TensorFlow computed).
inline ::testing::AssertionResult SameAsJson(const nlohmann::json& want, const Tensor& got) {
  const Tensor w = TensorFromJson(want);
  if (w.dtype() != got.dtype()) {
    return ::testing::AssertionFailure() << "dtype " << DataTypeName(got.dtype())
                                         << ", TensorFlow " << DataTypeName(w.dtype());
  }
  if (!w.Identical(got)) {
    return ::testing::AssertionFailure() << "\n  ours:       " << got.DebugString(64)
                                         << "\n  TensorFlow: " << w.DebugString(64);
  }
  return ::testing::AssertionSuccess();
}

inline nlohmann::json LoadCases(const std::string& file) {
  std::ifstream in(std::string(XLENS_TESTDATA_DIR) + "/ops/" + file);
  std::stringstream text;
  text << in.rdbuf();
  return nlohmann::json::parse(text.str());
}

// Runs one TensorFlow case: the kernel must produce TensorFlow's outputs (every run, for
// stateful ops), or fail where TensorFlow failed (with TensorFlow's message where the kernel
// reported it); the shape function must give the outputs' shapes from constant inputs, or fail
// where TensorFlow's shape function did.
inline void CheckCase(const nlohmann::json& c) {
  SCOPED_TRACE(c["name"].get<std::string>());
  KernelRunner runner(c["op"], AttrsFromJson(c["attrs"]), c["name"]);
  ASSERT_TRUE(runner.status().ok()) << runner.status().message();
  std::vector<Tensor> inputs;
  for (const auto& j : c["inputs"]) inputs.push_back(TensorFromJson(j));
  auto shapes = runner.InferShapes(inputs);
  auto outputs = runner.Run(inputs);
  if (c.contains("error")) {
    const std::string want = c["error"];
    ASSERT_FALSE(outputs.ok()) << "TensorFlow failed with: " << want;
    if (c.value("shape_error", false)) {
      EXPECT_FALSE(shapes.ok()) << "TensorFlow's shape function failed with: " << want;
    } else {
      EXPECT_NE(outputs.status().message().find(want), std::string::npos)
          << "ours: " << outputs.status().message() << "\nTensorFlow: " << want;
    }
    return;
  }
  ASSERT_TRUE(outputs.ok()) << outputs.status().message();
  ASSERT_EQ(outputs->size(), c["outputs"].size());
  for (size_t i = 0; i < outputs->size(); ++i) {
    EXPECT_TRUE(SameAsJson(c["outputs"][i], (*outputs)[i])) << "output " << i;
  }
  ASSERT_TRUE(shapes.ok()) << shapes.status().message();
  for (size_t i = 0; i < outputs->size(); ++i) {
    EXPECT_TRUE((*shapes)[i].IsCompatibleWith((*outputs)[i].dims()))
        << "output " << i << ": shape function " << (*shapes)[i].ToString() << ", kernel "
        << DimsToString((*outputs)[i].dims());
    const std::string op = c["op"];
    // TensorFlow gives these a data-dependent size even from constants.
    const bool dynamic = op == "Where" || op == "Unique" || op == "UniqueWithCounts" ||
                         op == "BroadcastGradientArgs";
    EXPECT_TRUE(dynamic || (*shapes)[i].IsFullyDefined())
        << "output " << i << ": constant inputs should give a static shape, got "
        << (*shapes)[i].ToString();
  }
  if (c.contains("later_runs")) {
    for (const auto& run : c["later_runs"]) {
      auto again = runner.Run(inputs);
      ASSERT_TRUE(again.ok()) << again.status().message();
      for (size_t i = 0; i < again->size(); ++i) {
        EXPECT_TRUE(SameAsJson(run[i], (*again)[i])) << "later run, output " << i;
      }
    }
  }
}

}  // namespace xlens::graph::testing
