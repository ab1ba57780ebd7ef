#include "compiler/hlo/shape.h"

#include <functional>
#include <limits>

#include <fmt/format.h>

namespace xlens {

std::string Layout::ToString() const {
  std::string out = "{" + fmt::format("{}", fmt::join(minor_to_major, ","));
  if (!suffix.empty()) out += ":" + suffix;
  return out + "}";
}

Shape::Shape(PrimitiveType type, std::vector<int64_t> dimensions)
    : element_type_(type),
      dimensions_(std::move(dimensions)),
      dynamic_(dimensions_.size(), false) {
  for (size_t i = 0; i < dimensions_.size(); ++i) {
    if (dimensions_[i] == kUnboundedSize) dynamic_[i] = true;
  }
}

Shape Shape::Tuple(std::vector<Shape> elements) {
  Shape s;
  s.element_type_ = PrimitiveType::TUPLE;
  s.tuple_shapes_ = std::move(elements);
  return s;
}

bool Shape::is_static() const {
  if (IsTuple()) {
    for (const Shape& s : tuple_shapes_) {
      if (!s.is_static()) return false;
    }
    return true;
  }
  for (bool d : dynamic_) {
    if (d) return false;
  }
  return true;
}

int64_t Shape::num_elements() const {
  int64_t n = 1;
  bool saturated = false;
  for (int64_t d : dimensions_) {
    if (d <= 0) return 0;
    if (__builtin_mul_overflow(n, d, &n)) saturated = true;
  }
  return saturated ? std::numeric_limits<int64_t>::max() : n;
}

void Shape::SetDefaultLayout() {
  if (IsTuple()) {
    for (Shape& s : tuple_shapes_) s.SetDefaultLayout();
    return;
  }
  if (!IsArray()) return;
  layout_ = Layout{shape_util::DefaultMinorToMajor(rank()), ""};
}

void Shape::ClearLayouts() {
  layout_.reset();
  for (Shape& s : tuple_shapes_) s.ClearLayouts();
}

const Shape* Shape::Subshape(std::span<const int64_t> index) const {
  const Shape* s = this;
  for (int64_t i : index) {
    if (!s->IsTuple() || i < 0 || i >= s->tuple_shapes_size()) return nullptr;
    s = &s->tuple_shapes_[i];
  }
  return s;
}

void Shape::ForEachLeaf(
    const std::function<void(const Shape&, const std::vector<int64_t>&)>& fn) const {
  std::vector<int64_t> index;
  std::function<void(const Shape&)> visit = [&](const Shape& s) {
    if (s.IsTuple()) {
      for (int64_t i = 0; i < s.tuple_shapes_size(); ++i) {
        index.push_back(i);
        visit(s.tuple_shapes_[i]);
        index.pop_back();
      }
      return;
    }
    fn(s, index);
  };
  visit(*this);
}

std::string Shape::ToString(bool print_layout) const {
  if (IsTuple()) {
    std::string out = "(";
    for (size_t i = 0; i < tuple_shapes_.size(); ++i) {
      if (i > 0) out += ", ";
      out += tuple_shapes_[i].ToString(print_layout);
    }
    return out + ")";
  }
  std::string out(PrimitiveTypeName(element_type_));
  out += "[";
  for (size_t i = 0; i < dimensions_.size(); ++i) {
    if (i > 0) out += ",";
    if (dimensions_[i] == kUnboundedSize) {
      out += "?";
    } else {
      if (dynamic_[i]) out += "<=";
      out += std::to_string(dimensions_[i]);
    }
  }
  out += "]";
  // Scalars print without a layout unless it carries tiling or a memory space (`{:T(128)}`).
  if (print_layout && layout_ && (!dimensions_.empty() || !layout_->suffix.empty())) {
    out += layout_->ToString();
  }
  return out;
}

bool Shape::operator==(const Shape& other) const {
  return element_type_ == other.element_type_ && dimensions_ == other.dimensions_ &&
         dynamic_ == other.dynamic_ && tuple_shapes_ == other.tuple_shapes_ &&
         layout_ == other.layout_;
}

namespace shape_util {

bool Compatible(const Shape& a, const Shape& b) {
  if (a.IsTuple() || b.IsTuple()) {
    if (!a.IsTuple() || !b.IsTuple() || a.tuple_shapes_size() != b.tuple_shapes_size()) {
      return false;
    }
    for (int64_t i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!Compatible(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  return a.element_type() == b.element_type() && a.dimensions() == b.dimensions();
}

bool SameDimensions(const Shape& a, const Shape& b) { return a.dimensions() == b.dimensions(); }

bool EqualIgnoringLayoutSuffix(const Shape& a, const Shape& b) {
  if (!Compatible(a, b)) return false;
  if (a.IsTuple()) {
    for (int64_t i = 0; i < a.tuple_shapes_size(); ++i) {
      if (!EqualIgnoringLayoutSuffix(a.tuple_shapes(i), b.tuple_shapes(i))) return false;
    }
    return true;
  }
  if (a.has_layout() && b.has_layout()) {
    return a.layout().minor_to_major == b.layout().minor_to_major;
  }
  return true;
}

Shape ChangeElementType(const Shape& shape, PrimitiveType type) {
  Shape out = shape;
  if (out.IsTuple()) {
    for (int64_t i = 0; i < out.tuple_shapes_size(); ++i) {
      *out.mutable_tuple_shapes(i) = ChangeElementType(shape.tuple_shapes(i), type);
    }
    return out;
  }
  out.set_element_type(type);
  return out;
}

std::vector<int64_t> RowMajorStrides(std::span<const int64_t> dims) {
  std::vector<int64_t> strides(dims.size(), 1);
  for (int64_t i = static_cast<int64_t>(dims.size()) - 2; i >= 0; --i) {
    strides[i] = strides[i + 1] * dims[i + 1];
  }
  return strides;
}

int64_t ByteSizeOf(const Shape& shape) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (shape.IsTuple()) {
    int64_t total = 0;
    for (const Shape& s : shape.tuple_shapes()) {
      if (__builtin_add_overflow(total, ByteSizeOf(s), &total)) return kMax;
    }
    return total;
  }
  if (!shape.IsArray()) return 0;
  int64_t bytes = 0;
  if (__builtin_mul_overflow(shape.num_elements(), ByteWidth(shape.element_type()), &bytes)) {
    return kMax;
  }
  return bytes;
}

std::optional<int64_t> CheckedElementCount(const Shape& shape) {
  int64_t nonzero_product = 1;
  bool has_zero = false;
  for (int64_t d : shape.dimensions()) {
    if (d <= 0) {
      has_zero |= d == 0;
      continue;
    }
    if (__builtin_mul_overflow(nonzero_product, d, &nonzero_product)) return std::nullopt;
  }
  return has_zero ? 0 : nonzero_product;
}

std::optional<int64_t> CheckedByteSize(const Shape& shape) {
  // Iterative over tuple nesting: shapes built by passes are not bounded by the parser's depth.
  int64_t total = 0;
  std::vector<const Shape*> stack = {&shape};
  while (!stack.empty()) {
    const Shape* s = stack.back();
    stack.pop_back();
    if (s->IsTuple()) {
      for (const Shape& element : s->tuple_shapes()) stack.push_back(&element);
      continue;
    }
    if (!s->IsArray()) continue;
    std::optional<int64_t> count = CheckedElementCount(*s);
    if (!count) return std::nullopt;
    // The byte size of the non-zero dimensions must fit too, for the same reason.
    int64_t nonzero_product = 1;
    for (int64_t d : s->dimensions()) {
      if (d > 0) nonzero_product *= d;  // cannot overflow: CheckedElementCount checked it
    }
    int64_t bytes = 0;
    if (__builtin_mul_overflow(nonzero_product, ByteWidth(s->element_type()), &bytes)) {
      return std::nullopt;
    }
    if (__builtin_add_overflow(total, *count == 0 ? 0 : bytes, &total)) return std::nullopt;
  }
  return total;
}

namespace {

std::string ToDecimal(unsigned __int128 v) {
  std::string digits;
  do {
    digits.insert(digits.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  } while (v != 0);
  return digits;
}

}  // namespace

Status CheckShapeSize(const Shape& shape) {
  if (CheckedByteSize(shape)) return OkStatus();
  // Name the first leaf at fault with its exact element count (computed in 128 bits).
  std::string message;
  shape.ForEachLeaf([&](const Shape& leaf, const std::vector<int64_t>&) {
    if (!message.empty() || !leaf.IsArray() || CheckedByteSize(leaf)) return;
    unsigned __int128 count = 1;
    bool huge = false;
    bool has_zero = false;
    for (int64_t d : leaf.dimensions()) {
      if (d > 0) huge |= __builtin_mul_overflow(count, static_cast<unsigned __int128>(d), &count);
      has_zero |= d == 0;
    }
    const std::string figure = huge ? std::string("more than 2^128") : ToDecimal(count);
    const std::string counted = has_zero
                                    ? fmt::format("{}: its non-zero dimensions multiply to {}",
                                                  leaf.ToString(false), figure)
                                    : fmt::format("{} has {}", leaf.ToString(false), figure);
    if (!CheckedElementCount(leaf)) {
      message = counted + " elements: more than fit in 64 bits";
    } else {
      message = fmt::format("{} elements of {} bytes: more bytes than fit in 64 bits", counted,
                            ByteWidth(leaf.element_type()));
    }
  });
  if (message.empty()) {
    message = fmt::format("the leaves of {} hold more bytes than fit in 64 bits",
                          shape.ToString(false));
  }
  return Error(message);
}

std::vector<int64_t> DefaultMinorToMajor(int64_t rank) {
  std::vector<int64_t> m2m(rank);
  for (int64_t i = 0; i < rank; ++i) m2m[i] = rank - 1 - i;
  return m2m;
}

}  // namespace shape_util

}  // namespace xlens
