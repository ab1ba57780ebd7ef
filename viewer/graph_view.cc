#include "viewer/graph_view.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QRegularExpression>
#include <QScrollBar>
#include <QSettings>
#include <QWheelEvent>
#include <algorithm>
#include <cmath>
#include <set>

#include "viewer/graph_minimap.h"
#include "viewer/layout_service.h"

namespace xlens::viewer {
namespace {

constexpr double kMinScale = 0.01;
constexpr double kMaxScale = 8.0;

QFrame* MakeNote(QWidget* parent, QLabel** label) {
  auto* frame = new QFrame(parent);
  frame->setFrameShape(QFrame::StyledPanel);
  frame->setAutoFillBackground(true);
  frame->setStyleSheet("QFrame { background: #fffde7; border: 1px solid #cbc693; border-radius: 4px; }"
                       "QLabel { border: none; }");
  auto* layout = new QHBoxLayout(frame);
  layout->setContentsMargins(8, 4, 8, 4);
  *label = new QLabel(frame);
  (*label)->setWordWrap(true);
  (*label)->setTextInteractionFlags(Qt::TextSelectableByMouse);
  layout->addWidget(*label, 1);
  frame->hide();
  return frame;
}

// A rough node count of DOT text, for the progress note only.
int EstimateDotNodes(const QString& dot) {
  int count = 0;
  for (QStringView line : QStringView(dot).split(u'\n')) {
    if (line.contains(u'[') && !line.contains(u"->") && !line.trimmed().startsWith(u"node") &&
        !line.trimmed().startsWith(u"edge") && !line.trimmed().startsWith(u"graph")) {
      ++count;
    }
  }
  return count;
}

}  // namespace

GraphView::GraphView(QWidget* parent) : QGraphicsView(parent), scene_(new QGraphicsScene(this)) {
  scene_->setItemIndexMethod(QGraphicsScene::BspTreeIndex);
  setScene(scene_);
  setBackgroundBrush(Qt::white);
  setDragMode(QGraphicsView::ScrollHandDrag);
  setTransformationAnchor(QGraphicsView::AnchorUnderMouse);
  setResizeAnchor(QGraphicsView::AnchorViewCenter);
  // Items keep their halos inside their bounding rects and set every painter attribute they use.
  setOptimizationFlags(QGraphicsView::DontAdjustForAntialiasing | QGraphicsView::DontSavePainterState);
  setViewportUpdateMode(QGraphicsView::SmartViewportUpdate);
  setRenderHint(QPainter::TextAntialiasing);
  setFocusPolicy(Qt::StrongFocus);

  minimap_ = new GraphMinimap(this);

  progress_frame_ = MakeNote(this, &progress_label_);
  cancel_button_ = new QPushButton(tr("Cancel"), progress_frame_);
  progress_frame_->layout()->addWidget(cancel_button_);
  connect(cancel_button_, &QPushButton::clicked, this, &GraphView::CancelLayout);

  scope_frame_ = MakeNote(this, &scope_label_);
  widen_button_ = new QPushButton(tr("Widen"), scope_frame_);
  widen_button_->setToolTip(tr("Show twice as many edges around the selection"));
  show_all_button_ = new QPushButton(tr("Show all"), scope_frame_);
  scope_frame_->layout()->addWidget(widen_button_);
  scope_frame_->layout()->addWidget(show_all_button_);
  connect(widen_button_, &QPushButton::clicked, this, &GraphView::Widen);
  connect(show_all_button_, &QPushButton::clicked, this, &GraphView::ShowWholeGraph);

  search_edit_ = new QLineEdit(this);
  search_edit_->setPlaceholderText(tr("Search (regex): name, opcode, op_name"));
  search_edit_->setClearButtonEnabled(true);
  search_edit_->hide();
  connect(search_edit_, &QLineEdit::returnPressed, this, [this] {
    if (!hits_.empty() && search_edit_->property("searched").toString() == search_edit_->text()) {
      NextHit();
      return;
    }
    search_edit_->setProperty("searched", search_edit_->text());
    int found = Search(search_edit_->text());
    search_edit_->setToolTip(found < 0 ? tr("Invalid regular expression") : tr("%n hit(s); n / N walk them", "", found));
  });

  progress_timer_.setSingleShot(true);
  connect(&progress_timer_, &QTimer::timeout, this, [this] {
    if (pending_ticket_ == 0) return;
    progress_label_->setText(tr("Laying out %L1 nodes...").arg(pending_nodes_));
    progress_frame_->adjustSize();
    progress_frame_->show();
    PlaceOverlays();
  });
  connect(&LayoutService::Instance(), &LayoutService::layoutReady, this, &GraphView::OnLayoutReady);
}

GraphView::~GraphView() {
  if (pending_ticket_ != 0) LayoutService::Instance().Cancel(pending_ticket_);
}

int GraphView::NodeThreshold() {
  bool ok = false;
  int threshold = QSettings().value("graph/node_threshold", 1000).toInt(&ok);
  return ok && threshold > 0 ? threshold : 1000;
}

void GraphView::ShowComputation(std::shared_ptr<const HloOutline> outline, const QString& computation,
                                const QString& focus) {
  bool same = outline_ == outline && computation_ == computation;
  if (outline_ != outline) computation_stack_.clear();
  if (!same) {
    radius_ = 3;
    show_all_ = false;
  }
  outline_ = std::move(outline);
  computation_ = computation;
  focus_ = focus;
  dot_.clear();
  Relayout();
}

void GraphView::ShowDot(const QString& dot) {
  outline_.reset();
  computation_.clear();
  neighbourhood_ = false;
  dot_ = dot.toStdString();
  RequestLayout(dot_, EstimateDotNodes(dot));
}

void GraphView::ShowLayout(std::shared_ptr<const GraphLayout> layout) {
  if (pending_ticket_ != 0) LayoutService::Instance().Cancel(pending_ticket_);
  pending_ticket_ = 0;
  outline_.reset();
  neighbourhood_ = false;
  layout_ = std::move(layout);
  BuildScene();
}

void GraphView::Clear() {
  if (pending_ticket_ != 0) LayoutService::Instance().Cancel(pending_ticket_);
  pending_ticket_ = 0;
  progress_timer_.stop();
  outline_.reset();
  layout_.reset();
  neighbourhood_ = false;
  error_.clear();
  BuildScene();
}

const HloOutlineComputation* GraphView::ShownComputation() const {
  if (!outline_) return nullptr;
  return computation_.isEmpty() ? outline_->entry() : outline_->FindComputation(computation_.toStdString());
}

void GraphView::Relayout() {
  if (!outline_) return;
  const HloOutlineComputation* computation = ShownComputation();
  if (computation == nullptr) {
    ShowError(tr("The module has no computation named '%1'").arg(computation_));
    return;
  }
  int threshold = NodeThreshold();
  int total = CountGraphNodes(*outline_, *computation, false);
  neighbourhood_ = !show_all_ && total > threshold;
  DotOptions options;
  if (neighbourhood_) {
    options.collapse_fusions = true;
    QString focus = !focus_.isEmpty() ? focus_ : selected_;
    options.focus = focus.isEmpty() ? std::string("\x01") : focus.toStdString();  // "\x01": no such name, so the root
    options.radius = radius_;
    // Each Widen doubles the radius and the node budget with it, so widening always shows more.
    options.max_nodes = threshold * std::max(1, radius_ / 3);
  }
  std::string dot = HloComputationToDot(*outline_, *computation, options, &summary_);
  RequestLayout(std::move(dot), summary_.shown_nodes);
}

void GraphView::RequestLayout(std::string dot, int node_count) {
  LayoutService& service = LayoutService::Instance();
  if (pending_ticket_ != 0) service.Cancel(pending_ticket_);
  pending_ticket_ = 0;
  error_.clear();
  if (std::shared_ptr<const GraphLayout> cached = service.Cached(dot)) {
    progress_timer_.stop();
    progress_frame_->hide();
    layout_ = std::move(cached);
    BuildScene();
    emit layoutFinished();
    return;
  }
  pending_nodes_ = node_count;
  pending_ticket_ = service.Request(std::move(dot));
  progress_timer_.start(1000);
}

void GraphView::OnLayoutReady(quint64 ticket, std::shared_ptr<const GraphLayout> layout, QString error) {
  if (ticket != pending_ticket_ || ticket == 0) return;
  pending_ticket_ = 0;
  progress_timer_.stop();
  progress_frame_->hide();
  if (!layout) {
    ShowError(error);
    emit layoutFailed(error);
    return;
  }
  layout_ = std::move(layout);
  BuildScene();
  emit layoutFinished();
}

void GraphView::CancelLayout() {
  if (pending_ticket_ == 0) return;
  LayoutService::Instance().Cancel(pending_ticket_);
  pending_ticket_ = 0;
  progress_timer_.stop();
  progress_frame_->hide();
  ShowError(tr("Layout of %L1 nodes cancelled.").arg(pending_nodes_) +
            (outline_ && !neighbourhood_ ? tr(" Lower graph/node_threshold to open big graphs as neighbourhoods.") : QString()));
}

void GraphView::ShowError(const QString& error) {
  error_ = error;
  layout_.reset();
  BuildScene();
  scope_label_->setText(tr("<span style='color:#b71c1c'>%1</span>").arg(error.toHtmlEscaped()));
  widen_button_->hide();
  show_all_button_->hide();
  scope_frame_->show();
  PlaceOverlays();
}

void GraphView::BuildScene() {
  scene_->clear();
  node_items_.clear();
  cluster_items_.clear();
  node_by_id_.clear();
  node_by_name_.clear();
  cluster_by_id_.clear();
  edge_items_.clear();
  hits_.clear();
  current_hit_ = -1;
  resetTransform();
  setSceneRect(QRectF());  // back to the scene's own rectangle (SelectNode may have grown it)
  if (!layout_) {
    scene_->setSceneRect(QRectF());
    scope_frame_->hide();
    minimap_->Refresh();
    return;
  }
  const GraphLayout& layout = *layout_;
  scene_->setSceneRect(layout.bounds.adjusted(-30, -30, 30, 30));
  for (size_t i = 0; i < layout.clusters.size(); ++i) {
    auto* item = new ClusterItem(&layout.clusters[i]);
    scene_->addItem(item);
    cluster_items_.push_back(item);
    cluster_by_id_.insert(layout.clusters[i].id, static_cast<int>(i));
  }
  for (const GraphEdge& edge : layout.edges) {
    auto* item = new EdgeItem(&edge);
    scene_->addItem(item);
    edge_items_.push_back(item);
  }
  node_items_.reserve(layout.nodes.size());
  for (size_t i = 0; i < layout.nodes.size(); ++i) {
    auto* item = new NodeItem(&layout.nodes[i]);
    scene_->addItem(item);
    node_items_.push_back(item);
    node_by_id_.insert(layout.nodes[i].id, static_cast<int>(i));
    if (!node_by_name_.contains(layout.nodes[i].name)) node_by_name_.insert(layout.nodes[i].name, static_cast<int>(i));
  }
  if (neighbourhood_) {
    int hidden = summary_.total_nodes - summary_.shown_nodes;
    scope_label_->setText(
        tr("Showing %L1 of %L2 nodes (over the %L3-node threshold): the neighbourhood of <b>%4</b> within %5 edges, "
           "fusions collapsed. %L6 nodes hidden; dashed nodes have hidden neighbours.")
            .arg(summary_.shown_nodes)
            .arg(summary_.total_nodes)
            .arg(NodeThreshold())
            .arg(QString::fromStdString(summary_.focus).toHtmlEscaped())
            .arg(radius_)
            .arg(hidden) +
        (layout.note.isEmpty() ? QString() : "<br>" + layout.note.toHtmlEscaped()));
    widen_button_->setVisible(summary_.boundary_nodes > 0);
    show_all_button_->show();
    scope_frame_->show();
  } else if (!layout.note.isEmpty()) {
    // Graphviz did not draw it (too big for it, too slow, or it failed): say so and why.
    scope_label_->setText(layout.note.toHtmlEscaped());
    widen_button_->hide();
    show_all_button_->hide();
    scope_frame_->show();
  } else {
    scope_frame_->hide();
  }
  ApplyMarks();
  ZoomToFit();
  const QString pending_select_copy = pending_select_;
  QString select = !pending_select_.isEmpty() ? pending_select_ : selected_;
  pending_select_.clear();
  if (!select.isEmpty() && (FindNodeItem(select) != nullptr || FindClusterItem(select) != nullptr)) {
    SelectNode(select, select == pending_select_copy);
  }
  minimap_->Refresh();
  PlaceOverlays();
  QString last = search_edit_->property("searched").toString();
  QString pending_hit = pending_hit_;
  pending_hit_.clear();
  if (!last.isEmpty()) {
    // Search again in the new drawing, but stay where the layout put the view.
    CollectHits(last);
    // Walking the hits moved the neighbourhood: carry on from the hit it moved to.
    for (size_t i = 0; i < hits_.size() && !pending_hit.isEmpty(); ++i) {
      if (hits_[i].name != pending_hit) continue;
      if (hits_[i].index >= 0) {
        SetCurrentHit(static_cast<int>(i));
      } else {
        current_hit_ = static_cast<int>(i);
        ApplyMarks();
      }
      break;
    }
  }
}

NodeItem* GraphView::FindNodeItem(const QString& name) const {
  int index = node_by_id_.value(name, -1);
  if (index < 0) index = node_by_name_.value(name, -1);
  return index < 0 ? nullptr : node_items_[static_cast<size_t>(index)];
}

ClusterItem* GraphView::FindClusterItem(const QString& id) const {
  auto it = cluster_by_id_.find(id);
  return it == cluster_by_id_.end() ? nullptr : cluster_items_[static_cast<size_t>(*it)];
}

QString GraphView::NameOfHit(const Hit& hit) const { return hit.name; }

void GraphView::ApplyMarks() {
  if (!layout_) return;
  QSet<int> hit_nodes, hit_clusters;
  for (const Hit& hit : hits_) {
    if (hit.index >= 0) (hit.cluster ? hit_clusters : hit_nodes).insert(hit.index);
  }
  const Hit* current = current_hit_ >= 0 ? &hits_[static_cast<size_t>(current_hit_)] : nullptr;
  for (size_t i = 0; i < node_items_.size(); ++i) {
    const GraphNode& node = layout_->nodes[i];
    BorderRole border = borders_.value(node.name, borders_.value(node.id, BorderRole::kNone));
    node_items_[i]->SetBorder(border);
    bool is_current = node.name == selected_ || node.id == selected_ ||
                      (current != nullptr && !current->cluster && current->index == static_cast<int>(i));
    bool is_highlighted = highlighted_.contains(node.name) || hit_nodes.contains(static_cast<int>(i));
    node_items_[i]->SetMark(is_current ? Mark::kCurrent : is_highlighted ? Mark::kHighlighted : Mark::kNone);
  }
  for (size_t i = 0; i < cluster_items_.size(); ++i) {
    const GraphCluster& cluster = layout_->clusters[i];
    cluster_items_[i]->SetBorder(borders_.value(cluster.id, BorderRole::kNone));
    bool is_current = cluster.id == selected_ ||
                      (current != nullptr && current->cluster && current->index == static_cast<int>(i));
    bool is_highlighted = highlighted_.contains(cluster.id) || hit_clusters.contains(static_cast<int>(i));
    cluster_items_[i]->SetMark(is_current ? Mark::kCurrent : is_highlighted ? Mark::kHighlighted : Mark::kNone);
  }
  // The edges of the selected node are drawn stronger.
  auto is_selected = [&](const QString& id) {
    if (selected_.isEmpty()) return false;
    if (id == selected_) return true;
    int node = node_by_id_.value(id, -1);
    return node >= 0 && layout_->nodes[static_cast<size_t>(node)].name == selected_;
  };
  for (EdgeItem* edge : edge_items_) edge->SetEmphasis(is_selected(edge->edge().from) || is_selected(edge->edge().to));
}

int GraphView::Search(const QString& regex) {
  int found = CollectHits(regex);
  if (found > 0) SetCurrentHit(0);
  return found;
}

int GraphView::CollectHits(const QString& regex) {
  QRegularExpression expression(regex, QRegularExpression::CaseInsensitiveOption);
  if (!expression.isValid()) return -1;
  hits_.clear();
  current_hit_ = -1;
  search_edit_->setProperty("searched", regex);
  if (regex.isEmpty() || !layout_) {
    ApplyMarks();
    return 0;
  }
  if (neighbourhood_ && outline_) {
    SearchOutline(expression);
  } else {
    for (size_t i = 0; i < layout_->nodes.size(); ++i) {
      const GraphNode& node = layout_->nodes[i];
      bool match = expression.match(node.name).hasMatch() || expression.match(node.id).hasMatch() ||
                   (!node.opcode.isEmpty() && expression.match(node.opcode).hasMatch());
      for (const QString& op_name : node.op_names) match = match || expression.match(op_name).hasMatch();
      for (const QString& line : node.label) match = match || expression.match(line).hasMatch();
      if (match) hits_.push_back({false, static_cast<int>(i), node.name, node.name});
    }
    for (size_t i = 0; i < layout_->clusters.size(); ++i) {
      const GraphCluster& cluster = layout_->clusters[i];
      if (expression.match(cluster.id).hasMatch() || expression.match(cluster.title).hasMatch()) {
        hits_.push_back({true, static_cast<int>(i), cluster.id, cluster.id});
      }
    }
    // Top to bottom, so n walks the graph the way it reads.
    auto position = [&](const Hit& hit) {
      QRectF box = hit.cluster ? layout_->clusters[static_cast<size_t>(hit.index)].box
                               : layout_->nodes[static_cast<size_t>(hit.index)].box;
      return std::make_pair(box.top(), box.left());
    };
    std::stable_sort(hits_.begin(), hits_.end(), [&](const Hit& a, const Hit& b) { return position(a) < position(b); });
  }
  ApplyMarks();
  return static_cast<int>(hits_.size());
}

void GraphView::SearchOutline(const QRegularExpression& expression) {
  // The whole computation, fused bodies included, in the module's order: the order stays the same
  // as the neighbourhood moves, so n keeps walking forwards.
  const HloOutlineComputation* computation = ShownComputation();
  if (computation == nullptr) return;
  auto matches = [&](const HloOutlineInstruction& instruction) {
    if (expression.match(QString::fromStdString(instruction.name)).hasMatch() ||
        expression.match(QString::fromStdString(instruction.opcode)).hasMatch()) {
      return true;
    }
    for (const std::string& op_name : instruction.op_names) {
      if (expression.match(QString::fromStdString(op_name)).hasMatch()) return true;
    }
    for (const std::string& line : LabelForInstruction(instruction)) {
      if (expression.match(QString::fromStdString(line)).hasMatch()) return true;
    }
    return false;
  };
  for (const HloOutlineInstruction& top : computation->instructions) {
    QString target = QString::fromStdString(top.name);
    int drawn = node_by_name_.value(target, -1);
    if (matches(top)) hits_.push_back({false, drawn, target, target});
    if (top.opcode != "fusion") continue;
    std::vector<std::string> pending(top.called.rbegin(), top.called.rend());
    std::set<std::string> seen;
    while (!pending.empty()) {
      std::string name = pending.back();
      pending.pop_back();
      if (!seen.insert(name).second) continue;
      const HloOutlineComputation* fused = outline_->FindComputation(name);
      if (fused == nullptr) continue;
      for (const HloOutlineInstruction& inner : fused->instructions) {
        if (matches(inner)) hits_.push_back({false, drawn, QString::fromStdString(inner.name), target});
        if (inner.opcode == "fusion") pending.insert(pending.end(), inner.called.rbegin(), inner.called.rend());
      }
    }
  }
}

QStringList GraphView::hits() const {
  QStringList names;
  for (const Hit& hit : hits_) names << NameOfHit(hit);
  return names;
}

void GraphView::SetCurrentHit(int index) {
  if (hits_.empty()) return;
  int count = static_cast<int>(hits_.size());
  current_hit_ = (index % count + count) % count;
  const Hit hit = hits_[static_cast<size_t>(current_hit_)];
  if (hit.index < 0) {
    // Outside the neighbourhood: move the neighbourhood there; BuildScene carries on from it.
    pending_hit_ = hit.name;
    SelectNode(hit.target, true);
    return;
  }
  ApplyMarks();
  QRectF box = hit.cluster ? layout_->clusters[static_cast<size_t>(hit.index)].box
                           : layout_->nodes[static_cast<size_t>(hit.index)].box;
  centerOn(box.center());
  emit viewChanged();
}

void GraphView::NextHit() { SetCurrentHit(current_hit_ + 1); }
void GraphView::PreviousHit() { SetCurrentHit(current_hit_ - 1); }

bool GraphView::SelectNode(const QString& name, bool centre) {
  QRectF box;
  if (NodeItem* item = FindNodeItem(name)) {
    box = item->node().box;
    selected_ = item->node().name;
  } else if (ClusterItem* cluster = FindClusterItem(name)) {
    box = cluster->cluster().box;
    selected_ = name;
  } else {
    // Not drawn: in neighbourhood mode, grow the neighbourhood around it instead.
    if (outline_ && neighbourhood_ && outline_->FindInstruction(name.toStdString()).second != nullptr) {
      selected_ = name;
      focus_ = name;
      pending_select_ = name;
      Relayout();
      return true;
    }
    return false;
  }
  ApplyMarks();
  if (centre) {
    // A node too small to read is zoomed to a readable size first.
    if (ViewScale() < 0.6) SetViewState(box.center(), 0.8);
    // Let the view scroll past the graph's edge, so a node at the edge can be centred too.
    QRectF visible = mapToScene(viewport()->rect()).boundingRect();
    QRectF needed(box.center() - QPointF(visible.width() / 2, visible.height() / 2), visible.size());
    if (!sceneRect().contains(needed)) setSceneRect(sceneRect().united(needed));
    centerOn(box.center());
    emit viewChanged();
  }
  return true;
}

void GraphView::SetBorders(const QHash<QString, BorderRole>& borders) {
  borders_ = borders;
  ApplyMarks();
  minimap_->Refresh();
}

void GraphView::SetHighlighted(const QSet<QString>& names) {
  highlighted_ = names;
  ApplyMarks();
  minimap_->Refresh();
}

void GraphView::ZoomToFit() {
  if (!layout_ || layout_->nodes.empty()) return;
  QRectF rect = scene_->sceneRect();
  fitInView(rect, Qt::KeepAspectRatio);
  if (transform().m11() > 1.0) {
    resetTransform();
    centerOn(rect.center());
  }
  minimap_->update();
  emit viewChanged();
}

void GraphView::Widen() {
  radius_ *= 2;
  Relayout();
}

void GraphView::ShowWholeGraph() {
  show_all_ = true;
  Relayout();
}

QString GraphView::progress_note() const {
  return progress_frame_->isVisibleTo(this) ? progress_label_->text() : QString();
}

QString GraphView::scope_note() const {
  return scope_frame_->isVisibleTo(this) ? scope_label_->text() : QString();
}

QPointF GraphView::ViewCentre() const { return mapToScene(viewport()->rect().center()); }

double GraphView::ViewScale() const { return transform().m11(); }

void GraphView::SetViewState(const QPointF& centre, double scale) {
  scale = std::clamp(scale, kMinScale, kMaxScale);
  ViewportAnchor anchor = transformationAnchor();
  setTransformationAnchor(QGraphicsView::NoAnchor);
  setTransform(QTransform::fromScale(scale, scale));
  setTransformationAnchor(anchor);
  centerOn(centre);
  minimap_->update();
}

void GraphView::ScaleBy(double factor) {
  double current = ViewScale();
  double target = std::clamp(current * factor, kMinScale, kMaxScale);
  if (current <= 0 || std::abs(target - current) < 1e-9) return;
  scale(target / current, target / current);
  minimap_->update();
  emit viewChanged();
}

void GraphView::keyPressEvent(QKeyEvent* event) {
  const QString text = event->text();
  if (text == "f" || text == "F") {
    ZoomToFit();
  } else if (text == "n") {
    NextHit();
    if (current_hit_ >= 0) emit nodeSelected(NameOfHit(hits_[static_cast<size_t>(current_hit_)]));
  } else if (text == "N") {
    PreviousHit();
    if (current_hit_ >= 0) emit nodeSelected(NameOfHit(hits_[static_cast<size_t>(current_hit_)]));
  } else if (text == "+" || text == "=") {
    ScaleBy(1.25);
  } else if (text == "-") {
    ScaleBy(0.8);
  } else if (text == "/" || event->matches(QKeySequence::Find)) {
    search_edit_->show();
    PlaceOverlays();
    search_edit_->setFocus();
    search_edit_->selectAll();
  } else if (event->key() == Qt::Key_Backspace && !computation_stack_.isEmpty() && outline_) {
    QString back = computation_stack_.takeLast();
    std::shared_ptr<const HloOutline> outline = outline_;
    ShowComputation(outline, back);
    emit computationShown(computation_);
  } else if (event->key() == Qt::Key_Escape) {
    search_edit_->hide();
    search_edit_->setProperty("searched", QString());
    Search(QString());
    setFocus();
  } else {
    QGraphicsView::keyPressEvent(event);
  }
}

void GraphView::wheelEvent(QWheelEvent* event) {
  double steps = event->angleDelta().y() / 120.0;
  if (steps == 0) {
    QGraphicsView::wheelEvent(event);
    return;
  }
  ScaleBy(std::pow(1.2, steps));
  event->accept();
}

void GraphView::mousePressEvent(QMouseEvent* event) {
  press_position_ = event->position().toPoint();
  QGraphicsView::mousePressEvent(event);
}

void GraphView::mouseReleaseEvent(QMouseEvent* event) {
  QGraphicsView::mouseReleaseEvent(event);
  if (event->button() == Qt::LeftButton && (event->position().toPoint() - press_position_).manhattanLength() < 4) {
    SelectItemAt(event->position().toPoint());
  }
}

void GraphView::mouseDoubleClickEvent(QMouseEvent* event) {
  for (QGraphicsItem* item : items(event->position().toPoint())) {
    if (item->type() == kNodeItemType && OpenCalledComputation(static_cast<NodeItem*>(item)->node().name)) {
      event->accept();
      return;
    }
  }
  QGraphicsView::mouseDoubleClickEvent(event);
}

bool GraphView::OpenCalledComputation(const QString& instruction) {
  if (!outline_) return false;
  const HloOutlineInstruction* found = outline_->FindInstruction(instruction.toStdString()).second;
  if (found == nullptr) return false;
  for (const std::string& called : found->called) {
    const HloOutlineComputation* computation = outline_->FindComputation(called);
    if (computation == nullptr || outline_->IsFusedComputation(*computation)) continue;
    computation_stack_.push_back(computation_);
    std::shared_ptr<const HloOutline> outline = outline_;
    ShowComputation(outline, QString::fromStdString(called));
    emit computationShown(computation_);
    return true;
  }
  return false;
}

void GraphView::SelectItemAt(const QPoint& position) {
  QString name;
  for (QGraphicsItem* item : items(position)) {
    if (item->type() == kNodeItemType) {
      name = static_cast<NodeItem*>(item)->node().name;
      break;
    }
    if (item->type() == kClusterItemType && name.isEmpty()) name = static_cast<ClusterItem*>(item)->cluster().id;
  }
  if (name.isEmpty()) return;
  SelectNode(name, false);
  emit nodeSelected(name);
}

void GraphView::resizeEvent(QResizeEvent* event) {
  QGraphicsView::resizeEvent(event);
  PlaceOverlays();
}

void GraphView::scrollContentsBy(int dx, int dy) {
  QGraphicsView::scrollContentsBy(dx, dy);
  minimap_->update();
  emit viewChanged();
}

void GraphView::PlaceOverlays() {
  QRect area = viewport()->geometry();
  const int margin = 8;
  if (minimap_->isVisible()) {
    minimap_->move(area.right() - minimap_->width() - margin, area.bottom() - minimap_->height() - margin);
    minimap_->raise();
  }
  int note_width = std::min(area.width() - 2 * margin, 640);
  if (scope_frame_->isVisible()) {
    // The label wraps: size the note to the height its text needs at this width.
    int width = std::max(note_width, 200);
    scope_frame_->setFixedWidth(width);
    int height = scope_frame_->layout()->hasHeightForWidth() ? scope_frame_->layout()->heightForWidth(width)
                                                             : scope_frame_->sizeHint().height();
    scope_frame_->setFixedHeight(std::max(height + 6, scope_frame_->minimumSizeHint().height()));
    scope_frame_->move(area.left() + margin, area.top() + margin);
    scope_frame_->raise();
  }
  if (progress_frame_->isVisible()) {
    progress_frame_->adjustSize();
    progress_frame_->move(area.left() + (area.width() - progress_frame_->width()) / 2,
                          area.top() + (area.height() - progress_frame_->height()) / 2);
    progress_frame_->raise();
  }
  if (search_edit_->isVisible()) {
    search_edit_->setFixedWidth(std::min(320, area.width() - 2 * margin));
    search_edit_->move(area.right() - search_edit_->width() - margin, area.top() + margin);
    search_edit_->raise();
  }
}

}  // namespace xlens::viewer
