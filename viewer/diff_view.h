// Two stages of a module side by side, before | after a pass, panned and zoomed together, with
// what the pass did drawn as borders: removed red (left), added green, modified amber (right),
// fused-into blue (the instruction on the left, and the same instruction inside its fusion on
// the right). Selecting a node in one side selects it in the other.
#pragma once

#include <QHash>
#include <QWidget>
#include <memory>

#include "viewer/graph_style.h"
#include "viewer/graph_view.h"
#include "viewer/hlo_outline.h"
#include "viewer/stage_diff.h"

class QLabel;

namespace xlens::viewer {

class DiffView : public QWidget {
  Q_OBJECT
 public:
  explicit DiffView(QWidget* parent = nullptr);

  // Shows `before` and `after` (their entry computations, or `computation` in each) with the
  // borders of their StageDiff (computed here). Titles name the stages above each side.
  void ShowStages(std::shared_ptr<const HloOutline> before, std::shared_ptr<const HloOutline> after,
                  const QString& before_title = {}, const QString& after_title = {}, const QString& computation = {});
  // Replaces the borders with those of `diff` (as recorded in the manifest, say).
  void SetDiff(const StageDiff& diff);
  const StageDiff& diff() const { return diff_; }

  GraphView* before_view() const { return before_; }
  GraphView* after_view() const { return after_; }

  // The borders each side draws for a diff.
  static QHash<QString, BorderRole> BeforeBorders(const StageDiff& diff);
  static QHash<QString, BorderRole> AfterBorders(const StageDiff& diff);

 signals:
  // The user clicked a node on either side.
  void nodeSelected(QString name);

 private:
  void Follow(GraphView* from, GraphView* to);
  void UpdateSummary();

  GraphView* before_;
  GraphView* after_;
  QLabel* before_title_;
  QLabel* after_title_;
  QLabel* summary_;
  StageDiff diff_;
  bool syncing_ = false;
};

}  // namespace xlens::viewer
