#include "viewer/graph_minimap.h"

#include <QGraphicsScene>
#include <QGraphicsView>
#include <QMouseEvent>
#include <QPainter>

namespace xlens::viewer {

namespace {
constexpr int kMaxSide = 180;  // the thumbnail's longer side, in pixels
}

GraphMinimap::GraphMinimap(QGraphicsView* view) : QWidget(view), view_(view) {
  setCursor(Qt::PointingHandCursor);
  setToolTip(tr("Overview: click or drag to move the view"));
  hide();
}

void GraphMinimap::Refresh() {
  QGraphicsScene* scene = view_->scene();
  if (scene == nullptr || scene->items().isEmpty()) {
    thumbnail_ = QImage();
    hide();
    return;
  }
  scene_rect_ = scene->sceneRect();
  QSizeF size = scene_rect_.size();
  size.scale(kMaxSide, kMaxSide, Qt::KeepAspectRatio);
  QSize pixels(std::max(8, qRound(size.width())), std::max(8, qRound(size.height())));
  thumbnail_ = QImage(pixels, QImage::Format_ARGB32_Premultiplied);
  thumbnail_.fill(Qt::white);
  {
    QPainter painter(&thumbnail_);
    scene->render(&painter, QRectF(QPointF(0, 0), QSizeF(pixels)), scene_rect_, Qt::KeepAspectRatio);
  }
  resize(pixels + QSize(4, 4));
  show();
  raise();
  update();
}

QRectF GraphMinimap::ImageRect() const { return QRectF(QPointF(2, 2), QSizeF(thumbnail_.size())); }

QRectF GraphMinimap::VisibleSceneRect() const {
  return view_->mapToScene(view_->viewport()->rect()).boundingRect();
}

QPointF GraphMinimap::ToScene(const QPointF& point) const {
  QRectF image = ImageRect();
  if (image.isEmpty() || scene_rect_.isEmpty()) return scene_rect_.center();
  double sx = scene_rect_.width() / image.width(), sy = scene_rect_.height() / image.height();
  return {scene_rect_.left() + (point.x() - image.left()) * sx, scene_rect_.top() + (point.y() - image.top()) * sy};
}

void GraphMinimap::CentreViewOn(const QPointF& point) { view_->centerOn(ToScene(point)); }

void GraphMinimap::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  painter.fillRect(rect(), QColor(255, 255, 255, 230));
  painter.setPen(QColor("#9e9e9e"));
  painter.drawRect(rect().adjusted(0, 0, -1, -1));
  if (thumbnail_.isNull()) return;
  QRectF image = ImageRect();
  painter.drawImage(image.topLeft(), thumbnail_);
  QRectF visible = VisibleSceneRect();
  double sx = image.width() / scene_rect_.width(), sy = image.height() / scene_rect_.height();
  QRectF frame(image.left() + (visible.left() - scene_rect_.left()) * sx,
               image.top() + (visible.top() - scene_rect_.top()) * sy, visible.width() * sx, visible.height() * sy);
  frame = frame.intersected(image.adjusted(-1, -1, 1, 1));
  painter.setPen(QPen(QColor("#d50000"), 1.5));
  painter.setBrush(QColor(213, 0, 0, 30));
  painter.drawRect(frame);
}

void GraphMinimap::mousePressEvent(QMouseEvent* event) {
  CentreViewOn(event->position());
  event->accept();
}

void GraphMinimap::mouseMoveEvent(QMouseEvent* event) {
  if (event->buttons() & Qt::LeftButton) CentreViewOn(event->position());
  event->accept();
}

void GraphMinimap::mouseReleaseEvent(QMouseEvent* event) { event->accept(); }

}  // namespace xlens::viewer
