// Checks a module: every instruction's shape against shape inference, operand counts, attribute
// ranges, called-computation signatures, parameter numbering, acyclicity, unique names, one entry.
// Errors name the computation, the instruction, its operands and what is wrong.
#pragma once

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

struct VerifierOptions {
  // Also require every array shape to carry a layout (after layout assignment).
  bool layout_sensitive = false;
};

Status VerifyModule(const HloModule& module, const VerifierOptions& options = {});

}  // namespace xlens
