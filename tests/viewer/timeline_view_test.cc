// TimelineView driven as a user drives it (keys, wheel, drags, clicks) on the real trace of the
// test dump, checked against the profiler's reader and against what it draws.
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include <QImage>
#include <QSignalSpy>
#include <QtTest/QtTest>

#include "compiler/support/file_io.h"
#include "profiler/chrome_trace_reader.h"
#include "profiler/chrome_trace_writer.h"
#include "profiler/trace.h"
#include "viewer/timeline_ruler.h"
#include "viewer/timeline_view.h"
#include "viewer/trace_model.h"

namespace xlens::viewer {
namespace {

namespace fs = std::filesystem;

std::string DumpTrace() {
  QByteArray dump = qgetenv("XLENS_VIEWER_TEST_DUMP");
  return dump.isEmpty() ? std::string() : dump.toStdString() + "/timeline.ctf.json";
}

std::shared_ptr<const TraceModel> MustLoad(const std::string& path) {
  auto model = TraceModel::Load(path);
  if (!model.ok()) qFatal("%s", model.status().message().c_str());
  return std::shared_ptr<const TraceModel>(std::move(*model));
}

void SendMouse(QWidget* target, QEvent::Type type, QPoint pos, Qt::MouseButton button, Qt::MouseButtons buttons,
               Qt::KeyboardModifiers modifiers = Qt::NoModifier) {
  QMouseEvent event(type, QPointF(pos), target->mapToGlobal(QPointF(pos)), button, buttons, modifiers);
  QApplication::sendEvent(target, &event);
}

void Drag(QWidget* target, QPoint from, QPoint to, Qt::KeyboardModifiers modifiers = Qt::NoModifier) {
  SendMouse(target, QEvent::MouseButtonPress, from, Qt::LeftButton, Qt::LeftButton, modifiers);
  for (int i = 1; i <= 4; ++i) {
    SendMouse(target, QEvent::MouseMove, from + (to - from) * i / 4, Qt::NoButton, Qt::LeftButton, modifiers);
  }
  SendMouse(target, QEvent::MouseButtonRelease, to, Qt::LeftButton, Qt::NoButton, modifiers);
}

void Click(QWidget* target, QPoint at) {
  SendMouse(target, QEvent::MouseButtonPress, at, Qt::LeftButton, Qt::LeftButton);
  SendMouse(target, QEvent::MouseButtonRelease, at, Qt::LeftButton, Qt::NoButton);
}

void Wheel(QWidget* target, QPoint at, int delta, Qt::KeyboardModifiers modifiers = Qt::NoModifier) {
  QWheelEvent event(QPointF(at), target->mapToGlobal(QPointF(at)), QPoint(), QPoint(0, delta), Qt::NoButton, modifiers,
                    Qt::NoScrollPhase, false);
  QApplication::sendEvent(target, &event);
}

// Pixels of `image` inside `rect` that are not `background`.
int PaintedPixels(const QImage& image, const QRect& rect, QRgb background) {
  int painted = 0;
  QRect r = rect.intersected(image.rect());
  for (int y = r.top(); y <= r.bottom(); ++y) {
    for (int x = r.left(); x <= r.right(); ++x) painted += image.pixel(x, y) != background;
  }
  return painted;
}

// The kernel spans of the file, with their (module, hlo_op).
struct FileKernels {
  std::map<std::pair<std::string, std::string>, std::pair<int64_t, int64_t>> by_op;  // count, total ns
  int64_t count = 0;
};

}  // namespace

class TimelineViewTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY2(!DumpTrace().empty(), "XLENS_VIEWER_TEST_DUMP is not set");
    auto file = profiler::ReadChromeTrace(DumpTrace());
    QVERIFY2(file.ok(), file.status().message().c_str());
    file_ = std::move(*file);
    for (const auto& e : file_.events) {
      if (!profiler::IsKernelCategory(e.category)) continue;
      auto module = std::get<std::string>(profiler::FindArg(e, "module")->value);
      auto op = std::get<std::string>(profiler::FindArg(e, "hlo_op")->value);
      auto& entry = kernels_.by_op[{module, op}];
      ++entry.first;
      entry.second += e.duration_ns;
      ++kernels_.count;
    }
    QVERIFY(kernels_.count > 0);
    model_ = MustLoad(DumpTrace());
  }

  void init() {
    view_ = std::make_unique<TimelineView>();
    view_->resize(1200, 500);
    view_->SetModel(model_);
    view_->show();
    QVERIFY(QTest::qWaitForWindowExposed(view_.get()));
  }

  void cleanup() { view_.reset(); }

  // The whole trace is in view, drawn: spans in their colours where the model puts them.
  void DrawsTheTrace() {
    QCOMPARE(view_->visibleStart() <= model_->start_ns(), true);
    QCOMPARE(view_->visibleEnd() >= model_->end_ns(), true);
    QImage image = view_->viewport()->grab().toImage();
    QVERIFY(!image.isNull());
    QRgb background = image.pixel(image.width() - 2, image.height() - 2);
    QRect time_area(240, 52, image.width() - 250, 40);  // below the process's title row
    QVERIFY2(PaintedPixels(image, time_area, background) > 500, "spans are drawn");
    // Every span was accounted for in the paint.
    QCOMPARE(view_->lastPaintSpans(), model_->span_count());
    // The ruler has labels: dark text pixels above the tracks.
    QVERIFY(PaintedPixels(image, QRect(230, 2, image.width() - 240, 20), qRgb(255, 255, 255)) > 50);
    // And the whole widget (scroll bar included) is not blank.
    QImage widget = view_->grab().toImage();
    QSet<QRgb> colours;
    for (int y = 0; y < widget.height(); y += 3) {
      for (int x = 0; x < widget.width(); x += 3) colours.insert(widget.pixel(x, y));
    }
    QVERIFY(colours.size() > 10);
    // The widest execute span, in a view of it and its neighbourhood, is drawn where the view
    // says it is and found there. (In the whole trace a run can be a pixel wide, beside the
    // compile: 0.2 ms of 430 where the compile ran beside other work, with the other runs
    // within the same pixel.)
    std::vector<SpanId> executes = model_->Search("execute");
    QVERIFY(!executes.empty());
    SpanId widest = executes[0];
    for (SpanId id : executes) {
      if (model_->Span(id).duration_ns > model_->Span(widest).duration_ns) widest = id;
    }
    const SpanInfo execute = model_->Span(widest);
    view_->SetVisibleRange(execute.start_ns - execute.duration_ns / 2,
                           execute.start_ns + execute.duration_ns * 3 / 2);
    QImage zoomed = view_->viewport()->grab().toImage();
    QRectF rect = view_->SpanRect(widest);
    QVERIFY(rect.width() >= 100);
    // Its box is painted (its label, drawn over part of it, can be in the background's colour).
    const QRect box = rect.toAlignedRect().intersected(zoomed.rect());
    QVERIFY2(PaintedPixels(zoomed, box, background) * 2 > box.width() * box.height(),
             "the execute span's box is painted");
    QCOMPARE(view_->SpanAtPoint(rect.center().toPoint()), widest);
  }

  // W/S zoom at the mouse, A/D pan, the wheel zooms, a drag pans.
  void KeysWheelAndDragMoveTheView() {
    double t0 = view_->visibleStart();
    double t1 = view_->visibleEnd();
    QPoint mouse(700, 200);
    SendMouse(view_->viewport(), QEvent::MouseMove, mouse, Qt::NoButton, Qt::NoButton);
    double anchor = view_->TimeAt(mouse.x());
    QTest::keyClick(view_.get(), Qt::Key_W);
    QVERIFY(view_->visibleEnd() - view_->visibleStart() < (t1 - t0) * 0.85);
    QVERIFY(std::fabs(view_->TimeAt(mouse.x()) - anchor) < (t1 - t0) * 1e-6);
    double zoomed = view_->visibleEnd() - view_->visibleStart();
    QTest::keyClick(view_.get(), Qt::Key_S);
    QVERIFY(std::fabs((view_->visibleEnd() - view_->visibleStart()) - (t1 - t0)) < (t1 - t0) * 1e-6);
    QTest::keyClick(view_.get(), Qt::Key_W);
    double before = view_->visibleStart();
    QTest::keyClick(view_.get(), Qt::Key_D);
    QVERIFY(view_->visibleStart() > before);
    QVERIFY(std::fabs((view_->visibleEnd() - view_->visibleStart()) - zoomed) < zoomed * 1e-6);
    QTest::keyClick(view_.get(), Qt::Key_A);
    QTest::keyClick(view_.get(), Qt::Key_A);
    QVERIFY(view_->visibleStart() < before);

    double width = view_->visibleEnd() - view_->visibleStart();
    Wheel(view_->viewport(), mouse, 120);
    QVERIFY(view_->visibleEnd() - view_->visibleStart() < width);
    Wheel(view_->viewport(), mouse, -240);
    QVERIFY(view_->visibleEnd() - view_->visibleStart() > width);

    // Dragging right by 100 px shows what was 100 px to the left.
    double left = view_->visibleStart();
    double ns_per_px = (view_->visibleEnd() - view_->visibleStart()) / (view_->viewport()->width() - 220);
    Drag(view_->viewport(), QPoint(500, 200), QPoint(600, 200));
    QVERIFY(std::fabs(view_->visibleStart() - (left - 100 * ns_per_px)) < ns_per_px);
    QVERIFY(!view_->hasRange());
  }

  // A Shift-drag (or a drag on the ruler) selects a range whose aggregate is the spans in it.
  void RangeSelectionAggregates() {
    QSignalSpy ranges(view_.get(), &TimelineView::rangeSelected);
    for (bool on_ruler : {false, true}) {
      int y = on_ruler ? 10 : 200;
      Drag(view_->viewport(), QPoint(400, y), QPoint(900, y), on_ruler ? Qt::NoModifier : Qt::ShiftModifier);
      QVERIFY(view_->hasRange());
      QCOMPARE(ranges.count(), on_ruler ? 2 : 1);
      int64_t t0 = ranges.last().at(0).toLongLong();
      int64_t t1 = ranges.last().at(1).toLongLong();
      QVERIFY(std::fabs(t0 - view_->TimeAt(400)) <= 1);
      QVERIFY(std::fabs(t1 - view_->TimeAt(900)) <= 1);
      // Independently: the file's events overlapping [t0, t1).
      std::map<std::string, std::pair<int64_t, int64_t>> expected;
      for (const auto& e : file_.events) {
        int64_t start = e.start_ns - file_.base_ns;
        if (start < t1 && (start + e.duration_ns > t0 || (e.duration_ns == 0 && start >= t0))) {
          ++expected[e.name].first;
          expected[e.name].second += e.duration_ns;
        }
      }
      const std::vector<NameStats>& stats = view_->rangeAggregate();
      QVERIFY(!stats.empty());
      QCOMPARE(stats.size(), expected.size());
      for (const NameStats& s : stats) {
        QCOMPARE(s.count, expected[s.name].first);
        QCOMPARE(s.total_ns, expected[s.name].second);
      }
    }
    QTest::keyClick(view_.get(), Qt::Key_Escape);
    QVERIFY(!view_->hasRange());
  }

  // A click on a span selects it and says so; a click on nothing clears.
  void ClickSelectsASpan() {
    QSignalSpy selected(view_.get(), &TimelineView::spanSelected);
    // Zoom to a kernel so it is wide enough to click.
    std::vector<SpanId> kernels;
    for (SpanId id = 0; id < model_->span_count(); ++id) {
      if (model_->Span(id).has_kernel_args) kernels.push_back(id);
    }
    QVERIFY(!kernels.empty());
    SpanId kernel = kernels[kernels.size() / 2];
    SpanInfo info = model_->Span(kernel);
    view_->SetVisibleRange(info.start_ns - info.duration_ns, info.start_ns + 2 * info.duration_ns);
    QRectF rect = view_->SpanRect(kernel);
    QVERIFY(rect.width() > 100);
    Click(view_->viewport(), rect.center().toPoint());
    QCOMPARE(selected.count(), 1);
    QCOMPARE(selected.last().at(0).toLongLong(), kernel);
    QCOMPARE(view_->selectedSpan(), kernel);
    // Empty space below the tracks.
    Click(view_->viewport(), QPoint(700, 480));
    QCOMPARE(selected.count(), 2);
    QCOMPARE(selected.last().at(0).toLongLong(), kNoSpan);
    QCOMPARE(view_->selectedSpan(), kNoSpan);
  }

  // HighlightSpans finds every span of an HLO instruction, and they are drawn lit up.
  void HighlightSpansOfAnHloInstruction() {
    for (const auto& [key, expected] : kernels_.by_op) {
      SpanStats stats = view_->HighlightSpans(QString::fromStdString(key.first), QString::fromStdString(key.second));
      QCOMPARE(stats.count, expected.first);
      QCOMPARE(stats.total_ns, expected.second);
      QCOMPARE(stats.mean_ns, static_cast<double>(expected.second) / expected.first);
      QCOMPARE(static_cast<int64_t>(view_->highlightedSpans().size()), expected.first);
    }
    const auto& [key, expected] = *kernels_.by_op.begin();
    view_->HighlightSpans(QString::fromStdString(key.first), QString::fromStdString(key.second));
    // The runs are at the end of the trace, after the compilation: zoom to them.
    std::vector<SpanId> executes = model_->Search("execute");
    QVERIFY(!executes.empty());
    view_->SetVisibleRange(model_->Span(executes.front()).start_ns, model_->end_ns());
    QImage image = view_->viewport()->grab().toImage();
    // The highlight's orange outline is drawn at each of them, however narrow they are.
    int lit = 0;
    for (SpanId id : view_->highlightedSpans()) {
      QRectF rect = view_->SpanRect(id);
      QPoint top(static_cast<int>(rect.center().x()), static_cast<int>(rect.top()));
      for (int dx = -2; dx <= 2; ++dx) {
        QColor c = image.pixelColor(top + QPoint(dx, 0));
        if (c.red() > 200 && c.green() > 120 && c.green() < 220 && c.blue() < 80) {
          ++lit;
          break;
        }
      }
    }
    QCOMPARE(lit, static_cast<int>(expected.first));
    QCOMPARE(view_->HighlightSpans("", "").count, int64_t{0});
    QVERIFY(view_->highlightedSpans().empty());
  }

  // Search walks the hits in time order, both ways, wrapping, and brings each into view.
  void SearchWalksTheHits() {
    int expected = 0;
    for (const auto& e : file_.events) expected += QString::fromStdString(e.name).contains("fusion", Qt::CaseInsensitive);
    QSignalSpy moved(view_.get(), &TimelineView::searchMoved);
    QCOMPARE(view_->Search("fusion"), expected);
    QCOMPARE(view_->hitIndex(), 0);
    std::vector<SpanId> seen{view_->selectedSpan()};
    for (int i = 1; i < expected; ++i) {
      view_->NextHit();
      seen.push_back(view_->selectedSpan());
      SpanInfo span = model_->Span(view_->selectedSpan());
      QVERIFY(span.start_ns >= view_->visibleStart() && span.start_ns + span.duration_ns <= view_->visibleEnd());
    }
    QCOMPARE(static_cast<int>(std::set<SpanId>(seen.begin(), seen.end()).size()), expected);
    for (size_t i = 1; i < seen.size(); ++i) QVERIFY(model_->Span(seen[i - 1]).start_ns <= model_->Span(seen[i]).start_ns);
    view_->NextHit();  // wraps to the first
    QCOMPARE(view_->selectedSpan(), seen.front());
    view_->PreviousHit();  // and back to the last
    QCOMPARE(view_->selectedSpan(), seen.back());
    QCOMPARE(moved.count(), expected + 2);
    QCOMPARE(view_->Search("no such span"), 0);
    QCOMPARE(view_->hitIndex(), -1);
  }

  // On a large trace the view draws far fewer boxes than spans when zoomed out, and every span
  // still counts in one of them.
  void LevelOfDetailOnALargeTrace() {
    profiler::Trace trace;
    trace.threads = {{0, 1, "t1", 1}, {0, 2, "t2", 2}};
    for (int i = 0; i < 100000; ++i) {
      trace.events.push_back({"k" + std::to_string(i % 17), "cpu_kernel", 0, 1 + i % 2, int64_t{i} * 1000, 600, {}});
    }
    std::string path = (fs::temp_directory_path() / ("xlens_timeline_lod_" + std::to_string(::getpid()) + ".json")).string();
    QVERIFY(profiler::WriteChromeTrace(trace, path).ok());
    auto model = MustLoad(path);
    view_->SetModel(model);
    view_->viewport()->grab();
    QCOMPARE(view_->lastPaintSpans(), int64_t{100000});
    QVERIFY2(view_->lastPaintBoxes() < 2000, qPrintable(QString::number(view_->lastPaintBoxes())));
    // Zoomed to 20 spans of each track: each is its own box.
    view_->SetVisibleRange(50'000'000, 50'000'000 + 40'000 - 1);
    view_->viewport()->grab();
    QCOMPARE(view_->lastPaintBoxes(), view_->lastPaintSpans());
    QVERIFY(view_->lastPaintBoxes() >= 40 && view_->lastPaintBoxes() <= 42);
    // A click on the process's title folds its threads away, and another unfolds them.
    Click(view_->viewport(), QPoint(60, 26 + 11));
    view_->viewport()->grab();
    QCOMPARE(view_->lastPaintSpans(), int64_t{0});
    Click(view_->viewport(), QPoint(60, 26 + 11));
    view_->viewport()->grab();
    QCOMPARE(view_->lastPaintBoxes(), view_->lastPaintSpans());
    QVERIFY(view_->lastPaintSpans() >= 40);
    fs::remove(path);
  }

  // SelectSpan with reveal brings a span from out of view into it, and F fits it.
  void RevealAndFit() {
    std::vector<SpanId> kernels = model_->Search("fusion");
    SpanId last = kernels.back();
    SpanInfo info = model_->Span(last);
    view_->SetVisibleRange(model_->start_ns(), model_->start_ns() + 1000);
    view_->SelectSpan(last, true);
    QVERIFY(info.start_ns >= view_->visibleStart() && info.start_ns + info.duration_ns <= view_->visibleEnd());
    QVERIFY(view_->SpanRect(last).width() >= 3);
    QTest::keyClick(view_.get(), Qt::Key_F);
    QVERIFY(view_->visibleEnd() - view_->visibleStart() < info.duration_ns * 1.5 + 200);
  }

  // Selecting a launch draws the flow to its kernel: an arrow through the middle between them.
  void FlowsAreDrawnForTheSelection() {
    profiler::Trace trace;
    trace.processes = {{0, "Host", 0}, {1, "GPU 0", 1}};
    profiler::TraceEvent launch{"cudaLaunchKernel", profiler::category::kCudaRuntime, 0, 1, 1000, 50, {}};
    launch.flow_out = 3;
    profiler::TraceEvent kernel{"fusion.1", profiler::category::kGpuKernel, 1, 7, 5000, 300, {}};
    kernel.flow_in = 3;
    trace.events = {launch, kernel};
    std::string path = (fs::temp_directory_path() / ("xlens_timeline_flow_" + std::to_string(::getpid()) + ".json")).string();
    QVERIFY(profiler::WriteChromeTrace(trace, path).ok());
    auto model = MustLoad(path);
    view_->SetModel(model);
    SpanId from = model->Search("cudaLaunch")[0];
    SpanId to = model->Search("fusion.1")[0];
    QRectF a = view_->SpanRect(from);
    QRectF b = view_->SpanRect(to);
    QPoint middle = ((QPointF(a.right(), a.center().y()) + QPointF(b.left(), b.center().y())) / 2).toPoint();
    auto dark_near = [&](const QImage& image) {
      for (int dy = -2; dy <= 2; ++dy) {
        for (int dx = -2; dx <= 2; ++dx) {
          if (image.pixelColor(middle + QPoint(dx, dy)).red() < 150) return true;
        }
      }
      return false;
    };
    QVERIFY(!dark_near(view_->viewport()->grab().toImage()));
    view_->SelectSpan(from, false);
    QVERIFY(dark_near(view_->viewport()->grab().toImage()));
    fs::remove(path);
  }

  // Two members of a collective meeting: device 1's span starts first, but device 0 arrives
  // first (at 4000 ns) and device 1 after it (at 6000). The arrow runs between the arrivals, not
  // from the end of one span back to the start of the other.
  void CollectiveFlowsRunFromArrivalToArrival() {
    profiler::Trace trace;
    trace.processes = {{100, "CPU 0", 0}, {101, "CPU 1", 1}};
    profiler::TraceEvent first{"ar.1", profiler::category::kCollective, 100, 1, 3000, 4000, {}};
    first.flow_out = 9;
    first.flow_out_at_ns = 1000;
    profiler::TraceEvent next{"ar.1", profiler::category::kCollective, 101, 1, 1000, 6000, {}};
    next.flow_in = 9;
    next.flow_in_at_ns = 5000;
    trace.events = {first, next};
    std::string path = (fs::temp_directory_path() / ("xlens_timeline_meeting_" + std::to_string(::getpid()) + ".json")).string();
    QVERIFY(profiler::WriteChromeTrace(trace, path).ok());
    auto model = MustLoad(path);
    view_->SetModel(model);
    std::vector<SpanId> spans = model->Search("ar.1");
    QCOMPARE(spans.size(), size_t{2});
    SpanId from = model->Span(spans[0]).start_ns > model->Span(spans[1]).start_ns ? spans[0] : spans[1];
    QRectF a = view_->SpanRect(from);
    QRectF b = view_->SpanRect(from == spans[0] ? spans[1] : spans[0]);
    // x of a time on the trace's clock, from the first span's box (3000 to 7000 ns).
    auto x = [&](double ns) { return a.left() + (ns - 3000) * a.width() / 4000; };
    const double mid_y = (a.center().y() + b.center().y()) / 2;
    auto dark_near = [&](const QImage& image, QPointF at) {
      for (int dy = -2; dy <= 2; ++dy) {
        for (int dx = -2; dx <= 2; ++dx) {
          if (image.pixelColor(at.toPoint() + QPoint(dx, dy)).red() < 150) return true;
        }
      }
      return false;
    };
    view_->SelectSpan(from, false);
    QImage image = view_->viewport()->grab().toImage();
    QVERIFY(dark_near(image, QPointF(x(5000), mid_y)));   // halfway between the arrivals
    QVERIFY(!dark_near(image, QPointF(x(4000), mid_y)));  // halfway from first's end to next's start
    fs::remove(path);
  }

  // Counters are drawn as a filled step chart in their row; a trace at the edges of time paints.
  void CountersAndExtremeTimesPaint() {
    std::string path = (fs::temp_directory_path() / ("xlens_timeline_counter_" + std::to_string(::getpid()) + ".json")).string();
    QVERIFY(WriteFile(path, R"({"traceEvents":[
      {"ph":"C","name":"memory","pid":0,"ts":0,"args":{"used":10}},
      {"ph":"C","name":"memory","pid":0,"ts":5,"args":{"used":300}},
      {"ph":"C","name":"memory","pid":0,"ts":9,"args":{"used":50}}]})")
                .ok());
    view_->SetModel(MustLoad(path));
    QImage image = view_->viewport()->grab().toImage();
    int blue = 0;
    for (int y = 26; y < image.height(); ++y) {
      for (int x = 230; x < image.width(); ++x) {
        QColor c = image.pixelColor(x, y);
        blue += c.blue() > c.red() + 40;
      }
    }
    QVERIFY2(blue > 1000, qPrintable(QString::number(blue)));

    QVERIFY(WriteFile(path, R"({"traceEvents":[
      {"ph":"X","name":"late","pid":0,"tid":1,"ts":4611686018427387,"dur":4611686018427387},
      {"ph":"X","name":"early","pid":0,"tid":1,"ts":-4611686018427387,"dur":1}]})")
                .ok());
    auto extreme = MustLoad(path);
    view_->SetModel(extreme);
    view_->viewport()->grab();
    QVERIFY2(view_->lastPaintSpans() == 2,
             qPrintable(QStringLiteral("%1 spans painted; view %2..%3, trace %4..%5")
                            .arg(view_->lastPaintSpans())
                            .arg(view_->visibleStart())
                            .arg(view_->visibleEnd())
                            .arg(extreme->start_ns())
                            .arg(extreme->end_ns())));
    for (int i = 0; i < 80; ++i) QTest::keyClick(view_.get(), Qt::Key_W);
    view_->viewport()->grab();
    for (int i = 0; i < 200; ++i) QTest::keyClick(view_.get(), Qt::Key_S);
    view_->viewport()->grab();
    QVERIFY(view_->visibleEnd() > view_->visibleStart());
    fs::remove(path);
  }

  void RulerTicksAndDurations() {
    QCOMPARE(FormatDuration(850), QStringLiteral("850 ns"));
    QCOMPARE(FormatDuration(12'500), QStringLiteral("12.5 us"));
    QCOMPARE(FormatDuration(999'960), QStringLiteral("1 ms"));
    QCOMPARE(FormatDuration(1.5e9), QStringLiteral("1.5 s"));
    std::vector<RulerTick> ticks = RulerTicks(0, 1e6, 1000, 0);
    QVERIFY(!ticks.empty());
    int major = 0;
    for (const RulerTick& tick : ticks) major += tick.major;
    QVERIFY(major >= 5 && major <= 12);
    QCOMPARE(ticks.front().label, QStringLiteral("0 ns"));
    // Deep in a trace, labels keep the digits that tell neighbouring ticks apart.
    QCOMPARE(FormatTimeOffset(150'123'000, 1000), QStringLiteral("150.123 ms"));
    QCOMPARE(FormatTimeOffset(150'000'000, 1e7), QStringLiteral("150 ms"));
    QCOMPARE(FormatTimeOffset(2'500'000'000, 5e8), QStringLiteral("2.5 s"));
    ticks = RulerTicks(150e6, 150e6 + 20'000, 1000, 0);
    QSet<QString> labels;
    int labelled = 0;
    for (const RulerTick& tick : ticks) {
      if (!tick.major) continue;
      ++labelled;
      labels.insert(tick.label);
    }
    QVERIFY(labelled >= 5);
    QCOMPARE(labels.size(), labelled);
  }

 private:
  profiler::Trace file_;
  FileKernels kernels_;
  std::shared_ptr<const TraceModel> model_;
  std::unique_ptr<TimelineView> view_;
};

}  // namespace xlens::viewer

QTEST_MAIN(xlens::viewer::TimelineViewTest)
#include "timeline_view_test.moc"
