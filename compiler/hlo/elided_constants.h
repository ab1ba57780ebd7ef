// Constants whose values the text does not hold: XLA prints a large constant as `{...}` unless
// asked not to (TensorFlow's dumps do this for weights). Such a module still parses, prints back,
// compiles and goes through the passes (which leave those constants alone); running it needs the
// values, so the commands that run modules refuse it, naming the constant, unless asked to fill
// the values in (zeros, or seeded random values).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

enum class ElidedConstantFill { kZeros, kRandom };
// "zeros" or "random"; nullopt otherwise.
std::optional<ElidedConstantFill> ParseElidedConstantFill(std::string_view text);

// A literal that is, or has a tuple element that is, elided.
bool HasElidedValues(const Literal& literal);

// Every constant of the module whose literal is (or holds) `{...}`, in print order.
std::vector<const HloInstruction*> ElidedConstants(const HloModule& module);

// OK when every constant has its values; otherwise one error naming the first elided constant,
// how many there are, and `how_to_fill` (the flag that fills them).
Status CheckConstantValuesPresent(const HloModule& module, std::string_view how_to_fill);

// Gives every elided constant values: zeros, or random values (as random inputs are made) from a
// generator seeded with `seed`, so the same module and seed always get the same values. Returns
// how many constants were filled.
StatusOr<int64_t> FillElidedConstants(HloModule& module, ElidedConstantFill fill, uint64_t seed);

// What the commands that run a module do with `--fill_elided_constants=FILL`: with FILL empty,
// CheckConstantValuesPresent (naming the flag); with "zeros" or "random", FillElidedConstants.
// Returns how many constants were filled.
StatusOr<int64_t> ResolveElidedConstants(HloModule& module, std::string_view fill, uint64_t seed);

}  // namespace xlens
