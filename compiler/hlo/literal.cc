#include "compiler/hlo/literal.h"

#include <cassert>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include <fmt/format.h>

namespace xlens {

Literal::Literal(const Shape& shape) : shape_(shape) {
  if (shape.IsTuple()) {
    for (const Shape& s : shape.tuple_shapes()) elements_.emplace_back(s);
    return;
  }
  if (shape.IsArray() && shape.is_static()) {
    // ByteSizeOf saturates instead of wrapping: an unrepresentable shape fails to allocate
    // rather than getting a small buffer that its elements would overrun.
    data_.assign(static_cast<size_t>(shape_util::ByteSizeOf(shape)), 0);
  }
}

Literal Literal::CreateElided(const Shape& shape) {
  Literal lit;
  lit.shape_ = shape;
  lit.elided_ = true;
  return lit;
}

Literal Literal::CreateFromText(const Shape& shape, std::string text) {
  Literal lit;
  lit.shape_ = shape;
  lit.text_ = std::move(text);
  return lit;
}

Literal Literal::MakeTuple(std::vector<Literal> elements) {
  std::vector<Shape> shapes;
  for (const Literal& e : elements) shapes.push_back(e.shape());
  Literal lit;
  lit.shape_ = Shape::Tuple(std::move(shapes));
  lit.elements_ = std::move(elements);
  return lit;
}

int64_t Literal::LinearIndex(std::span<const int64_t> index) const {
  int64_t linear = 0;
  for (size_t i = 0; i < index.size(); ++i) linear = linear * shape_.dimensions(i) + index[i];
  return linear;
}

double Literal::GetAsDouble(int64_t i) const {
  double out = 0;
  DispatchSupportedType(shape_.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    T v = data<T>()[i];
    if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>) {
      out = static_cast<double>(v.real());
    } else {
      out = static_cast<double>(static_cast<std::conditional_t<kIsWrappedFloat<T>, float, T>>(v));
    }
  });
  return out;
}

int64_t Literal::GetAsInt64(int64_t i) const {
  int64_t out = 0;
  DispatchSupportedType(shape_.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    T v = data<T>()[i];
    if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>) {
      out = static_cast<int64_t>(v.real());
    } else if constexpr (kIsWrappedFloat<T>) {
      out = static_cast<int64_t>(static_cast<float>(v));
    } else {
      out = static_cast<int64_t>(v);
    }
  });
  return out;
}

complex128 Literal::GetAsComplex(int64_t i) const {
  if (shape_.element_type() == PrimitiveType::C64) {
    complex64 v = data<complex64>()[i];
    return {v.real(), v.imag()};
  }
  if (shape_.element_type() == PrimitiveType::C128) return data<complex128>()[i];
  return {GetAsDouble(i), 0.0};
}

void Literal::SetFromDouble(int64_t i, double value) {
  DispatchSupportedType(shape_.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (std::is_same_v<T, bfloat16>) {
      data<T>()[i] = bfloat16(static_cast<float>(value));
    } else if constexpr (kIsWrappedFloat<T>) {
      data<T>()[i] = T(value);  // rounded once, from the double
    } else if constexpr (std::is_same_v<T, complex64>) {
      data<T>()[i] = complex64(static_cast<float>(value), 0.0f);
    } else if constexpr (std::is_same_v<T, complex128>) {
      data<T>()[i] = complex128(value, 0.0);
    } else {
      data<T>()[i] = static_cast<T>(value);
    }
  });
}

void Literal::SetFromInt64(int64_t i, int64_t value) {
  DispatchSupportedType(shape_.element_type(), [&]<PrimitiveType P>() {
    using T = NativeType<P>;
    if constexpr (kIsWrappedFloat<T>) {
      data<T>()[i] = T(static_cast<float>(value));
    } else if constexpr (std::is_same_v<T, complex64> || std::is_same_v<T, complex128>) {
      data<T>()[i] = T(static_cast<typename T::value_type>(value), 0);
    } else {
      data<T>()[i] = static_cast<T>(value);
    }
  });
}

