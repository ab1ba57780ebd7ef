// C++ types that hold one element of each evaluator-supported PrimitiveType, and the mapping
// between them. half is the compiler's _Float16; bfloat16 is a 16-bit wrapper that computes in
// float and rounds to nearest even when stored.
#pragma once

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>

#include "compiler/hlo/primitive_type.h"

namespace xlens {

using half = _Float16;
using complex64 = std::complex<float>;
using complex128 = std::complex<double>;

struct bfloat16 {
  uint16_t bits = 0;

  bfloat16() = default;
  explicit bfloat16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const { return std::bit_cast<float>(uint32_t{bits} << 16); }

  static uint16_t FromFloat(float f) {
    uint32_t u = std::bit_cast<uint32_t>(f);
    if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
    uint32_t rounding_bias = 0x7fff + ((u >> 16) & 1);
    return static_cast<uint16_t>((u + rounding_bias) >> 16);
  }
  static bfloat16 FromBits(uint16_t b) {
    bfloat16 v;
    v.bits = b;
    return v;
  }
};

template <PrimitiveType kType>
struct NativeTypeOf;
#define XLENS_NATIVE(P, T)  \
  template <>               \
  struct NativeTypeOf<PrimitiveType::P> { using type = T; };
XLENS_NATIVE(PRED, bool)
XLENS_NATIVE(S8, int8_t)
XLENS_NATIVE(S16, int16_t)
XLENS_NATIVE(S32, int32_t)
XLENS_NATIVE(S64, int64_t)
XLENS_NATIVE(U8, uint8_t)
XLENS_NATIVE(U16, uint16_t)
XLENS_NATIVE(U32, uint32_t)
XLENS_NATIVE(U64, uint64_t)
XLENS_NATIVE(F16, half)
XLENS_NATIVE(BF16, bfloat16)
XLENS_NATIVE(F32, float)
XLENS_NATIVE(F64, double)
XLENS_NATIVE(C64, complex64)
XLENS_NATIVE(C128, complex128)
#undef XLENS_NATIVE

template <PrimitiveType kType>
using NativeType = typename NativeTypeOf<kType>::type;

// Calls fn.template operator()<kType>() for the (evaluator-supported) runtime type `type`.
// Returns false for an unsupported type, without calling fn.
template <typename Fn>
bool DispatchSupportedType(PrimitiveType type, Fn&& fn) {
  switch (type) {
#define XLENS_DISPATCH(P)                   \
  case PrimitiveType::P:                    \
    fn.template operator()<PrimitiveType::P>(); \
    return true;
    XLENS_DISPATCH(PRED) XLENS_DISPATCH(S8) XLENS_DISPATCH(S16) XLENS_DISPATCH(S32)
    XLENS_DISPATCH(S64) XLENS_DISPATCH(U8) XLENS_DISPATCH(U16) XLENS_DISPATCH(U32)
    XLENS_DISPATCH(U64) XLENS_DISPATCH(F16) XLENS_DISPATCH(BF16) XLENS_DISPATCH(F32)
    XLENS_DISPATCH(F64) XLENS_DISPATCH(C64) XLENS_DISPATCH(C128)
#undef XLENS_DISPATCH
    default:
      return false;
  }
}

}  // namespace xlens
