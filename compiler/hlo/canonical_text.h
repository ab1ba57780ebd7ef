// A name-free text of what an instruction computes: its opcode, shape with layout, operand
// shapes, attributes (typed and raw, backend_config included), constants' values bit for bit,
// and the computations it calls written out in the same form, each instruction named by its
// place (parameters by number, the rest in post order from the root, then any the root does not
// reach). Names, ids and metadata
// leave no trace, so two fusions that differ only in what they are called have the same text,
// and two that differ in a constant, a layout or the order of an operation's operands do not.
// The CPU compiler keys its reuse of one kernel for identical instructions by it.
#pragma once

#include <optional>
#include <string>

#include "compiler/hlo/instruction.h"

namespace xlens {

// The canonical text of `instruction` (its operands by shape only), or nullopt where it holds
// something whose value the text cannot pin down: a constant elided in the text (`{...}`) or
// a tuple-shaped constant.
std::optional<std::string> CanonicalInstructionText(const HloInstruction& instruction);

}  // namespace xlens
