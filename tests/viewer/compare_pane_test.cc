// The Compare pane on a real `xlens compare --json` report (tests/dump/testdata/compare/step.json:
// XLA's CPU dump and profile of a jitted training step, module 18, beside xlens's kernels for it
// and their times) with the two
// dump files of that module open: its rows are the report's, in order and coloured by kind, and
// selecting a matched pair selects XLA's kernel in the graph as the kernels list does.
#include <QTest>

#include "dump/compare_report.h"
#include "viewer/compare_pane.h"
#include "viewer/graph_view.h"
#include "viewer/main_window.h"
#include "viewer/viewer_options.h"

using namespace xlens;
using namespace xlens::viewer;

namespace {

QString Testdata(const QString& path) { return QString(XLENS_TESTDATA_DIR) + "/" + path; }
QString ReportPath() { return Testdata("../../dump/testdata/compare/step.json"); }

CompareRowKind KindOf(const QTreeWidgetItem* item) {
  return static_cast<CompareRowKind>(item->data(ComparePane::kXlaKernel, ComparePane::kRowKindRole).toInt());
}

}  // namespace

class ComparePaneTest : public QObject {
  Q_OBJECT

 private slots:
  void RowsAreTheReports() {
    StatusOr<CompareReport> read = ReadCompareReport(ReportPath().toStdString());
    QVERIFY2(read.ok(), read.status().message().c_str());
    auto report = std::make_shared<const CompareReport>(*read);
    const CompareModule& m = report->modules[0];

    ComparePane pane;
    pane.SetReport(report, ReportPath());
    QCOMPARE(pane.current_module(), &m);
    QTreeWidget* table = pane.table();
    size_t unpaired_xla = 0, unpaired_xlens = 0;
    for (const CompareKernel& k : m.xla) unpaired_xla += k.pair < 0;
    for (const CompareKernel& k : m.xlens) unpaired_xlens += k.pair < 0;
    const size_t rows = m.pairs.size() + m.xla_fused_more.size() + m.xlens_fused_more.size() + unpaired_xla + unpaired_xlens;
    QCOMPARE(size_t(table->topLevelItemCount()), rows);

    int row = 0;
    for (const ComparePair& p : m.pairs) {
      const QTreeWidgetItem* item = table->topLevelItem(row++);
      QCOMPARE(item->text(ComparePane::kXlaKernel), QString::fromStdString(p.xla));
      QCOMPARE(item->text(ComparePane::kXlensKernel), QString::fromStdString(p.xlens));
      QCOMPARE(item->text(ComparePane::kXlaKind), QString::fromStdString(m.xla[p.xla_index].kind));
      QCOMPARE(item->text(ComparePane::kXlensKind), QString::fromStdString(m.xlens[p.xlens_index].kind));
      QCOMPARE(item->text(ComparePane::kOverlap), QString::number(p.jaccard, 'f', 2));
      QCOMPARE(KindOf(item), p.exact ? CompareRowKind::kExactPair : CompareRowKind::kPair);
      QCOMPARE(item->background(ComparePane::kNote).color(), ComparePane::RowColor(KindOf(item)));
      // Both sides were timed: both times and xlens's over XLA's.
      const CompareKernelTime& a = *m.xla[p.xla_index].time;
      const CompareKernelTime& b = *m.xlens[p.xlens_index].time;
      // Per run: XLA's profile has 3 runs of the step, xlens's --run 4.
      QCOMPARE(a.events, int64_t(3));
      QCOMPARE(b.events, int64_t(4));
      const double mean_a = a.total_us / 3, mean_b = b.total_us / 4;
      QCOMPARE(item->text(ComparePane::kXlaTime), QString::number(mean_a, 'f', 3));
      QCOMPARE(item->text(ComparePane::kXlensTime), QString::number(mean_b, 'f', 3));
      QCOMPARE(item->text(ComparePane::kRatio), QString::number(mean_b / mean_a, 'f', 2) + "x");
    }
    for (const CompareFusedMore& note : m.xla_fused_more) {
      const QTreeWidgetItem* item = table->topLevelItem(row++);
      QCOMPARE(KindOf(item), CompareRowKind::kXlaFusedMore);
      QCOMPARE(item->text(ComparePane::kXlaKernel), QString::fromStdString(note.kernel));
      QVERIFY2(item->text(ComparePane::kNote).startsWith("XLA fused more"), qPrintable(item->text(ComparePane::kNote)));
    }
    for (const CompareFusedMore& note : m.xlens_fused_more) {
      const QTreeWidgetItem* item = table->topLevelItem(row++);
      QCOMPARE(KindOf(item), CompareRowKind::kXlensFusedMore);
      QCOMPARE(item->text(ComparePane::kXlensKernel), QString::fromStdString(note.kernel));
    }
    for (const CompareKernel& k : m.xla) {
      if (k.pair >= 0) continue;
      const QTreeWidgetItem* item = table->topLevelItem(row++);
      QCOMPARE(KindOf(item), CompareRowKind::kOnlyXla);
      QCOMPARE(item->text(ComparePane::kXlaKernel), QString::fromStdString(k.name));
      QVERIFY(item->text(ComparePane::kNote).contains(QString::fromStdString(k.reason)));
    }
    QCOMPARE(row, int(rows - unpaired_xlens));
    // Each kind of difference has a colour of its own.
    QVERIFY(ComparePane::RowColor(CompareRowKind::kPair) != ComparePane::RowColor(CompareRowKind::kOnlyXla));
    QVERIFY(ComparePane::RowColor(CompareRowKind::kXlaFusedMore) != ComparePane::RowColor(CompareRowKind::kXlensFusedMore));
    // A module the report lacks changes nothing.
    QVERIFY(!pane.ShowModule(3));
    QCOMPARE(pane.current_module(), &m);
  }

