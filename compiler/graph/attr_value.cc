#include "compiler/graph/attr_value.h"

namespace xlens::graph {

AttrValue AttrValue::String(std::string v) {
  AttrValue a;
  a.kind_ = Kind::kString;
  a.s_ = std::move(v);
  return a;
}
AttrValue AttrValue::Int(int64_t v) {
  AttrValue a;
  a.kind_ = Kind::kInt;
  a.i_ = v;
  return a;
}
AttrValue AttrValue::Float(float v) {
  AttrValue a;
  a.kind_ = Kind::kFloat;
  a.f_ = v;
  return a;
}
AttrValue AttrValue::Bool(bool v) {
  AttrValue a;
  a.kind_ = Kind::kBool;
  a.b_ = v;
  return a;
}
AttrValue AttrValue::Type(DataType v) {
  AttrValue a;
  a.kind_ = Kind::kType;
  a.type_ = v;
  return a;
}
AttrValue AttrValue::Shape(PartialShape v) {
  AttrValue a;
  a.kind_ = Kind::kShape;
  a.shape_ = std::move(v);
  return a;
}
AttrValue AttrValue::TensorValue(Tensor v, std::string original_proto) {
  AttrValue a;
  a.kind_ = Kind::kTensor;
  a.tensor_ = std::make_shared<Tensor>(std::move(v));
  a.s_ = std::move(original_proto);
  return a;
}
AttrValue AttrValue::List(AttrListValue v) {
  AttrValue a;
  a.kind_ = Kind::kList;
  a.list_ = std::make_shared<AttrListValue>(std::move(v));
  return a;
}
AttrValue AttrValue::Func(NameAttrList v) {
  AttrValue a;
  a.kind_ = Kind::kFunc;
  a.func_ = std::make_shared<NameAttrList>(std::move(v));
  return a;
}
AttrValue AttrValue::Placeholder(std::string name) {
  AttrValue a;
  a.kind_ = Kind::kPlaceholder;
  a.s_ = std::move(name);
  return a;
}

std::string AttrValue::KindName() const {
  switch (kind_) {
    case Kind::kNone: return "none";
    case Kind::kString: return "string";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kBool: return "bool";
    case Kind::kType: return "type";
    case Kind::kShape: return "shape";
    case Kind::kTensor: return "tensor";
    case Kind::kFunc: return "func";
    case Kind::kPlaceholder: return "placeholder";
    case Kind::kList: {
      const AttrListValue& l = *list_;
      if (!l.s.empty()) return "list(string)";
      if (!l.i.empty()) return "list(int)";
      if (!l.f.empty()) return "list(float)";
      if (!l.b.empty()) return "list(bool)";
      if (!l.type.empty()) return "list(type)";
      if (!l.shape.empty()) return "list(shape)";
      if (!l.tensor.empty()) return "list(tensor)";
      if (!l.func.empty()) return "list(func)";
      return "list";
    }
  }
  return "none";
}

namespace {

std::string FloatText(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(f));
  return buf;
}

template <typename T, typename F>
std::string JoinList(const std::vector<T>& v, F f) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) out += ", ";
    out += f(v[i]);
  }
  return out + "]";
}

}  // namespace

std::string AttrValue::DebugString() const {
  switch (kind_) {
    case Kind::kNone: return "<none>";
    case Kind::kString: return "\"" + s_ + "\"";
    case Kind::kInt: return std::to_string(i_);
    case Kind::kFloat: return FloatText(f_);
    case Kind::kBool: return b_ ? "true" : "false";
    case Kind::kType: return DataTypeEnumName(type_);
    case Kind::kShape: return shape_.ToString();
    case Kind::kTensor: return tensor_->DebugString(8);
    case Kind::kFunc: return func_->name + "[...]";
    case Kind::kPlaceholder: return "$" + s_;
    case Kind::kList: {
      const AttrListValue& l = *list_;
      if (!l.s.empty()) return JoinList(l.s, [](const std::string& s) { return "\"" + s + "\""; });
      if (!l.i.empty()) return JoinList(l.i, [](int64_t i) { return std::to_string(i); });
      if (!l.f.empty()) return JoinList(l.f, FloatText);
      if (!l.b.empty()) return JoinList(l.b, [](bool b) { return std::string(b ? "true" : "false"); });
      if (!l.type.empty()) return JoinList(l.type, DataTypeEnumName);
      if (!l.shape.empty()) return JoinList(l.shape, [](const PartialShape& s) { return s.ToString(); });
      if (!l.tensor.empty()) return JoinList(l.tensor, [](const Tensor& t) { return t.DebugString(4); });
      if (!l.func.empty()) return JoinList(l.func, [](const NameAttrList& f) { return f.name; });
      return "[]";
    }
  }
  return "";
}

