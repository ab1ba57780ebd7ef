// Element types, named as XLA's HLO text names them (pred, s32, bf16, f8e4m3fn, c64, token, ...).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace xlens {

#define XLENS_PRIMITIVE_TYPES(V)                         \
  V(PRED, "pred", 8) V(S1, "s1", 1) V(S2, "s2", 2)       \
  V(S4, "s4", 4) V(S8, "s8", 8) V(S16, "s16", 16)        \
  V(S32, "s32", 32) V(S64, "s64", 64) V(U1, "u1", 1)     \
  V(U2, "u2", 2) V(U4, "u4", 4) V(U8, "u8", 8)           \
  V(U16, "u16", 16) V(U32, "u32", 32) V(U64, "u64", 64)  \
  V(F16, "f16", 16) V(BF16, "bf16", 16) V(F32, "f32", 32) \
  V(F64, "f64", 64) V(F4E2M1FN, "f4e2m1fn", 4)           \
  V(F8E3M4, "f8e3m4", 8) V(F8E4M3, "f8e4m3", 8)          \
  V(F8E4M3FN, "f8e4m3fn", 8) V(F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8) \
  V(F8E4M3FNUZ, "f8e4m3fnuz", 8) V(F8E5M2, "f8e5m2", 8)  \
  V(F8E5M2FNUZ, "f8e5m2fnuz", 8) V(F8E8M0FNU, "f8e8m0fnu", 8) \
  V(C64, "c64", 64) V(C128, "c128", 128) V(TUPLE, "tuple", 0) \
  V(OPAQUE_TYPE, "opaque", 0) V(TOKEN, "token", 0)

enum class PrimitiveType : uint8_t {
  PRIMITIVE_TYPE_INVALID,
#define XLENS_DECLARE_ENUM(e, name, bits) e,
  XLENS_PRIMITIVE_TYPES(XLENS_DECLARE_ENUM)
#undef XLENS_DECLARE_ENUM
};

// The lower-case name used in HLO text ("f32").
std::string_view PrimitiveTypeName(PrimitiveType type);
// Inverse of PrimitiveTypeName; nullopt for an unknown name. "tuple" is not a text type name.
std::optional<PrimitiveType> ParsePrimitiveType(std::string_view name);

int BitWidth(PrimitiveType type);
// Bytes one element occupies in a Literal: sub-byte integer types take a whole byte.
int ByteWidth(PrimitiveType type);

bool IsArrayType(PrimitiveType type);  // not TUPLE, TOKEN, OPAQUE_TYPE, INVALID
bool IsIntegralType(PrimitiveType type);  // signed or unsigned, not PRED
bool IsSignedIntegralType(PrimitiveType type);
bool IsUnsignedIntegralType(PrimitiveType type);
bool IsFloatingPointType(PrimitiveType type);  // F16, BF16, F32, F64 and the F8/F4 types
bool IsF8OrSmallerFloat(PrimitiveType type);
bool IsComplexType(PrimitiveType type);

// The component type of a complex type (C64 -> F32, C128 -> F64).
PrimitiveType ComplexComponentType(PrimitiveType type);

// Types the reference evaluator (and later the compiler) computes with.
bool IsEvaluatorSupportedType(PrimitiveType type);

}  // namespace xlens
