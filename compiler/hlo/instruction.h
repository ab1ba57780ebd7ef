// HloInstruction: one node of a computation. Owned by its HloComputation; operands and users are
// non-owning pointers kept consistent by the mutators here.
//
// Attributes xlens acts on are typed fields (set when present in the text or by a pass);
// everything else (backend_config, sharding, channel_id, ...) is kept verbatim as RawAttributes,
// so any XLA dump prints back unchanged.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/hlo/attributes.h"
#include "compiler/hlo/literal.h"
#include "compiler/hlo/opcode.h"
#include "compiler/hlo/shape.h"

namespace xlens {

class HloComputation;

// One `key=%comp` or `key={%a, %b}` attribute naming called computations.
struct CalledComputationAttribute {
  std::string key;  // "to_apply", "calls", "condition", "body", "branch_computations", ...
  std::vector<HloComputation*> computations;
  bool is_list = false;  // printed as {...}
};

// The attributes of an instruction beyond its opcode, shape and operands: the typed ones xlens
// acts on (set when present in the text or by a pass) and the raw ones it only carries. A base of
// HloInstruction so that a clone copies all of them at once and no field can be forgotten.
struct HloInstructionAttributes {
  std::optional<int64_t> tuple_index_attr;      // index=
  std::optional<int64_t> iota_dimension_attr;   // iota_dimension=
  std::optional<std::vector<int64_t>> dimensions_attr;  // dimensions={...}
  std::optional<std::vector<int64_t>> dynamic_slice_sizes_attr;  // dynamic_slice_sizes=
  std::optional<std::vector<int64_t>> slice_sizes_attr;  // slice_sizes= (gather)
  std::vector<int64_t> slice_starts, slice_limits, slice_strides;  // slice={[a:b:s], ...}
  bool has_slice = false;
  std::optional<PaddingConfig> padding_config;
  std::optional<Window> window;
  std::optional<ConvolutionDimensionNumbers> convolution_dimension_numbers;
  std::optional<int64_t> feature_group_count_attr;
  std::optional<int64_t> batch_group_count_attr;
  std::optional<DotDimensionNumbers> dot_dimension_numbers;
  std::optional<GatherDimensionNumbers> gather_dimension_numbers;
  std::optional<ScatterDimensionNumbers> scatter_dimension_numbers;
  std::optional<bool> indices_are_sorted_attr;
  std::optional<bool> unique_indices_attr;
  std::optional<ComparisonDirection> comparison_direction;
  std::optional<ComparisonType> comparison_type;
  std::optional<FusionKind> fusion_kind;
  std::optional<bool> is_stable_attr;
  std::optional<int64_t> exponent_bits_attr;
  std::optional<int64_t> mantissa_bits_attr;
  std::optional<std::string> custom_call_target;
  OpMetadata metadata;
  std::vector<RawAttribute> raw_attributes;
};

class HloInstruction : public HloInstructionAttributes {
 public:
  HloInstruction(HloOpcode opcode, Shape shape, std::string name = "");
  HloInstruction(const HloInstruction&) = delete;
  HloInstruction& operator=(const HloInstruction&) = delete;

  // Factory helpers for the common cases (passes and tests).
  static std::unique_ptr<HloInstruction> CreateParameter(int64_t number, Shape shape,
                                                         std::string name);
  static std::unique_ptr<HloInstruction> CreateConstant(Literal literal, std::string name = "");
  static std::unique_ptr<HloInstruction> CreateUnary(HloOpcode op, Shape shape,
                                                     HloInstruction* operand);
  static std::unique_ptr<HloInstruction> CreateBinary(HloOpcode op, Shape shape,
                                                      HloInstruction* lhs, HloInstruction* rhs);

  HloOpcode opcode() const { return opcode_; }
  const std::string& name() const { return name_; }
  void set_name(std::string name) { name_ = std::move(name); }
  int64_t unique_id() const { return unique_id_; }
  void set_unique_id(int64_t id) { unique_id_ = id; }

  const Shape& shape() const { return shape_; }
  Shape* mutable_shape() { return &shape_; }
  void set_shape(Shape shape) { shape_ = std::move(shape); }

  HloComputation* parent() const { return parent_; }
  void set_parent(HloComputation* parent) { parent_ = parent; }

  // Operands and users.
  int64_t operand_count() const { return static_cast<int64_t>(operands_.size()); }
  HloInstruction* operand(int64_t i) const { return operands_[i]; }
  const std::vector<HloInstruction*>& operands() const { return operands_; }
  void AppendOperand(HloInstruction* operand);
  // Replaces operand i (user lists updated on both sides).
  void ReplaceOperandWith(int64_t i, HloInstruction* new_operand);
  // Replaces every use of this instruction by `other` (including control dependencies).
  void ReplaceAllUsesWith(HloInstruction* other);
  // Drops all operands (used before deletion).
  void DetachOperands();
  const std::vector<HloInstruction*>& users() const { return users_; }
  int64_t user_count() const { return static_cast<int64_t>(users_.size()); }

