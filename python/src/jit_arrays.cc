#include "python/src/jit_arrays.h"

#include "python/src/bindings.h"

#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace nb = nanobind;

namespace xlens::python {
namespace {

using nb::dlpack::dtype_code;

// ml_dtypes' names of the types NumPy has no dtype for.
struct MlDtype {
  PrimitiveType type;
  const char* name;
};
constexpr MlDtype kMlDtypes[] = {
    {PrimitiveType::BF16, "bfloat16"},
    {PrimitiveType::F8E3M4, "float8_e3m4"},
    {PrimitiveType::F8E4M3, "float8_e4m3"},
    {PrimitiveType::F8E4M3FN, "float8_e4m3fn"},
    {PrimitiveType::F8E4M3B11FNUZ, "float8_e4m3b11fnuz"},
    {PrimitiveType::F8E4M3FNUZ, "float8_e4m3fnuz"},
    {PrimitiveType::F8E5M2, "float8_e5m2"},
    {PrimitiveType::F8E5M2FNUZ, "float8_e5m2fnuz"},
    {PrimitiveType::F8E8M0FNU, "float8_e8m0fnu"},
    {PrimitiveType::F4E2M1FN, "float4_e2m1fn"},
    {PrimitiveType::S2, "int2"},
    {PrimitiveType::S4, "int4"},
    {PrimitiveType::U2, "uint2"},
    {PrimitiveType::U4, "uint4"},
};

const char* MlDtypeName(PrimitiveType type) {
  for (const MlDtype& d : kMlDtypes) {
    if (d.type == type) return d.name;
  }
  return nullptr;
}

std::optional<PrimitiveType> TypeOfMlDtype(std::string_view name) {
  for (const MlDtype& d : kMlDtypes) {
    if (name == d.name) return d.type;
  }
  return std::nullopt;
}

// The DLPack type NumPy gives an array of `type`; for the ml_dtypes types, the unsigned integer
// of the same width their bits travel as.
nb::dlpack::dtype DlpackType(PrimitiveType type) {
  const uint8_t bits = static_cast<uint8_t>(ByteWidth(type) * 8);
  if (type == PrimitiveType::PRED) return {static_cast<uint8_t>(dtype_code::Bool), 8, 1};
  if (MlDtypeName(type) != nullptr) return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
  if (IsSignedIntegralType(type)) return {static_cast<uint8_t>(dtype_code::Int), bits, 1};
  if (IsUnsignedIntegralType(type)) return {static_cast<uint8_t>(dtype_code::UInt), bits, 1};
  if (IsComplexType(type)) return {static_cast<uint8_t>(dtype_code::Complex), bits, 1};
  return {static_cast<uint8_t>(dtype_code::Float), bits, 1};
}

// The element type of an array NumPy (or DLPack) describes.
std::optional<PrimitiveType> TypeOfDlpack(nb::dlpack::dtype d) {
  if (d.lanes != 1) return std::nullopt;
  std::string name;
  switch (static_cast<dtype_code>(d.code)) {
    case dtype_code::Bool: return d.bits == 8 ? std::optional(PrimitiveType::PRED) : std::nullopt;
    case dtype_code::Int: name = fmt::format("s{}", d.bits); break;
    case dtype_code::UInt: name = fmt::format("u{}", d.bits); break;
    case dtype_code::Float: name = fmt::format("f{}", d.bits); break;
    case dtype_code::Bfloat: name = fmt::format("bf{}", d.bits); break;
    case dtype_code::Complex: name = fmt::format("c{}", d.bits); break;
    default: return std::nullopt;
  }
  return ParsePrimitiveType(name);
}

std::string ParameterText(size_t index, const HloInstruction& parameter) {
  return fmt::format("parameter {} (%{})", index, parameter.name());
}

// str(object) (nb::str of an object that is no str would take it as one).
std::string Text(const nb::object& object) {
  return nb::cast<std::string>(nb::str(nb::handle(object.ptr())));
}

// What `value` is, for a message about something that is not an array xlens can read.
std::string Describe(nb::handle value) {
  if (nb::hasattr(value, "dtype") && nb::hasattr(value, "shape")) {
    return fmt::format("an array of dtype {}", Text(value.attr("dtype")));
  }
  return fmt::format("a {}", Text(value.type().attr("__name__")));
}

bool IsCContiguous(const nb::ndarray<nb::ro>& array) {
  int64_t expected = 1;
  for (size_t d = array.ndim(); d-- > 0;) {
    if (array.shape(d) != 1 && array.stride(d) != expected) return false;
    expected *= static_cast<int64_t>(array.shape(d));
  }
  return true;
}

// The array in `value` and its element type: through NumPy's buffer or DLPack protocol, or as
// the bits of an ml_dtypes array (which neither protocol carries).
bool ImportArray(nb::handle value, nb::ndarray<nb::ro>& array, std::optional<PrimitiveType>& type,
                 nb::object& keep) {
  if (nb::try_cast(value, array, /*convert=*/false)) {
    type = TypeOfDlpack(array.dtype());
    keep = nb::borrow(value);
    return true;
  }
  // A failed import may leave its Python error set (an object array's refused buffer).
  PyErr_Clear();
  if (!nb::hasattr(value, "dtype") || !nb::hasattr(value, "view")) return false;
  nb::object name = value.attr("dtype").attr("name");
  if (!nb::isinstance<nb::str>(name)) return false;
  std::optional<PrimitiveType> ml = TypeOfMlDtype(nb::cast<std::string>(name));
  if (!ml) return false;
  nb::object bits = value.attr("view")(fmt::format("u{}", ByteWidth(*ml)));
  if (!nb::try_cast(bits, array, /*convert=*/false)) {
    PyErr_Clear();
    return false;
  }
  type = ml;
  keep = std::move(bits);
  return true;
}

}  // namespace

std::string MissingArgumentMessage(size_t index, const HloInstruction& parameter) {
  return fmt::format("argument {}: missing: parameter {} (%{}: {}) needs it", index, index,
                     parameter.name(), parameter.shape().ToString(false));
}

StatusOr<ArgumentArray> ArgumentFor(nb::handle value, size_t index, const HloInstruction& parameter) {
  const Shape& expected = parameter.shape();
  nb::ndarray<nb::ro> array;
  std::optional<PrimitiveType> type;
  ArgumentArray argument;
  if (!ImportArray(value, array, type, argument.keep)) {
    const bool array_like = nb::hasattr(value, "dtype") && nb::hasattr(value, "shape");
    return xlens::Error(fmt::format("argument {}: holds {}, {}; {} expects {}", index, Describe(value),
                                    array_like ? "a dtype xlens has no type for" : "not an array",
                                    ParameterText(index, parameter), expected.ToString(false)));
  }
  if (array.device_type() != nb::device::cpu::value) {
    return xlens::Error(fmt::format("argument {}: is not in host memory (DLPack device type {}); {} expects "
                             "a host array",
                             index, array.device_type(), ParameterText(index, parameter)));
  }
  if (!type) {
    return xlens::Error(fmt::format("argument {}: holds {}, a dtype xlens has no type for; {} expects {}",
                                    index, Describe(value), ParameterText(index, parameter),
                                    expected.ToString(false)));
  }
  std::vector<int64_t> dims(array.ndim());
  for (size_t d = 0; d < array.ndim(); ++d) dims[d] = static_cast<int64_t>(array.shape(d));
  const Shape given(*type, std::move(dims));
  // As `xlens run` compares an .npy file with its parameter (layouts aside), and says so alike.
  if (!expected.IsArray() || !shape_util::Compatible(given, expected)) {
    return xlens::Error(fmt::format("argument {}: holds {} but {} expects {}", index, given.ToString(false),
                             ParameterText(index, parameter), expected.ToString(false)));
  }
  if (!IsCContiguous(array)) {
    // A strided view: its elements gathered into a C-contiguous copy for this call.
    nb::object copy = nb::module_::import_("numpy").attr("ascontiguousarray")(argument.keep);
    if (!nb::try_cast(copy, array, /*convert=*/false)) {
      return xlens::Error(fmt::format("argument {}: its C-contiguous copy could not be read", index));
    }
    argument.keep = std::move(copy);
  }
  argument.data = array.data();
  return argument;
}

Literal LiteralFromArgument(const ArgumentArray& argument, const Shape& shape) {
  Literal literal(shape);
  if (literal.size_bytes() > 0) std::memcpy(literal.untyped_data(), argument.data, literal.size_bytes());
  return literal;
}

nb::object ArrayFromLiteral(Literal&& literal) {
  const PrimitiveType type = literal.shape().element_type();
  auto* owned = new Literal(std::move(literal));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<Literal*>(p); });
  const std::vector<int64_t>& dims = owned->shape().dimensions();
  std::vector<size_t> shape(dims.begin(), dims.end());
  // An empty array has no storage; NumPy still wants an address.
  void* data = owned->size_bytes() > 0 ? static_cast<void*>(owned->untyped_data()) : static_cast<void*>(owned);
  nb::ndarray<nb::numpy> array(data, shape.size(), shape.data(), owner, /*strides=*/nullptr, DlpackType(type),
                               nb::device::cpu::value);
  nb::object result = nb::cast(std::move(array));
  if (const char* name = MlDtypeName(type)) {
    nb::object ml_dtypes;
    try {
      ml_dtypes = nb::module_::import_("ml_dtypes");
    } catch (const nb::python_error&) {
      throw Error(fmt::format("a {} result needs ml_dtypes for its NumPy dtype (pip install ml_dtypes)",
                              PrimitiveTypeName(type)));
    }
    result = result.attr("view")(ml_dtypes.attr(name));
  }
  return result;
}

}  // namespace xlens::python
