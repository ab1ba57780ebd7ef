#include "compiler/graph/op_def.h"

#include <cctype>

namespace xlens::graph {
namespace {

std::string_view Trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

std::vector<std::string> SplitList(std::string_view s) {
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i <= s.size(); ++i) {
    if (i == s.size() || s[i] == ',') {
      std::string_view item = Trim(s.substr(start, i - start));
      if (!item.empty()) out.emplace_back(item);
      start = i + 1;
    }
  }
  return out;
}

std::string Unquote(std::string_view s) {
  s = Trim(s);
  if (s.size() >= 2 && (s.front() == '\'' || s.front() == '"') && s.back() == s.front()) {
    return std::string(s.substr(1, s.size() - 2));
  }
  return std::string(s);
}

std::optional<DataType> ParseTypeWord(std::string_view word) {
  word = Trim(word);
  if (auto t = ParseDataTypeEnumName(word)) return t;
  return ParseDataTypeName(word);
}

// Parses a default value written in an Attr spec for an attr of `type`.
StatusOr<AttrValue> ParseDefault(const std::string& type, std::string_view text) {
  text = Trim(text);
  if (type == "type") {
    auto t = ParseTypeWord(text);
    if (!t) return Status::Error("bad type default '" + std::string(text) + "'");
    return AttrValue::Type(*t);
  }
  if (type == "int") return AttrValue::Int(std::stoll(std::string(text)));
  if (type == "float") return AttrValue::Float(std::stof(std::string(text)));
  if (type == "bool") return AttrValue::Bool(text == "true");
  if (type == "string") return AttrValue::String(Unquote(text));
  if (type == "shape") {
    if (text.find("unknown_rank") != std::string_view::npos) {
      return AttrValue::Shape(PartialShape::UnknownRank());
    }
    return AttrValue::Shape(PartialShape::Scalar());
  }
  if (type.rfind("list(", 0) == 0) {
    if (text.size() < 2 || text.front() != '[' || text.back() != ']') {
      return Status::Error("bad list default '" + std::string(text) + "'");
    }
    AttrListValue list;
    std::string elem = type.substr(5, type.size() - 6);
    for (const std::string& item : SplitList(text.substr(1, text.size() - 2))) {
      if (elem == "int") list.i.push_back(std::stoll(item));
      else if (elem == "float") list.f.push_back(std::stof(item));
      else if (elem == "string") list.s.push_back(Unquote(item));
      else if (elem == "bool") list.b.push_back(item == "true");
      else if (elem == "type") {
        auto t = ParseTypeWord(item);
        if (!t) return Status::Error("bad type '" + item + "'");
        list.type.push_back(*t);
      } else {
        return Status::Error("unsupported list default for " + type);
      }
    }
    return AttrValue::List(std::move(list));
  }
  return Status::Error("defaults of attrs of type " + type + " are not supported");
}

StatusOr<OpDef::AttrDef> ParseAttrSpec(const std::string& spec) {
  OpDef::AttrDef attr;
  size_t colon = spec.find(':');
  if (colon == std::string::npos) return Status::Error("attr spec without ':': " + spec);
  attr.name = std::string(Trim(std::string_view(spec).substr(0, colon)));
  std::string_view rest = Trim(std::string_view(spec).substr(colon + 1));
  std::string_view default_text;
  // The default follows the first '=' that is not part of a minimum (">= 1").
  size_t eq = rest.find('=');
  while (eq != std::string_view::npos && eq > 0 && rest[eq - 1] == '>') eq = rest.find('=', eq + 1);
  if (eq != std::string_view::npos) {
    default_text = Trim(rest.substr(eq + 1));
    rest = Trim(rest.substr(0, eq));
  }
  size_t ge = rest.find(">=");
  if (ge != std::string_view::npos) {
    attr.has_minimum = true;
    attr.minimum = std::stoll(std::string(Trim(rest.substr(ge + 2))));
    rest = Trim(rest.substr(0, ge));
  }
  if (!rest.empty() && rest.front() == '{') {
    // Allowed values: types ({float, double}) or strings ({'SAME', 'VALID'}).
    std::string_view inner = rest.substr(1, rest.size() - 2);
    AttrListValue allowed;
    std::vector<std::string> items = SplitList(inner);
    bool strings = !items.empty() && (items[0][0] == '\'' || items[0][0] == '"');
    for (const std::string& item : items) {
      if (strings) {
        allowed.s.push_back(Unquote(item));
      } else {
        auto t = ParseTypeWord(item);
        if (!t) return Status::Error("bad type '" + item + "' in attr spec " + spec);
        allowed.type.push_back(*t);
      }
    }
    attr.type = strings ? "string" : "type";
    attr.allowed_values = AttrValue::List(std::move(allowed));
  } else if (rest.rfind("list(", 0) == 0 && rest.find('{') != std::string_view::npos) {
    // list({float, double})
    size_t open = rest.find('{'), close = rest.find('}');
    AttrListValue allowed;
    for (const std::string& item : SplitList(rest.substr(open + 1, close - open - 1))) {
      auto t = ParseTypeWord(item);
      if (!t) return Status::Error("bad type '" + item + "' in attr spec " + spec);
      allowed.type.push_back(*t);
    }
    attr.type = "list(type)";
    attr.allowed_values = AttrValue::List(std::move(allowed));
  } else {
    attr.type = std::string(rest);
  }
  if (!default_text.empty()) {
    ASSIGN_OR_RETURN(AttrValue v, ParseDefault(attr.type, default_text));
    attr.default_value = std::move(v);
  }
  return attr;
}

StatusOr<OpDef::ArgDef> ParseArgSpec(const std::string& spec, const std::vector<OpDef::AttrDef>& attrs) {
  OpDef::ArgDef arg;
  size_t colon = spec.find(':');
  if (colon == std::string::npos) return Status::Error("arg spec without ':': " + spec);
  arg.name = std::string(Trim(std::string_view(spec).substr(0, colon)));
  std::string type_expr(Trim(std::string_view(spec).substr(colon + 1)));
  if (type_expr.rfind("Ref(", 0) == 0 && type_expr.back() == ')') {
    arg.is_ref = true;
    type_expr = type_expr.substr(4, type_expr.size() - 5);
  }
  size_t star = type_expr.find('*');
  if (star != std::string::npos) {
    arg.number_attr = std::string(Trim(std::string_view(type_expr).substr(0, star)));
    type_expr = std::string(Trim(std::string_view(type_expr).substr(star + 1)));
  }
  for (const OpDef::AttrDef& a : attrs) {
    if (a.name == type_expr) {
      if (a.type == "type") {
        arg.type_attr = a.name;
      } else if (a.type == "list(type)") {
        arg.type_list_attr = a.name;
      } else {
        return Status::Error("arg " + arg.name + " names attr " + a.name + " of type " + a.type);
      }
      return arg;
    }
  }
  auto t = ParseTypeWord(type_expr);
  if (!t) return Status::Error("arg spec '" + spec + "': unknown type or attr '" + type_expr + "'");
  arg.type = *t;
  return arg;
}

}  // namespace

