// A graph in scene coordinates: what Graphviz's "dot" layout placed, read back from its C API
// (node centres and sizes, edge splines, cluster boxes), with y pointing down as Qt's does. The
// DOT it lays out is either written here from an HLO outline, in XLA's dumper style, or read
// from a dump (the clustering stages' TensorFlow graphs).
#pragma once

#include <QColor>
#include <QFont>
#include <QPainterPath>
#include <QRectF>
#include <QString>
#include <QStringList>
#include <string>
#include <vector>

#include "compiler/support/status.h"
#include "viewer/graph_style.h"
#include "viewer/hlo_outline.h"

namespace xlens::viewer {

struct GraphNode {
  QString id;          // unique in the graph: the instruction name, or fusion/name when repeated
  QString name;        // the instruction's name (the DOT node name for foreign DOT)
  QString opcode;      // empty for foreign DOT
  QStringList label;   // lines drawn inside
  QRectF box;          // in scene coordinates (points, y down)
  QColor fill, stroke, text;
  NodeShape shape = NodeShape::kBox;
  bool dashed = false;  // some neighbours are hidden (neighbourhood mode)
  QString tooltip;
  QStringList op_names;
  QString cluster;  // the innermost cluster holding it, empty at top level
};

struct GraphEdge {
  QString from, to;     // node ids
  QPainterPath path;    // Graphviz's bezier spline
  bool has_arrow = false;
  QPointF arrow_base, arrow_tip;
  bool dashed = false;
};

struct GraphCluster {
  QString id;     // for a fusion, the fusion instruction's name
  QString title;  // lines joined with '\n'
  QRectF box;
  QColor fill, stroke;
  bool rounded = false;
  int depth = 0;  // nesting depth, 0 for a cluster of the root graph
};

struct GraphLayout {
  std::vector<GraphNode> nodes;
  std::vector<GraphEdge> edges;
  std::vector<GraphCluster> clusters;  // outer clusters before the ones inside them
  QRectF bounds;
  QString engine;  // "dot" (Graphviz) or "layered" (LayOutLayered)
  QString note;    // why the layered layout drew it, for the view to say; empty for dot

  // Index of the node with this id, else of the first with this name; -1 when absent.
  int FindNode(const QString& id_or_name) const;
  // Index of the cluster with this id, or -1.
  int FindCluster(const QString& id) const;
};

// How HloComputationToDot draws a computation.
struct DotOptions {
  bool collapse_fusions = false;  // a fusion is one node instead of a cluster of its body
  std::string focus;              // when set: only the neighbourhood of this instruction
  int radius = 3;                 // ... within this many edges (operands and users)
  int max_nodes = 0;              // when > 0: stop growing the neighbourhood at this many nodes
};

// What HloComputationToDot left out, for the note the view shows.
struct DotSummary {
  int total_nodes = 0;         // nodes of the whole computation drawn as the options say
  int shown_nodes = 0;         // nodes in the DOT
  int collapsed_fusions = 0;   // fusions drawn as one node
  int boundary_nodes = 0;      // shown nodes with hidden neighbours (drawn dashed)
  std::string focus;           // the instruction the neighbourhood was grown from
};

// DOT for one computation in XLA's dumper style: nodes coloured by opcode, sized to their
// labels (measured with the font GraphItems draw in), fusions as clusters holding their fused
// computations (nested fusions nested) unless collapsed; operand -> user edges.
std::string HloComputationToDot(const HloOutline& outline, const HloOutlineComputation& computation,
                                const DotOptions& options, DotSummary* summary = nullptr);

// The number of nodes HloComputationToDot draws for the whole computation.
int CountGraphNodes(const HloOutline& outline, const HloOutlineComputation& computation,
                    bool collapse_fusions);

// Which layout LayoutDot draws with. kAuto: Graphviz's dot, unless EstimateOrderingWork says dot
// would take too long (kMaxDotOrderingWork, kMaxDotCells), then the layered one with a note.
enum class LayoutEngine { kAuto, kGraphviz, kLayered };

// Lays DOT out and reads the result. Bad DOT (agmemread fails), a failed layout, or a graph over
// the size limits is an error with Graphviz's own message. Nothing the DOT names is opened: images
// (image=, HTML <IMG>), shape files, font paths are stripped before layout (SanitizeDot). With
// kLayered, `note` says why (it becomes GraphLayout::note). Graphviz is not thread safe: calls are
// serialised by a lock; the viewer makes them in a child process (layout_process.h).
xlens::StatusOr<GraphLayout> LayoutDot(const std::string& dot, LayoutEngine engine = LayoutEngine::kAuto,
                                       const std::string& note = "");

// Past either, kAuto draws with the layered layout: measured, dot takes about 1 s at 150,000 of
// ordering work (a 75-node chain whose every node also reads the parameter, or 1,000 nodes of an
// unrolled step) and 10 s past 300,000.
inline constexpr int64_t kMaxDotOrderingWork = 150000;
inline constexpr int64_t kMaxDotCells = 30000;

// The size limits LayoutDot enforces before laying out.
inline constexpr int kMaxLayoutNodes = 20000;
inline constexpr int kMaxLayoutEdges = 100000;

// The font node labels are measured and drawn with.
QFont GraphLabelFont();

}  // namespace xlens::viewer
