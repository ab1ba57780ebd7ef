// cse: merges instructions of a computation that compute the same value: same opcode, shape,
// operands, attributes and called computations (HloInstruction::Identical), constants with the
// same literal included. Users of the later one use the first one (whose name and metadata
// survive) and the later one is removed. Visiting in post order makes users of merged operands
// identical in turn, so one sweep reaches the fixed point; hashing keeps it linear.
// It never merges parameters, instructions with side effects (two rngs are two draws) or with
// control dependencies, nor constants whose value is unknown (elided `{...}`) or held as text.
// Reports a change when it merged anything.
#pragma once

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class HloCse : public HloPass {
 public:
  std::string_view name() const override { return "cse"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
