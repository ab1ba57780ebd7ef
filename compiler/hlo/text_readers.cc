#include "compiler/hlo/text_readers.h"

#include <charconv>
#include <cmath>
#include <limits>

#include <fmt/format.h>

namespace xlens::text {

namespace {

// Bounds recursion on nested tuples and literals: broken input must not exhaust the stack.
constexpr int kMaxNesting = 64;

bool IsTextOnlyType(PrimitiveType type) {
  return IsF8OrSmallerFloat(type) && !IsEvaluatorSupportedType(type);
}

std::string_view ReadWhile(TextCursor& cursor, bool (*pred)(char)) {
  cursor.SkipWhitespace();
  size_t start = cursor.Here();
  std::string_view t = cursor.text();
  size_t p = start;
  while (p < t.size() && pred(t[p])) ++p;
  cursor.set_pos(p);
  return t.substr(start, p - start);
}

StatusOr<int64_t> ParseIntToken(TextCursor& cursor, std::string_view token, size_t pos,
                                std::string_view what) {
  int64_t v = 0;
  auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
  if (ec != std::errc() || ptr != token.data() + token.size()) {
    return cursor.ErrorAt(pos, fmt::format("expected an integer in {}, found '{}'", what, token));
  }
  return v;
}

// Splits `token` on `sep` into integers.
StatusOr<std::vector<int64_t>> SplitInts(TextCursor& cursor, std::string_view token, char sep,
                                         size_t pos, std::string_view what) {
  std::vector<int64_t> out;
  size_t start = 0;
  while (true) {
    size_t end = token.find(sep, start);
    std::string_view part = token.substr(start, end == std::string_view::npos ? end : end - start);
    ASSIGN_OR_RETURN(int64_t v, ParseIntToken(cursor, part, pos, what));
    out.push_back(v);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

StatusOr<Layout> ReadLayout(TextCursor& cursor, const Shape& shape) {
  size_t start = cursor.Here();
  cursor.set_pos(start + 1);  // '{'
  Layout layout;
  std::string_view t = cursor.text();
  while (true) {
    char c = cursor.Peek();
    if (c == '}' || c == ':') break;
    ASSIGN_OR_RETURN(int64_t dim, cursor.ReadInt64("a layout dimension"));
    layout.minor_to_major.push_back(dim);
    if (!cursor.TryConsume(',')) break;
  }
  if (cursor.TryConsume(':')) {
    size_t suffix_start = cursor.Here();
    int depth = 0;
    size_t p = suffix_start;
    while (p < t.size() && !(depth == 0 && t[p] == '}')) {
      if (t[p] == '(') ++depth;
      if (t[p] == ')') --depth;
      if (t[p] == '\n' || depth < 0) break;
      ++p;
    }
    layout.suffix = std::string(t.substr(suffix_start, p - suffix_start));
    cursor.set_pos(p);
  }
  if (!cursor.TryConsume('}')) {
    return cursor.Error(fmt::format("expected '}}' to close the layout of {}, found {}",
                                    shape.ToString(false), cursor.Describe()));
  }
  // minor_to_major must be a permutation of the dimensions (XLA allows it to be omitted only for
  // scalars, written as {} or {:T(...)}).
  std::vector<bool> seen(shape.rank(), false);
  bool ok = static_cast<int64_t>(layout.minor_to_major.size()) == shape.rank();
  for (int64_t d : layout.minor_to_major) {
    if (!ok || d < 0 || d >= shape.rank() || seen[d]) {
      ok = false;
      break;
    }
    seen[d] = true;
  }
  if (!ok) {
    return cursor.ErrorAt(start, fmt::format("layout {} is not a permutation of the {} dimensions "
                                             "of {}", layout.ToString(), shape.rank(),
                                             shape.ToString(false)));
  }
  return layout;
}

StatusOr<Shape> ReadShapeImpl(TextCursor& cursor, int depth) {
  if (depth > kMaxNesting) return cursor.Error("shape nesting is too deep");
  cursor.SkipWhitespace();
  if (cursor.TryConsume('(')) {
    std::vector<Shape> elements;
    if (!cursor.TryConsume(')')) {
      while (true) {
        ASSIGN_OR_RETURN(Shape element, ReadShapeImpl(cursor, depth + 1));
        elements.push_back(std::move(element));
        if (cursor.TryConsume(',')) continue;
        RETURN_IF_ERROR(cursor.Expect(')', "to close the tuple shape"));
        break;
      }
    }
    return Shape::Tuple(std::move(elements));
  }
  size_t start = cursor.Here();
  std::string_view type_name = cursor.ReadName();
  std::optional<PrimitiveType> type = ParsePrimitiveType(type_name);
  if (!type) {
    return cursor.ErrorAt(start, fmt::format("expected a shape such as f32[2,3], found {}",
                                             cursor.DescribeAt(start)));
  }
  std::string_view t = cursor.text();
  if (cursor.pos() >= t.size() || t[cursor.pos()] != '[') {
    return cursor.Error(fmt::format("expected '[' after the element type {}, found {}", type_name,
                                    cursor.DescribeAt(cursor.pos())));
  }
  cursor.set_pos(cursor.pos() + 1);
  std::vector<int64_t> dims;
  std::vector<bool> dynamic;
  if (!cursor.TryConsume(']')) {
    while (true) {
      bool is_dynamic = false;
      if (cursor.TryConsume('?')) {
        dims.push_back(Shape::kUnboundedSize);
        dynamic.push_back(true);
      } else {
        if (cursor.TryConsume("<=")) is_dynamic = true;
        size_t dim_pos = cursor.Here();
        ASSIGN_OR_RETURN(int64_t d, cursor.ReadInt64("a dimension size"));
        if (d < 0) return cursor.ErrorAt(dim_pos, fmt::format("dimension size {} is negative", d));
        dims.push_back(d);
        dynamic.push_back(is_dynamic);
      }
      if (cursor.TryConsume(',')) continue;
      if (!cursor.TryConsume(']')) {
        return cursor.Error(fmt::format("expected ',' or ']' in the dimensions of a shape, found {}",
                                        cursor.Describe()));
      }
      break;
    }
  }
  Shape shape(*type, dims);
  for (size_t i = 0; i < dynamic.size(); ++i) shape.set_dynamic_dimension(i, dynamic[i]);
  if (!shape.IsArray()) return shape;
  if (cursor.pos() < t.size() && t[cursor.pos()] == '{') {
    ASSIGN_OR_RETURN(Layout layout, ReadLayout(cursor, shape));
    shape.set_layout(std::move(layout));
  } else {
    shape.SetDefaultLayout();
  }
  return shape;
}

bool IsNumberChar(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
         c == '-' || c == '+';
}

Status ReadElement(TextCursor& cursor, Literal& lit, int64_t index) {
  PrimitiveType type = lit.shape().element_type();
  cursor.SkipWhitespace();
  size_t pos = cursor.Here();
  if (IsComplexType(type)) {
    RETURN_IF_ERROR(cursor.Expect('(', "to start a complex value (re, im)"));
    Literal part(Shape::Scalar(ComplexComponentType(type)));
    RETURN_IF_ERROR(ReadElement(cursor, part, 0));
    double re = part.GetAsDouble(0);
    RETURN_IF_ERROR(cursor.Expect(',', "between the parts of a complex value"));
    RETURN_IF_ERROR(ReadElement(cursor, part, 0));
    double im = part.GetAsDouble(0);
    RETURN_IF_ERROR(cursor.Expect(')', "to close a complex value"));
    lit.SetFromComplex(index, {re, im});
    return OkStatus();
  }
  std::string_view token = ReadWhile(cursor, IsNumberChar);
  if (token.empty()) {
    return cursor.ErrorAt(pos, fmt::format("unexpected {} token, expected a {} value",
                                           cursor.DescribeAt(pos), PrimitiveTypeName(type)));
  }
  auto out_of_range = [&]() {
    std::string upper(PrimitiveTypeName(type));
    for (char& c : upper) c = static_cast<char>(std::toupper(c));
    return cursor.ErrorAt(pos, fmt::format("constant {} is out of range for literal's primitive "
                                           "type {}", token, upper));
  };
  if (type == PrimitiveType::PRED) {
    if (token == "true" || token == "1") {
      lit.data<bool>()[index] = true;
    } else if (token == "false" || token == "0") {
      lit.data<bool>()[index] = false;
    } else {
      return cursor.ErrorAt(pos, fmt::format("expected true or false, found '{}'", token));
    }
    return OkStatus();
  }
  if (IsIntegralType(type)) {
    if (IsUnsignedIntegralType(type) && token[0] != '-') {
      uint64_t v = 0;
      auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
      if (ec == std::errc::result_out_of_range) return out_of_range();
      if (ec != std::errc() || ptr != token.data() + token.size()) {
        return cursor.ErrorAt(pos, fmt::format("expected an integer, found '{}'", token));
      }
      if (!FitsUnsignedType(v, type)) return out_of_range();
      if (ByteWidth(type) == 8) {
        lit.data<uint64_t>()[index] = v;
      } else {
        lit.SetFromInt64(index, static_cast<int64_t>(v));
        if (ByteWidth(type) == 1) lit.data<uint8_t>()[index] = static_cast<uint8_t>(v);
      }
      return OkStatus();
    }
    int64_t v = 0;
    auto [ptr, ec] = std::from_chars(token.data(), token.data() + token.size(), v);
    if (ec == std::errc::result_out_of_range) return out_of_range();
    if (ec != std::errc() || ptr != token.data() + token.size()) {
      return cursor.ErrorAt(pos, fmt::format("expected an integer, found '{}'", token));
    }
    if (!FitsIntegerType(v, type)) return out_of_range();
    if (ByteWidth(type) == 1) {
      lit.data<int8_t>()[index] = static_cast<int8_t>(v);  // also holds S4/U4-sized values
    } else {
      lit.SetFromInt64(index, v);
    }
    return OkStatus();
  }
  // Floating point.
  double v = 0;
  if (token == "inf" || token == "+inf") {
    v = std::numeric_limits<double>::infinity();
  } else if (token == "-inf") {
    v = -std::numeric_limits<double>::infinity();
  } else if (token == "nan" || token == "+nan") {
    v = std::numeric_limits<double>::quiet_NaN();
  } else if (token == "-nan") {
    v = -std::numeric_limits<double>::quiet_NaN();
  } else {
    std::string_view digits = token;
    if (!digits.empty() && digits[0] == '+') digits.remove_prefix(1);
    auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (ec == std::errc::result_out_of_range) return out_of_range();
    if (ec != std::errc() || ptr != digits.data() + digits.size()) {
      return cursor.ErrorAt(pos, fmt::format("expected a number, found '{}'", token));
    }
  }
  if (!FitsFloatType(v, type)) return out_of_range();
  lit.SetFromDouble(index, v);
  return OkStatus();
}

Status ReadArray(TextCursor& cursor, Literal& lit, int64_t dim, int64_t& next) {
  const Shape& shape = lit.shape();
  cursor.SkipWhitespace();
  size_t open_pos = cursor.Here();
  if (!cursor.TryConsume('{')) {
    return cursor.Error(fmt::format("unexpected {} token, expected '{{' to start dimension {} of "
                                    "the literal of {}", cursor.Describe(), dim,
                                    shape.ToString(false)));
  }
  int64_t n = shape.dimensions(dim);
  int64_t count = 0;
  if (!cursor.TryConsume('}')) {
    while (true) {
      if (count >= n) {
        return cursor.ErrorAt(open_pos, fmt::format("expects {} elements in dimension {} of the "
                                                    "literal of {}, found more", n, dim,
                                                    shape.ToString(false)));
      }
      if (dim + 1 == shape.rank()) {
        RETURN_IF_ERROR(ReadElement(cursor, lit, next++));
      } else {
        RETURN_IF_ERROR(ReadArray(cursor, lit, dim + 1, next));
      }
      ++count;
      if (cursor.TryConsume(',')) continue;
      if (!cursor.TryConsume('}')) {
        return cursor.Error(fmt::format("expected ',' or '}}' in the literal, found {}",
                                        cursor.Describe()));
      }
      break;
    }
  }
  if (count != n) {
    return cursor.ErrorAt(open_pos, fmt::format("expects {} elements in dimension {} of the "
                                                "literal of {}, found {}", n, dim,
                                                shape.ToString(false), count));
  }
  return OkStatus();
}

StatusOr<Literal> ReadLiteralImpl(TextCursor& cursor, const Shape& shape, int depth) {
  if (depth > kMaxNesting) return cursor.Error("literal nesting is too deep");
  if (shape.IsTuple()) {
    RETURN_IF_ERROR(cursor.Expect('(', "to start a tuple literal"));
    std::vector<Literal> elements;
    for (int64_t i = 0; i < shape.tuple_shapes_size(); ++i) {
      if (i > 0) RETURN_IF_ERROR(cursor.Expect(',', "between tuple literal elements"));
      ASSIGN_OR_RETURN(Literal e, ReadLiteralImpl(cursor, shape.tuple_shapes(i), depth + 1));
      elements.push_back(std::move(e));
    }
    RETURN_IF_ERROR(cursor.Expect(')', "to close the tuple literal"));
    Literal lit = Literal::MakeTuple(std::move(elements));
    return lit;
  }
  if (!shape.IsArray()) {
    return cursor.Error(fmt::format("a constant cannot have shape {}", shape.ToString()));
  }
  if (!shape.is_static()) {
    return cursor.Error(fmt::format("a constant needs a static shape, found {}", shape.ToString()));
  }
  if (cursor.TryConsume("{...}")) return Literal::CreateElided(shape);
  if (IsTextOnlyType(shape.element_type())) {
    cursor.SkipWhitespace();
    size_t start = cursor.Here();
    ASSIGN_OR_RETURN(std::string_view raw, cursor.ReadRawValue());
    if (raw.empty()) return cursor.ErrorAt(start, "expected a literal");
    return Literal::CreateFromText(shape, std::string(raw));
  }
  // Refuse absurd sizes before allocating: every element needs at least one character of text.
  int64_t elements = 1;
  for (int64_t d : shape.dimensions()) {
    if (d != 0 && elements > std::numeric_limits<int64_t>::max() / d) elements = -1;
    if (elements >= 0) elements *= d;
  }
  if (elements < 0 || elements > static_cast<int64_t>(cursor.text().size())) {
    return cursor.Error(fmt::format("the literal of {} would need more elements than the text "
                                    "holds", shape.ToString(false)));
  }
  Literal lit(shape);
  if (shape.rank() == 0) {
    RETURN_IF_ERROR(ReadElement(cursor, lit, 0));
    return lit;
  }
  int64_t next = 0;
  RETURN_IF_ERROR(ReadArray(cursor, lit, 0, next));
  return lit;
}

}  // namespace

bool AtShape(TextCursor& cursor) {
  char c = cursor.Peek();
  if (c == '(') return true;
  size_t start = cursor.Here();
  std::string_view name = cursor.ReadName();
  bool is_shape = false;
  if (!name.empty() && cursor.text()[start] != '%' && ParsePrimitiveType(name).has_value()) {
    is_shape = cursor.pos() < cursor.text().size() && cursor.text()[cursor.pos()] == '[';
  }
  cursor.set_pos(start);
  return is_shape;
}

StatusOr<Shape> ReadShape(TextCursor& cursor, std::string_view owner) {
  cursor.SkipWhitespace();
  const size_t start = cursor.Here();
  ASSIGN_OR_RETURN(Shape shape, ReadShapeImpl(cursor, 0));
  // Checked once for the whole shape: a tuple's leaves may each fit while their sum does not.
  if (Status size = shape_util::CheckShapeSize(shape); !size.ok()) {
    return cursor.ErrorAt(start, owner.empty() ? size.message()
                                               : fmt::format("the shape of {}: {}", owner,
                                                             size.message()));
  }
  return shape;
}

StatusOr<Literal> ReadLiteral(TextCursor& cursor, const Shape& shape) {
  return ReadLiteralImpl(cursor, shape, 0);
}

StatusOr<std::vector<int64_t>> ReadIntList(TextCursor& cursor, std::string_view what) {
  RETURN_IF_ERROR(cursor.Expect('{', fmt::format("to start the list of {}", what)));
  std::vector<int64_t> out;
  if (cursor.TryConsume('}')) return out;
  while (true) {
    ASSIGN_OR_RETURN(int64_t v, cursor.ReadInt64(what));
    out.push_back(v);
    if (cursor.TryConsume(',')) continue;
    if (cursor.TryConsume('}')) return out;
    return cursor.Error(fmt::format("expected ',' or '}}' in the list of {}, found {}", what,
                                    cursor.Describe()));
  }
}

Status ReadSlice(TextCursor& cursor, std::vector<int64_t>& starts, std::vector<int64_t>& limits,
                 std::vector<int64_t>& strides) {
  RETURN_IF_ERROR(cursor.Expect('{', "to start slice={[start:limit:stride], ...}"));
  if (cursor.TryConsume('}')) return OkStatus();
  while (true) {
    RETURN_IF_ERROR(cursor.Expect('[', "to start a slice dimension [start:limit]"));
    ASSIGN_OR_RETURN(int64_t start, cursor.ReadInt64("a slice start"));
    RETURN_IF_ERROR(cursor.Expect(':', "between slice start and limit"));
    ASSIGN_OR_RETURN(int64_t limit, cursor.ReadInt64("a slice limit"));
    int64_t stride = 1;
    if (cursor.TryConsume(':')) {
      ASSIGN_OR_RETURN(stride, cursor.ReadInt64("a slice stride"));
    }
    RETURN_IF_ERROR(cursor.Expect(']', "to close a slice dimension"));
    starts.push_back(start);
    limits.push_back(limit);
    strides.push_back(stride);
    if (cursor.TryConsume(',')) continue;
    return cursor.Expect('}', "to close slice={...}");
  }
}

namespace {

bool IsWindowValueChar(char c) { return (c >= '0' && c <= '9') || c == 'x' || c == '_' || c == '-'; }

}  // namespace

StatusOr<Window> ReadWindow(TextCursor& cursor) {
  RETURN_IF_ERROR(cursor.Expect('{', "to start window={...}"));
  Window window;
  auto ensure_rank = [&](size_t n, size_t pos) -> Status {
    if (window.dimensions.empty()) window.dimensions.resize(n);
    if (window.dimensions.size() != n) {
      return cursor.ErrorAt(pos, fmt::format("window fields disagree on the number of dimensions "
                                             "({} vs {})", window.dimensions.size(), n));
    }
    return OkStatus();
  };
  while (!cursor.TryConsume('}')) {
    if (cursor.AtEnd()) return cursor.Error("expected '}' to close window={...}");
    size_t key_pos = cursor.Here();
    std::string_view key = cursor.ReadKey();
    if (key.empty()) {
      return cursor.Error(fmt::format("expected a window field (size, stride, pad, lhs_dilate, "
                                      "rhs_dilate, rhs_reversal), found {}", cursor.Describe()));
    }
    RETURN_IF_ERROR(cursor.Expect('=', fmt::format("after window field {}", key)));
    size_t value_pos = cursor.Here();
    std::string_view value = ReadWhile(cursor, IsWindowValueChar);
    if (value.empty()) {
      return cursor.Error(fmt::format("expected a value for window field {}, found {}", key,
                                      cursor.Describe()));
    }
    // Dimensions are separated by 'x'; a negative value has a '-' but never an 'x'.
    std::vector<std::string_view> parts;
    size_t s = 0;
    while (true) {
      size_t e = value.find('x', s);
      parts.push_back(value.substr(s, e == std::string_view::npos ? e : e - s));
      if (e == std::string_view::npos) break;
      s = e + 1;
    }
    RETURN_IF_ERROR(ensure_rank(parts.size(), value_pos));
    for (size_t i = 0; i < parts.size(); ++i) {
      WindowDimension& d = window.dimensions[i];
      if (key == "pad") {
        ASSIGN_OR_RETURN(std::vector<int64_t> lh, SplitInts(cursor, parts[i], '_', value_pos, "pad"));
        if (lh.size() != 2) {
          return cursor.ErrorAt(value_pos, "expects padding_low and padding_high separated by '_'");
        }
        d.padding_low = lh[0];
        d.padding_high = lh[1];
        continue;
      }
      ASSIGN_OR_RETURN(int64_t v, ParseIntToken(cursor, parts[i], value_pos, key));
      if (key == "size") {
        d.size = v;
      } else if (key == "stride") {
        d.stride = v;
      } else if (key == "lhs_dilate") {
        d.base_dilation = v;
      } else if (key == "rhs_dilate") {
        d.window_dilation = v;
      } else if (key == "rhs_reversal") {
        d.window_reversal = v != 0;
      } else {
        return cursor.ErrorAt(key_pos, fmt::format("unknown window field '{}' (expected size, "
                                                   "stride, pad, lhs_dilate, rhs_dilate, "
                                                   "rhs_reversal)", key));
      }
    }
  }
  return window;
}

StatusOr<PaddingConfig> ReadPaddingConfig(TextCursor& cursor) {
  size_t pos = cursor.Here();
  std::string_view value = ReadWhile(cursor, IsWindowValueChar);
  if (value.empty()) {
    return cursor.Error(fmt::format("expected padding such as 0_0x1_1, found {}", cursor.Describe()));
  }
  PaddingConfig config;
  size_t s = 0;
  while (true) {
    size_t e = value.find('x', s);
    std::string_view part = value.substr(s, e == std::string_view::npos ? e : e - s);
    ASSIGN_OR_RETURN(std::vector<int64_t> v, SplitInts(cursor, part, '_', pos, "padding"));
    if (v.size() != 2 && v.size() != 3) {
      return cursor.ErrorAt(pos, "expects padding as low_high or low_high_interior per dimension");
    }
    config.dimensions.push_back({v[0], v[1], v.size() == 3 ? v[2] : 0});
    if (e == std::string_view::npos) break;
    s = e + 1;
  }
  return config;
}

StatusOr<ConvolutionDimensionNumbers> ReadDimLabels(TextCursor& cursor) {
  cursor.SkipWhitespace();
  size_t pos = cursor.Here();
  std::string_view value = ReadWhile(cursor, [](char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || c == '_' || c == '-' || c == '>';
  });
  size_t underscore = value.find('_');
  size_t arrow = value.find("->");
  if (underscore == std::string_view::npos || arrow == std::string_view::npos || arrow < underscore) {
    return cursor.ErrorAt(pos, fmt::format("expected dim_labels such as b01f_01io->b01f, found '{}'",
                                           value));
  }
  std::string_view lhs = value.substr(0, underscore);
  std::string_view rhs = value.substr(underscore + 1, arrow - underscore - 1);
  std::string_view out = value.substr(arrow + 2);
  if (lhs.size() != rhs.size() || lhs.size() != out.size() || lhs.size() < 2) {
    return cursor.ErrorAt(pos, fmt::format("dim_labels '{}' must give the same rank (at least 2) "
                                           "to input, kernel and output", value));
  }
  size_t spatial = lhs.size() - 2;
  ConvolutionDimensionNumbers dnums;
  dnums.input_spatial_dimensions.assign(spatial, -1);
  dnums.kernel_spatial_dimensions.assign(spatial, -1);
  dnums.output_spatial_dimensions.assign(spatial, -1);
  auto parse_part = [&](std::string_view labels, char a, char b, int64_t& a_dim, int64_t& b_dim,
                        std::vector<int64_t>& spatial_dims, std::string_view part) -> Status {
    a_dim = b_dim = -1;
    for (size_t i = 0; i < labels.size(); ++i) {
      char c = labels[i];
      int64_t dim = static_cast<int64_t>(i);
      if (c == a && a_dim < 0) {
        a_dim = dim;
      } else if (c == b && b_dim < 0) {
        b_dim = dim;
      } else if (c >= '0' && c <= '9' && static_cast<size_t>(c - '0') < spatial &&
                 spatial_dims[c - '0'] < 0) {
        spatial_dims[c - '0'] = dim;
      } else {
        return cursor.ErrorAt(pos, fmt::format("invalid {} labels '{}' in dim_labels: expected "
                                               "'{}', '{}' and the spatial digits 0..{} once each",
                                               part, labels, a, b, spatial == 0 ? 0 : spatial - 1));
      }
    }
    if (a_dim < 0 || b_dim < 0) {
      return cursor.ErrorAt(pos, fmt::format("{} labels '{}' must contain '{}' and '{}'", part,
                                             labels, a, b));
    }
    return OkStatus();
  };
  RETURN_IF_ERROR(parse_part(lhs, 'b', 'f', dnums.input_batch_dimension,
                             dnums.input_feature_dimension, dnums.input_spatial_dimensions, "input"));
  RETURN_IF_ERROR(parse_part(rhs, 'i', 'o', dnums.kernel_input_feature_dimension,
                             dnums.kernel_output_feature_dimension, dnums.kernel_spatial_dimensions,
                             "kernel"));
  RETURN_IF_ERROR(parse_part(out, 'b', 'f', dnums.output_batch_dimension,
                             dnums.output_feature_dimension, dnums.output_spatial_dimensions,
                             "output"));
  return dnums;
}

StatusOr<OpMetadata> ReadMetadata(TextCursor& cursor) {
  RETURN_IF_ERROR(cursor.Expect('{', "to start metadata={...}"));
  OpMetadata metadata;
  while (!cursor.TryConsume('}')) {
    if (cursor.AtEnd()) return cursor.Error("expected '}' to close metadata={...}");
    std::string_view key = cursor.ReadKey();
    if (key.empty()) {
      return cursor.Error(fmt::format("expected a metadata field such as op_name=\"...\", found {}",
                                      cursor.Describe()));
    }
    RETURN_IF_ERROR(cursor.Expect('=', fmt::format("after metadata field {}", key)));
    if (key == "op_type") {
      ASSIGN_OR_RETURN(metadata.op_type, cursor.ReadString());
    } else if (key == "op_name") {
      ASSIGN_OR_RETURN(metadata.op_name, cursor.ReadString());
    } else if (key == "source_file") {
      ASSIGN_OR_RETURN(metadata.source_file, cursor.ReadString());
    } else if (key == "source_line") {
      ASSIGN_OR_RETURN(int64_t line, cursor.ReadInt64("source_line"));
      metadata.source_line = line;
    } else if (key == "stack_frame_id") {
      size_t pos = cursor.Here();
      ASSIGN_OR_RETURN(int64_t id, cursor.ReadInt64("stack_frame_id"));
      // 0 is XLA's "no frame"; the ids of the table start at 1.
      if (id < 0) return cursor.ErrorAt(pos, fmt::format("stack_frame_id must not be negative, found {}", id));
      metadata.stack_frame_id = id;
    } else {
      ASSIGN_OR_RETURN(std::string_view raw, cursor.ReadRawValue());
      metadata.other.emplace_back(std::string(key), std::string(raw));
    }
  }
  return metadata;
}

StatusOr<bool> ReadBool(TextCursor& cursor, std::string_view what) {
  if (cursor.TryConsumeWord("true")) return true;
  if (cursor.TryConsumeWord("false")) return false;
  return cursor.Error(fmt::format("expected true or false for {}, found {}", what, cursor.Describe()));
}

}  // namespace xlens::text
