// An HLO computation (or any DOT graph) drawn as Graphviz lays it out, in XLA's dumper colours,
// with the navigation people expect of a graph viewer: drag to pan, wheel to zoom at the cursor,
// `f` to fit, a minimap to jump, a regex search over names, opcodes and op_names walked with
// n / N, click to select. Layout runs on LayoutService's thread; past a second a note offers to
// cancel it. A computation over the node threshold (QSettings "graph/node_threshold", default
// 1000) opens as the neighbourhood of the selection with its fusions collapsed, and a note says
// what is hidden and offers to widen it.
#pragma once

#include <QGraphicsView>
#include <QHash>
#include <QSet>
#include <QString>
#include <QTimer>
#include <memory>
#include <vector>

#include "viewer/graph_items.h"
#include "viewer/graph_layout.h"
#include "viewer/hlo_outline.h"

class QLabel;
class QRegularExpression;
class QLineEdit;
class QPushButton;
class QFrame;

namespace xlens::viewer {

class GraphMinimap;

class GraphView : public QGraphicsView {
  Q_OBJECT
 public:
  explicit GraphView(QWidget* parent = nullptr);
  ~GraphView() override;

  // Shows a computation of `outline` (the entry one when `computation` is empty). Over the node
  // threshold, shows the neighbourhood of `focus` (else the selection, else the root).
  void ShowComputation(std::shared_ptr<const HloOutline> outline, const QString& computation = {},
                       const QString& focus = {});
  // Shows a graph written as DOT (the clustering stages' .dot files).
  void ShowDot(const QString& dot);
  // Shows a graph already laid out.
  void ShowLayout(std::shared_ptr<const GraphLayout> layout);
  // Empties the view.
  void Clear();

  // Marks every node (and fusion cluster) whose name, opcode, op_name or label matches the
  // regular expression (case insensitive) and makes the first one current. Returns the number
  // of hits, or -1 for an invalid expression.
  int Search(const QString& regex);
  // Makes the next (previous) hit current and centres it; wraps around.
  void NextHit();
  void PreviousHit();
  // The names of the hits, in scene order (top to bottom), and the current one's index (-1).
  QStringList hits() const;
  int current_hit() const { return current_hit_; }

  // Selects the node (or fusion cluster) with this name and, if `centre`, centres it. In
  // neighbourhood mode a node outside the shown part re-centres the neighbourhood on it. Returns
  // false when no such node exists. Does not emit nodeSelected.
  bool SelectNode(const QString& name, bool centre = true);
  QString selected() const { return selected_; }
  // The computation shown (empty for the entry one, or for a DOT graph).
  QString computation() const { return computation_; }
  // Opens the computation `instruction` calls (not a fused one: fusions are drawn inline), as a
  // double click does; false when it calls none.
  bool OpenCalledComputation(const QString& instruction);

  // Diff borders by node name (and fusion cluster name); replaces the previous set.
  void SetBorders(const QHash<QString, BorderRole>& borders);
  // Highlights these node names (e.g. the instructions of a kernel); replaces the previous set.
  void SetHighlighted(const QSet<QString>& names);
  // Zooms so the whole graph fits (never past 1:1).
  void ZoomToFit();

  // Neighbourhood mode: on, its radius, and widening it (twice the radius; Show all lifts it).
  bool neighbourhood_mode() const { return neighbourhood_; }
  int radius() const { return radius_; }
  void Widen();
  void ShowWholeGraph();
  // The node threshold from QSettings ("graph/node_threshold", default 1000).
  static int NodeThreshold();

  // What is shown, for the window and tests.
  const GraphLayout* graph_layout() const { return layout_.get(); }
  NodeItem* FindNodeItem(const QString& name) const;
  ClusterItem* FindClusterItem(const QString& id) const;
  bool layout_pending() const { return pending_ticket_ != 0; }
  QString progress_note() const;  // the text of the visible layout-in-progress note, or empty
  QString scope_note() const;     // the text of the visible neighbourhood note, or empty
  QString error() const { return error_; }
  QPushButton* cancel_button() const { return cancel_button_; }
  QPushButton* widen_button() const { return widen_button_; }
  GraphMinimap* minimap() const { return minimap_; }

