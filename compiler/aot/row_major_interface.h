// The ahead-of-time entry function takes and returns dense row-major arrays (what a C++ program
// and tfcompile's header pass). A module whose entry parameters or results have other layouts
// (HLO dumped by XLA after layout assignment) is given a row-major interface: each such
// parameter becomes row-major with a copy into its old layout for its users, and each such
// result is copied into row-major, so that the kernels do the transposition the JIT's runtime
// does when it copies arguments in and results out.
#pragma once

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens::aot {

// Returns whether anything changed. Tuple parameters, and results nested deeper than one tuple,
// keep their layouts (the compiler then refuses them by name).
StatusOr<bool> MakeInterfaceRowMajor(HloModule& module);

}  // namespace xlens::aot
