#include "viewer/stages_pane.h"

#include <QHeaderView>
#include <QPainter>
#include <QRegularExpression>
#include <QStyledItemDelegate>
#include <QVBoxLayout>
#include <algorithm>

namespace xlens::viewer {
namespace {

constexpr int kRefRole = Qt::UserRole + 1;
constexpr int kFractionRole = Qt::UserRole + 2;  // wall time / the module's slowest pass

// Draws the wall-time column as a small bar under the number, so the slow passes stand out.
class WallTimeDelegate : public QStyledItemDelegate {
 public:
  using QStyledItemDelegate::QStyledItemDelegate;
  void paint(QPainter* painter, const QStyleOptionViewItem& option, const QModelIndex& index) const override {
    QVariant fraction = index.data(kFractionRole);
    if (fraction.isValid()) {
      QRect bar = option.rect.adjusted(2, option.rect.height() - 5, -2, -2);
      bar.setWidth(std::max(1, static_cast<int>(bar.width() * fraction.toDouble())));
      painter->fillRect(bar, QColor(66, 133, 244, 160));
    }
    QStyledItemDelegate::paint(painter, option, index);
  }
};

QString FormatWall(int64_t ns) {
  if (ns >= 1'000'000) return QString::number(ns / 1e6, 'f', 1) + " ms";
  if (ns >= 1'000) return QString::number(ns / 1e3, 'f', 0) + " µs";
  return QString::number(ns) + " ns";
}

bool SameRef(const StageRef& a, const StageRef& b) { return a == b; }

}  // namespace

StagesPane::StagesPane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  filter_ = new QLineEdit(this);
  filter_->setPlaceholderText("Filter stages (regex)");
  filter_->setClearButtonEnabled(true);
  tree_ = new QTreeWidget(this);
  tree_->setColumnCount(2);
  tree_->setHeaderLabels({"Stage", "Wall"});
  tree_->header()->setStretchLastSection(false);
  tree_->header()->setSectionResizeMode(0, QHeaderView::Stretch);
  tree_->header()->setSectionResizeMode(1, QHeaderView::Fixed);
  tree_->header()->resizeSection(1, 70);
  tree_->setItemDelegateForColumn(1, new WallTimeDelegate(tree_));
  tree_->setUniformRowHeights(true);
  layout->addWidget(filter_);
  layout->addWidget(tree_);
  connect(filter_, &QLineEdit::textChanged, this, &StagesPane::ApplyFilter);
  connect(tree_, &QTreeWidget::currentItemChanged, this, [this](QTreeWidgetItem* item) {
    if (selecting_ || item == nullptr) return;
    QVariant ref = item->data(0, kRefRole);
    if (ref.isValid()) emit stageActivated(ref.value<StageRef>());
  });
}

void StagesPane::SetModel(const DumpModel* model) {
  model_ = model;
  highlighted_.reset();
  tree_->clear();
  if (model == nullptr) return;
  const Manifest& manifest = model->manifest();
  QFont bold = tree_->font();
  bold.setBold(true);

  for (int g = 0; g < static_cast<int>(manifest.graphs.size()); ++g) {
    const ManifestGraph& graph = manifest.graphs[g];
    auto* top = new QTreeWidgetItem(tree_, {QString("graph %1: %2 (%3 clusters)")
                                                .arg(graph.id)
                                                .arg(QString::fromStdString(graph.name))
                                                .arg(graph.clusters.size())});
    top->setFont(0, bold);
    for (int s = 0; s < static_cast<int>(graph.stages.size()); ++s) {
      auto* item = new QTreeWidgetItem(top, {QString::fromStdString(graph.stages[s].name), ""});
      item->setData(0, kRefRole, QVariant::fromValue(StageRef{StageRef::Kind::kGraphStage, 0, g, s}));
      item->setToolTip(0, QString("TensorFlow clustering stage %1").arg(QString::fromStdString(graph.stages[s].name)));
    }
    top->setExpanded(true);
  }

  for (const ManifestModule& module : manifest.modules) {
    auto* top = new QTreeWidgetItem(tree_, {QString("module_%1 %2")
                                                .arg(module.id, 4, 10, QChar('0'))
                                                .arg(QString::fromStdString(module.name))});
    top->setFont(0, bold);
    top->setToolTip(0, QString::fromStdString(module.name));
    auto add_module_file = [&](int file, const char* label, const char* tip) {
      if (file < 0) return;
      auto* item = new QTreeWidgetItem(top, {label, ""});
      item->setData(0, kRefRole, QVariant::fromValue(StageRef{StageRef::Kind::kModuleFile, module.id, -1, file}));
      item->setToolTip(0, QString("%1\n%2").arg(tip, QString::fromStdString(module.files[file])));
      QFont italic = item->font(0);
      italic.setItalic(true);
      item->setFont(0, italic);
    };
    add_module_file(DumpModel::BeforeOptimizationsFile(module), "before_optimizations",
                    "The module as the compiler received it");
    int64_t slowest = 1;
    for (const ManifestStage& stage : module.stages) slowest = std::max(slowest, stage.wall_ns);
    for (int s = 0; s < static_cast<int>(module.stages.size()); ++s) {
      const ManifestStage& stage = module.stages[s];
      QString label = QString("%1  %2").arg(stage.step, 4, 10, QChar('0')).arg(QString::fromStdString(stage.pass));
      auto* item = new QTreeWidgetItem(top, {label, FormatWall(stage.wall_ns)});
      item->setData(0, kRefRole, QVariant::fromValue(StageRef{StageRef::Kind::kPass, module.id, -1, s}));
      item->setData(1, kFractionRole, static_cast<double>(stage.wall_ns) / slowest);
      item->setTextAlignment(1, Qt::AlignRight | Qt::AlignVCenter);
      QString changes;
      if (stage.changed) {
        const ManifestStageChanges& c = stage.changes;
        changes = QString("\n%1 added, %2 removed, %3 modified, %4 fused")
                      .arg(c.added.size())
                      .arg(c.removed.size())
                      .arg(c.modified.size())
                      .arg(c.fused_into.size());
      }
      item->setToolTip(0, QString("%1 / %2: %3%4")
                              .arg(QString::fromStdString(stage.pipeline), QString::fromStdString(stage.pass),
                                   stage.changed ? "changed the module" : "no change", changes));
      if (!stage.changed) {
        item->setForeground(0, QColor(150, 150, 150));
        item->setForeground(1, QColor(150, 150, 150));
      }
      if (DumpModel::HloFileOf(stage).empty()) item->setToolTip(1, "no dump of this stage");
    }
    add_module_file(DumpModel::AfterOptimizationsFile(module), "after_optimizations",
                    "The module as compiled: what the kernels and the trace name");
    if (!module.kernels.empty()) {
      auto* kernels = new QTreeWidgetItem(top, {QString("kernels (%1)").arg(module.kernels.size())});
      for (int k = 0; k < static_cast<int>(module.kernels.size()); ++k) {
        const ManifestKernel& kernel = module.kernels[k];
        QString label = QString::fromStdString(kernel.hlo_instruction.empty() ? kernel.name : kernel.hlo_instruction);
        if (!kernel.fusion_kind.empty()) label += "  " + QString::fromStdString(kernel.fusion_kind);
        auto* item = new QTreeWidgetItem(kernels, {label, ""});
        item->setData(0, kRefRole, QVariant::fromValue(StageRef{StageRef::Kind::kKernel, module.id, -1, k}));
        item->setToolTip(0, QString::fromStdString(kernel.name + (kernel.launch.empty() ? "" : "\n" + kernel.launch)));
      }
    }
    top->setExpanded(true);
  }
  ApplyFilter(filter_->text());
}

void StagesPane::ApplyFilter(const QString& text) {
  QRegularExpression pattern(text, QRegularExpression::CaseInsensitiveOption);
  const bool valid = pattern.isValid();
  filter_->setStyleSheet(valid ? "" : "QLineEdit { background: #ffebee; }");
  for (int t = 0; t < tree_->topLevelItemCount(); ++t) {
    QTreeWidgetItem* top = tree_->topLevelItem(t);
    std::function<bool(QTreeWidgetItem*)> apply = [&](QTreeWidgetItem* item) {
      bool any = false;
      for (int c = 0; c < item->childCount(); ++c) any |= apply(item->child(c));
      bool self = text.isEmpty() || !valid || item->text(0).contains(pattern);
      bool shown = item->childCount() == 0 ? self : (any || (self && !text.isEmpty()));
      item->setHidden(!shown && item != top);
      return shown;
    };
    bool shown = apply(top);
    top->setHidden(!shown && !text.isEmpty());
  }
}

int StagesPane::VisibleStageCount() const {
  int count = 0;
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    if ((*it)->data(0, kRefRole).isValid() && !(*it)->isHidden() && !(*it)->parent()->isHidden()) ++count;
  }
  return count;
}

