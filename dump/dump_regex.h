// The patterns of --xla_dump_hlo_pass_re and --xla_dump_hlo_module_re, matched as XLA matches
// them: RE2 syntax, RE2::PartialMatch against a pass or module name.
//
// RE2 rather than std::regex because both the pattern and the names it meets come from users
// and from files: RE2 matches in time linear in the name and never recurses per character or
// per group, so 20,000 nested groups, a 50,000-character module name or '(.*)*x' cost
// milliseconds, where std::regex overflows the stack or backtracks forever. Its memory is capped
// (a pattern that would need more is refused when it is compiled) and it never logs: a bad
// pattern comes back as an error value with RE2's reason, for the caller to word.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "compiler/support/status.h"

namespace re2 {
class RE2;
}  // namespace re2

namespace xlens {

class DumpRegex {
 public:
  // The memory RE2 may use for one pattern (its compiled program and DFA caches). RE2's default,
  // which XLA runs with; a name pattern needs a small fraction of it.
  static constexpr int64_t kMaxMemoryBytes = int64_t{8} << 20;

  // Compiles `pattern`. The error is RE2's reason ("missing )", "pattern too large - compile
  // failed"), escaped and short enough for one line.
  static StatusOr<DumpRegex> Compile(std::string_view pattern);

  // Whether the pattern matches somewhere in `name` (RE2::PartialMatch).
  bool PartialMatch(std::string_view name) const;

 private:
  explicit DumpRegex(std::shared_ptr<const re2::RE2> re2) : re2_(std::move(re2)) {}
  std::shared_ptr<const re2::RE2> re2_;  // shared: copies match with one compiled program
};

}  // namespace xlens
