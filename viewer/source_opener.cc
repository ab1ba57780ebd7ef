#include "viewer/source_opener.h"

#include <QDesktopServices>
#include <QDir>
#include <QFileInfo>
#include <QProcess>
#include <QStandardPaths>
#include <QUrl>
#include <algorithm>

namespace xlens::viewer {

QStringList EditorCommand(const QString& path, qint64 line, qint64 column, const QString& xlens_editor,
                          bool have_code) {
  const QString line_text = QString::number(std::max<qint64>(line, 1));
  const QString column_text = QString::number(std::max<qint64>(column, 0) + 1);
  if (!xlens_editor.trimmed().isEmpty()) {
    QStringList command = QProcess::splitCommand(xlens_editor);
    bool named_file = false;
    for (QString& part : command) {
      named_file = named_file || part.contains("{file}");
      part.replace("{file}", path).replace("{line}", line_text).replace("{column}", column_text);
    }
    if (!named_file) command << path;  // "XLENS_EDITOR=gedit" still opens the file
    return command;
  }
  if (have_code) return {"code", "-g", path + ":" + line_text + ":" + column_text};
  return {};
}

bool LaunchEditor(const QString& path, qint64 line, qint64 column, QString* what) {
  const QString xlens_editor = qEnvironmentVariable("XLENS_EDITOR");
  const bool have_code = !QStandardPaths::findExecutable("code").isEmpty();
  QStringList command = EditorCommand(path, line, column, xlens_editor, have_code);
  const QString place = QString("%1:%2").arg(QDir::toNativeSeparators(path)).arg(line);
  if (command.isEmpty()) {
    if (!QDesktopServices::openUrl(QUrl::fromLocalFile(path))) {
      *what = place + ": no program opens this file; set XLENS_EDITOR (e.g. \"code -g {file}:{line}\")";
      return false;
    }
    *what = "Opened " + QDir::toNativeSeparators(path) + " with the desktop's handler (set XLENS_EDITOR to open it at line " +
            QString::number(line) + ")";
    return true;
  }
  const QString program = command.takeFirst();
  if (!QProcess::startDetached(program, command)) {
    *what = place + ": cannot start " + program + (xlens_editor.isEmpty() ? "" : " (XLENS_EDITOR)");
    return false;
  }
  *what = "Opened " + place + " with " + program;
  return true;
}

QString ResolveSourcePath(const QString& file, const QStringList& bases) {
  if (file.isEmpty()) return {};
  auto usable = [](const QString& candidate) {
    QFileInfo info(candidate);
    return info.exists() && info.isFile();
  };
  if (QDir::isAbsolutePath(file)) return usable(file) ? QDir::cleanPath(file) : QString();
  for (const QString& base : bases) {
    if (base.isEmpty()) continue;
    const QString candidate = QDir(base).filePath(file);
    if (usable(candidate)) return QDir::cleanPath(candidate);
  }
  return {};
}

}  // namespace xlens::viewer