QTreeWidgetItem* StagesPane::ItemOf(const StageRef& ref) const {
  for (QTreeWidgetItemIterator it(tree_); *it; ++it) {
    QVariant data = (*it)->data(0, kRefRole);
    if (data.isValid() && SameRef(data.value<StageRef>(), ref)) return *it;
  }
  return nullptr;
}

void StagesPane::SelectStage(const StageRef& ref) {
  QTreeWidgetItem* item = ItemOf(ref);
  if (item == nullptr) return;
  selecting_ = true;
  if (item->isHidden()) filter_->clear();
  tree_->setCurrentItem(item);
  tree_->scrollToItem(item, QAbstractItemView::PositionAtCenter);
  selecting_ = false;
}

void StagesPane::HighlightStage(const std::optional<StageRef>& ref) {
  if (highlighted_) {
    if (QTreeWidgetItem* old = ItemOf(*highlighted_)) {
      old->setBackground(0, QBrush());
      QFont font = old->font(0);
      font.setBold(false);
      old->setFont(0, font);
    }
  }
  highlighted_ = ref;
  if (!ref) return;
  if (QTreeWidgetItem* item = ItemOf(*ref)) {
    item->setBackground(0, QColor(255, 243, 205));
    QFont font = item->font(0);
    font.setBold(true);
    item->setFont(0, font);
    tree_->scrollToItem(item);
  }
}

