// NumPy .npy files as Literals: the tensors `xlens run`, `eval` and `replay` read and write.
//
// Reads format versions 1.0, 2.0 and 3.0 in C order with little-endian or byte-order-free
// element types: |b1 (pred), i1..i8 (s8..s64), u1..u8 (u8..u64), f2/f4/f8 (f16/f32/f64) and
// c8/c16 (c64/c128). Everything else (big-endian data, Fortran order, object and structured
// dtypes, a header that disagrees with the data) is refused with one message that names the
// file and what was expected. '<V2' is refused: ml_dtypes saves bfloat16 that way, but so does
// any other two-byte extension type, so its elements cannot be read unambiguously.
//
// Writes what numpy.save writes for the same array, byte for byte: a version 1.0 header (2.0
// only when the header does not fit 1.0), padded with spaces so the data starts 64-byte aligned.
//
// Types .npy has no dtype for are written widened, exactly, to the nearest one it has, so that
// plain numpy.load reads the values without ml_dtypes: bf16 as float32 ('<f4'; every bf16 is a
// float32, array.astype(ml_dtypes.bfloat16) gives the bf16 array back), s1/s2/s4 as int8 ('|i1')
// and u1/u2/u4 as uint8 ('|u1'), the 8-bit floats (f8e5m2, f8e4m3fn, ...) as float32 like bf16.
// NpyStoredType says which; the command line notes it on stderr. f4e2m1fn and f8e8m0fnu hold no
// data in xlens (their literals are text only) and are refused.
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

// The type a literal of `type` is stored as in .npy: `type` itself when .npy has a dtype for it,
// the type it is widened to otherwise (bf16 -> f32, s4 -> s8, u4 -> u8, ...), or
// PRIMITIVE_TYPE_INVALID when it cannot be stored.
PrimitiveType NpyStoredType(PrimitiveType type);

// The bytes of the .npy file holding `literal` (its data in row-major order; the layout is not
// stored), widened as NpyStoredType says. Tuples, tokens, elided literals and literals without
// data (the f8/f4 types) are refused.
StatusOr<std::string> SerializeNpy(const Literal& literal);

// Writes `literal` to `path` atomically (a temporary file renamed over the target).
Status WriteNpy(const std::string& path, const Literal& literal);

}  // namespace xlens
