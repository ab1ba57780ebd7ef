#include "viewer/details_pane.h"

#include <QFontDatabase>
#include <algorithm>
#include <filesystem>
#include <QScrollArea>
#include <QVBoxLayout>

namespace xlens::viewer {
namespace {

QString Escape(const QString& text) { return text.toHtmlEscaped(); }
QString Escape(const std::string& text) { return QString::fromStdString(text).toHtmlEscaped(); }

QString Row(const QString& key, const QString& value) {
  return QString("<tr><td style='color:#666;padding-right:8px'>%1</td><td>%2</td></tr>").arg(key, value);
}

}  // namespace


QString FormatByteCount(int64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = static_cast<double>(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? QString("%1 B").arg(bytes) : QString("%1 %2").arg(value, 0, 'f', 1).arg(units[unit]);
}

QString SourceFrameText(const ManifestSourceFrame& frame) {
  QString text = QString::fromStdString(frame.file) + ":" + QString::number(frame.line);
  if (frame.column > 0) text += ":" + QString::number(frame.column);
  return text;
}

void DetailsPane::ActivateLink(const QString& link) {
  if (link.startsWith("source:")) {
    bool ok = false;
    const qsizetype index = link.mid(7).toLongLong(&ok);
    if (ok && index >= 0 && index < static_cast<qsizetype>(source_links_.size())) {
      const ManifestSourceFrame& frame = source_links_[static_cast<size_t>(index)];
      emit sourceRequested(QString::fromStdString(frame.file), frame.line, frame.column);
    }
    return;
  }
  emit linkActivated(link);
}

DetailsPane::DetailsPane(QWidget* parent) : QWidget(parent) {
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  summary_ = new QLabel(this);
  summary_->setWordWrap(true);
  summary_->setTextFormat(Qt::RichText);
  summary_->setTextInteractionFlags(Qt::TextBrowserInteraction);
  summary_->setAlignment(Qt::AlignTop | Qt::AlignLeft);
  connect(summary_, &QLabel::linkActivated, this, &DetailsPane::ActivateLink);
  auto* scroll = new QScrollArea(this);
  scroll->setWidget(summary_);
  scroll->setWidgetResizable(true);
  scroll->setFrameShape(QFrame::NoFrame);
  draw_fused_ = new QPushButton("Draw fused computation", this);
  draw_fused_->setVisible(false);
  connect(draw_fused_, &QPushButton::clicked, this, [this] { emit drawComputationRequested(fused_computation_); });
  tabs_ = new QTabWidget(this);
  tabs_->setDocumentMode(true);
  layout->addWidget(scroll, 2);
  layout->addWidget(draw_fused_);
  layout->addWidget(tabs_, 3);
  Clear();
}

void DetailsPane::Clear() {
  summary_->setText("<i>Select a stage, a node or a span.</i>");
  draw_fused_->setVisible(false);
  fused_computation_.clear();
  source_links_.clear();
  while (tabs_->count() > 0) {
    QWidget* page = tabs_->widget(0);
    tabs_->removeTab(0);
    page->deleteLater();
  }
  tabs_->setVisible(false);  // the summary takes the whole pane until there is code to show
}

QStringList DetailsPane::TabTitles() const {
  QStringList titles;
  for (int i = 0; i < tabs_->count(); ++i) titles << tabs_->tabText(i);
  return titles;
}

void DetailsPane::AddCodeTab(const QString& title, const QString& text, SourceLanguage language) {
  auto* view = new QPlainTextEdit(tabs_);
  view->setReadOnly(true);
  view->setLineWrapMode(QPlainTextEdit::NoWrap);
  view->setFont(QFontDatabase::systemFont(QFontDatabase::FixedFont));
  new SyntaxHighlighter(view->document(), language);
  view->setPlainText(text);
  tabs_->addTab(view, title);
  tabs_->setVisible(true);
}

void DetailsPane::AddFileTab(const DumpModel& model, const std::string& file) {
  QString name = QString::fromStdString(file);
  SourceLanguage language = LanguageOfFile(name);
  QString title = language == SourceLanguage::kLlvmIr ? (name.contains("no-opt") ? "LLVM IR (no opt)" : "LLVM IR")
                  : language == SourceLanguage::kPtx  ? "PTX"
                                                      : name.section('.', -2);
  StatusOr<std::string> text = model.ReadDumpFile(file);
  AddCodeTab(title, text.ok() ? QString::fromStdString(*text) : QString::fromStdString(text.status().message()),
             text.ok() ? language : SourceLanguage::kPlain);
  tabs_->setTabToolTip(tabs_->count() - 1, name);
}

void DetailsPane::ShowInstruction(const DumpModel& model, const ManifestModule& module,
                                  const InstructionDetails& d, const ManifestKernel* kernel,
                                  const std::optional<KernelTiming>& timing, double peak_gbps) {
  Clear();
  QString html = QString("<h3 style='margin:0'>%1</h3>").arg(Escape(d.name));
  html += "<table>";
  html += Row("opcode", Escape(d.opcode) + (d.fusion_kind.isEmpty() ? "" : " (" + Escape(d.fusion_kind) + ")"));
  html += Row("shape", "<tt>" + Escape(d.shape) + "</tt>");
  html += Row("computation", Escape(d.computation));
  html += Row("module", QString("module_%1 %2").arg(module.id, 4, 10, QChar('0')).arg(Escape(module.name)));
  if (!d.op_type.isEmpty()) html += Row("op_type", Escape(d.op_type));
  if (!d.op_names.isEmpty()) {
    html += Row(QString("op_names (%1)").arg(d.op_names.size()), "<tt>" + Escape(d.op_names.join("\n")).replace("\n", "<br>") + "</tt>");
  }
  if (!d.created_by.isEmpty()) html += Row("created by", Escape(d.created_by));
  if (!d.absorbed.isEmpty()) {
    html += Row(QString("absorbed (%1)").arg(d.absorbed.size()), Escape(d.absorbed.join(", ")));
  }
  // The source line and its callers; a link each (the frame's index: file names may hold any
  // character, so none travels in the link itself).
  std::optional<ManifestSourceFrame> source = d.source;
  std::vector<ManifestSourceFrame> stack = d.stack;
  if (!source && kernel != nullptr && kernel->source) {
    source = kernel->source;
    stack = kernel->stack;
  }
  if (source) {
    auto link = [&](const ManifestSourceFrame& frame) {
      source_links_.push_back(frame);
      QString text = QString("<a href='source:%1'><tt>%2</tt></a>")
                         .arg(source_links_.size() - 1)
                         .arg(Escape(SourceFrameText(frame)));
      if (!frame.function.empty()) text += " (" + Escape(frame.function) + ")";
      return text;
    };
    html += Row("source", link(*source));
    if (!stack.empty()) {
      QStringList callers;
      for (const ManifestSourceFrame& frame : stack) callers << link(frame);
      html += Row(QString("called from (%1)").arg(stack.size()), callers.join("<br>"));
    }
  }
  if (kernel != nullptr) {
    html += Row("kernel", "<tt>" + Escape(kernel->name) + "</tt>");
    if (!kernel->launch.empty()) html += Row("launch", Escape(kernel->launch));
  }
  if (timing && timing->count > 0) {
    const double mean = timing->mean_ns();
    html += Row("runs", QString::number(timing->count));
    html += Row("time per run", FormatDuration(mean) + " (total " + FormatDuration(timing->total_ns) + ")");
    if (timing->bytes_accessed > 0) {
      const double gbps = mean > 0 ? timing->bytes_accessed / mean : 0;  // bytes per ns = GB/s
      QString bandwidth = QString("%1 GB/s").arg(gbps, 0, 'f', 2);
      if (peak_gbps > 0) bandwidth += QString(", %1% of peak (%2 GB/s)").arg(100 * gbps / peak_gbps, 0, 'f', 1).arg(peak_gbps, 0, 'f', 1);
      html += Row("bytes", FormatByteCount(timing->bytes_accessed));
      html += Row("bandwidth", bandwidth);
    }
    if (timing->flops > 0) {
      html += Row("flops", QString("%1 (%2 GFLOP/s)").arg(timing->flops).arg(mean > 0 ? timing->flops / mean : 0, 0, 'f', 2));
    }
  } else if (kernel != nullptr) {
    html += Row("trace", "<i>no spans of this kernel in the trace</i>");
  }
  html += "</table>";
  summary_->setText(html);

  AddCodeTab("HLO", d.text, SourceLanguage::kHlo);
  if (!d.fused_computation_text.isEmpty()) {
    AddCodeTab("Fused computation", d.fused_computation_text, SourceLanguage::kHlo);
    fused_computation_ = d.fused_computation;
    draw_fused_->setVisible(true);
  }
  if (kernel != nullptr) {
    for (const std::string& file : kernel->files) {
      const QString name = QString::fromStdString(file);
      if (name.endsWith(".ll") || name.endsWith(".ptx")) AddFileTab(model, file);
    }
  }
}

void DetailsPane::ShowGraphNode(const DumpModel& model, const ManifestGraph* graph, const QString& node,
                                const QString& label, const std::vector<std::pair<int64_t, std::string>>& kernels) {
  Clear();
  QString html = QString("<h3 style='margin:0'>%1</h3><table>").arg(Escape(node));
  if (!label.isEmpty() && label != node) html += Row("node", Escape(label).replace("\n", "<br>"));
  if (graph != nullptr) {
    const std::string name = node.toStdString();
    QString placement = "<i>not recorded</i>";
    for (const ManifestCluster& cluster : graph->clusters) {
      for (const std::string& member : cluster.nodes) {
        if (member != name) continue;
        placement = "in " + Escape(cluster.name);
        if (auto it = graph->declustered.find(name); it != graph->declustered.end()) {
          placement += ", then declustered: " + Escape(it->second);
        }
        if (!cluster.modules.empty()) {
          QStringList modules;
          for (const std::string& m : cluster.modules) modules << Escape(m);
          placement += "<br>compiled to " + modules.join(", ");
        }
      }
    }
    if (auto it = graph->unclustered.find(name); it != graph->unclustered.end()) {
      placement = "left out of every cluster: " + Escape(it->second);
    }
    html += Row("clustering", placement);
  }
  if (!kernels.empty()) {
    QStringList links;
    for (const auto& [module_id, instruction] : kernels) {
      links << QString("<a href='instruction:%1:%2'>%3</a> (module_%4)")
                   .arg(module_id)
                   .arg(Escape(instruction), Escape(instruction))
                   .arg(module_id, 4, 10, QChar('0'));
    }
    html += Row(QString("kernels (%1)").arg(kernels.size()), links.join("<br>"));
  } else {
    html += Row("kernels", "<i>no kernel carries this op_name</i>");
  }
  html += "</table>";
  summary_->setText(html);
  (void)model;
}

void DetailsPane::ShowModule(const ManifestModule& module, const std::vector<KernelTiming>& timings) {
  Clear();
  int changed = 0;
  int64_t wall = 0;
  for (const ManifestStage& stage : module.stages) {
    changed += stage.changed ? 1 : 0;
    wall += stage.pass == stage.pipeline ? 0 : stage.wall_ns;
  }
  int fused = 0, refused = 0;
  for (const ManifestFusionDecision& d : module.fusion_decisions) (d.fused ? fused : refused) += 1;
  QString html = QString("<h3 style='margin:0'>module_%1</h3><table>").arg(module.id, 4, 10, QChar('0'));
  html += Row("name", Escape(module.name));
  html += Row("passes", QString("%1 run, %2 changed the module").arg(module.stages.size()).arg(changed));
  if (!module.fusion_decisions.empty()) {
    html += Row("fusion decisions", QString("%1 fused, %2 refused").arg(fused).arg(refused));
  }
  html += Row("kernels", QString::number(module.kernels.size()));
  html += "</table>";
  if (!module.kernels.empty()) {
    std::vector<int> order(module.kernels.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
    const bool timed = timings.size() == module.kernels.size();
    if (timed) {
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return timings[a].mean_ns() > timings[b].mean_ns(); });
    }
    html += "<p><b>Kernels</b>" + QString(timed ? " (time per run, from the trace)" : "") +
            "</p><table cellspacing=0 cellpadding=2>";
    for (int i : order) {
      const ManifestKernel& kernel = module.kernels[i];
      const std::string& instruction = kernel.hlo_instruction.empty() ? kernel.name : kernel.hlo_instruction;
      QString time = timed && timings[i].count > 0 ? FormatDuration(timings[i].mean_ns()) : QString();
      // Its line of the user's program, a link that opens it (the callers are in its own details).
      QString source;
      if (kernel.source) {
        source_links_.push_back(*kernel.source);
        source = QString("<a href='source:%1'>%2</a>")
                     .arg(source_links_.size() - 1)
                     .arg(Escape(QString::fromStdString(std::filesystem::path(kernel.source->file).filename().string()) +
                                 ":" + QString::number(kernel.source->line)));
      }
      html += QString("<tr><td><a href='instruction:%1:%2'>%3</a></td><td style='color:#666'>%4</td>"
                      "<td align=right>%5</td><td>%6</td></tr>")
                  .arg(module.id)
                  .arg(Escape(instruction), Escape(instruction), Escape(kernel.fusion_kind), time, source);
    }
    html += "</table>";
  }
  summary_->setText(html);
}

void DetailsPane::ShowStage(const ManifestModule& module, int stage_index) {
  Clear();
  if (stage_index < 0 || stage_index >= static_cast<int>(module.stages.size())) return;
  const ManifestStage& stage = module.stages[stage_index];
  QString html = QString("<h3 style='margin:0'>%1</h3><table>").arg(Escape(stage.pass));
  html += Row("pipeline", Escape(stage.pipeline));
  html += Row("step", QString::number(stage.step));
  html += Row("wall time", FormatDuration(stage.wall_ns));
  html += Row("changed", stage.changed ? "yes" : "no");
  const ManifestStageChanges& c = stage.changes;
  auto list = [](const std::vector<std::string>& names) {
    QStringList out;
    for (const std::string& name : names) out << Escape(name);
    return out.join(", ");
  };
  if (!c.added.empty()) html += Row(QString("<span style='color:#2e7d32'>added (%1)</span>").arg(c.added.size()), list(c.added));
  if (!c.removed.empty()) html += Row(QString("<span style='color:#c62828'>removed (%1)</span>").arg(c.removed.size()), list(c.removed));
  if (!c.modified.empty()) html += Row(QString("<span style='color:#b26a00'>modified (%1)</span>").arg(c.modified.size()), list(c.modified));
  if (!c.fused_into.empty()) {
    QStringList fused;
    for (const auto& [from, into] : c.fused_into) fused << Escape(from) + " → " + Escape(into);
    html += Row(QString("<span style='color:#1565c0'>fused (%1)</span>").arg(c.fused_into.size()), fused.join("<br>"));
  }
  html += "</table>";
  QStringList decisions;
  for (const ManifestFusionDecision& d : module.fusion_decisions) {
    if (d.step != stage.step) continue;
    decisions << (d.fused ? QString("<span style='color:#1565c0'>fused</span> %1 into %2 %3")
                                .arg(Escape(d.producer), Escape(d.consumer), Escape(d.kind.empty() ? "" : "(" + d.kind + ")"))
                          : QString("<span style='color:#c62828'>refused</span> %1 into %2: %3")
                                .arg(Escape(d.producer), Escape(d.consumer), Escape(d.reason)));
  }
  if (!decisions.isEmpty()) {
    html += QString("<p><b>Fusion decisions (%1)</b><br>%2</p>").arg(decisions.size()).arg(decisions.join("<br>"));
  }
  summary_->setText(html);
}

void DetailsPane::ShowSpan(const QString& name, const QString& category, int64_t start_ns, int64_t duration_ns,
                           const QStringList& args) {
  Clear();
  QString html = QString("<h3 style='margin:0'>%1</h3><table>").arg(Escape(name));
  html += Row("category", Escape(category));
  html += Row("start", FormatDuration(start_ns));
  html += Row("duration", FormatDuration(duration_ns));
  for (const QString& arg : args) {
    html += Row(Escape(arg.section('=', 0, 0)), Escape(arg.section('=', 1)));
  }
  html += "</table>";
  summary_->setText(html);
}

}  // namespace xlens::viewer
