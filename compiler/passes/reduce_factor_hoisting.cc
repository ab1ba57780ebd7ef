#include "compiler/passes/reduce_factor_hoisting.h"

#include <algorithm>
#include <unordered_set>
#include <vector>

#include "compiler/passes/sum_pattern.h"

namespace xlens {
namespace {

// The most multiplies, negates and leaves the walk of one sum's operand visits. The walk follows
// both operands of every multiply, so a product that reuses itself (m1 = x * x, m2 = m1 * m1, ...)
// has 2^n leaves in n instructions, and a chain of n multiplies is n calls deep: past this the
// sum is left as it is. Batch norm's sums have 3-4 factors.
constexpr int kMaxVisits = 64;

std::vector<int64_t> Sorted(std::vector<int64_t> v) {
  std::sort(v.begin(), v.end());
  return v;
}

// The reduce's operand as a signed product: the factors that vary along the reduced dimensions
// (in the order they are multiplied), and the broadcasts that do not.
struct Product {
  std::vector<HloInstruction*> varying;
  std::vector<HloInstruction*> invariant;
  bool negated = false;
  int visits = 0;  // past kMaxVisits the walk stops and the sum is left alone
};

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
    const std::vector<int64_t> reduced = Sorted(reduce->dimensions());
    auto is_reduced = [&](int64_t d) {
      return std::binary_search(reduced.begin(), reduced.end(), d);
    };
    HloInstruction* operand = reduce->operand(0);
    Product product;
    Collect(operand, operand->shape(), is_reduced, product);
    if (product.visits > kMaxVisits || product.varying.empty() ||
        (product.invariant.empty() && !product.negated)) {
      return false;
    }

    // The kept dimensions in order are the reduce's dimensions.
    std::vector<int64_t> kept;
    for (int64_t d = 0; d < operand->shape().rank(); ++d) {
      if (!is_reduced(d)) kept.push_back(d);
    }
    HloInstruction* rest = product.varying[0];
    for (size_t i = 1; i < product.varying.size(); ++i) {
      rest = FindOrAddMultiply(operand->shape(), rest, product.varying[i], *operand);
    }
    HloInstruction* result = FindOrAddSum(rest, reduce);
    for (HloInstruction* broadcast : product.invariant) {
      HloInstruction* factor = broadcast->operand(0);
      std::vector<int64_t> dims;
      for (int64_t d : broadcast->dimensions()) {
        dims.push_back(std::find(kept.begin(), kept.end(), d) - kept.begin());
      }
      bool identity = factor->shape().rank() == reduce->shape().rank();
      for (size_t i = 0; i < dims.size(); ++i) identity &= dims[i] == static_cast<int64_t>(i);
      if (!identity || !(factor->shape() == reduce->shape())) {
        auto spread = HloInstruction::CreateUnary(HloOpcode::kBroadcast, reduce->shape(), factor);
        spread->dimensions_attr = dims;
        factor = Add(std::move(spread), *broadcast);
      }
      result = Add(HloInstruction::CreateBinary(HloOpcode::kMultiply, reduce->shape(), result,
                                                factor),
                   *reduce);
    }
    if (product.negated) {
      result = Add(HloInstruction::CreateUnary(HloOpcode::kNegate, reduce->shape(), result),
                   *reduce);
    }
    RETURN_IF_ERROR(computation_->ReplaceInstruction(reduce, result));
    removed_.insert(reduce);
    return true;
  }

  // Walks the multiplies and negates of the operand's shape down to their other operands.
  template <typename IsReduced>
  void Collect(HloInstruction* value, const Shape& shape, const IsReduced& is_reduced,
               Product& product) {
    if (++product.visits > kMaxVisits) return;
    const bool walk = !HasControlDependencies(*value) && value->shape().IsArray() &&
                      shape_util::SameDimensions(value->shape(), shape) &&
                      value->shape().element_type() == shape.element_type();
    if (walk && value->opcode() == HloOpcode::kMultiply) {
      Collect(value->operand(0), shape, is_reduced, product);
      Collect(value->operand(1), shape, is_reduced, product);
      return;
    }
    if (walk && value->opcode() == HloOpcode::kNegate) {
      product.negated = !product.negated;
      Collect(value->operand(0), shape, is_reduced, product);
      return;
    }
    if (walk && value->opcode() == HloOpcode::kBroadcast && value->operand(0)->shape().IsArray() &&
        std::none_of(value->dimensions().begin(), value->dimensions().end(), is_reduced)) {
      product.invariant.push_back(value);
      return;
    }
    product.varying.push_back(value);
  }

  HloInstruction* FindOrAddMultiply(const Shape& shape, HloInstruction* lhs, HloInstruction* rhs,
                                    const HloInstruction& origin) {
    for (HloInstruction* user : lhs->users()) {
      if (user->opcode() == HloOpcode::kMultiply && user->operand(0) == lhs &&
          user->operand(1) == rhs && user->shape() == shape && !HasControlDependencies(*user)) {
        return user;
      }
    }
    return Add(HloInstruction::CreateBinary(HloOpcode::kMultiply, shape, lhs, rhs), origin);
  }

  // A sum of `values` as `like` sums its operand: an existing one, or a new one.
  HloInstruction* FindOrAddSum(HloInstruction* values, HloInstruction* like) {
    const std::vector<int64_t> dims = Sorted(like->dimensions());
    for (HloInstruction* user : values->users()) {
      if (user != like && !removed_.count(user) && IsSumFromZero(*user) && user->operand(0) == values &&
          user->shape() == like->shape() && Sorted(user->dimensions()) == dims) {
        return user;
      }
    }
    auto sum = HloInstruction::CreateBinary(HloOpcode::kReduce, like->shape(), values,
                                            like->operand(1));
    sum->dimensions_attr = like->dimensions();
    sum->SetCalledComputation("to_apply", like->to_apply());
    return Add(std::move(sum), *like);
  }

  HloInstruction* Add(std::unique_ptr<HloInstruction> instruction, const HloInstruction& origin) {
    instruction->metadata = origin.metadata;
    return computation_->AddInstruction(std::move(instruction));
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
