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
  // After each instruction whose metadata says where it came from, a `// FILE:LINE:COL
  // (FUNCTION)` comment with the frames above it (stack_frames.h): the module read with its
  // source, still text that XLA's parser and ours read.
  bool source_comments = false;
};

std::string PrintModule(const HloModule& module, const PrintOptions& options = {});

// The typed attributes of `instruction` alone, as the printer writes them ("dimensions={0},
// slice={[0:2]}"): no called computations, raw attributes, metadata or names. What
// canonical_text.h builds its name-free form from.
std::string TypedAttributesToString(const HloInstruction& instruction);

}  // namespace xlens