std::optional<StageRef> StagesPane::FindStage(const QString& name, int64_t module_id) const {
  if (model_ == nullptr) return std::nullopt;
  const Manifest& manifest = model_->manifest();
  for (const ManifestModule& module : manifest.modules) {
    if (module_id >= 0 && module.id != module_id) continue;
    for (int s = 0; s < static_cast<int>(module.stages.size()); ++s) {
      if (QString::fromStdString(module.stages[s].pass) == name) return StageRef{StageRef::Kind::kPass, module.id, -1, s};
    }
    if (name == "before_optimizations" && DumpModel::BeforeOptimizationsFile(module) >= 0) {
      return StageRef{StageRef::Kind::kModuleFile, module.id, -1, DumpModel::BeforeOptimizationsFile(module)};
    }
    if (name == "after_optimizations" && DumpModel::AfterOptimizationsFile(module) >= 0) {
      return StageRef{StageRef::Kind::kModuleFile, module.id, -1, DumpModel::AfterOptimizationsFile(module)};
    }
  }
  if (module_id < 0) {
    for (int g = 0; g < static_cast<int>(manifest.graphs.size()); ++g) {
      for (int s = 0; s < static_cast<int>(manifest.graphs[g].stages.size()); ++s) {
        if (QString::fromStdString(manifest.graphs[g].stages[s].name) == name) {
          return StageRef{StageRef::Kind::kGraphStage, 0, g, s};
        }
      }
    }
  }
  return std::nullopt;
}

std::optional<StageRef> StagesPane::CurrentStage() const {
  QTreeWidgetItem* item = tree_->currentItem();
  if (item == nullptr) return std::nullopt;
  QVariant data = item->data(0, kRefRole);
  if (!data.isValid()) return std::nullopt;
  return data.value<StageRef>();
}

}  // namespace xlens::viewer
