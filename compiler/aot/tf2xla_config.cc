#include "compiler/aot/tf2xla_config.h"

#include <climits>
#include <map>
#include <set>

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/tokenizer.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <google/protobuf/text_format.h>

#include "compiler/aot/proto/tf2xla.pb.h"
#include "compiler/support/file_io.h"
#include "compiler/support/protobuf_text_error.h"
#include "compiler/support/terminal_text.h"

namespace xlens::aot {

namespace pb = google::protobuf;

namespace {

// How deeply a config may nest: its messages are three levels deep; anything far deeper is
// hostile input, refused before the parser's recursion costs stack.
constexpr int kMaxNesting = 16;

// A name from the file as a message shows it: quoted, escaped, bounded.
std::string Quote(std::string_view name) { return "'" + DisplayText(name, 200) + "'"; }

// Where each entry and field of a text config was, for messages that point at it.
class Locator {
 public:
  Locator(std::string file, const pb::TextFormat::ParseInfoTree* tree)
      : file_(std::move(file)), tree_(tree) {}

  // "file:L:C" of field `field` of entry `index` of repeated `entry` ("feed"), or of the entry
  // itself when `field` is empty; "file: feed 2" when the position is not known (binary).
  std::string At(const char* entry, int index, const char* field = nullptr,
                 const char* nested = nullptr) const {
    const pb::Descriptor* config = tf2xlaproto::Config::descriptor();
    const pb::FieldDescriptor* entry_field = config->FindFieldByName(entry);
    std::string fallback = file_ + ": " + entry + " " + std::to_string(index);
    if (tree_ == nullptr || entry_field == nullptr) return fallback;
    pb::TextFormat::ParseLocation loc = tree_->GetLocation(entry_field, index);
    if (field != nullptr) {
      const pb::TextFormat::ParseInfoTree* sub = tree_->GetTreeForNested(entry_field, index);
      const pb::FieldDescriptor* f = entry_field->message_type()->FindFieldByName(field);
      if (sub != nullptr && f != nullptr) {
        pb::TextFormat::ParseLocation inner = sub->GetLocation(f, -1);
        if (nested != nullptr && f->message_type() != nullptr) {
          const pb::TextFormat::ParseInfoTree* sub2 = sub->GetTreeForNested(f, -1);
          const pb::FieldDescriptor* f2 = f->message_type()->FindFieldByName(nested);
          if (sub2 != nullptr && f2 != nullptr) {
            pb::TextFormat::ParseLocation deep = sub2->GetLocation(f2, f2->is_repeated() ? 0 : -1);
            if (deep.line >= 0) inner = deep;
          }
        }
        if (inner.line >= 0) loc = inner;
      }
    }
    if (loc.line < 0) return fallback;
    return file_ + ":" + std::to_string(loc.line + 1) + ":" + std::to_string(loc.column + 1);
  }

