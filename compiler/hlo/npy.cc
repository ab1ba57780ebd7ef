#include "compiler/hlo/npy.h"

#include <bit>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"

namespace xlens {
namespace {

// Elements are copied to and from the file as they lie in memory.
static_assert(std::endian::native == std::endian::little,
              ".npy data is read and written as little-endian host memory");

constexpr std::string_view kMagic = "\x93NUMPY";
// numpy.lib.format's constants: data starts at a multiple of kArrayAlign, and a header leaves
// room to rewrite the growth axis with up to kGrowthAxisMaxDigits digits in place.
constexpr size_t kArrayAlign = 64;
constexpr size_t kGrowthAxisMaxDigits = 21;
// Python literals in a header nest two levels deep (a dict holding a tuple); structured dtypes
// nest a little deeper. Anything deeper is not a header, and bounding it bounds the recursion.
constexpr int kMaxNesting = 16;

// The types .npy and xlens share, with the dtype code numpy writes for each.
struct DtypeCode {
  PrimitiveType type;
  std::string_view descr;
};
constexpr DtypeCode kDtypeCodes[] = {
    {PrimitiveType::PRED, "|b1"}, {PrimitiveType::S8, "|i1"},   {PrimitiveType::S16, "<i2"},
    {PrimitiveType::S32, "<i4"},  {PrimitiveType::S64, "<i8"},  {PrimitiveType::U8, "|u1"},
    {PrimitiveType::U16, "<u2"},  {PrimitiveType::U32, "<u4"},  {PrimitiveType::U64, "<u8"},
    {PrimitiveType::F16, "<f2"},  {PrimitiveType::F32, "<f4"},  {PrimitiveType::F64, "<f8"},
    {PrimitiveType::C64, "<c8"},  {PrimitiveType::C128, "<c16"},
};

// The dtype code of `type`, or empty when .npy has none.
std::string_view TypeToDescr(PrimitiveType type) {
  for (const DtypeCode& code : kDtypeCodes) {
    if (code.type == type) return code.descr;
  }
  return {};
}

// The subset of Python literals numpy.save writes in a header.
struct PyValue {
  enum class Kind { kString, kInt, kBool, kNone, kTuple, kList, kDict };
  Kind kind = Kind::kNone;
  std::string text;    // kString
  int64_t integer = 0;  // kInt
  bool boolean = false;  // kBool
  std::vector<PyValue> items;  // kTuple, kList; kDict: alternating keys and values
};

std::string_view KindName(PyValue::Kind kind) {
  switch (kind) {
    case PyValue::Kind::kString: return "a string";
    case PyValue::Kind::kInt: return "an integer";
    case PyValue::Kind::kBool: return "a boolean";
    case PyValue::Kind::kNone: return "None";
    case PyValue::Kind::kTuple: return "a tuple";
    case PyValue::Kind::kList: return "a list";
    case PyValue::Kind::kDict: return "a dict";
  }
  return "a value";
}

// Recursive descent over the header text. Errors say what was expected at which offset.
class HeaderParser {
 public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  StatusOr<PyValue> ParseWhole() {
    ASSIGN_OR_RETURN(PyValue value, Parse(0));
    SkipSpace();
    if (pos_ != text_.size()) return Fail("the end of the header after its value");
    return value;
  }

 private:
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  Status Fail(std::string_view expected) const {
    std::string found = pos_ < text_.size()
                            ? fmt::format("'{}'", EscapeForMessage(text_.substr(pos_, 12)))
                            : std::string("the end of the header");
    return Error(fmt::format("offset {}: expected {}, found {}", pos_, expected, found));
  }

  static std::string EscapeForMessage(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c >= 0x20 && c < 0x7f) {
        out += c;
      } else {
        out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
      }
    }
    return out;
  }

