#include "compiler/graph/placeholder_shape.h"

#include "compiler/graph/attr_value.h"

namespace xlens::graph {

std::optional<PartialShape> ShapeAttr(const AttrMap& attrs) {
  const AttrValue* s = FindAttr(attrs, "shape");
  if (s == nullptr || s->kind() != AttrValue::Kind::kShape) return std::nullopt;
  return s->shape();
}

std::optional<PartialShape> PlaceholderShape(const Node& node) {
  if (node.type_string() != "Placeholder") return std::nullopt;
  return ShapeAttr(node.attrs());
}

}  // namespace xlens::graph
