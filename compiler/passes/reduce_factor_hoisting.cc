#include "compiler/passes/reduce_factor_hoisting.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>
#include <vector>

#include "compiler/passes/hlo_creation_utils.h"
#include "compiler/passes/sum_pattern.h"
#include "compiler/passes/sum_rewriting.h"

namespace xlens {
namespace {

class Hoister {
 public:
  explicit Hoister(HloComputation* computation) : computation_(computation) {}

  StatusOr<bool> Run() {
    bool changed = false;
    for (HloInstruction* reduce : computation_->MakeInstructionPostOrder()) {
      if (removed_.count(reduce) || !IsSumFromZero(*reduce)) continue;
      ASSIGN_OR_RETURN(bool rewritten, Rewrite(reduce));
      changed |= rewritten;
    }
    return changed;
  }

 private:
  StatusOr<bool> Rewrite(HloInstruction* reduce) {
    const std::vector<int64_t> reduced = SortedDimensions(reduce->dimensions());
    auto is_reduced = [&](int64_t d) {
      return std::binary_search(reduced.begin(), reduced.end(), d);
    };
    HloInstruction* operand = reduce->operand(0);
    // A float sum from -0 is -0 exactly where every addend is -0, which a factor taken out cannot
    // tell: c * sum(a) from [+0, -0] and c = -1 is -0 where sum(-a) is +0. Left as it is.
    const bool is_float = IsFloatingPointType(operand->shape().element_type());
    if (is_float && std::signbit(reduce->operand(1)->literal().GetAsDouble(0))) return false;
    const SignedProduct product = CollectProduct(operand, operand->shape());
    if (!product.complete()) return false;
    // The factors that vary along the reduced dimensions (in the order they are multiplied), and
    // the broadcasts that do not.
    std::vector<HloInstruction*> varying, invariant;
    for (HloInstruction* factor : product.factors) {
      const bool hoisted =
          factor->opcode() == HloOpcode::kBroadcast && IsProductNode(*factor, operand->shape()) &&
          factor->operand(0)->shape().IsArray() &&
          std::none_of(factor->dimensions().begin(), factor->dimensions().end(), is_reduced);
      (hoisted ? invariant : varying).push_back(factor);
    }
    if (varying.empty() || (invariant.empty() && !product.negated)) return false;

    // The kept dimensions in order are the reduce's dimensions.
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < operand->shape().rank(); ++d) {
      if (!is_reduced(d)) kept.push_back(d);
    }
    HloInstruction* rest = varying[0];
    for (size_t i = 1; i < varying.size(); ++i) {
      rest = FindOrAddMultiply(operand->shape(), rest, varying[i], *operand);
    }
    HloInstruction* result = FindOrAddSumLike(*computation_, rest, *reduce, removed_);
    for (HloInstruction* broadcast : invariant) {
      HloInstruction* factor = broadcast->operand(0);
      std::vector<int64_t> dims;
      for (int64_t d : broadcast->dimensions()) {
        dims.push_back(std::find(kept.begin(), kept.end(), d) - kept.begin());
      }
      bool identity = factor->shape().rank() == reduce->shape().rank();
      for (size_t i = 0; i < dims.size(); ++i) identity &= dims[i] == static_cast<int64_t>(i);
      if (!identity || !(factor->shape() == reduce->shape())) {
        factor = AddLike(*computation_, CreateBroadcast(reduce->shape(), factor, dims), *broadcast);
      }
      result = AddLike(
          *computation_,
          HloInstruction::CreateBinary(HloOpcode::kMultiply, reduce->shape(), result, factor),
          *reduce);
    }
    if (product.negated) {
      result = AddLike(*computation_,
                       HloInstruction::CreateUnary(HloOpcode::kNegate, reduce->shape(), result),
                       *reduce);
    }
    if (is_float) {
      // A float sum from +0 is never -0 (x + y is -0 only where both are), but a product or a
      // negation of one is: -sum(a) of +0s, or c * sum(a) with c < 0. Adding +0 turns -0 into +0
      // and leaves every other value as it is, so the rewritten sum is -0 nowhere, as the original
      // was; a negation alone then gives the original's bits (sum(-a) = -sum(a) but where all of a
      // is -0, whose sum from +0 is +0 and negated -0).
      Literal zero(ScalarLike(operand->shape().element_type(), reduce->shape()));
      zero.SetFromDouble(0, 0.0);
      HloInstruction* constant =
          AddLike(*computation_, HloInstruction::CreateConstant(std::move(zero)), *reduce);
      HloInstruction* zeros = AddLike(*computation_, CreateBroadcast(reduce->shape(), constant, {}),
                                      *reduce);
      result = AddLike(
          *computation_,
          HloInstruction::CreateBinary(HloOpcode::kAdd, reduce->shape(), result, zeros), *reduce);
    }
    RETURN_IF_ERROR(computation_->ReplaceInstruction(reduce, result));
    removed_.insert(reduce);
    return true;
  }

  HloInstruction* FindOrAddMultiply(const Shape& shape, HloInstruction* lhs, HloInstruction* rhs,
                                    const HloInstruction& origin) {
    for (HloInstruction* user : lhs->users()) {
      if (user->opcode() == HloOpcode::kMultiply && user->operand(0) == lhs &&
          user->operand(1) == rhs && user->shape() == shape && !HasControlDependencies(*user)) {
        return user;
      }
    }
    return AddLike(*computation_,
                   HloInstruction::CreateBinary(HloOpcode::kMultiply, shape, lhs, rhs), origin);
  }

  HloComputation* computation_;
  std::unordered_set<const HloInstruction*> removed_;
};

}  // namespace

StatusOr<bool> ReduceFactorHoisting::Run(HloModule& module) {
  bool changed = false;
  for (HloComputation* computation : module.computations()) {
    if (computation->IsFusionComputation()) continue;
    ASSIGN_OR_RETURN(bool rewritten, Hoister(computation).Run());
    changed |= rewritten;
  }
  return changed;
}

}  // namespace xlens
