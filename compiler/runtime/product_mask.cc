#include "compiler/runtime/product_mask.h"

#include <algorithm>
#include <functional>
#include <map>
#include <span>

#include "compiler/hlo/computation.h"
#include "compiler/hlo/evaluator.h"
#include "compiler/hlo/literal.h"

namespace xlens::runtime {
namespace {

// Conditions are worked out by the evaluator at compile time: at most this many elements in any
// instruction they are made of (a 2048x2048 mask).
constexpr int64_t kMaxConditionElements = int64_t{1} << 22;

bool RowMajor(const Shape& shape) {
  return !shape.has_layout() || shape.layout().minor_to_major == shape_util::DefaultMinorToMajor(shape.rank());
}

// What a condition may be made of: values of the positions alone, no parameter, nothing random.
bool Computable(HloOpcode opcode) {
  switch (opcode) {
    case HloOpcode::kConstant: case HloOpcode::kIota: case HloOpcode::kBroadcast:
    case HloOpcode::kReshape: case HloOpcode::kTranspose: case HloOpcode::kConvert:
    case HloOpcode::kCompare: case HloOpcode::kSelect: case HloOpcode::kAnd: case HloOpcode::kOr:
    case HloOpcode::kXor: case HloOpcode::kNot: case HloOpcode::kAdd: case HloOpcode::kSubtract:
    case HloOpcode::kMultiply: case HloOpcode::kMaximum: case HloOpcode::kMinimum:
    case HloOpcode::kNegate: case HloOpcode::kAbs: case HloOpcode::kSlice:
      return true;
    default:
      return false;
  }
}

// A mask is a few operations deep (iotas, a compare, a broadcast); a deeper chain is not worked
// out, so a hostile module cannot run the recursion below out of stack.
constexpr int kMaxConditionDepth = 64;

// The value of a parameter-free `instruction`, or nullopt.
std::optional<Literal> Evaluate(const HloInstruction& instruction, std::map<const HloInstruction*, Literal>& done,
                                int depth = 0) {
  if (auto it = done.find(&instruction); it != done.end()) return it->second;
  if (depth > kMaxConditionDepth || !Computable(instruction.opcode()) || !instruction.shape().IsArray() ||
      instruction.shape().num_elements() > kMaxConditionElements) {
    return std::nullopt;
  }
  std::vector<Literal> operands;
  for (const HloInstruction* operand : instruction.operands()) {
    std::optional<Literal> value = Evaluate(*operand, done, depth + 1);
    if (!value) return std::nullopt;
    operands.push_back(std::move(*value));
  }
  std::vector<const Literal*> pointers;
  for (const Literal& l : operands) pointers.push_back(&l);
  StatusOr<Literal> value = EvaluateInstruction(instruction, std::span<const Literal* const>(pointers));
  if (!value.ok()) return std::nullopt;
  done.emplace(&instruction, *value);
  return std::move(*value);
}

// The [m, n] condition of a select over [batch..., m, n]: the condition itself at rank 2, or the
// rank-2 operand a broadcast spreads over the batch.
const HloInstruction* RowColumnCondition(const HloInstruction& condition, int64_t rank) {
  if (rank == 2) return &condition;
  if (condition.opcode() == HloOpcode::kBroadcast && condition.operand(0)->shape().rank() == 2 &&
      condition.dimensions() == std::vector<int64_t>{rank - 2, rank - 1}) {
    return condition.operand(0);
  }
  return nullptr;
}

}  // namespace

std::optional<SelectedPositions> SelectedPositions::For(const Shape& shape) {
  if (!shape.IsArray() || shape.rank() < 2 || !RowMajor(shape)) return std::nullopt;
  const int64_t rank = shape.rank(), m = shape.dimensions(rank - 2), n = shape.dimensions(rank - 1);
  if (m * n > kMaxConditionElements) return std::nullopt;
  return SelectedPositions(rank, m, n);
}

bool SelectedPositions::AddSelect(const HloInstruction& select, const HloInstruction& operand) {
  if (select.opcode() != HloOpcode::kSelect || select.operand(0) == &operand ||
      select.operand(1) == select.operand(2) || (select.operand(1) != &operand && select.operand(2) != &operand)) {
    return false;
  }
  const bool taken_when = select.operand(1) == &operand;
  const HloInstruction* condition = RowColumnCondition(*select.operand(0), rank_);
  if (condition == nullptr) return false;
  std::optional<Literal> value = Evaluate(*condition, evaluated_);
  if (!value || value->shape().element_type() != PrimitiveType::PRED || value->element_count() != m_ * n_) {
    return false;
  }
  std::span<const bool> taken = value->data<bool>();
  for (int64_t p = 0; p < m_ * n_; ++p) read_[p] |= taken[p] == taken_when;
  any_ = true;
  return true;
}

std::vector<ColumnRange> SelectedPositions::ColumnsPerRow() const {
  std::vector<ColumnRange> ranges(m_);
  for (int64_t r = 0; r < m_; ++r) {
    const char* row = &read_[r * n_];
    const char* first = std::find(row, row + n_, 1);
    if (first == row + n_) continue;
    const int64_t begin = first - row;
    int64_t end = n_;
    while (!row[end - 1]) --end;
    ranges[r] = {begin, end};
  }
  return ranges;
}

std::optional<std::vector<ColumnRange>> ReadColumnsPerRow(const HloInstruction& product) {
  std::optional<SelectedPositions> read = SelectedPositions::For(product.shape());
  if (!read || product.users().size() != 1) return std::nullopt;
  const HloInstruction& consumer = *product.users()[0];
  if (consumer.opcode() != HloOpcode::kFusion || consumer.fused_computation() == nullptr) return std::nullopt;
  for (int64_t i = 0; i < consumer.operand_count(); ++i) {
    if (consumer.operand(i) != &product) continue;
    const HloInstruction* parameter = consumer.fused_computation()->parameter_instruction(i);
    if (parameter == consumer.fused_computation()->root_instruction()) return std::nullopt;
    for (const HloInstruction* user : parameter->users()) {
      if (!read->AddSelect(*user, *parameter)) return std::nullopt;
    }
  }
  if (read->empty()) return std::nullopt;
  return read->ColumnsPerRow();
}

std::optional<std::vector<ColumnRange>> RowUniformOutsideColumns(const HloInstruction& producer) {
  if (producer.opcode() != HloOpcode::kFusion || producer.fused_computation() == nullptr) return std::nullopt;
  return RowUniformOutsideColumnsOfValue(*producer.fused_computation()->root_instruction());
}

std::optional<std::vector<ColumnRange>> RowUniformOutsideColumnsOfValue(const HloInstruction& value) {
  const Shape& shape = value.shape();
  if (!shape.IsArray()) return std::nullopt;
  std::optional<SelectedPositions> kept = SelectedPositions::For(shape);
  if (!kept) return std::nullopt;
  const int64_t columns = shape.rank() - 1;
  // The one select whose other arm is kept where its condition says, and the instructions
  // already known to be (or not be) uniform along a row's masked columns.
  const HloInstruction* masking = nullptr;
  std::map<const HloInstruction*, bool> known;
  std::function<bool(const HloInstruction&, int)> uniform = [&](const HloInstruction& x, int depth) -> bool {
    if (auto it = known.find(&x); it != known.end()) return it->second;
    bool result = false;
    if (depth > kMaxConditionDepth || !x.shape().IsArray() || x.shape().dimensions() != shape.dimensions() ||
        !RowMajor(x.shape())) {
      result = false;
    } else if (x.opcode() == HloOpcode::kBroadcast) {
      const std::vector<int64_t>& d = x.dimensions();
      result = std::find(d.begin(), d.end(), columns) == d.end();
    } else if (x.opcode() == HloOpcode::kSelect) {
      const bool on_true = uniform(*x.operand(1), depth + 1), on_false = uniform(*x.operand(2), depth + 1);
      if (on_true && on_false) {
        // One value a row on either side, but which side may vary along the row: uniform where
        // its condition is (or both sides are one instruction), else only outside the positions
        // where it takes its true side, which are then kept (softmax(where=mask)'s
        // select(mask, p, 0) keeps the mask's own positions; select(column < 100, c, 0) keeps
        // the first 100 columns of every row).
        if (x.operand(1) == x.operand(2) || uniform(*x.operand(0), depth + 1)) {
          result = true;
        } else {
          result = kept->AddSelect(x, *x.operand(1));
          if (result && masking == nullptr) masking = &x;
        }
      } else if (masking == nullptr && (on_true || on_false)) {
        // Outside the positions where it takes its varying arm, the select is its uniform one.
        result = kept->AddSelect(x, *x.operand(on_true ? 2 : 1));
        if (result) masking = &x;
      }
    } else if (x.IsElementwise() && x.opcode() != HloOpcode::kMap) {
      result = true;
      for (const HloInstruction* operand : x.operands()) result = result && uniform(*operand, depth + 1);
    }
    known[&x] = result;
    return result;
  };
  if (!uniform(value, 0) || masking == nullptr) return std::nullopt;
  return kept->ColumnsPerRow();
}

}  // namespace xlens::runtime
