// Readers for an attribute value read on its own (replica_groups, source_target_pairs,
// channel_id, the mesh form of replica groups), on a TextCursor over just that value. Their errors
// name the offset in the value, not a file position: the caller puts them after `name=value: `,
// which keeps the user's error on one line.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "compiler/hlo/text_cursor.h"
#include "compiler/support/status.h"

namespace xlens::value {

// Consumes `s` (after whitespace), or "expected 's' at offset N".
Status Expect(TextCursor& cursor, std::string_view s);
// True when only whitespace is left.
bool AtEnd(TextCursor& cursor);
// A decimal integer; a leading '-' only when `allow_minus`. "expected an integer at offset N", or
// "an integer out of range".
StatusOr<int64_t> ReadInt(TextCursor& cursor, bool allow_minus);
// {a,b,c} (possibly empty); the integers may be negative.
StatusOr<std::vector<int64_t>> ReadBraceList(TextCursor& cursor);
// {{...},{...}}: a brace list of brace lists (possibly empty).
StatusOr<std::vector<std::vector<int64_t>>> ReadNestedList(TextCursor& cursor);

}  // namespace xlens::value
