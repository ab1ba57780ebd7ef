// Which outputs of a matrix product are ever read. Attention with a causal mask computes every
// score q.k and then replaces the masked ones by a constant (select(row >= column, score, -1e9)):
// half of the first product is thrown away unread. Where the product's one consumer reads it only
// through such selects, whose condition is computed from iotas and constants alone and is the
// same for every batch element, the product need only compute each row's unmasked columns; the
// rest of its output is never read, so it may hold anything. The savings are exact: a select
// discards the value it does not take whatever it is (NaN included).
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "compiler/hlo/instruction.h"

namespace xlens::runtime {

// Columns [begin, end) of one row (begin == end: none).
struct ColumnRange {
  int64_t begin = 0, end = 0;
  bool operator==(const ColumnRange&) const = default;
};

// For `product`, an instruction whose array output is [batch..., m, n] in row-major order: per row
// of the [m, n] matrices, the smallest column range that holds every column its consumer reads,
// the same for every batch element. nullopt where every position may be read (several consumers,
// a consumer that is not a fusion, a read outside a select, a condition that depends on a
// parameter or on the batch, or one too large to work out at compile time).
std::optional<std::vector<ColumnRange>> ReadColumnsPerRow(const HloInstruction& product);

}  // namespace xlens::runtime
