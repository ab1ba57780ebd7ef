// xlens-viewer: see viewer_options.h for the command line and main_window.h for the window.
#include <QApplication>
#include <QBuffer>
#include <QImage>
#include <QPixmap>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "compiler/support/file_io.h"
#include "compiler/support/terminal_text.h"
#include "dump/compare_report.h"
#include "viewer/layout_process.h"
#include "viewer/main_window.h"
#include "viewer/viewer_options.h"

namespace {

// Qt's offscreen platform warns about what it cannot do for a window (size hints) and about a
// missing runtime directory; neither matters to a screenshot, and both would bury real messages.
void FilterQtNoise(QtMsgType type, const QMessageLogContext& context, const QString& message) {
  if (message.contains("propagateSizeHints") || message.startsWith("QStandardPaths: XDG_RUNTIME_DIR")) return;
  std::fprintf(stderr, "%s\n", qPrintable(qFormatLogMessage(type, context, message)));
}

}  // namespace

int main(int argc, char** argv) {
  // The viewer's own layout process (layout_process.h): no window, no application object.
  if (argc >= 2 && std::strcmp(argv[1], xlens::viewer::kLayoutChildFlag) == 0) {
    return xlens::viewer::RunLayoutChild(argc, argv);
  }
  QStringList arguments;
  for (int i = 1; i < argc; ++i) arguments << QString::fromLocal8Bit(argv[i]);
  auto options = xlens::viewer::ParseViewerOptions(arguments);
  if (!options.ok()) {
    std::fprintf(stderr, "%s\n", options.status().message().c_str());
    return 1;
  }
  if (options->help) {
    std::printf("%s", options->help_text.toLocal8Bit().constData());
    return 0;
  }
  // A report that cannot be read is an error before any window: the pane would show nothing, and
  // a screenshot of it would mislead.
  std::shared_ptr<const xlens::CompareReport> compare;
  if (!options->compare.isEmpty()) {
    auto report = xlens::ReadCompareReport(options->compare.toStdString());
    if (!report.ok()) {
      std::fprintf(stderr, "xlens-viewer: %s\n", xlens::EscapeForTerminal(report.status().message()).c_str());
      return 1;
    }
    compare = std::make_shared<const xlens::CompareReport>(std::move(report).value());
  }
  // A screenshot needs no display: render offscreen unless the user chose a platform. (The
  // "minimal" platform draws text as boxes; "offscreen" draws it.)
  if (!options->screenshot.isEmpty() && std::getenv("QT_QPA_PLATFORM") == nullptr) {
    setenv("QT_QPA_PLATFORM", "offscreen", 1);
  }
  if (!options->screenshot.isEmpty()) qInstallMessageHandler(FilterQtNoise);
  QApplication app(argc, argv);
  QApplication::setOrganizationName("xlens");
  QApplication::setApplicationName("xlens-viewer");

  xlens::viewer::MainWindow window;
  if (!options->screenshot.isEmpty()) window.resize(options->size);
  if (!options->dump_dir.isEmpty()) {
    window.OpenDump(options->dump_dir, options->trace);
  } else if (!options->trace.isEmpty()) {
    window.OpenTrace(options->trace);
  }
  if (compare) window.SetCompareReport(compare, options->compare);
  window.show();

  // The selectors apply in order, each to what the one before opened. What names nothing is an
  // error for a screenshot (it would show the wrong thing) and a status-bar message otherwise.
  bool selector_failed = false;
  auto apply = [&](bool ok, const std::string& error) {
    if (ok) return;
    selector_failed = true;
    // The error may quote names from the dump: escaped for the terminal.
    std::fprintf(stderr, "xlens-viewer: %s\n", xlens::EscapeForTerminal(error).c_str());
  };
  std::string error;
  if (options->module >= 0) apply(window.SelectModule(options->module, &error), error);
  if (!options->stage.isEmpty()) apply(window.SelectStageByName(options->stage, &error), error);
  if (options->diff) window.SetDiffMode(true);
  if (!options->select.isEmpty()) {
    window.WaitUntilIdle(60000);
    apply(window.SelectByName(options->select, &error), error);
  }

  if (options->screenshot.isEmpty()) return app.exec();
  if (selector_failed) return 1;
  if (!window.WaitUntilIdle(120000)) {
    std::fprintf(stderr, "xlens-viewer: gave up waiting for the layout and the trace after 120 s\n");
    return 1;
  }
  // A picture of nothing is no picture: a dump without a readable manifest and without a trace
  // is an error (the messages above say why); one that opened in part is pictured with its banner.
  const bool opened_nothing = (window.model() == nullptr || !window.model()->has_manifest()) && window.trace() == nullptr;
  if (opened_nothing) {
    std::fprintf(stderr, "xlens-viewer: nothing could be opened; no screenshot written\n");
    return 1;
  }
  // Encoded in memory, written by the project's one writer: atomically for a regular file, never
  // into a directory, and a failure names the path and why.
  QImage image = window.grab().toImage();
  QByteArray png;
  QBuffer buffer(&png);
  buffer.open(QIODevice::WriteOnly);
  if (image.isNull() || !image.save(&buffer, "PNG")) {
    std::fprintf(stderr, "xlens-viewer: the window could not be rendered to PNG\n");
    return 1;
  }
  if (xlens::Status written = xlens::WriteFile(options->screenshot.toStdString(),
                                               std::string_view(png.constData(), png.size()));
      !written.ok()) {
    std::fprintf(stderr, "xlens-viewer: %s\n", written.message().c_str());
    return 1;
  }
  std::printf("xlens-viewer: wrote %s (%dx%d)\n", options->screenshot.toLocal8Bit().constData(), image.width(),
              image.height());
  return 0;
}
