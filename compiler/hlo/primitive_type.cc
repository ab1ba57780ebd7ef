#include "compiler/hlo/primitive_type.h"

#include <string>
#include <unordered_map>

namespace xlens {

std::string_view PrimitiveTypeName(PrimitiveType type) {
  switch (type) {
#define XLENS_NAME_CASE(e, name, bits) \
  case PrimitiveType::e:               \
    return name;
    XLENS_PRIMITIVE_TYPES(XLENS_NAME_CASE)
#undef XLENS_NAME_CASE
    case PrimitiveType::PRIMITIVE_TYPE_INVALID:
      break;
  }
  return "invalid";
}

std::optional<PrimitiveType> ParsePrimitiveType(std::string_view name) {
  static const auto* table = [] {
    auto* m = new std::unordered_map<std::string_view, PrimitiveType>;
#define XLENS_TABLE_ENTRY(e, n, bits) (*m)[n] = PrimitiveType::e;
    XLENS_PRIMITIVE_TYPES(XLENS_TABLE_ENTRY)
#undef XLENS_TABLE_ENTRY
    m->erase("tuple");
    return m;
  }();
  auto it = table->find(name);
  if (it == table->end()) return std::nullopt;
  return it->second;
}

int BitWidth(PrimitiveType type) {
  switch (type) {
#define XLENS_BITS_CASE(e, name, bits) \
  case PrimitiveType::e:               \
    return bits;
    XLENS_PRIMITIVE_TYPES(XLENS_BITS_CASE)
#undef XLENS_BITS_CASE
    case PrimitiveType::PRIMITIVE_TYPE_INVALID:
      break;
  }
  return 0;
}

int ByteWidth(PrimitiveType type) {
  int bits = BitWidth(type);
  return bits == 0 ? 0 : (bits + 7) / 8;
}

bool IsArrayType(PrimitiveType type) {
  return type != PrimitiveType::TUPLE && type != PrimitiveType::TOKEN &&
         type != PrimitiveType::OPAQUE_TYPE && type != PrimitiveType::PRIMITIVE_TYPE_INVALID;
}

bool IsSignedIntegralType(PrimitiveType type) {
  using P = PrimitiveType;
  return type == P::S1 || type == P::S2 || type == P::S4 || type == P::S8 || type == P::S16 ||
         type == P::S32 || type == P::S64;
}

bool IsUnsignedIntegralType(PrimitiveType type) {
  using P = PrimitiveType;
  return type == P::U1 || type == P::U2 || type == P::U4 || type == P::U8 || type == P::U16 ||
         type == P::U32 || type == P::U64;
}

bool IsIntegralType(PrimitiveType type) {
  return IsSignedIntegralType(type) || IsUnsignedIntegralType(type);
}

bool IsF8OrSmallerFloat(PrimitiveType type) {
  using P = PrimitiveType;
  switch (type) {
    case P::F4E2M1FN: case P::F8E3M4: case P::F8E4M3: case P::F8E4M3FN:
    case P::F8E4M3B11FNUZ: case P::F8E4M3FNUZ: case P::F8E5M2: case P::F8E5M2FNUZ:
    case P::F8E8M0FNU:
      return true;
    default:
      return false;
  }
}

bool IsFloatingPointType(PrimitiveType type) {
  using P = PrimitiveType;
  return type == P::F16 || type == P::BF16 || type == P::F32 || type == P::F64 ||
         IsF8OrSmallerFloat(type);
}

bool IsComplexType(PrimitiveType type) {
  return type == PrimitiveType::C64 || type == PrimitiveType::C128;
}

PrimitiveType ComplexComponentType(PrimitiveType type) {
  return type == PrimitiveType::C128 ? PrimitiveType::F64 : PrimitiveType::F32;
}

bool IsEvaluatorSupportedType(PrimitiveType type) {
  using P = PrimitiveType;
  switch (type) {
    case P::PRED: case P::S8: case P::S16: case P::S32: case P::S64:
    case P::U8: case P::U16: case P::U32: case P::U64:
    case P::F16: case P::BF16: case P::F32: case P::F64:
    case P::C64: case P::C128:
    case P::F8E5M2: case P::F8E4M3: case P::F8E3M4: case P::F8E4M3FN: case P::F8E4M3FNUZ:
    case P::F8E5M2FNUZ: case P::F8E4M3B11FNUZ:
      return true;
    default:
      return false;
  }
}

}  // namespace xlens
