// The viewer's one window: Stages (left), the graph of the selected stage or its diff (centre),
// Details (right), the timeline (bottom), in splitters whose sizes QSettings remembers.
//
// Selection is linked both ways. A kernel span clicked on the timeline selects and centres its
// fusion node (switching to a stage of its module that holds it), highlights the pass that
// created it and shows its details; a node clicked in the graph lights up all its kernel spans
// on the timeline with their count, total and mean. A node of a clustering-stage graph links to
// the HLO instructions whose op_names carry its name.
//
// Keys (besides the graph's f, n/N and the timeline's W/A/S/D): d toggles diff mode, ] and [ go
// to the next/previous pass that changed the module, . and , to the next/previous fusion
// decision, / or Ctrl+F searches the graph, Ctrl+O opens a dump.
#pragma once

#include <QLabel>
#include <QLineEdit>
#include <QMainWindow>
#include <QPointer>
#include <QThread>
#include <QSplitter>
#include <QStackedWidget>
#include <map>
#include <memory>
#include <optional>

#include "viewer/compare_pane.h"
#include "viewer/details_pane.h"
#include "viewer/dump_model.h"
#include "viewer/hlo_outline.h"
#include "viewer/source_opener.h"
#include "viewer/stages_pane.h"
#include "viewer/trace_model.h"

namespace xlens::viewer {

class GraphView;
class DiffView;
class TimelineView;

class MainWindow : public QMainWindow {
  Q_OBJECT
 public:
  explicit MainWindow(QWidget* parent = nullptr);
  ~MainWindow() override;

  // Opens a dump directory (and a trace; empty: the directory's own). Problems are shown in the
  // window and returned, one line each.
  std::vector<std::string> OpenDump(const QString& directory, const QString& trace = QString());
  // Opens a trace alone (no dump), or replaces the dump's trace.
  void OpenTrace(const QString& path);
  // Shows an `xlens compare --json` report (read from `path`) in the Compare pane under the
  // graph; the pane follows the module shown, and selecting one of its XLA kernels selects it here.
  void SetCompareReport(std::shared_ptr<const CompareReport> report, const QString& path);

  // The states the command line selects. Each returns false, with a message in the status bar
  // and in `error`, when what it names is not in the dump.
  bool SelectModule(int64_t module_id, std::string* error = nullptr);
  bool SelectStageByName(const QString& name, std::string* error = nullptr);
  bool SelectByName(const QString& name, std::string* error = nullptr);
  void SetDiffMode(bool on);
  bool diff_mode() const { return diff_mode_; }

  // Steps through the passes that changed the module (+1 next, -1 previous); false at the end.
  bool StepChangedPass(int direction);
  // Steps through the fusion decisions of the module; false at the end.
  bool StepFusionDecision(int direction);

  // True while a graph layout or the trace is still being prepared (the screenshot waits).
  bool Busy() const;
  // Waits (turning the event loop) until !Busy() or `timeout_ms`; false on timeout.
  bool WaitUntilIdle(int timeout_ms);

  // How a source line of the Details pane is opened (LaunchEditor unless replaced; tests pass
  // their own, so nothing is launched).
  void SetSourceOpener(SourceOpener opener) { source_opener_ = std::move(opener); }

  // For tests and the screenshot.
  const DumpModel* model() const { return model_.get(); }
  const TraceModel* trace() const { return trace_.get(); }
  StagesPane* stages() const { return stages_; }
  GraphView* graph() const { return graph_; }
  DiffView* diff() const { return diff_; }
  DetailsPane* details() const { return details_; }
  TimelineView* timeline() const { return timeline_; }
  ComparePane* compare() const { return compare_; }
  std::optional<StageRef> current_stage() const { return current_; }
  const QString& selected_node() const { return selected_node_; }
  // The outline of the stage shown (nullptr for a clustering stage or none).
  const HloOutline* current_outline() const { return outline_.get(); }
  // What the last selection lit up on the timeline.
  const SpanStats& highlighted_stats() const { return highlighted_stats_; }
  // The messages shown in the window's problem banner.
  QStringList Problems() const { return problems_; }

