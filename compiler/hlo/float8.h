// The 8-bit float formats XLA computes with (ml_dtypes defines them): their bit layouts, and
// conversion to and from wider floats with XLA's semantics, which are ml_dtypes': rounding to
// nearest even, straight from the wider value (no intermediate f16); a value beyond the largest
// finite one becomes inf where the format has one, NaN where it has none (no saturation).
//
//   f8e5m2, f8e4m3, f8e3m4  IEEE-like: inf and NaNs at the top exponent, signed zeros.
//   f8e4m3fn                no inf; S.1111.111 is NaN; largest 448.
//   f8e4m3fnuz, f8e5m2fnuz, f8e4m3b11fnuz
//                           no inf, no negative zero; 0x80 is the one NaN; bias one more than
//                           IEEE's (b11: bias 11).
#pragma once

#include <cstdint>

#include "compiler/hlo/primitive_type.h"

namespace xlens {

enum class Float8Kind : uint8_t { kIeee, kFiniteNan, kFiniteUnsignedZero };

struct Float8Format {
  int exponent_bits;
  int mantissa_bits;
  int bias;
  Float8Kind kind;
};

// The format of an 8-bit float type; nullptr for any other type (f8e8m0fnu is not computed with).
const Float8Format* Float8FormatOf(PrimitiveType type);
bool IsComputedFloat8Type(PrimitiveType type);

// `value` rounded to the format, as its bit pattern.
uint8_t Float8FromDouble(double value, const Float8Format& format);
// The exact value of a bit pattern (NaN keeps the pattern's sign where the format has one).
double Float8ToDouble(uint8_t bits, const Float8Format& format);
// The 256 values of the type as floats (every one is exact in f32), indexed by bit pattern.
const float* Float8ValueTable(PrimitiveType type);

template <PrimitiveType kType>
struct float8 {
  uint8_t bits = 0;

  float8() = default;
  explicit float8(float f) : bits(Float8FromDouble(f, *Float8FormatOf(kType))) {}
  explicit float8(double d) : bits(Float8FromDouble(d, *Float8FormatOf(kType))) {}
  explicit operator float() const { return Table()[bits]; }

  static float8 FromBits(uint8_t b) {
    float8 v;
    v.bits = b;
    return v;
  }

 private:
  static const float* Table() {
    static const float* const table = Float8ValueTable(kType);
    return table;
  }
};

}  // namespace xlens
