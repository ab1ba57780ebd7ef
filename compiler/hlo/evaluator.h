// The reference evaluator: executes a verified module on the host, one instruction at a time.
// It is the oracle every compiled result is checked against, so it favours exactness and clarity
// over speed (but an elementwise op over 16M elements runs in well under a second).
#pragma once

#include <span>

#include "compiler/hlo/literal.h"
#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

// Runs the entry computation on `arguments` (one literal per parameter, shapes must match).
// Unsupported opcodes (all-reduce, rng-bit-generator, fft, ...) and element types (F8, S4, ...)
// give an error that names them.
StatusOr<Literal> EvaluateModule(const HloModule& module, std::span<const Literal> arguments);

// Runs one computation (used for called computations and in tests).
StatusOr<Literal> EvaluateComputation(const HloComputation& computation,
                                      std::span<const Literal> arguments);

// Runs one instruction on the values of its operands (one literal per operand, in order), as the
// evaluator would inside a computation; its called computations run as usual. Parameters have no
// value of their own and give an error, as do the opcodes and types EvaluateModule refuses.
StatusOr<Literal> EvaluateInstruction(const HloInstruction& instruction,
                                      std::span<const Literal* const> operands);

}  // namespace xlens
