// JAX has no erfc instruction to lower to: jax.lax.erfc, and with it the exact GELU
// (jax.nn.gelu(x, approximate=False) is x/2 erfc(-x/sqrt 2)) and jax.scipy.special.ndtr, reach
// HLO as StableHLO's CHLO legalization spells erfc of f32 out: Cephes' erfcf as about forty
// elementwise instructions (x T(x^2) below 1, e^(-x^2)/|x| times one of two polynomials in
// 1/x^2 above it, a select for the sign and one for the underflow). A vectorized loop computes
// every branch of it, two divides included, for each element.
//
// The CPU emitter recognizes that expansion by its structure and its constants and computes
// erfc in one form instead (EmitFastErfcF32: one divide, one exp, one polynomial), which is
// also the more accurate: within 6 ulp of erfc over the line where the expansion is 65 ulp off
// near 8 (the rounding of x^2 in its e^(-x^2)).
#pragma once

#include "compiler/hlo/instruction.h"

namespace xlens::codegen {

// The argument z when `root` is the final select of the f32 erfc expansion of z (every
// instruction and constant as the legalization writes them, up to the order of a product's or
// a sum's operands), else nullptr.
const HloInstruction* MatchErfcExpansionF32(const HloInstruction& root);

// The erf operand u when `h` is 1 + erf(u) or erf(u) + 1 (TensorFlow's exact GELU,
// 0.5 x (1 + erf(x / sqrt 2))), which is erfc(-u) (`*negated` set), or 1 - erf(u), which is
// erfc(u); f32, the 1 a constant or a broadcast of one. erfc is also the more accurate: 1 + erf(u)
// for u below -3 keeps only the few bits of erf(u) that differ from -1.
const HloInstruction* MatchOnePlusOrMinusErfF32(const HloInstruction& h, bool* negated);

}  // namespace xlens::codegen
