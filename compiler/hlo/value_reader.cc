#include "compiler/hlo/value_reader.h"

#include <cctype>

#include <fmt/format.h>

namespace xlens::value {

Status Expect(TextCursor& cursor, std::string_view s) {
  if (cursor.TryConsume(s)) return OkStatus();
  return Error(fmt::format("expected '{}' at offset {}", s, cursor.pos()));
}

bool AtEnd(TextCursor& cursor) {
  cursor.SkipWhitespace();
  return cursor.AtEnd();
}

StatusOr<int64_t> ReadInt(TextCursor& cursor, bool allow_minus) {
  const std::string_view text = cursor.text();
  size_t pos = cursor.Here();
  const size_t start = pos;
  const bool negative = allow_minus && pos < text.size() && text[pos] == '-';
  if (negative) ++pos;
  const size_t digits = pos;
  int64_t value = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos]))) {
    const int digit = text[pos] - '0';
    if (value > (INT64_MAX - digit) / 10) return Error("an integer out of range");
    value = value * 10 + digit;
    ++pos;
  }
  cursor.set_pos(pos);
  if (pos == digits) return Error(fmt::format("expected an integer at offset {}", start));
  return negative ? -value : value;
}

StatusOr<std::vector<int64_t>> ReadBraceList(TextCursor& cursor) {
  RETURN_IF_ERROR(Expect(cursor, "{"));
  std::vector<int64_t> values;
  if (cursor.TryConsume("}")) return values;
  while (true) {
    ASSIGN_OR_RETURN(int64_t v, ReadInt(cursor, /*allow_minus=*/true));
    values.push_back(v);
    if (cursor.TryConsume("}")) return values;
    RETURN_IF_ERROR(Expect(cursor, ","));
  }
}

StatusOr<std::vector<std::vector<int64_t>>> ReadNestedList(TextCursor& cursor) {
  RETURN_IF_ERROR(Expect(cursor, "{"));
  std::vector<std::vector<int64_t>> lists;
  if (cursor.TryConsume("}")) return lists;
  while (true) {
    ASSIGN_OR_RETURN(std::vector<int64_t> list, ReadBraceList(cursor));
    lists.push_back(std::move(list));
    if (cursor.TryConsume("}")) return lists;
    RETURN_IF_ERROR(Expect(cursor, ","));
  }
}

}  // namespace xlens::value