  bool Consume(char c) {
    SkipSpace();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  bool ConsumeWord(std::string_view word) {
    if (text_.substr(pos_, word.size()) != word) return false;
    size_t end = pos_ + word.size();
    if (end < text_.size() && (std::isalnum(static_cast<unsigned char>(text_[end])) ||
                               text_[end] == '_')) {
      return false;
    }
    pos_ = end;
    return true;
  }

  StatusOr<PyValue> Parse(int depth) {
    if (depth > kMaxNesting) {
      return Fail(fmt::format("at most {} levels of nesting", kMaxNesting));
    }
    SkipSpace();
    if (pos_ >= text_.size()) return Fail("a value");
    char c = text_[pos_];
    PyValue value;
    if (c == '\'' || c == '"') {
      value.kind = PyValue::Kind::kString;
      ASSIGN_OR_RETURN(value.text, ParseString());
      return value;
    }
    if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) return ParseInt();
    if (ConsumeWord("True")) {
      value.kind = PyValue::Kind::kBool;
      value.boolean = true;
      return value;
    }
    if (ConsumeWord("False")) {
      value.kind = PyValue::Kind::kBool;
      return value;
    }
    if (ConsumeWord("None")) return value;
    if (c == '(' || c == '[') {
      ++pos_;
      value.kind = c == '(' ? PyValue::Kind::kTuple : PyValue::Kind::kList;
      char close = c == '(' ? ')' : ']';
      bool saw_comma = false;
      while (!Consume(close)) {
        if (!value.items.empty() && !saw_comma) return Fail(fmt::format("',' or '{}'", close));
        ASSIGN_OR_RETURN(PyValue item, Parse(depth + 1));
        value.items.push_back(std::move(item));
        saw_comma = Consume(',');
      }
      // "(3)" is a parenthesised integer in Python, not a tuple.
      if (value.kind == PyValue::Kind::kTuple && value.items.size() == 1 && !saw_comma) {
        PyValue inner = std::move(value.items[0]);
        return inner;
      }
      return value;
    }
    if (c == '{') {
      ++pos_;
      value.kind = PyValue::Kind::kDict;
      bool saw_comma = true;
      while (!Consume('}')) {
        if (!saw_comma) return Fail("',' or '}'");
        ASSIGN_OR_RETURN(PyValue key, Parse(depth + 1));
        if (!Consume(':')) return Fail("':' after a dict key");
        ASSIGN_OR_RETURN(PyValue item, Parse(depth + 1));
        value.items.push_back(std::move(key));
        value.items.push_back(std::move(item));
        saw_comma = Consume(',');
      }
      return value;
    }
    return Fail("a Python literal (string, integer, True, False, tuple, list or dict)");
  }

  StatusOr<std::string> ParseString() {
    char quote = text_[pos_++];
    std::string out;
    while (pos_ < text_.size() && text_[pos_] != quote) {
      char c = text_[pos_++];
      if (c == '\\' && pos_ < text_.size()) c = text_[pos_++];
      out += c;
    }
    if (pos_ >= text_.size()) return Fail("the closing quote of a string");
    ++pos_;
    return out;
  }

