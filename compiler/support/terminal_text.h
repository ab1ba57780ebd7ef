// Text that came from a file (names in a trace, paths, flag values) reaches the terminal only
// through here: control characters and invalid UTF-8 are escaped, so a NUL cannot cut a line
// short and an escape sequence in a name cannot repaint the user's terminal.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace xlens {

// Escapes C0 controls and DEL (\n, \t, \r, \\x1b...), C1 controls (U+0080..U+009F) and bytes
// that are not valid UTF-8 (\xNN). Valid printable UTF-8 is kept as it is.
std::string EscapeForTerminal(std::string_view text);

// The longest prefix of `text` of at most `max_bytes` bytes that ends on a UTF-8 character
// boundary (a character is never cut in half).
std::string_view TruncateUtf8(std::string_view text, size_t max_bytes);

// Text for a message, not escaped: past `max_bytes` bytes, its start and end with
// "... (N bytes) ..." in between, cut on character boundaries. A 1 MB name in an error stays a
// readable line.
std::string ElideMiddle(std::string_view text, size_t max_bytes);

// A path for a message: escaped, and past 200 bytes shortened to its start and end with "..." in
// between (on character boundaries).
std::string DisplayPath(std::string_view path);

// A value for a message (a flag's value, a pattern, a word from a file): escaped, and past
// `max_bytes` cut on a character boundary and marked "... (N bytes)", so one bad value cannot
// turn a one-line message into megabytes.
std::string DisplayText(std::string_view text, size_t max_bytes = 100);

}  // namespace xlens