bool AttrValue::operator==(const AttrValue& o) const {
  if (kind_ != o.kind_) return false;
  switch (kind_) {
    case Kind::kNone: return true;
    case Kind::kString: case Kind::kPlaceholder: return s_ == o.s_;
    case Kind::kInt: return i_ == o.i_;
    case Kind::kFloat: return f_ == o.f_ || (f_ != f_ && o.f_ != o.f_);
    case Kind::kBool: return b_ == o.b_;
    case Kind::kType: return type_ == o.type_;
    case Kind::kShape: return shape_ == o.shape_;
    case Kind::kTensor: return tensor_->Identical(*o.tensor_);
    case Kind::kFunc: return func_->name == o.func_->name && *func_->attr == *o.func_->attr;
    case Kind::kList: {
      const AttrListValue& a = *list_;
      const AttrListValue& b = *o.list_;
      if (a.s != b.s || a.i != b.i || a.f != b.f || a.b != b.b || a.type != b.type ||
          a.shape != b.shape || a.tensor.size() != b.tensor.size() || a.func.size() != b.func.size()) {
        return false;
      }
      for (size_t i = 0; i < a.tensor.size(); ++i) {
        if (!a.tensor[i].Identical(b.tensor[i])) return false;
      }
      for (size_t i = 0; i < a.func.size(); ++i) {
        if (a.func[i].name != b.func[i].name || *a.func[i].attr != *b.func[i].attr) return false;
      }
      return true;
    }
  }
  return false;
}

const AttrValue* FindAttr(const AttrMap& attrs, const std::string& name) {
  auto it = attrs.find(name);
  return it == attrs.end() ? nullptr : &it->second;
}

namespace {

StatusOr<const AttrValue*> Get(const AttrMap& attrs, const std::string& name,
                               const std::string& node, AttrValue::Kind kind, const char* kind_name) {
  const AttrValue* v = FindAttr(attrs, name);
  if (!v) return Status::Error("node '" + node + "': missing attr '" + name + "'");
  if (v->kind() != kind) {
    // An empty list has no element kind: accept it for any list.
    if (!(kind == AttrValue::Kind::kList && v->kind() == AttrValue::Kind::kList)) {
      return Status::Error("node '" + node + "': attr '" + name + "' is a " + v->KindName() +
                           ", expected a " + kind_name);
    }
  }
  return v;
}

}  // namespace

StatusOr<DataType> GetTypeAttr(const AttrMap& attrs, const std::string& name,
                               const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kType, "type"));
  return v->type();
}
StatusOr<int64_t> GetIntAttr(const AttrMap& attrs, const std::string& name,
                             const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kInt, "int"));
  return v->i();
}
StatusOr<float> GetFloatAttr(const AttrMap& attrs, const std::string& name,
                             const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kFloat, "float"));
  return v->f();
}
StatusOr<bool> GetBoolAttr(const AttrMap& attrs, const std::string& name,
                           const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kBool, "bool"));
  return v->b();
}
StatusOr<std::string> GetStringAttr(const AttrMap& attrs, const std::string& name,
                                    const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kString, "string"));
  return v->s();
}
StatusOr<PartialShape> GetShapeAttr(const AttrMap& attrs, const std::string& name,
                                    const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kShape, "shape"));
  return v->shape();
}
StatusOr<Tensor> GetTensorAttr(const AttrMap& attrs, const std::string& name,
                               const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kTensor, "tensor"));
  return v->tensor();
}
StatusOr<std::vector<int64_t>> GetIntListAttr(const AttrMap& attrs, const std::string& name,
                                              const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kList, "list(int)"));
  if (v->list().size() != v->list().i.size()) {
    return Status::Error("node '" + node + "': attr '" + name + "' is a " + v->KindName() +
                         ", expected a list(int)");
  }
  return v->list().i;
}
StatusOr<std::vector<DataType>> GetTypeListAttr(const AttrMap& attrs, const std::string& name,
                                                const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v,
                   Get(attrs, name, node, AttrValue::Kind::kList, "list(type)"));
  if (v->list().size() != v->list().type.size()) {
    return Status::Error("node '" + node + "': attr '" + name + "' is a " + v->KindName() +
                         ", expected a list(type)");
  }
  return v->list().type;
}
StatusOr<NameAttrList> GetFuncAttr(const AttrMap& attrs, const std::string& name,
                                   const std::string& node) {
  ASSIGN_OR_RETURN(const AttrValue* v, Get(attrs, name, node, AttrValue::Kind::kFunc, "func"));
  return v->func();
}

}  // namespace xlens::graph
