// Deterministic pseudo-random literals for a shape: random inputs of `xlens eval`, the demo and the
// differential tests. Values are small (floats in [-1, 1), integers in [-8, 8) or [0, 16)) so that
// sums and products stay exact enough to compare.
#pragma once

#include <cstdint>
#include <random>

#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

StatusOr<Literal> MakeRandomLiteral(const Shape& shape, std::mt19937_64& rng);

}  // namespace xlens
