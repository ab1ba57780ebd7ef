// How the graph looks: XLA's graph dumper palette (hlo_graph_dumper.cc, Material colours) per
// opcode, so a graph reads the same here as in XLA's dot/HTML dumps: dot and convolution dark
// blue with white text, reductions purple, parameters orange, fusions grey rounded clusters,
// control flow dark green, elementwise yellow (white when scalar), data movement green.
#pragma once

#include <QColor>
#include <string>
#include <string_view>
#include <vector>

#include "viewer/hlo_outline.h"

namespace xlens::viewer {

// XLA's colour schemes, by the names hlo_graph_dumper.cc gives them.
enum class ColorScheme {
  kBlue, kBrown, kDarkBlue, kDarkGreen, kDarkOrange, kDarkRed, kGray, kGreen, kOrange,
  kPurple, kRed, kWhite, kYellow, kDashedBorder,
};

struct NodeColors {
  QColor fill, stroke, text;
};

enum class NodeShape { kBox, kRoundedBox, kEllipse, kCircle, kDiamond };

// How a diff marks a node or cluster.
enum class BorderRole { kNone, kRemoved, kAdded, kModified, kFusedInto };

// The fill, stroke and text colours of a scheme.
NodeColors ColorsForScheme(ColorScheme scheme);

// The scheme XLA's dumper gives an instruction; `fused` when it sits in a fused computation
// (where data movement is nearly free and drawn white).
ColorScheme SchemeForInstruction(const HloOutlineInstruction& instruction, bool fused);

// The node shape for an instruction (while loops are ellipses, as in XLA's dumps).
NodeShape ShapeForInstruction(const HloOutlineInstruction& instruction);

// The lines drawn inside an instruction's node: "Parameter 0" / name, or opcode (and fusion
// kind) / name when the name does not start with the opcode, then the shape.
std::vector<std::string> LabelForInstruction(const HloOutlineInstruction& instruction);

// The fill and stroke of a fusion cluster (a light grey rounded box), and of one highlighted.
NodeColors FusionClusterColors(bool highlighted = false);

// The colour of a diff border.
QColor BorderColor(BorderRole role);

// Graphviz's shape name for a shape, and back (unknown names are boxes).
const char* GraphvizShapeName(NodeShape shape);
NodeShape ShapeFromGraphvizName(std::string_view name);

}  // namespace xlens::viewer
