#include "viewer/compare_pane.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QSignalBlocker>
#include <QVBoxLayout>

#include "viewer/graph_style.h"

namespace xlens::viewer {
namespace {

QString Q(const std::string& text) { return QString::fromStdString(text); }

// The mean time of one run: the two sides' profiles need not hold the same number of runs.
std::optional<double> MeanUs(const std::optional<CompareKernelTime>& time) {
  if (!time || time->events <= 0) return std::nullopt;
  return time->total_us / static_cast<double>(time->events);
}

QString Microseconds(const std::optional<CompareKernelTime>& time) {
  std::optional<double> mean = MeanUs(time);
  return mean ? QString::number(*mean, 'f', 3) : QString();
}

QString TimeTooltip(const std::optional<CompareKernelTime>& time) {
  if (!time) return "not in the profile";
  return QString("%1 us in %2 runs").arg(time->total_us, 0, 'f', 3).arg(time->events);
}

// xlens's mean time over XLA's: below 1, xlens was faster.
QString Ratio(const std::optional<CompareKernelTime>& xla, const std::optional<CompareKernelTime>& xlens) {
  std::optional<double> a = MeanUs(xla), b = MeanUs(xlens);
  if (!a || !b || *a <= 0) return QString();
  return QString::number(*b / *a, 'f', 2) + "x";
}

// What a kernel cell's tooltip says: what it runs, its op_names and where it came from.
QString KernelTooltip(const CompareKernel& kernel) {
  QStringList lines;
  lines << Q(kernel.name) + " (" + Q(kernel.kind) + ")";
  if (!kernel.instructions.empty()) {
    QStringList names;
    for (const std::string& name : kernel.instructions) names << Q(name);
    lines << "runs: " + names.join(", ");
  }
  for (const std::string& op_name : kernel.op_names) lines << "op_name: " + Q(op_name);
  if (kernel.source) {
    lines << "source: " + Q(kernel.source->file) + ":" + QString::number(kernel.source->line) +
                 (kernel.source->function.empty() ? QString() : " in " + Q(kernel.source->function));
  }
  if (kernel.time) {
    lines << QString("trace: %1 us in %2 runs").arg(kernel.time->total_us, 0, 'f', 3).arg(kernel.time->events);
  }
  return lines.join('\n');
}

QString Join(const std::vector<std::string>& names) {
  QStringList out;
  for (const std::string& name : names) out << Q(name);
  return out.join(", ");
}

}  // namespace

QColor ComparePane::RowColor(CompareRowKind kind) {
  switch (kind) {
    case CompareRowKind::kExactPair: return ColorsForScheme(ColorScheme::kGreen).fill;
    case CompareRowKind::kPair: return ColorsForScheme(ColorScheme::kYellow).fill;
    case CompareRowKind::kXlaFusedMore: return ColorsForScheme(ColorScheme::kBlue).fill;
    case CompareRowKind::kXlensFusedMore: return ColorsForScheme(ColorScheme::kPurple).fill;
    case CompareRowKind::kOnlyXla: return ColorsForScheme(ColorScheme::kRed).fill;
    case CompareRowKind::kOnlyXlens: return ColorsForScheme(ColorScheme::kOrange).fill;
  }
  return Qt::white;
}

ComparePane::ComparePane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(2);
  auto* bar = new QHBoxLayout();
  header_ = new QLabel(this);
  header_->setTextFormat(Qt::PlainText);  // names from the file are text, never markup
  header_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  modules_ = new QComboBox(this);
  modules_->setToolTip("The report's modules (it follows the module shown in the graph)");
  bar->addWidget(header_, 1);
  bar->addWidget(modules_);
  layout->addLayout(bar);

  table_ = new QTreeWidget(this);
  table_->setRootIsDecorated(false);
  table_->setUniformRowHeights(true);
  table_->setAlternatingRowColors(false);
  table_->setSelectionMode(QAbstractItemView::SingleSelection);
  table_->setHeaderLabels({"XLA kernel", "kind", "xlens kernel", "kind", "overlap", "XLA us/run", "xlens us/run",
                           "xlens / XLA", "note"});
  table_->header()->setStretchLastSection(true);
  layout->addWidget(table_, 1);

