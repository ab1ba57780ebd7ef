// The whole window on a real dump (the fixture's: the MNIST softmax training step compiled with
// every pass dumped and run with a trace, plus a clustered TensorFlow graph), driven as a user
// drives it. What it checks comes from outside the viewer: manifest.json as the compiler wrote it,
// and the trace as the profiler's own reader reads it.
#include <QSignalSpy>
#include <QTest>
#include <QTreeWidgetItemIterator>
#include <cstdlib>
#include <map>
#include <set>

#include "profiler/chrome_trace_reader.h"
#include "viewer/diff_view.h"
#include "viewer/graph_view.h"
#include "viewer/main_window.h"
#include "viewer/stage_diff.h"
#include "viewer/timeline_view.h"

using namespace xlens;
using namespace xlens::viewer;

namespace {

QString DumpDir() { return QString::fromLocal8Bit(std::getenv("XLENS_VIEWER_TEST_DUMP")); }

// Kernel spans per (module, hlo_op), counted by the profiler's reader.
std::map<std::pair<std::string, std::string>, int64_t> KernelSpansInTrace(const std::string& path) {
  std::map<std::pair<std::string, std::string>, int64_t> counts;
  auto trace = profiler::ReadChromeTrace(path);
  if (!trace.ok()) return counts;
  for (const profiler::TraceEvent& event : trace->events) {
    if (!profiler::IsKernelCategory(event.category)) continue;
    const profiler::TraceArg* op = profiler::FindArg(event, "hlo_op");
    const profiler::TraceArg* module = profiler::FindArg(event, "module");
    if (op == nullptr || module == nullptr) continue;
    const auto* op_name = std::get_if<std::string>(&op->value);
    const auto* module_name = std::get_if<std::string>(&module->value);
    if (op_name && module_name) ++counts[{*module_name, *op_name}];
  }
  return counts;
}

// The module of the dump that ran (its kernels are in the trace): the MNIST step.
const ManifestModule* StepModule(const DumpModel& model) {
  for (const ManifestModule& module : model.manifest().modules) {
    if (module.name.find("mnist") != std::string::npos || module.name.find("train") != std::string::npos) return &module;
  }
  return model.manifest().modules.empty() ? nullptr : &model.manifest().modules.front();
}

}  // namespace

class MainWindowTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY2(!DumpDir().isEmpty(), "XLENS_VIEWER_TEST_DUMP is not set (the viewer_make_test_dump fixture sets it)");
    QVERIFY2(QFile::exists(DumpDir() + "/manifest.json"), qPrintable(DumpDir() + " has no manifest.json"));
  }

  void opensTheDumpWithoutProblems() {
    MainWindow window;
    auto problems = window.OpenDump(DumpDir());
    QVERIFY2(problems.empty(), problems.empty() ? "" : problems.front().c_str());
    QVERIFY(window.WaitUntilIdle(60000));
    QVERIFY(window.trace() != nullptr);
    QVERIFY(window.model()->manifest().modules.size() >= 1);
    QVERIFY(!window.model()->manifest().graphs.empty());
    // It opens on the optimized module: the last dumped stage, drawn.
    QVERIFY(window.current_stage().has_value());
    QVERIFY(window.graph()->graph_layout() != nullptr);
    QVERIFY(window.graph()->graph_layout()->nodes.size() > 5);
  }

  // Every stage of every module and graph opens and draws; the ones without a dump say so.
  void stepsThroughEveryStage() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    int drawn = 0, stages = 0;
    for (const ManifestModule& module : window.model()->manifest().modules) {
      for (int i = 0; i < static_cast<int>(module.stages.size()); ++i) {
        StageRef ref{StageRef::Kind::kPass, module.id, -1, i};
        window.stages()->SelectStage(ref);
        emit window.stages()->stageActivated(ref);
        QVERIFY(window.WaitUntilIdle(60000));
        ++stages;
        if (DumpModel::HloFileOf(module.stages[i]).empty()) continue;
        QVERIFY2(window.graph()->graph_layout() != nullptr, module.stages[i].pass.c_str());
        QVERIFY2(window.graph()->error().isEmpty(), qPrintable(window.graph()->error()));
        ++drawn;
      }
    }
    for (int g = 0; g < static_cast<int>(window.model()->manifest().graphs.size()); ++g) {
      const ManifestGraph& graph = window.model()->manifest().graphs[g];
      for (int s = 0; s < static_cast<int>(graph.stages.size()); ++s) {
        if (DumpModel::DotFileOf(graph.stages[s]).empty()) continue;
        StageRef ref{StageRef::Kind::kGraphStage, 0, g, s};
        emit window.stages()->stageActivated(ref);
        QVERIFY(window.WaitUntilIdle(60000));
        QVERIFY2(window.graph()->graph_layout() != nullptr, graph.stages[s].name.c_str());
        QVERIFY(!window.graph()->graph_layout()->nodes.empty());
        ++drawn;
      }
    }
    QVERIFY(stages > 20);
    QVERIFY(drawn > 10);
    QVERIFY2(window.Problems().isEmpty(), qPrintable(window.Problems().join("\n")));
  }

  // The viewer's diff of two dumped stages is what the compiler recorded the pass changed, and
  // the diff view draws exactly those borders.
  void diffBordersAgreeWithTheManifest() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    window.SetDiffMode(true);
    int checked = 0, fused = 0;
    for (const ManifestModule& each : window.model()->manifest().modules) {
    const ManifestModule* module = &each;
    for (int i = 0; i < static_cast<int>(module->stages.size()); ++i) {
      const ManifestStage& stage = module->stages[i];
      if (!stage.changed || DumpModel::HloFileOf(stage).empty()) continue;
      if (DumpModel::PreviousHloFile(*module, StageRef{StageRef::Kind::kPass, module->id, -1, i}).empty()) continue;
      StageRef ref{StageRef::Kind::kPass, module->id, -1, i};
      emit window.stages()->stageActivated(ref);
      QVERIFY(window.WaitUntilIdle(60000));
      const StageDiff& diff = window.diff()->diff();
      const ManifestStageChanges& recorded = stage.changes;
      auto join = [](const std::vector<std::string>& names) {
        std::string out;
        for (const std::string& name : names) out += name + " ";
        return out;
      };
      const std::string where = "module " + std::to_string(module->id) + " stage " + stage.pass + " (step " +
                                std::to_string(stage.step) + "): ";
      QVERIFY2(diff.added == recorded.added, (where + "added: viewer " + join(diff.added) + "| manifest " + join(recorded.added)).c_str());
      QVERIFY2(diff.removed == recorded.removed,
               (where + "removed: viewer " + join(diff.removed) + "| manifest " + join(recorded.removed)).c_str());
      QVERIFY2(diff.modified == recorded.modified,
               (where + "modified: viewer " + join(diff.modified) + "| manifest " + join(recorded.modified)).c_str());
      QVERIFY2(diff.fused_into == recorded.fused_into, (where + "fused_into differs").c_str());
      // The borders drawn.
      auto border_after = [&](const std::string& name) {
        const QString q = QString::fromStdString(name);
        if (NodeItem* node = window.diff()->after_view()->FindNodeItem(q)) return node->border();
        if (ClusterItem* cluster = window.diff()->after_view()->FindClusterItem(q)) return cluster->border();
        return BorderRole::kNone;
      };
      auto border_before = [&](const std::string& name) {
        const QString q = QString::fromStdString(name);
        if (NodeItem* node = window.diff()->before_view()->FindNodeItem(q)) return node->border();
        if (ClusterItem* cluster = window.diff()->before_view()->FindClusterItem(q)) return cluster->border();
        return BorderRole::kNone;
      };
      for (const std::string& name : recorded.added) QCOMPARE(border_after(name), BorderRole::kAdded);
      for (const std::string& name : recorded.removed) QCOMPARE(border_before(name), BorderRole::kRemoved);
      for (const auto& [name, into] : recorded.fused_into) {
        QCOMPARE(border_before(name), BorderRole::kFusedInto);
        ++fused;
      }
      ++checked;
    }
    }
    QVERIFY2(checked >= 8, qPrintable(QString("only %1 changed stages checked").arg(checked)));
    QVERIFY2(fused > 0, "no stage fused anything");
  }

  // A kernel span clicked on the timeline selects its fusion node and the pass that created it;
  // the node lights up exactly its spans (counted by the profiler's own reader).
  void kernelSpanSelectsItsFusionAndCreatingPass() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    QVERIFY(window.trace() != nullptr);
    const auto expected = KernelSpansInTrace(window.model()->trace_path());
    QVERIFY(!expected.empty());
    const TraceModel& trace = *window.trace();
    // A fusion kernel's span.
    SpanId fusion_span = kNoSpan;
    for (SpanId id = 0; id < trace.span_count() && fusion_span == kNoSpan; ++id) {
      SpanInfo info = trace.Span(id);
      if (info.has_kernel_args && !info.kernel.fusion_kind.empty() && info.kernel.hlo_op.rfind("fusion", 0) == 0) {
        fusion_span = id;
      }
    }
    QVERIFY(fusion_span != kNoSpan);
    const SpanInfo info = trace.Span(fusion_span);
    const QString hlo_op = QString::fromUtf8(info.kernel.hlo_op.data(), info.kernel.hlo_op.size());
    const std::string module_name(info.kernel.module);

    emit window.timeline()->spanSelected(fusion_span);
    QVERIFY(window.WaitUntilIdle(60000));
    QCOMPARE(window.graph()->selected(), hlo_op);
    QCOMPARE(window.selected_node(), hlo_op);
    // The Stages pane marks the pass that created the fusion: one that added it.
    auto creating = window.stages()->HighlightedStage();
    QVERIFY(creating.has_value());
    const ManifestModule* module = window.model()->FindModule(creating->module_id);
    QCOMPARE(module->name, module_name);
    const ManifestStage& stage = module->stages[creating->index];
    QVERIFY2(std::find(stage.changes.added.begin(), stage.changes.added.end(), hlo_op.toStdString()) !=
                 stage.changes.added.end(),
             stage.pass.c_str());
    // The details name its kernel and its time.
    QVERIFY(window.details()->SummaryText().contains(hlo_op));
    QVERIFY(window.details()->SummaryText().contains("time per run"));
    // Exactly its spans light up.
    const int64_t want = expected.at({module_name, hlo_op.toStdString()});
    QCOMPARE(window.highlighted_stats().count, want);
    QCOMPARE(static_cast<int64_t>(window.timeline()->highlightedSpans().size()), want);
    for (SpanId id : window.timeline()->highlightedSpans()) {
      SpanInfo lit = trace.Span(id);
      QCOMPARE(QString::fromUtf8(lit.kernel.hlo_op.data(), lit.kernel.hlo_op.size()), hlo_op);
    }
  }

  // Clicking a node in the graph lights up its spans, and a node without kernels none.
  void nodeHighlightsExactlyItsSpans() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    const auto expected = KernelSpansInTrace(window.model()->trace_path());
    const ManifestModule* module = window.model()->FindModule(window.current_stage()->module_id);
    int checked = 0;
    for (const ManifestKernel& kernel : module->kernels) {
      const QString name = QString::fromStdString(kernel.hlo_instruction);
      if (!window.graph()->SelectNode(name, true)) continue;
      emit window.graph()->nodeSelected(name);
      auto it = expected.find({module->name, kernel.hlo_instruction});
      const int64_t want = it == expected.end() ? 0 : it->second;
      QCOMPARE(window.highlighted_stats().count, want);
      ++checked;
    }
    QVERIFY(checked >= 3);
    // A parameter launches nothing.
    const HloOutlineComputation* entry = window.current_outline()->entry();
    for (const HloOutlineInstruction& instruction : entry->instructions) {
      if (instruction.opcode != "parameter") continue;
      emit window.graph()->nodeSelected(QString::fromStdString(instruction.name));
      QCOMPARE(window.highlighted_stats().count, int64_t{0});
      break;
    }
  }

  // Search finds a node by an op_name from its metadata, and --select-style selection by name.
  void searchFindsANodeByOpName() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    const HloOutlineComputation* entry = window.current_outline()->entry();
    QString op_name, owner;
    for (const HloOutlineInstruction& instruction : entry->instructions) {
      if (!instruction.op_names.empty()) {
        op_name = QString::fromStdString(instruction.op_names.back());
        owner = QString::fromStdString(instruction.name);
        break;
      }
    }
    QVERIFY2(!op_name.isEmpty(), "the optimized module carries no op_name metadata");
    const int hits = window.graph()->Search(QRegularExpression::escape(op_name));
    QVERIFY(hits >= 1);
    QVERIFY(window.graph()->hits().contains(owner));
    std::string error;
    QVERIFY(window.SelectByName(owner, &error));
    QCOMPARE(window.graph()->selected(), owner);
    QVERIFY(!window.SelectByName("no_such_instruction_anywhere", &error));
    QVERIFY(QString::fromStdString(error).contains("no_such_instruction_anywhere"));
  }

  // A node of a clustering stage links to the kernels whose op_names carry it.
  void clusteringNodeLinksToKernels() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    const Manifest& manifest = window.model()->manifest();
    QVERIFY(!manifest.graphs.empty());
    // A node in a cluster, whose name some kernel's op_names carry.
    std::string node;
    for (const ManifestGraph& graph : manifest.graphs) {
      for (const ManifestCluster& cluster : graph.clusters) {
        for (const std::string& member : cluster.nodes) {
          if (node.empty() && !window.model()->KernelsWithOpName(member).empty()) node = member;
        }
      }
    }
    QVERIFY2(!node.empty(), "no clustered node is named by a kernel's op_names");
    QVERIFY(window.SelectStageByName("mark_for_compilation"));
    QVERIFY(window.WaitUntilIdle(60000));
    QVERIFY(window.graph()->SelectNode(QString::fromStdString(node), true));
    emit window.graph()->nodeSelected(QString::fromStdString(node));
    QVERIFY(window.details()->SummaryText().contains("cluster_"));
    QVERIFY(window.details()->SummaryText().contains("instruction:"));
  }

  // Stepping through the passes that changed the module visits exactly the changed ones.
  void stepsThroughChangedPasses() {
    MainWindow window;
    window.OpenDump(DumpDir());
    QVERIFY(window.WaitUntilIdle(60000));
    const ManifestModule* module = window.model()->FindModule(window.current_stage()->module_id);
    StageRef first{StageRef::Kind::kPass, module->id, -1, 0};
    emit window.stages()->stageActivated(first);
    std::vector<int> visited;
    while (window.StepChangedPass(+1)) visited.push_back(window.current_stage()->index);
    std::vector<int> want;
    for (int i = 1; i < static_cast<int>(module->stages.size()); ++i) {
      if (module->stages[i].changed && !DumpModel::HloFileOf(module->stages[i]).empty()) want.push_back(i);
    }
    QCOMPARE(visited, want);
  }

  // One-key shortcuts belong to the window, except where the focused pane uses the key: d toggles
  // diff mode from the graph, and pans the timeline when the timeline has focus.
  void keysGoWhereTheFocusIs() {
    MainWindow window;
    window.OpenDump(DumpDir());
    window.show();
    QVERIFY(QTest::qWaitForWindowActive(&window));
    QVERIFY(window.WaitUntilIdle(60000));
    window.graph()->setFocus();
    QTest::keyClick(window.graph(), Qt::Key_D);
    QVERIFY(window.diff_mode());
    QTest::keyClick(window.graph(), Qt::Key_D);
    QVERIFY(!window.diff_mode());
    window.timeline()->setFocus();
    window.timeline()->SetVisibleRange(window.trace()->start_ns(),
                                       window.trace()->start_ns() + (window.trace()->end_ns() - window.trace()->start_ns()) / 4);
    const double before = window.timeline()->visibleStart();
    QTest::keyClick(window.timeline(), Qt::Key_D);
    QVERIFY(!window.diff_mode());
    QVERIFY(window.timeline()->visibleStart() > before);
  }

  // A broken dump opens what can be opened and says what was wrong.
  void brokenDumpsSayWhatIsWrong() {
    const QString broken = QString(XLENS_TESTDATA_DIR) + "/broken_dumps";
    QDir dir(broken);
    const QStringList cases = dir.entryList(QDir::Dirs | QDir::NoDotAndDotDot);
    QVERIFY(cases.size() >= 4);
    for (const QString& name : cases) {
      MainWindow window;
      auto problems = window.OpenDump(broken + "/" + name);
      window.WaitUntilIdle(30000);
      QVERIFY2(!window.Problems().isEmpty(), qPrintable(name + " gave no message"));
      // Every message names a file of the case.
      for (const QString& problem : window.Problems()) {
        QVERIFY2(problem.contains(name), qPrintable(name + ": " + problem));
      }
      // Whatever is listed can be clicked through without a crash.
      if (window.model()->has_manifest()) {
        for (const ManifestModule& module : window.model()->manifest().modules) {
          for (int i = 0; i < static_cast<int>(module.stages.size()); ++i) {
            emit window.stages()->stageActivated(StageRef{StageRef::Kind::kPass, module.id, -1, i});
            window.WaitUntilIdle(30000);
          }
        }
      }
    }
    MainWindow window;
    window.OpenDump("/nonexistent/dump/dir");
    QVERIFY(window.Problems().join("\n").contains("no such directory"));
  }

  void brokenTracesSayWhatIsWrong() {
    const QString broken = QString(XLENS_TESTDATA_DIR) + "/broken_traces";
    QDir dir(broken);
    const QStringList files = dir.entryList(QDir::Files);
    QVERIFY(!files.isEmpty());
    for (const QString& name : files) {
      MainWindow window;
      window.OpenDump(DumpDir(), broken + "/" + name);
      QVERIFY(window.WaitUntilIdle(30000));
      QVERIFY2(window.Problems().join("\n").contains(name), qPrintable(name + ": " + window.Problems().join("\n")));
      QVERIFY(window.trace() == nullptr);
      // The graph half still works.
      QVERIFY(window.graph()->graph_layout() != nullptr);
    }
  }
};

QTEST_MAIN(MainWindowTest)
#include "main_window_test.moc"
