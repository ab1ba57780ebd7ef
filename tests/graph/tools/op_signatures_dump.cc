// Prints every op of the registry as JSON (its OpDef, plus whether XLA has a kernel and which
// inputs must be compile-time constants), so tests/graph/op_signatures_test.py can compare the
// signatures with TensorFlow's own registry.
#include <cstdio>
#include <iostream>

#include <nlohmann/json.hpp>

#include "compiler/graph/op_registry.h"

namespace xlens::graph {
namespace {

using nlohmann::json;

json ShapeJson(const PartialShape& s) {
  json j = {{"unknown_rank", s.unknown_rank()}};
  j["dims"] = s.unknown_rank() ? json::array() : json(s.dims());
  return j;
}

json ValueJson(const AttrValue& v) {
  switch (v.kind()) {
    case AttrValue::Kind::kString: return {{"s", v.s()}};
    case AttrValue::Kind::kInt: return {{"i", v.i()}};
    case AttrValue::Kind::kFloat: return {{"f", v.f()}};
    case AttrValue::Kind::kBool: return {{"b", v.b()}};
    case AttrValue::Kind::kType: return {{"type", DataTypeEnumName(v.type())}};
    case AttrValue::Kind::kShape: return {{"shape", ShapeJson(v.shape())}};
    case AttrValue::Kind::kList: {
      const AttrListValue& l = v.list();
      json list = json::object();
      if (!l.s.empty()) list["s"] = l.s;
      if (!l.i.empty()) list["i"] = l.i;
      if (!l.f.empty()) list["f"] = l.f;
      if (!l.b.empty()) list["b"] = l.b;
      if (!l.type.empty()) {
        json types = json::array();
        for (DataType t : l.type) types.push_back(DataTypeEnumName(t));
        list["type"] = types;
      }
      if (!l.shape.empty()) {
        json shapes = json::array();
        for (const PartialShape& s : l.shape) shapes.push_back(ShapeJson(s));
        list["shape"] = shapes;
      }
      return {{"list", list}};
    }
    case AttrValue::Kind::kTensor: return {{"tensor", v.tensor().DebugString()}};
    case AttrValue::Kind::kFunc: return {{"func", v.func().name}};
    default: return {{"none", true}};
  }
}

json ArgJson(const OpDef::ArgDef& a) {
  return {{"name", a.name},
          {"type", a.type == DT_INVALID ? "" : DataTypeEnumName(a.type)},
          {"type_attr", a.type_attr},
          {"number_attr", a.number_attr},
          {"type_list_attr", a.type_list_attr},
          {"is_ref", a.is_ref}};
}

json OpJson(const OpRegistration& reg) {
  const OpDef& d = reg.op_def;
  json j;
  j["name"] = d.name;
  j["input_arg"] = json::array();
  for (const auto& a : d.input_arg) j["input_arg"].push_back(ArgJson(a));
  j["output_arg"] = json::array();
  for (const auto& a : d.output_arg) j["output_arg"].push_back(ArgJson(a));
  j["attr"] = json::array();
  for (const auto& a : d.attr) {
    json attr = {{"name", a.name}, {"type", a.type}, {"has_minimum", a.has_minimum},
                 {"minimum", a.minimum}};
    if (a.default_value) attr["default_value"] = ValueJson(*a.default_value);
    if (a.allowed_values) attr["allowed_values"] = ValueJson(*a.allowed_values);
    j["attr"].push_back(attr);
  }
  j["is_stateful"] = d.is_stateful;
  j["is_commutative"] = d.is_commutative;
  j["is_aggregate"] = d.is_aggregate;
  j["allows_uninitialized_input"] = d.allows_uninitialized_input;
  j["has_xla_kernel"] = reg.has_xla_kernel;
  j["has_cpu_kernel"] = static_cast<bool>(reg.kernel);
  j["compile_time_const_inputs"] = reg.compile_time_const_inputs;
  return j;
}

}  // namespace
}  // namespace xlens::graph

int main() {
  using namespace xlens::graph;
  const OpRegistry& registry = OpRegistry::Global();
  nlohmann::json ops = nlohmann::json::array();
  for (const std::string& name : registry.OpNames()) ops.push_back(OpJson(*registry.Find(name)));
  std::cout << ops.dump(1) << "\n";
  return 0;
}
