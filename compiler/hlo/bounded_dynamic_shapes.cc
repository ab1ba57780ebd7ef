#include "compiler/hlo/bounded_dynamic_shapes.h"

#include <optional>

#include <fmt/format.h>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"

namespace xlens {
namespace {

bool IsDynamic(const Shape& shape) { return shape.IsValid() && !shape.is_static(); }

bool HasUnboundedDimension(const Shape& shape) {
  if (shape.IsTuple()) {
    for (const Shape& element : shape.tuple_shapes()) {
      if (HasUnboundedDimension(element)) return true;
    }
    return false;
  }
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (shape.is_unbounded_dynamic_dimension(i)) return true;
  }
  return false;
}

void MakeStatic(Shape& shape) {
  if (shape.IsTuple()) {
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) MakeStatic(*shape.mutable_tuple_shapes(i));
    return;
  }
  for (int64_t i = 0; i < shape.rank(); ++i) shape.set_dynamic_dimension(i, false);
}

// The integer value of a scalar constant, if `hlo` is one.
std::optional<int64_t> ScalarConstant(const HloInstruction& hlo) {
  if (hlo.opcode() != HloOpcode::kConstant || !hlo.has_literal() || hlo.shape().rank() != 0 ||
      !IsIntegralType(hlo.shape().element_type()) || hlo.literal().is_elided() ||
      hlo.literal().is_text_only()) {
    return std::nullopt;
  }
  return hlo.literal().GetAsInt64(0);
}

// A set-dimension-size that sets a dimension to its full size (what TensorFlow's bridge writes
// after a static slice, e.g. for top_k): at the bounds it changes nothing.
bool SetsTheFullSize(const HloInstruction& hlo) {
  if (hlo.opcode() != HloOpcode::kSetDimensionSize || hlo.operand_count() != 2 ||
      hlo.dimensions().size() != 1) {
    return false;
  }
  const int64_t dimension = hlo.dimensions(0);
  const Shape& shape = hlo.operand(0)->shape();
  std::optional<int64_t> size = ScalarConstant(*hlo.operand(1));
  return shape.IsArray() && dimension >= 0 && dimension < shape.rank() && size &&
         *size == shape.dimensions(dimension) && !shape.is_unbounded_dynamic_dimension(dimension);
}

// The instructions whose result size along a dimension is set at run time, below its bound: XLA's
// dynamic padder's custom calls and a set-dimension-size to anything but the full size.
// (get-dimension-size reads the bound, which is the size when inputs have their full size.)
std::string RunTimeSizeMaker(const HloInstruction& hlo) {
  switch (hlo.opcode()) {
    case HloOpcode::kSetDimensionSize:
      return SetsTheFullSize(hlo) ? "" : std::string(HloOpcodeString(hlo.opcode()));
    case HloOpcode::kCustomCall: {
      const std::string target = hlo.custom_call_target.value_or("");
      if (target == "SliceToDynamic" || target == "PadToStatic" || target == "DynamicReshape" ||
          target == "SetBound") {
        return "custom-call \"" + target + "\"";
      }
      return "";
    }
    default:
      return "";
  }
}

}  // namespace

bool HasDynamicShapes(const HloModule& module) {
  if (const auto& layout = module.entry_computation_layout()) {
    for (const Shape& p : layout->parameters) {
      if (IsDynamic(p)) return true;
    }
    if (IsDynamic(layout->result)) return true;
  }
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* hlo : computation->instructions()) {
      if (IsDynamic(hlo->shape())) return true;
    }
  }
  return false;
}

StatusOr<int64_t> RunBoundedDynamicShapesAtTheirBounds(HloModule& module) {
  int64_t dynamic = 0;
  // Everything is checked before anything changes.
  for (const HloComputation* computation : module.computations()) {
    for (const HloInstruction* hlo : computation->instructions()) {
      if (std::string maker = RunTimeSizeMaker(*hlo); !maker.empty()) {
        return Error(fmt::format(
            "%{} ({}) sets a dimension's size at run time; xlens runs bounded dynamic shapes "
            "at their bounds only, and has no run-time sizes", hlo->name(), maker));
      }
      if (!IsDynamic(hlo->shape())) continue;
      if (HasUnboundedDimension(hlo->shape())) {
        return Error(fmt::format("%{} has the unbounded dynamic shape {}: xlens runs bounded "
                                 "dynamic dimensions (<=N) at their bounds, and '?' has none",
                                 hlo->name(), hlo->shape().ToString(false)));
      }
      ++dynamic;
    }
  }
  for (HloComputation* computation : module.computations()) {
    for (HloInstruction* hlo : computation->instructions()) MakeStatic(*hlo->mutable_shape());
  }
  // What reads or sets sizes now reads and sets the bounds: a set to the full size is its operand,
  // a read of a size is the bound, as a constant.
  for (HloComputation* computation : module.computations()) {
    for (HloInstruction* hlo : computation->MakeInstructionPostOrder()) {
      if (hlo->opcode() == HloOpcode::kSetDimensionSize) {
        RETURN_IF_ERROR(computation->ReplaceInstruction(hlo, hlo->operand(0)));
        ++dynamic;
      } else if (hlo->opcode() == HloOpcode::kGetDimensionSize && hlo->dimensions().size() == 1 &&
                 hlo->operand(0)->shape().IsArray() &&
                 hlo->dimensions(0) < hlo->operand(0)->shape().rank() &&
                 IsIntegralType(hlo->shape().element_type())) {
        const int64_t bound = hlo->operand(0)->shape().dimensions(hlo->dimensions(0));
        Literal size(hlo->shape());
        size.SetFromInt64(0, bound);
        HloInstruction* constant = computation->AddInstruction(
            HloInstruction::CreateConstant(std::move(size), hlo->name() + ".bound"));
        RETURN_IF_ERROR(computation->ReplaceInstruction(hlo, constant));
        ++dynamic;
      }
    }
  }
  if (auto layout = module.entry_computation_layout()) {
    for (Shape& p : layout->parameters) MakeStatic(p);
    MakeStatic(layout->result);
    module.set_entry_computation_layout(std::move(layout));
  }
  return dynamic;
}

}  // namespace xlens
