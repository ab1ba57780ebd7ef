// Shape inference for every fully supported opcode: the shape an instruction must have, given its
// operands' shapes, its attributes and its called computations. The parser uses it for
// instructions written without a result shape; the verifier compares it with the declared shape.
#pragma once

#include "compiler/hlo/instruction.h"
#include "compiler/support/status.h"

namespace xlens {

// The inferred result shape of `instruction` (operands, attributes and called computations must
// be set). Layouts are not inferred: the returned shape has none. Errors name what is wrong
// ("dimensions={3} is out of range for operand %p of rank 2"), not the instruction itself; the
// caller adds that context.
StatusOr<Shape> InferShape(const HloInstruction& instruction);

}  // namespace xlens