  StatusOr<PyValue> ParseInt() {
    size_t start = pos_;
    bool negative = text_[pos_] == '-';
    if (negative) ++pos_;
    if (pos_ >= text_.size() || !std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      return Fail("digits");
    }
    // Accumulate the magnitude as unsigned so that an overlong number is caught before it wraps.
    uint64_t magnitude = 0;
    constexpr uint64_t kLimit = std::numeric_limits<int64_t>::max();
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      uint64_t digit = text_[pos_] - '0';
      if (magnitude > (kLimit - digit) / 10) {
        pos_ = start;
        return Fail("an integer that fits in 64 bits");
      }
      magnitude = magnitude * 10 + digit;
      ++pos_;
    }
    // Python 2 wrote long integers with an 'L' suffix ("(3L, 4L)").
    if (pos_ < text_.size() && (text_[pos_] == 'L' || text_[pos_] == 'l')) ++pos_;
    PyValue value;
    value.kind = PyValue::Kind::kInt;
    value.integer = negative ? -static_cast<int64_t>(magnitude) : static_cast<int64_t>(magnitude);
    return value;
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// Text from the header as a message shows it: escaped (it reaches a terminal) and cut short (a
// header may hold a megabyte-long dtype or key).
std::string HeaderText(std::string_view text) {
  constexpr size_t kShown = 64;
  std::string_view shown = TruncateUtf8(text, kShown);
  return EscapeForTerminal(shown) + (shown.size() < text.size() ? "..." : "");
}

// Maps a dtype descr to a PrimitiveType, or explains why it cannot.
StatusOr<PrimitiveType> DescrToType(const std::string& descr) {
  for (const DtypeCode& code : kDtypeCodes) {
    if (descr == code.descr) return code.type;
  }
  std::string_view body = descr.empty() ? std::string_view() : std::string_view(descr).substr(1);
  char order = descr.empty() ? '\0' : descr[0];
  // A one-byte type has no byte order; numpy writes '|' but '<' means the same.
  if (order == '<' && (body == "b1" || body == "i1" || body == "u1")) {
    return DescrToType(std::string("|") + std::string(body));
  }
  if (order == '>' || order == '=') {
    for (const DtypeCode& code : kDtypeCodes) {
      if (code.descr.substr(1) != body) continue;
      if (code.descr[0] == '|') return code.type;
      if (order == '>') {
        return Error(fmt::format(
            "big-endian dtype '{}' is not supported; save the array as '<{}' "
            "(array.astype('<{}'))",
            HeaderText(descr), body, body));
      }
      return Error(fmt::format(
          "dtype '{}' has native byte order, which a file cannot state; expected '<{}'",
          HeaderText(descr), body));
    }
  }
  if (!body.empty() && body[0] == 'V') {
    if (descr == "<V2") {
      return Error(
          "dtype '<V2' is an opaque two-byte type: ml_dtypes saves bfloat16 this way, but so "
          "does any other two-byte extension type, so its elements cannot be read unambiguously; "
          "save bfloat16 arrays as float32 (array.astype('float32'))");
    }
    return Error(
        fmt::format("dtype '{}' is an opaque (void) type, not a numeric one", HeaderText(descr)));
  }
  if (!body.empty() && body[0] == 'O') {
    return Error("object arrays (pickled Python objects) are not supported");
  }
  std::string supported;
  for (const DtypeCode& code : kDtypeCodes) {
    if (!supported.empty()) supported += ", ";
    supported += code.descr;
  }
  return Error(
      fmt::format("unsupported dtype '{}' (expected one of {})", HeaderText(descr), supported));
}

std::string ShapeToPython(const std::vector<int64_t>& dims) {
  if (dims.size() == 1) return fmt::format("({},)", dims[0]);
  return fmt::format("({})", fmt::join(dims, ", "));
}

struct Header {
  PrimitiveType type;
  std::vector<int64_t> dims;
};

StatusOr<Header> InterpretHeader(const PyValue& dict) {
  if (dict.kind != PyValue::Kind::kDict) {
    return Error(fmt::format("the header is {}, expected a dict", KindName(dict.kind)));
  }
  const PyValue* descr = nullptr;
  const PyValue* fortran_order = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    const PyValue* value = &dict.items[i + 1];
    if (key.kind != PyValue::Kind::kString) {
      return Error(fmt::format("header key is {}, expected a string", KindName(key.kind)));
    }
    const PyValue** slot = key.text == "descr"           ? &descr
                           : key.text == "fortran_order" ? &fortran_order
                           : key.text == "shape"         ? &shape
                                                         : nullptr;
    if (slot == nullptr) {
      return Error(fmt::format(
          "unexpected header key '{}' (expected only 'descr', 'fortran_order' and 'shape')",
          HeaderText(key.text)));
    }
    if (*slot != nullptr) return Error(fmt::format("header key '{}' appears twice", HeaderText(key.text)));
    *slot = value;
  }
  for (auto [value, key] : {std::pair{descr, "descr"}, std::pair{fortran_order, "fortran_order"},
                            std::pair{shape, "shape"}}) {
    if (value == nullptr) return Error(fmt::format("the header lacks the key '{}'", key));
  }

  if (descr->kind == PyValue::Kind::kList) {
    return Error("structured dtypes (records with named fields) are not supported");
  }
  if (descr->kind != PyValue::Kind::kString) {
    return Error(fmt::format("'descr' is {}, expected a dtype string such as '<f4'",
                             KindName(descr->kind)));
  }
  if (fortran_order->kind != PyValue::Kind::kBool) {
    return Error(fmt::format("'fortran_order' is {}, expected True or False",
                             KindName(fortran_order->kind)));
  }
  if (fortran_order->boolean) {
    return Error(
        "Fortran-order (column-major) arrays are not supported; save a C-order array "
        "(numpy.ascontiguousarray)");
  }
  if (shape->kind != PyValue::Kind::kTuple) {
    return Error(fmt::format("'shape' is {}, expected a tuple of integers",
                             KindName(shape->kind)));
  }

