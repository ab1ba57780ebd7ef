#include "compiler/aot/row_major_interface.h"

#include "compiler/hlo/instruction.h"

namespace xlens::aot {
namespace {

bool IsRowMajorArray(const Shape& shape) {
  return !shape.IsArray() || !shape.has_layout() ||
         shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank());
}

Shape RowMajor(Shape shape) {
  shape.SetDefaultLayout();
  return shape;
}

}  // namespace

StatusOr<bool> MakeInterfaceRowMajor(HloModule& module) {
  HloComputation& entry = *module.entry_computation();
  bool changed = false;
  for (HloInstruction* p : entry.parameter_instructions()) {
    if (IsRowMajorArray(p->shape())) continue;
    // Users keep reading the old layout (a bitcast depends on it), through the copy.
    HloInstruction* copy =
        entry.AddInstruction(HloInstruction::CreateUnary(HloOpcode::kCopy, p->shape(), p));
    p->ReplaceAllUsesWith(copy);
    copy->ReplaceOperandWith(0, p);
    p->set_shape(RowMajor(p->shape()));
    changed = true;
  }
  HloInstruction* root = entry.root_instruction();
  auto to_row_major = [&](HloInstruction* value) {
    return entry.AddInstruction(
        HloInstruction::CreateUnary(HloOpcode::kCopy, RowMajor(value->shape()), value));
  };
  if (root->shape().IsArray() && !IsRowMajorArray(root->shape())) {
    entry.set_root_instruction(to_row_major(root));
    changed = true;
  } else if (root->opcode() == HloOpcode::kTuple) {
    for (int64_t i = 0; i < root->operand_count(); ++i) {
      HloInstruction* element = root->operand(i);
      if (IsRowMajorArray(element->shape())) continue;
      root->ReplaceOperandWith(i, to_row_major(element));
      *root->mutable_shape()->mutable_tuple_shapes(i) = RowMajor(element->shape());
      changed = true;
    }
  }
  if (changed && module.entry_computation_layout()) {
    ComputationLayout layout;
    for (const HloInstruction* p : entry.parameter_instructions()) layout.parameters.push_back(p->shape());
    layout.result = entry.root_instruction()->shape();
    module.set_entry_computation_layout(std::move(layout));
  }
  return changed;
}

}  // namespace xlens::aot
