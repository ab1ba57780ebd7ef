#include "compiler/hlo/instruction.h"

#include <algorithm>

#include "compiler/hlo/computation.h"

namespace xlens {

HloInstruction::HloInstruction(HloOpcode opcode, Shape shape, std::string name)
    : opcode_(opcode), name_(std::move(name)), shape_(std::move(shape)) {
  if (name_.empty()) name_ = std::string(HloOpcodeString(opcode));
}

std::unique_ptr<HloInstruction> HloInstruction::CreateParameter(int64_t number, Shape shape,
                                                                std::string name) {
  auto instr = std::make_unique<HloInstruction>(HloOpcode::kParameter, std::move(shape),
                                                std::move(name));
  instr->parameter_number_ = number;
  return instr;
}

std::unique_ptr<HloInstruction> HloInstruction::CreateConstant(Literal literal, std::string name) {
  auto instr = std::make_unique<HloInstruction>(HloOpcode::kConstant, literal.shape(),
                                                name.empty() ? "constant" : std::move(name));
  instr->literal_ = std::move(literal);
  return instr;
}

std::unique_ptr<HloInstruction> HloInstruction::CreateUnary(HloOpcode op, Shape shape,
                                                            HloInstruction* operand) {
  auto instr = std::make_unique<HloInstruction>(op, std::move(shape));
  instr->AppendOperand(operand);
  return instr;
}

std::unique_ptr<HloInstruction> HloInstruction::CreateBinary(HloOpcode op, Shape shape,
                                                             HloInstruction* lhs,
                                                             HloInstruction* rhs) {
  auto instr = std::make_unique<HloInstruction>(op, std::move(shape));
  instr->AppendOperand(lhs);
  instr->AppendOperand(rhs);
  return instr;
}

void HloInstruction::AddUser(HloInstruction* user) {
  if (std::find(users_.begin(), users_.end(), user) == users_.end()) users_.push_back(user);
}

void HloInstruction::RemoveUser(HloInstruction* user) {
  users_.erase(std::remove(users_.begin(), users_.end(), user), users_.end());
}

void HloInstruction::AppendOperand(HloInstruction* operand) {
  operands_.push_back(operand);
  operand->AddUser(this);
}

void HloInstruction::ReplaceOperandWith(int64_t i, HloInstruction* new_operand) {
  HloInstruction* old = operands_[i];
  if (old == new_operand) return;
  operands_[i] = new_operand;
  new_operand->AddUser(this);
  if (std::find(operands_.begin(), operands_.end(), old) == operands_.end()) old->RemoveUser(this);
}

void HloInstruction::ReplaceAllUsesWith(HloInstruction* other) {
  if (other == this) return;
  std::vector<HloInstruction*> users = users_;
  for (HloInstruction* user : users) {
    for (int64_t i = 0; i < user->operand_count(); ++i) {
      if (user->operands_[i] == this) user->ReplaceOperandWith(i, other);
    }
  }
  for (HloInstruction* succ : std::vector<HloInstruction*>(control_successors_)) {
    for (HloInstruction*& pred : succ->control_predecessors_) {
      if (pred == this) pred = other;
    }
    other->control_successors_.push_back(succ);
  }
  control_successors_.clear();
  if (parent_ != nullptr && parent_->root_instruction() == this) {
    parent_->set_root_instruction(other);
  }
}

void HloInstruction::DetachOperands() {
  for (HloInstruction* op : operands_) op->RemoveUser(this);
  operands_.clear();
}

void HloInstruction::AddControlDependencyTo(HloInstruction* successor) {
  if (std::find(control_successors_.begin(), control_successors_.end(), successor) !=
      control_successors_.end()) {
    return;
  }
  control_successors_.push_back(successor);
  successor->control_predecessors_.push_back(this);
}

void HloInstruction::DropAllControlDeps() {
  for (HloInstruction* pred : control_predecessors_) {
    auto& s = pred->control_successors_;
    s.erase(std::remove(s.begin(), s.end(), this), s.end());
  }
  for (HloInstruction* succ : control_successors_) {
    auto& p = succ->control_predecessors_;
    p.erase(std::remove(p.begin(), p.end(), this), p.end());
  }
  control_predecessors_.clear();
  control_successors_.clear();
}

std::vector<HloComputation*> HloInstruction::called_computations() const {
  std::vector<HloComputation*> out;
  for (const auto& attr : called_attrs_) {
    out.insert(out.end(), attr.computations.begin(), attr.computations.end());
  }
  return out;
}

void HloInstruction::SetCalledComputation(const std::string& key, HloComputation* computation) {
  for (auto& attr : called_attrs_) {
    if (attr.key == key) {
      attr.computations = {computation};
      attr.is_list = false;
      return;
    }
  }
  called_attrs_.push_back({key, {computation}, false});
}

void HloInstruction::SetCalledComputations(const std::string& key,
                                           std::vector<HloComputation*> computations) {
  for (auto& attr : called_attrs_) {
    if (attr.key == key) {
      attr.computations = std::move(computations);
      attr.is_list = true;
      return;
    }
  }
  called_attrs_.push_back({key, std::move(computations), true});
}

HloComputation* HloInstruction::called_computation(const std::string& key) const {
  for (const auto& attr : called_attrs_) {
    if (attr.key == key && !attr.computations.empty()) return attr.computations[0];
  }
  return nullptr;
}

std::vector<HloComputation*> HloInstruction::branch_computations() const {
  for (const auto& attr : called_attrs_) {
    if (attr.key == "branch_computations") return attr.computations;
  }
  HloComputation* t = called_computation("true_computation");
  HloComputation* f = called_computation("false_computation");
  if (t != nullptr && f != nullptr) return {t, f};
  return {};
}

void HloInstruction::ReplaceCalledComputation(HloComputation* from, HloComputation* to) {
  for (auto& attr : called_attrs_) {
    for (HloComputation*& c : attr.computations) {
      if (c == from) c = to;
    }
  }
}

const std::vector<int64_t>& HloInstruction::dimensions() const {
  static const std::vector<int64_t> kEmpty;
  return dimensions_attr ? *dimensions_attr : kEmpty;
}

ComparisonType HloInstruction::EffectiveComparisonType() const {
  if (comparison_type) return *comparison_type;
  PrimitiveType t = operands_.empty() ? PrimitiveType::F32 : operands_[0]->shape().element_type();
  if (IsFloatingPointType(t) || IsComplexType(t)) return ComparisonType::kFloat;
  if (IsSignedIntegralType(t)) return ComparisonType::kSigned;
  return ComparisonType::kUnsigned;
}

const std::string* HloInstruction::raw_attribute(std::string_view key) const {
  for (const RawAttribute& attr : raw_attributes) {
    if (attr.key == key) return &attr.value;
  }
  return nullptr;
}

void HloInstruction::SetRawAttribute(std::string key, std::string value) {
  for (RawAttribute& attr : raw_attributes) {
    if (attr.key == key) {
      attr.value = std::move(value);
      return;
    }
  }
  raw_attributes.push_back({std::move(key), std::move(value)});
}

std::unique_ptr<HloInstruction> HloInstruction::CloneWithNewOperands(
    Shape shape, const std::vector<HloInstruction*>& operands) const {
  auto clone = std::make_unique<HloInstruction>(opcode_, std::move(shape), name_);
  static_cast<HloInstructionAttributes&>(*clone) = static_cast<const HloInstructionAttributes&>(*this);
  clone->called_attrs_ = called_attrs_;
  clone->literal_ = literal_;
  clone->parameter_number_ = parameter_number_;
  for (HloInstruction* operand : operands) clone->AppendOperand(operand);
  return clone;
}

bool HloInstruction::Identical(const HloInstruction& other) const {
  if (opcode_ != other.opcode_ || operands_ != other.operands_ || !(shape_ == other.shape_)) {
    return false;
  }
  if (opcode_ == HloOpcode::kParameter && parameter_number_ != other.parameter_number_) return false;
  if (literal_.has_value() != other.literal_.has_value()) return false;
  if (literal_ && !(*literal_ == *other.literal_)) return false;
  if (called_computations() != other.called_computations()) return false;
  return AttributesToString() == other.AttributesToString();
}

bool HloInstruction::IsFused() const {
  return parent_ != nullptr && parent_->IsFusionComputation();
}

bool HloInstruction::IsRoot() const {
  return parent_ != nullptr && parent_->root_instruction() == this;
}

}  // namespace xlens
