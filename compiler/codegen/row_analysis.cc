#include "compiler/codegen/row_analysis.h"

#include <algorithm>

#include "compiler/codegen/ir_array.h"

namespace xlens::codegen {

namespace {

bool IsExpensive(HloOpcode op) {
  return op == HloOpcode::kReduce || op == HloOpcode::kReduceWindow || op == HloOpcode::kDot ||
         op == HloOpcode::kConvolution;
}

}  // namespace

Space RowAnalysis::Classify(const HloInstruction* x) {
  if (auto it = space_.find(x); it != space_.end()) return it->second;
  Space s = ClassifyUncached(x);
  space_[x] = s;
  return s;
}

int RowAnalysis::Level(const HloInstruction* x) const {
  auto it = level_.find(x);
  return it == level_.end() ? 0 : it->second;
}

bool RowAnalysis::AcceptReduce(const HloInstruction* r) {
  const Shape& in = r->operand(0)->shape();
  std::vector<int64_t> reduced = r->dimensions();
  std::sort(reduced.begin(), reduced.end());
  if (reduced.empty() || in.rank() == 0 || in.num_elements() == 0) return false;
  if (reductions_.empty() && !have_shape_) {
    std::vector<int64_t> order = MajorToMinor(in);
    std::vector<int64_t> minor(order.end() - reduced.size(), order.end());
    std::sort(minor.begin(), minor.end());
    if (minor != reduced) return false;
    row_shape_ = in;
    reduced_ = reduced;
    kept_.clear();
    for (int64_t d = 0; d < in.rank(); ++d) {
      if (!std::binary_search(reduced.begin(), reduced.end(), d)) kept_.push_back(d);
    }
    have_shape_ = true;
    return true;
  }
  return in.dimensions() == row_shape_.dimensions() &&
         MajorToMinor(in) == MajorToMinor(row_shape_) && reduced == reduced_;
}

bool RowAnalysis::HasRowDims(const HloInstruction* x) const {
  return x->shape().IsArray() && x->shape().dimensions() == row_shape_.dimensions();
}

Space RowAnalysis::ClassifyUncached(const HloInstruction* x) {
  if (bound_(x) || x->opcode() == HloOpcode::kParameter || x->opcode() == HloOpcode::kConstant) {
    return Space::kFree;
  }
  if (x->opcode() == HloOpcode::kReduce) {
    if (!AcceptReduce(x)) return Space::kUnsupported;
    const int64_t n = x->operand_count() / 2;
    int level = 0;
    for (int64_t i = 0; i < x->operand_count(); ++i) {
      const Space s = Classify(x->operand(i));
      if (s == Space::kUnsupported || s == Space::kReduced) return Space::kUnsupported;
      if (i >= n && s != Space::kFree) return Space::kUnsupported;
      level = std::max(level, Level(x->operand(i)));
    }
    level_[x] = level + 1;
    reductions_.push_back(x);
    return Space::kReduced;
  }
  std::vector<Space> spaces;
  int level = 0;
  bool dependent = false;
  for (const HloInstruction* operand : x->operands()) {
    spaces.push_back(Classify(operand));
    if (spaces.back() == Space::kUnsupported) return Space::kUnsupported;
    dependent |= spaces.back() != Space::kFree;
    level = std::max(level, Level(operand));
  }
  level_[x] = level;
  if (!dependent) {
    // Computed per element wherever it is read: an expensive one would be recomputed per
    // element of the rows.
    return IsExpensive(x->opcode()) ? Space::kUnsupported : Space::kFree;
  }
  switch (x->opcode()) {
    case HloOpcode::kBroadcast:
      // A per-row value spread along the rows.
      return spaces[0] == Space::kReduced && HasRowDims(x) && x->dimensions() == kept_
                 ? Space::kRow : Space::kUnsupported;
    case HloOpcode::kGetTupleElement:
      return spaces[0];
    default:
      break;
  }
  if (!x->IsElementwise()) return Space::kUnsupported;
  Space result = Space::kFree;
  for (Space s : spaces) {
    if (s == Space::kFree) continue;
    if (result != Space::kFree && s != result) return Space::kUnsupported;
    result = s;
  }
  return result;
}

}  // namespace xlens::codegen
