// The nodes that stand for a variable in a graph. A TF2 function graph's captured variable is a
// Placeholder of dtype resource (".../ReadVariableOp/resource", fed the variable's handle at the
// call); a TF1 graph or a SavedModel names its variables by VarHandleOp, VariableV2 or Variable.
// The graph commands bind these to values (--assign, a SavedModel's checkpoint) and a
// must-compile function takes them as parameters: all recognise them here.
#pragma once

#include <string_view>

#include "compiler/graph/graph.h"

namespace xlens::graph {

// Whether `node` is a Placeholder (or PlaceholderV2) whose one output is a resource.
bool IsResourcePlaceholder(const Node& node);

// Whether `op` makes a variable: VarHandleOp (a resource variable), VariableV2 or Variable (a
// reference variable).
bool IsVariableOp(std::string_view op);

}  // namespace xlens::graph
