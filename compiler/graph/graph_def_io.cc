#include "compiler/graph/graph_def_io.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/stubs/logging.h>
#include <google/protobuf/text_format.h>
#include <zlib.h>

#include <algorithm>
#include <bit>
#include <climits>
#include <complex>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "compiler/graph/proto/graph.pb.h"
#include "compiler/support/file_io.h"
#include "compiler/support/protobuf_text_error.h"
#include "compiler/support/terminal_text.h"

namespace xlens::graph {
namespace {

namespace pb = ::google::protobuf;
namespace tfp = ::xlens::tfproto;

static_assert(std::endian::native == std::endian::little,
              "tensor_content is little endian and is copied as it is");

// ---------------------------------------------------------------------------------------------
// Messages

// Protobuf names our messages "xlens.tfproto.NodeDef"; users know them as TensorFlow's.
std::string TensorFlowNames(std::string text) {
  static const std::string kOurs = "xlens.tfproto.";
  for (size_t at = text.find(kOurs); at != std::string::npos; at = text.find(kOurs, at)) {
    text.replace(at, kOurs.size(), "tensorflow.");
  }
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

// "node 'x' (Const)" for messages.
std::string NodeContext(const std::string& name, const std::string& op) {
  return "node '" + DisplayText(name) + "' (" + DisplayText(op) + ")";
}

bool IsValidUtf8(std::string_view s) {
  static const uint32_t kMin[] = {0, 0x80, 0x800, 0x10000};
  size_t i = 0;
  while (i < s.size()) {
    const unsigned char c = s[i];
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    if (extra < 0 || i + extra >= s.size() + (extra == 0)) return false;
    uint32_t code = extra == 0 ? c : c & (0x3f >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char cc = s[i + k];
      if ((cc & 0xc0) != 0x80) return false;
      code = (code << 6) | (cc & 0x3f);
    }
    if (code < kMin[extra] || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return false;
    i += extra + 1;
  }
  return true;
}

// Protobuf reports some failures (a string field that is not UTF-8) only through its log. While
// a parse runs on this thread its log lines are collected here and become part of our message;
// at other times they go where they went before.
thread_local std::string* captured_log = nullptr;
pb::LogHandler* previous_log_handler = nullptr;

void CaptureLog(pb::LogLevel level, const char* filename, int line, const std::string& message) {
  if (captured_log != nullptr) {
    if (!captured_log->empty()) *captured_log += "; ";
    *captured_log += message;
    return;
  }
  if (previous_log_handler != nullptr) previous_log_handler(level, filename, line, message);
}

class LogCapture {
 public:
  LogCapture() {
    static std::once_flag once;
    std::call_once(once, [] { previous_log_handler = pb::SetLogHandler(&CaptureLog); });
    captured_log = &text_;
  }
  ~LogCapture() { captured_log = nullptr; }
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};

Status ParseMessage(std::string_view bytes, GraphDefFormat format, const std::string& name,
                    pb::Message* message) {
  const std::string what = message->GetDescriptor()->name();  // "GraphDef", "FunctionDef"
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Error(name + ": " + FormatBytes(static_cast<int64_t>(bytes.size())) +
                 " is more than a protocol buffer can hold (2 GiB)");
  }
  if (format == GraphDefFormat::kAuto) format = SniffGraphDefFormat(bytes);
  LogCapture log;
  if (format == GraphDefFormat::kBinary) {
    pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                static_cast<int>(bytes.size()));
    in.SetRecursionLimit(kMaxGraphDefNesting);
    if (!message->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
      std::string why = log.text().empty()
                            ? "truncated or corrupt, or nested more than " +
                                  std::to_string(kMaxGraphDefNesting) + " levels deep"
                            : TensorFlowNames(log.text());
      return Error(name + ": not a binary " + what + ": " + why);
    }
    return OkStatus();
  }
  pb::TextFormat::Parser parser;
  FirstTextError errors;
  parser.RecordErrorsTo(&errors);
  parser.SetRecursionLimit(kMaxGraphDefNesting);
  pb::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  if (!parser.Parse(&input, message)) {
    std::string why = !errors.first().empty() ? errors.first()
                      : !log.text().empty()   ? log.text()
                                              : "not a text " + what;
    return Error(name + ":" + TensorFlowNames(why));
  }
  // Text escapes ("\377") can put bytes that are not UTF-8 into a string field, which the binary
  // format (and TensorFlow) refuses: what was read must read back from its binary form.
  std::string binary;
  std::unique_ptr<pb::Message> check(message->New());
  if (!message->SerializeToString(&binary) || !check->ParseFromString(binary)) {
    return Error(name + ": a string field is not valid UTF-8" +
                 (log.text().empty() ? std::string() : ": " + TensorFlowNames(log.text())));
  }
  return OkStatus();
}

// Map entries in key order, so the same message always gives the same bytes.
bool SerializeDeterministic(const pb::Message& message, std::string* out) {
  pb::io::StringOutputStream stream(out);
  pb::io::CodedOutputStream coded(&stream);
  coded.SetSerializationDeterministic(true);
  return message.SerializeToCodedStream(&coded);
}  // the streams trim `out` to what was written when they go

StatusOr<std::string> PrintMessage(const pb::Message& message, GraphDefFormat format) {
  std::string out;
  LogCapture log;
  if (format == GraphDefFormat::kBinary) {
    if (!SerializeDeterministic(message, &out)) {
      return Error("cannot serialize the " + message.GetDescriptor()->name() + ": " +
                   TensorFlowNames(log.text()));
    }
  } else {
    // TensorFlow's WriteTextProto: TextFormat's default printer (map entries sorted by key).
    // Fields no schema knows (a .pb from a newer TensorFlow) have no text form the parser can
    // read back (they print as bare field numbers), so text output leaves them out; a binary
    // output keeps them.
    pb::TextFormat::Printer printer;
    printer.SetHideUnknownFields(true);
    if (!printer.PrintToString(message, &out)) {
      return Error("cannot print the " + message.GetDescriptor()->name() + " as text");
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Shapes and tensors

StatusOr<DataType> CheckedDataType(int value, const std::string& context) {
  if (!IsValidDataType(value)) {
    return Error(context + ": unknown DataType " + std::to_string(value));
  }
  return static_cast<DataType>(value);
}

PartialShape ShapeFromProto(const tfp::TensorShapeProto& proto) {
  if (proto.unknown_rank()) return PartialShape::UnknownRank();
  std::vector<int64_t> dims;
  dims.reserve(proto.dim_size());
  for (const auto& d : proto.dim()) dims.push_back(d.size() < 0 ? PartialShape::kUnknownDim : d.size());
  return PartialShape(std::move(dims));
}

void ShapeToProto(const PartialShape& shape, tfp::TensorShapeProto* proto) {
  if (shape.unknown_rank()) {
    proto->set_unknown_rank(true);
    return;
  }
  for (int64_t d : shape.dims()) proto->add_dim()->set_size(d);
}

// Element storage of a Tensor for a DataType, for the copies below.
bool HasElementStorage(DataType t) {
  return t == DT_STRING || t == DT_RESOURCE || t == DT_VARIANT || ToPrimitiveType(t) != PrimitiveType::PRIMITIVE_TYPE_INVALID;
}

// TensorFlow's FromProtoField: the first n values of `values`; a shorter list repeats its last
// value; an empty one gives zeros (the tensor starts zero-filled).
template <typename T, typename Src>
void FillFromField(const Src& values, std::span<T> out, int64_t stride = 1) {
  const int64_t have = values.size() / stride;
  if (have <= 0) return;
  const int64_t n = static_cast<int64_t>(out.size());
  for (int64_t i = 0; i < n; ++i) {
    const int64_t from = std::min(i, have - 1) * stride;
    if constexpr (std::is_same_v<T, std::complex<float>> || std::is_same_v<T, std::complex<double>>) {
      out[i] = T(values.Get(from), values.Get(from + 1));
    } else {
      out[i] = static_cast<T>(values.Get(from));
    }
  }
}

StatusOr<ResourceHandle> HandleFromProto(const tfp::ResourceHandleProto& p, const std::string& context) {
  ResourceHandle h;
  h.container = p.container();
  h.name = p.name();
  h.device = p.device();
  if (p.dtypes_and_shapes_size() > 0) {
    ASSIGN_OR_RETURN(h.dtype, CheckedDataType(p.dtypes_and_shapes(0).dtype(), context));
    h.shape = ShapeFromProto(p.dtypes_and_shapes(0).shape());
  }
  return h;
}

// TensorFlow's DecodeStringList: the lengths as varint32s, then the bytes of all the strings.
Status DecodeStringContent(const std::string& content, std::vector<std::string>* out,
                           const std::string& context) {
  pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(content.data()),
                              static_cast<int>(content.size()));
  std::vector<uint32_t> sizes(out->size());
  uint64_t total = 0;
  for (auto& s : sizes) {
    if (!in.ReadVarint32(&s)) return Error(context + ": tensor_content ends inside the string lengths");
    total += s;
  }
  if (total > content.size()) return Error(context + ": tensor_content is shorter than its string lengths say");
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (!in.ReadString(&(*out)[i], static_cast<int>(sizes[i]))) {
      return Error(context + ": tensor_content is shorter than its string lengths say");
    }
  }
  return OkStatus();
}

StatusOr<Tensor> TensorFromMessage(const tfp::TensorProto& proto, const std::string& context,
                                   const GraphDefReadOptions& options) {
  ASSIGN_OR_RETURN(DataType dtype, CheckedDataType(proto.dtype(), context));
  if (dtype == DT_INVALID) return Error(context + ": tensor has dtype DT_INVALID");
  if (IsRefType(dtype)) return Error(context + ": a tensor cannot have the reference type " + DataTypeEnumName(dtype));
  if (proto.tensor_shape().unknown_rank()) return Error(context + ": tensor shape has unknown rank");
  std::vector<int64_t> dims;
  int64_t n = 1;
  bool overflow = false;
  for (const auto& d : proto.tensor_shape().dim()) {
    if (d.size() < 0) {
      return Error(context + ": tensor shape " + DimsToString({d.size()}) + " has a negative dimension");
    }
    dims.push_back(d.size());
    if (d.size() != 0 && n > INT64_MAX / d.size()) overflow = true;
    n = overflow ? INT64_MAX : n * d.size();
  }
  const int64_t elem = std::max(DataTypeSize(dtype), 1);
  if (overflow || n > options.max_constant_bytes / elem) {
    return Error(context + ": tensor of shape " + DimsToString(dims) + " (" + DataTypeName(dtype) +
                 ") is larger than the " + FormatBytes(options.max_constant_bytes) +
                 " a constant may have");
  }
  if (!HasElementStorage(dtype)) return Tensor();  // quantized, float8, int4: kept as the proto
  ASSIGN_OR_RETURN(Tensor t, Tensor::Create(dtype, dims, options.max_constant_bytes));

  if (!proto.tensor_content().empty()) {
    const std::string& content = proto.tensor_content();
    if (dtype == DT_STRING) {
      RETURN_IF_ERROR(DecodeStringContent(content, &t.strings(), context));
      return t;
    }
    if (dtype == DT_RESOURCE || dtype == DT_VARIANT) {
      return Error(context + ": a " + DataTypeName(dtype) + " tensor cannot have tensor_content");
    }
    if (static_cast<int64_t>(content.size()) != n * DataTypeSize(dtype)) {
      return Error(context + ": tensor_content has " + std::to_string(content.size()) +
                   " bytes but shape " + DimsToString(dims) + " of " + DataTypeName(dtype) + " needs " +
                   std::to_string(n * DataTypeSize(dtype)));
    }
    if (n > 0) std::memcpy(t.raw_data(), content.data(), content.size());
    return t;
  }
  switch (dtype) {
    case DT_FLOAT: FillFromField(proto.float_val(), t.flat<float>()); break;
    case DT_DOUBLE: FillFromField(proto.double_val(), t.flat<double>()); break;
    case DT_INT32: FillFromField(proto.int_val(), t.flat<int32_t>()); break;
    case DT_INT16: FillFromField(proto.int_val(), t.flat<int16_t>()); break;
    case DT_INT8: FillFromField(proto.int_val(), t.flat<int8_t>()); break;
    case DT_UINT8: FillFromField(proto.int_val(), t.flat<uint8_t>()); break;
    case DT_UINT16: FillFromField(proto.int_val(), t.flat<uint16_t>()); break;
    case DT_HALF:
    case DT_BFLOAT16: FillFromField(proto.half_val(), t.flat<uint16_t>()); break;
    case DT_INT64: FillFromField(proto.int64_val(), t.flat<int64_t>()); break;
    case DT_UINT32: FillFromField(proto.uint32_val(), t.flat<uint32_t>()); break;
    case DT_UINT64: FillFromField(proto.uint64_val(), t.flat<uint64_t>()); break;
    case DT_BOOL: FillFromField(proto.bool_val(), t.flat<bool>()); break;
    case DT_COMPLEX64: FillFromField(proto.scomplex_val(), t.flat<std::complex<float>>(), 2); break;
    case DT_COMPLEX128: FillFromField(proto.dcomplex_val(), t.flat<std::complex<double>>(), 2); break;
    case DT_STRING: {
      auto& out = t.strings();
      const int have = proto.string_val_size();
      for (int64_t i = 0; have > 0 && i < n; ++i) out[i] = proto.string_val(std::min<int64_t>(i, have - 1));
      break;
    }
    case DT_VARIANT: break;  // its values stay in the TensorProto the attr keeps
    case DT_RESOURCE: {
      auto& out = t.handles();
      const int have = proto.resource_handle_val_size();
      for (int64_t i = 0; have > 0 && i < n; ++i) {
        ASSIGN_OR_RETURN(out[i], HandleFromProto(proto.resource_handle_val(std::min<int64_t>(i, have - 1)), context));
      }
      break;
    }
    default:
      return Error(context + ": no elements for dtype " + DataTypeName(dtype));
  }
  return t;
}

template <typename T, typename Field>
void AppendAll(std::span<const T> values, Field* field) {
  for (const T& v : values) field->Add(v);
}

Status TensorToMessage(const Tensor& t, tfp::TensorProto* proto) {
  if (!t.IsInitialized()) return Error("cannot write an uninitialised tensor");
  proto->set_dtype(static_cast<tfp::DataType>(t.dtype()));
  proto->mutable_tensor_shape();  // present even for a scalar, as TensorFlow writes it
  for (int64_t d : t.dims()) proto->mutable_tensor_shape()->add_dim()->set_size(d);
  const int64_t n = t.num_elements();
  if (t.dtype() == DT_STRING) {
    for (const auto& s : t.strings()) proto->add_string_val(s);
    return OkStatus();
  }
  if (t.dtype() == DT_RESOURCE) {
    for (const auto& h : t.handles()) {
      auto* p = proto->add_resource_handle_val();
      p->set_container(h.container);
      p->set_name(h.name);
      p->set_device(h.device);
      if (h.dtype != DT_INVALID) {
        auto* ds = p->add_dtypes_and_shapes();
        ds->set_dtype(static_cast<tfp::DataType>(h.dtype));
        ShapeToProto(h.shape, ds->mutable_shape());
      }
    }
    return OkStatus();
  }
  // TensorFlow's make_tensor_proto (what wrote the graphs users have): the elements of a tensor
  // of more than one element as raw bytes for the types it lists in _TENSOR_CONTENT_TYPES; a
  // single element, and bool, uint16 and complex tensors, in the typed field.
  const DataType dt = t.dtype();
  if (dt == DT_VARIANT) return Error("cannot write the elements of a variant tensor");
  const bool content_type = dt != DT_BOOL && dt != DT_UINT16 && dt != DT_COMPLEX64 && dt != DT_COMPLEX128;
  if (n > 1 && content_type) {
    proto->set_tensor_content(std::string(static_cast<const char*>(t.raw_data()), t.byte_size()));
    return OkStatus();
  }
  if (n == 0) return OkStatus();
  switch (t.dtype()) {
    case DT_FLOAT: AppendAll(t.flat<float>(), proto->mutable_float_val()); break;
    case DT_DOUBLE: AppendAll(t.flat<double>(), proto->mutable_double_val()); break;
    case DT_INT32: AppendAll(t.flat<int32_t>(), proto->mutable_int_val()); break;
    case DT_INT16: AppendAll(t.flat<int16_t>(), proto->mutable_int_val()); break;
    case DT_INT8: AppendAll(t.flat<int8_t>(), proto->mutable_int_val()); break;
    case DT_UINT8: AppendAll(t.flat<uint8_t>(), proto->mutable_int_val()); break;
    case DT_UINT16: AppendAll(t.flat<uint16_t>(), proto->mutable_int_val()); break;
    case DT_HALF:
    case DT_BFLOAT16: AppendAll(t.flat<uint16_t>(), proto->mutable_half_val()); break;
    case DT_INT64: AppendAll(t.flat<int64_t>(), proto->mutable_int64_val()); break;
    case DT_UINT32: AppendAll(t.flat<uint32_t>(), proto->mutable_uint32_val()); break;
    case DT_UINT64: AppendAll(t.flat<uint64_t>(), proto->mutable_uint64_val()); break;
    case DT_BOOL: AppendAll(t.flat<bool>(), proto->mutable_bool_val()); break;
    case DT_COMPLEX64:
      for (auto c : t.flat<std::complex<float>>()) {
        proto->add_scomplex_val(c.real());
        proto->add_scomplex_val(c.imag());
      }
      break;
    case DT_COMPLEX128:
      for (auto c : t.flat<std::complex<double>>()) {
        proto->add_dcomplex_val(c.real());
        proto->add_dcomplex_val(c.imag());
      }
      break;
    default:
      return Error("cannot write a tensor of dtype " + DataTypeName(t.dtype()));
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// AttrValue

Status AttrMapFromProto(const pb::Map<std::string, tfp::AttrValue>& proto, const std::string& context,
                        const GraphDefReadOptions& options, AttrMap* out);
Status AttrMapToProto(const AttrMap& attrs, pb::Map<std::string, tfp::AttrValue>* proto);

StatusOr<NameAttrList> FuncFromProto(const tfp::NameAttrList& p, const std::string& context,
                                     const GraphDefReadOptions& options) {
  NameAttrList f;
  f.name = p.name();
  RETURN_IF_ERROR(AttrMapFromProto(p.attr(), context, options, f.attr.get()));
  return f;
}

Status FuncToProto(const NameAttrList& f, tfp::NameAttrList* p) {
  p->set_name(f.name);
  if (f.attr) RETURN_IF_ERROR(AttrMapToProto(*f.attr, p->mutable_attr()));
  return OkStatus();
}

StatusOr<AttrValue> AttrFromProto(const tfp::AttrValue& p, const std::string& context,
                                  const GraphDefReadOptions& options) {
  switch (p.value_case()) {
    case tfp::AttrValue::kS: return AttrValue::String(p.s());
    case tfp::AttrValue::kI: return AttrValue::Int(p.i());
    case tfp::AttrValue::kF: return AttrValue::Float(p.f());
    case tfp::AttrValue::kB: return AttrValue::Bool(p.b());
    case tfp::AttrValue::kType: {
      ASSIGN_OR_RETURN(DataType t, CheckedDataType(p.type(), context));
      return AttrValue::Type(t);
    }
    case tfp::AttrValue::kShape: return AttrValue::Shape(ShapeFromProto(p.shape()));
    case tfp::AttrValue::kTensor: {
      ASSIGN_OR_RETURN(Tensor t, TensorFromMessage(p.tensor(), context, options));
      return AttrValue::TensorValue(std::move(t), p.tensor().SerializeAsString());
    }
    case tfp::AttrValue::kList: {
      const auto& l = p.list();
      AttrListValue list;
      list.s.assign(l.s().begin(), l.s().end());
      list.i.assign(l.i().begin(), l.i().end());
      list.f.assign(l.f().begin(), l.f().end());
      list.b.assign(l.b().begin(), l.b().end());
      for (int t : l.type()) {
        ASSIGN_OR_RETURN(DataType dt, CheckedDataType(t, context));
        list.type.push_back(dt);
      }
      for (const auto& s : l.shape()) list.shape.push_back(ShapeFromProto(s));
      for (const auto& t : l.tensor()) {
        ASSIGN_OR_RETURN(Tensor tensor, TensorFromMessage(t, context, options));
        list.tensor.push_back(std::move(tensor));
      }
      for (const auto& f : l.func()) {
        ASSIGN_OR_RETURN(NameAttrList func, FuncFromProto(f, context, options));
        list.func.push_back(std::move(func));
      }
      return AttrValue::List(std::move(list));
    }
    case tfp::AttrValue::kFunc: {
      ASSIGN_OR_RETURN(NameAttrList func, FuncFromProto(p.func(), context, options));
      return AttrValue::Func(std::move(func));
    }
    case tfp::AttrValue::kPlaceholder: return AttrValue::Placeholder(p.placeholder());
    case tfp::AttrValue::VALUE_NOT_SET: return AttrValue();
  }
  return AttrValue();
}

Status AttrToProto(const AttrValue& a, tfp::AttrValue* p) {
  switch (a.kind()) {
    case AttrValue::Kind::kNone: break;
    case AttrValue::Kind::kString: p->set_s(a.s()); break;
    case AttrValue::Kind::kInt: p->set_i(a.i()); break;
    case AttrValue::Kind::kFloat: p->set_f(a.f()); break;
    case AttrValue::Kind::kBool: p->set_b(a.b()); break;
    case AttrValue::Kind::kType: p->set_type(static_cast<tfp::DataType>(a.type())); break;
    case AttrValue::Kind::kShape: ShapeToProto(a.shape(), p->mutable_shape()); break;
    case AttrValue::Kind::kTensor:
      // The encoding the constant came in, when it came from a file: an exact round trip.
      if (!a.tensor_proto().empty()) {
        if (!p->mutable_tensor()->ParseFromString(a.tensor_proto())) {
          return Error("the stored TensorProto does not parse");
        }
      } else {
        RETURN_IF_ERROR(TensorToMessage(a.tensor(), p->mutable_tensor()));
      }
      break;
    case AttrValue::Kind::kList: {
      const AttrListValue& l = a.list();
      auto* pl = p->mutable_list();
      for (const auto& s : l.s) pl->add_s(s);
      for (int64_t i : l.i) pl->add_i(i);
      for (float f : l.f) pl->add_f(f);
      for (bool b : l.b) pl->add_b(b);
      for (DataType t : l.type) pl->add_type(static_cast<tfp::DataType>(t));
      for (const auto& s : l.shape) ShapeToProto(s, pl->add_shape());
      for (const auto& t : l.tensor) RETURN_IF_ERROR(TensorToMessage(t, pl->add_tensor()));
      for (const auto& f : l.func) RETURN_IF_ERROR(FuncToProto(f, pl->add_func()));
      break;
    }
    case AttrValue::Kind::kFunc: RETURN_IF_ERROR(FuncToProto(a.func(), p->mutable_func())); break;
    case AttrValue::Kind::kPlaceholder: p->set_placeholder(a.placeholder()); break;
  }
  return OkStatus();
}

Status AttrMapFromProto(const pb::Map<std::string, tfp::AttrValue>& proto, const std::string& context,
                        const GraphDefReadOptions& options, AttrMap* out) {
  for (const auto& [key, value] : proto) {
    ASSIGN_OR_RETURN(AttrValue v, AttrFromProto(value, context + ": attr '" + DisplayText(key) + "'", options));
    out->emplace(key, std::move(v));
  }
  return OkStatus();
}

Status AttrMapToProto(const AttrMap& attrs, pb::Map<std::string, tfp::AttrValue>* proto) {
  for (const auto& [key, value] : attrs) {
    Status s = AttrToProto(value, &(*proto)[key]);
    if (!s.ok()) return s.WithContext("attr '" + DisplayText(key) + "'");
  }
  return OkStatus();
}

// ---------------------------------------------------------------------------------------------
// NodeDef, OpDef, FunctionDef, GraphDef

// What is left of `message` once the fields the structs model are cleared: empty when nothing.
std::string Remainder(const pb::Message& message) {
  if (message.ByteSizeLong() == 0) return "";
  std::string out;
  SerializeDeterministic(message, &out);
  return out;
}

Status RestoreRemainder(const std::string& bytes, pb::Message* message, const char* what) {
  if (bytes.empty()) return OkStatus();
  if (!message->MergeFromString(bytes)) return Error(std::string("the unmodeled fields of a ") + what + " do not parse");
  return OkStatus();
}

Status CheckUtf8(const std::string& text, const char* field, const std::string& context) {
  if (!IsValidUtf8(text)) return Error(context + ": " + field + " is not valid UTF-8: " + DisplayText(text));
  return OkStatus();
}

StatusOr<NodeDef> NodeFromProto(const tfp::NodeDef& p, const std::string& prefix, int index,
                                const GraphDefReadOptions& options) {
  std::string context = prefix + NodeContext(p.name(), p.op());
  if (p.name().empty()) context = prefix + "node #" + std::to_string(index) + " (" + DisplayText(p.op()) + ")";
  RETURN_IF_ERROR(CheckUtf8(p.name(), "its name", context));
  RETURN_IF_ERROR(CheckUtf8(p.op(), "its op", context));
  RETURN_IF_ERROR(CheckUtf8(p.device(), "its device", context));
  NodeDef n;
  n.name = p.name();
  n.op = p.op();
  for (const auto& in : p.input()) {
    RETURN_IF_ERROR(CheckUtf8(in, "an input", context));
    n.input.push_back(in);
  }
  n.device = p.device();
  RETURN_IF_ERROR(AttrMapFromProto(p.attr(), context, options, &n.attr));
  tfp::NodeDef rest = p;
  rest.clear_name();
  rest.clear_op();
  rest.clear_input();
  rest.clear_device();
  rest.clear_attr();
  n.unmodeled_fields = Remainder(rest);
  return n;
}

Status NodeToProto(const NodeDef& n, tfp::NodeDef* p) {
  RETURN_IF_ERROR(RestoreRemainder(n.unmodeled_fields, p, "NodeDef"));
  p->set_name(n.name);
  p->set_op(n.op);
  for (const auto& in : n.input) p->add_input(in);
  p->set_device(n.device);
  Status s = AttrMapToProto(n.attr, p->mutable_attr());
  if (!s.ok()) return s.WithContext(NodeContext(n.name, n.op));
  return OkStatus();
}

OpDef::ArgDef ArgFromProto(const tfp::OpDef::ArgDef& p) {
  OpDef::ArgDef a;
  a.name = p.name();
  a.description = p.description();
  a.type = static_cast<DataType>(p.type());
  a.type_attr = p.type_attr();
  a.number_attr = p.number_attr();
  a.type_list_attr = p.type_list_attr();
  a.is_ref = p.is_ref();
  return a;
}

void ArgToProto(const OpDef::ArgDef& a, tfp::OpDef::ArgDef* p) {
  p->set_name(a.name);
  p->set_description(a.description);
  p->set_type(static_cast<tfp::DataType>(a.type));
  p->set_type_attr(a.type_attr);
  p->set_number_attr(a.number_attr);
  p->set_type_list_attr(a.type_list_attr);
  p->set_is_ref(a.is_ref);
}

// An ArgDef with only what ArgDef does not model (handle_data, experimental_full_type).
tfp::OpDef::ArgDef ArgRemainder(tfp::OpDef::ArgDef a) {
  a.clear_name();
  a.clear_description();
  a.clear_type();
  a.clear_type_attr();
  a.clear_number_attr();
  a.clear_type_list_attr();
  a.clear_is_ref();
  return a;
}

StatusOr<OpDef> OpDefFromProto(const tfp::OpDef& p, const std::string& context, const GraphDefReadOptions& options,
                               tfp::OpDef* rest) {
  OpDef op;
  op.name = p.name();
  for (const auto& a : p.input_arg()) {
    RETURN_IF_ERROR(CheckedDataType(a.type(), context + ": input '" + DisplayText(a.name()) + "'").status());
    op.input_arg.push_back(ArgFromProto(a));
  }
  for (const auto& a : p.output_arg()) {
    RETURN_IF_ERROR(CheckedDataType(a.type(), context + ": output '" + DisplayText(a.name()) + "'").status());
    op.output_arg.push_back(ArgFromProto(a));
  }
  op.control_output.assign(p.control_output().begin(), p.control_output().end());
  for (const auto& a : p.attr()) {
    OpDef::AttrDef d;
    d.name = a.name();
    d.type = a.type();
    const std::string attr_context = context + ": attr def '" + DisplayText(a.name()) + "'";
    if (a.has_default_value()) {
      ASSIGN_OR_RETURN(d.default_value, AttrFromProto(a.default_value(), attr_context, options));
    }
    if (a.has_allowed_values()) {
      ASSIGN_OR_RETURN(d.allowed_values, AttrFromProto(a.allowed_values(), attr_context, options));
    }
    d.has_minimum = a.has_minimum();
    d.minimum = a.minimum();
    d.description = a.description();
    op.attr.push_back(std::move(d));
  }
  op.summary = p.summary();
  op.description = p.description();
  op.is_commutative = p.is_commutative();
  op.is_aggregate = p.is_aggregate();
  op.is_stateful = p.is_stateful();
  op.allows_uninitialized_input = p.allows_uninitialized_input();
  op.is_distributed_communication = p.is_distributed_communication();

  // Unmodeled: deprecation, and per argument handle_data and experimental_full_type. Arguments
  // are kept by position (empty ones included) so export can merge them back one by one.
  rest->Clear();
  if (p.has_deprecation()) *rest->mutable_deprecation() = p.deprecation();
  bool args_have_rest = false;
  for (const auto& a : p.input_arg()) args_have_rest |= ArgRemainder(a).ByteSizeLong() > 0;
  for (const auto& a : p.output_arg()) args_have_rest |= ArgRemainder(a).ByteSizeLong() > 0;
  if (args_have_rest) {
    for (const auto& a : p.input_arg()) *rest->add_input_arg() = ArgRemainder(a);
    for (const auto& a : p.output_arg()) *rest->add_output_arg() = ArgRemainder(a);
  }
  return op;
}

Status OpDefToProto(const OpDef& op, const tfp::OpDef& rest, tfp::OpDef* p) {
  p->set_name(op.name);
  for (const auto& a : op.input_arg) ArgToProto(a, p->add_input_arg());
  for (const auto& a : op.output_arg) ArgToProto(a, p->add_output_arg());
  for (const auto& c : op.control_output) p->add_control_output(c);
  for (const auto& d : op.attr) {
    auto* pa = p->add_attr();
    pa->set_name(d.name);
    pa->set_type(d.type);
    if (d.default_value) RETURN_IF_ERROR(AttrToProto(*d.default_value, pa->mutable_default_value()));
    if (d.allowed_values) RETURN_IF_ERROR(AttrToProto(*d.allowed_values, pa->mutable_allowed_values()));
    pa->set_has_minimum(d.has_minimum);
    pa->set_minimum(d.minimum);
    pa->set_description(d.description);
  }
  p->set_summary(op.summary);
  p->set_description(op.description);
  p->set_is_commutative(op.is_commutative);
  p->set_is_aggregate(op.is_aggregate);
  p->set_is_stateful(op.is_stateful);
  p->set_allows_uninitialized_input(op.allows_uninitialized_input);
  p->set_is_distributed_communication(op.is_distributed_communication);
  if (rest.has_deprecation()) *p->mutable_deprecation() = rest.deprecation();
  for (int i = 0; i < rest.input_arg_size() && i < p->input_arg_size(); ++i) {
    p->mutable_input_arg(i)->MergeFrom(rest.input_arg(i));
  }
  for (int i = 0; i < rest.output_arg_size() && i < p->output_arg_size(); ++i) {
    p->mutable_output_arg(i)->MergeFrom(rest.output_arg(i));
  }
  return OkStatus();
}

StatusOr<FunctionDef> FunctionFromProto(const tfp::FunctionDef& p, const std::string& file,
                                        const GraphDefReadOptions& options) {
  const std::string context = file + ": function '" + DisplayText(p.signature().name()) + "'";
  RETURN_IF_ERROR(CheckUtf8(p.signature().name(), "its name", context));
  FunctionDef f;
  tfp::FunctionDef rest;
  ASSIGN_OR_RETURN(f.signature, OpDefFromProto(p.signature(), context, options, rest.mutable_signature()));
  RETURN_IF_ERROR(AttrMapFromProto(p.attr(), context, options, &f.attr));
  for (const auto& [index, arg_attrs] : p.arg_attr()) {
    RETURN_IF_ERROR(AttrMapFromProto(arg_attrs.attr(), context + ": argument " + std::to_string(index), options,
                                     &f.arg_attr[static_cast<int>(index)]));
  }
  for (const auto& [index, id] : p.resource_arg_unique_id()) {
    f.resource_arg_unique_id[static_cast<int>(index)] = static_cast<int>(id);
  }
  for (int i = 0; i < p.node_def_size(); ++i) {
    ASSIGN_OR_RETURN(NodeDef n, NodeFromProto(p.node_def(i), context + ": ", i, options));
    f.node_def.push_back(std::move(n));
  }
  for (const auto& [k, v] : p.ret()) f.ret[k] = v;
  for (const auto& [k, v] : p.control_ret()) f.control_ret[k] = v;
  // Fields FunctionDef does not have, and the unmodeled parts of the signature.
  tfp::FunctionDef other = p;
  other.clear_signature();
  other.clear_attr();
  other.clear_arg_attr();
  other.clear_resource_arg_unique_id();
  other.clear_node_def();
  other.clear_ret();
  other.clear_control_ret();
  rest.MergeFrom(other);
  if (rest.signature().ByteSizeLong() == 0) rest.clear_signature();
  if (p.has_signature() && p.signature().ByteSizeLong() == 0) rest.mutable_signature();
  f.unmodeled_fields = Remainder(rest);
  return f;
}

Status FunctionToProto(const FunctionDef& f, tfp::FunctionDef* p) {
  tfp::FunctionDef rest;
  RETURN_IF_ERROR(RestoreRemainder(f.unmodeled_fields, &rest, "FunctionDef"));
  tfp::OpDef signature;
  RETURN_IF_ERROR(OpDefToProto(f.signature, rest.signature(), &signature));
  rest.clear_signature();
  p->MergeFrom(rest);  // a present-but-empty signature comes back from here
  if (signature.ByteSizeLong() > 0) p->mutable_signature()->MergeFrom(signature);
  RETURN_IF_ERROR(AttrMapToProto(f.attr, p->mutable_attr()));
  for (const auto& [index, attrs] : f.arg_attr) {
    RETURN_IF_ERROR(AttrMapToProto(attrs, (*p->mutable_arg_attr())[index].mutable_attr()));
  }
  for (const auto& [index, id] : f.resource_arg_unique_id) (*p->mutable_resource_arg_unique_id())[index] = id;
  for (const auto& n : f.node_def) RETURN_IF_ERROR(NodeToProto(n, p->add_node_def()));
  for (const auto& [k, v] : f.ret) (*p->mutable_ret())[k] = v;
  for (const auto& [k, v] : f.control_ret) (*p->mutable_control_ret())[k] = v;
  return OkStatus();
}

StatusOr<GraphDef> GraphFromProto(const tfp::GraphDef& p, const std::string& file,
                                  const GraphDefReadOptions& options) {
  GraphDef g;
  g.node.reserve(p.node_size());
  for (int i = 0; i < p.node_size(); ++i) {
    ASSIGN_OR_RETURN(NodeDef n, NodeFromProto(p.node(i), file + ": ", i, options));
    g.node.push_back(std::move(n));
  }
  for (const auto& f : p.library().function()) {
    ASSIGN_OR_RETURN(FunctionDef fd, FunctionFromProto(f, file, options));
    g.library.function.push_back(std::move(fd));
  }
  for (const auto& gr : p.library().gradient()) g.library.gradient.push_back({gr.function_name(), gr.gradient_func()});
  tfp::FunctionDefLibrary library_rest = p.library();
  library_rest.clear_function();
  library_rest.clear_gradient();
  g.library.unmodeled_fields = Remainder(library_rest);
  g.versions.producer = p.versions().producer();
  g.versions.min_consumer = p.versions().min_consumer();
  g.versions.bad_consumers.assign(p.versions().bad_consumers().begin(), p.versions().bad_consumers().end());
  // Export writes `library` and `versions` when they hold something. One that was present but
  // empty (`library {}`) is remembered as present-and-empty in the remainder.
  tfp::GraphDef rest = p;
  rest.clear_node();
  rest.clear_library();
  rest.clear_versions();
  if (p.has_library() && p.library().ByteSizeLong() == 0) rest.mutable_library();
  if (p.has_versions() && p.versions().ByteSizeLong() == 0) rest.mutable_versions();
  g.unmodeled_fields = Remainder(rest);
  return g;
}

Status GraphToProto(const GraphDef& g, tfp::GraphDef* p) {
  RETURN_IF_ERROR(RestoreRemainder(g.unmodeled_fields, p, "GraphDef"));
  for (const auto& n : g.node) RETURN_IF_ERROR(NodeToProto(n, p->add_node()));
  tfp::FunctionDefLibrary library;
  RETURN_IF_ERROR(RestoreRemainder(g.library.unmodeled_fields, &library, "FunctionDefLibrary"));
  for (const auto& f : g.library.function) {
    Status s = FunctionToProto(f, library.add_function());
    if (!s.ok()) return s.WithContext("function '" + DisplayText(f.signature.name) + "'");
  }
  for (const auto& gr : g.library.gradient) {
    auto* pg = library.add_gradient();
    pg->set_function_name(gr.function_name);
    pg->set_gradient_func(gr.gradient_func);
  }
  if (library.ByteSizeLong() > 0) p->mutable_library()->MergeFrom(library);
  tfp::VersionDef versions;
  versions.set_producer(g.versions.producer);
  versions.set_min_consumer(g.versions.min_consumer);
  for (int c : g.versions.bad_consumers) versions.add_bad_consumers(c);
  if (versions.ByteSizeLong() > 0) p->mutable_versions()->MergeFrom(versions);
  return OkStatus();
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Public

GraphDefFormat GraphDefFormatForPath(const std::string& path) {
  auto ends_with = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends_with(".pb")) return GraphDefFormat::kBinary;
  if (ends_with(".pbtxt") || ends_with(".pbtext") || ends_with(".txt") || ends_with(".prototxt")) {
    return GraphDefFormat::kText;
  }
  return GraphDefFormat::kAuto;
}

GraphDefFormat SniffGraphDefFormat(std::string_view bytes) {
  // The wire format of a non-empty GraphDef starts with a field tag and lengths, which are
  // control bytes for any small message; text is printable.
  const size_t n = std::min<size_t>(bytes.size(), 4096);
  if (n == 0) return GraphDefFormat::kBinary;
  for (size_t i = 0; i < n; ++i) {
    unsigned char c = bytes[i];
    if (c == '\n' || c == '\r' || c == '\t') continue;
    if (c < 0x20 || c == 0x7f) return GraphDefFormat::kBinary;
  }
  return GraphDefFormat::kText;
}

StatusOr<GraphDef> ParseGraphDef(std::string_view bytes, GraphDefFormat format, const std::string& name_for_errors,
                                 const GraphDefReadOptions& options) {
  tfp::GraphDef proto;
  RETURN_IF_ERROR(ParseMessage(bytes, format, name_for_errors, &proto));
  return GraphFromProto(proto, name_for_errors, options);
}

namespace {

bool IsGzip(std::string_view bytes) {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

// A gzipped file's bytes, inflated to at most `limit` bytes (a gzip bomb stops there, saying so).
// Members written one after another are read one after another, as gzip does.
StatusOr<std::string> Gunzip(std::string_view bytes, int64_t limit, const std::string& name) {
  z_stream stream{};
  if (inflateInit2(&stream, 15 + 32) != Z_OK) return Error(name + ": cannot start zlib");
  std::string out;
  stream.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
  stream.avail_in = static_cast<uInt>(bytes.size());
  char buffer[1 << 16];
  int code = Z_OK;
  while (true) {
    stream.next_out = reinterpret_cast<Bytef*>(buffer);
    stream.avail_out = sizeof(buffer);
    code = inflate(&stream, Z_NO_FLUSH);
    if (code != Z_OK && code != Z_STREAM_END) break;
    const size_t produced = sizeof(buffer) - stream.avail_out;
    if (static_cast<int64_t>(out.size() + produced) > limit) {
      inflateEnd(&stream);
      return Error(fmt::format("{}: the gzipped GraphDef inflates past {} bytes, the limit on "
                               "inputs (--max-input-size; a GraphDef holds at most 2 GiB)",
                               name, limit));
    }
    out.append(buffer, produced);
    if (code == Z_STREAM_END) {
      if (stream.avail_in == 0) break;
      if (inflateReset(&stream) != Z_OK) break;  // the next member
      continue;
    }
    if (stream.avail_in == 0 && produced == 0) break;
  }
  inflateEnd(&stream);
  if (code != Z_STREAM_END) {
    return Error(fmt::format("{}: the gzip stream is {} after {} bytes of GraphDef", name,
                             code == Z_DATA_ERROR ? "corrupt" : "cut short", out.size()));
  }
  return out;
}

}  // namespace

StatusOr<GraphDef> ReadGraphDef(const std::string& path, GraphDefFormat format, const GraphDefReadOptions& options) {
  // A protocol buffer cannot be larger than 2 GiB, whatever the input limit says.
  const int64_t limit = std::min<int64_t>(MaxInputBytes(), INT_MAX);
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, limit));
  // A gzipped GraphDef (graph.pb.gz, what tf.io.write_graph output is often kept as) is read by
  // its magic bytes whatever its name; its format is then the inner name's ("x.pbtxt.gz").
  std::string inner_path = path;
  if (IsGzip(bytes)) {
    ASSIGN_OR_RETURN(bytes, Gunzip(bytes, limit, DisplayPath(path)));
    if (inner_path.size() > 3 && inner_path.compare(inner_path.size() - 3, 3, ".gz") == 0) {
      inner_path.resize(inner_path.size() - 3);
    }
  }
  if (format == GraphDefFormat::kAuto) format = GraphDefFormatForPath(inner_path);
  return ParseGraphDef(bytes, format, DisplayPath(path), options);
}

StatusOr<std::string> SerializeGraphDef(const GraphDef& graph, GraphDefFormat format) {
  tfp::GraphDef proto;
  RETURN_IF_ERROR(GraphToProto(graph, &proto));
  return PrintMessage(proto, format);
}

Status WriteGraphDef(const std::string& path, const GraphDef& graph, GraphDefFormat format) {
  if (format == GraphDefFormat::kAuto) format = GraphDefFormatForPath(path);
  ASSIGN_OR_RETURN(std::string bytes, SerializeGraphDef(graph, format));
  return WriteFile(path, bytes);
}

StatusOr<FunctionDef> ParseFunctionDef(std::string_view bytes, GraphDefFormat format,
                                       const std::string& name_for_errors, const GraphDefReadOptions& options) {
  tfp::FunctionDef proto;
  RETURN_IF_ERROR(ParseMessage(bytes, format, name_for_errors, &proto));
  return FunctionFromProto(proto, name_for_errors, options);
}

StatusOr<FunctionDef> ReadFunctionDef(const std::string& path, GraphDefFormat format,
                                      const GraphDefReadOptions& options) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path, std::min<int64_t>(MaxInputBytes(), INT_MAX)));
  if (format == GraphDefFormat::kAuto) format = GraphDefFormatForPath(path);
  return ParseFunctionDef(bytes, format, DisplayPath(path), options);
}

StatusOr<std::string> SerializeFunctionDef(const FunctionDef& function, GraphDefFormat format) {
  tfp::FunctionDef proto;
  RETURN_IF_ERROR(FunctionToProto(function, &proto));
  return PrintMessage(proto, format);
}

StatusOr<Tensor> TensorFromProto(std::string_view serialized, const std::string& context,
                                 const GraphDefReadOptions& options) {
  tfp::TensorProto proto;
  RETURN_IF_ERROR(ParseMessage(serialized, GraphDefFormat::kBinary, context, &proto));
  return TensorFromMessage(proto, context, options);
}

StatusOr<std::string> TensorToProto(const Tensor& tensor) {
  tfp::TensorProto proto;
  RETURN_IF_ERROR(TensorToMessage(tensor, &proto));
  return PrintMessage(proto, GraphDefFormat::kBinary);
}

}  // namespace xlens::graph
