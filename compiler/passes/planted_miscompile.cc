#include "compiler/passes/planted_miscompile.h"

#include <fmt/format.h>

#include "compiler/passes/hlo_creation_utils.h"
#include "compiler/passes/pass_pipeline.h"

namespace xlens {
namespace {

bool IsPlantable(const Shape& shape) {
  if (!shape.IsArray()) return false;
  const PrimitiveType type = shape.element_type();
  return type == PrimitiveType::PRED || IsIntegralType(type) || IsFloatingPointType(type) ||
         IsComplexType(type);
}

// `value` + 1 (or !value for a pred), added to `computation` after `value`.
HloInstruction* AddOne(HloComputation& computation, HloInstruction* value) {
  const Shape& shape = value->shape();
  if (shape.element_type() == PrimitiveType::PRED) {
    return computation.AddInstruction(HloInstruction::CreateUnary(HloOpcode::kNot, shape, value));
  }
  Shape f32_scalar = Shape::Scalar(PrimitiveType::F32);
  Shape scalar = Shape::Scalar(shape.element_type());
  if (shape.has_layout()) {
    f32_scalar.SetDefaultLayout();
    scalar.SetDefaultLayout();
  }
  HloInstruction* one = computation.AddInstruction(
      HloInstruction::CreateConstant(Literal::CreateR0<float>(PrimitiveType::F32, 1.0f)));
  one->set_shape(f32_scalar);
  HloInstruction* converted = one;
  if (shape.element_type() != PrimitiveType::F32) {
    converted = computation.AddInstruction(
        HloInstruction::CreateUnary(HloOpcode::kConvert, scalar, one));
  }
  HloInstruction* ones = computation.AddInstruction(CreateBroadcast(shape, converted, {}));
  return computation.AddInstruction(
      HloInstruction::CreateBinary(HloOpcode::kAdd, shape, value, ones));
}

// Inserts `pass` after the leaf named `after`; true when it found one.
bool InsertAfter(HloPassPipeline& pipeline, std::string_view after,
                 std::unique_ptr<HloPass>& pass) {
  std::vector<std::unique_ptr<HloPass>>& passes = pipeline.mutable_passes();
  for (size_t i = 0; i < passes.size(); ++i) {
    HloPassPipeline* nested = dynamic_cast<HloPassPipeline*>(passes[i].get());
    if (auto* fix = dynamic_cast<HloPassFix*>(passes[i].get())) nested = &fix->pipeline();
    if (nested != nullptr) {
      if (InsertAfter(*nested, after, pass)) return true;
      continue;
    }
    if (passes[i]->name() == after) {
      passes.insert(passes.begin() + static_cast<std::ptrdiff_t>(i) + 1, std::move(pass));
      return true;
    }
  }
  return false;
}

}  // namespace

StatusOr<bool> PlantedMiscompile::Run(HloModule& module) {
  if (fired_) return false;
  HloComputation* entry = module.entry_computation();
  HloInstruction* root = entry->root_instruction();
  if (IsPlantable(root->shape())) {
    entry->set_root_instruction(AddOne(*entry, root));
    fired_ = true;
    return true;
  }
  if (root->opcode() != HloOpcode::kTuple) return false;
  for (int64_t i = 0; i < root->operand_count(); ++i) {
    HloInstruction* leaf = root->operand(i);
    if (!IsPlantable(leaf->shape())) continue;
    root->ReplaceOperandWith(i, AddOne(*entry, leaf));
    fired_ = true;
    return true;
  }
  return false;
}

Status PlantMiscompileAfter(HloPassPipeline& pipeline, std::string_view after) {
  std::unique_ptr<HloPass> pass = std::make_unique<PlantedMiscompile>();
  if (InsertAfter(pipeline, after, pass)) return OkStatus();
  return Error(fmt::format("--xla_test_miscompile_after_pass={}: the {} pipeline has no pass of "
                           "that name",
                           after, pipeline.name()));
}

}  // namespace xlens
