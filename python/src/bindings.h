// The pieces of the _xlens extension module, one Register function per area, each in its own
// file; module.cc calls them in order. Errors cross into Python only through ThrowIfError.
#pragma once

#include <nanobind/nanobind.h>

#include <stdexcept>
#include <string>
#include <utility>

#include "compiler/support/status.h"

namespace xlens::python {

// Raised as xlens.Error (a RuntimeError) with the command line's one-line message.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

inline void ThrowIfError(const Status& status) {
  if (!status.ok()) throw Error(status.message());
}
template <typename T>
T ValueOrThrow(StatusOr<T> result) {
  if (!result.ok()) throw Error(result.status().message());
  return std::move(result).value();
}

void RegisterErrors(nanobind::module_& m);
void RegisterVersion(nanobind::module_& m);
void RegisterSession(nanobind::module_& m);  // session.cc: graph sessions (xlens.Session, xlens.tf)
void RegisterJit(nanobind::module_& m);      // jit.cc: HLO compiled and run (xlens.jit)
void RegisterTools(nanobind::module_& m);    // tools.cc: dumps, traces, profiles, the viewer

}  // namespace xlens::python
