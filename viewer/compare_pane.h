// The Compare pane: an `xlens compare --json` report (dump/compare_report.h) for the module shown,
// XLA's kernels beside xlens's. First the matched pairs (overlap, both kinds, both times and their
// ratio when the report has traces), then the "fused more" notes (one side's kernel running what
// the other runs as several), then the kernels only one side made, with why. Rows are coloured by
// kind of difference in the graph's palette (graph_style.h). Selecting a row that names an XLA
// kernel asks the window to select it (xlaKernelSelected), as the kernels list does.
#pragma once

#include <QComboBox>
#include <QLabel>
#include <QTreeWidget>
#include <QWidget>
#include <memory>

#include "dump/compare_report.h"

namespace xlens::viewer {

// What a row of the table shows; also its colour.
enum class CompareRowKind {
  kExactPair,      // the same instructions on both sides
  kPair,           // matched, overlapping in part
  kXlaFusedMore,   // an XLA kernel runs what xlens runs as several
  kXlensFusedMore, // an xlens kernel runs what XLA runs as several
  kOnlyXla,
  kOnlyXlens,
};

class ComparePane : public QWidget {
  Q_OBJECT
 public:
  // Roles of column 0's data.
  static constexpr int kRowKindRole = Qt::UserRole + 1;  // int(CompareRowKind)
  static constexpr int kXlaKernelRole = Qt::UserRole + 2;  // the XLA kernel the row selects, or empty

  enum Column { kXlaKernel, kXlaKind, kXlensKernel, kXlensKind, kOverlap, kXlaTime, kXlensTime, kRatio, kNote, kColumns };

  explicit ComparePane(QWidget* parent = nullptr);

  // Shows `report` (read from `path`), on its first module.
  void SetReport(std::shared_ptr<const CompareReport> report, const QString& path);
  const CompareReport* report() const { return report_.get(); }

  // Shows module `id` of the report; false (and nothing changes) when the report has no such module.
  // Showing the module already shown keeps the table and its selection.
  bool ShowModule(int64_t id);
  const CompareModule* current_module() const { return module_; }

  // Selects (and scrolls to) the first row that selects XLA's kernel `name` of module `module_id`,
  // without emitting xlaKernelSelected: the window's selection shown here. Clears the selection and
  // returns false when no row does.
  bool SelectXlaKernel(int64_t module_id, const QString& name);

  QTreeWidget* table() const { return table_; }
  QLabel* header() const { return header_; }

  static QColor RowColor(CompareRowKind kind);

 signals:
  // A row naming an XLA kernel was selected: `name` of module `module_id` (the report's id, which
  // is the dump's).
  void xlaKernelSelected(qint64 module_id, const QString& name);

 private:
  void Fill();
  void OnCurrentItemChanged(QTreeWidgetItem* item);

  std::shared_ptr<const CompareReport> report_;
  QString path_;
  const CompareModule* module_ = nullptr;
  QLabel* header_;
  QComboBox* modules_;
  QTreeWidget* table_;
  bool filling_ = false;
};

}  // namespace xlens::viewer
