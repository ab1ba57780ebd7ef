// What the passes that rewrite sums (reduce-factor-hoisting, shifted-moments) share beside the
// recognition of a sum (sum_pattern.h): the walk of a sum's operand as a signed product of
// factors, and the sums they find or add as another sum sums its operand.
#pragma once

#include <cstdint>
#include <memory>
#include <unordered_set>
#include <vector>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/instruction.h"

namespace xlens {

// The most multiplies, negates and factors one walk of a product visits. The walk follows both
// operands of every multiply, so a product that reuses itself (m1 = x * x, m2 = m1 * m1, ...) has
// 2^n factors in n instructions, and a chain of n multiplies is n calls deep: past this the sum
// is left as it is. Batch norm's sums have 2-4 factors.
inline constexpr int kMaxProductVisits = 64;

// A value as a signed product: the operands that its multiplies and negates of one shape stop at
// (in the order they are multiplied), and the parity of the negates.
struct SignedProduct {
  std::vector<HloInstruction*> factors;
  bool negated = false;
  int visits = 0;  // past kMaxProductVisits the walk stopped: the factors are not all there
  bool complete() const { return visits <= kMaxProductVisits; }
};

// Whether the walk goes through `value` when it is a multiply or a negate: an array of the
// dimensions and element type of `shape`, without control dependencies.
bool IsProductNode(const HloInstruction& value, const Shape& shape);

// Walks the multiplies and negates from `value` down to their other operands.
SignedProduct CollectProduct(HloInstruction* value, const Shape& shape);

// `dimensions` in increasing order.
std::vector<int64_t> SortedDimensions(std::vector<int64_t> dimensions);

// Adds `instruction` to `computation` with the metadata of `origin`.
HloInstruction* AddLike(HloComputation& computation, std::unique_ptr<HloInstruction> instruction,
                        const HloInstruction& origin);

// A new sum of `values` as `like` sums its operand (its dimensions, init value and reducer).
HloInstruction* NewSumLike(HloComputation& computation, HloInstruction* values,
                           const HloInstruction& like);

// A sum of `values` as `like` sums its operand: an existing sum from zero other than `like` and
// those in `removed`, or a new one.
HloInstruction* FindOrAddSumLike(HloComputation& computation, HloInstruction* values,
                                 const HloInstruction& like,
                                 const std::unordered_set<const HloInstruction*>& removed = {});

}  // namespace xlens
