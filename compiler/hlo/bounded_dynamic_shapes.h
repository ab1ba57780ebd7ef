// Bounded dynamic shapes (`f32[<=N]`): XLA lets a dimension carry a size known only at run time,
// up to a bound, and passes that size beside the buffer. xlens has no run-time sizes. It runs
// such a module at its bounds: the program every one of those sizes being the bound would run,
// which is exact for inputs of the full size (what a tool replaying a dump feeds it). What that
// cannot express is refused by name: unbounded dimensions (`?`), and the instructions that make a
// size smaller than its bound at run time (SliceToDynamic, a set-dimension-size to less than the
// full size, ...). A set-dimension-size to the full size (TensorFlow's bridge writes one after
// top_k's static slice) is its operand, and a get-dimension-size is the bound.
#pragma once

#include <cstdint>

#include "compiler/hlo/module.h"
#include "compiler/support/status.h"

namespace xlens {

// Whether any instruction or the entry layout of `module` has a dynamic dimension.
bool HasDynamicShapes(const HloModule& module);

// Makes every bounded dynamic dimension static at its bound, everywhere in the module (every
// instruction's shape and the header's entry layout), folding the size ops as said above. Fails,
// changing nothing, on an unbounded dimension or an instruction that sets a size at run time,
// naming it. Returns how many instructions it changed.
StatusOr<int64_t> RunBoundedDynamicShapesAtTheirBounds(HloModule& module);

}  // namespace xlens
