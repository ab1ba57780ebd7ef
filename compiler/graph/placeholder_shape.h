// The shape a node declares in its `shape` attr (a Placeholder, a variable). A fed Placeholder's
// value is checked against this shape (it may be stricter than the `_output_shapes` a graph
// carries), by the graph commands when they feed it and by ahead of time when it turns a feed
// into a parameter.
#pragma once

#include <optional>

#include "compiler/graph/graph.h"

namespace xlens::graph {

// The `shape` attr in `attrs` (a Placeholder's, a variable's); nullopt where there is none.
std::optional<PartialShape> ShapeAttr(const AttrMap& attrs);

// The `shape` attr of a Placeholder node; nullopt for any other node or a Placeholder without one.
std::optional<PartialShape> PlaceholderShape(const Node& node);

}  // namespace xlens::graph