  void ShowsTimesAndTheirRatio() {
    StatusOr<CompareReport> read = ParseCompareReport(R"({"directory": "d", "modules": [{"id": 1, "name": "m",
      "before": "b", "after": "a", "backend": "cpu",
      "xla": {"kernel_count": 1, "kernels": [{"name": "f", "kind": "kLoop", "op_names": [], "instructions": ["f"],
              "source": null, "matched": "g", "trace": {"events": 2, "total_us": 10.0}}]},
      "xlens": {"kernel_count": 1, "kernels": [{"name": "g", "kind": "kLoop", "op_names": [], "instructions": ["g"],
                "source": null, "matched": "f", "trace": {"events": 4, "total_us": 5.0}}]},
      "pairs": [{"xla": "f", "xlens": "g", "jaccard": 1.0, "shared_atoms": 2, "exact": true, "by": "atoms"}],
      "xla_fused_more": [], "xlens_fused_more": []}], "skipped": []})");
    QVERIFY2(read.ok(), read.status().message().c_str());
    ComparePane pane;
    pane.SetReport(std::make_shared<const CompareReport>(*read), "r.json");
    QCOMPARE(pane.table()->topLevelItemCount(), 1);
    const QTreeWidgetItem* item = pane.table()->topLevelItem(0);
    QCOMPARE(KindOf(item), CompareRowKind::kExactPair);
    // 10 us in 2 runs against 5 us in 4: 5.0 and 1.25 us a run, xlens 0.25x XLA's.
    QCOMPARE(item->text(ComparePane::kXlaTime), QString("5.000"));
    QCOMPARE(item->text(ComparePane::kXlensTime), QString("1.250"));
    QCOMPARE(item->text(ComparePane::kRatio), QString("0.25x"));
    QCOMPARE(item->toolTip(ComparePane::kXlensTime), QString("5.000 us in 4 runs"));
  }

  void CompareIsAnOption() {
    StatusOr<ViewerOptions> options = ParseViewerOptions({"jd", "--compare", "step.json", "--module", "18"});
    QVERIFY2(options.ok(), options.status().message().c_str());
    QCOMPARE(options->compare, QString("step.json"));
    QCOMPARE(options->dump_dir, QString("jd"));
    StatusOr<ViewerOptions> empty = ParseViewerOptions({"jd", "--compare="});
    QVERIFY(!empty.ok());
    QVERIFY2(empty.status().message().find("--compare expects a file") != std::string::npos, empty.status().message().c_str());
    QVERIFY(!ParseViewerOptions({"jd", "--compare"}).ok());
  }

  void SelectingAPairSelectsXlasKernel() {
    MainWindow window;
    window.resize(1400, 900);
    window.OpenDump(Testdata("compare_dump"));
    QVERIFY(window.model() != nullptr && window.model()->FindModule(18) != nullptr);
    StatusOr<CompareReport> read = ReadCompareReport(ReportPath().toStdString());
    QVERIFY2(read.ok(), read.status().message().c_str());
    window.SetCompareReport(std::make_shared<const CompareReport>(*read), ReportPath());
    window.show();
    QVERIFY(window.WaitUntilIdle(60000));
    ComparePane* pane = window.compare();
    QVERIFY(pane->isVisible());
    QVERIFY(pane->current_module() != nullptr);
    QCOMPARE(pane->current_module()->id, int64_t(18));

    // The pair dot.1 <-> fusion.5: XLA's dot.1 selected in the optimized module's graph.
    QTreeWidgetItem* pair = nullptr;
    for (int i = 0; i < pane->table()->topLevelItemCount(); ++i) {
      QTreeWidgetItem* item = pane->table()->topLevelItem(i);
      if (item->text(ComparePane::kXlaKernel) == "dot.1") pair = item;
    }
    QVERIFY(pair != nullptr);
    QCOMPARE(pair->text(ComparePane::kXlensKernel), QString("fusion.5"));
    pane->table()->setCurrentItem(pair);
    QVERIFY(window.WaitUntilIdle(60000));
    QCOMPARE(window.selected_node(), QString("dot.1"));
    QCOMPARE(window.graph()->selected(), QString("dot.1"));
    QVERIFY(window.current_stage().has_value());
    QCOMPARE(window.current_stage()->module_id, int64_t(18));

    // Another pair, a fusion this time; the table keeps its rows and its selection.
    const int rows = pane->table()->topLevelItemCount();
    QTreeWidgetItem* fusion = pane->table()->topLevelItem(1);
    QCOMPARE(fusion->text(ComparePane::kXlaKernel), QString("add_tanh_fusion"));
    pane->table()->setCurrentItem(fusion);
    QVERIFY(window.WaitUntilIdle(60000));
    QCOMPARE(window.selected_node(), QString("add_tanh_fusion"));
    QCOMPARE(pane->table()->topLevelItemCount(), rows);
    QCOMPARE(pane->table()->currentItem(), fusion);

    // The other way: a kernel selected by name (as the graph or timeline does) selects its row,
    // and one the report has no row for clears it.
    std::string error;
    QVERIFY2(window.SelectByName("dot", &error), error.c_str());
    QVERIFY(pane->table()->currentItem() != nullptr);
    QCOMPARE(pane->table()->currentItem()->text(ComparePane::kXlaKernel), QString("dot"));
    QCOMPARE(window.selected_node(), QString("dot"));
    QVERIFY2(window.SelectByName("x.1", &error), error.c_str());
    QCOMPARE(pane->table()->currentItem(), nullptr);
  }
};

QTEST_MAIN(ComparePaneTest)
#include "compare_pane_test.moc"
