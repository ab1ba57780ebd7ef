#include "compiler/passes/topk_decomposer.h"

#include <string>
#include <vector>

#include <fmt/format.h>

#include "compiler/hlo/numeric_op_attributes.h"
#include "compiler/passes/hlo_creation_utils.h"

namespace xlens {
namespace {

// XLA's CreateScalarGtComputation / CreateScalarLtComputation over (x, s32): the result is the
// comparison of the first pair only, in the total order for floating point; the index pair is
// a passenger that the stable sort keeps in order among equal values.
HloComputation* MakeComparator(HloModule& module, HloComputation* before, const HloInstruction& topk,
                               bool largest) {
  const Shape& input = topk.operand(0)->shape();
  const PrimitiveType type = input.element_type();
  HloComputation* comparator = module.AddComputationBefore(
      std::make_unique<HloComputation>(largest ? "compare-greater-than" : "compare-less-than"),
      before);
  std::vector<HloInstruction*> parameters;
  int64_t number = 0;
  for (PrimitiveType t : {type, PrimitiveType::S32}) {
    for (const char* side : {"lhs", "rhs"}) {
      parameters.push_back(comparator->AddInstruction(HloInstruction::CreateParameter(
          number, ScalarLike(t, input), fmt::format("p.{}.{}", number / 2, side))));
      ++number;
    }
  }
  auto compare = HloInstruction::CreateBinary(HloOpcode::kCompare,
                                              ScalarLike(PrimitiveType::PRED, input),
                                              parameters[0], parameters[1]);
  compare->comparison_direction = largest ? ComparisonDirection::kGt : ComparisonDirection::kLt;
  if (IsFloatingPointType(type)) compare->comparison_type = ComparisonType::kFloatTotalOrder;
  comparator->set_root_instruction(comparator->AddInstruction(std::move(compare)));
  return comparator;
}

Status Decompose(HloModule& module, HloComputation* computation, HloInstruction* topk,
                 const TopKAttributes& attributes) {
  HloInstruction* input = topk->operand(0);
  const Shape& input_shape = input->shape();
  const int64_t last = input_shape.rank() - 1;
  auto add = [&](std::unique_ptr<HloInstruction> instruction) {
    instruction->metadata = topk->metadata;
    return computation->AddInstruction(std::move(instruction));
  };

  Shape iota_shape = input_shape;
  iota_shape.set_element_type(PrimitiveType::S32);
  auto iota = std::make_unique<HloInstruction>(HloOpcode::kIota, iota_shape);
  iota->iota_dimension_attr = last;
  HloInstruction* indices = add(std::move(iota));

  auto sort = std::make_unique<HloInstruction>(HloOpcode::kSort,
                                               Shape::Tuple({input_shape, iota_shape}));
  sort->AppendOperand(input);
  sort->AppendOperand(indices);
  sort->dimensions_attr = std::vector<int64_t>{last};
  sort->is_stable_attr = true;
  sort->SetCalledComputation("to_apply",
                             MakeComparator(module, computation, *topk, attributes.largest));
  HloInstruction* sorted = add(std::move(sort));

  std::vector<HloInstruction*> parts;
  for (int64_t i = 0; i < 2; ++i) {
    auto gte = std::make_unique<HloInstruction>(HloOpcode::kGetTupleElement,
                                                sorted->shape().tuple_shapes(i));
    gte->AppendOperand(sorted);
    gte->tuple_index_attr = i;
    HloInstruction* element = add(std::move(gte));
    const Shape& result = topk->shape().tuple_shapes(i);
    auto slice = HloInstruction::CreateUnary(HloOpcode::kSlice, result, element);
    slice->has_slice = true;
    slice->slice_starts.assign(result.rank(), 0);
    slice->slice_limits = result.dimensions();
    slice->slice_strides.assign(result.rank(), 1);
    parts.push_back(add(std::move(slice)));
  }
  auto tuple = std::make_unique<HloInstruction>(HloOpcode::kTuple, topk->shape());
  for (HloInstruction* part : parts) tuple->AppendOperand(part);
  return computation->ReplaceInstruction(topk, add(std::move(tuple)));
}

}  // namespace

StatusOr<bool> TopkDecomposer::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    for (HloInstruction* instruction : computation->MakeInstructionPostOrder()) {
      if (instruction->opcode() != HloOpcode::kTopK || instruction->operand_count() != 1) continue;
      const Shape& input = instruction->operand(0)->shape();
      const Shape& shape = instruction->shape();
      if (!input.IsArray() || input.rank() == 0 || !input.is_static() || !shape.IsTuple() ||
          shape.tuple_shapes_size() != 2 || !shape.is_static()) {
        continue;
      }
      ASSIGN_OR_RETURN(TopKAttributes attributes, GetTopKAttributes(*instruction));
      const std::string name = instruction->name();
      RETURN_IF_ERROR(Decompose(module, computation, instruction, attributes).WithContext(name));
      changed = true;
    }
  }
  return changed;
}

}  // namespace xlens
