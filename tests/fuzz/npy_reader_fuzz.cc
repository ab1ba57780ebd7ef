// libFuzzer target for the .npy reader. Any bytes must give a literal or one clean line: no crash,
// no sanitizer report, no hang, no allocation larger than the input justifies. A literal that
// parses must also serialize and parse back to the same literal (the write/read contract), so the
// writer is fuzzed through the reader's output.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "compiler/hlo/npy.h"
#include "compiler/support/terminal_text.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, xlens::EscapeForTerminal(detail).c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto literal = xlens::ParseNpy(bytes, "fuzz.npy");
  if (!literal.ok()) {
    // A refusal is one line that names the file, with whatever the header said escaped.
    const std::string message = literal.status().message();
    if (message.rfind("fuzz.npy: ", 0) != 0) Die("message does not name the file", message);
    if (xlens::EscapeForTerminal(message) != message) Die("raw bytes in the message", message);
    if (message.size() > 1000) Die("message longer than 1000 bytes", message.substr(0, 200));
    return 0;
  }
  // The data the literal holds came from the file.
  if (literal->size_bytes() > size) Die("literal larger than the file", std::to_string(size));
  auto written = xlens::SerializeNpy(*literal);
  if (!written.ok()) Die("a literal read from .npy cannot be written", written.status().message());
  auto reread = xlens::ParseNpy(*written, "written.npy");
  if (!reread.ok()) Die("written .npy does not parse", reread.status().message());
  if (!(*reread == *literal)) Die("read(write(x)) != x", std::string(bytes.substr(0, 128)));
  return 0;
}
