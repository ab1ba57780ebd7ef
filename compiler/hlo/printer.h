// Prints HLO as XLA's text format. The long form (the default) has % names, operand shapes,
// computation signatures, metadata and backend_config; the short form is XLA's "short parsable"
// one: bare names, untyped operands, no signatures, no metadata (backend_config stays: it can
// change what the compiler emits).
// HloModule::ToString, HloComputation::ToString and HloInstruction::ToString are defined here.
#pragma once

#include <string>

#include "compiler/hlo/module.h"

namespace xlens {

struct PrintOptions {
  bool short_form = false;
};

std::string PrintModule(const HloModule& module, const PrintOptions& options = {});

}  // namespace xlens
