// Which line of the user's program made this kernel, in the Details pane: the outline reads the
// stack-frame table jaxlib writes after the HloModule line (and older source_file metadata), an XLA
// dump's kernels carry it, xlens's own manifest kernels carry theirs, and the source link opens the
// file at that line through the opener the window is given (here a recording one: nothing runs).
#include <QDir>
#include <QElapsedTimer>
#include <QFile>
#include <QProcess>
#include <QStatusBar>
#include <QTemporaryDir>
#include <QTest>
#include <fstream>
#include <sstream>

#include "viewer/dump_model.h"
#include "viewer/hlo_outline.h"
#include "viewer/main_window.h"
#include "viewer/source_opener.h"

using namespace xlens;
using namespace xlens::viewer;

namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void Write(const QString& path, const std::string& text) { std::ofstream(path.toStdString()) << text; }

// jaxlib's module of a small training step: train_step.py, predict called by loss called by
// train_step called at the top level.
std::string JaxModule() { return ReadText(XLENS_SOURCE_DIR "/tests/hlo/testdata/jax_train_step.hlo"); }

// A stack-frame table with a cycle, a parent past its end, a location naming no file, and
// instructions on an id it lacks and on the older source_file metadata (also a fuzzing seed).
std::string BrokenTable() { return ReadText(XLENS_TESTDATA_DIR "/frame_tables/cycles_and_dangling_ids.hlo"); }

QString Frame(const ManifestSourceFrame& frame) { return SourceFrameText(frame) + " " + QString::fromStdString(frame.function); }

// The first source link of the summary ("source:N"), or empty.
QString FirstSourceLink(const QString& html) {
  const qsizetype at = html.indexOf("href='source:");
  if (at < 0) return {};
  return html.mid(at + 6, html.indexOf('\'', at + 6) - at - 6);
}

struct Opened {
  QString path;
  qint64 line = -1, column = -1;
  int calls = 0;
};

SourceOpener Recorder(Opened& opened) {
  return [&opened](const QString& path, qint64 line, qint64 column, QString* what) {
    opened.path = path;
    opened.line = line;
    opened.column = column;
    ++opened.calls;
    *what = "opened";
    return true;
  };
}

}  // namespace

class SourceLineTest : public QObject {
  Q_OBJECT

 private slots:
  void OutlineReadsJaxlibsStackFrameTable() {
    StatusOr<HloOutline> outline = ParseHloOutline(JaxModule(), "jax_train_step.hlo");
    QVERIFY2(outline.ok(), outline.ok() ? "" : outline.status().message().c_str());
    auto [computation, dot] = outline->FindInstruction("dot_general.2");
    QVERIFY(dot != nullptr);
    QVERIFY(dot->source.has_value());
    QCOMPARE(Frame(*dot->source), QString("train_step.py:4:18 predict"));
    std::vector<ManifestSourceFrame> callers = outline->CallersOf(*dot);
    QCOMPARE(callers.size(), size_t(3));
    QCOMPARE(Frame(callers[0]), QString("train_step.py:7:19 loss"));
    QCOMPARE(Frame(callers[1]), QString("train_step.py:11:11 train_step"));
    QCOMPARE(Frame(callers[2]), QString("train_step.py:14 <module>"));  // column 0: not shown
    QCOMPARE(outline->CallersOf(*dot, 1).size(), size_t(1));
    // Parameters carry no frame.
    QVERIFY(!outline->FindInstruction("w.1").second->source.has_value());
  }

  void CyclesAndDanglingIdsEndTheWalk() {
    StatusOr<HloOutline> outline = ParseHloOutline(BrokenTable(), "broken.hlo");
    QVERIFY2(outline.ok(), outline.ok() ? "" : outline.status().message().c_str());
    auto find = [&](const char* name) { return outline->FindInstruction(name).second; };
    // 1 -> 2 -> 1: each frame once.
    const HloOutlineInstruction* cycle = find("cycle");
    QVERIFY(cycle->source.has_value());
    QCOMPARE(Frame(*cycle->source), QString("a.py:10:4 f"));
    std::vector<ManifestSourceFrame> callers = outline->CallersOf(*cycle);
    QCOMPARE(callers.size(), size_t(1));
    QCOMPARE(Frame(callers[0]), QString("b.py:20 f"));
    // A parent past the table's end: the frame alone.
    const HloOutlineInstruction* dangling_parent = find("dangling_parent");
    QVERIFY(dangling_parent->source.has_value());
    QCOMPARE(outline->CallersOf(*dangling_parent).size(), size_t(0));
    // An id the table lacks: the older fields stand.
    const HloOutlineInstruction* dangling_id = find("dangling_id");
    QVERIFY(dangling_id->source.has_value());
    QCOMPARE(SourceFrameText(*dangling_id->source), QString("old.py:5"));
    // A location naming no file: no source rather than an empty one.
    QVERIFY(!find("bad_file")->source.has_value());
    QCOMPARE(SourceFrameText(*find("old_style")->source), QString("legacy.py:42"));
  }