  Header header;
  ASSIGN_OR_RETURN(header.type, DescrToType(descr->text));
  for (const PyValue& dim : shape->items) {
    if (dim.kind != PyValue::Kind::kInt || dim.integer < 0) {
      return Error("'shape' must hold non-negative integers");
    }
    header.dims.push_back(dim.integer);
  }
  return header;
}

StatusOr<Literal> ParseNpyOrError(std::string_view bytes) {
  if (bytes.size() < kMagic.size() || bytes.substr(0, kMagic.size()) != kMagic) {
    return Error("not a .npy file: expected the magic string \\x93NUMPY at its start");
  }
  if (bytes.size() < kMagic.size() + 2) return Error("truncated: the file ends in its magic");
  int major = static_cast<unsigned char>(bytes[6]);
  int minor = static_cast<unsigned char>(bytes[7]);
  if (minor != 0 || major < 1 || major > 3) {
    return Error(fmt::format(
        "unsupported .npy format version {}.{} (expected 1.0, 2.0 or 3.0)", major, minor));
  }
  // Version 1.0 stores the header length in two bytes, later versions in four.
  size_t length_bytes = major == 1 ? 2 : 4;
  size_t header_start = kMagic.size() + 2 + length_bytes;
  if (bytes.size() < header_start) {
    return Error("truncated: the file ends inside the header length");
  }
  uint64_t header_length = 0;
  for (size_t i = 0; i < length_bytes; ++i) {
    header_length |= uint64_t{static_cast<unsigned char>(bytes[8 + i])} << (8 * i);
  }
  if (header_length > bytes.size() - header_start) {
    return Error(fmt::format(
        "truncated: the header is {} bytes long but only {} bytes follow its length",
        header_length, bytes.size() - header_start));
  }
  std::string_view header_text = bytes.substr(header_start, header_length);
  PyValue dict;
  {
    StatusOr<PyValue> parsed = HeaderParser(header_text).ParseWhole();
    if (!parsed.ok()) return parsed.status().WithContext("malformed header");
    dict = std::move(parsed).value();
  }
  ASSIGN_OR_RETURN(Header header, InterpretHeader(dict));

  // Checked against the bytes present before anything is allocated, so a header that claims
  // an absurd shape costs nothing. Zero-sized dimensions are skipped so that (2**40, 2**40, 0)
  // is still refused: no shape with an overflowing product reaches Shape.
  std::string_view data = bytes.substr(header_start + header_length);
  uint64_t item_size = ByteWidth(header.type);
  uint64_t nonzero_product = 1;
  bool has_zero = false;
  for (int64_t dim : header.dims) {
    if (dim == 0) {
      has_zero = true;
      continue;
    }
    if (nonzero_product > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) /
                              static_cast<uint64_t>(dim)) {
      return Error(fmt::format("shape {} has more elements than fit in 64 bits",
                               ShapeToPython(header.dims)));
    }
    nonzero_product *= static_cast<uint64_t>(dim);
  }
  uint64_t count = has_zero ? 0 : nonzero_product;
  std::string_view descr = TypeToDescr(header.type);
  if (count > data.size() / item_size) {
    return Error(fmt::format(
        "truncated data: shape {} of '{}' needs {} elements of {} bytes, but {} bytes follow "
        "the header",
        ShapeToPython(header.dims), descr, count, item_size, data.size()));
  }
  if (count * item_size != data.size()) {
    return Error(fmt::format(
        "shape {} of '{}' needs {} data bytes, but {} bytes follow the header",
        ShapeToPython(header.dims), descr, count * item_size, data.size()));
  }

  Shape shape(header.type, header.dims);
  // C order is exactly the default (row-major) layout.
  shape.SetDefaultLayout();
  Literal literal(shape);
  if (!data.empty()) std::memcpy(literal.untyped_data(), data.data(), data.size());
  if (header.type == PrimitiveType::PRED) {
    // numpy reads any non-zero byte as True; a bool holding another value is undefined in C++.
    for (uint8_t* p = literal.untyped_data(); p != literal.untyped_data() + count; ++p) {
      *p = *p != 0;
    }
  }
  return literal;
}

}  // namespace

StatusOr<Literal> ParseNpy(std::string_view bytes, const std::string& name_for_errors) {
  StatusOr<Literal> literal = ParseNpyOrError(bytes);
  if (!literal.ok()) return literal.status().WithContext(name_for_errors);
  return literal;
}

