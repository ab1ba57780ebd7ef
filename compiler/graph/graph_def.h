// GraphDef, NodeDef and the function library as plain structs: what graph_def_io reads from and
// writes to TensorFlow's .pb and .pbtxt files. Fields this front end does not model (a NodeDef's
// experimental_debug_info, full type information, ...) are kept as the serialized bytes of a
// message holding only them, so a GraphDef read and written back keeps them.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/op_def.h"

namespace xlens::graph {

struct NodeDef {
  std::string name;
  std::string op;
  std::vector<std::string> input;  // "node", "node:1", "^node"
  std::string device;
  AttrMap attr;
  std::string unmodeled_fields;  // serialized NodeDef with only the fields we do not model
};

struct FunctionDef {
  OpDef signature;
  AttrMap attr;
  std::map<int, AttrMap> arg_attr;
  std::map<int, int> resource_arg_unique_id;
  std::vector<NodeDef> node_def;
  std::map<std::string, std::string> ret;          // output arg name -> "node:out_arg:index"
  std::map<std::string, std::string> control_ret;  // control output -> node name
  std::string unmodeled_fields;
};

struct GradientDef {
  std::string function_name;
  std::string gradient_func;
};

struct FunctionDefLibrary {
  std::vector<FunctionDef> function;
  std::vector<GradientDef> gradient;
  std::string unmodeled_fields;
  const FunctionDef* Find(const std::string& name) const;
};

struct VersionDef {
  int producer = 0;
  int min_consumer = 0;
  std::vector<int> bad_consumers;
};

struct GraphDef {
  std::vector<NodeDef> node;
  FunctionDefLibrary library;
  VersionDef versions;
  std::string unmodeled_fields;
};

// Parses "node", "node:2", "^node" into (node, index); index -1 for a control input.
struct TensorId {
  std::string node;
  int index = 0;
  bool IsControl() const { return index < 0; }
  std::string ToString() const;  // "node" for index 0, "node:2", "^node"
};
StatusOr<TensorId> ParseTensorName(const std::string& name);

}  // namespace xlens::graph