  void ADeepTableCostsNothingPerInstruction() {
    // 20,000 frames each called by the one before, 20,000 instructions on the deepest: walking
    // every stack when parsing took minutes; the callers are read on demand and bounded.
    constexpr int kFrames = 20000;
    std::string text = "HloModule deep\n\nFileNames\n1 \"deep.py\"\n\nFunctionNames\n1 \"f\"\n\nFileLocations\n";
    for (int i = 1; i <= kFrames; ++i) {
      text += std::to_string(i) + " {file_name_id=1 function_name_id=1 line=" + std::to_string(i) + " column=0}\n";
    }
    text += "\nStackFrames\n";
    for (int i = 1; i <= kFrames; ++i) {
      text += std::to_string(i) + " {file_location_id=" + std::to_string(i) + " parent_frame_id=" + std::to_string(i) + "}\n";
    }
    text += "\nENTRY %main (x: f32[4]) -> f32[4] {\n  %x = f32[4]{0} parameter(0)\n";
    std::string previous = "x";
    for (int i = 0; i < kFrames; ++i) {
      const std::string name = "n" + std::to_string(i);
      text += "  %" + name + " = f32[4]{0} negate(%" + previous + "), metadata={op_name=\"n\" stack_frame_id=" +
              std::to_string(kFrames) + "}\n";
      previous = name;
    }
    text += "}\n";
    QElapsedTimer timer;
    timer.start();
    StatusOr<HloOutline> outline = ParseHloOutline(text, "deep.hlo");
    QVERIFY(outline.ok());
    QVERIFY2(timer.elapsed() < 5000, qPrintable(QString("%1 ms").arg(timer.elapsed())));
    const HloOutlineInstruction* last = outline->FindInstruction("n19999").second;
    QCOMPARE(SourceFrameText(*last->source), QString("deep.py:20000"));
    std::vector<ManifestSourceFrame> callers = outline->CallersOf(*last);
    QCOMPARE(callers.size(), size_t(64));
    QCOMPARE(callers.front().line, int64_t(19999));
  }

  void XlaDumpShowsTheLineAndOpensTheFileThere() {
    // The program beside its dump directory, as `XLA_FLAGS=--xla_dump_to=dump python train_step.py`
    // leaves them.
    QTemporaryDir root;
    const QString dump = root.path() + "/dump";
    QVERIFY(QDir().mkpath(dump));
    Write(dump + "/module_0001.jit_train_step.before_optimizations.txt", JaxModule());
    Write(dump + "/module_0001.jit_train_step.cpu_after_optimizations.txt", JaxModule());
    Write(root.path() + "/train_step.py", "# the user's program\n");
    MainWindow window;
    Opened opened;
    window.SetSourceOpener(Recorder(opened));
    QVERIFY(window.OpenDump(dump).empty());
    QVERIFY(window.WaitUntilIdle(60000));
    QVERIFY(window.model()->from_xla_names());
    // The kernels the model lists carry their source too.
    const ManifestModule& module = window.model()->manifest().modules.at(0);
    const ManifestKernel* kernel = DumpModel::KernelOf(module, "dot_general.2");
    QVERIFY(kernel != nullptr && kernel->source.has_value());
    QCOMPARE(Frame(*kernel->source), QString("train_step.py:4:18 predict"));
    QCOMPARE(kernel->stack.size(), size_t(3));

    std::string error;
    QVERIFY2(window.SelectByName("dot_general.2", &error), error.c_str());
    QVERIFY(window.WaitUntilIdle(60000));
    const QString html = window.details()->SummaryText();
    QVERIFY2(html.contains("train_step.py:4:18</tt></a> (predict)"), qPrintable(html));
    QVERIFY2(html.contains("called from (3)"), qPrintable(html));
    // Callers innermost first, the top level last; names escaped as the pane escapes all text.
    const qsizetype loss = html.indexOf("train_step.py:7:19");
    const qsizetype step = html.indexOf("train_step.py:11:11");
    const qsizetype top = html.indexOf("train_step.py:14</tt></a> (&lt;module&gt;)");
    QVERIFY2(loss > 0 && step > loss && top > step, qPrintable(html));

    window.details()->ActivateLink(FirstSourceLink(html));
    QCOMPARE(opened.calls, 1);
    QCOMPARE(QFileInfo(opened.path).canonicalFilePath(), QFileInfo(root.path() + "/train_step.py").canonicalFilePath());
    QCOMPARE(opened.line, qint64(4));
    QCOMPARE(opened.column, qint64(18));
    // The caller at the top level opens at its own line.
    window.details()->ActivateLink("source:3");
    QCOMPARE(opened.calls, 2);
    QCOMPARE(opened.line, qint64(14));
    // The module's kernel list names each kernel's line, a link too.
    window.details()->ShowModule(module, {});
    const QString list = window.details()->SummaryText();
    QVERIFY2(list.contains(">train_step.py:4</a>"), qPrintable(list));
    const qsizetype dot_row = list.indexOf(">dot_general.2</a>");
    QVERIFY(dot_row > 0);
    const qsizetype link = list.indexOf("href='source:", dot_row);
    window.details()->ActivateLink(list.mid(link + 6, list.indexOf('\'', link + 6) - link - 6));
    QCOMPARE(opened.calls, 3);
    QCOMPARE(opened.line, qint64(4));
  }

