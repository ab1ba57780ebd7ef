#include "compiler/hlo/float8.h"

#include <array>
#include <cmath>
#include <limits>

namespace xlens {

namespace {

constexpr Float8Format kE5M2{5, 2, 15, Float8Kind::kIeee};
constexpr Float8Format kE4M3{4, 3, 7, Float8Kind::kIeee};
constexpr Float8Format kE3M4{3, 4, 3, Float8Kind::kIeee};
constexpr Float8Format kE4M3FN{4, 3, 7, Float8Kind::kFiniteNan};
constexpr Float8Format kE4M3FNUZ{4, 3, 8, Float8Kind::kFiniteUnsignedZero};
constexpr Float8Format kE5M2FNUZ{5, 2, 16, Float8Kind::kFiniteUnsignedZero};
constexpr Float8Format kE4M3B11FNUZ{4, 3, 11, Float8Kind::kFiniteUnsignedZero};

int MaxExponentField(const Float8Format& f) { return (1 << f.exponent_bits) - 1; }

uint8_t NanBits(const Float8Format& f, uint8_t sign) {
  switch (f.kind) {
    case Float8Kind::kIeee:
      return sign | (MaxExponentField(f) << f.mantissa_bits) | (1 << (f.mantissa_bits - 1));
    case Float8Kind::kFiniteNan:
      return sign | 0x7f;
    case Float8Kind::kFiniteUnsignedZero:
      break;
  }
  return 0x80;
}

// What a value past the largest finite one becomes: inf, or NaN where the format has no inf.
uint8_t OverflowBits(const Float8Format& f, uint8_t sign) {
  if (f.kind == Float8Kind::kIeee) return sign | (MaxExponentField(f) << f.mantissa_bits);
  return NanBits(f, sign);
}

double MaxFinite(const Float8Format& f) {
  const int top = f.kind == Float8Kind::kIeee ? MaxExponentField(f) - 1 : MaxExponentField(f);
  // f8e4m3fn gives up the top mantissa of the top exponent to NaN.
  const int mantissa = (1 << f.mantissa_bits) - (f.kind == Float8Kind::kFiniteNan ? 2 : 1);
  return std::ldexp(1.0 + std::ldexp(mantissa, -f.mantissa_bits), top - f.bias);
}

// Rounds a non-negative value to the nearest integer, ties to even, whatever the FP rounding mode.
double RoundHalfEven(double x) {
  double floor = std::floor(x);
  double diff = x - floor;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(floor, 2.0) != 0)) return floor + 1;
  return floor;
}

}  // namespace

const Float8Format* Float8FormatOf(PrimitiveType type) {
  switch (type) {
    case PrimitiveType::F8E5M2: return &kE5M2;
    case PrimitiveType::F8E4M3: return &kE4M3;
    case PrimitiveType::F8E3M4: return &kE3M4;
    case PrimitiveType::F8E4M3FN: return &kE4M3FN;
    case PrimitiveType::F8E4M3FNUZ: return &kE4M3FNUZ;
    case PrimitiveType::F8E5M2FNUZ: return &kE5M2FNUZ;
    case PrimitiveType::F8E4M3B11FNUZ: return &kE4M3B11FNUZ;
    default: return nullptr;
  }
}

bool IsComputedFloat8Type(PrimitiveType type) { return Float8FormatOf(type) != nullptr; }

uint8_t Float8FromDouble(double value, const Float8Format& f) {
  const uint8_t sign = std::signbit(value) ? 0x80 : 0;
  if (std::isnan(value)) return NanBits(f, sign);
  const double a = std::fabs(value);
  if (std::isinf(a)) return OverflowBits(f, sign);
  const int m = f.mantissa_bits;
  const int min_exponent = 1 - f.bias;  // of the smallest normal; subnormals share its quantum
  int e = 0;
  std::frexp(a, &e);  // a = [0.5, 1) * 2^e
  int exponent = a == 0 ? min_exponent : std::max(e - 1, min_exponent);
  // The value in units of the format's quantum at this exponent, rounded once.
  double units = RoundHalfEven(std::ldexp(a, m - exponent));
  if (std::ldexp(units, exponent - m) > MaxFinite(f)) return OverflowBits(f, sign);
  if (units == 0) return f.kind == Float8Kind::kFiniteUnsignedZero ? 0 : sign;
  auto q = static_cast<uint32_t>(units);
  if (q == (2u << m)) {  // rounded up to the next power of two
    q >>= 1;
    ++exponent;
  }
  if (q < (1u << m)) return sign | static_cast<uint8_t>(q);  // subnormal
  const int field = exponent + f.bias;
  return sign | static_cast<uint8_t>(field << m) | static_cast<uint8_t>(q - (1u << m));
}

double Float8ToDouble(uint8_t bits, const Float8Format& f) {
  const int m = f.mantissa_bits;
  const bool negative = (bits & 0x80) != 0;
  const double nan = negative ? -std::numeric_limits<double>::quiet_NaN()
                              : std::numeric_limits<double>::quiet_NaN();
  const int field = (bits >> m) & MaxExponentField(f);
  const int mantissa = bits & ((1 << m) - 1);
  switch (f.kind) {
    case Float8Kind::kIeee:
      if (field == MaxExponentField(f)) {
        if (mantissa != 0) return nan;
        return negative ? -std::numeric_limits<double>::infinity()
                        : std::numeric_limits<double>::infinity();
      }
      break;
    case Float8Kind::kFiniteNan:
      if ((bits & 0x7f) == 0x7f) return nan;
      break;
    case Float8Kind::kFiniteUnsignedZero:
      if (bits == 0x80) return nan;
      break;
  }
  const double magnitude = field == 0 ? std::ldexp(mantissa, 1 - f.bias - m)
                                      : std::ldexp(mantissa + (1 << m), field - f.bias - m);
  return negative ? -magnitude : magnitude;
}

const float* Float8ValueTable(PrimitiveType type) {
  using Table = std::array<float, 256>;
  auto make = [](const Float8Format& f) {
    auto* table = new Table;
    for (int b = 0; b < 256; ++b) (*table)[b] = static_cast<float>(Float8ToDouble(b, f));
    return table;
  };
  switch (type) {
    case PrimitiveType::F8E5M2: { static const Table* t = make(kE5M2); return t->data(); }
    case PrimitiveType::F8E4M3: { static const Table* t = make(kE4M3); return t->data(); }
    case PrimitiveType::F8E3M4: { static const Table* t = make(kE3M4); return t->data(); }
    case PrimitiveType::F8E4M3FN: { static const Table* t = make(kE4M3FN); return t->data(); }
    case PrimitiveType::F8E4M3FNUZ: { static const Table* t = make(kE4M3FNUZ); return t->data(); }
    case PrimitiveType::F8E5M2FNUZ: { static const Table* t = make(kE5M2FNUZ); return t->data(); }
    case PrimitiveType::F8E4M3B11FNUZ: {
      static const Table* t = make(kE4M3B11FNUZ);
      return t->data();
    }
    default: return nullptr;
  }
}

}  // namespace xlens
