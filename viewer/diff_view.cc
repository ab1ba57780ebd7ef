#include "viewer/diff_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QVBoxLayout>

namespace xlens::viewer {
namespace {

QString Swatch(BorderRole role, const QString& text) {
  return QString("<span style='color:%1'>&#9632;</span>&nbsp;%2").arg(BorderColor(role).name(), text.toHtmlEscaped());
}

}  // namespace

DiffView::DiffView(QWidget* parent) : QWidget(parent) {
  before_ = new GraphView(this);
  after_ = new GraphView(this);
  before_title_ = new QLabel(this);
  after_title_ = new QLabel(this);
  summary_ = new QLabel(this);
  summary_->setTextFormat(Qt::RichText);
  for (QLabel* title : {before_title_, after_title_}) {
    title->setTextInteractionFlags(Qt::TextSelectableByMouse);
    title->setStyleSheet("font-weight: bold");
  }
  auto* left = new QWidget(this);
  auto* left_layout = new QVBoxLayout(left);
  left_layout->setContentsMargins(0, 0, 0, 0);
  left_layout->addWidget(before_title_);
  left_layout->addWidget(before_, 1);
  auto* right = new QWidget(this);
  auto* right_layout = new QVBoxLayout(right);
  right_layout->setContentsMargins(0, 0, 0, 0);
  right_layout->addWidget(after_title_);
  right_layout->addWidget(after_, 1);
  auto* splitter = new QSplitter(Qt::Horizontal, this);
  splitter->addWidget(left);
  splitter->addWidget(right);
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->addWidget(summary_);
  layout->addWidget(splitter, 1);

  connect(before_, &GraphView::viewChanged, this, [this] { Follow(before_, after_); });
  connect(after_, &GraphView::viewChanged, this, [this] { Follow(after_, before_); });
  // The side that finishes laying out last takes the other's view, so both show the same place.
  connect(after_, &GraphView::layoutFinished, this, [this] {
    if (before_->graph_layout() != nullptr) Follow(before_, after_);
  });
  connect(before_, &GraphView::layoutFinished, this, [this] {
    if (after_->graph_layout() != nullptr) Follow(after_, before_);
  });
  connect(before_, &GraphView::nodeSelected, this, [this](const QString& name) {
    // An instruction fused away is found on the right inside its fusion, or as the fusion.
    if (!after_->SelectNode(name, true)) {
      auto fused = diff_.fused_into.find(name.toStdString());
      if (fused != diff_.fused_into.end()) after_->SelectNode(QString::fromStdString(fused->second), true);
    }
    emit nodeSelected(name);
  });
  connect(after_, &GraphView::nodeSelected, this, [this](const QString& name) {
    before_->SelectNode(name, true);
    emit nodeSelected(name);
  });
}

void DiffView::Follow(GraphView* from, GraphView* to) {
  if (syncing_) return;
  syncing_ = true;
  to->SetViewState(from->ViewCentre(), from->ViewScale());
  syncing_ = false;
}

QHash<QString, BorderRole> DiffView::BeforeBorders(const StageDiff& diff) {
  QHash<QString, BorderRole> borders;
  for (const std::string& name : diff.removed) borders.insert(QString::fromStdString(name), BorderRole::kRemoved);
  for (const auto& [name, fusion] : diff.fused_into) borders.insert(QString::fromStdString(name), BorderRole::kFusedInto);
  return borders;
}

QHash<QString, BorderRole> DiffView::AfterBorders(const StageDiff& diff) {
  QHash<QString, BorderRole> borders;
  for (const auto& [name, fusion] : diff.fused_into) {
    borders.insert(QString::fromStdString(name), BorderRole::kFusedInto);
    borders.insert(QString::fromStdString(fusion), BorderRole::kFusedInto);
  }
  // A fusion that is new or changed says so; the blue of its members still shows what it took in.
  for (const std::string& name : diff.added) borders.insert(QString::fromStdString(name), BorderRole::kAdded);
  for (const std::string& name : diff.modified) borders.insert(QString::fromStdString(name), BorderRole::kModified);
  return borders;
}

void DiffView::ShowStages(std::shared_ptr<const HloOutline> before, std::shared_ptr<const HloOutline> after,
                          const QString& before_title, const QString& after_title, const QString& computation) {
  before_title_->setText(before_title);
  after_title_->setText(after_title);
  before_title_->setVisible(!before_title.isEmpty());
  after_title_->setVisible(!after_title.isEmpty());
  StageDiff diff;
  if (before && after) diff = ComputeStageDiff(*before, *after);
  SetDiff(diff);
  if (before) before_->ShowComputation(before, computation); else before_->Clear();
  if (after) after_->ShowComputation(after, computation); else after_->Clear();
}

void DiffView::SetDiff(const StageDiff& diff) {
  diff_ = diff;
  before_->SetBorders(BeforeBorders(diff_));
  after_->SetBorders(AfterBorders(diff_));
  UpdateSummary();
}

void DiffView::UpdateSummary() {
  QStringList parts;
  parts << Swatch(BorderRole::kRemoved, tr("%n removed", "", static_cast<int>(diff_.removed.size())))
        << Swatch(BorderRole::kAdded, tr("%n added", "", static_cast<int>(diff_.added.size())))
        << Swatch(BorderRole::kModified, tr("%n modified", "", static_cast<int>(diff_.modified.size())))
        << Swatch(BorderRole::kFusedInto, tr("%n fused", "", static_cast<int>(diff_.fused_into.size())));
  summary_->setText(parts.join("&nbsp;&nbsp;&nbsp;"));
}

}  // namespace xlens::viewer
