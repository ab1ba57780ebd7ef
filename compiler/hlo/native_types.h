// C++ types that hold one element of each evaluator-supported PrimitiveType, and the mapping
// between them. half is the compiler's _Float16; bfloat16 is a 16-bit wrapper that computes in
// float and rounds to nearest even when stored; the 8-bit floats (float8.h) do the same.
#pragma once

#include <bit>
#include <cmath>
#include <complex>
#include <cstdint>
#include <cstring>

#include "compiler/hlo/float8.h"
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

using float8_e5m2 = float8<PrimitiveType::F8E5M2>;
using float8_e4m3 = float8<PrimitiveType::F8E4M3>;
using float8_e3m4 = float8<PrimitiveType::F8E3M4>;
using float8_e4m3fn = float8<PrimitiveType::F8E4M3FN>;
using float8_e4m3fnuz = float8<PrimitiveType::F8E4M3FNUZ>;
using float8_e5m2fnuz = float8<PrimitiveType::F8E5M2FNUZ>;
using float8_e4m3b11fnuz = float8<PrimitiveType::F8E4M3B11FNUZ>;

// Floats held in a wrapper struct (no arithmetic of their own): converted to float to compute.
template <typename T>
inline constexpr bool kIsWrappedFloat = false;
template <>
inline constexpr bool kIsWrappedFloat<bfloat16> = true;
template <PrimitiveType P>
inline constexpr bool kIsWrappedFloat<float8<P>> = true;

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
XLENS_NATIVE(F8E5M2, float8_e5m2)
XLENS_NATIVE(F8E4M3, float8_e4m3)
XLENS_NATIVE(F8E3M4, float8_e3m4)
XLENS_NATIVE(F8E4M3FN, float8_e4m3fn)
XLENS_NATIVE(F8E4M3FNUZ, float8_e4m3fnuz)
XLENS_NATIVE(F8E5M2FNUZ, float8_e5m2fnuz)
XLENS_NATIVE(F8E4M3B11FNUZ, float8_e4m3b11fnuz)
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
    XLENS_DISPATCH(F64) XLENS_DISPATCH(C64) XLENS_DISPATCH(C128) XLENS_DISPATCH(F8E5M2)
    XLENS_DISPATCH(F8E4M3) XLENS_DISPATCH(F8E3M4) XLENS_DISPATCH(F8E4M3FN)
    XLENS_DISPATCH(F8E4M3FNUZ) XLENS_DISPATCH(F8E5M2FNUZ) XLENS_DISPATCH(F8E4M3B11FNUZ)
#undef XLENS_DISPATCH
    default:
      return false;
  }
}

}  // namespace xlens
