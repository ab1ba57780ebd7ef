#include "compiler/graph/variable_nodes.h"

namespace xlens::graph {

bool IsResourcePlaceholder(const Node& node) {
  const std::string& op = node.type_string();
  if (op != "Placeholder" && op != "PlaceholderV2") return false;
  return node.num_outputs() == 1 && node.output_type(0) == DT_RESOURCE;
}

bool IsVariableOp(std::string_view op) {
  return op == "VarHandleOp" || op == "VariableV2" || op == "Variable";
}

}  // namespace xlens::graph
