#include "viewer/graph_items.h"

#include <QFontMetricsF>
#include <QPainter>
#include <QStyleOptionGraphicsItem>
#include <QtMath>

namespace xlens::viewer {
namespace {

// Text is drawn only when a line would be at least this many pixels tall on screen.
constexpr double kMinTextPixels = 4.5;
// Below this scale a node is a plain rectangle: outlines and antialiasing cost more than they show.
constexpr double kPlainScale = 0.12;
// Room around a node's box for its diff border and mark.
constexpr double kHalo = 7.0;

double ScaleOf(const QPainter* painter) {
  return QStyleOptionGraphicsItem::levelOfDetailFromTransform(painter->worldTransform());
}

void DrawLines(QPainter* painter, const QRectF& rect, const QStringList& lines, const QFont& font,
               const QColor& color, double top_margin, bool centre_vertically) {
  QFontMetricsF metrics(font);
  double line_height = metrics.height();
  double y = centre_vertically ? rect.top() + (rect.height() - line_height * lines.size()) / 2 : rect.top() + top_margin;
  painter->setFont(font);
  painter->setPen(color);
  for (const QString& line : lines) {
    QString shown = metrics.elidedText(line, Qt::ElideMiddle, rect.width() - 6);
    painter->drawText(QRectF(rect.left() + 3, y, rect.width() - 6, line_height), Qt::AlignHCenter | Qt::AlignVCenter, shown);
    y += line_height;
  }
}

}  // namespace

QColor MarkColor(Mark mark) {
  switch (mark) {
    case Mark::kNone: return {};
    case Mark::kHighlighted: return QColor("#ff6d00");
    case Mark::kCurrent: return QColor("#d50000");
  }
  return {};
}

// ---------------------------------------------------------------------------------------------

NodeItem::NodeItem(const GraphNode* node) : node_(node) {
  setPos(node->box.topLeft());
  setZValue(2);
  // Panning then blits cached pixels instead of drawing text again; zooming redraws once.
  setCacheMode(QGraphicsItem::DeviceCoordinateCache);
  if (!node->tooltip.isEmpty()) setToolTip(node->tooltip);
}

void NodeItem::SetBorder(BorderRole role) {
  if (role == border_) return;
  border_ = role;
  update();
}

void NodeItem::SetMark(Mark mark) {
  if (mark == mark_) return;
  mark_ = mark;
  setZValue(mark == Mark::kNone ? 2 : 3);
  update();
}

QRectF NodeItem::boundingRect() const {
  return QRectF(QPointF(0, 0), node_->box.size()).adjusted(-kHalo, -kHalo, kHalo, kHalo);
}

QPainterPath NodeItem::Outline(const QRectF& rect) const {
  QPainterPath path;
  switch (node_->shape) {
    case NodeShape::kEllipse:
    case NodeShape::kCircle:
      path.addEllipse(rect);
      break;
    case NodeShape::kDiamond: {
      QPolygonF diamond;
      diamond << QPointF(rect.center().x(), rect.top()) << QPointF(rect.right(), rect.center().y())
              << QPointF(rect.center().x(), rect.bottom()) << QPointF(rect.left(), rect.center().y());
      path.addPolygon(diamond);
      path.closeSubpath();
      break;
    }
    case NodeShape::kRoundedBox:
      path.addRoundedRect(rect, 6, 6);
      break;
    case NodeShape::kBox:
      path.addRect(rect);
      break;
  }
  return path;
}

QPainterPath NodeItem::shape() const {
  return Outline(QRectF(QPointF(0, 0), node_->box.size()));
}

void NodeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const double scale = ScaleOf(painter);
  const QRectF rect(QPointF(0, 0), node_->box.size());
  if (scale < kPlainScale) {
    // A few pixels: colour is all that reads, and the diff or search colour matters most.
    QColor colour = mark_ != Mark::kNone ? MarkColor(mark_)
                    : border_ != BorderRole::kNone ? BorderColor(border_) : node_->fill;
    painter->fillRect(rect, colour);
    return;
  }
  painter->setRenderHint(QPainter::Antialiasing, scale > 0.3);
  QPen pen(node_->stroke, 1.0);
  if (node_->dashed) pen.setStyle(Qt::DashLine);
  painter->setPen(pen);
  painter->setBrush(node_->fill);
  painter->drawPath(Outline(rect));
  painter->setBrush(Qt::NoBrush);
  if (border_ != BorderRole::kNone) {
    painter->setPen(QPen(BorderColor(border_), 3.5));
    painter->drawPath(Outline(rect.adjusted(-2.5, -2.5, 2.5, 2.5)));
  }
  if (mark_ != Mark::kNone) {
    QPen mark_pen(MarkColor(mark_), mark_ == Mark::kCurrent ? 3.0 : 2.5);
    if (mark_ == Mark::kHighlighted) mark_pen.setStyle(Qt::DashLine);
    painter->setPen(mark_pen);
    painter->drawPath(Outline(rect.adjusted(-5.5, -5.5, 5.5, 5.5)));
  }
  QFont font = GraphLabelFont();
  if (scale * font.pixelSize() >= kMinTextPixels && !node_->label.isEmpty()) {
    DrawLines(painter, rect, node_->label, font, node_->text, 0, true);
  }
}