  connect(modules_, &QComboBox::currentIndexChanged, this, [this](int index) {
    if (!report_ || index < 0 || index >= static_cast<int>(report_->modules.size())) return;
    ShowModule(report_->modules[index].id);
  });
  connect(table_, &QTreeWidget::currentItemChanged, this,
          [this](QTreeWidgetItem* item, QTreeWidgetItem*) { OnCurrentItemChanged(item); });
}

void ComparePane::SetReport(std::shared_ptr<const CompareReport> report, const QString& path) {
  report_ = std::move(report);
  path_ = path;
  module_ = nullptr;
  {
    const QSignalBlocker blocker(modules_);
    modules_->clear();
    if (report_) {
      for (const CompareModule& m : report_->modules) {
        modules_->addItem(QString("%1 %2").arg(m.id).arg(Q(m.name)));
      }
    }
  }
  if (report_ && !report_->modules.empty()) {
    ShowModule(report_->modules.front().id);
  } else {
    Fill();
  }
}

bool ComparePane::ShowModule(int64_t id) {
  if (!report_) return false;
  const CompareModule* module = report_->FindModule(id);
  if (module == nullptr) return false;
  if (module == module_) return true;
  module_ = module;
  {
    const QSignalBlocker blocker(modules_);
    modules_->setCurrentIndex(static_cast<int>(module - report_->modules.data()));
  }
  Fill();
  return true;
}

