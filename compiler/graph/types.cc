#include "compiler/graph/types.h"

#include <array>

namespace xlens::graph {
namespace {

struct TypeInfo {
  DataType type;
  const char* name;       // DataTypeString
  const char* enum_name;  // types.proto
  PrimitiveType primitive;
  int size;
};

constexpr std::array<TypeInfo, 23> kTypes = {{
    {DT_FLOAT, "float", "DT_FLOAT", PrimitiveType::F32, 4},
    {DT_DOUBLE, "double", "DT_DOUBLE", PrimitiveType::F64, 8},
    {DT_INT32, "int32", "DT_INT32", PrimitiveType::S32, 4},
    {DT_UINT8, "uint8", "DT_UINT8", PrimitiveType::U8, 1},
    {DT_INT16, "int16", "DT_INT16", PrimitiveType::S16, 2},
    {DT_INT8, "int8", "DT_INT8", PrimitiveType::S8, 1},
    {DT_STRING, "string", "DT_STRING", PrimitiveType::PRIMITIVE_TYPE_INVALID, 0},
    {DT_COMPLEX64, "complex64", "DT_COMPLEX64", PrimitiveType::C64, 8},
    {DT_INT64, "int64", "DT_INT64", PrimitiveType::S64, 8},
    {DT_BOOL, "bool", "DT_BOOL", PrimitiveType::PRED, 1},
    {DT_QINT8, "qint8", "DT_QINT8", PrimitiveType::PRIMITIVE_TYPE_INVALID, 1},
    {DT_QUINT8, "quint8", "DT_QUINT8", PrimitiveType::PRIMITIVE_TYPE_INVALID, 1},
    {DT_QINT32, "qint32", "DT_QINT32", PrimitiveType::PRIMITIVE_TYPE_INVALID, 4},
    {DT_BFLOAT16, "bfloat16", "DT_BFLOAT16", PrimitiveType::BF16, 2},
    {DT_QINT16, "qint16", "DT_QINT16", PrimitiveType::PRIMITIVE_TYPE_INVALID, 2},
    {DT_QUINT16, "quint16", "DT_QUINT16", PrimitiveType::PRIMITIVE_TYPE_INVALID, 2},
    {DT_UINT16, "uint16", "DT_UINT16", PrimitiveType::U16, 2},
    {DT_COMPLEX128, "complex128", "DT_COMPLEX128", PrimitiveType::C128, 16},
    {DT_HALF, "half", "DT_HALF", PrimitiveType::F16, 2},
    {DT_RESOURCE, "resource", "DT_RESOURCE", PrimitiveType::PRIMITIVE_TYPE_INVALID, 0},
    {DT_VARIANT, "variant", "DT_VARIANT", PrimitiveType::PRIMITIVE_TYPE_INVALID, 0},
    {DT_UINT32, "uint32", "DT_UINT32", PrimitiveType::U32, 4},
    {DT_UINT64, "uint64", "DT_UINT64", PrimitiveType::U64, 8},
}};

const TypeInfo* Info(DataType t) {
  t = RemoveRefType(t);
  if (t < 1 || t > static_cast<int>(kTypes.size())) return nullptr;
  return &kTypes[t - 1];
}

}  // namespace

bool IsValidDataType(int value) {
  if (value > kDataTypeRefOffset) value -= kDataTypeRefOffset;
  return value >= 1 && value <= static_cast<int>(kTypes.size());
}

std::string DataTypeName(DataType type) {
  if (type == DT_INVALID) return "invalid";
  const TypeInfo* info = Info(type);
  if (!info) return "unknown dtype enum (" + std::to_string(static_cast<int>(type)) + ")";
  return std::string(info->name) + (IsRefType(type) ? "_ref" : "");
}

std::optional<DataType> ParseDataTypeName(std::string_view name) {
  bool ref = false;
  if (name.size() > 4 && name.substr(name.size() - 4) == "_ref") {
    ref = true;
    name.remove_suffix(4);
  }
  for (const TypeInfo& info : kTypes) {
    if (name == info.name) return ref ? MakeRefType(info.type) : info.type;
  }
  return std::nullopt;
}

std::string DataTypeEnumName(DataType type) {
  if (type == DT_INVALID) return "DT_INVALID";
  const TypeInfo* info = Info(type);
  if (!info) return std::to_string(static_cast<int>(type));
  return std::string(info->enum_name) + (IsRefType(type) ? "_REF" : "");
}

std::optional<DataType> ParseDataTypeEnumName(std::string_view name) {
  if (name == "DT_INVALID") return DT_INVALID;
  bool ref = false;
  if (name.size() > 4 && name.substr(name.size() - 4) == "_REF") {
    ref = true;
    name.remove_suffix(4);
  }
  for (const TypeInfo& info : kTypes) {
    if (name == info.enum_name) return ref ? MakeRefType(info.type) : info.type;
  }
  return std::nullopt;
}

PrimitiveType ToPrimitiveType(DataType type) {
  const TypeInfo* info = Info(type);
  return info ? info->primitive : PrimitiveType::PRIMITIVE_TYPE_INVALID;
}

std::optional<DataType> FromPrimitiveType(PrimitiveType type) {
  if (type == PrimitiveType::PRIMITIVE_TYPE_INVALID) return std::nullopt;
  for (const TypeInfo& info : kTypes) {
    if (info.primitive == type) return info.type;
  }
  return std::nullopt;
}

int DataTypeSize(DataType type) {
  const TypeInfo* info = Info(type);
  if (!info || info->primitive == PrimitiveType::PRIMITIVE_TYPE_INVALID) return 0;
  return info->size;
}

bool DataTypeIsFloating(DataType type) {
  type = RemoveRefType(type);
  return type == DT_HALF || type == DT_BFLOAT16 || type == DT_FLOAT || type == DT_DOUBLE;
}

bool DataTypeIsInteger(DataType type) {
  switch (RemoveRefType(type)) {
    case DT_INT8: case DT_INT16: case DT_INT32: case DT_INT64:
    case DT_UINT8: case DT_UINT16: case DT_UINT32: case DT_UINT64:
      return true;
    default:
      return false;
  }
}

bool DataTypeIsComplex(DataType type) {
  type = RemoveRefType(type);
  return type == DT_COMPLEX64 || type == DT_COMPLEX128;
}

bool DataTypeIsNumeric(DataType type) {
  return ToPrimitiveType(type) != PrimitiveType::PRIMITIVE_TYPE_INVALID;
}

std::string DataTypeListString(const std::vector<DataType>& types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    if (i) out += ", ";
    out += DataTypeName(types[i]);
  }
  return out;
}

}  // namespace xlens::graph