// ---------------------------------------------------------------------------------------------

EdgeItem::EdgeItem(const GraphEdge* edge) : edge_(edge) {
  setZValue(1);
  bounds_ = edge->path.boundingRect();
  if (edge->has_arrow) {
    QPointF direction = edge->arrow_tip - edge->arrow_base;
    double length = std::hypot(direction.x(), direction.y());
    if (length > 1e-6) {
      QPointF normal(-direction.y() / length, direction.x() / length);
      double half = std::max(2.0, length * 0.35);
      arrow_ << edge->arrow_tip << edge->arrow_base + normal * half << edge->arrow_base - normal * half;
      bounds_ |= arrow_.boundingRect();
    }
  }
  bounds_.adjust(-2, -2, 2, 2);
}

void EdgeItem::SetEmphasis(bool emphasis) {
  if (emphasis == emphasis_) return;
  emphasis_ = emphasis;
  setZValue(emphasis ? 1.5 : 1);
  update();
}

QRectF EdgeItem::boundingRect() const { return bounds_; }

void EdgeItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const double scale = ScaleOf(painter);
  QColor colour = emphasis_ ? QColor("#d50000") : QColor(60, 60, 60);
  // Zoomed out, a cosmetic one-pixel pen is both cheaper and easier to read.
  double width = emphasis_ ? 2.0 : (scale < 0.5 ? 0.0 : 1.0);
  QPen pen(colour, width);
  if (edge_->dashed) pen.setStyle(Qt::DashLine);
  painter->setRenderHint(QPainter::Antialiasing, scale > 0.3);
  painter->setPen(pen);
  painter->setBrush(Qt::NoBrush);
  painter->drawPath(edge_->path);
  if (!arrow_.isEmpty() && scale > 0.2) {
    painter->setBrush(colour);
    painter->setPen(Qt::NoPen);
    painter->drawPolygon(arrow_);
  }
}

// ---------------------------------------------------------------------------------------------

ClusterItem::ClusterItem(const GraphCluster* cluster) : cluster_(cluster) {
  setPos(cluster->box.topLeft());
  setZValue(-10 + cluster->depth * 0.1);
}

void ClusterItem::SetBorder(BorderRole role) {
  if (role == border_) return;
  border_ = role;
  update();
}

void ClusterItem::SetMark(Mark mark) {
  if (mark == mark_) return;
  mark_ = mark;
  update();
}

QRectF ClusterItem::boundingRect() const {
  return QRectF(QPointF(0, 0), cluster_->box.size()).adjusted(-kHalo, -kHalo, kHalo, kHalo);
}

void ClusterItem::paint(QPainter* painter, const QStyleOptionGraphicsItem*, QWidget*) {
  const double scale = ScaleOf(painter);
  const QRectF rect(QPointF(0, 0), cluster_->box.size());
  painter->setRenderHint(QPainter::Antialiasing, scale > 0.3);
  double radius = cluster_->rounded ? 8.0 : 0.0;
  painter->setPen(QPen(cluster_->stroke, cluster_->rounded ? 2.0 : 1.0));
  painter->setBrush(cluster_->fill);
  painter->drawRoundedRect(rect, radius, radius);
  painter->setBrush(Qt::NoBrush);
  if (border_ != BorderRole::kNone) {
    painter->setPen(QPen(BorderColor(border_), std::max(3.5, 2.0 / std::max(scale, 1e-3))));
    painter->drawRoundedRect(rect.adjusted(-2.5, -2.5, 2.5, 2.5), radius, radius);
  }
  if (mark_ != Mark::kNone) {
    painter->setPen(QPen(MarkColor(mark_), std::max(3.0, 2.0 / std::max(scale, 1e-3))));
    painter->drawRoundedRect(rect.adjusted(-5.5, -5.5, 5.5, 5.5), radius, radius);
  }
  QFont font = GraphLabelFont();
  font.setBold(true);
  if (scale * font.pixelSize() >= kMinTextPixels && !cluster_->title.isEmpty()) {
    DrawLines(painter, rect, cluster_->title.split('\n'), font, Qt::black, 4, false);
  }
}

}  // namespace xlens::viewer
