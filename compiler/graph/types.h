// TensorFlow's DataType, with TensorFlow's enum values and names, and its mapping onto HLO
// element types. A reference type (DT_FLOAT_REF, what a VariableV2 outputs) is the base type
// plus kDataTypeRefOffset, as in TensorFlow's types.proto.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compiler/hlo/primitive_type.h"

namespace xlens::graph {

enum DataType : int {
  DT_INVALID = 0,
  DT_FLOAT = 1,
  DT_DOUBLE = 2,
  DT_INT32 = 3,
  DT_UINT8 = 4,
  DT_INT16 = 5,
  DT_INT8 = 6,
  DT_STRING = 7,
  DT_COMPLEX64 = 8,
  DT_INT64 = 9,
  DT_BOOL = 10,
  DT_QINT8 = 11,
  DT_QUINT8 = 12,
  DT_QINT32 = 13,
  DT_BFLOAT16 = 14,
  DT_QINT16 = 15,
  DT_QUINT16 = 16,
  DT_UINT16 = 17,
  DT_COMPLEX128 = 18,
  DT_HALF = 19,
  DT_RESOURCE = 20,
  DT_VARIANT = 21,
  DT_UINT32 = 22,
  DT_UINT64 = 23,
};
inline constexpr int kDataTypeRefOffset = 100;

inline bool IsRefType(DataType t) { return t > kDataTypeRefOffset; }
inline DataType MakeRefType(DataType t) {
  return IsRefType(t) ? t : static_cast<DataType>(t + kDataTypeRefOffset);
}
inline DataType RemoveRefType(DataType t) {
  return IsRefType(t) ? static_cast<DataType>(t - kDataTypeRefOffset) : t;
}
// Whether `value` names a DataType this build knows (base or reference).
bool IsValidDataType(int value);

// TensorFlow's short names ("float", "int32", "resource", "float_ref"), as DataTypeString and
// the OpDef type lists ("T: {float, double}") write them.
std::string DataTypeName(DataType type);
std::optional<DataType> ParseDataTypeName(std::string_view name);
// The enum names of types.proto ("DT_FLOAT", "DT_FLOAT_REF"), as the text format writes them.
std::string DataTypeEnumName(DataType type);
std::optional<DataType> ParseDataTypeEnumName(std::string_view name);

// The HLO element type a tensor of `type` lowers to; PRIMITIVE_TYPE_INVALID for types XLA has no
// element type for (string, resource, variant, quantized).
PrimitiveType ToPrimitiveType(DataType type);
std::optional<DataType> FromPrimitiveType(PrimitiveType type);

// Bytes per element of a numeric type; 0 for string, resource, variant.
int DataTypeSize(DataType type);
bool DataTypeIsFloating(DataType type);  // half, bfloat16, float, double
bool DataTypeIsInteger(DataType type);   // signed and unsigned, not bool
bool DataTypeIsComplex(DataType type);
bool DataTypeIsNumeric(DataType type);   // everything with a PrimitiveType

// "float, int32" (for messages).
std::string DataTypeListString(const std::vector<DataType>& types);

}  // namespace xlens::graph
