#include "compiler/hlo/text_cursor.h"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "compiler/support/terminal_text.h"

namespace xlens {

bool TextCursor::IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '.' || c == '-';
}

void TextCursor::SkipWhitespace() {
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++pos_;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '/') {
      size_t end = text_.find('\n', pos_);
      pos_ = end == std::string_view::npos ? text_.size() : end + 1;
    } else if (c == '/' && pos_ + 1 < text_.size() && text_[pos_ + 1] == '*') {
      size_t end = text_.find("*/", pos_ + 2);
      pos_ = end == std::string_view::npos ? text_.size() : end + 2;
    } else {
      return;
    }
  }
}

char TextCursor::Peek() {
  SkipWhitespace();
  return AtEnd() ? '\0' : text_[pos_];
}

bool TextCursor::TryConsume(char c) {
  if (Peek() != c) return false;
  ++pos_;
  return true;
}

bool TextCursor::TryConsume(std::string_view s) {
  SkipWhitespace();
  if (text_.substr(pos_, s.size()) != s) return false;
  pos_ += s.size();
  return true;
}

bool TextCursor::TryConsumeWord(std::string_view word) {
  SkipWhitespace();
  if (text_.substr(pos_, word.size()) != word) return false;
  size_t end = pos_ + word.size();
  if (end < text_.size() && IsNameChar(text_[end])) return false;
  pos_ = end;
  return true;
}

Status TextCursor::Expect(char c, std::string_view what_for) {
  if (TryConsume(c)) return OkStatus();
  return Error(fmt::format("expected '{}' {}, found {}", c, what_for, Describe()));
}

std::string_view TextCursor::ReadName() {
  SkipWhitespace();
  size_t start = pos_;
  if (pos_ < text_.size() && text_[pos_] == '%') ++pos_;
  size_t name_start = pos_;
  while (pos_ < text_.size() && IsNameChar(text_[pos_])) ++pos_;
  if (pos_ == name_start) {
    pos_ = start;
    return {};
  }
  return text_.substr(name_start, pos_ - name_start);
}

std::string_view TextCursor::ReadKey() {
  SkipWhitespace();
  size_t start = pos_;
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
        c == '-') {
      ++pos_;
    } else {
      break;
    }
  }
  return text_.substr(start, pos_ - start);
}

StatusOr<int64_t> TextCursor::ReadInt64(std::string_view what) {
  SkipWhitespace();
  size_t start = pos_;
  const char* begin = text_.data() + pos_;
  const char* end = text_.data() + text_.size();
  int64_t value = 0;
  auto [ptr, ec] = std::from_chars(begin, end, value);
  if (ec == std::errc::result_out_of_range) {
    return ErrorAt(start, fmt::format("{} is out of range for a 64-bit integer", what));
  }
  if (ec != std::errc() || ptr == begin) {
    return ErrorAt(start, fmt::format("expected {} (an integer), found {}", what, DescribeAt(start)));
  }
  pos_ += static_cast<size_t>(ptr - begin);
  return value;
}

StatusOr<std::string> TextCursor::ReadString() {
  SkipWhitespace();
  size_t start = pos_;
  if (AtEnd() || text_[pos_] != '"') {
    return Error(fmt::format("expected a string in double quotes, found {}", Describe()));
  }
  ++pos_;
  std::string out;
  while (pos_ < text_.size()) {
    char c = text_[pos_++];
    if (c == '"') return out;
    if (c != '\\') {
      out += c;
      continue;
    }
    if (pos_ >= text_.size()) break;
    char e = text_[pos_++];
    switch (e) {
      case 'n': out += '\n'; break;
      case 't': out += '\t'; break;
      case 'r': out += '\r'; break;
      case '"': out += '"'; break;
      case '\\': out += '\\'; break;
      case '\'': out += '\''; break;
      default: out += '\\'; out += e; break;
    }
  }
  return ErrorAt(start, "unterminated string: expected a closing '\"'");
}