  // The view's centre (scene coordinates) and scale, to keep two views in step.
  QPointF ViewCentre() const;
  double ViewScale() const;
  void SetViewState(const QPointF& centre, double scale);

 signals:
  // The user clicked a node (or a fusion cluster's title area).
  void nodeSelected(QString name);
  // A layout was drawn; failed, with the reason.
  void layoutFinished();
  void layoutFailed(QString error);
  // The visible part changed (pan or zoom).
  void viewChanged();
  // The view switched to another computation of the module (double click on a while, call,
  // conditional or reduce opens the computation it calls; Backspace goes back).
  void computationShown(QString computation);

 protected:
  void keyPressEvent(QKeyEvent* event) override;
  void wheelEvent(QWheelEvent* event) override;
  void mousePressEvent(QMouseEvent* event) override;
  void mouseReleaseEvent(QMouseEvent* event) override;
  void mouseDoubleClickEvent(QMouseEvent* event) override;
  void resizeEvent(QResizeEvent* event) override;
  void scrollContentsBy(int dx, int dy) override;

 private:
  // A search hit: a drawn node or cluster (index >= 0), or in neighbourhood mode an instruction
  // outside the drawn part (index -1), reached by re-centring the neighbourhood on `target` (the
  // instruction itself, or the collapsed fusion holding it).
  struct Hit {
    bool cluster = false;
    int index = -1;
    QString name, target;
  };
  void Relayout();
  const HloOutlineComputation* ShownComputation() const;
  void SearchOutline(const QRegularExpression& expression);
  int CollectHits(const QString& regex);  // finds and marks the hits, moves nothing
  void RequestLayout(std::string dot, int node_count);
  void OnLayoutReady(quint64 ticket, std::shared_ptr<const GraphLayout> layout, QString error);
  void BuildScene();
  void ApplyMarks();
  void CancelLayout();
  void ShowError(const QString& error);
  void PlaceOverlays();
  void ScaleBy(double factor);
  void SetCurrentHit(int index);
  void SelectItemAt(const QPoint& position);
  QString NameOfHit(const Hit& hit) const;

  // What is shown.
  std::shared_ptr<const HloOutline> outline_;
  QString computation_;
  QStringList computation_stack_;  // the computations double clicks came from
  QString focus_;
  std::string dot_;  // the DOT of a foreign graph (ShowDot)
  bool neighbourhood_ = false;
  bool show_all_ = false;
  int radius_ = 3;
  DotSummary summary_;
  std::shared_ptr<const GraphLayout> layout_;
  quint64 pending_ticket_ = 0;
  int pending_nodes_ = 0;
  QString error_;

  // The items, parallel to the layout's vectors.
  QGraphicsScene* scene_;
  std::vector<NodeItem*> node_items_;
  std::vector<ClusterItem*> cluster_items_;
  QHash<QString, int> node_by_id_;
  QHash<QString, int> node_by_name_;
  QHash<QString, int> cluster_by_id_;
  std::vector<EdgeItem*> edge_items_;

  // Marks.
  QString selected_;
  QHash<QString, BorderRole> borders_;
  QSet<QString> highlighted_;
  std::vector<Hit> hits_;
  int current_hit_ = -1;
  QString pending_select_;
  QString pending_hit_;  // the hidden hit a re-centred neighbourhood is being laid out for

  // Overlays.
  GraphMinimap* minimap_;
  QFrame* progress_frame_;
  QLabel* progress_label_;
  QPushButton* cancel_button_;
  QFrame* scope_frame_;
  QLabel* scope_label_;
  QPushButton* widen_button_;
  QPushButton* show_all_button_;
  QLineEdit* search_edit_;
  QTimer progress_timer_;
  QPoint press_position_;
};

}  // namespace xlens::viewer
