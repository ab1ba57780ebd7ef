#include "compiler/passes/sum_rewriting.h"

#include <algorithm>

#include "compiler/passes/sum_pattern.h"

namespace xlens {
namespace {

void Collect(HloInstruction* value, const Shape& shape, SignedProduct& product) {
  if (++product.visits > kMaxProductVisits) return;
  const bool walk = IsProductNode(*value, shape);
  if (walk && value->opcode() == HloOpcode::kMultiply) {
    Collect(value->operand(0), shape, product);
    Collect(value->operand(1), shape, product);
    return;
  }
  if (walk && value->opcode() == HloOpcode::kNegate) {
    product.negated = !product.negated;
    Collect(value->operand(0), shape, product);
    return;
  }
  product.factors.push_back(value);
}

}  // namespace

bool IsProductNode(const HloInstruction& value, const Shape& shape) {
  return !HasControlDependencies(value) && value.shape().IsArray() &&
         shape_util::SameDimensions(value.shape(), shape) &&
         value.shape().element_type() == shape.element_type();
}

SignedProduct CollectProduct(HloInstruction* value, const Shape& shape) {
  SignedProduct product;
  Collect(value, shape, product);
  return product;
}

std::vector<int64_t> SortedDimensions(std::vector<int64_t> dimensions) {
  std::sort(dimensions.begin(), dimensions.end());
  return dimensions;
}

HloInstruction* AddLike(HloComputation& computation, std::unique_ptr<HloInstruction> instruction,
                        const HloInstruction& origin) {
  instruction->metadata = origin.metadata;
  return computation.AddInstruction(std::move(instruction));
}

HloInstruction* NewSumLike(HloComputation& computation, HloInstruction* values,
                           const HloInstruction& like) {
  auto sum = HloInstruction::CreateBinary(HloOpcode::kReduce, like.shape(), values,
                                          like.operand(1));
  sum->dimensions_attr = like.dimensions();
  sum->SetCalledComputation("to_apply", like.to_apply());
  return AddLike(computation, std::move(sum), like);
}

HloInstruction* FindOrAddSumLike(HloComputation& computation, HloInstruction* values,
                                 const HloInstruction& like,
                                 const std::unordered_set<const HloInstruction*>& removed) {
  const std::vector<int64_t> dims = SortedDimensions(like.dimensions());
  for (HloInstruction* user : values->users()) {
    if (user != &like && !removed.count(user) && IsSumFromZero(*user) &&
        user->operand(0) == values && user->shape() == like.shape() &&
        SortedDimensions(user->dimensions()) == dims) {
      return user;
    }
  }
  return NewSumLike(computation, values, like);
}

}  // namespace xlens