  void XlensDumpShowsTheManifestsSourceAndSaysAMissingFile() {
    QTemporaryDir dir;
    const QString xlens = XLENS_BINARY_DIR "/compiler/cli/xlens";
    QVERIFY2(QFile::exists(xlens), qPrintable(xlens + " is not built"));
    QProcess opt;
    opt.start(xlens, {"opt", "--xla_dump_to=" + dir.path(), XLENS_SOURCE_DIR "/tests/hlo/testdata/jax_train_step.hlo"});
    QVERIFY(opt.waitForFinished(60000));
    QCOMPARE(opt.exitCode(), 0);
    MainWindow window;
    Opened opened;
    window.SetSourceOpener(Recorder(opened));
    window.OpenDump(dir.path());
    QVERIFY(window.WaitUntilIdle(60000));
    QVERIFY(!window.model()->from_xla_names());
    // The kernel whose manifest entry names predict's line (a fusion: its source is its fused
    // instructions').
    const ManifestModule& module = window.model()->manifest().modules.at(0);
    const ManifestKernel* with_source = nullptr;
    for (const ManifestKernel& kernel : module.kernels) {
      if (kernel.source && kernel.source->function == "predict") with_source = &kernel;
    }
    QVERIFY(with_source != nullptr);
    std::string error;
    QVERIFY2(window.SelectByName(QString::fromStdString(with_source->name), &error), error.c_str());
    QVERIFY(window.WaitUntilIdle(60000));
    const QString html = window.details()->SummaryText();
    const QString expected = SourceFrameText(*with_source->source) + "</tt></a> (predict)";
    QVERIFY2(html.contains(expected), qPrintable(html));
    QVERIFY2(html.contains("(&lt;module&gt;)"), qPrintable(html));
    // train_step.py is nowhere here: said in the status bar, nothing opened.
    window.details()->ActivateLink(FirstSourceLink(html));
    QCOMPARE(opened.calls, 0);
    QVERIFY2(window.statusBar()->currentMessage().contains("train_step.py: no such file"),
             qPrintable(window.statusBar()->currentMessage()));
  }

  void EditorCommandFollowsXlensEditorThenCode() {
    QCOMPARE(EditorCommand("/src/a b.py", 12, 4, "emacsclient -n +{line}:{column} {file}", true),
             QStringList({"emacsclient", "-n", "+12:5", "/src/a b.py"}));
    QCOMPARE(EditorCommand("/src/a.py", 12, 4, "gedit", true), QStringList({"gedit", "/src/a.py"}));
    QCOMPARE(EditorCommand("/src/a.py", 12, 4, "", true), QStringList({"code", "-g", "/src/a.py:12:5"}));
    QVERIFY(EditorCommand("/src/a.py", 12, 4, "", false).isEmpty());
  }
};

QTEST_MAIN(SourceLineTest)
#include "source_line_test.moc"