 protected:
  void closeEvent(QCloseEvent* event) override;

 private:
  void BuildUi();
  void BuildActions();
  void ShowStage(const StageRef& ref);
  // A pass or a module file: its HLO drawn (or, in diff mode, beside the stage before it).
  void ShowHloStage(const ManifestModule& module, const StageRef& ref);
  void ShowGraphStage(int graph_index, int stage_index);
  void OnNodeSelected(const QString& name);
  void OnSpanSelected(qint64 span_id);
  void OnDetailsLink(const QString& link);
  // A kernel XLA made, selected in the Compare pane: selected (graph, timeline, details) as a
  // kernel of the kernels list is, when the open dump has its module; else said in the status bar.
  void SelectXlaKernel(int64_t module_id, const QString& name);
  // A source link: the file found (as named, else beside the working directory or the dump) and
  // opened at its line; a file that is not there is said in the status bar.
  void OnSourceRequested(const QString& file, qint64 line, qint64 column);
  void ShowInstructionDetails(const ManifestModule& module, const QString& name);
  // Selects `instruction` of `module` in a stage that holds it: the current stage when it does,
  // else the module's optimized stage.
  void RevealInstruction(const ManifestModule& module, const QString& instruction);
  // Selects (and centres) `name` in the graph, or on both sides in diff mode.
  void SelectInView(const QString& name);
  void HighlightSpansOf(const ManifestModule& module, const QString& instruction);
  // The module as compiled in Details: its numbers and its kernels' times.
  void ShowModuleDetails(const ManifestModule& module);
  // Brings the lit spans into view when they are out of it or too thin to see.
  void RevealHighlightedSpans();
  void AddProblem(const QString& problem);
  void UpdateTitle();
  void RestoreSettings();
  void SaveSettings();
  // The parsed HLO of a dump file (cached); nullptr with a problem recorded when unreadable.
  std::shared_ptr<const HloOutline> OutlineOf(const std::string& file);
  // The memory bandwidth a kernel's GB/s is compared with: the trace's own record of it when it has
  // one (peak_bandwidth_gbps), else this machine's copy bandwidth, measured once.
  double PeakBandwidthGBps() const;

  std::unique_ptr<DumpModel> model_;
  SourceOpener source_opener_ = LaunchEditor;
  std::shared_ptr<const TraceModel> trace_;
  bool trace_loading_ = false;
  // The thread reading the trace; the window waits for it before it goes, so the reader never
  // posts its result to a window that is gone.
  QPointer<QThread> trace_reader_;
  QString trace_path_;

  StagesPane* stages_ = nullptr;
  QStackedWidget* centre_ = nullptr;
  GraphView* graph_ = nullptr;
  DiffView* diff_ = nullptr;
  DetailsPane* details_ = nullptr;
  TimelineView* timeline_ = nullptr;
  ComparePane* compare_ = nullptr;
  QLabel* banner_ = nullptr;
  QLabel* stage_title_ = nullptr;
  QLineEdit* graph_search_ = nullptr;
  QLineEdit* timeline_search_ = nullptr;
  QSplitter* vertical_ = nullptr;
  QSplitter* horizontal_ = nullptr;

  std::optional<StageRef> current_;
  std::shared_ptr<const HloOutline> outline_;         // the stage shown (after the pass)
  std::shared_ptr<const HloOutline> before_outline_;  // in diff mode, before it
  QString shown_computation_;
  QString selected_node_;
  SpanStats highlighted_stats_;
  bool diff_mode_ = false;
  int decision_index_ = -1;
  QStringList problems_;
  std::map<std::string, std::shared_ptr<const HloOutline>> outlines_;
};

}  // namespace xlens::viewer
