// Small helpers for writing GraphDefs by hand in tests.
#pragma once

#include <string>
#include <vector>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph::testing {

inline NodeDef MakeNode(std::string name, std::string op, std::vector<std::string> inputs = {},
                        AttrMap attrs = {}) {
  NodeDef n;
  n.name = std::move(name);
  n.op = std::move(op);
  n.input = std::move(inputs);
  n.attr = std::move(attrs);
  return n;
}

inline NodeDef ConstNode(std::string name, Tensor value) {
  DataType dtype = value.dtype();
  return MakeNode(std::move(name), "Const", {},
                  {{"dtype", AttrValue::Type(dtype)}, {"value", AttrValue::TensorValue(value)}});
}

inline NodeDef FloatConst(std::string name, float v) {
  return ConstNode(std::move(name), Tensor::Scalar<float>(DT_FLOAT, v));
}

inline NodeDef PlaceholderNode(std::string name, DataType dtype, PartialShape shape) {
  return MakeNode(std::move(name), "Placeholder", {},
                  {{"dtype", AttrValue::Type(dtype)}, {"shape", AttrValue::Shape(shape)}});
}

inline NodeDef BinaryNode(std::string name, std::string op, std::string a, std::string b,
                          DataType t = DT_FLOAT) {
  return MakeNode(std::move(name), std::move(op), {std::move(a), std::move(b)},
                  {{"T", AttrValue::Type(t)}});
}

inline NodeDef UnaryNode(std::string name, std::string op, std::string a, DataType t = DT_FLOAT) {
  return MakeNode(std::move(name), std::move(op), {std::move(a)}, {{"T", AttrValue::Type(t)}});
}

}  // namespace xlens::graph::testing
