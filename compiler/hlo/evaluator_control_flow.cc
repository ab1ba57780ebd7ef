// Instructions that run other computations: call, fusion, while and conditional.
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {

StatusOr<Literal> HandleCall(HloEvaluator& evaluator, const HloInstruction& instruction,
                             const HloComputation* computation,
                             std::span<const Literal* const> operands) {
  if (computation == nullptr) return Error("missing called computation");
  return evaluator.Evaluate(*computation, operands);
}

StatusOr<Literal> HandleWhile(HloEvaluator& evaluator, const HloInstruction& instruction,
                              const Literal& init) {
  const HloComputation* condition = instruction.while_condition();
  const HloComputation* body = instruction.while_body();
  if (condition == nullptr || body == nullptr) return Error("while needs a condition and a body");
  Literal state(init);
  while (true) {
    const Literal* arguments[] = {&state};
    ASSIGN_OR_RETURN(Literal keep_going, evaluator.Evaluate(*condition, arguments));
    if (!keep_going.shape().IsArray() || keep_going.shape().element_type() != PrimitiveType::PRED ||
        keep_going.element_count() != 1) {
      return Error("while condition returned " + keep_going.shape().ToString(false) +
                   ", expected pred[]");
    }
    if (!keep_going.data<bool>()[0]) break;
    ASSIGN_OR_RETURN(state, evaluator.Evaluate(*body, arguments));
  }
  return state;
}

// Operand 0 selects the branch: a pred picks branch 0 (true) or 1 (false); an integer index
// outside [0, N) picks the last branch. Operand 1 + i is the argument of branch i.
StatusOr<Literal> HandleConditional(HloEvaluator& evaluator, const HloInstruction& instruction,
                                    std::span<const Literal* const> operands) {
  const std::vector<HloComputation*> branches = instruction.branch_computations();
  if (branches.empty() || operands.size() != branches.size() + 1) {
    return Error(fmt::format("conditional with {} branches and {} operands", branches.size(),
                             operands.size()));
  }
  const Literal& selector = *operands[0];
  if (!selector.shape().IsArray() || selector.element_count() != 1) {
    return Error("branch selector must be a scalar, got " + selector.shape().ToString(false));
  }
  const int64_t branch_count = static_cast<int64_t>(branches.size());
  int64_t branch = 0;
  if (selector.shape().element_type() == PrimitiveType::PRED) {
    if (branch_count != 2) return Error("a pred-selected conditional needs two branches");
    branch = selector.data<bool>()[0] ? 0 : 1;
  } else if (IsIntegralType(selector.shape().element_type())) {
    branch = IndexValue(selector, 0);
    if (branch < 0 || branch >= branch_count) branch = branch_count - 1;
  } else {
    return Error("branch selector must be pred or an integer, got " +
                 selector.shape().ToString(false));
  }
  if (branches[branch] == nullptr) return Error(fmt::format("branch {} is missing", branch));
  const Literal* arguments[] = {operands[1 + branch]};
  return evaluator.Evaluate(*branches[branch], arguments);
}

}  // namespace xlens::evaluator_internal
