// The trace as Perfetto shows it: a time ruler on top, one row per track (grouped under their
// process, names on the left), nested spans coloured by name, counters as step charts, and the
// flows of the selected span as arrows.
//
// Keys and mouse, as Perfetto's: W/S zoom in/out at the mouse, A/D pan, the wheel zooms at the
// mouse (with Shift it pans; over the track names it scrolls), dragging pans, Shift-drag or a drag
// on the ruler selects a time range and shows what is in it (per name: count, total, mean), a
// click selects a span (spanSelected), a click on a process's name folds it, F fits the selection
// (or the whole trace), Escape clears the selection and the range.
//
// Level of detail: the model merges spans narrower than a pixel (TraceModel::SpansIn), so a frame
// draws a few boxes per pixel column whatever the trace holds.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include <QAbstractScrollArea>
#include <QColor>
#include <QHash>
#include <QPoint>
#include <QRectF>
#include <QString>

#include "viewer/trace_model.h"

class QPainter;

namespace xlens::viewer {

class TimelineView : public QAbstractScrollArea {
  Q_OBJECT

 public:
  explicit TimelineView(QWidget* parent = nullptr);
  ~TimelineView() override;

  // Shows `model` (nullptr: nothing), the whole trace in view; clears selection, range, search.
  void SetModel(std::shared_ptr<const TraceModel> model);
  const TraceModel* model() const { return model_.get(); }

  // The time in view, in the model's nanoseconds; SetVisibleRange keeps at least 1 ns.
  void SetVisibleRange(double t0_ns, double t1_ns);
  double visibleStart() const { return t0_; }
  double visibleEnd() const { return t1_; }
  // The whole trace in view.
  void ZoomToFit();
  // Zooms by `factor` (< 1 zooms in) keeping the time under viewport x `anchor_x` in place.
  void ZoomAt(double factor, double anchor_x);
  // Pans by `fraction` of the visible width (positive: later).
  void Pan(double fraction);

  // Selects span `id` (kNoSpan clears) and, with `reveal`, scrolls and zooms until it is in view.
  // Does not emit spanSelected (that signal is for the user's clicks).
  void SelectSpan(SpanId id, bool reveal);
  SpanId selectedSpan() const { return selected_; }

  // Lights up every span of HLO instruction `hlo_op` of `module` (empty: any module) and returns
  // their count, total and mean duration; an empty `hlo_op` clears.
  SpanStats HighlightSpans(const QString& module, const QString& hlo_op);
  const std::vector<SpanId>& highlightedSpans() const { return highlighted_; }

  // Selects [t0, t1) and aggregates the spans in it (TraceModel::Aggregate); t1 <= t0 clears.
  void SelectRange(int64_t t0_ns, int64_t t1_ns);
  bool hasRange() const { return range_t1_ > range_t0_; }
  const std::vector<NameStats>& rangeAggregate() const { return range_stats_; }

  // Finds spans whose name contains `text`; selects and reveals the first that starts in or after
  // the view. Returns the number of hits (0 clears the search).
  int Search(const QString& text);
  // Selects and reveals the next (previous) hit, wrapping around.
  void NextHit();
  void PreviousHit();
  int hitIndex() const { return hit_; }
  int hitCount() const { return static_cast<int>(hits_.size()); }

  // Draws the timeline into `painter` as the viewport shows it (the bench paints into an image).
  void PaintTimeline(QPainter& painter);
  // Span boxes the last paint drew, and spans they stood for.
  int64_t lastPaintBoxes() const { return last_boxes_; }
  int64_t lastPaintSpans() const { return last_spans_; }

  // The viewport x of time `t` and the time at viewport x.
  double XOf(double t_ns) const;
  double TimeAt(double x) const;
  // The span under viewport point `p` (kNoSpan if none).
  SpanId SpanAtPoint(QPoint p) const;
  // The viewport rectangle of span `id`'s row and time (clipped to nothing when not shown).
  QRectF SpanRect(SpanId id) const;

 signals:
  void spanSelected(qint64 span_id);
  void rangeSelected(qint64 t0_ns, qint64 t1_ns);
  void visibleRangeChanged(double t0_ns, double t1_ns);
  void searchMoved(int index, int count);

 protected:
  // Keeps its keys (W/A/S/D/F, Escape) when it has focus, before the window's one-key shortcuts
  // (d is the window's diff toggle) can take them.
  bool event(QEvent* event) override;
  void paintEvent(QPaintEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void keyPressEvent(QKeyEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseMoveEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void scrollContentsBy(int dx, int dy) override;
  // Tooltips: the span under the mouse, its duration and kernel args.
  bool viewportEvent(QEvent* event) override;

 private:
  struct Row {
    enum class Kind { kProcess, kSlices, kCounter } kind;
    int track = -1;  // the first track of a process row
    int32_t pid = 0;
    int y = 0;  // in content coordinates (0 = below the ruler, before scrolling)
    int height = 0;
  };
  enum class Drag { kNone, kPan, kRange };

  void BuildRows();
  void UpdateScrollBar();
  int TimeAreaLeft() const;
  double TimeAreaWidth() const;
  double NsPerPixel() const { return (t1_ - t0_) / TimeAreaWidth(); }
  // The row at viewport y, or -1.
  int RowAt(int y) const;
  int RowOfTrack(int track) const;
  int RowTop(const Row& row) const;  // in viewport coordinates
  // A name's colour (stable, from its text), and the paler one of merged boxes.
  const QColor& ColorOf(uint32_t name) const;
  const QColor& MergedColorOf(uint32_t name) const;
  void RevealTrack(int track);
  void PaintSlices(QPainter& painter, const Row& row, int top);
  void PaintCounter(QPainter& painter, const Row& row, int top);
  void PaintHighlights(QPainter& painter);
  void PaintFlows(QPainter& painter);
  void PaintRange(QPainter& painter);
  void PaintRuler(QPainter& painter);
  void PaintAggregate(QPainter& painter);
  void ShowHit();

  std::shared_ptr<const TraceModel> model_;
  std::vector<Row> rows_;
  std::vector<int> track_rows_;  // the row of each track, -1 when folded away
  QHash<int32_t, bool> folded_;
  int content_height_ = 0;
  double t0_ = 0;
  double t1_ = 1;
  SpanId selected_ = kNoSpan;
  std::vector<SpanId> highlighted_;
  int64_t range_t0_ = 0;
  int64_t range_t1_ = 0;
  std::vector<NameStats> range_stats_;
  std::vector<SpanId> hits_;
  int hit_ = -1;
  Drag drag_ = Drag::kNone;
  QPoint press_pos_;
  QPoint last_pos_;
  double press_t_ = 0;
  bool moved_ = false;
  QPoint hover_;
  mutable std::vector<QColor> colors_;  // by interned name
  mutable std::vector<QColor> merged_colors_;
  std::vector<SpanBox> boxes_;          // reused from frame to frame
  std::vector<CounterPoint> points_;
  int64_t last_boxes_ = 0;
  int64_t last_spans_ = 0;
};

}  // namespace xlens::viewer
