#include "viewer/timeline_view.h"

#include <algorithm>
#include <cmath>

#include <QFontMetrics>
#include <QKeyEvent>
#include <QMouseEvent>
#include <QPainter>
#include <QPainterPath>
#include <QScrollBar>
#include <QToolTip>
#include <QWheelEvent>

#include "profiler/trace.h"
#include "viewer/timeline_ruler.h"

namespace xlens::viewer {

namespace {

constexpr int kGutterWidth = 220;  // track names
constexpr int kRulerHeight = 26;
constexpr int kProcessHeight = 22;
constexpr int kSpanHeight = 18;
constexpr int kTrackPadding = 3;
constexpr int kCounterHeight = 40;
// A press that moves less than this is a click.
constexpr int kClickSlop = 3;
// W/S and one wheel notch zoom by this; A/D pan by this fraction of the view.
constexpr double kZoomStep = 0.8;
constexpr double kPanStep = 0.15;
// Spans narrower than this many pixels get no label.
constexpr double kMinLabelWidth = 24;

QColor TextOn(const QColor& fill) { return fill.lightnessF() > 0.55 ? QColor(20, 20, 20) : QColor(250, 250, 250); }

QString FromView(std::string_view text) { return QString::fromUtf8(text.data(), static_cast<qsizetype>(text.size())); }

}  // namespace

TimelineView::TimelineView(QWidget* parent) : QAbstractScrollArea(parent) {
  setFocusPolicy(Qt::StrongFocus);
  setHorizontalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  setVerticalScrollBarPolicy(Qt::ScrollBarAsNeeded);
  viewport()->setMouseTracking(true);
  viewport()->setAttribute(Qt::WA_OpaquePaintEvent);
  setMinimumSize(300, 120);
}

TimelineView::~TimelineView() = default;

void TimelineView::SetModel(std::shared_ptr<const TraceModel> model) {
  model_ = std::move(model);
  colors_.clear();
  merged_colors_.clear();
  folded_.clear();
  selected_ = kNoSpan;
  highlighted_.clear();
  range_t0_ = range_t1_ = 0;
  range_stats_.clear();
  hits_.clear();
  hit_ = -1;
  BuildRows();
  verticalScrollBar()->setValue(0);
  ZoomToFit();
}

void TimelineView::BuildRows() {
  rows_.clear();
  int y = 0;
  if (model_ != nullptr) {
    const std::vector<TraceTrack>& tracks = model_->tracks();
    for (int t = 0; t < static_cast<int>(tracks.size()); ++t) {
      const TraceTrack& track = tracks[t];
      if (t == 0 || tracks[t - 1].pid != track.pid) {
        rows_.push_back({Row::Kind::kProcess, t, track.pid, y, kProcessHeight});
        y += kProcessHeight;
      }
      if (folded_.value(track.pid, false)) continue;
      if (track.kind == TraceTrack::Kind::kCounter) {
        rows_.push_back({Row::Kind::kCounter, t, track.pid, y, kCounterHeight});
        y += kCounterHeight;
      } else {
        int height = (track.max_depth + 1) * kSpanHeight + 2 * kTrackPadding;
        rows_.push_back({Row::Kind::kSlices, t, track.pid, y, height});
        y += height;
      }
    }
  }
  content_height_ = y;
  track_rows_.assign(model_ ? model_->tracks().size() : 0, -1);
  for (size_t r = 0; r < rows_.size(); ++r) {
    if (rows_[r].kind != Row::Kind::kProcess) track_rows_[rows_[r].track] = static_cast<int>(r);
  }
  UpdateScrollBar();
}

void TimelineView::UpdateScrollBar() {
  int visible = std::max(0, viewport()->height() - kRulerHeight);
  verticalScrollBar()->setPageStep(visible);
  verticalScrollBar()->setSingleStep(kSpanHeight);
  verticalScrollBar()->setRange(0, std::max(0, content_height_ - visible));
}

int TimelineView::TimeAreaLeft() const { return kGutterWidth; }

double TimelineView::TimeAreaWidth() const { return std::max(1, viewport()->width() - kGutterWidth); }

double TimelineView::XOf(double t_ns) const { return TimeAreaLeft() + (t_ns - t0_) / NsPerPixel(); }

double TimelineView::TimeAt(double x) const { return t0_ + (x - TimeAreaLeft()) * NsPerPixel(); }

void TimelineView::SetVisibleRange(double t0_ns, double t1_ns) {
  if (!std::isfinite(t0_ns) || !std::isfinite(t1_ns)) return;
  if (t1_ns - t0_ns < 1) {
    double middle = (t0_ns + t1_ns) / 2;
    t0_ns = middle - 0.5;
    t1_ns = middle + 0.5;
  }
  // Within int64 nanoseconds (a trace's times are within ±2^62, its ends within ±2^63), so the
  // range converts to the model's integers.
  constexpr double kLimit = 9.2e18;
  t0_ = std::clamp(t0_ns, -kLimit, kLimit - 1);
  t1_ = std::clamp(t1_ns, t0_ + 1, kLimit);
  viewport()->update();
  emit visibleRangeChanged(t0_, t1_);
}

void TimelineView::ZoomToFit() {
  if (model_ == nullptr || model_->end_ns() <= model_->start_ns()) {
    SetVisibleRange(model_ ? model_->start_ns() : 0, (model_ ? model_->start_ns() : 0) + 1000);
    return;
  }
  // In doubles: a trace may span more than int64 holds (from -2^62 to 2^63).
  double span = static_cast<double>(model_->end_ns()) - static_cast<double>(model_->start_ns());
  SetVisibleRange(model_->start_ns() - span * 0.01, model_->end_ns() + span * 0.01);
}

void TimelineView::ZoomAt(double factor, double anchor_x) {
  double anchor = TimeAt(anchor_x);
  SetVisibleRange(anchor - (anchor - t0_) * factor, anchor + (t1_ - anchor) * factor);
}

void TimelineView::Pan(double fraction) {
  double shift = (t1_ - t0_) * fraction;
  SetVisibleRange(t0_ + shift, t1_ + shift);
}

int TimelineView::RowOfTrack(int track) const {
  return track >= 0 && track < static_cast<int>(track_rows_.size()) ? track_rows_[track] : -1;
}

int TimelineView::RowTop(const Row& row) const { return kRulerHeight + row.y - verticalScrollBar()->value(); }

int TimelineView::RowAt(int y) const {
  if (y < kRulerHeight) return -1;
  int content_y = y - kRulerHeight + verticalScrollBar()->value();
  auto it = std::upper_bound(rows_.begin(), rows_.end(), content_y, [](int v, const Row& row) { return v < row.y; });
  if (it == rows_.begin()) return -1;
  --it;
  if (content_y >= it->y + it->height) return -1;
  return static_cast<int>(it - rows_.begin());
}

void TimelineView::RevealTrack(int track) {
  if (model_ == nullptr || track < 0) return;
  int32_t pid = model_->tracks()[track].pid;
  if (folded_.value(pid, false)) {
    folded_[pid] = false;
    BuildRows();
  }
  int r = RowOfTrack(track);
  if (r < 0) return;
  const Row& row = rows_[r];
  int visible = viewport()->height() - kRulerHeight;
  int value = verticalScrollBar()->value();
  if (row.y < value || row.y + row.height > value + visible) {
    verticalScrollBar()->setValue(std::max(0, row.y - visible / 3));
  }
}

const QColor& TimelineView::ColorOf(uint32_t name) const {
  if (name >= colors_.size()) colors_.resize(model_ ? model_->interned_count() : name + 1);
  if (name >= colors_.size()) colors_.resize(name + 1);
  QColor& color = colors_[name];
  if (!color.isValid()) {
    // A stable colour per name (FNV-1a of its text), as Perfetto colours slices by name.
    uint32_t hash = 2166136261u;
    for (char c : model_->Name(name)) hash = (hash ^ static_cast<uint8_t>(c)) * 16777619u;
    color = QColor::fromHsl(static_cast<int>(hash % 360), 110 + static_cast<int>((hash >> 9) % 60),
                            120 + static_cast<int>((hash >> 17) % 50));
  }
  return color;
}

const QColor& TimelineView::MergedColorOf(uint32_t name) const {
  if (name >= merged_colors_.size()) merged_colors_.resize(std::max<size_t>(name + 1, colors_.size()));
  QColor& color = merged_colors_[name];
  if (!color.isValid()) color = ColorOf(name).lighter(125);
  return color;
}

SpanId TimelineView::SpanAtPoint(QPoint p) const {
  if (model_ == nullptr || p.x() < TimeAreaLeft()) return kNoSpan;
  int r = RowAt(p.y());
  if (r < 0 || rows_[r].kind != Row::Kind::kSlices) return kNoSpan;
  const Row& row = rows_[r];
  int depth = (p.y() - RowTop(row) - kTrackPadding) / kSpanHeight;
  if (p.y() - RowTop(row) - kTrackPadding < 0) return kNoSpan;
  double t = TimeAt(p.x());
  int64_t slack = static_cast<int64_t>(std::ceil(std::min(2 * NsPerPixel(), 1e18)));
  return model_->SpanAt(row.track, depth, static_cast<int64_t>(std::llround(t)), slack);
}

QRectF TimelineView::SpanRect(SpanId id) const {
  if (model_ == nullptr) return {};
  SpanInfo span = model_->Span(id);
  if (span.id == kNoSpan) return {};
  int r = RowOfTrack(span.track);
  if (r < 0) return {};
  double x0 = XOf(static_cast<double>(span.start_ns));
  double x1 = XOf(static_cast<double>(span.start_ns + span.duration_ns));
  double top = RowTop(rows_[r]) + kTrackPadding + span.depth * kSpanHeight;
  return QRectF(x0, top, std::max(1.0, x1 - x0), kSpanHeight - 1);
}

void TimelineView::SelectSpan(SpanId id, bool reveal) {
  if (model_ == nullptr || id < 0 || id >= model_->span_count()) id = kNoSpan;
  selected_ = id;
  if (id != kNoSpan && reveal) {
    SpanInfo span = model_->Span(id);
    RevealTrack(span.track);
    double start = static_cast<double>(span.start_ns);
    double end = start + static_cast<double>(span.duration_ns);
    double width = t1_ - t0_;
    double pixels = static_cast<double>(span.duration_ns) / NsPerPixel();
    if (end - start > width || pixels < 3) {
      // Too wide, or too narrow to see: the span a third of the view.
      width = std::max(3.0 * (end - start), 100.0);
    }
    if (start < t0_ || end > t1_ || width != t1_ - t0_) {
      double middle = (start + end) / 2;
      SetVisibleRange(middle - width / 2, middle + width / 2);
    }
  }
  viewport()->update();
}

SpanStats TimelineView::HighlightSpans(const QString& module, const QString& hlo_op) {
  highlighted_.clear();
  if (model_ != nullptr && !hlo_op.isEmpty()) {
    highlighted_ = model_->SpansOfHloOp(module.toStdString(), hlo_op.toStdString());
  }
  viewport()->update();
  return model_ ? model_->Stats(highlighted_) : SpanStats{};
}

void TimelineView::SelectRange(int64_t t0_ns, int64_t t1_ns) {
  if (model_ == nullptr || t1_ns <= t0_ns) {
    range_t0_ = range_t1_ = 0;
    range_stats_.clear();
  } else {
    range_t0_ = t0_ns;
    range_t1_ = t1_ns;
    range_stats_ = model_->Aggregate(t0_ns, t1_ns);
  }
  viewport()->update();
}

int TimelineView::Search(const QString& text) {
  hits_.clear();
  hit_ = -1;
  if (model_ != nullptr && !text.isEmpty()) hits_ = model_->Search(text.toStdString());
  if (!hits_.empty()) {
    // The first hit that starts in or after the view.
    hit_ = 0;
    for (size_t i = 0; i < hits_.size(); ++i) {
      if (static_cast<double>(model_->Span(hits_[i]).start_ns) >= t0_) {
        hit_ = static_cast<int>(i);
        break;
      }
    }
    ShowHit();
  } else {
    emit searchMoved(-1, 0);
    viewport()->update();
  }
  return static_cast<int>(hits_.size());
}

void TimelineView::NextHit() {
  if (hits_.empty()) return;
  hit_ = (hit_ + 1) % static_cast<int>(hits_.size());
  ShowHit();
}

void TimelineView::PreviousHit() {
  if (hits_.empty()) return;
  hit_ = (hit_ - 1 + static_cast<int>(hits_.size())) % static_cast<int>(hits_.size());
  ShowHit();
}

void TimelineView::ShowHit() {
  SelectSpan(hits_[hit_], true);
  emit searchMoved(hit_, static_cast<int>(hits_.size()));
}

// --- Painting ---------------------------------------------------------------------------------

bool TimelineView::event(QEvent* event) {
  if (event->type() == QEvent::ShortcutOverride) {
    auto* key = static_cast<QKeyEvent*>(event);
    switch (key->key()) {
      case Qt::Key_W:
      case Qt::Key_A:
      case Qt::Key_S:
      case Qt::Key_D:
      case Qt::Key_F:
      case Qt::Key_Escape:
        if ((key->modifiers() & ~Qt::ShiftModifier) == Qt::NoModifier) {
          event->accept();
          return true;
        }
        break;
      default:
        break;
    }
  }
  return QAbstractScrollArea::event(event);
}

void TimelineView::paintEvent(QPaintEvent*) {
  QPainter painter(viewport());
  PaintTimeline(painter);
}

void TimelineView::PaintTimeline(QPainter& painter) {
  const QRect area = viewport()->rect();
  painter.fillRect(area, QColor(250, 250, 250));
  last_boxes_ = last_spans_ = 0;
  if (model_ == nullptr) {
    painter.setPen(QColor(120, 120, 120));
    painter.drawText(area, Qt::AlignCenter, tr("No trace"));
    return;
  }
  painter.save();
  painter.setClipRect(QRect(0, kRulerHeight, area.width(), area.height() - kRulerHeight));
  const QFontMetrics metrics(painter.font());
  // Rows in view, by binary search on their tops.
  int first_y = verticalScrollBar()->value();
  auto it = std::upper_bound(rows_.begin(), rows_.end(), first_y, [](int v, const Row& row) { return v < row.y; });
  if (it != rows_.begin()) --it;
  for (; it != rows_.end(); ++it) {
    const Row& row = *it;
    int top = RowTop(row);
    if (top > area.height()) break;
    if (top + row.height < kRulerHeight) continue;
    const TraceTrack& track = model_->tracks()[row.track];
    if (row.kind == Row::Kind::kProcess) {
      painter.fillRect(QRect(0, top, area.width(), row.height), QColor(232, 234, 237));
      bool folded = folded_.value(row.pid, false);
      painter.setPen(QColor(40, 40, 40));
      QString title = QStringLiteral("%1 %2  (pid %3)").arg(folded ? QStringLiteral("\u25B8") : QStringLiteral("\u25BE"),
                                                            QString::fromStdString(track.process_name))
                          .arg(track.pid);
      painter.drawText(QRect(6, top, area.width() - 12, row.height), Qt::AlignVCenter | Qt::AlignLeft, title);
      continue;
    }
    // Alternate a faint band so rows are told apart.
    if ((it - rows_.begin()) % 2 == 0) painter.fillRect(QRect(0, top, area.width(), row.height), QColor(244, 245, 247));
    painter.setPen(QColor(225, 225, 228));
    painter.drawLine(0, top + row.height - 1, area.width(), top + row.height - 1);
    if (row.kind == Row::Kind::kSlices) {
      PaintSlices(painter, row, top);
    } else {
      PaintCounter(painter, row, top);
    }
    // The name in the gutter, over whatever spans were drawn under it.
    painter.fillRect(QRect(0, top, kGutterWidth, row.height - 1), QColor(248, 248, 250));
    painter.setPen(QColor(30, 30, 30));
    QString name = QString::fromStdString(track.name);
    painter.drawText(QRect(14, top, kGutterWidth - 18, std::min(row.height, kSpanHeight + 2 * kTrackPadding)),
                     Qt::AlignVCenter | Qt::AlignLeft, metrics.elidedText(name, Qt::ElideMiddle, kGutterWidth - 18));
  }
  painter.setPen(QColor(200, 200, 205));
  painter.drawLine(kGutterWidth, kRulerHeight, kGutterWidth, area.height());
  painter.setClipRect(QRect(kGutterWidth, kRulerHeight, area.width() - kGutterWidth, area.height() - kRulerHeight));
  PaintHighlights(painter);
  PaintFlows(painter);
  PaintRange(painter);
  painter.restore();
  PaintRuler(painter);
  PaintAggregate(painter);
}

void TimelineView::PaintSlices(QPainter& painter, const Row& row, int top) {
  const double ns_per_px = NsPerPixel();
  const double left = TimeAreaLeft();
  const double right = viewport()->width();
  const QFontMetrics metrics(painter.font());
  boxes_.clear();
  model_->SpansIn(row.track, static_cast<int64_t>(std::floor(t0_)), static_cast<int64_t>(std::ceil(t1_)), ns_per_px,
                  boxes_);
  last_boxes_ += static_cast<int64_t>(boxes_.size());
  for (const SpanBox& box : boxes_) {
    last_spans_ += box.count;
    double x0 = std::max(left, XOf(static_cast<double>(box.start_ns)));
    double x1 = std::min(right, XOf(static_cast<double>(box.end_ns)));
    double width = std::max(1.0, x1 - x0);
    int y = top + kTrackPadding + box.depth * kSpanHeight;
    // Merged boxes are paler, and labelled with their count.
    const QColor& fill = box.count > 1 ? MergedColorOf(box.name) : ColorOf(box.name);
    QRectF rect(x0, y, width, kSpanHeight - 1);
    painter.fillRect(rect, fill);
    if (box.span == selected_ && box.count == 1) {
      painter.setPen(QPen(QColor(0, 0, 0), 2));
      painter.drawRect(rect.adjusted(1, 1, -1, -1));
    }
    if (width >= kMinLabelWidth) {
      QString label = box.count > 1 ? tr("%1 spans").arg(box.count) : FromView(model_->Name(box.name));
      painter.setPen(TextOn(fill));
      painter.drawText(rect.adjusted(3, 0, -3, 0), Qt::AlignVCenter | Qt::AlignLeft,
                       metrics.elidedText(label, Qt::ElideRight, static_cast<int>(width) - 6));
    }
  }
}

void TimelineView::PaintCounter(QPainter& painter, const Row& row, int top) {
  const TraceTrack& track = model_->tracks()[row.track];
  points_.clear();
  model_->CounterIn(row.track, static_cast<int64_t>(std::floor(t0_)), static_cast<int64_t>(std::ceil(t1_)),
                    NsPerPixel(), points_);
  if (points_.empty()) return;
  double low = std::min(0.0, track.min_value);
  double high = std::max(track.max_value, low + 1e-12);
  const double bottom = top + row.height - 4;
  const double height = row.height - 8;
  auto y_of = [&](double v) { return bottom - (v - low) / (high - low) * height; };
  const double left = TimeAreaLeft();
  const double right = viewport()->width();
  QPainterPath path;
  path.moveTo(std::max(left, XOf(static_cast<double>(points_.front().ts_ns))), bottom);
  double last_y = bottom;
  for (const CounterPoint& point : points_) {
    double x = std::clamp(XOf(static_cast<double>(point.ts_ns)), left, right);
    path.lineTo(x, last_y);
    path.lineTo(x, y_of(point.max));
    last_y = y_of(point.value);
    path.lineTo(x, last_y);
  }
  path.lineTo(right, last_y);
  path.lineTo(right, bottom);
  path.closeSubpath();
  QColor color(66, 133, 244);
  painter.setPen(QPen(color.darker(130), 1));
  color.setAlpha(110);
  painter.setBrush(color);
  painter.drawPath(path);
  painter.setBrush(Qt::NoBrush);
  painter.setPen(QColor(90, 90, 90));
  painter.drawText(QRectF(left + 4, top + 2, 200, 14), Qt::AlignLeft | Qt::AlignTop,
                   QString::number(track.max_value, 'g', 4));
}

void TimelineView::PaintHighlights(QPainter& painter) {
  if (highlighted_.empty()) return;
  painter.setPen(QPen(QColor(255, 160, 0), 2));
  painter.setBrush(QColor(255, 200, 0, 90));
  double last_x = -1e9;
  double last_y = -1e9;
  for (SpanId id : highlighted_) {
    SpanInfo span = model_->Span(id);
    if (static_cast<double>(span.start_ns + span.duration_ns) < t0_ || static_cast<double>(span.start_ns) > t1_) continue;
    QRectF rect = SpanRect(id);
    if (rect.isNull() || rect.right() < kGutterWidth || rect.left() > viewport()->width()) continue;
    if (rect.bottom() < kRulerHeight || rect.top() > viewport()->height()) continue;
    // However narrow, a highlighted span stays visible; one mark per pixel.
    if (rect.width() < 3) rect = QRectF(rect.center().x() - 1.5, rect.top(), 3, rect.height());
    if (std::fabs(rect.left() - last_x) < 1 && rect.top() == last_y) continue;
    last_x = rect.left();
    last_y = rect.top();
    painter.drawRect(rect);
  }
  painter.setBrush(Qt::NoBrush);
}

void TimelineView::PaintFlows(QPainter& painter) {
  if (selected_ == kNoSpan) return;
  // The selected span stays outlined even where the level of detail merged it.
  QRectF selected = SpanRect(selected_);
  if (!selected.isNull()) {
    if (selected.width() < 3) selected = QRectF(selected.center().x() - 1.5, selected.top(), 3, selected.height());
    painter.setPen(QPen(QColor(0, 0, 0), 2));
    painter.drawRect(selected);
  }
  painter.setRenderHint(QPainter::Antialiasing, true);
  for (const TraceFlow& flow : model_->FlowsOf(selected_)) {
    QRectF from = SpanRect(flow.from);
    QRectF to = SpanRect(flow.to);
    if (from.isNull() || to.isNull()) continue;
    // A launch's arrow leaves its end for its kernel's start; a collective's runs from one
    // member's arrival to the next one's, where the trace put the flow's ends (spans of a meeting
    // start apart and end together: between their edges the arrows would run backwards).
    const SpanInfo from_span = model_->Span(flow.from);
    const SpanInfo to_span = model_->Span(flow.to);
    const bool meeting = from_span.category == profiler::category::kCollective &&
                         to_span.category == profiler::category::kCollective;
    QPointF a(from.right(), from.center().y());
    QPointF b(to.left(), to.center().y());
    if (meeting) {
      a.setX(XOf(static_cast<double>(from_span.start_ns + flow.from_at_ns)));
      b.setX(XOf(static_cast<double>(to_span.start_ns + flow.to_at_ns)));
    }
    QPainterPath path(a);
    double bend = std::max(30.0, std::fabs(b.x() - a.x()) / 3);
    path.cubicTo(a + QPointF(bend, 0), b - QPointF(bend, 0), b);
    painter.setPen(QPen(QColor(60, 60, 60), 1.5));
    painter.drawPath(path);
    // An arrow head at the kernel's end.
    QPainterPath head;
    head.moveTo(b);
    head.lineTo(b + QPointF(-7, -4));
    head.lineTo(b + QPointF(-7, 4));
    head.closeSubpath();
    painter.fillPath(head, QColor(60, 60, 60));
  }
  painter.setRenderHint(QPainter::Antialiasing, false);
}

void TimelineView::PaintRange(QPainter& painter) {
  if (!hasRange()) return;
  double x0 = XOf(static_cast<double>(range_t0_));
  double x1 = XOf(static_cast<double>(range_t1_));
  QRectF band(x0, kRulerHeight, std::max(1.0, x1 - x0), viewport()->height() - kRulerHeight);
  painter.fillRect(band, QColor(66, 133, 244, 40));
  painter.setPen(QPen(QColor(66, 133, 244), 1));
  painter.drawLine(QPointF(x0, kRulerHeight), QPointF(x0, viewport()->height()));
  painter.drawLine(QPointF(x1, kRulerHeight), QPointF(x1, viewport()->height()));
}

void TimelineView::PaintRuler(QPainter& painter) {
  const int width = viewport()->width();
  painter.fillRect(QRect(0, 0, width, kRulerHeight), QColor(255, 255, 255));
  painter.setPen(QColor(190, 190, 195));
  painter.drawLine(0, kRulerHeight - 1, width, kRulerHeight - 1);
  painter.save();
  painter.setClipRect(QRect(kGutterWidth, 0, width - kGutterWidth, kRulerHeight));
  if (hasRange()) {
    double x0 = XOf(static_cast<double>(range_t0_));
    double x1 = XOf(static_cast<double>(range_t1_));
    painter.fillRect(QRectF(x0, 0, std::max(1.0, x1 - x0), kRulerHeight), QColor(66, 133, 244, 70));
  }
  for (const RulerTick& tick : RulerTicks(t0_, t1_, TimeAreaWidth(), static_cast<double>(model_->start_ns()))) {
    double x = XOf(tick.t_ns);
    painter.setPen(QColor(120, 120, 125));
    painter.drawLine(QPointF(x, tick.major ? 4 : kRulerHeight - 6), QPointF(x, kRulerHeight - 1));
    if (tick.major) {
      painter.setPen(QColor(50, 50, 50));
      painter.drawText(QPointF(x + 3, 15), tick.label);
    }
  }
  painter.restore();
  // The width of the view, where the names are.
  painter.setPen(QColor(50, 50, 50));
  painter.drawText(QRect(6, 0, kGutterWidth - 12, kRulerHeight), Qt::AlignVCenter | Qt::AlignLeft,
                   tr("view: %1").arg(FormatDuration(t1_ - t0_)));
}

void TimelineView::PaintAggregate(QPainter& painter) {
  if (!hasRange()) return;
  const QFontMetrics metrics(painter.font());
  const int line = metrics.height() + 2;
  const int shown = std::min<int>(8, static_cast<int>(range_stats_.size()));
  const int width = std::min(viewport()->width() - kGutterWidth - 8, 560);
  const int height = line * (shown + 2) + 8;
  QRect panel(viewport()->width() - width - 8, viewport()->height() - height - 8, width, height);
  painter.fillRect(panel, QColor(255, 255, 255, 235));
  painter.setPen(QColor(160, 160, 165));
  painter.drawRect(panel.adjusted(0, 0, -1, -1));
  int64_t count = 0;
  for (const NameStats& stats : range_stats_) count += stats.count;
  painter.setPen(QColor(20, 20, 20));
  int y = panel.top() + 4;
  painter.drawText(QRect(panel.left() + 6, y, width - 12, line), Qt::AlignVCenter | Qt::AlignLeft,
                   tr("Range %1: %2 spans, %3 names").arg(FormatDuration(static_cast<double>(range_t1_) - static_cast<double>(range_t0_)))
                       .arg(count)
                       .arg(range_stats_.size()));
  y += line;
  const int name_width = width - 12 - 3 * 80;
  auto columns = [&](const QString& name, const QString& c, const QString& total, const QString& mean) {
    painter.drawText(QRect(panel.left() + 6, y, name_width, line), Qt::AlignVCenter | Qt::AlignLeft,
                     metrics.elidedText(name, Qt::ElideMiddle, name_width - 4));
    int x = panel.left() + 6 + name_width;
    for (const QString& text : {c, total, mean}) {
      painter.drawText(QRect(x, y, 76, line), Qt::AlignVCenter | Qt::AlignRight, text);
      x += 80;
    }
    y += line;
  };
  painter.setPen(QColor(100, 100, 100));
  columns(tr("name"), tr("count"), tr("total"), tr("mean"));
  painter.setPen(QColor(20, 20, 20));
  for (int i = 0; i < shown; ++i) {
    const NameStats& stats = range_stats_[i];
    columns(QString::fromStdString(stats.name), QString::number(stats.count),
            FormatDuration(static_cast<double>(stats.total_ns)), FormatDuration(stats.mean_ns));
  }
}

// --- Interaction ------------------------------------------------------------------------------

void TimelineView::resizeEvent(QResizeEvent* event) {
  QAbstractScrollArea::resizeEvent(event);
  UpdateScrollBar();
}

void TimelineView::scrollContentsBy(int, int) { viewport()->update(); }

bool TimelineView::viewportEvent(QEvent* event) {
  if (event->type() != QEvent::ToolTip || model_ == nullptr) return QAbstractScrollArea::viewportEvent(event);
  auto* help = static_cast<QHelpEvent*>(event);
  SpanId id = SpanAtPoint(help->pos());
  if (id == kNoSpan) {
    QToolTip::hideText();
    event->ignore();
    return true;
  }
  SpanInfo span = model_->Span(id);
  QString text = QStringLiteral("<b>%1</b><br>%2, %3").arg(FromView(span.name).toHtmlEscaped(),
                                                          FormatDuration(static_cast<double>(span.duration_ns)),
                                                          FromView(span.category).toHtmlEscaped());
  if (span.has_kernel_args) {
    text += QStringLiteral("<br>hlo_op %1 (%2)").arg(FromView(span.kernel.hlo_op).toHtmlEscaped(),
                                                      FromView(span.kernel.module).toHtmlEscaped());
    if (!span.kernel.fusion_kind.empty()) text += QStringLiteral(", %1").arg(FromView(span.kernel.fusion_kind));
    if (!span.kernel.op_names.empty()) {
      text += QStringLiteral("<br>%1").arg(FromView(span.kernel.op_names).toHtmlEscaped());
    }
    if (span.kernel.bytes_accessed >= 0) text += QStringLiteral("<br>%1 bytes").arg(span.kernel.bytes_accessed);
    if (span.kernel.flops >= 0) text += QStringLiteral(", %1 flops").arg(span.kernel.flops);
  }
  QToolTip::showText(help->globalPos(), text, viewport());
  return true;
}

void TimelineView::keyPressEvent(QKeyEvent* event) {
  // The mouse's place when it is over the time area, else the middle.
  double anchor = hover_.x() >= TimeAreaLeft() && viewport()->rect().contains(hover_)
                      ? hover_.x()
                      : TimeAreaLeft() + TimeAreaWidth() / 2;
  switch (event->key()) {
    case Qt::Key_W: ZoomAt(kZoomStep, anchor); break;
    case Qt::Key_S: ZoomAt(1 / kZoomStep, anchor); break;
    case Qt::Key_A: Pan(-kPanStep); break;
    case Qt::Key_D: Pan(kPanStep); break;
    case Qt::Key_F:
      if (selected_ != kNoSpan) {
        SpanInfo span = model_->Span(selected_);
        double margin = std::max(static_cast<double>(span.duration_ns) * 0.1, 50.0);
        SetVisibleRange(span.start_ns - margin, span.start_ns + span.duration_ns + margin);
      } else if (hasRange()) {
        SetVisibleRange(range_t0_, range_t1_);
      } else {
        ZoomToFit();
      }
      break;
    case Qt::Key_Escape:
      SelectRange(0, 0);
      SelectSpan(kNoSpan, false);
      emit spanSelected(kNoSpan);
      break;
    default: QAbstractScrollArea::keyPressEvent(event); return;
  }
  event->accept();
}

void TimelineView::wheelEvent(QWheelEvent* event) {
  QPointF pos = event->position();
  QPoint delta = event->angleDelta();
  if (pos.x() < TimeAreaLeft() && !(event->modifiers() & Qt::ShiftModifier)) {
    // Over the names the wheel scrolls the tracks.
    QAbstractScrollArea::wheelEvent(event);
    return;
  }
  if (event->modifiers() & Qt::ShiftModifier) {
    int steps = delta.y() != 0 ? delta.y() : delta.x();
    Pan(-steps / 120.0 * kPanStep / 2);
  } else if (delta.x() != 0 && std::abs(delta.x()) > std::abs(delta.y())) {
    Pan(-delta.x() / 120.0 * kPanStep / 2);
  } else if (delta.y() != 0) {
    ZoomAt(std::pow(kZoomStep, delta.y() / 120.0), pos.x());
  }
  event->accept();
}

void TimelineView::mousePressEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton) return QAbstractScrollArea::mousePressEvent(event);
  press_pos_ = last_pos_ = event->position().toPoint();
  press_t_ = std::clamp(TimeAt(press_pos_.x()), -9.2e18, 9.2e18);
  moved_ = false;
  bool on_ruler = press_pos_.y() < kRulerHeight;
  drag_ = (on_ruler || (event->modifiers() & Qt::ShiftModifier)) && press_pos_.x() >= TimeAreaLeft() ? Drag::kRange
                                                                                                      : Drag::kPan;
  event->accept();
}

