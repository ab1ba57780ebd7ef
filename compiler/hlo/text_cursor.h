// A cursor over HLO text: skips whitespace and comments, reads the small lexical pieces of the
// format (names, integers, numbers, strings, balanced raw values) and turns a position into
// `FILE:LINE:COL: message` with the line and a caret. The parser is written directly on top of it:
// HLO text has several context-dependent token shapes (`1_1x2_2`, `b01f_01io->b01f`, `[0:4:2]`)
// that a context-free token stream would only have to split again.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace xlens {

class TextCursor {
 public:
  TextCursor(std::string_view text, std::string filename)
      : text_(text), filename_(std::move(filename)) {}

  size_t pos() const { return pos_; }
  // The position of the next token (whitespace and comments skipped).
  size_t Here() {
    SkipWhitespace();
    return pos_;
  }
  void set_pos(size_t pos) { pos_ = pos; }
  bool AtEnd() const { return pos_ >= text_.size(); }
  std::string_view text() const { return text_; }

  // Skips spaces, newlines, `// ...` and `/* ... */` comments.
  void SkipWhitespace();
  // The next character after whitespace (0 at the end).
  char Peek();
  // Consumes `c` (after whitespace) when it is next.
  bool TryConsume(char c);
  // Consumes `s` (after whitespace) when it is next.
  bool TryConsume(std::string_view s);
  // Consumes `s` if it is the next word (not followed by a name character).
  bool TryConsumeWord(std::string_view word);
  Status Expect(char c, std::string_view what_for);

  // A name: [%]?[A-Za-z0-9_.-]+ with the % dropped. Empty when none.
  std::string_view ReadName();
  // An attribute key: [A-Za-z0-9_-]+.
  std::string_view ReadKey();
  StatusOr<int64_t> ReadInt64(std::string_view what);
  // A string literal in double quotes with C escapes, unescaped.
  StatusOr<std::string> ReadString();
  // The raw text of one attribute value: a balanced {...}, [...] or (...) group, a quoted string,
  // or a bare word, exactly as written.
  StatusOr<std::string_view> ReadRawValue();

  // `FILE:LINE:COL: message`, then the line (cut around the column when long) and a caret.
  Status ErrorAt(size_t pos, std::string_view message) const;
  Status Error(std::string_view message) const { return ErrorAt(pos_, message); }
  // What is at `pos`, for "expected X, found Y" messages.
  std::string DescribeAt(size_t pos) const;
  std::string Describe() { SkipWhitespace(); return DescribeAt(pos_); }
  // LINE:COL of a position.
  std::string LineCol(size_t pos) const;

  static bool IsNameChar(char c);

 private:
  std::string_view text_;
  std::string filename_;
  size_t pos_ = 0;
};

}  // namespace xlens