StatusOr<Literal> ReadNpy(const std::string& path) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  return ParseNpy(bytes, path);
}

PrimitiveType NpyStoredType(PrimitiveType type) {
  using P = PrimitiveType;
  if (!TypeToDescr(type).empty()) return type;
  switch (type) {
    case P::BF16: case P::F8E5M2: case P::F8E4M3: case P::F8E3M4: case P::F8E4M3FN:
    case P::F8E4M3FNUZ: case P::F8E5M2FNUZ: case P::F8E4M3B11FNUZ:
      return P::F32;
    case P::S1: case P::S2: case P::S4:
      return P::S8;
    case P::U1: case P::U2: case P::U4:
      return P::U8;
    default:
      return P::PRIMITIVE_TYPE_INVALID;
  }
}

StatusOr<std::string> SerializeNpy(const Literal& literal) {
  const Shape& shape = literal.shape();
  if (!shape.IsArray()) {
    return Error(fmt::format("cannot write a {} literal to .npy: only arrays can be stored",
                             shape.ToString(false)));
  }
  if (literal.is_elided() || literal.is_text_only()) {
    return Error(fmt::format("cannot write the {} literal to .npy: its data is not held",
                             shape.ToString(false)));
  }
  if (!shape.is_static()) {
    return Error(fmt::format("cannot write the dynamic shape {} to .npy", shape.ToString(false)));
  }
  const PrimitiveType stored = NpyStoredType(shape.element_type());
  std::string_view descr = TypeToDescr(stored);
  if (descr.empty()) {
    return Error(fmt::format("cannot write {} to .npy: the format has no dtype for {}",
                             shape.ToString(false), PrimitiveTypeName(shape.element_type())));
  }

  // numpy.lib.format._write_array_header, so that files match numpy.save byte for byte.
  std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}",
                                 descr, ShapeToPython(shape.dimensions()));
  if (shape.rank() > 0) {
    dict.append(kGrowthAxisMaxDigits - std::to_string(shape.dimensions(0)).size(), ' ');
  }
  auto wrap = [&](int major, size_t length_bytes) -> std::optional<std::string> {
    size_t prefix = kMagic.size() + 2 + length_bytes;
    size_t padding = kArrayAlign - (prefix + dict.size() + 1) % kArrayAlign;
    uint64_t header_length = dict.size() + padding + 1;
    if (header_length >> (8 * length_bytes) != 0) return std::nullopt;
    std::string out(kMagic);
    out += static_cast<char>(major);
    out += '\0';
    for (size_t i = 0; i < length_bytes; ++i) {
      out += static_cast<char>((header_length >> (8 * i)) & 0xff);
    }
    out += dict;
    out.append(padding, ' ');
    out += '\n';
    return out;
  };
  std::optional<std::string> out = wrap(1, 2);
  if (!out) out = wrap(2, 4);
  if (shape.element_type() == PrimitiveType::BF16) {
    // A bf16 is the upper half of the float32 with the same value.
    const std::span<const uint16_t> bits = literal.data<uint16_t>();
    out->reserve(out->size() + bits.size() * sizeof(uint32_t));
    for (uint16_t b : bits) {
      const uint32_t widened = uint32_t{b} << 16;
      out->append(reinterpret_cast<const char*>(&widened), sizeof(widened));
    }
  } else if (const float* values = Float8ValueTable(shape.element_type())) {
    // Every 8-bit float is a float32 (NaN keeps its sign: the fnuz NaN 0x80 reads back as -nan).
    const std::span<const uint8_t> bits = literal.data<uint8_t>();
    out->reserve(out->size() + bits.size() * sizeof(float));
    for (uint8_t b : bits) out->append(reinterpret_cast<const char*>(&values[b]), sizeof(float));
  } else {
    // Sub-byte integers are already held one per byte, sign- or zero-extended.
    out->append(reinterpret_cast<const char*>(literal.untyped_data()), literal.size_bytes());
  }
  return *std::move(out);
}

Status WriteNpy(const std::string& path, const Literal& literal) {
  StatusOr<std::string> bytes = SerializeNpy(literal);
  if (!bytes.ok()) return bytes.status().WithContext(path);
  return WriteFileAtomic(path, *bytes);
}

}  // namespace xlens
