// A TensorFlow tensor as the graph front end holds it: a DataType, a fully defined shape and the
// elements. Numeric tensors keep their elements in an HLO Literal (so .npy files, printing and
// the XLA side share one representation); strings, resource handles and variant values (a
// TensorList) have their own vectors.
// Copies share the elements (an Identity costs nothing); a kernel that updates in place calls
// MakeUnique first, so a value another op still holds never changes under it.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "compiler/graph/partial_shape.h"
#include "compiler/graph/types.h"
#include "compiler/hlo/literal.h"
#include "compiler/support/status.h"

namespace xlens::graph {

// What one element of a DT_VARIANT tensor holds (a TensorList, tensor_list.h): type-erased, as
// TensorFlow's Variant is. Copies of the tensor share the values; a kernel that changes one
// copies it first unless its input is the only holder (TensorFlow's forwarding of variants).
class VariantValue {
 public:
  virtual ~VariantValue() = default;
  virtual std::string TypeName() const = 0;  // "tensorflow::TensorList"
  virtual std::string DebugString() const = 0;
  virtual std::shared_ptr<VariantValue> Clone() const = 0;  // a deep copy
  virtual bool Identical(const VariantValue& other) const = 0;
};

// What a DT_RESOURCE tensor holds: which resource (a variable) of the session it names.
struct ResourceHandle {
  std::string container;
  std::string name;
  std::string device;
  DataType dtype = DT_INVALID;  // of the variable, when known
  PartialShape shape;
  // A resource that lives as long as the handles to it (a TensorArray, which TensorFlow keeps in
  // the step's container): null for the session's variables.
  std::shared_ptr<VariantValue> object;
  bool operator==(const ResourceHandle& o) const {
    return container == o.container && name == o.name;
  }
};

class Tensor {
 public:
  Tensor() = default;  // not initialised (dtype DT_INVALID)
  // Zero-filled (numeric), empty strings, or default handles.
  Tensor(DataType dtype, std::vector<int64_t> dims);

  // Checked construction for sizes that come from outside (a Const's declared shape, a Fill's
  // dims): refuses negative dimensions and more than `max_bytes`.
  static StatusOr<Tensor> Create(DataType dtype, std::vector<int64_t> dims,
                                 int64_t max_bytes = int64_t{1} << 34);

  // A numeric tensor viewing `literal` (an array of a type DataType has).
  static StatusOr<Tensor> FromLiteral(Literal literal);
  template <typename T>
  static Tensor Scalar(DataType dtype, T value) {
    Tensor t(dtype, {});
    t.flat<T>()[0] = value;
    return t;
  }
  template <typename T>
  static Tensor Vector(DataType dtype, const std::vector<T>& values) {
    Tensor t(dtype, {static_cast<int64_t>(values.size())});
    auto f = t.flat<T>();
    for (size_t i = 0; i < values.size(); ++i) f[i] = values[i];
    return t;
  }
  static Tensor StringScalar(std::string value);
  static Tensor ResourceScalar(ResourceHandle handle);

  bool IsInitialized() const { return dtype_ != DT_INVALID; }
  DataType dtype() const { return dtype_; }
  const std::vector<int64_t>& dims() const { return dims_; }
  int64_t dim(int64_t i) const { return dims_[i]; }
  int64_t rank() const { return static_cast<int64_t>(dims_.size()); }
  int64_t num_elements() const { return num_elements_; }
  PartialShape shape() const { return PartialShape(dims_); }

  // Element access for numeric tensors. T must match the DataType's storage (bool for DT_BOOL,
  // float for DT_FLOAT, uint16_t for DT_HALF/DT_BFLOAT16, std::complex<float> for DT_COMPLEX64).
  template <typename T>
  std::span<T> flat() {
    return {reinterpret_cast<T*>(literal_->untyped_data()), static_cast<size_t>(num_elements_)};
  }
  template <typename T>
  std::span<const T> flat() const {
    return {reinterpret_cast<const T*>(literal_->untyped_data()),
            static_cast<size_t>(num_elements_)};
  }
  void* raw_data() { return literal_ ? literal_->untyped_data() : nullptr; }
  const void* raw_data() const { return literal_ ? literal_->untyped_data() : nullptr; }
  size_t byte_size() const { return literal_ ? literal_->size_bytes() : 0; }

  // Element i as double / int64 (numeric types; complex: the real part).
  double GetAsDouble(int64_t i) const { return literal_->GetAsDouble(i); }
  int64_t GetAsInt64(int64_t i) const { return literal_->GetAsInt64(i); }
  void SetFromDouble(int64_t i, double v) { literal_->SetFromDouble(i, v); }
  void SetFromInt64(int64_t i, int64_t v) { literal_->SetFromInt64(i, v); }
  // All elements as int64 (shape vectors, axes, indices).
  std::vector<int64_t> AsInt64Vector() const;

  std::vector<std::string>& strings() { return *strings_; }
  const std::vector<std::string>& strings() const { return *strings_; }
  std::vector<ResourceHandle>& handles() { return *handles_; }
  const std::vector<ResourceHandle>& handles() const { return *handles_; }
  const ResourceHandle& handle() const { return (*handles_)[0]; }
  // DT_VARIANT elements (null until set).
  std::vector<std::shared_ptr<VariantValue>>& variants() { return *variants_; }
  const std::vector<std::shared_ptr<VariantValue>>& variants() const { return *variants_; }

  // The elements as a Literal (numeric tensors only), shared, for element access by linear
  // index: after Reshaped its own shape may be the old one (ToLiteral has the tensor's dims).
  const Literal& literal() const { return *literal_; }
  // A copy as an HLO literal (for .npy files and for XLA).
  StatusOr<Literal> ToLiteral() const;

  // Same elements, new dims (the element count must agree): Reshape, Squeeze, ExpandDims.
  Tensor Reshaped(std::vector<int64_t> dims) const;
  // Gives this tensor its own copy of the elements when another tensor shares them.
  void MakeUnique();
  // A deep copy.
  Tensor Clone() const;
  bool SharesBufferWith(const Tensor& other) const;
  // Whether this is the only tensor holding its numeric elements (no copy shares them), so a
  // kernel may write its output over them (TensorFlow's forwarding of an input buffer).
  bool RefCountIsOne() const { return literal_ != nullptr && literal_.use_count() == 1; }

  // "float [2,3] [[1, 2, 3], [4, 5, 6]]", elements elided past `max_elements`.
  std::string DebugString(int64_t max_elements = 16) const;
  // Exact equality of dtype, dims and elements (bitwise for floats; NaN == NaN).
  bool Identical(const Tensor& other) const;

 private:
  DataType dtype_ = DT_INVALID;
  std::vector<int64_t> dims_;
  int64_t num_elements_ = 0;
  std::shared_ptr<Literal> literal_;
  std::shared_ptr<std::vector<std::string>> strings_;
  std::shared_ptr<std::vector<ResourceHandle>> handles_;
  std::shared_ptr<std::vector<std::shared_ptr<VariantValue>>> variants_;
};

}  // namespace xlens::graph