void ComparePane::Fill() {
  filling_ = true;
  table_->clear();
  if (module_ == nullptr) {
    header_->setText(report_ ? path_ + ": no modules compared" : QString());
    filling_ = false;
    return;
  }
  const CompareModule& m = *module_;
  size_t exact = 0;
  for (const ComparePair& p : m.pairs) exact += p.exact;
  QString header = QString("%1 module %2 %3: XLA %4 kernels, xlens %5 (%6); %7 matched (%8 exactly), %9 only in XLA, %10 only in xlens")
                       .arg(path_)
                       .arg(m.id)
                       .arg(Q(m.name))
                       .arg(m.xla.size())
                       .arg(m.xlens.size())
                       .arg(Q(m.backend))
                       .arg(m.pairs.size())
                       .arg(exact)
                       .arg(m.xla.size() - m.pairs.size())
                       .arg(m.xlens.size() - m.pairs.size());
  if (!m.xlens_run_problem.empty()) header += "; xlens could not run it: " + Q(m.xlens_run_problem);
  header_->setText(header);

  auto add = [&](CompareRowKind kind, const QString& xla_selects) {
    auto* item = new QTreeWidgetItem(table_);
    item->setData(kXlaKernel, kRowKindRole, static_cast<int>(kind));
    item->setData(kXlaKernel, kXlaKernelRole, xla_selects);
    const QColor fill = RowColor(kind);
    for (int c = 0; c < kColumns; ++c) {
      item->setBackground(c, fill);
      item->setForeground(c, QColor(Qt::black));
    }
    return item;
  };
  auto set_kernel = [](QTreeWidgetItem* item, int name_column, int kind_column, const CompareKernel& kernel) {
    item->setText(name_column, Q(kernel.name));
    item->setText(kind_column, Q(kernel.kind));
    item->setToolTip(name_column, KernelTooltip(kernel));
  };

  for (const ComparePair& p : m.pairs) {
    const CompareKernel& a = m.xla[p.xla_index];
    const CompareKernel& b = m.xlens[p.xlens_index];
    QTreeWidgetItem* item = add(p.exact ? CompareRowKind::kExactPair : CompareRowKind::kPair, Q(a.name));
    set_kernel(item, kXlaKernel, kXlaKind, a);
    set_kernel(item, kXlensKernel, kXlensKind, b);
    item->setText(kOverlap, QString::number(p.jaccard, 'f', 2));
    item->setToolTip(kOverlap, QString("%1 shared atoms%2").arg(p.shared_atoms)
                                   .arg(p.by == "short_atoms" ? " (matched by op_names' last components)" : ""));
    item->setText(kXlaTime, Microseconds(a.time));
    item->setText(kXlensTime, Microseconds(b.time));
    item->setText(kRatio, Ratio(a.time, b.time));
    if (a.time || b.time) {
      item->setToolTip(kXlaTime, TimeTooltip(a.time));
      item->setToolTip(kXlensTime, TimeTooltip(b.time));
    }
    item->setText(kNote, p.exact ? "matched exactly" : "matched");
  }
  for (const CompareFusedMore& note : m.xla_fused_more) {
    const CompareKernel& a = m.xla[note.index];
    QTreeWidgetItem* item = add(CompareRowKind::kXlaFusedMore, Q(a.name));
    set_kernel(item, kXlaKernel, kXlaKind, a);
    item->setText(kXlensKernel, Join(note.others));
    item->setText(kXlaTime, Microseconds(a.time));
    item->setText(kNote, QString("XLA fused more: runs what xlens runs as %1 kernels").arg(note.others.size()));
  }
  for (const CompareFusedMore& note : m.xlens_fused_more) {
    const CompareKernel& b = m.xlens[note.index];
    QTreeWidgetItem* item = add(CompareRowKind::kXlensFusedMore, QString());
    item->setText(kXlaKernel, Join(note.others));
    set_kernel(item, kXlensKernel, kXlensKind, b);
    item->setText(kXlensTime, Microseconds(b.time));
    item->setText(kNote, QString("xlens fused more: runs what XLA runs as %1 kernels").arg(note.others.size()));
  }
  for (const CompareKernel& a : m.xla) {
    if (a.pair >= 0) continue;
    QTreeWidgetItem* item = add(CompareRowKind::kOnlyXla, Q(a.name));
    set_kernel(item, kXlaKernel, kXlaKind, a);
    item->setText(kXlaTime, Microseconds(a.time));
    item->setText(kNote, "only in XLA: " + Q(a.reason));
  }
  for (const CompareKernel& b : m.xlens) {
    if (b.pair >= 0) continue;
    QTreeWidgetItem* item = add(CompareRowKind::kOnlyXlens, QString());
    set_kernel(item, kXlensKernel, kXlensKind, b);
    item->setText(kXlensTime, Microseconds(b.time));
    item->setText(kNote, "only in xlens: " + Q(b.reason));
  }
  // Sized to their contents, but a fused-more row's list of names does not push the rest away.
  for (int c = 0; c < kNote; ++c) {
    table_->resizeColumnToContents(c);
    if (table_->columnWidth(c) > 280) table_->setColumnWidth(c, 280);
  }
  filling_ = false;
}

bool ComparePane::SelectXlaKernel(int64_t module_id, const QString& name) {
  if (module_ == nullptr || module_->id != module_id) return false;
  filling_ = true;  // shown, not asked for: no signal back
  QTreeWidgetItem* found = nullptr;
  for (int i = 0; i < table_->topLevelItemCount() && found == nullptr; ++i) {
    QTreeWidgetItem* item = table_->topLevelItem(i);
    if (item->data(kXlaKernel, kXlaKernelRole).toString() == name) found = item;
  }
  if (found != nullptr) {
    table_->setCurrentItem(found);
    table_->scrollToItem(found);
  } else {
    table_->setCurrentItem(nullptr);
    table_->clearSelection();
  }
  filling_ = false;
  return found != nullptr;
}

void ComparePane::OnCurrentItemChanged(QTreeWidgetItem* item) {
  if (filling_ || item == nullptr || module_ == nullptr) return;
  const QString name = item->data(kXlaKernel, kXlaKernelRole).toString();
  if (!name.isEmpty()) emit xlaKernelSelected(module_->id, name);
}

}  // namespace xlens::viewer
