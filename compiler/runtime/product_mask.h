// Which outputs of a matrix product are ever read. Attention with a causal mask computes every
// score q.k and then replaces the masked ones by a constant (select(row >= column, score, -1e9)):
// half of the first product is thrown away unread. Where the product's one consumer reads it only
// through such selects, whose condition is computed from iotas and constants alone and is the
// same for every batch element, the product need only compute each row's unmasked columns; the
// rest of its output is never read, so it may hold anything. The savings are exact: a select
// discards the value it does not take whatever it is (NaN included).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "compiler/hlo/instruction.h"
#include "compiler/hlo/literal.h"

namespace xlens::runtime {

// Columns [begin, end) of one row (begin == end: none).
struct ColumnRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ColumnRange&) const = default;
};

// The positions of the [m, n] matrices of a row-major [batch..., m, n] array that selects over it
// read from it, the same for every batch element. A select's condition is worked out at compile
// time where it is parameter-free and made of a fixed list of operations (iotas, constants,
// broadcasts, compares, integer arithmetic without division); anything else and every position may
// be read. ReadColumnsPerRow below walks a product's fusion to its selects; the benchmark's
// floors (machine_limits) walk the unoptimized module's, so that both count the same scores read.
class SelectedPositions {
 public:
  // nullopt where `shape` is not a row-major array of rank 2 or more, or its [m, n] is too large
  // to work out.
  static std::optional<SelectedPositions> For(const Shape& shape);

  // Marks as read the positions that `select` (over an array of this shape) takes from `operand`,
  // its on-true or on-false operand and not also the other one. False where that is not known: the
  // condition depends on a parameter, varies over the batch, is made of another operation, or is
  // too large; the caller then takes every position as read.
  bool AddSelect(const HloInstruction& select, const HloInstruction& operand);

  // Whether AddSelect has marked anything (no select seen: nothing is known).
  bool empty() const { return !any_; }

  // Per row, the smallest column range that holds every position marked read.
  std::vector<ColumnRange> ColumnsPerRow() const;

 private:
  SelectedPositions(int64_t rank, int64_t m, int64_t n) : rank_(rank), m_(m), n_(n), read_(m * n, 0) {}

  int64_t rank_ = 0, m_ = 0, n_ = 0;
  std::vector<char> read_;
  std::map<const HloInstruction*, Literal> evaluated_;  // conditions shared by several selects
  bool any_ = false;
};

// For `product`, an instruction whose array output is [batch..., m, n] in row-major order: per row
// of the [m, n] matrices, the smallest column range that holds every column its consumer reads,
// the same for every batch element. nullopt where every position may be read (several consumers,
// a consumer that is not a fusion, a read outside a select, a condition that depends on a
// parameter or on the batch, or one too large to work out at compile time).
std::optional<std::vector<ColumnRange>> ReadColumnsPerRow(const HloInstruction& product);

// For `producer`, a fusion whose array output is [batch..., m, n] in row-major order: per row of
// the [m, n] matrices, the smallest column range outside which every element of that row holds
// one and the same value, whatever the inputs (a value per row and batch element, not known at
// compile time). So it is where the output is computed elementwise from a single select whose
// condition is worked out as above (parameter-free, the same for every batch element) and from
// values that vary with the row alone: broadcasts that leave the columns out, as a reduction's
// result spread back over its row. Softmax over causally masked scores: each masked column of
// row r is exp(-1e9 - max_r) / sum_r. A product with this lhs may then skip those columns of its
// contraction where that value is 0 (onednn_thunks.cc checks it at run time, one element a row).
// nullopt where not so, or where no select is found.
std::optional<std::vector<ColumnRange>> RowUniformOutsideColumns(const HloInstruction& producer);
// The same for any array instruction `value`, read from the instructions that compute it (a
// fusion's root, or an instruction of a module not yet fused: the benchmark's floors take the
// rule the runtime takes, from the module as written).
std::optional<std::vector<ColumnRange>> RowUniformOutsideColumnsOfValue(const HloInstruction& value);

}  // namespace xlens::runtime
