// Literal: a value-semantic constant of a Shape. Arrays are stored densely in row-major order
// (dimension 0 most major) whatever the shape's layout says: the layout is carried for printing
// and for layout-sensitive ops (bitcast), not for storage. Elements of sub-byte types take a byte.
// Tuples hold their element literals. A literal printed as `{...}` by XLA (an elided large
// constant) parses as an elided literal: it prints back as `{...}` and cannot be evaluated.
#pragma once

#include <complex>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/native_types.h"
#include "compiler/hlo/shape.h"
#include "compiler/support/status.h"

namespace xlens {

class Literal {
 public:
  Literal() = default;
  // A zero-filled literal of `shape` (tuples recursively).
  explicit Literal(const Shape& shape);
  static Literal CreateElided(const Shape& shape);
  // A literal of a type xlens does not compute with (f4e2m1fn, f8e8m0fnu), kept as its HLO text.
  static Literal CreateFromText(const Shape& shape, std::string text);
  static Literal MakeTuple(std::vector<Literal> elements);
  template <typename T>
  static Literal CreateR0(PrimitiveType type, T value);
  template <typename T>
  static Literal CreateR1(PrimitiveType type, const std::vector<T>& values);

  const Shape& shape() const { return shape_; }
  // Replaces the shape's layout (storage is unaffected).
  void set_layout(const Layout& layout) { shape_.set_layout(layout); }
  bool is_elided() const { return elided_; }
  // Held only as text (see CreateFromText); no data.
  bool is_text_only() const { return !text_.empty(); }
  int64_t element_count() const { return shape_.IsArray() ? shape_.num_elements() : 0; }

  // Raw row-major storage of an array literal.
  uint8_t* untyped_data() { return data_.data(); }
  const uint8_t* untyped_data() const { return data_.data(); }
  size_t size_bytes() const { return data_.size(); }

  // Typed views; T must be NativeType of the element type (same size is asserted).
  template <typename T>
  std::span<T> data() {
    return {reinterpret_cast<T*>(data_.data()), data_.size() / sizeof(T)};
  }
  template <typename T>
  std::span<const T> data() const {
    return {reinterpret_cast<const T*>(data_.data()), data_.size() / sizeof(T)};
  }
  template <typename T>
  T Get(std::span<const int64_t> index) const {
    return data<T>()[LinearIndex(index)];
  }
  template <typename T>
  void Set(std::span<const int64_t> index, T value) {
    data<T>()[LinearIndex(index)] = value;
  }
  int64_t LinearIndex(std::span<const int64_t> index) const;

  // Element access through wide types, for any supported element type.
  double GetAsDouble(int64_t linear_index) const;
  int64_t GetAsInt64(int64_t linear_index) const;
  complex128 GetAsComplex(int64_t linear_index) const;
  void SetFromDouble(int64_t linear_index, double value);
  void SetFromInt64(int64_t linear_index, int64_t value);
  void SetFromComplex(int64_t linear_index, complex128 value);

  // Tuples.
  int64_t tuple_size() const { return static_cast<int64_t>(elements_.size()); }
  const Literal& tuple_element(int64_t i) const { return elements_[i]; }
  Literal& tuple_element(int64_t i) { return elements_[i]; }
  std::vector<Literal>& tuple_elements() { return elements_; }
  const std::vector<Literal>& tuple_elements() const { return elements_; }

  // Same shape (layouts ignored) and bitwise-equal data.
  bool operator==(const Literal& other) const;

  // The literal's value as HLO text prints it inside constant(...): "1.5", "{1, 2}",
  // "{ { 1, 2 }, { 3, 4 } }", "(1, 0)" for complex, "{...}" when elided, "(1, {2})" for tuples.
  std::string ToStringWithoutShape() const;
  // One element as text (the same formatting as ToStringWithoutShape).
  std::string ElementToString(int64_t linear_index) const;

 private:
  Shape shape_;
  std::vector<uint8_t> data_;
  std::vector<Literal> elements_;
  bool elided_ = false;
  std::string text_;
};

// Text of one floating-point value of `type` (an F16/BF16/F32/F64 or 8-bit float value held in
// a double) as XLA prints it: the shortest of %.{digits10}g or %.{max_digits10}g that reads back to the same value;
// "inf", "-inf", "nan".
std::string FloatToHloString(double value, PrimitiveType type);

// Converts `value` to a float element of `type` and back, reporting whether it is representable
// (finite values beyond the type's range are out of range).
bool FitsFloatType(double value, PrimitiveType type);
// Whether `value` fits the integer type.
bool FitsIntegerType(int64_t value, PrimitiveType type);
bool FitsUnsignedType(uint64_t value, PrimitiveType type);

template <typename T>
Literal Literal::CreateR0(PrimitiveType type, T value) {
  Literal lit{Shape::Scalar(type)};
  lit.data<T>()[0] = value;
  return lit;
}

template <typename T>
Literal Literal::CreateR1(PrimitiveType type, const std::vector<T>& values) {
  Literal lit{Shape(type, {static_cast<int64_t>(values.size())})};
  auto d = lit.data<T>();
  for (size_t i = 0; i < values.size(); ++i) d[i] = values[i];
  return lit;
}

}  // namespace xlens