  const std::vector<HloInstruction*>& control_predecessors() const { return control_predecessors_; }
  const std::vector<HloInstruction*>& control_successors() const { return control_successors_; }
  void AddControlDependencyTo(HloInstruction* successor);
  void DropAllControlDeps();

  // Called computations, in attribute order.
  const std::vector<CalledComputationAttribute>& called_computation_attributes() const {
    return called_attrs_;
  }
  std::vector<CalledComputationAttribute>& mutable_called_computation_attributes() {
    return called_attrs_;
  }
  std::vector<HloComputation*> called_computations() const;
  // Sets (or replaces) a called-computation attribute.
  void SetCalledComputation(const std::string& key, HloComputation* computation);
  void SetCalledComputations(const std::string& key, std::vector<HloComputation*> computations);
  // The computation named by `key`, or nullptr.
  HloComputation* called_computation(const std::string& key) const;
  HloComputation* to_apply() const { return called_computation("to_apply"); }
  HloComputation* fused_computation() const { return called_computation("calls"); }
  HloComputation* while_condition() const { return called_computation("condition"); }
  HloComputation* while_body() const { return called_computation("body"); }
  HloComputation* select() const { return called_computation("select"); }
  HloComputation* scatter() const { return called_computation("scatter"); }
  // Conditional branches in branch-index order (true/false form: {true, false}).
  std::vector<HloComputation*> branch_computations() const;
  // Replaces every reference to `from` by `to`.
  void ReplaceCalledComputation(HloComputation* from, HloComputation* to);

  // --- Typed attributes (see also HloInstructionAttributes) ---
  const Literal& literal() const { return *literal_; }
  bool has_literal() const { return literal_.has_value(); }
  void set_literal(Literal literal) { literal_ = std::move(literal); }

  int64_t parameter_number() const { return parameter_number_; }
  void set_parameter_number(int64_t n) { parameter_number_ = n; }


  // Convenience views with the defaults XLA applies when an attribute is absent.
  int64_t tuple_index() const { return tuple_index_attr.value_or(0); }
  const std::vector<int64_t>& dimensions() const;
  int64_t dimensions(int64_t i) const { return dimensions()[i]; }
  int64_t feature_group_count() const { return feature_group_count_attr.value_or(1); }
  int64_t batch_group_count() const { return batch_group_count_attr.value_or(1); }
  bool is_stable() const { return is_stable_attr.value_or(false); }
  // The comparison type, defaulted from the operand element type when not written.
  ComparisonType EffectiveComparisonType() const;
  // The verbatim value of a raw attribute, or nullptr.
  const std::string* raw_attribute(std::string_view key) const;
  void SetRawAttribute(std::string key, std::string value);

  // A copy with the same opcode, attributes, called computations, metadata and name (made unique
  // when added to a computation), but `shape` and `operands` instead of this one's. Not yet in any
  // computation; control dependencies are not copied.
  std::unique_ptr<HloInstruction> CloneWithNewOperands(
      Shape shape, const std::vector<HloInstruction*>& operands) const;

  // Same opcode, shape, operands (the same instructions), literal or parameter number, attributes
  // and called computations. Names and metadata do not matter. What CSE merges.
  bool Identical(const HloInstruction& other) const;

  // The attributes as the printer writes them after the operand list, without metadata and
  // control-predecessors: "dimensions={0}, to_apply=%add". Defined in printer.cc.
  std::string AttributesToString() const;

  // For instructions inside a fusion computation: the fusion instruction that calls it.
  bool IsFused() const;
  bool IsRoot() const;
  bool IsElementwise() const { return xlens::IsElementwise(opcode_); }

  // "%name = f32[2]{0} add(f32[2]{0} %a, f32[2]{0} %b), metadata={...}" (long form) or the
  // short parsable form. Defined in printer.cc.
  std::string ToString(bool short_form = false) const;

 private:
  friend class HloComputation;

  HloOpcode opcode_;
  std::string name_;
  Shape shape_;
  int64_t unique_id_ = -1;
  HloComputation* parent_ = nullptr;
  // Slot in the parent's instruction list, so that removal and lookups need no search.
  int64_t index_in_parent_ = -1;
  std::vector<HloInstruction*> operands_;
  std::vector<HloInstruction*> users_;
  std::vector<HloInstruction*> control_predecessors_;
  std::vector<HloInstruction*> control_successors_;
  std::vector<CalledComputationAttribute> called_attrs_;
  std::optional<Literal> literal_;
  int64_t parameter_number_ = 0;

  void RemoveUser(HloInstruction* user);
  void AddUser(HloInstruction* user);
};

}  // namespace xlens
