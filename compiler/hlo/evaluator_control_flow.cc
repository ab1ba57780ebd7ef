// Instructions that run other computations: call, fusion, while and conditional. Inside a
// computation the driver (evaluator.cc) runs them on its frame stack; these handlers serve
// EvaluateInstruction, where the instruction stands alone.
#include "compiler/hlo/evaluator_internal.h"

namespace xlens::evaluator_internal {

Status CancelledError() { return Error("cancelled"); }

Status ExpectLoopCondition(const Literal& value) {
  if (!value.shape().IsArray() || value.shape().element_type() != PrimitiveType::PRED ||
      value.element_count() != 1) {
    return Error("while condition returned " + value.shape().ToString(false) +
                 ", expected pred[]");
  }
  return OkStatus();
}

StatusOr<int64_t> SelectBranch(const HloInstruction& instruction,
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
  return branch;
}

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
    if (evaluator.cancelled()) return CancelledError();
    const Literal* arguments[] = {&state};
    ASSIGN_OR_RETURN(Literal keep_going, evaluator.Evaluate(*condition, arguments));
    RETURN_IF_ERROR(ExpectLoopCondition(keep_going));
    if (!keep_going.data<bool>()[0]) break;
    ASSIGN_OR_RETURN(state, evaluator.Evaluate(*body, arguments));
  }
  return state;
}

StatusOr<Literal> HandleConditional(HloEvaluator& evaluator, const HloInstruction& instruction,
                                    std::span<const Literal* const> operands) {
  ASSIGN_OR_RETURN(int64_t branch, SelectBranch(instruction, operands));
  const Literal* arguments[] = {operands[1 + branch]};
  return evaluator.Evaluate(*instruction.branch_computations()[branch], arguments);
}

}  // namespace xlens::evaluator_internal
