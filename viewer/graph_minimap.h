// The small overview in a corner of a GraphView: the whole graph drawn once at thumbnail size,
// with the part the view shows outlined. Clicking or dragging in it moves the view there.
#pragma once

#include <QImage>
#include <QWidget>

class QGraphicsView;

namespace xlens::viewer {

class GraphMinimap : public QWidget {
  Q_OBJECT
 public:
  explicit GraphMinimap(QGraphicsView* view);

  // Draws the scene again (after a new layout, or borders and marks changed).
  void Refresh();
  // The scene rectangle the view shows, as outlined in the minimap.
  QRectF VisibleSceneRect() const;
  // The scene point under a minimap point.
  QPointF ToScene(const QPointF& point) const;
  // Moves the view so `point` (in minimap coordinates) is in the centre.
  void CentreViewOn(const QPointF& point);

 protected:
  void paintEvent(QPaintEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;

 private:
  QRectF ImageRect() const;  // where the thumbnail sits inside the widget
  QGraphicsView* view_;
  QImage thumbnail_;
  QRectF scene_rect_;
};

}  // namespace xlens::viewer