void TimelineView::mouseMoveEvent(QMouseEvent* event) {
  QPoint pos = event->position().toPoint();
  hover_ = pos;
  if (drag_ == Drag::kNone) return;
  if ((pos - press_pos_).manhattanLength() > kClickSlop) moved_ = true;
  if (!moved_) return;
  if (drag_ == Drag::kPan) {
    QPoint step = pos - last_pos_;
    double shift = -step.x() * NsPerPixel();
    SetVisibleRange(t0_ + shift, t1_ + shift);
    verticalScrollBar()->setValue(verticalScrollBar()->value() - step.y());
  } else {
    // A drag may leave the widget: the range stays within int64 nanoseconds.
    double t = std::clamp(TimeAt(pos.x()), -9.2e18, 9.2e18);
    range_t0_ = static_cast<int64_t>(std::llround(std::min(press_t_, t)));
    range_t1_ = static_cast<int64_t>(std::llround(std::max(press_t_, t)));
    range_stats_.clear();  // computed on release
    viewport()->update();
  }
  last_pos_ = pos;
  event->accept();
}

void TimelineView::mouseReleaseEvent(QMouseEvent* event) {
  if (event->button() != Qt::LeftButton || drag_ == Drag::kNone) return QAbstractScrollArea::mouseReleaseEvent(event);
  Drag drag = drag_;
  drag_ = Drag::kNone;
  QPoint pos = event->position().toPoint();
  if (moved_ && drag == Drag::kRange) {
    SelectRange(range_t0_, range_t1_);
    if (hasRange()) emit rangeSelected(range_t0_, range_t1_);
  } else if (!moved_) {
    int r = RowAt(pos.y());
    if (r >= 0 && rows_[r].kind == Row::Kind::kProcess) {
      folded_[rows_[r].pid] = !folded_.value(rows_[r].pid, false);
      BuildRows();
      viewport()->update();
    } else if (pos.y() >= kRulerHeight) {
      SpanId hit = SpanAtPoint(pos);
      SelectSpan(hit, false);
      emit spanSelected(hit);
    } else {
      SelectRange(0, 0);
    }
  }
  event->accept();
}

}  // namespace xlens::viewer