StatusOr<std::string_view> TextCursor::ReadRawValue() {
  SkipWhitespace();
  size_t start = pos_;
  if (AtEnd()) return Error("expected an attribute value, found the end of the text");
  // Brackets are balanced and strings skipped whole, so braces inside them do not count. At the
  // top level a value ends at ',', at an unmatched closer, or at whitespace, unless a bracket
  // follows the whitespace: `mesh['a'=2] {'a'}` is one value, and no instruction starts with one.
  std::string closers;
  while (pos_ < text_.size()) {
    char c = text_[pos_];
    if (c == '"') {
      size_t string_start = pos_;
      ++pos_;
      while (pos_ < text_.size() && text_[pos_] != '"') pos_ += text_[pos_] == '\\' ? 2 : 1;
      if (pos_ >= text_.size()) {
        return ErrorAt(string_start, "unterminated string: expected a closing '\"'");
      }
      ++pos_;
      continue;
    }
    if (c == '{' || c == '[' || c == '(') {
      closers.push_back(c == '{' ? '}' : c == '[' ? ']' : ')');
      ++pos_;
      continue;
    }
    if (c == '}' || c == ']' || c == ')') {
      if (closers.empty()) break;
      if (closers.back() != c) {
        return Error(fmt::format("unbalanced brackets in attribute value: expected '{}', found '{}'",
                                 closers.back(), c));
      }
      closers.pop_back();
      ++pos_;
      continue;
    }
    if (closers.empty()) {
      if (c == ',') break;
      if (c == ' ' || c == '\n' || c == '\r' || c == '\t') {
        size_t next = pos_;
        while (next < text_.size() && (text_[next] == ' ' || text_[next] == '\t')) ++next;
        if (next < text_.size() && (text_[next] == '{' || text_[next] == '[')) {
          pos_ = next;
          continue;
        }
        break;
      }
    }
    ++pos_;
  }
  if (!closers.empty()) {
    return ErrorAt(start, fmt::format("unbalanced brackets in attribute value: expected '{}' "
                                      "before the end of the text", closers.back()));
  }
  if (pos_ == start) return Error(fmt::format("expected an attribute value, found {}", Describe()));
  return text_.substr(start, pos_ - start);
}

std::string TextCursor::LineCol(size_t pos) const {
  pos = std::min(pos, text_.size());
  size_t line_start = pos;
  while (line_start > 0 && text_[line_start - 1] != '\n') --line_start;
  size_t line = 1 + std::count(text_.begin(), text_.begin() + line_start, '\n');
  return fmt::format("{}:{}", line, pos - line_start + 1);
}

std::string TextCursor::DescribeAt(size_t pos) const {
  if (pos >= text_.size()) return "the end of the text";
  unsigned char c = static_cast<unsigned char>(text_[pos]);
  // DEL and the line breaks too: quoted raw, they would repaint or break the message's line.
  if (c >= 0x7F || c < 0x20) {
    return fmt::format("byte 0x{:02X} (not HLO text)", c);
  }
  if (IsNameChar(static_cast<char>(c)) || c == '%') {
    size_t end = pos + 1;
    while (end < text_.size() && end - pos < 40 && IsNameChar(text_[end])) ++end;
    return fmt::format("'{}'", text_.substr(pos, end - pos));
  }
  return fmt::format("'{}'", static_cast<char>(c));
}

namespace {
// Past this, the middle of an error message is elided (names can be megabytes long).
constexpr size_t kMaxMessageBytes = 1000;
}  // namespace

Status TextCursor::ErrorAt(size_t pos, std::string_view message) const {
  pos = std::min(pos, text_.size());
  size_t line_start = pos;
  while (line_start > 0 && text_[line_start - 1] != '\n') --line_start;
  size_t line_end = text_.find('\n', pos);
  if (line_end == std::string_view::npos) line_end = text_.size();
  size_t line = 1 + std::count(text_.begin(), text_.begin() + line_start, '\n');
  size_t col = pos - line_start + 1;
  // Show at most ~100 characters of the line around the column: lines can be 100 MB long.
  constexpr size_t kContext = 60;
  size_t show_start = pos - line_start > kContext ? pos - kContext : line_start;
  size_t show_end = std::min(line_end, pos + kContext);
  std::string shown;
  for (size_t i = show_start; i < show_end; ++i) {
    unsigned char c = static_cast<unsigned char>(text_[i]);
    shown += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : (c == '\t' ? ' ' : '?');
  }
  std::string prefix = show_start > line_start ? "..." : "";
  std::string suffix = show_end < line_end ? "..." : "";
  std::string caret(prefix.size() + (pos - show_start), ' ');
  // A message quoting a 1 MB name stays readable: its middle goes.
  return xlens::Error(fmt::format("{}:{}:{}: {}\n{}{}{}\n{}^", filename_, line, col,
                                  ElideMiddle(message, kMaxMessageBytes), prefix,
                                  shown, suffix, caret));
}

}  // namespace xlens