const OpDef::AttrDef* OpDef::FindAttr(const std::string& attr_name) const {
  for (const AttrDef& a : attr) {
    if (a.name == attr_name) return &a;
  }
  return nullptr;
}

OpDefBuilder::OpDefBuilder(std::string name) : name_(std::move(name)) {}
OpDefBuilder& OpDefBuilder::Input(std::string spec) {
  inputs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::Output(std::string spec) {
  outputs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::Attr(std::string spec) {
  attrs_.push_back(std::move(spec));
  return *this;
}
OpDefBuilder& OpDefBuilder::SetIsStateful() {
  stateful_ = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::SetIsCommutative() {
  commutative_ = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::SetIsAggregate() {
  aggregate_ = true;
  return *this;
}
OpDefBuilder& OpDefBuilder::SetAllowsUninitializedInput() {
  uninitialized_ = true;
  return *this;
}

StatusOr<OpDef> OpDefBuilder::Finalize() const {
  OpDef def;
  def.name = name_;
  def.is_stateful = stateful_;
  def.is_commutative = commutative_;
  def.is_aggregate = aggregate_;
  def.allows_uninitialized_input = uninitialized_;
  for (const std::string& spec : attrs_) {
    auto attr = ParseAttrSpec(spec);
    if (!attr.ok()) return attr.status().WithContext("op " + name_);
    def.attr.push_back(std::move(*attr));
  }
  for (const std::string& spec : inputs_) {
    auto arg = ParseArgSpec(spec, def.attr);
    if (!arg.ok()) return arg.status().WithContext("op " + name_);
    def.input_arg.push_back(std::move(*arg));
  }
  for (const std::string& spec : outputs_) {
    auto arg = ParseArgSpec(spec, def.attr);
    if (!arg.ok()) return arg.status().WithContext("op " + name_);
    def.output_arg.push_back(std::move(*arg));
  }
  return def;
}

namespace {

Status AddArgTypes(const std::string& node, const AttrMap& attrs, const OpDef::ArgDef& arg,
                   std::vector<DataType>* types) {
  std::vector<DataType> one;
  if (!arg.type_list_attr.empty()) {
    ASSIGN_OR_RETURN(one, GetTypeListAttr(attrs, arg.type_list_attr, node));
  } else {
    DataType t = arg.type;
    if (!arg.type_attr.empty()) {
      ASSIGN_OR_RETURN(t, GetTypeAttr(attrs, arg.type_attr, node));
    }
    int64_t n = 1;
    if (!arg.number_attr.empty()) {
      ASSIGN_OR_RETURN(n, GetIntAttr(attrs, arg.number_attr, node));
      if (n < 0 || n > 1000000) {
        return Status::Error("node '" + node + "': attr '" + arg.number_attr + "' is " +
                             std::to_string(n) + ", expected a count between 0 and 1000000");
      }
    }
    one.assign(n, t);
  }
  for (DataType t : one) types->push_back(arg.is_ref ? MakeRefType(t) : t);
  return OkStatus();
}

}  // namespace

Status InOutTypesForNode(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def,
                         std::vector<DataType>* inputs, std::vector<DataType>* outputs) {
  inputs->clear();
  outputs->clear();
  for (const OpDef::ArgDef& arg : op_def.input_arg) {
    RETURN_IF_ERROR(AddArgTypes(node_name, attrs, arg, inputs));
  }
  for (const OpDef::ArgDef& arg : op_def.output_arg) {
    RETURN_IF_ERROR(AddArgTypes(node_name, attrs, arg, outputs));
  }
  return OkStatus();
}

void AddDefaultsToAttrs(const OpDef& op_def, AttrMap* attrs) {
  for (const OpDef::AttrDef& a : op_def.attr) {
    if (a.default_value && !attrs->count(a.name)) (*attrs)[a.name] = *a.default_value;
  }
}

namespace {

bool KindMatches(const std::string& type, const AttrValue& v) {
  using K = AttrValue::Kind;
  if (v.kind() == K::kPlaceholder) return true;  // bound when a function is instantiated
  if (type.rfind("list(", 0) == 0) {
    if (v.kind() != K::kList) return false;
    std::string name = v.KindName();
    return name == "list" || name == type;
  }
  return v.KindName() == type;
}

}  // namespace

Status ValidateAttrs(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def) {
  for (const OpDef::AttrDef& a : op_def.attr) {
    const AttrValue* v = FindAttr(attrs, a.name);
    if (!v) {
      return Status::Error("node '" + node_name + "' (" + op_def.name + "): missing attr '" +
                           a.name + "' of type " + a.type);
    }
    if (!KindMatches(a.type, *v)) {
      return Status::Error("node '" + node_name + "' (" + op_def.name + "): attr '" + a.name +
                           "' is a " + v->KindName() + ", expected a " + a.type);
    }
    if (a.allowed_values && v->kind() != AttrValue::Kind::kPlaceholder) {
      const AttrListValue& allowed = a.allowed_values->list();
      auto check_type = [&](DataType t) -> Status {
        if (allowed.type.empty()) return OkStatus();
        for (DataType ok : allowed.type) {
          if (ok == t) return OkStatus();
        }
        return Status::Error("node '" + node_name + "' (" + op_def.name + "): attr '" + a.name +
                             "' is " + DataTypeName(t) + ", not in the allowed types {" +
                             DataTypeListString(allowed.type) + "}");
      };
      if (v->kind() == AttrValue::Kind::kType) RETURN_IF_ERROR(check_type(v->type()));
      if (v->kind() == AttrValue::Kind::kList) {
        for (DataType t : v->list().type) RETURN_IF_ERROR(check_type(t));
      }
      if (v->kind() == AttrValue::Kind::kString && !allowed.s.empty()) {
        bool found = false;
        for (const std::string& s : allowed.s) found |= s == v->s();
        if (!found) {
          std::string list;
          for (const std::string& s : allowed.s) list += (list.empty() ? "" : ", ") + ("\"" + s + "\"");
          return Status::Error("node '" + node_name + "' (" + op_def.name + "): attr '" + a.name +
                               "' is \"" + v->s() + "\", expected one of " + list);
        }
      }
    }
    if (a.has_minimum) {
      int64_t value = v->kind() == AttrValue::Kind::kInt    ? v->i()
                      : v->kind() == AttrValue::Kind::kList ? static_cast<int64_t>(v->list().size())
                                                            : a.minimum;
      if (value < a.minimum) {
        return Status::Error("node '" + node_name + "' (" + op_def.name + "): attr '" + a.name +
                             "' is " + std::to_string(value) + ", must be at least " +
                             std::to_string(a.minimum));
      }
    }
  }
  return OkStatus();
}

Status NameRangeForArg(const std::string& node_name, const AttrMap& attrs, const OpDef& op_def,
                       bool is_input, const std::string& arg_name, int* start, int* end) {
  const auto& args = is_input ? op_def.input_arg : op_def.output_arg;
  int pos = 0;
  for (const OpDef::ArgDef& arg : args) {
    std::vector<DataType> types;
    RETURN_IF_ERROR(AddArgTypes(node_name, attrs, arg, &types));
    if (arg.name == arg_name) {
      *start = pos;
      *end = pos + static_cast<int>(types.size());
      return OkStatus();
    }
    pos += static_cast<int>(types.size());
  }
  return Status::Error("node '" + node_name + "' (" + op_def.name + "): no " +
                       (is_input ? "input" : "output") + " named '" + arg_name + "'");
}

}  // namespace xlens::graph
