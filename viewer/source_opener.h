// Opening a source line of the user's program (the Details pane's source links) in an editor.
// XLENS_EDITOR, when set, is the command with {file}, {line} and {column} in it
// (XLENS_EDITOR="code -g {file}:{line}:{column}", "emacsclient -n +{line}:{column} {file}",
// "subl {file}:{line}"); else VS Code's `code -g file:line:col` when `code` is on PATH; else the
// desktop's handler for the file, which opens it at its top. $VISUAL and $EDITOR are not used:
// they name terminal editors, and a window has no terminal to run them in.
#pragma once

#include <QString>
#include <QStringList>
#include <functional>

namespace xlens::viewer {

// Opens `path` (an existing file) at `line`; `column` as the stack-frame table writes it (0-based,
// 0 when unknown). Returns false with `what` saying why not; on success `what` says how.
using SourceOpener = std::function<bool(const QString& path, qint64 line, qint64 column, QString* what)>;

// The one the window uses unless told otherwise: launches the editor detached.
bool LaunchEditor(const QString& path, qint64 line, qint64 column, QString* what);

// The command LaunchEditor runs: XLENS_EDITOR's template filled in (split as a shell would, without
// running one), else `code -g` when `have_code`; empty: the desktop's handler. Columns given to
// editors are 1-based.
QStringList EditorCommand(const QString& path, qint64 line, qint64 column, const QString& xlens_editor,
                          bool have_code);

// The file a frame names: an absolute path as it is, a relative one against each of `bases` in
// turn; empty when no such regular file exists.
QString ResolveSourcePath(const QString& file, const QStringList& bases);

}  // namespace xlens::viewer
