// The scene items a graph is drawn with, straight from Graphviz's coordinates (no SVG): a node
// box with its label, an edge spline with its arrow head, a cluster box with its title. They
// are built for thousands of nodes: nodes cache their pixels in device coordinates (panning
// blits, it does not repaint), text is skipped when a node is only a few pixels tall, and edges
// drop to one-pixel cosmetic pens when zoomed out.
#pragma once

#include <QGraphicsItem>

#include "viewer/graph_layout.h"
#include "viewer/graph_style.h"

namespace xlens::viewer {

enum GraphItemType {
  kNodeItemType = QGraphicsItem::UserType + 1,
  kEdgeItemType,
  kClusterItemType,
};

// How a node or cluster is marked, strongest last.
enum class Mark { kNone, kHighlighted, kCurrent };

class NodeItem : public QGraphicsItem {
 public:
  // `node` must outlive the item (the view keeps the layout alive).
  explicit NodeItem(const GraphNode* node);

  // The node drawn.
  const GraphNode& node() const { return *node_; }
  // Sets the diff border drawn around the box.
  void SetBorder(BorderRole role);
  BorderRole border() const { return border_; }
  // Sets the search / selection mark.
  void SetMark(Mark mark);
  Mark mark() const { return mark_; }

  QRectF boundingRect() const override;
  QPainterPath shape() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  int type() const override { return kNodeItemType; }

 private:
  QPainterPath Outline(const QRectF& rect) const;
  const GraphNode* node_;
  BorderRole border_ = BorderRole::kNone;
  Mark mark_ = Mark::kNone;
};

class EdgeItem : public QGraphicsItem {
 public:
  explicit EdgeItem(const GraphEdge* edge);

  const GraphEdge& edge() const { return *edge_; }
  // Draws the edge stronger (the edges of the selected node).
  void SetEmphasis(bool emphasis);

  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  int type() const override { return kEdgeItemType; }

 private:
  const GraphEdge* edge_;
  QPolygonF arrow_;
  QRectF bounds_;
  bool emphasis_ = false;
};

class ClusterItem : public QGraphicsItem {
 public:
  explicit ClusterItem(const GraphCluster* cluster);

  const GraphCluster& cluster() const { return *cluster_; }
  void SetBorder(BorderRole role);
  BorderRole border() const { return border_; }
  void SetMark(Mark mark);
  Mark mark() const { return mark_; }

  QRectF boundingRect() const override;
  void paint(QPainter* painter, const QStyleOptionGraphicsItem* option, QWidget* widget) override;
  int type() const override { return kClusterItemType; }

 private:
  const GraphCluster* cluster_;
  BorderRole border_ = BorderRole::kNone;
  Mark mark_ = Mark::kNone;
};

// The colours of the marks: a highlighted (search hit) and a current (selected) outline.
QColor MarkColor(Mark mark);

}  // namespace xlens::viewer
