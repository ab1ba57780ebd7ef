// `xlens-viewer --screenshot` as a user (and the README, and the main job) runs it: the binary,
// offscreen, on the fixture's real dump. The pictures are read back and looked at for what each
// state must show: XLA's colours in the graph, the diff borders on the fusion pass, the timeline's
// spans with the selected kernel's lit up, and real text (the offscreen platform draws glyphs; the
// minimal one would draw boxes). They are kept in the build tree for a person to look at too.
#include <QDir>
#include <QFile>
#include <QImage>
#include <QProcess>
#include <QRegularExpression>
#include <QTest>
#include <cstdlib>
#include <set>

namespace {

QString DumpDir() { return QString::fromLocal8Bit(std::getenv("XLENS_VIEWER_TEST_DUMP")); }
QString OutDir() { return QString(XLENS_BINARY_DIR) + "/tests/viewer_screenshots"; }

// A kernel of the optimized training step: the first fusion its entry computation runs. Taken
// from the dump rather than named here, since which fusions the pipeline forms (and so their
// numbers) changes with the fusion passes.
QString AFusionKernel() {
  const QStringList optimized = QDir(DumpDir()).entryList(
      {"module_*.mnist_softmax_train_step.cpu_after_optimizations.txt"}, QDir::Files);
  if (optimized.isEmpty()) return {};
  QFile file(DumpDir() + "/" + optimized.first());
  if (!file.open(QIODevice::ReadOnly)) return {};
  const QString text = QString::fromUtf8(file.readAll());
  const qsizetype entry = text.indexOf("\nENTRY ");
  if (entry < 0) return {};
  QRegularExpressionMatch match =
      QRegularExpression(R"(\n\s*(?:ROOT )?%(fusion[.0-9]*) = [^\n]* fusion\()").match(text, entry);
  return match.hasMatch() ? match.captured(1) : QString();
}

struct Run {
  int exit_code = -1;
  QString output;
};

Run RunViewer(const QStringList& arguments) {
  QProcess process;
  process.setProcessChannelMode(QProcess::MergedChannels);
  QProcessEnvironment env = QProcessEnvironment::systemEnvironment();
  env.remove("QT_QPA_PLATFORM");  // --screenshot must choose offscreen by itself
  process.setProcessEnvironment(env);
  process.start(XLENS_VIEWER_BINARY, arguments);
  if (!process.waitForFinished(180000)) {
    process.kill();
    return {-1, "timed out"};
  }
  return {process.exitCode(), QString::fromLocal8Bit(process.readAll())};
}

// Pixels (sampled on a grid) whose colour is within `tolerance` of `colour`.
int CountNear(const QImage& image, QColor colour, int tolerance, QRect area = {}) {
  if (area.isNull()) area = image.rect();
  int count = 0;
  for (int y = area.top(); y <= area.bottom(); y += 1) {
    for (int x = area.left(); x <= area.right(); x += 1) {
      QColor c = image.pixelColor(x, y);
      if (std::abs(c.red() - colour.red()) <= tolerance && std::abs(c.green() - colour.green()) <= tolerance &&
          std::abs(c.blue() - colour.blue()) <= tolerance) {
        ++count;
      }
    }
  }
  return count;
}

int DistinctColours(const QImage& image) {
  std::set<QRgb> colours;
  for (int y = 0; y < image.height(); y += 3) {
    for (int x = 0; x < image.width(); x += 3) colours.insert(image.pixel(x, y) & 0xf0f0f0);
  }
  return static_cast<int>(colours.size());
}

}  // namespace

class ScreenshotTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(!DumpDir().isEmpty());
    QVERIFY(QDir().mkpath(OutDir()));
  }

  // The stage list and the optimized module's graph.
  void stagesAndGraph() {
    const QString out = OutDir() + "/graph.png";
    QFile::remove(out);
    Run run = RunViewer({DumpDir(), "--screenshot", out});
    QVERIFY2(run.exit_code == 0, qPrintable(run.output));
    QImage image(out);
    QCOMPARE(image.size(), QSize(1600, 1000));
    QVERIFY2(DistinctColours(image) > 40, "the picture is nearly uniform");
    // XLA's colours: a dot (dark blue), parameters (orange).
    QVERIFY2(CountNear(image, QColor(0x15, 0x65, 0xc0), 40) > 50, "no dark-blue dot node");
    QVERIFY2(CountNear(image, QColor(0xff, 0xb7, 0x4d), 40) > 50, "no orange parameter node");
  }

  // Diff mode on the fusion pass: fused-into blue and added green borders.
  void diffOnTheFusionPass() {
    const QString out = OutDir() + "/diff_fusion.png";
    QFile::remove(out);
    Run run = RunViewer({DumpDir(), "--stage", "fusion", "--diff", "--screenshot", out});
    QVERIFY2(run.exit_code == 0, qPrintable(run.output));
    QImage image(out);
    QVERIFY(!image.isNull());
    QVERIFY(DistinctColours(image) > 40);
    QVERIFY2(CountNear(image, QColor(0x43, 0xa0, 0x47), 30) > 30, "no green (added) border");
    QVERIFY2(CountNear(image, QColor(0x1e, 0x88, 0xe5), 30) > 30, "no blue (fused-into) border");
  }

  // A kernel selected: its fusion centred and its spans lit on the timeline.
  void timelineWithAKernelSelected() {
    const QString out = OutDir() + "/kernel_selected.png";
    QFile::remove(out);
    const QString kernel = AFusionKernel();
    QVERIFY2(!kernel.isEmpty(), "the dump's optimized training step has no fusion");
    Run run = RunViewer({DumpDir(), "--select", kernel, "--screenshot", out});
    QVERIFY2(run.exit_code == 0, qPrintable(run.output));
    QImage image(out);
    QVERIFY(!image.isNull());
    QVERIFY(DistinctColours(image) > 40);
  }

  // Selectors that name nothing fail with a message, and write nothing.
  void badSelectorsFail() {
    const QString out = OutDir() + "/never.png";
    QFile::remove(out);
    Run run = RunViewer({DumpDir(), "--stage", "no-such-pass", "--screenshot", out});
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(run.output.contains("no-such-pass"), qPrintable(run.output));
    QVERIFY(!QFile::exists(out));
    run = RunViewer({DumpDir(), "--module", "x", "--screenshot", out});
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(run.output.contains("--module"), qPrintable(run.output));
    run = RunViewer({DumpDir(), "--size", "12", "--screenshot", out});
    QCOMPARE(run.exit_code, 1);
    // A directory is no place for a picture: the writer refuses it and names it.
    run = RunViewer({DumpDir(), "--screenshot", OutDir()});
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(run.output.contains(OutDir()), qPrintable(run.output));
    run = RunViewer({DumpDir(), "--no-such-flag"});
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(run.output.contains("no-such-flag"), qPrintable(run.output));
    QVERIFY(!QFile::exists(out));
  }

  // A dump that cannot be opened at all fails; one that opens in part is pictured, and what was
  // wrong is on stderr.
  void brokenDumps() {
    const QString broken = QString(XLENS_TESTDATA_DIR) + "/broken_dumps";
    const QString out = OutDir() + "/broken.png";
    QFile::remove(out);
    Run run = RunViewer({broken + "/bad_json", "--screenshot", out});
    QCOMPARE(run.exit_code, 1);
    QVERIFY2(run.output.contains("bad_json/manifest.json") && run.output.contains("line 1"), qPrintable(run.output));
    QVERIFY(!QFile::exists(out));
    run = RunViewer({broken + "/escaping_path", "--screenshot", out});
    QCOMPARE(run.exit_code, 0);
    QVERIFY2(run.output.contains("leaves the dump directory"), qPrintable(run.output));
    QVERIFY(QFile::exists(out));
  }
};

QTEST_MAIN(ScreenshotTest)
#include "screenshot_test.moc"
