// RowAnalysis: whether a fusion is a row fusion, and where each of its values lives. A row fusion
// reduces the minor-most dimensions of one operand shape (the rows), possibly several times in
// sequence (softmax: the row's max, then the sum of exp(x - max)), and every other value is
// either per element of the rows or per row. Both backends emit such a fusion as one row kernel
// (the GPU a warp or block per row, the CPU a task per row with the row kept in cache) instead of
// materialising each reduction in a pass of its own.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "compiler/hlo/instruction.h"

namespace xlens::codegen {

// Where a value of a row fusion lives: independent of every reduction (computed wherever it is
// read), per element of the rows, or per row.
enum class Space { kFree, kRow, kReduced, kUnsupported };

class RowAnalysis {
 public:
  // `bound`: instructions read from memory (parameters, materialised values): free.
  explicit RowAnalysis(std::function<bool(const HloInstruction*)> bound) : bound_(std::move(bound)) {}

  // The space of `x` (memoised); kUnsupported when the fusion is not a row fusion through `x`.
  Space Classify(const HloInstruction* x);
  // How many reductions deep `x` is: 0 for values before any reduction, 1 for the first ones.
  int Level(const HloInstruction* x) const;
  // The operand shape every reduction reduces.
  const Shape& row_shape() const { return row_shape_; }
  // The dimensions of row_shape() that are not reduced (the row's index), in increasing order.
  const std::vector<int64_t>& kept() const { return kept_; }
  // Every reduction met, in an order where a reduction follows those it depends on.
  const std::vector<const HloInstruction*>& reductions() const { return reductions_; }

 private:
  // Whether `r` reduces the minor-most dimensions of an operand shape shared with the others.
  bool AcceptReduce(const HloInstruction* r);
  bool HasRowDims(const HloInstruction* x) const;
  Space ClassifyUncached(const HloInstruction* x);

  std::function<bool(const HloInstruction*)> bound_;
  std::map<const HloInstruction*, Space> space_;
  std::map<const HloInstruction*, int> level_;
  std::vector<const HloInstruction*> reductions_;
  bool have_shape_ = false;
  Shape row_shape_;
  std::vector<int64_t> reduced_;
  std::vector<int64_t> kept_;
};

}  // namespace xlens::codegen
