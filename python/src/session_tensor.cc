#include "python/src/session_tensor.h"

#include <nanobind/ndarray.h>

#include <cstring>
#include <memory>
#include <vector>

#include <fmt/format.h>

#include "compiler/graph/types.h"
#include "python/src/bindings.h"

namespace nb = nanobind;

namespace xlens::python {
namespace {

using Bytes = nb::ndarray<uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

std::vector<int64_t> ShapeFromPython(const std::string& what, nb::handle shape) {
  std::vector<int64_t> dims;
  if (!nb::isinstance<nb::tuple>(shape) && !nb::isinstance<nb::list>(shape)) {
    throw Error(what + ": the shape must be a tuple of ints");
  }
  for (nb::handle d : shape) {
    if (!nb::isinstance<nb::int_>(d)) throw Error(what + ": the shape must be a tuple of ints");
    const int64_t v = nb::cast<int64_t>(d);
    if (v < 0) throw Error(fmt::format("{}: negative dimension {}", what, v));
    dims.push_back(v);
  }
  return dims;
}

}  // namespace

graph::Tensor TensorFromPython(const std::string& what, nb::handle dtype_object, nb::handle shape,
                               nb::handle data) {
  if (!nb::isinstance<nb::int_>(dtype_object)) throw Error(what + ": the dtype must be an int");
  const int code = nb::cast<int>(dtype_object);
  if (!graph::IsValidDataType(code)) {
    throw Error(fmt::format("{}: {} is no TensorFlow DataType", what, code));
  }
  const auto dtype = static_cast<graph::DataType>(code);
  std::vector<int64_t> dims = ShapeFromPython(what, shape);
  if (dtype == graph::DT_STRING) {
    graph::Tensor t(graph::DT_STRING, dims);
    std::vector<std::string>& strings = t.strings();
    size_t i = 0;
    for (nb::handle item : data) {
      if (i == strings.size()) break;
      if (!nb::isinstance<nb::bytes>(item)) throw Error(what + ": a string element is not bytes");
      nb::bytes b = nb::borrow<nb::bytes>(item);
      strings[i++].assign(b.c_str(), b.size());
    }
    if (i != strings.size() || nb::len(data) != strings.size()) {
      throw Error(fmt::format("{}: {} strings for {} elements", what, nb::len(data),
                              strings.size()));
    }
    return t;
  }
  if (!graph::DataTypeIsNumeric(dtype) && dtype != graph::DT_BOOL) {
    throw Error(fmt::format("{}: a {} value cannot be fed from Python", what,
                            graph::DataTypeName(dtype)));
  }
  Bytes bytes;
  if (!nb::try_cast<Bytes>(data, bytes)) {
    throw Error(what + ": the data must be a C-contiguous uint8 array of the elements' bytes");
  }
  auto created = graph::Tensor::Create(dtype, std::move(dims));
  ThrowIfError(created.status().WithContext(what), Lines::kEscaped);
  graph::Tensor t = std::move(*created);
  if (bytes.size() != t.byte_size()) {
    throw Error(fmt::format("{}: {} bytes for {} {} elements ({} bytes)", what, bytes.size(),
                            t.num_elements(), graph::DataTypeName(dtype), t.byte_size()));
  }
  if (t.byte_size() > 0) std::memcpy(t.raw_data(), bytes.data(), t.byte_size());
  return t;
}

nb::object TensorToPython(const std::string& what, graph::Tensor tensor) {
  if (!tensor.IsInitialized()) return nb::none();
  nb::tuple shape = [&] {
    nb::list dims;
    for (int64_t d : tensor.dims()) dims.append(d);
    return nb::tuple(dims);
  }();
  const int code = static_cast<int>(tensor.dtype());
  if (tensor.dtype() == graph::DT_STRING) {
    nb::list strings;
    for (const std::string& s : tensor.strings()) strings.append(nb::bytes(s.data(), s.size()));
    return nb::make_tuple(code, shape, strings);
  }
  if (!graph::DataTypeIsNumeric(tensor.dtype()) && tensor.dtype() != graph::DT_BOOL) {
    throw Error(fmt::format("{}: a {} tensor has no numpy value", what,
                            graph::DataTypeName(tensor.dtype())));
  }
  // The array views the tensor's own elements; one shared with another holder (a variable's
  // value, a constant) is copied first, so writing to the array never changes the session.
  if (!tensor.RefCountIsOne()) tensor = tensor.Clone();
  auto* owned = new graph::Tensor(std::move(tensor));
  nb::capsule owner(owned, [](void* p) noexcept { delete static_cast<graph::Tensor*>(p); });
  static uint8_t empty = 0;
  uint8_t* data = owned->byte_size() > 0 ? static_cast<uint8_t*>(owned->raw_data()) : &empty;
  const size_t size = owned->byte_size();
  nb::ndarray<nb::numpy, uint8_t, nb::ndim<1>> array(data, 1, &size, owner);
  return nb::make_tuple(code, shape, array.cast());
}

}  // namespace xlens::python