 private:
  std::string file_;
  const pb::TextFormat::ParseInfoTree* tree_;
};

// A node name as TensorFlow allows it: printable, no ':' (that separates the output index).
std::string CheckNodeName(const std::string& name) {
  if (name.empty()) return "node_name is empty";
  for (unsigned char c : name) {
    if (c < 0x20 || c >= 0x7f) return "node_name " + Quote(name) + " has a character TensorFlow does not allow in a node name";
    if (c == ':') return "node_name " + Quote(name) + " has a ':' (the output index is its own field, output_index)";
  }
  return "";
}

std::string CheckName(const std::string& name) {
  if (name.empty() || IsValidCppIdentifier(name)) return "";
  return "name " + Quote(name) +
         " is not a C++ identifier (the header names its accessors after it)";
}

// A shape's dimensions, or why it cannot be used: the compiled function's buffers are sized at
// compile time, so every dimension must be known.
std::string ShapeOf(const tf2xlaproto::TensorShapeProto& shape, std::vector<int64_t>* dims) {
  if (shape.unknown_rank()) return "shape has an unknown rank (ahead-of-time code needs static shapes)";
  for (int i = 0; i < shape.dim_size(); ++i) {
    int64_t size = shape.dim(i).size();
    if (size < 0) {
      return "shape dimension " + std::to_string(i) + " is " + std::to_string(size) +
             " (unknown); ahead-of-time code needs static shapes";
    }
    dims->push_back(size);
  }
  if (dims->size() > 64) return "shape has " + std::to_string(dims->size()) + " dimensions (at most 64)";
  // The element count must fit a buffer size.
  int64_t elements = 1;
  for (int64_t d : *dims) {
    if (d != 0 && elements > (int64_t{1} << 48) / d) return "shape has more than 2^48 elements";
    elements *= d;
  }
  return "";
}

std::string CheckType(int type, graph::DataType* out) {
  if (type == 0) return "";  // not given: the graph's
  if (!graph::IsValidDataType(type) || graph::IsRefType(static_cast<graph::DataType>(type))) {
    return "type " + std::to_string(type) + " is not a TensorFlow DataType";
  }
  *out = static_cast<graph::DataType>(type);
  return "";
}

Status Fail(const std::string& where, const std::string& what) {
  return Error(where + ": " + what);
}

Status ParseMessage(std::string_view bytes, ConfigFormat format, const std::string& name,
                    tf2xlaproto::Config* config, pb::TextFormat::ParseInfoTree* tree) {
  if (bytes.size() > static_cast<size_t>(INT_MAX)) {
    return Error(name + ": " + FormatBytes(static_cast<int64_t>(bytes.size())) +
                 " is more than a protocol buffer can hold (2 GiB)");
  }
  if (format == ConfigFormat::kBinary) {
    pb::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                static_cast<int>(bytes.size()));
    in.SetRecursionLimit(kMaxNesting);
    if (!config->ParseFromCodedStream(&in) || !in.ConsumedEntireMessage()) {
      return Error(name + ": not a binary tf2xla.Config: truncated or corrupt");
    }
    return OkStatus();
  }
  pb::TextFormat::Parser parser;
  FirstTextError errors;
  parser.RecordErrorsTo(&errors);
  parser.WriteLocationsTo(tree);
  parser.SetRecursionLimit(kMaxNesting);
  pb::io::ArrayInputStream input(bytes.data(), static_cast<int>(bytes.size()));
  if (!parser.Parse(&input, config)) {
    std::string why = errors.first().empty() ? " not a text tf2xla.Config" : errors.first();
    // Protobuf's own message names our package; the user wrote TensorFlow's.
    for (size_t at; (at = why.find("xlens.tf2xlaproto.")) != std::string::npos;) {
      why.replace(at, 18, "tensorflow.tf2xla.");
    }
    return Error(name + ":" + why);
  }
  return OkStatus();
}

ConfigFormat Sniff(std::string_view bytes) {
  for (unsigned char c : bytes.substr(0, 4096)) {
    if (c == '\n' || c == '\r' || c == '\t') continue;
    if (c < 0x20 || c >= 0x7f) return ConfigFormat::kBinary;
  }
  return ConfigFormat::kText;
}

ConfigFormat FormatForPath(const std::string& path) {
  auto ends = [&](std::string_view suffix) {
    return path.size() >= suffix.size() && path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  };
  if (ends(".pb")) return ConfigFormat::kBinary;
  if (ends(".pbtxt") || ends(".pbtext") || ends(".txt") || ends(".prototxt")) return ConfigFormat::kText;
  return ConfigFormat::kAuto;
}

}  // namespace

std::string TensorId::ToString() const {
  return output_index == 0 ? node_name : node_name + ":" + std::to_string(output_index);
}

