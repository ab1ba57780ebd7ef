// Sums as the passes that rewrite them recognise them (reduce-factor-hoisting, shifted-moments):
// a reduce of one static array of integers or floats, from zero, whose reducer adds its two
// parameters. JAX gives each of its sums a reducer computation of its own, so the reducer is
// matched by what it computes, not by identity.
#pragma once

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"

namespace xlens {

inline bool HasControlDependencies(const HloInstruction& instruction) {
  return !instruction.control_predecessors().empty() ||
         !instruction.control_successors().empty();
}

// A scalar constant zero of an integer or float type (either sign: a sum's init value enters
// once, and a zero's sign is all it could change).
inline bool IsScalarZero(const HloInstruction& instruction) {
  if (instruction.opcode() != HloOpcode::kConstant || !instruction.has_literal()) return false;
  const Literal& literal = instruction.literal();
  if (literal.is_elided() || literal.is_text_only() || !literal.shape().IsArray() ||
      literal.element_count() != 1 || !IsEvaluatorSupportedType(literal.shape().element_type())) {
    return false;
  }
  return IsIntegralType(literal.shape().element_type()) ? literal.GetAsInt64(0) == 0
                                                        : literal.GetAsDouble(0) == 0.0;
}

// A reducer that adds its two parameters.
inline bool IsAddReducer(const HloComputation* reducer) {
  if (reducer == nullptr || reducer->num_parameters() != 2) return false;
  const HloInstruction* root = reducer->root_instruction();
  const HloInstruction* p0 = reducer->parameter_instruction(0);
  const HloInstruction* p1 = reducer->parameter_instruction(1);
  return root != nullptr && root->opcode() == HloOpcode::kAdd && p0 != nullptr && p1 != nullptr &&
         ((root->operand(0) == p0 && root->operand(1) == p1) ||
          (root->operand(0) == p1 && root->operand(1) == p0));
}

// A sum of one static array of integers or floats, from zero, with no control dependencies.
inline bool IsSumFromZero(const HloInstruction& reduce) {
  if (reduce.opcode() != HloOpcode::kReduce || reduce.operand_count() != 2 ||
      !reduce.shape().IsArray() || HasControlDependencies(reduce)) {
    return false;
  }
  const Shape& in = reduce.operand(0)->shape();
  const PrimitiveType type = in.element_type();
  return in.IsArray() && in.is_static() && (IsIntegralType(type) || IsFloatingPointType(type)) &&
         IsScalarZero(*reduce.operand(1)) && IsAddReducer(reduce.to_apply());
}

}  // namespace xlens
