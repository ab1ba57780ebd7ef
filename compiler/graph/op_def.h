// OpDef: an op's signature as TensorFlow's op_def.proto has it (inputs, outputs, attrs with
// their types, defaults and allowed values), and the builder that writes it the way TensorFlow's
// REGISTER_OP does: .Input("values: N * T").Attr("T: {float, double} = DT_FLOAT").
// FunctionDef signatures use the same struct.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct OpDef {
  struct ArgDef {
    std::string name;
    std::string description;
    DataType type = DT_INVALID;  // a fixed type, or DT_INVALID when one of the attrs names it
    std::string type_attr;       // "T": the type is attr T
    std::string number_attr;     // "N": N tensors of `type`/`type_attr`
    std::string type_list_attr;  // "Tout": one tensor per type of the list attr
    bool is_ref = false;
  };
  struct AttrDef {
    std::string name;
    std::string type;  // "type", "int", "list(type)", "shape", "tensor", "func", "string", ...
    std::optional<AttrValue> default_value;
    std::optional<AttrValue> allowed_values;  // a list value
    bool has_minimum = false;
    int64_t minimum = 0;
    std::string description;
  };

  std::string name;
  std::vector<ArgDef> input_arg;
  std::vector<ArgDef> output_arg;
  std::vector<std::string> control_output;
  std::vector<AttrDef> attr;
  std::string summary;
  std::string description;
  bool is_commutative = false;
  bool is_aggregate = false;
  bool is_stateful = false;
  bool allows_uninitialized_input = false;
  bool is_distributed_communication = false;

  const AttrDef* FindAttr(const std::string& name) const;
};

// Builds an OpDef from TensorFlow's registration spec strings. Errors in a spec are programming
// errors of the registry and are reported by Finalize.
class OpDefBuilder {
 public:
  explicit OpDefBuilder(std::string name);
  // "x: T", "y: float", "values: N * T", "outputs: Tout", "ref: Ref(T)", "resource: resource".
  OpDefBuilder& Input(std::string spec);
  OpDefBuilder& Output(std::string spec);
  // "T: type", "T: {float, double}", "N: int >= 1", "transpose_a: bool = false",
  // "Tout: list(type) >= 0", "shape: shape", "value: tensor", "f: func", "dtype: type = DT_FLOAT",
  // "padding: {'SAME', 'VALID'}".
  OpDefBuilder& Attr(std::string spec);
  OpDefBuilder& SetIsStateful();
  OpDefBuilder& SetIsCommutative();
  OpDefBuilder& SetIsAggregate();
  OpDefBuilder& SetAllowsUninitializedInput();
  StatusOr<OpDef> Finalize() const;

 private:
  std::string name_;
  std::vector<std::string> inputs_, outputs_, attrs_;
  bool stateful_ = false, commutative_ = false, aggregate_ = false, uninitialized_ = false;
};

// The input and output types of a node of this op, from its attrs (after defaults are added):
// what TensorFlow's InOutTypesForNode computes. Errors name the node and the attr.
Status InOutTypesForNode(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def,
                         std::vector<DataType>* inputs, std::vector<DataType>* outputs);

// Adds the op's attr defaults that the node does not set.
void AddDefaultsToAttrs(const OpDef& op_def, AttrMap* attrs);

// Checks every attr the op declares is present with the declared kind and an allowed value, and
// no attr the op does not declare is set (attrs starting with '_' are internal and allowed).
Status ValidateAttrs(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def);

// The range of node outputs/inputs that argument `arg_name` occupies ([start, end)).
Status NameRangeForArg(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def,
                       bool is_input, const std::string& arg_name, int* start, int* end);

}  // namespace xlens::graph
