// constant-folding: replaces an instruction whose operands are all constants by the constant the
// reference evaluator computes for it, so chains of constant arithmetic fold in one sweep.
// It leaves alone: parameters and constants themselves, instructions with side effects (rng,
// custom-calls with side effects, collectives, ...) or control dependencies, custom-calls,
// broadcasts and iotas (their results are larger than what they are made from, and cheap to
// compute; XLA does not fold broadcasts either), control flow (while, conditional, call: a loop
// with constant inputs may run for a long time), tuple-shaped results, results of more than
// kMaxFoldedElements elements, fusion computations, and anything the evaluator refuses (an
// unsupported opcode or type is a reason to skip, not an error). The folded constant takes the
// metadata of the instruction it replaces. Reports a change when it folded anything.
#pragma once

#include <cstdint>

#include "compiler/passes/hlo_pass.h"

namespace xlens {

class HloConstantFolding : public HloPass {
 public:
  // Larger results stay as computations: a folded constant lives in the module (and in every
  // dump of it) for good.
  static constexpr int64_t kMaxFoldedElements = int64_t{1} << 20;

  std::string_view name() const override { return "constant-folding"; }
  StatusOr<bool> Run(HloModule& module) override;
};

}  // namespace xlens
