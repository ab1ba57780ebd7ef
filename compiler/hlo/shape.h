// Shape: an element type with dimensions (and optionally a layout), or a tuple of shapes.
// Value-semantic. Dimensions may be dynamic: bounded (`<=N`, the bound is kept as the size) or
// unbounded (`?`, size kUnboundedSize).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "compiler/hlo/primitive_type.h"
#include "compiler/support/status.h"

namespace xlens {

// A layout: the minor-to-major order of the dimensions. Anything after ':' in the text (tiles
// `T(8,128)`, memory space `S(5)`, element size `E(4)`, ...) is kept verbatim in `suffix` so that
// dumps of any backend print back unchanged; xlens itself only acts on minor_to_major.
struct Layout {
  std::vector<int64_t> minor_to_major;
  std::string suffix;  // the text after ':' (without it); empty when absent

  bool operator==(const Layout&) const = default;
  std::string ToString() const;  // "{1,0}" or "{1,0:T(8,128)}"
};

class Shape {
 public:
  static constexpr int64_t kUnboundedSize = -1;

  Shape() = default;  // an invalid shape
  Shape(PrimitiveType type, std::vector<int64_t> dimensions);
  static Shape Tuple(std::vector<Shape> elements);
  static Shape Token() { return Shape(PrimitiveType::TOKEN, {}); }
  static Shape Scalar(PrimitiveType type) { return Shape(type, {}); }

  PrimitiveType element_type() const { return element_type_; }
  void set_element_type(PrimitiveType type) { element_type_ = type; }

  bool IsTuple() const { return element_type_ == PrimitiveType::TUPLE; }
  bool IsToken() const { return element_type_ == PrimitiveType::TOKEN; }
  bool IsOpaque() const { return element_type_ == PrimitiveType::OPAQUE_TYPE; }
  bool IsArray() const { return IsArrayType(element_type_); }
  bool IsValid() const { return element_type_ != PrimitiveType::PRIMITIVE_TYPE_INVALID; }

  // Arrays.
  int64_t rank() const { return static_cast<int64_t>(dimensions_.size()); }
  const std::vector<int64_t>& dimensions() const { return dimensions_; }
  int64_t dimensions(int64_t i) const { return dimensions_[i]; }
  void set_dimensions(int64_t i, int64_t size) { dimensions_[i] = size; }
  bool is_dynamic_dimension(int64_t i) const { return dynamic_[i]; }
  void set_dynamic_dimension(int64_t i, bool dynamic) { dynamic_[i] = dynamic; }
  bool is_unbounded_dynamic_dimension(int64_t i) const { return dimensions_[i] == kUnboundedSize; }
  bool is_static() const;  // no dynamic dimension anywhere (tuples: recursively)
  // Product of the dimensions (1 for a scalar; unbounded dimensions count as 0). Only meaningful
  // for static arrays. Never wraps: a product past INT64_MAX (a shape the parser and verifier
  // refuse) saturates there, so that nothing is sized from a wrapped, small count.
  int64_t num_elements() const;

  bool has_layout() const { return layout_.has_value(); }
  const Layout& layout() const { return *layout_; }
  Layout* mutable_layout() { return layout_ ? &*layout_ : nullptr; }
  void set_layout(Layout layout) { layout_ = std::move(layout); }
  void clear_layout() { layout_.reset(); }
  // Sets the default (row-major, {rank-1,...,0}) layout, recursively for tuples.
  void SetDefaultLayout();
  // Removes layouts recursively.
  void ClearLayouts();

  // Tuples.
  int64_t tuple_shapes_size() const { return static_cast<int64_t>(tuple_shapes_.size()); }
  const std::vector<Shape>& tuple_shapes() const { return tuple_shapes_; }
  const Shape& tuple_shapes(int64_t i) const { return tuple_shapes_[i]; }
  Shape* mutable_tuple_shapes(int64_t i) { return &tuple_shapes_[i]; }
  // The subshape at a ShapeIndex (a path of tuple indices); nullptr when the path is invalid.
  const Shape* Subshape(std::span<const int64_t> index) const;
  // Every leaf array/token shape in depth-first order, with its index.
  void ForEachLeaf(const std::function<void(const Shape&, const std::vector<int64_t>&)>& fn) const;

  // Text as HLO prints it: "f32[2,<=3,?]{2,1,0}", "(f32[], s32[4]{0})", "token[]".
  // With print_layout=false layouts are omitted.
  std::string ToString(bool print_layout = true) const;

  // Structural equality including layouts.
  bool operator==(const Shape& other) const;
  bool operator!=(const Shape& other) const { return !(*this == other); }

 private:
  PrimitiveType element_type_ = PrimitiveType::PRIMITIVE_TYPE_INVALID;
  std::vector<int64_t> dimensions_;
  std::vector<bool> dynamic_;
  std::vector<Shape> tuple_shapes_;
  std::optional<Layout> layout_;
};

namespace shape_util {

// Same element type and dimensions (arrays), recursively for tuples; layouts ignored.
bool Compatible(const Shape& a, const Shape& b);
// Same dimensions, element types ignored (arrays only).
bool SameDimensions(const Shape& a, const Shape& b);
// Compatible, and where both have layouts, the same minor_to_major.
bool EqualIgnoringLayoutSuffix(const Shape& a, const Shape& b);
// Same shape with another element type (recursively).
Shape ChangeElementType(const Shape& shape, PrimitiveType type);
// Row-major strides in elements for a dense array of `dims`.
std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims);
// Byte size of a dense array shape (sum over leaves for tuples), using ByteWidth. Saturates at
// INT64_MAX like num_elements.
int64_t ByteSizeOf(const Shape& shape);
// The element count of an array shape (dimensions at their bound, unbounded ones ignored), or
// nullopt when the product of its non-zero dimensions does not fit in int64. A zero dimension
// does not excuse the others: [0, 2^40, 2^40] is refused, so that no size computed in any order
// over a valid shape overflows.
std::optional<int64_t> CheckedElementCount(const Shape& shape);
// The byte size of a shape (tuples: the sum over leaves), nullopt under the same rule or when
// the bytes do not fit in int64.
std::optional<int64_t> CheckedByteSize(const Shape& shape);
// An error naming `shape` when CheckedByteSize refuses it ("f32[4294967296,4294967296] has
// 18446744073709551616 elements: more than fit in 64 bits").
Status CheckShapeSize(const Shape& shape);
// The default minor_to_major for a rank: {rank-1, ..., 0}.
std::vector<int64_t> DefaultMinorToMajor(int64_t rank);

}  // namespace shape_util

}  // namespace xlens
