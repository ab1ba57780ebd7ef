#include "compiler/graph/graph_def.h"

#include <charconv>

namespace xlens::graph {

const FunctionDef* FunctionDefLibrary::Find(const std::string& name) const {
  for (const FunctionDef& f : function) {
    if (f.signature.name == name) return &f;
  }
  return nullptr;
}

std::string TensorId::ToString() const {
  if (index < 0) return "^" + node;
  if (index == 0) return node;
  return node + ":" + std::to_string(index);
}

StatusOr<TensorId> ParseTensorName(const std::string& name) {
  TensorId id;
  if (!name.empty() && name[0] == '^') {
    id.node = name.substr(1);
    id.index = -1;
  } else {
    size_t colon = name.rfind(':');
    id.node = name;
    if (colon != std::string::npos) {
      std::string_view digits(name.data() + colon + 1, name.size() - colon - 1);
      int value = 0;
      auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
      if (ec != std::errc() || ptr != digits.data() + digits.size() || digits.empty() || value < 0) {
        return Status::Error("bad tensor name '" + name + "': expected NODE or NODE:INDEX");
      }
      id.node = name.substr(0, colon);
      id.index = value;
    }
  }
  if (id.node.empty()) return Status::Error("bad tensor name '" + name + "': empty node name");
  return id;
}

}  // namespace xlens::graph
