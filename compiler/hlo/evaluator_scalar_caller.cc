// ScalarCaller: applies a called computation to scalars (reducers, comparators, combiners, map),
// compiled into typed kernels over fixed slots when it is made only of scalar elementwise
// instructions, and run through the evaluator otherwise.
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {
namespace {

Status ExpectScalar(const Shape& shape, PrimitiveType type, std::string_view what) {
  if (!shape.IsArray() || shape.rank() != 0 || shape.element_type() != type) {
    return Error(fmt::format("{} has shape {}, expected {}[]", what, shape.ToString(false),
                             PrimitiveTypeName(type)));
  }
  return OkStatus();
}

}  // namespace

StatusOr<ScalarCaller> ScalarCaller::Create(HloEvaluator& evaluator,
                                            const HloComputation* computation,
                                            std::vector<PrimitiveType> argument_types,
                                            std::vector<PrimitiveType> result_types) {
  if (computation == nullptr) return Error("missing called computation");
  const std::string where = "computation %" + computation->name();
  if (computation->num_parameters() != static_cast<int64_t>(argument_types.size())) {
    return Error(fmt::format("{} takes {} parameters, expected {}", where,
                             computation->num_parameters(), argument_types.size()));
  }
  for (int64_t i = 0; i < computation->num_parameters(); ++i) {
    const HloInstruction* parameter = computation->parameter_instruction(i);
    if (parameter == nullptr) return Error(fmt::format("{} lacks parameter {}", where, i));
    RETURN_IF_ERROR(ExpectScalar(parameter->shape(), argument_types[i],
                                 fmt::format("parameter {} of {}", i, where)));
  }
  const HloInstruction* root = computation->root_instruction();
  if (root == nullptr) return Error(where + " has no root");
  const Shape& root_shape = root->shape();
  if (root_shape.IsTuple()) {
    if (root_shape.tuple_shapes_size() != static_cast<int64_t>(result_types.size())) {
      return Error(fmt::format("{} returns {}, expected {} results", where,
                               root_shape.ToString(false), result_types.size()));
    }
    for (size_t i = 0; i < result_types.size(); ++i) {
      RETURN_IF_ERROR(ExpectScalar(root_shape.tuple_shapes(i), result_types[i],
                                   fmt::format("result {} of {}", i, where)));
    }
  } else {
    if (result_types.size() != 1) {
      return Error(fmt::format("{} returns {}, expected a tuple of {} scalars", where,
                               root_shape.ToString(false), result_types.size()));
    }
    RETURN_IF_ERROR(ExpectScalar(root_shape, result_types[0], "result of " + where));
  }

  ScalarCaller caller;
  caller.evaluator_ = &evaluator;
  caller.computation_ = computation;
  caller.argument_types_ = std::move(argument_types);
  caller.result_types_ = std::move(result_types);
  caller.compiled_ = caller.Compile();
  if (!caller.compiled_) {
    for (PrimitiveType type : caller.argument_types_) {
      caller.argument_literals_.emplace_back(Shape::Scalar(type));
    }
  }
  return caller;
}

bool ScalarCaller::Compile() {
  std::unordered_map<const HloInstruction*, int64_t> slot_of;
  argument_slots_.assign(argument_types_.size(), -1);
  const HloInstruction* root = computation_->root_instruction();
  for (const HloInstruction* instruction : computation_->MakeInstructionPostOrder()) {
    const HloOpcode opcode = instruction->opcode();
    if (opcode == HloOpcode::kTuple && instruction == root) {
      for (const HloInstruction* operand : instruction->operands()) {
        result_slots_.push_back(slot_of.at(operand));
      }
      continue;
    }
    const Shape& shape = instruction->shape();
    if (!shape.IsArray() || shape.rank() != 0 || !CheckSupportedShape(shape).ok()) return false;
    for (const HloInstruction* operand : instruction->operands()) {
      if (!operand->shape().IsArray() || operand->shape().rank() != 0) return false;
    }
    const int64_t slot = static_cast<int64_t>(slots_.size());
    slots_.emplace_back();
    slot_of[instruction] = slot;
    auto operand_slot = [&](int64_t i) { return slot_of.at(instruction->operand(i)); };
    Step step;
    step.out = slot;
    if (opcode == HloOpcode::kParameter) {
      argument_slots_[instruction->parameter_number()] = slot;
      continue;
    } else if (opcode == HloOpcode::kConstant) {
      if (!instruction->has_literal() || instruction->literal().is_elided() ||
          instruction->literal().is_text_only() ||
          !shape_util::Compatible(instruction->literal().shape(), shape)) {
        return false;
      }
      std::memcpy(slots_[slot].bytes, instruction->literal().untyped_data(),
                  ByteWidth(shape.element_type()));
      continue;
    } else if (opcode == HloOpcode::kSelect && instruction->operand_count() == 3) {
      step.is_select = true;
      step.a = operand_slot(0);
      step.b = operand_slot(1);
      step.third = operand_slot(2);
      step.width = ByteWidth(shape.element_type());
    } else if (opcode == HloOpcode::kConvert && instruction->operand_count() == 1) {
      StatusOr<UnaryKernel> kernel =
          SelectConvertKernel(instruction->operand(0)->shape().element_type(), shape.element_type());
      if (!kernel.ok()) return false;
      step.unary = *kernel;
      step.a = operand_slot(0);
    } else if ((IsElementwiseUnary(opcode) || opcode == HloOpcode::kCopy) &&
               instruction->operand_count() == 1) {
      if (opcode == HloOpcode::kCopy) {
        StatusOr<UnaryKernel> kernel =
            SelectConvertKernel(shape.element_type(), shape.element_type());
        if (!kernel.ok()) return false;
        step.unary = *kernel;
      } else {
        StatusOr<UnaryKernel> kernel =
            SelectUnaryKernel(*instruction, instruction->operand(0)->shape().element_type());
        if (!kernel.ok()) return false;
        step.unary = *kernel;
      }
      step.a = operand_slot(0);
    } else if (IsElementwiseBinary(opcode) && instruction->operand_count() == 2 &&
               instruction->operand(0)->shape().element_type() ==
                   instruction->operand(1)->shape().element_type()) {
      StatusOr<BinaryKernel> kernel =
          SelectBinaryKernel(*instruction, instruction->operand(0)->shape().element_type());
      if (!kernel.ok()) return false;
      step.binary = *kernel;
      step.a = operand_slot(0);
      step.b = operand_slot(1);
    } else {
      return false;
    }
    steps_.push_back(step);
  }
  if (result_slots_.empty()) result_slots_.push_back(slot_of.at(root));
  return true;
}

Status ScalarCaller::Call(std::span<const void* const> arguments, std::span<void* const> results) {
  // Reductions and windows apply this up to max_work times: the cancellation flag is polled here
  // (one relaxed load) so that none of them outlives a timeout.
  if (evaluator_->cancelled()) return CancelledError();
  if (compiled_) {
    for (size_t i = 0; i < argument_slots_.size(); ++i) {
      if (argument_slots_[i] >= 0) {
        std::memcpy(slots_[argument_slots_[i]].bytes, arguments[i], ByteWidth(argument_types_[i]));
      }
    }
    for (const Step& step : steps_) {
      void* out = slots_[step.out].bytes;
      if (step.binary != nullptr) {
        step.binary(slots_[step.a].bytes, slots_[step.b].bytes, out, 1);
      } else if (step.unary != nullptr) {
        step.unary(slots_[step.a].bytes, out, 1);
      } else {
        const bool pred = slots_[step.a].bytes[0] != 0;
        std::memcpy(out, slots_[pred ? step.b : step.third].bytes, step.width);
      }
    }
    for (size_t i = 0; i < result_slots_.size(); ++i) {
      std::memcpy(results[i], slots_[result_slots_[i]].bytes, ByteWidth(result_types_[i]));
    }
    return OkStatus();
  }
  // Pointers into argument_literals_ are taken here: the caller object may have been moved.
  argument_pointers_.clear();
  for (size_t i = 0; i < argument_literals_.size(); ++i) {
    std::memcpy(argument_literals_[i].untyped_data(), arguments[i],
                argument_literals_[i].size_bytes());
    argument_pointers_.push_back(&argument_literals_[i]);
  }
  ASSIGN_OR_RETURN(Literal result, evaluator_->Evaluate(*computation_, argument_pointers_));
  if (result.shape().IsTuple()) {
    for (size_t i = 0; i < result_types_.size(); ++i) {
      const Literal& element = result.tuple_element(i);
      std::memcpy(results[i], element.untyped_data(), element.size_bytes());
    }
  } else {
    std::memcpy(results[0], result.untyped_data(), result.size_bytes());
  }
  return OkStatus();
}

StatusOr<bool> ScalarCaller::CallPredicate(std::span<const void* const> arguments) {
  bool out = false;
  void* results[] = {&out};
  RETURN_IF_ERROR(Call(arguments, results));
  return out;
}

}  // namespace xlens::evaluator_internal
