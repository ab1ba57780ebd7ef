// The command line of xlens-viewer:
//   xlens-viewer [DUMP_DIR] [--trace FILE] [--module N] [--stage NAME] [--select NAME] [--diff]
//                [--compare REPORT.json] [--screenshot OUT.png] [--size WxH]
// The selectors open the window on a state (a module, one of its passes or clustering stages, an
// instruction or graph node selected); --screenshot renders that state offscreen and exits, for
// tests, the README, the main job and bug reports. --compare shows an `xlens compare --json` report
// of the dump's modules under the graph (compare_pane.h).
#pragma once

#include <QSize>
#include <QString>
#include <QStringList>
#include <cstdint>

#include "compiler/support/status.h"

namespace xlens::viewer {

struct ViewerOptions {
  QString dump_dir;
  QString trace;
  int64_t module = -1;  // module id; -1: the first
  QString stage;        // a pass or clustering stage name
  QString select;       // an instruction, graph node or kernel name
  bool diff = false;    // open the stage in diff mode
  QString compare;      // an `xlens compare --json` report to show
  QString screenshot;   // render to this PNG and exit
  QSize size{1600, 1000};
  bool help = false;
  QString help_text;
};

// Parses the arguments (argv without the program name). An error says what was wrong with which
// argument, in one line.
StatusOr<ViewerOptions> ParseViewerOptions(const QStringList& arguments);

}  // namespace xlens::viewer
