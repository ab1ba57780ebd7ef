// The pass interface. A pass rewrites a module and says whether it changed it. Passes never print,
// time, dump or verify themselves: the pipeline does that through its instrumentation, so that the
// same names and the same measurements appear in dumps, in the trace and in the viewer.
#pragma once

#include <string_view>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

class HloPass {
 public:
  virtual ~HloPass() = default;
  // The kebab-case name used in dump file names, in --xla_disable_hlo_passes and in the viewer.
  virtual std::string_view name() const = 0;
  // Rewrites `module`; true when anything changed. An error leaves the module in an unspecified
  // (but destructible) state.
  virtual StatusOr<bool> Run(HloModule& module) = 0;
};

}  // namespace xlens
