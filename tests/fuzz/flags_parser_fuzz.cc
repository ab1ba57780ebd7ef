// libFuzzer target for the XLA_FLAGS / TF_XLA_FLAGS parser. Any bytes, taken as a variable's
// value, as the contents of the flags file a variable names, or as command-line flags, must give
// parsed flags or one clean line: no crash, no sanitizer report, no hang, nothing raw from the
// input on the terminal. Flags that parse must also print as flags that parse back to the same
// options (DebugOptionsToFlags' contract, which bug bundles rely on).
//
// The first byte picks where the rest goes (its value modulo 4): 0 XLA_FLAGS, 1 a file named by
// XLA_FLAGS, 2 TF_XLA_FLAGS, 3 the command line (one flag per line).
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/flags.h"
#include "tests/scratch_directory.h"

namespace {

[[noreturn]] void Die(const char* what, const std::string& detail) {
  std::fprintf(stderr, "%s: %s\n", what, xlens::DisplayText(detail, 2000).c_str());
  std::abort();
}

// This process's flags file, rewritten for every input, in a private folder that goes when the
// process ends (a name under /tmp would be left behind by every run).
const std::string& FlagsFile() {
  static const std::string path = xlens::testing::ScratchDirectory("flags-fuzz") + "/flags.txt";
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // A value that does not start with "-" names a file; the fuzzer may name any file on the
  // machine, so a large one is refused rather than read.
  xlens::SetMaxInputBytes(int64_t{1} << 20);
  // Made before libFuzzer sets its signal handlers, so that its own removal on SIGINT and SIGTERM
  // is the one kept.
  FlagsFile();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int mode = data[0] % 4;
  std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  // An environment string ends at its first NUL; a file and argv words may hold anything else.
  std::string_view as_env = text.substr(0, text.find('\0'));

  xlens::FlagEnvironment environment;
  std::vector<std::string> command_line;
  switch (mode) {
    case 0: environment.xla_flags = std::string(as_env); break;
    case 1: {
      std::ofstream(FlagsFile(), std::ios::binary | std::ios::trunc) << text;
      environment.xla_flags = FlagsFile();
      break;
    }
    case 2: environment.tf_xla_flags = std::string(as_env); break;
    default: {
      size_t start = 0;
      while (start <= text.size()) {
        size_t end = std::min(text.find('\n', start), text.size());
        command_line.emplace_back(text.substr(start, end - start));
        start = end + 1;
      }
    }
  }

  auto options = xlens::ParseDebugOptions(environment, command_line);
  if (!options.ok()) {
    const std::string message = options.status().message();
    if (message.empty()) Die("an empty error", message);
    if (xlens::EscapeForTerminal(message) != message) Die("raw bytes in the message", message);
    if (message.size() > 2000) Die("message longer than 2000 bytes", message);
    // Only the check across all the flags (disable and enable-only together) has no one line.
    const bool located = message.rfind(FlagsFile(), 0) == 0 ||
                         message.rfind("XLA_FLAGS=" + FlagsFile(), 0) == 0 ||
                         message.rfind("--xla_disable_hlo_passes and", 0) == 0;
    if (mode == 1 && !located) {
      Die("an error in a flags file does not start with its name", message);
    }
    return 0;
  }

  // What parsed prints as flags that parse back to the same options.
  xlens::FlagStrings flags = xlens::DebugOptionsToFlags(*options);
  xlens::FlagEnvironment printed{flags.xla_flags, flags.tf_xla_flags,
                                 options->tf_dump_graph_prefix};
  auto reparsed = xlens::ParseDebugOptions(printed);
  if (!reparsed.ok()) Die("printed flags do not parse", reparsed.status().message());
  if (!(*reparsed == *options)) Die("parse(print(x)) != x", flags.xla_flags + " " + flags.tf_xla_flags);
  return 0;
}
