#include "dump/dump_regex.h"

#include <fmt/format.h>
#include <re2/re2.h>

#include "compiler/support/terminal_text.h"

namespace xlens {

StatusOr<DumpRegex> DumpRegex::Compile(std::string_view pattern) {
  RE2::Options options;
  options.set_max_mem(kMaxMemoryBytes);
  // RE2 would otherwise print its own line to stderr before ours.
  options.set_log_errors(false);
  auto re2 = std::make_shared<const RE2>(re2::StringPiece(pattern.data(), pattern.size()), options);
  if (re2->ok()) return DumpRegex(std::move(re2));
  // RE2 says "REASON: ARG", where ARG is the offending part of the pattern (for an unclosed
  // group, all of it): the caller shows the pattern already, so ARG is kept only when it says
  // more, and shortened.
  std::string reason = re2->error();
  const std::string& arg = re2->error_arg();
  if (!arg.empty() && reason.size() > arg.size() + 2 && reason.ends_with(": " + arg)) {
    reason.resize(reason.size() - arg.size() - 2);
    if (arg.size() < pattern.size()) reason += ": " + DisplayText(arg, 40);
  }
  return Error(EscapeForTerminal(reason));
}

bool DumpRegex::PartialMatch(std::string_view name) const {
  return RE2::PartialMatch(re2::StringPiece(name.data(), name.size()), *re2_);
}

}  // namespace xlens
