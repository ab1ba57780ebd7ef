// The per-HLO profile (--xla_hlo_profile) of an executable's runs on this machine, from the times
// its thunks took: one row per thunk, with the costs the runtime found for it, held to this
// machine's limits. `xlens run` prints it for its one executable and, with --num_replicas or
// --num_partitions, for each device's.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "compiler/runtime/executable.h"

namespace xlens::cli {

// The table for `runs` runs of `exe` named `module` whose thunk times were summed into
// `thunk_ns` (one per thunk, in order).
std::string ThunkProfileText(const runtime::Executable& exe, const std::string& module,
                             const std::vector<int64_t>& thunk_ns, int64_t runs);

}  // namespace xlens::cli
