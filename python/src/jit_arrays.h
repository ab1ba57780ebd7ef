// Arrays between NumPy and the runtime, for compiled HLO called from Python: an argument is
// checked against its parameter as `xlens run` checks an .npy file (the same one-line message)
// and handed over where NumPy keeps it; a result leaf becomes a NumPy array that owns the
// literal's storage. Types NumPy lacks (bf16, the f8 types, s4/u4) travel as ml_dtypes arrays.
#pragma once

#include <nanobind/nanobind.h>

#include <cstddef>

#include "compiler/hlo/instruction.h"
#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens::python {

// An argument's row-major data of its parameter's shape. `keep` holds what the data lives in
// for the length of the call: the caller's array, or a C-contiguous copy of an array that was
// not.
struct ArgumentArray {
  const void* data = nullptr;
  nanobind::object keep;
};

// Argument `index` (anything NumPy's buffer or DLPack protocols give as a host array) checked
// against `parameter`: its dtype and shape, or the message `xlens run` gives for an .npy file
// that does not fit, the file named "argument INDEX".
StatusOr<ArgumentArray> ArgumentFor(nanobind::handle value, size_t index,
                                    const HloInstruction& parameter);

// "argument INDEX: missing: parameter INDEX (%NAME: SHAPE) needs it": `xlens run`'s message for
// a missing .npy file, for an argument not given.
std::string MissingArgumentMessage(size_t index, const HloInstruction& parameter);

// A copy of an argument as a literal of `shape` (the GPU's arguments, snapshots).
Literal LiteralFromArgument(const ArgumentArray& argument, const Shape& shape);

// A result array as a NumPy array owning the literal's storage (moved, not copied); an ml_dtypes
// array for types NumPy lacks.
nanobind::object ArrayFromLiteral(Literal&& literal);

}  // namespace xlens::python