void Literal::SetFromComplex(int64_t i, complex128 value) {
  if (shape_.element_type() == PrimitiveType::C64) {
    data<complex64>()[i] = complex64(static_cast<float>(value.real()), static_cast<float>(value.imag()));
  } else if (shape_.element_type() == PrimitiveType::C128) {
    data<complex128>()[i] = value;
  } else {
    SetFromDouble(i, value.real());
  }
}

bool Literal::operator==(const Literal& other) const {
  if (!shape_util::Compatible(shape_, other.shape_)) return false;
  if (elided_ != other.elided_ || text_ != other.text_) return false;
  if (shape_.IsTuple()) return elements_ == other.elements_;
  return data_ == other.data_;
}

namespace {

struct FloatDigits {
  int digits10;
  int max_digits10;
};

FloatDigits DigitsOf(PrimitiveType type) {
  switch (type) {
    // Half-precision values print as the floats they convert to, as XLA's dumps show them.
    case PrimitiveType::F64: return {15, 17};
    // The 8-bit floats print with their own max_digits10 (2 for e5m2, 3 for the others), as
    // XLA prints them: "0.094" for the e5m2 0.09375.
    case PrimitiveType::F8E5M2: case PrimitiveType::F8E5M2FNUZ: return {2, 2};
    case PrimitiveType::F8E4M3: case PrimitiveType::F8E4M3FN: case PrimitiveType::F8E4M3FNUZ:
    case PrimitiveType::F8E4M3B11FNUZ: case PrimitiveType::F8E3M4: return {3, 3};
    default: return {6, 9};
  }
}

// Rounds `value` to the precision of `type`.
double RoundToType(double value, PrimitiveType type) {
  switch (type) {
    case PrimitiveType::F16: return static_cast<double>(static_cast<half>(value));
    case PrimitiveType::BF16: return static_cast<float>(bfloat16(static_cast<float>(value)));
    case PrimitiveType::F64: return value;
    default:
      if (const Float8Format* f8 = Float8FormatOf(type)) {
        return Float8ToDouble(Float8FromDouble(value, *f8), *f8);
      }
      return static_cast<double>(static_cast<float>(value));
  }
}

}  // namespace

std::string FloatToHloString(double value, PrimitiveType type) {
  if (std::isnan(value)) return std::signbit(value) ? "-nan" : "nan";
  if (std::isinf(value)) return value < 0 ? "-inf" : "inf";
  FloatDigits digits = DigitsOf(type);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*g", digits.digits10, value);
  PrimitiveType check = type == PrimitiveType::F64 || IsComputedFloat8Type(type)
                            ? type : PrimitiveType::F32;
  if (RoundToType(std::strtod(buf, nullptr), check) == value) return buf;
  std::snprintf(buf, sizeof(buf), "%.*g", digits.max_digits10, value);
  return buf;
}

bool FitsFloatType(double value, PrimitiveType type) {
  if (std::isnan(value) || std::isinf(value)) return true;
  double max = 0;
  switch (type) {
    case PrimitiveType::F16: max = 65504.0; break;
    case PrimitiveType::BF16: max = 3.3895313892515355e38; break;
    case PrimitiveType::F32: max = std::numeric_limits<float>::max(); break;
    default:
      // An 8-bit float: a value that rounds to inf or NaN does not fit.
      if (IsComputedFloat8Type(type)) return std::isfinite(RoundToType(value, type));
      return true;
  }
  // Values that round to the largest finite value are fine; those that round to inf are not.
  return !std::isinf(RoundToType(value, type)) && std::fabs(value) <= max * (1 + 1e-3);
}

