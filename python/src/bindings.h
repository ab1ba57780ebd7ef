// The pieces of the _xlens extension module, one Register function per area, each in its own
// file; module.cc calls them in order. A failed Status crosses into Python only through
// ThrowIfError and ValueOrThrow; a message the bindings word themselves is thrown as Error.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "compiler/support/status.h"
#include "compiler/support/terminal_text.h"

namespace xlens::python {

// Raised as xlens.Error (a RuntimeError) with the command line's message for the same mistake.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A message's lines as the command line prints them. The HLO commands keep them (a parse error
// shows its source line and a caret under it); the graph commands (`xlens graph`, `xlens
// cluster`) escape the whole message into one line, since a node's name may hold a newline or
// an escape sequence, which must not reach a traceback raw.
enum class Lines { kKept, kEscaped };

inline void ThrowIfError(const Status& status, Lines lines = Lines::kKept) {
  if (status.ok()) return;
  throw Error(lines == Lines::kEscaped ? EscapeForTerminal(status.message()) : status.message());
}
template <typename T>
T ValueOrThrow(StatusOr<T> result, Lines lines = Lines::kKept) {
  ThrowIfError(result.status(), lines);
  return std::move(result).value();
}

void RegisterErrors(nanobind::module_& m);
void RegisterVersion(nanobind::module_& m);
void RegisterSession(nanobind::module_& m);  // session.cc: graph sessions (xlens.Session, xlens.tf)
void RegisterJit(nanobind::module_& m);      // jit.cc: HLO compiled and run (xlens.jit)
void RegisterTools(nanobind::module_& m);    // tools.cc: dumps, traces, profiles, the viewer

}  // namespace xlens::python
