// NumPy .npy files as Literals: the tensors `xlens run`, `eval` and `replay` read and write.
//
// Reads format versions 1.0, 2.0 and 3.0 in C order with little-endian or byte-order-free
// element types: |b1 (pred), i1..i8 (s8..s64), u1..u8 (u8..u64), f2/f4/f8 (f16/f32/f64) and
// c8/c16 (c64/c128). Everything else (big-endian data, Fortran order, object and structured
// dtypes, a header that disagrees with the data) is refused with one message that names the
// file and what was expected. bfloat16 is refused both ways: .npy has no code for it, and
// ml_dtypes saves it as the opaque '<V2', which any other two-byte type could write too.
//
// Writes what numpy.save writes for the same array, byte for byte: a version 1.0 header (2.0
// only when the header does not fit 1.0), padded with spaces so the data starts 64-byte aligned.
#pragma once

#include <string>
#include <string_view>

#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens {

// Reads the .npy file at `path`.
StatusOr<Literal> ReadNpy(const std::string& path);

// Parses the bytes of a .npy file; `name_for_errors` (a path, usually) starts every message.
StatusOr<Literal> ParseNpy(std::string_view bytes, const std::string& name_for_errors);

// The bytes of the .npy file holding `literal` (its data in row-major order; the layout is not
// stored). Tuples, tokens, elided literals and element types without a .npy code are refused.
StatusOr<std::string> SerializeNpy(const Literal& literal);

// Writes `literal` to `path` atomically (a temporary file renamed over the target).
Status WriteNpy(const std::string& path, const Literal& literal);

}  // namespace xlens