bool FitsIntegerType(int64_t value, PrimitiveType type) {
  int bits = BitWidth(type);
  if (type == PrimitiveType::PRED) return value == 0 || value == 1;
  if (IsUnsignedIntegralType(type)) {
    return value >= 0 && (bits >= 64 || static_cast<uint64_t>(value) < (uint64_t{1} << bits));
  }
  if (bits >= 64) return true;
  int64_t lo = -(int64_t{1} << (bits - 1));
  int64_t hi = (int64_t{1} << (bits - 1)) - 1;
  return value >= lo && value <= hi;
}

bool FitsUnsignedType(uint64_t value, PrimitiveType type) {
  int bits = BitWidth(type);
  if (IsUnsignedIntegralType(type)) return bits >= 64 || value < (uint64_t{1} << bits);
  if (IsSignedIntegralType(type)) {
    return bits >= 64 ? value <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max())
                      : value < (uint64_t{1} << (bits - 1));
  }
  return false;
}

std::string Literal::ElementToString(int64_t i) const {
  PrimitiveType type = shape_.element_type();
  switch (type) {
    case PrimitiveType::PRED:
      return data<bool>()[i] ? "true" : "false";
    case PrimitiveType::S8: return std::to_string(data<int8_t>()[i]);
    case PrimitiveType::S16: return std::to_string(data<int16_t>()[i]);
    case PrimitiveType::S32: return std::to_string(data<int32_t>()[i]);
    case PrimitiveType::S64: return std::to_string(data<int64_t>()[i]);
    case PrimitiveType::U8: return std::to_string(data<uint8_t>()[i]);
    case PrimitiveType::U16: return std::to_string(data<uint16_t>()[i]);
    case PrimitiveType::U32: return std::to_string(data<uint32_t>()[i]);
    case PrimitiveType::U64: return std::to_string(data<uint64_t>()[i]);
    case PrimitiveType::S1: case PrimitiveType::S2: case PrimitiveType::S4:
      return std::to_string(data<int8_t>()[i]);
    case PrimitiveType::U1: case PrimitiveType::U2: case PrimitiveType::U4:
      return std::to_string(data<uint8_t>()[i]);
    case PrimitiveType::F16: case PrimitiveType::BF16: case PrimitiveType::F32:
    case PrimitiveType::F64: case PrimitiveType::F8E5M2: case PrimitiveType::F8E4M3:
    case PrimitiveType::F8E3M4: case PrimitiveType::F8E4M3FN: case PrimitiveType::F8E4M3FNUZ:
    case PrimitiveType::F8E5M2FNUZ: case PrimitiveType::F8E4M3B11FNUZ:
      return FloatToHloString(GetAsDouble(i), type);
    case PrimitiveType::C64: case PrimitiveType::C128: {
      complex128 c = GetAsComplex(i);
      PrimitiveType part = ComplexComponentType(type);
      return "(" + FloatToHloString(c.real(), part) + ", " + FloatToHloString(c.imag(), part) + ")";
    }
    default:
      return "?";
  }
}

namespace {

void AppendArray(const Literal& lit, int64_t dim, int64_t& next, std::string& out) {
  const Shape& shape = lit.shape();
  int64_t rank = shape.rank();
  bool spaced = rank >= 2;
  out += spaced ? "{ " : "{";
  int64_t n = shape.dimensions(dim);
  for (int64_t i = 0; i < n; ++i) {
    if (i > 0) out += ", ";
    if (dim + 1 == rank) {
      out += lit.ElementToString(next++);
    } else {
      AppendArray(lit, dim + 1, next, out);
    }
  }
  out += spaced ? " }" : "}";
}

}  // namespace

std::string Literal::ToStringWithoutShape() const {
  if (elided_) return "{...}";
  if (!text_.empty()) return text_;
  if (shape_.IsTuple()) {
    std::string out = "(";
    for (size_t i = 0; i < elements_.size(); ++i) {
      if (i > 0) out += ", ";
      out += elements_[i].ToStringWithoutShape();
    }
    return out + ")";
  }
  if (shape_.rank() == 0) return ElementToString(0);
  std::string out;
  int64_t next = 0;
  AppendArray(*this, 0, next, out);
  return out;
}

}  // namespace xlens
