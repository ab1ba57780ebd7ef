#include "compiler/hlo/bounded_dynamic_shapes.h"

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

// The instructions whose result size along a dimension is set at run time, below its bound: XLA's
// dynamic padder's custom calls and the ops that read or write a size.
std::string RunTimeSizeMaker(const HloInstruction& hlo) {
  switch (hlo.opcode()) {
    case HloOpcode::kSetDimensionSize:
    case HloOpcode::kGetDimensionSize:
      return std::string(HloOpcodeString(hlo.opcode()));
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
  if (auto layout = module.entry_computation_layout()) {
    for (Shape& p : layout->parameters) MakeStatic(p);
    MakeStatic(layout->result);
    module.set_entry_computation_layout(std::move(layout));
  }
  return dynamic;
}

}  // namespace xlens
