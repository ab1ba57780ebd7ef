// JAX has no erfc instruction to lower to: jax.lax.erfc, and with it the exact GELU
// (jax.nn.gelu(x, approximate=False) is x/2 erfc(-x/sqrt 2)) and jax.scipy.special.ndtr, reach
// HLO as StableHLO's CHLO legalization spells erfc of f32 out: Cephes' erfcf as about forty
// elementwise instructions (z T(z^2) below 1, e^(-z^2)/|z| times one of two polynomials in
// 1/z^2 above it, a select for the sign and one for the underflow). A vectorized loop computes
// every branch of it, two divides included, for each element.
//
// The expansion is written here once, as HLO (its structure and every constant bit for bit),
// and found by the expression matcher (expression_form.h) for both of its users: the CPU
// emitter, which computes erfc in one form instead (codegen's EmitFastErfcF32: one divide, one
// exp, one polynomial, within 6 ulp where the expansion is 65 ulp off near 8), and the oneDNN
// activation matcher, whose gelu_erf(jax) form is the GELU around it.
#pragma once

#include <string>
#include <string_view>

#include "compiler/hlo/instruction.h"

namespace xlens {

// The expansion as HLO text instructions on the f32[] value named `z`, its value named
// `result` (which may start with "ROOT "); its own instructions are named "erfc.*".
std::string ErfcExpansionF32Instructions(std::string_view z, std::string_view result);

// The argument z when `root` is the final select of the f32 erfc expansion of z (every
// instruction and constant as the legalization writes them, up to the operand order of
// commutative operations and the grouping of sums and products), else nullptr.
const HloInstruction* MatchErfcExpansionF32(const HloInstruction& root);

// The erf operand u when `h` is 1 + erf(u) or erf(u) + 1 (TensorFlow's exact GELU,
// 0.5 x (1 + erf(x / sqrt 2))), which is erfc(-u) (`*negated` set), or 1 - erf(u), which is
// erfc(u); f32, the 1 a constant or a broadcast of one. erfc is also the more accurate: 1 + erf(u)
// for u below -3 keeps only the few bits of erf(u) that differ from -1.
const HloInstruction* MatchOnePlusOrMinusErfF32(const HloInstruction& h, bool* negated);

}  // namespace xlens
