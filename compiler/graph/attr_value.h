// AttrValue: the value of a node attribute, every kind TensorFlow's attr_value.proto has: a
// string, int, float, bool, type, shape, tensor, a list of any of these, a function (name and
// attrs), or a placeholder (`$T` in a function body, bound when the function is instantiated).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/partial_shape.h"
#include "compiler/graph/tensor.h"
#include "compiler/graph/types.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class AttrValue;
using AttrMap = std::map<std::string, AttrValue>;

// A function reference with the attrs to instantiate it with (`f: {name: "cond" attr {...}}`).
struct NameAttrList {
  std::string name;
  std::shared_ptr<AttrMap> attr = std::make_shared<AttrMap>();
};

struct AttrListValue {
  std::vector<std::string> s;
  std::vector<int64_t> i;
  std::vector<float> f;
  std::vector<bool> b;
  std::vector<DataType> type;
  std::vector<PartialShape> shape;
  std::vector<Tensor> tensor;
  std::vector<NameAttrList> func;
  // Number of elements of the kind that is set (a list holds one kind).
  size_t size() const {
    return s.size() + i.size() + f.size() + b.size() + type.size() + shape.size() +
           tensor.size() + func.size();
  }
};

class AttrValue {
 public:
  enum class Kind { kNone, kString, kInt, kFloat, kBool, kType, kShape, kTensor, kList, kFunc,
                    kPlaceholder };

  AttrValue() = default;
  static AttrValue String(std::string v);
  static AttrValue Int(int64_t v);
  static AttrValue Float(float v);
  static AttrValue Bool(bool v);
  static AttrValue Type(DataType v);
  static AttrValue Shape(PartialShape v);
  // `original_proto` (a serialized TensorProto) is written back unchanged by the exporter, so a
  // constant round-trips in exactly the encoding it came in.
  static AttrValue TensorValue(Tensor v, std::string original_proto = "");
  static AttrValue List(AttrListValue v);
  static AttrValue Func(NameAttrList v);
  static AttrValue Placeholder(std::string name);

  Kind kind() const { return kind_; }
  // "string", "int", "float", "bool", "type", "shape", "tensor", "list(int)", "func",
  // "placeholder" (OpDef attr type names; "list" when empty).
  std::string KindName() const;

  const std::string& s() const { return s_; }
  int64_t i() const { return i_; }
  float f() const { return f_; }
  bool b() const { return b_; }
  DataType type() const { return type_; }
  const PartialShape& shape() const { return shape_; }
  const Tensor& tensor() const { return *tensor_; }
  const std::string& tensor_proto() const { return s_; }  // original encoding, may be empty
  const AttrListValue& list() const { return *list_; }
  AttrListValue& mutable_list() { return *list_; }
  const NameAttrList& func() const { return *func_; }
  const std::string& placeholder() const { return s_; }

  // Short text for messages and DOT labels ("DT_FLOAT", "[2,3]", "[1, 2]", "f{...}").
  std::string DebugString() const;
  bool operator==(const AttrValue& other) const;

 private:
  Kind kind_ = Kind::kNone;
  std::string s_;
  int64_t i_ = 0;
  float f_ = 0;
  bool b_ = false;
  DataType type_ = DT_INVALID;
  PartialShape shape_;
  std::shared_ptr<Tensor> tensor_;
  std::shared_ptr<AttrListValue> list_;
  std::shared_ptr<NameAttrList> func_;
};

// Typed lookups with one message naming the node and the attr on a miss or a wrong kind.
// `node` is only used for the message.
const AttrValue* FindAttr(const AttrMap& attrs, const std::string& name);
StatusOr<DataType> GetTypeAttr(const AttrMap& attrs, const std::string& name,
                               const std::string& node);
StatusOr<int64_t> GetIntAttr(const AttrMap& attrs, const std::string& name,
                             const std::string& node);
StatusOr<float> GetFloatAttr(const AttrMap& attrs, const std::string& name,
                             const std::string& node);
StatusOr<bool> GetBoolAttr(const AttrMap& attrs, const std::string& name,
                           const std::string& node);
StatusOr<std::string> GetStringAttr(const AttrMap& attrs, const std::string& name,
                                    const std::string& node);
StatusOr<PartialShape> GetShapeAttr(const AttrMap& attrs, const std::string& name,
                                    const std::string& node);
StatusOr<Tensor> GetTensorAttr(const AttrMap& attrs, const std::string& name,
                               const std::string& node);
StatusOr<std::vector<int64_t>> GetIntListAttr(const AttrMap& attrs, const std::string& name,
                                              const std::string& node);
StatusOr<std::vector<DataType>> GetTypeListAttr(const AttrMap& attrs, const std::string& name,
                                                const std::string& node);
StatusOr<NameAttrList> GetFuncAttr(const AttrMap& attrs, const std::string& name,
                                   const std::string& node);

}  // namespace xlens::graph
