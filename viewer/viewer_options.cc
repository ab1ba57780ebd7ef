#include "viewer/viewer_options.h"

#include <QCommandLineParser>
#include <QRegularExpression>

namespace xlens::viewer {

StatusOr<ViewerOptions> ParseViewerOptions(const QStringList& arguments) {
  QCommandLineParser parser;
  parser.setApplicationDescription(
      "xlens-viewer: step through every pass and clustering stage of an xlens or XLA dump as a graph,\n"
      "with the diff of each pass, beside the timeline of the kernels it produced.");
  parser.addHelpOption();
  parser.addPositionalArgument("DUMP_DIR", "A dump directory (XLA_FLAGS=--xla_dump_to=DIR): xlens's, with its manifest.json, or one XLA wrote.");
  const QCommandLineOption trace({"t", "trace"}, "The trace to show (default: DUMP_DIR/timeline.ctf.json).", "FILE");
  const QCommandLineOption module({"m", "module"}, "Open module N (its id in the dump).", "N");
  const QCommandLineOption stage({"s", "stage"}, "Open this pass or clustering stage (e.g. fusion).", "NAME");
  const QCommandLineOption select("select", "Select this instruction, graph node or kernel.", "NAME");
  const QCommandLineOption diff("diff", "Show the stage in diff mode (before and after the pass).");
  const QCommandLineOption compare("compare", "Show this `xlens compare DIR --json FILE` report: XLA's kernels beside xlens's, for the module shown.", "FILE");
  const QCommandLineOption screenshot("screenshot", "Render the window offscreen to OUT.png and exit.", "OUT.png");
  const QCommandLineOption size("size", "Window size for --screenshot (default 1600x1000).", "WxH");
  parser.addOptions({trace, module, stage, select, diff, compare, screenshot, size});

  QStringList argv = arguments;
  argv.prepend("xlens-viewer");
  if (!parser.parse(argv)) return Error("xlens-viewer: " + parser.errorText().toStdString() + " (see --help)");

  ViewerOptions options;
  if (parser.isSet("help")) {
    options.help = true;
    options.help_text = parser.helpText();
    options.help_text.replace("<executable_name>", "xlens-viewer");
    return options;
  }
  const QStringList positional = parser.positionalArguments();
  if (positional.size() > 1) {
    return Error("xlens-viewer: one dump directory expected, got " + std::to_string(positional.size()) + " (" +
                 positional.join(" ").toStdString() + ")");
  }
  if (!positional.isEmpty()) options.dump_dir = positional.front();
  options.trace = parser.value(trace);
  if (parser.isSet(module)) {
    bool ok = false;
    options.module = parser.value(module).toLongLong(&ok);
    if (!ok || options.module < 0) {
      return Error("xlens-viewer: --module expects a module id (a number >= 0), got \"" +
                   parser.value(module).toStdString() + "\"");
    }
  }
  options.stage = parser.value(stage);
  options.select = parser.value(select);
  options.diff = parser.isSet(diff);
  options.compare = parser.value(compare);
  if (parser.isSet(compare) && options.compare.isEmpty()) return Error("xlens-viewer: --compare expects a file, got \"\"");
  options.screenshot = parser.value(screenshot);
  if (parser.isSet(size)) {
    QRegularExpressionMatch match = QRegularExpression(R"(^(\d{2,5})x(\d{2,5})$)").match(parser.value(size));
    if (!match.hasMatch()) {
      return Error("xlens-viewer: --size expects WIDTHxHEIGHT (e.g. 1600x1000), got \"" +
                   parser.value(size).toStdString() + "\"");
    }
    options.size = QSize(match.captured(1).toInt(), match.captured(2).toInt());
    if (options.size.width() > 16384 || options.size.height() > 16384) {
      return Error("xlens-viewer: --size is limited to 16384x16384");
    }
  }
  if (options.screenshot.isEmpty() && parser.isSet(size)) {
    return Error("xlens-viewer: --size applies to --screenshot only");
  }
  if (!options.screenshot.isEmpty() && options.dump_dir.isEmpty() && options.trace.isEmpty()) {
    return Error("xlens-viewer: --screenshot needs a dump directory or a --trace to show");
  }
  return options;
}

}  // namespace xlens::viewer
