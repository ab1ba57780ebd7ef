#include "viewer/main_window.h"

#include "compiler/support/terminal_text.h"

#include <QAction>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QElapsedTimer>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QMenuBar>
#include <QSettings>
#include <QShortcut>
#include <QStatusBar>
#include <QThread>
#include <QToolBar>
#include <QVBoxLayout>
#include <algorithm>
#include <cstdio>

#include "profiler/hlo_profile.h"
#include "viewer/diff_view.h"
#include "viewer/graph_view.h"
#include "viewer/stage_diff.h"
#include "viewer/timeline_view.h"

namespace xlens::viewer {
namespace {

QString Q(const std::string& text) { return QString::fromStdString(text); }

}  // namespace

MainWindow::MainWindow(QWidget* parent) : QMainWindow(parent) {
  qRegisterMetaType<StageRef>();
  BuildUi();
  BuildActions();
  RestoreSettings();
  UpdateTitle();
}

MainWindow::~MainWindow() {
  if (trace_reader_) trace_reader_->wait();
}

void MainWindow::BuildUi() {
  auto* central = new QWidget(this);
  auto* layout = new QVBoxLayout(central);
  layout->setContentsMargins(0, 0, 0, 0);
  layout->setSpacing(0);

  banner_ = new QLabel(central);
  banner_->setWordWrap(true);
  banner_->setTextFormat(Qt::PlainText);  // names from files are text, never markup (an <img> would be loaded)
  banner_->setTextInteractionFlags(Qt::TextSelectableByMouse);
  banner_->setStyleSheet("QLabel { background: #fff3e0; color: #8a3c00; padding: 4px 8px; border-bottom: 1px solid #ffcc80; }");
  banner_->setVisible(false);
  layout->addWidget(banner_);

  vertical_ = new QSplitter(Qt::Vertical, central);
  horizontal_ = new QSplitter(Qt::Horizontal, vertical_);
  horizontal_->setObjectName("horizontal");
  vertical_->setObjectName("vertical");

  stages_ = new StagesPane(horizontal_);

  auto* centre_box = new QWidget(horizontal_);
  auto* centre_layout = new QVBoxLayout(centre_box);
  centre_layout->setContentsMargins(0, 0, 0, 0);
  centre_layout->setSpacing(2);
  auto* centre_bar = new QHBoxLayout();
  stage_title_ = new QLabel(centre_box);
  stage_title_->setTextFormat(Qt::RichText);
  graph_search_ = new QLineEdit(centre_box);
  graph_search_->setPlaceholderText("Search graph (regex: name, opcode, op_name)  n/N");
  graph_search_->setClearButtonEnabled(true);
  graph_search_->setMaximumWidth(340);
  centre_bar->addWidget(stage_title_, 1);
  centre_bar->addWidget(graph_search_);
  centre_layout->addLayout(centre_bar);
  centre_ = new QStackedWidget(centre_box);
  graph_ = new GraphView(centre_);
  diff_ = new DiffView(centre_);
  centre_->addWidget(graph_);
  centre_->addWidget(diff_);
  centre_layout->addWidget(centre_, 1);

  details_ = new DetailsPane(horizontal_);
  horizontal_->addWidget(stages_);
  horizontal_->addWidget(centre_box);
  horizontal_->addWidget(details_);
  horizontal_->setStretchFactor(0, 0);
  horizontal_->setStretchFactor(1, 1);
  horizontal_->setStretchFactor(2, 0);
  horizontal_->setSizes({300, 900, 380});

  auto* timeline_box = new QWidget(vertical_);
  auto* timeline_layout = new QVBoxLayout(timeline_box);
  timeline_layout->setContentsMargins(0, 0, 0, 0);
  timeline_layout->setSpacing(2);
  timeline_search_ = new QLineEdit(timeline_box);
  timeline_search_->setPlaceholderText("Search timeline by name (Enter: next)");
  timeline_search_->setClearButtonEnabled(true);
  timeline_search_->setMaximumWidth(340);
  timeline_ = new TimelineView(timeline_box);
  timeline_layout->addWidget(timeline_search_);
  timeline_layout->addWidget(timeline_, 1);
  vertical_->addWidget(horizontal_);
  vertical_->addWidget(timeline_box);
  vertical_->setStretchFactor(0, 3);
  vertical_->setStretchFactor(1, 1);
  // Shown only with a report (--compare).
  compare_ = new ComparePane(vertical_);
  compare_->setVisible(false);
  vertical_->addWidget(compare_);
  vertical_->setSizes({650, 300});
  layout->addWidget(vertical_, 1);
  setCentralWidget(central);
  statusBar()->showMessage("Open a dump directory (Ctrl+O)");

  connect(stages_, &StagesPane::stageActivated, this, &MainWindow::ShowStage);
  connect(graph_, &GraphView::nodeSelected, this, &MainWindow::OnNodeSelected);
  // A graph that only fits at a scale where its labels cannot be read opens readable instead,
  // at its top (where the parameters are), as one reads a dumped graph.
  connect(graph_, &GraphView::layoutFinished, this, [this] {
    const GraphLayout* layout = graph_->graph_layout();
    if (layout == nullptr || !graph_->selected().isEmpty()) return;
    constexpr double kReadableScale = 0.75;
    if (graph_->ViewScale() >= kReadableScale * 0.8) return;
    const QRectF bounds = layout->bounds;
    const QSizeF visible = QSizeF(graph_->viewport()->size()) / kReadableScale;
    graph_->SetViewState(QPointF(bounds.center().x(), bounds.top() + visible.height() / 2), kReadableScale);
  });
  connect(diff_, &DiffView::nodeSelected, this, &MainWindow::OnNodeSelected);
  connect(timeline_, &TimelineView::spanSelected, this, &MainWindow::OnSpanSelected);
  connect(details_, &DetailsPane::linkActivated, this, &MainWindow::OnDetailsLink);
  connect(compare_, &ComparePane::xlaKernelSelected, this,
          [this](qint64 module_id, const QString& name) { SelectXlaKernel(module_id, name); });
  connect(details_, &DetailsPane::sourceRequested, this, &MainWindow::OnSourceRequested);
  connect(details_, &DetailsPane::drawComputationRequested, this, [this](const QString& computation) {
    if (outline_ == nullptr) return;
    SetDiffMode(false);
    shown_computation_ = computation;
    graph_->ShowComputation(outline_, computation);
    stage_title_->setText(stage_title_->text() + " &rsaquo; <b>" + computation.toHtmlEscaped() + "</b>");
  });
  connect(graph_search_, &QLineEdit::textChanged, this, [this](const QString& text) {
    int hits = diff_mode_ ? diff_->after_view()->Search(text) : graph_->Search(text);
    if (diff_mode_) diff_->before_view()->Search(text);
    if (text.isEmpty()) {
      statusBar()->clearMessage();
    } else {
      statusBar()->showMessage(hits < 0 ? "invalid regular expression" : QString("%1 matches").arg(hits));
    }
  });
  connect(graph_search_, &QLineEdit::returnPressed, this, [this] {
    if (diff_mode_) {
      diff_->after_view()->NextHit();
    } else {
      graph_->NextHit();
    }
  });
  connect(timeline_search_, &QLineEdit::textChanged, this, [this](const QString& text) {
    int hits = timeline_->Search(text);
    if (!text.isEmpty()) statusBar()->showMessage(QString("%1 spans named like \"%2\"").arg(hits).arg(text));
  });
  connect(timeline_search_, &QLineEdit::returnPressed, timeline_, &TimelineView::NextHit);
}

void MainWindow::BuildActions() {
  QMenu* file = menuBar()->addMenu("&File");
  QAction* open = file->addAction("&Open dump directory…", this, [this] {
    QString dir = QFileDialog::getExistingDirectory(this, "Open dump directory");
    if (!dir.isEmpty()) OpenDump(dir);
  });
  open->setShortcut(QKeySequence::Open);
  file->addAction("Open &trace…", this, [this] {
    QString path = QFileDialog::getOpenFileName(this, "Open trace", QString(), "Chrome traces (*.json *.json.gz)");
    if (!path.isEmpty()) OpenTrace(path);
  });
  QAction* quit = file->addAction("&Quit", this, &QWidget::close);
  quit->setShortcut(QKeySequence::Quit);

  QMenu* view = menuBar()->addMenu("&View");
  QAction* diff = view->addAction("&Diff mode", this, [this] { SetDiffMode(!diff_mode_); });
  diff->setShortcut(Qt::Key_D);
  view->addAction("&Next changed pass", this, [this] { StepChangedPass(+1); })->setShortcut(Qt::Key_BracketRight);
  view->addAction("&Previous changed pass", this, [this] { StepChangedPass(-1); })->setShortcut(Qt::Key_BracketLeft);
  view->addAction("Next &fusion decision", this, [this] { StepFusionDecision(+1); })->setShortcut(Qt::Key_Period);
  view->addAction("Previous fusion decision", this, [this] { StepFusionDecision(-1); })->setShortcut(Qt::Key_Comma);
  QAction* find = view->addAction("&Search graph", this, [this] {
    graph_search_->setFocus();
    graph_search_->selectAll();
  });
  find->setShortcuts({QKeySequence::Find, QKeySequence(Qt::Key_Slash)});
  // Single-key shortcuts must not fire while the user types in a search box.
  for (QAction* action : view->actions()) action->setShortcutContext(Qt::WindowShortcut);

  QToolBar* bar = addToolBar("Stages");
  bar->setObjectName("stages_toolbar");
  bar->addAction("◀ changed", this, [this] { StepChangedPass(-1); })->setToolTip("Previous pass that changed the module ([)");
  bar->addAction("changed ▶", this, [this] { StepChangedPass(+1); })->setToolTip("Next pass that changed the module (])");
  bar->addSeparator();
  bar->addAction("◀ fusion", this, [this] { StepFusionDecision(-1); })->setToolTip("Previous fusion decision (,)");
  bar->addAction("fusion ▶", this, [this] { StepFusionDecision(+1); })->setToolTip("Next fusion decision (.)");
  bar->addSeparator();
  QAction* diff_toggle = bar->addAction("Diff", this, [this] { SetDiffMode(!diff_mode_); });
  diff_toggle->setToolTip("Before and after the selected pass, side by side (d)");
}

std::vector<std::string> MainWindow::OpenDump(const QString& directory, const QString& trace) {
  problems_.clear();
  banner_->setVisible(false);
  outlines_.clear();
  outline_.reset();
  before_outline_.reset();
  current_.reset();
  selected_node_.clear();
  decision_index_ = -1;
  graph_->Clear();
  details_->Clear();
  model_ = DumpModel::Open(directory.toStdString(), trace.toStdString());
  for (const std::string& problem : model_->problems()) AddProblem(Q(problem));
  stages_->SetModel(model_.get());
  if (!model_->trace_path().empty()) {
    OpenTrace(Q(model_->trace_path()));
  } else {
    trace_.reset();
    timeline_->SetModel(nullptr);
  }
  // Open on the optimized module of the first module: what the compiler made of it.
  if (!model_->manifest().modules.empty()) SelectModule(model_->manifest().modules.front().id);
  else if (!model_->manifest().graphs.empty() && !model_->manifest().graphs.front().stages.empty()) {
    StageRef ref{StageRef::Kind::kGraphStage, 0, 0, 0};
    stages_->SelectStage(ref);
    ShowStage(ref);
  }
  UpdateTitle();
  std::vector<std::string> out;
  for (const QString& problem : problems_) out.push_back(problem.toStdString());
  return out;
}

void MainWindow::OpenTrace(const QString& path) {
  trace_path_ = path;
  trace_loading_ = true;
  statusBar()->showMessage("Reading " + path + " …");
  // Reading a large trace takes seconds: off the UI thread, handed back through the event loop.
  QThread* reader = QThread::create([this, path] {
    auto loaded = TraceModel::Load(path.toStdString());
    std::shared_ptr<const TraceModel> model;
    QString error;
    if (loaded.ok()) {
      model = std::shared_ptr<const TraceModel>(std::move(*loaded));
    } else {
      error = Q(loaded.status().message());
    }
    QMetaObject::invokeMethod(this, [this, model, error, path] {
      if (path != trace_path_) return;  // another trace was opened meanwhile
      trace_loading_ = false;
      trace_ = model;
      timeline_->SetModel(model);
      if (!error.isEmpty()) {
        AddProblem(error);
      } else {
        statusBar()->showMessage(QString("%1: %2 spans on %3 tracks")
                                     .arg(path)
                                     .arg(model->span_count())
                                     .arg(model->tracks().size()),
                                 5000);
        if (selected_node_.isEmpty() && current_ && current_->kind == StageRef::Kind::kModuleFile) {
          if (const ManifestModule* module = model_ ? model_->FindModule(current_->module_id) : nullptr) {
            ShowModuleDetails(*module);
          }
        }
        if (!selected_node_.isEmpty() && current_ && current_->kind != StageRef::Kind::kGraphStage) {
          if (const ManifestModule* module = model_ ? model_->FindModule(current_->module_id) : nullptr) {
            HighlightSpansOf(*module, selected_node_);
            ShowInstructionDetails(*module, selected_node_);
          }
        }
      }
    });
  });
  connect(reader, &QThread::finished, reader, &QObject::deleteLater);
  if (trace_reader_) trace_reader_->wait();  // one reader at a time; the older result is dropped
  trace_reader_ = reader;
  reader->start();
}

void MainWindow::AddProblem(const QString& problem) {
  problems_ << problem;
  QStringList shown = problems_.mid(0, 6);
  QString text = shown.join("\n");
  if (problems_.size() > shown.size()) text += QString("\n… and %1 more").arg(problems_.size() - shown.size());
  banner_->setText(text);
  banner_->setVisible(true);
  // Names in problems come from files: escaped, so no control sequence reaches the terminal.
  const QByteArray utf8 = problem.toUtf8();
  std::fprintf(stderr, "xlens-viewer: %s\n",
               xlens::EscapeForTerminal(std::string_view(utf8.constData(), static_cast<size_t>(utf8.size()))).c_str());
}

void MainWindow::UpdateTitle() {
  QString title = "xlens-viewer";
  if (model_) title += " — " + Q(model_->directory());
  setWindowTitle(title);
}


std::shared_ptr<const HloOutline> MainWindow::OutlineOf(const std::string& file) {
  if (auto it = outlines_.find(file); it != outlines_.end()) return it->second;
  std::shared_ptr<const HloOutline> outline;
  StatusOr<std::string> text = model_->ReadDumpFile(file);
  if (!text.ok()) {
    AddProblem(Q(text.status().message()));
  } else {
    StatusOr<std::string> path = model_->PathOf(file);
    StatusOr<HloOutline> parsed = ParseHloOutline(*text, path.ok() ? *path : file);
    if (parsed.ok()) {
      outline = std::make_shared<const HloOutline>(std::move(*parsed));
    } else {
      AddProblem(Q(parsed.status().message()));
    }
  }
  if (outlines_.size() > 64) outlines_.clear();  // a long session of clicking stays bounded
  outlines_[file] = outline;
  return outline;
}

bool MainWindow::SelectModule(int64_t module_id, std::string* error) {
  const ManifestModule* module = model_ ? model_->FindModule(module_id) : nullptr;
  if (module == nullptr) {
    std::string message = "no module " + std::to_string(module_id) + " in the dump";
    if (error) *error = message;
    statusBar()->showMessage(Q(message));
    return false;
  }
  std::optional<StageRef> ref = DumpModel::OptimizedStage(*module);
  if (!ref) {
    std::string message = "module " + std::to_string(module_id) + " has no HLO dump to show";
    if (error) *error = message;
    statusBar()->showMessage(Q(message));
    return false;
  }
  stages_->SelectStage(*ref);
  ShowStage(*ref);
  return true;
}

bool MainWindow::SelectStageByName(const QString& name, std::string* error) {
  int64_t module_id = current_ && current_->kind != StageRef::Kind::kGraphStage ? current_->module_id : -1;
  std::optional<StageRef> ref = stages_->FindStage(name, module_id);
  if (!ref) ref = stages_->FindStage(name, -1);
  if (!ref) {
    std::string message = "no stage named \"" + name.toStdString() + "\" in the dump";
    if (error) *error = message;
    statusBar()->showMessage(Q(message));
    return false;
  }
  // A pass that ran several times (a fixed-point pipeline): the first time it changed anything.
  if (ref->kind == StageRef::Kind::kPass) {
    const ManifestModule* module = model_->FindModule(ref->module_id);
    for (int i = ref->index; i < static_cast<int>(module->stages.size()); ++i) {
      if (Q(module->stages[i].pass) == name && module->stages[i].changed) {
        ref->index = i;
        break;
      }
    }
  }
  stages_->SelectStage(*ref);
  ShowStage(*ref);
  return true;
}

bool MainWindow::SelectByName(const QString& name, std::string* error) {
  if (current_ && current_->kind == StageRef::Kind::kGraphStage) {
    if (graph_->SelectNode(name, true)) {
      OnNodeSelected(name);
      return true;
    }
  } else if (current_ && model_) {
    const ManifestModule* module = model_->FindModule(current_->module_id);
    // A kernel's symbol selects the instruction it implements.
    QString instruction = name;
    for (const ManifestKernel& kernel : module->kernels) {
      if (Q(kernel.name) == name) instruction = Q(kernel.hlo_instruction);
    }
    if (outline_ && outline_->FindInstruction(instruction.toStdString()).second != nullptr) {
      RevealInstruction(*module, instruction);
      return true;
    }
    // Not in this stage: in the optimized module, if it is there.
    if (std::optional<StageRef> optimized = DumpModel::OptimizedStage(*module)) {
      auto outline = OutlineOf(DumpModel::HloFileOf(*module, *optimized));
      if (outline && outline->FindInstruction(instruction.toStdString()).second != nullptr) {
        RevealInstruction(*module, instruction);
        return true;
      }
    }
  }
  std::string message = "nothing named \"" + name.toStdString() + "\" in the stage shown";
  if (error) *error = message;
  statusBar()->showMessage(Q(message));
  return false;
}

void MainWindow::ShowStage(const StageRef& ref) {
  if (!model_) return;
  current_ = ref;
  if (ref.kind != StageRef::Kind::kGraphStage) compare_->ShowModule(ref.module_id);
  switch (ref.kind) {
    case StageRef::Kind::kGraphStage:
      ShowGraphStage(ref.graph_index, ref.index);
      break;
    case StageRef::Kind::kPass:
    case StageRef::Kind::kModuleFile:
      if (const ManifestModule* module = model_->FindModule(ref.module_id)) ShowHloStage(*module, ref);
      break;
    case StageRef::Kind::kKernel:
      if (const ManifestModule* module = model_->FindModule(ref.module_id)) {
        if (ref.index < static_cast<int>(module->kernels.size())) {
          RevealInstruction(*module, Q(module->kernels[ref.index].hlo_instruction));
        }
      }
      break;
  }
}

void MainWindow::ShowHloStage(const ManifestModule& module, const StageRef& ref) {
  const bool is_pass = ref.kind == StageRef::Kind::kPass;
  if (is_pass && (ref.index < 0 || ref.index >= static_cast<int>(module.stages.size()))) return;
  current_ = ref;
  shown_computation_.clear();
  QString title = QString("module_%1 &rsaquo; ").arg(module.id, 4, 10, QChar('0'));
  QString stage_name;
  if (is_pass) {
    const ManifestStage& stage = module.stages[ref.index];
    stage_name = Q(stage.pass) + QString(" (step %1)").arg(stage.step);
    title += QString("%1 &rsaquo; <b>%2</b>").arg(Q(stage.pipeline).toHtmlEscaped(), Q(stage.pass).toHtmlEscaped());
    if (!stage.changed) title += " <span style='color:#888'>(no change)</span>";
  } else {
    stage_name = ref.index == DumpModel::BeforeOptimizationsFile(module) ? "before_optimizations" : "after_optimizations";
    title += "<b>" + stage_name + "</b>";
  }
  const std::string file = DumpModel::HloFileOf(module, ref);
  if (file.empty()) {
    outline_.reset();
    before_outline_.reset();
    graph_->Clear();
    centre_->setCurrentWidget(graph_);
    stage_title_->setText(title + " <span style='color:#b00'>— not dumped (dump every pass with --xla_dump_hlo_pass_re=.*)</span>");
    if (is_pass) details_->ShowStage(module, ref.index);
    return;
  }
  stage_title_->setText(title);
  outline_ = OutlineOf(file);
  const std::string previous = DumpModel::PreviousHloFile(module, ref);
  before_outline_ = previous.empty() ? nullptr : OutlineOf(previous);
  if (outline_ == nullptr) {
    graph_->Clear();
    centre_->setCurrentWidget(graph_);
    if (is_pass) details_->ShowStage(module, ref.index);
    return;
  }
  if (diff_mode_) {
    const QString before_title =
        previous.empty() ? QString("before: (no earlier dump)") : "before: " + Q(previous).section('.', -3, -2);
    diff_->ShowStages(before_outline_ ? before_outline_ : outline_, outline_, before_title, "after: " + stage_name);
    centre_->setCurrentWidget(diff_);
  } else {
    graph_->ShowComputation(outline_, QString(), selected_node_);
    centre_->setCurrentWidget(graph_);
  }
  if (is_pass) {
    details_->ShowStage(module, ref.index);
  } else {
    ShowModuleDetails(module);
  }
  if (!selected_node_.isEmpty() && outline_->FindInstruction(selected_node_.toStdString()).second != nullptr) {
    SelectInView(selected_node_);
  }
}

void MainWindow::ShowGraphStage(int graph_index, int stage_index) {
  const Manifest& manifest = model_->manifest();
  if (graph_index < 0 || graph_index >= static_cast<int>(manifest.graphs.size())) return;
  const ManifestGraph& graph = manifest.graphs[graph_index];
  if (stage_index < 0 || stage_index >= static_cast<int>(graph.stages.size())) return;
  const ManifestGraphStage& stage = graph.stages[stage_index];
  outline_.reset();
  before_outline_.reset();
  centre_->setCurrentWidget(graph_);
  stage_title_->setText(QString("graph %1 &rsaquo; <b>%2</b>").arg(graph.id).arg(Q(stage.name).toHtmlEscaped()));
  const std::string file = DumpModel::DotFileOf(stage);
  if (file.empty()) {
    graph_->Clear();
    stage_title_->setText(stage_title_->text() + " <span style='color:#b00'>— no .dot file in the dump</span>");
    return;
  }
  StatusOr<std::string> dot = model_->ReadDumpFile(file);
  if (!dot.ok()) {
    AddProblem(Q(dot.status().message()));
    graph_->Clear();
    return;
  }
  graph_->ShowDot(Q(*dot));
  details_->Clear();
}

void MainWindow::SetDiffMode(bool on) {
  if (on == diff_mode_) return;
  diff_mode_ = on;
  if (current_ && (current_->kind == StageRef::Kind::kPass || current_->kind == StageRef::Kind::kModuleFile) && model_) {
    if (const ManifestModule* module = model_->FindModule(current_->module_id)) ShowHloStage(*module, *current_);
  } else if (!on) {
    centre_->setCurrentWidget(graph_);
  }
  statusBar()->showMessage(on ? "Diff mode: before the pass (left) and after it (right)" : "Diff mode off", 3000);
}

bool MainWindow::StepChangedPass(int direction) {
  if (!model_ || !current_ || current_->kind == StageRef::Kind::kGraphStage) return false;
  const ManifestModule* module = model_->FindModule(current_->module_id);
  if (module == nullptr) return false;
  int from = current_->index;
  if (current_->kind != StageRef::Kind::kPass) {
    // From before_optimizations forwards, from after_optimizations (or a kernel) backwards.
    const bool at_start = current_->kind == StageRef::Kind::kModuleFile &&
                          current_->index == DumpModel::BeforeOptimizationsFile(*module);
    from = at_start ? -1 : static_cast<int>(module->stages.size());
  }
  for (int i = from + direction; i >= 0 && i < static_cast<int>(module->stages.size()); i += direction) {
    if (module->stages[i].changed && !DumpModel::HloFileOf(module->stages[i]).empty()) {
      StageRef ref{StageRef::Kind::kPass, module->id, -1, i};
      stages_->SelectStage(ref);
      ShowStage(ref);
      return true;
    }
  }
  statusBar()->showMessage(direction > 0 ? "No later pass changed the module" : "No earlier pass changed the module", 3000);
  return false;
}

bool MainWindow::StepFusionDecision(int direction) {
  if (!model_ || !current_ || current_->kind == StageRef::Kind::kGraphStage) return false;
  const ManifestModule* module = model_->FindModule(current_->module_id);
  if (module == nullptr || module->fusion_decisions.empty()) {
    statusBar()->showMessage("No fusion decisions recorded for this module", 3000);
    return false;
  }
  const int count = static_cast<int>(module->fusion_decisions.size());
  const int next = decision_index_ + direction;
  if (next < 0 || next >= count) {
    statusBar()->showMessage(direction > 0 ? "No later fusion decision" : "No earlier fusion decision", 3000);
    return false;
  }
  decision_index_ = next;
  const ManifestFusionDecision& decision = module->fusion_decisions[next];
  // The decision's pass, in diff mode, with the fusion (or the refused consumer) selected.
  int stage = -1;
  for (int i = 0; i < static_cast<int>(module->stages.size()); ++i) {
    if (module->stages[i].step == decision.step) stage = i;
  }
  QString target = Q(decision.fused && !decision.fusion.empty() ? decision.fusion : decision.consumer);
  if (stage >= 0) {
    if (!diff_mode_) diff_mode_ = true;
    StageRef ref{StageRef::Kind::kPass, module->id, -1, stage};
    stages_->SelectStage(ref);
    selected_node_ = target;
    ShowStage(ref);
  }
  statusBar()->showMessage(QString("Fusion decision %1 of %2: %3")
                               .arg(next + 1)
                               .arg(count)
                               .arg(decision.fused ? QString("fused %1 into %2 (%3)")
                                                         .arg(Q(decision.producer), Q(decision.consumer), Q(decision.kind))
                                                   : QString("refused %1 into %2: %3")
                                                         .arg(Q(decision.producer), Q(decision.consumer), Q(decision.reason))));
  return true;
}

void MainWindow::OnNodeSelected(const QString& name) {
  if (!model_ || !current_) return;
  selected_node_ = name;
  if (current_->kind == StageRef::Kind::kGraphStage) {
    const ManifestGraph* graph = current_->graph_index < static_cast<int>(model_->manifest().graphs.size())
                                     ? &model_->manifest().graphs[current_->graph_index]
                                     : nullptr;
    auto kernels = model_->KernelsWithOpName(name.toStdString());
    QString label;
    if (const GraphLayout* layout = graph_->graph_layout()) {
      int index = layout->FindNode(name);
      if (index >= 0) label = layout->nodes[index].label.join("\n");
    }
    details_->ShowGraphNode(*model_, graph, name, label, kernels);
    // Light up the spans of every kernel that carries this op.
    highlighted_stats_ = SpanStats{};
    if (trace_ && !kernels.empty()) {
      std::vector<SpanId> spans;
      for (const auto& [module_id, instruction] : kernels) {
        const ManifestModule* module = model_->FindModule(module_id);
        if (module == nullptr) continue;
        auto found = trace_->SpansOfHloOp(module->name, instruction);
        spans.insert(spans.end(), found.begin(), found.end());
      }
      highlighted_stats_ = trace_->Stats(spans);
      const ManifestModule* first = model_->FindModule(kernels.front().first);
      if (first != nullptr) timeline_->HighlightSpans(Q(first->name), Q(kernels.front().second));
      RevealHighlightedSpans();
      statusBar()->showMessage(QString("%1: %2 kernels, %3 spans, total %4, mean %5")
                                   .arg(name)
                                   .arg(kernels.size())
                                   .arg(highlighted_stats_.count)
                                   .arg(FormatDuration(highlighted_stats_.total_ns))
                                   .arg(FormatDuration(highlighted_stats_.mean_ns)));
    }
    return;
  }
  const ManifestModule* module = model_->FindModule(current_->module_id);
  if (module == nullptr) return;
  ShowInstructionDetails(*module, name);
  HighlightSpansOf(*module, name);
  // The Compare pane's row of this kernel, if it has one (a kernel is named as its instruction).
  QString kernel_name = name;
  for (const ManifestKernel& kernel : module->kernels) {
    if (Q(kernel.hlo_instruction) == name) kernel_name = Q(kernel.name);
  }
  compare_->SelectXlaKernel(module->id, kernel_name);
  int creating = DumpModel::CreatingStage(*module, name.toStdString());
  stages_->HighlightStage(creating >= 0 ? std::optional<StageRef>(StageRef{StageRef::Kind::kPass, module->id, -1, creating})
                                        : std::nullopt);
}

void MainWindow::HighlightSpansOf(const ManifestModule& module, const QString& instruction) {
  if (!trace_) return;
  highlighted_stats_ = timeline_->HighlightSpans(Q(module.name), instruction);
  RevealHighlightedSpans();
  if (highlighted_stats_.count > 0) {
    statusBar()->showMessage(QString("%1: %2 kernel spans, total %3, mean %4")
                                 .arg(instruction)
                                 .arg(highlighted_stats_.count)
                                 .arg(FormatDuration(highlighted_stats_.total_ns))
                                 .arg(FormatDuration(highlighted_stats_.mean_ns)));
  } else {
    statusBar()->showMessage(instruction + ": no kernel spans in the trace");
  }
}

void MainWindow::ShowModuleDetails(const ManifestModule& module) {
  std::vector<KernelTiming> timings;
  if (trace_) {
    for (const ManifestKernel& kernel : module.kernels) {
      SpanStats stats = trace_->Stats(trace_->SpansOfHloOp(module.name, kernel.hlo_instruction));
      timings.push_back(KernelTiming{stats.count, stats.total_ns, 0, 0});
    }
  }
  details_->ShowModule(module, timings);
}

void MainWindow::RevealHighlightedSpans() {
  const std::vector<SpanId>& spans = timeline_->highlightedSpans();
  if (!trace_ || spans.empty()) return;
  int64_t first = INT64_MAX, last = INT64_MIN, narrowest = INT64_MAX;
  for (SpanId id : spans) {
    SpanInfo info = trace_->Span(id);
    first = std::min(first, info.start_ns);
    last = std::max(last, info.start_ns + info.duration_ns);
    narrowest = std::min(narrowest, info.duration_ns);
  }
  const double view = timeline_->visibleEnd() - timeline_->visibleStart();
  const double pixels = std::max(1, timeline_->viewport()->width());
  const bool all_in_view = first >= timeline_->visibleStart() && last <= timeline_->visibleEnd();
  // Zoom only when the spans are out of view or too thin to see: the user's zoom is kept otherwise.
  if (all_in_view && narrowest * pixels / view >= 2) return;
  const double pad = std::max<double>(1000, (last - first) * 0.1);
  timeline_->SetVisibleRange(first - pad, last + pad);
}

void MainWindow::ShowInstructionDetails(const ManifestModule& module, const QString& name) {
  if (outline_ == nullptr) return;
  auto [computation, instruction] = outline_->FindInstruction(name.toStdString());
  if (instruction == nullptr) {
    // A fusion cluster's id is the fusion's name; anything else is not an instruction.
    details_->Clear();
    return;
  }
  InstructionDetails d;
  d.name = Q(instruction->name);
  d.opcode = Q(instruction->opcode);
  d.shape = Q(instruction->shape);
  d.text = Q(instruction->text);
  d.op_type = Q(instruction->op_type);
  d.fusion_kind = Q(instruction->fusion_kind);
  d.computation = Q(computation->name);
  for (const std::string& op_name : instruction->op_names) d.op_names << Q(op_name);
  d.source = instruction->source;
  d.stack = outline_->CallersOf(*instruction);
  if (instruction->opcode == "fusion" && !instruction->called.empty()) {
    d.fused_computation = Q(instruction->called.front());
    if (const HloOutlineComputation* fused = outline_->FindComputation(instruction->called.front())) {
      QStringList lines;
      for (const HloOutlineInstruction& i : fused->instructions) lines << (i.is_root ? "ROOT " : "") + Q(i.text);
      d.fused_computation_text = Q(fused->name) + " {\n  " + lines.join("\n  ") + "\n}";
    }
  }
  const int creating = DumpModel::CreatingStage(module, instruction->name);
  if (creating >= 0) {
    const ManifestStage& stage = module.stages[creating];
    d.created_by = QString("%1 (%2, step %3)").arg(Q(stage.pass), Q(stage.pipeline)).arg(stage.step);
  }
  for (const ManifestStage& stage : module.stages) {
    for (const auto& [from, into] : stage.changes.fused_into) {
      if (into == instruction->name) d.absorbed << Q(from);
    }
  }
  const ManifestKernel* kernel = DumpModel::KernelOf(module, instruction->name);
  std::optional<KernelTiming> timing;
  if (trace_) {
    auto spans = trace_->SpansOfHloOp(module.name, instruction->name);
    if (!spans.empty()) {
      SpanStats stats = trace_->Stats(spans);
      KernelTiming t;
      t.count = stats.count;
      t.total_ns = stats.total_ns;
      SpanInfo info = trace_->Span(spans.front());
      if (info.has_kernel_args) {
        t.bytes_accessed = std::max<int64_t>(0, info.kernel.bytes_accessed);
        t.flops = std::max<int64_t>(0, info.kernel.flops);
      }
      timing = t;
    }
  }
  details_->ShowInstruction(*model_, module, d, kernel, timing, PeakBandwidthGBps());
}

void MainWindow::RevealInstruction(const ManifestModule& module, const QString& instruction) {
  // Stay on the stage shown when it holds the instruction; else go to the optimized module.
  bool here = current_ && current_->kind != StageRef::Kind::kGraphStage && current_->module_id == module.id && outline_ &&
              outline_->FindInstruction(instruction.toStdString()).second != nullptr;
  if (!here) {
    std::optional<StageRef> ref = DumpModel::OptimizedStage(module);
    if (!ref) return;
    stages_->SelectStage(*ref);
    selected_node_ = instruction;
    ShowStage(*ref);
  }
  SelectInView(instruction);
  OnNodeSelected(instruction);
}

void MainWindow::SelectInView(const QString& name) {
  if (diff_mode_) {
    diff_->before_view()->SelectNode(name, true);
    diff_->after_view()->SelectNode(name, true);
  } else {
    graph_->SelectNode(name, true);
  }
}

void MainWindow::OnSpanSelected(qint64 span_id) {
  if (!trace_) return;
  SpanInfo info = trace_->Span(span_id);
  const ManifestModule* module =
      model_ && info.has_kernel_args ? model_->FindModuleByName(std::string(info.kernel.module)) : nullptr;
  if (module != nullptr && !info.kernel.hlo_op.empty()) {
    RevealInstruction(*module, Q(std::string(info.kernel.hlo_op)));
    timeline_->SelectSpan(span_id, false);
    return;
  }
  QStringList args;
  if (info.has_kernel_args) {
    if (!info.kernel.hlo_op.empty()) args << "hlo_op=" + Q(std::string(info.kernel.hlo_op));
    if (!info.kernel.module.empty()) args << "module=" + Q(std::string(info.kernel.module));
    if (!info.kernel.op_names.empty()) args << "op_names=" + Q(std::string(info.kernel.op_names));
    if (!info.kernel.fusion_kind.empty()) args << "fusion_kind=" + Q(std::string(info.kernel.fusion_kind));
    if (info.kernel.bytes_accessed >= 0) args << "bytes_accessed=" + QString::number(info.kernel.bytes_accessed);
    if (info.kernel.flops >= 0) args << "flops=" + QString::number(info.kernel.flops);
    // A collective: how long it waited, and for which device (the arrows join its meeting).
    if (info.kernel.wait_ns >= 0) args << "wait_ns=" + QString::number(info.kernel.wait_ns);
    if (!info.kernel.waited_for.empty()) args << "waited_for=" + Q(std::string(info.kernel.waited_for));
  }
  details_->ShowSpan(Q(std::string(info.name)), Q(std::string(info.category)), info.start_ns, info.duration_ns, args);
}

void MainWindow::OnDetailsLink(const QString& link) {
  // "instruction:MODULE_ID:NAME"
  QStringList parts = link.split(':');
  if (parts.size() >= 3 && parts[0] == "instruction" && model_) {
    if (const ManifestModule* module = model_->FindModule(parts[1].toLongLong())) {
      RevealInstruction(*module, parts.mid(2).join(':'));
    }
  }
}

void MainWindow::SetCompareReport(std::shared_ptr<const CompareReport> report, const QString& path) {
  compare_->SetReport(std::move(report), path);
  if (current_ && current_->kind != StageRef::Kind::kGraphStage) compare_->ShowModule(current_->module_id);
  compare_->setVisible(true);
  QList<int> sizes = vertical_->sizes();
  if (sizes.size() == 3 && sizes[2] < 120) vertical_->setSizes({sizes[0], sizes[1], 240});
}

void MainWindow::SelectXlaKernel(int64_t module_id, const QString& name) {
  const ManifestModule* module = model_ ? model_->FindModule(module_id) : nullptr;
  if (module == nullptr) {
    statusBar()->showMessage(QString("%1: module %2 is not in the open dump").arg(name).arg(module_id));
    return;
  }
  // A kernel's symbol selects the instruction it implements, as the kernels list does.
  QString instruction = name;
  for (const ManifestKernel& kernel : module->kernels) {
    if (Q(kernel.name) == name) instruction = Q(kernel.hlo_instruction);
  }
  RevealInstruction(*module, instruction);
}

void MainWindow::OnSourceRequested(const QString& file, qint64 line, qint64 column) {
  QStringList bases{QDir::currentPath()};
  if (model_) {
    bases << Q(model_->directory());
    bases << QFileInfo(Q(model_->directory())).absolutePath();
  }
  const QString path = ResolveSourcePath(file, bases);
  if (path.isEmpty()) {
    statusBar()->showMessage(QString("%1: no such file here (nor beside the dump); cannot open it at line %2")
                                 .arg(file)
                                 .arg(line));
    return;
  }
  QString what;
  const bool opened = source_opener_ && source_opener_(path, line, column, &what);
  statusBar()->showMessage(opened || !what.isEmpty() ? what : path + ": cannot be opened");
}

double MainWindow::PeakBandwidthGBps() const {
  if (trace_) {
    for (const auto& [key, value] : trace_->metadata()) {
      if (key == "peak_bandwidth_gbps") {
        bool ok = false;
        double gbps = QString::fromStdString(value).toDouble(&ok);
        if (ok && gbps > 0) return gbps;
      }
    }
  }
  return profiler::PeakMemoryBandwidthGBps();
}

bool MainWindow::Busy() const {
  return trace_loading_ || graph_->layout_pending() ||
         (diff_mode_ && (diff_->before_view()->layout_pending() || diff_->after_view()->layout_pending()));
}

bool MainWindow::WaitUntilIdle(int timeout_ms) {
  QElapsedTimer timer;
  timer.start();
  // Twice idle in a row: a finished layout may queue a selection that asks for another.
  int idle = 0;
  while (timer.elapsed() < timeout_ms) {
    QApplication::processEvents(QEventLoop::AllEvents, 20);
    idle = Busy() ? 0 : idle + 1;
    if (idle >= 3) return true;
    QThread::msleep(5);
  }
  return false;
}

void MainWindow::RestoreSettings() {
  QSettings settings;
  if (QByteArray state = settings.value("window/vertical").toByteArray(); !state.isEmpty()) vertical_->restoreState(state);
  if (QByteArray state = settings.value("window/horizontal").toByteArray(); !state.isEmpty()) {
    horizontal_->restoreState(state);
  }
  if (QByteArray geometry = settings.value("window/geometry").toByteArray(); !geometry.isEmpty()) {
    restoreGeometry(geometry);
  } else {
    resize(1600, 1000);
  }
}

void MainWindow::SaveSettings() {
  QSettings settings;
  settings.setValue("window/vertical", vertical_->saveState());
  settings.setValue("window/horizontal", horizontal_->saveState());
  settings.setValue("window/geometry", saveGeometry());
}

void MainWindow::closeEvent(QCloseEvent* event) {
  SaveSettings();
  QMainWindow::closeEvent(event);
}

}  // namespace xlens::viewer