bool IsValidCppIdentifier(std::string_view name) {
  static const std::set<std::string_view> kKeywords = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break",
      "case", "catch", "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept",
      "const", "consteval", "constexpr", "constinit", "const_cast", "continue", "co_await",
      "co_return", "co_yield", "decltype", "default", "delete", "do", "double", "dynamic_cast",
      "else", "enum", "explicit", "export", "extern", "false", "float", "for", "friend", "goto",
      "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register",
      "reinterpret_cast", "requires", "return", "short", "signed", "sizeof", "static",
      "static_assert", "static_cast", "struct", "switch", "template", "this", "thread_local",
      "throw", "true", "try", "typedef", "typeid", "typename", "union", "unsigned", "using",
      "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};
  if (name.empty() || name.size() > 200) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(name[0])) return false;
  for (char c : name) {
    if (!alpha(c) && !(c >= '0' && c <= '9')) return false;
  }
  // Names with a double underscore, or an underscore and a capital, are the implementation's.
  if (name.find("__") != std::string_view::npos) return false;
  if (name.size() > 1 && name[0] == '_' && name[1] >= 'A' && name[1] <= 'Z') return false;
  return kKeywords.count(name) == 0;
}

StatusOr<Tf2XlaConfig> ParseTf2XlaConfig(std::string_view bytes, ConfigFormat format,
                                         const std::string& name_for_errors) {
  const std::string file = DisplayPath(name_for_errors);
  if (format == ConfigFormat::kAuto) format = Sniff(bytes);
  tf2xlaproto::Config proto;
  pb::TextFormat::ParseInfoTree tree;
  RETURN_IF_ERROR(ParseMessage(bytes, format, file, &proto, &tree));
  Locator at(file, format == ConfigFormat::kText ? &tree : nullptr);

  Tf2XlaConfig config;
  std::map<std::string, std::string> names;    // accessor name -> where it was first given
  std::map<std::string, std::string> tensors;  // "node:i" fed -> where
  auto claim_name = [&](const std::string& name, const std::string& where) -> Status {
    if (name.empty()) return OkStatus();
    auto [it, inserted] = names.emplace(name, where);
    if (!inserted) {
      return Fail(where, "name " + Quote(name) + " is given twice (first at " +
                             it->second + "); the header's accessors need distinct names");
    }
    return OkStatus();
  };

  if (proto.fetch_size() == 0) {
    return Error(file + ": the config has no fetch: the compiled function needs at least one result");
  }
  for (int i = 0; i < proto.feed_size(); ++i) {
    const tf2xlaproto::Feed& f = proto.feed(i);
    ConfigFeed feed;
    feed.where = at.At("feed", i);
    if (!f.has_id()) return Fail(feed.where, "feed " + std::to_string(i) + " has no id");
    feed.id.node_name = f.id().node_name();
    feed.id.output_index = f.id().output_index();
    const std::string node_where = at.At("feed", i, "id", "node_name");
    if (std::string why = CheckNodeName(feed.id.node_name); !why.empty()) {
      return Fail(node_where, "feed " + std::to_string(i) + ": " + why);
    }
    const std::string label = "feed " + Quote(feed.id.ToString());
    if (feed.id.output_index < 0 || feed.id.output_index > INT_MAX) {
      return Fail(at.At("feed", i, "id", "output_index"),
                  label + ": output_index " + std::to_string(feed.id.output_index) + " is out of range");
    }
    feed.where = node_where;
    if (!f.has_shape()) {
      return Fail(feed.where, label + " has no shape (ahead-of-time code needs each feed's static shape)");
    }
    if (std::string why = ShapeOf(f.shape(), &feed.shape); !why.empty()) {
      return Fail(at.At("feed", i, "shape"), label + ": " + why);
    }
    if (std::string why = CheckType(f.type(), &feed.type); !why.empty()) {
      return Fail(at.At("feed", i, "type"), label + ": " + why);
    }
    if (feed.type == graph::DT_RESOURCE) {
      return Fail(at.At("feed", i, "type"),
                  label + " is a resource: give a variable as a `variable` entry, not a feed");
    }
    feed.name = f.name();
    if (std::string why = CheckName(feed.name); !why.empty()) {
      return Fail(at.At("feed", i, "name"), label + ": " + why);
    }
    RETURN_IF_ERROR(claim_name(feed.name, at.At("feed", i, "name")));
    auto [it, inserted] = tensors.emplace(feed.id.ToString(), feed.where);
    if (!inserted) {
      return Fail(feed.where, label + " is fed twice (first at " + it->second + ")");
    }
    config.feed.push_back(std::move(feed));
  }
  // Fetch names share the namespace of feed names only through the header's distinct accessor
  // prefixes (arg_ and result_), as in tfcompile: a feed and a fetch may share a name.
  names.clear();
  for (int i = 0; i < proto.fetch_size(); ++i) {
    const tf2xlaproto::Fetch& f = proto.fetch(i);
    ConfigFetch fetch;
    fetch.where = at.At("fetch", i);
    if (!f.has_id()) return Fail(fetch.where, "fetch " + std::to_string(i) + " has no id");
    fetch.id.node_name = f.id().node_name();
    fetch.id.output_index = f.id().output_index();
    fetch.where = at.At("fetch", i, "id", "node_name");
    if (std::string why = CheckNodeName(fetch.id.node_name); !why.empty()) {
      return Fail(fetch.where, "fetch " + std::to_string(i) + ": " + why);
    }
    const std::string label = "fetch " + Quote(fetch.id.ToString());
    if (fetch.id.output_index < 0 || fetch.id.output_index > INT_MAX) {
      return Fail(at.At("fetch", i, "id", "output_index"),
                  label + ": output_index " + std::to_string(fetch.id.output_index) + " is out of range");
    }
    fetch.name = f.name();
    if (std::string why = CheckName(fetch.name); !why.empty()) {
      return Fail(at.At("fetch", i, "name"), label + ": " + why);
    }
    RETURN_IF_ERROR(claim_name(fetch.name, at.At("fetch", i, "name")));
    config.fetch.push_back(std::move(fetch));
  }
  // Variables have accessors of their own (var_<name>_data): their names are a third namespace.
  names.clear();
  std::map<std::string, std::string> variable_nodes;
  for (int i = 0; i < proto.variable_size(); ++i) {
    const tf2xlaproto::Variable& v = proto.variable(i);
    ConfigVariable var;
    var.where = at.At("variable", i, "node_name");
    var.node_name = v.node_name();
    if (std::string why = CheckNodeName(var.node_name); !why.empty()) {
      return Fail(var.where, "variable " + std::to_string(i) + ": " + why);
    }
    const std::string label = "variable " + Quote(var.node_name);
    auto [it, inserted] = variable_nodes.emplace(var.node_name, var.where);
    if (!inserted) return Fail(var.where, label + " is given twice (first at " + it->second + ")");
    var.has_shape = v.has_shape();
    if (var.has_shape) {
      if (std::string why = ShapeOf(v.shape(), &var.shape); !why.empty()) {
        return Fail(at.At("variable", i, "shape"), label + ": " + why);
      }
    }
    if (std::string why = CheckType(v.type(), &var.type); !why.empty()) {
      return Fail(at.At("variable", i, "type"), label + ": " + why);
    }
    var.readonly = v.readonly();
    var.name = v.name();
    if (std::string why = CheckName(var.name); !why.empty()) {
      return Fail(at.At("variable", i, "name"), label + ": " + why);
    }
    // Without a name, the accessors are named after the node (var_<node>_data), as tfcompile does.
    if (var.name.empty() && !IsValidCppIdentifier(var.node_name)) {
      return Fail(var.where, label + " has no name, and its node's name is not a C++ identifier: "
                             "give it a name (the header's var_<name>_data)");
    }
    RETURN_IF_ERROR(claim_name(var.name.empty() ? var.node_name : var.name, var.where));
    config.variable.push_back(std::move(var));
  }
  return config;
}

StatusOr<Tf2XlaConfig> ReadTf2XlaConfig(const std::string& path, ConfigFormat format) {
  ASSIGN_OR_RETURN(std::string bytes, ReadFile(path));
  if (format == ConfigFormat::kAuto) format = FormatForPath(path);
  return ParseTf2XlaConfig(bytes, format, path);
}

}  // namespace xlens::aot
