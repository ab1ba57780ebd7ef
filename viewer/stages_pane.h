// The Stages pane: the dump's TensorFlow graphs with their clustering stages, then its modules
// with every pass in pipeline order (pipeline, changed or not, wall time as a small bar) and the
// kernels. Unchanged passes are greyed; a filter box narrows the list. Activating an entry asks
// the window to show it (stageActivated); the window can select or highlight entries in turn
// (the pass that created a fusion, when a kernel is clicked on the timeline).
#pragma once

#include <QLineEdit>
#include <QTreeWidget>
#include <QWidget>

#include "viewer/dump_model.h"

namespace xlens::viewer {

class StagesPane : public QWidget {
  Q_OBJECT
 public:
  explicit StagesPane(QWidget* parent = nullptr);

  // Fills the list from `model` (kept by the caller for the pane's lifetime).
  void SetModel(const DumpModel* model);

  // Selects the entry (and scrolls to it) without emitting stageActivated.
  void SelectStage(const StageRef& ref);
  // Marks `ref` (bold, with a tinted background) as the one related to the selection; an empty
  // optional clears the mark.
  void HighlightStage(const std::optional<StageRef>& ref);
  // The first entry whose pass (or clustering stage) name is `name`, in `module_id` when >= 0.
  std::optional<StageRef> FindStage(const QString& name, int64_t module_id = -1) const;
  // The entry selected now.
  std::optional<StageRef> CurrentStage() const;
  // The ref of the highlighted entry.
  std::optional<StageRef> HighlightedStage() const { return highlighted_; }

  QTreeWidget* tree() { return tree_; }
  QLineEdit* filter() { return filter_; }
  // Entries shown after filtering (for tests and the status bar).
  int VisibleStageCount() const;

 signals:
  void stageActivated(const xlens::viewer::StageRef& ref);

 private:
  void ApplyFilter(const QString& text);
  QTreeWidgetItem* ItemOf(const StageRef& ref) const;

  const DumpModel* model_ = nullptr;
  QLineEdit* filter_;
  QTreeWidget* tree_;
  std::optional<StageRef> highlighted_;
  bool selecting_ = false;
};

}  // namespace xlens::viewer

Q_DECLARE_METATYPE(xlens::viewer::StageRef)
