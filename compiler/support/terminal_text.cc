#include "compiler/support/terminal_text.h"

#include <cstdint>

#include <fmt/format.h>

namespace xlens {

namespace {

// The length of the valid UTF-8 sequence starting at text[i], or 0 when it is not one.
size_t Utf8SequenceLength(std::string_view text, size_t i) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(i);
  if (lead < 0x80) return 1;
  size_t length;
  uint32_t min_code, code;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, min_code = 0x80, code = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, min_code = 0x800, code = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, min_code = 0x10000, code = lead & 0x07;
  } else {
    return 0;
  }
  if (i + length > text.size()) return 0;
  for (size_t k = 1; k < length; ++k) {
    if ((byte(i + k) & 0xC0) != 0x80) return 0;
    code = (code << 6) | (byte(i + k) & 0x3F);
  }
  if (code < min_code || code > 0x10FFFF || (code >= 0xD800 && code <= 0xDFFF)) return 0;
  return length;
}

}  // namespace

std::string EscapeForTerminal(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c < 0x20 || c == 0x7F) {
      switch (c) {
        case '\n': out += "\\n"; break;
        case '\t': out += "\\t"; break;
        case '\r': out += "\\r"; break;
        default: out += fmt::format("\\x{:02x}", c);
      }
      ++i;
      continue;
    }
    size_t length = Utf8SequenceLength(text, i);
    if (length == 0) {
      out += fmt::format("\\x{:02x}", c);
      ++i;
      continue;
    }
    // C1 controls (U+0080..U+009F, encoded C2 80..C2 9F) act as escapes on some terminals.
    if (length == 2 && c == 0xC2 && static_cast<unsigned char>(text[i + 1]) < 0xA0) {
      out += fmt::format("\\u{:04x}", static_cast<unsigned char>(text[i + 1]));
      i += 2;
      continue;
    }
    out.append(text.substr(i, length));
    i += length;
  }
  return out;
}

std::string_view TruncateUtf8(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return text;
  size_t end = max_bytes;
  // Step back over continuation bytes to the start of the character that would be cut.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

std::string ElideMiddle(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  const size_t tail_bytes = max_bytes * 2 / 5;
  std::string_view head = TruncateUtf8(text, max_bytes - tail_bytes);
  size_t tail_start = text.size() - tail_bytes;
  while (tail_start < text.size() && (static_cast<unsigned char>(text[tail_start]) & 0xC0) == 0x80) ++tail_start;
  return fmt::format("{}... ({} bytes) ...{}", head, text.size(), text.substr(tail_start));
}

std::string DisplayPath(std::string_view path) {
  constexpr size_t kMax = 200;
  if (path.size() <= kMax) return EscapeForTerminal(path);
  return EscapeForTerminal(ElideMiddle(path, 180));
}

std::string DisplayText(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return EscapeForTerminal(text);
  return fmt::format("{}... ({} bytes)", EscapeForTerminal(TruncateUtf8(text, max_bytes)), text.size());
}

}  // namespace xlens
