// What the XLA flags ask of a compilation, shared by the command line and the Python package so
// that XLA_FLAGS means the same in a terminal and in a script.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/passes/hlo_optimizer.h"
#include "compiler/support/status.h"
#include "dump/dump_context.h"
#include "dump/flags.h"

namespace xlens::tools {

// What the XLA flags (XLA_FLAGS, then the command line's --xla_* arguments) ask of a
// compilation: the pass filter, reduce-precision, LLVM's optimization level and the dump context
// (optimize.dump points at `dump` when dumping, so a FlagsSetup stays where it was made).
struct FlagsSetup {
  DebugOptions debug;
  OptimizeOptions optimize;
  int opt_level = 3;
  std::optional<DumpContext> dump;
};
// Fills `setup`; an argument that is no XLA flag, an unknown pass name or a bad value is an error
// naming it ("COMMAND: unknown argument ...").
Status SetUpFromFlags(const std::vector<std::string>& extra_flags, std::string_view command,
                      FlagsSetup& setup);

}  // namespace xlens::tools
