// Layouts in a child process and the layered layout: dot's worst case drawn layered with a note,
// a slow dot replaced by the layered layout at its time limit, a FIFO named by an HTML label never
// opened, a service destroyed mid-layout not waiting, and the layered geometry itself.
#include <sys/stat.h>
#include <unistd.h>

#include <QElapsedTimer>
#include <QSignalSpy>
#include <QTemporaryDir>
#include <QtTest>
#include <set>

#include "viewer/graph_layout.h"
#include "viewer/layered_layout.h"
#include "viewer/layout_process.h"
#include "viewer/layout_service.h"

namespace {

using namespace xlens::viewer;

// A chain of `n` nodes, each also reading node 0: every layer is crossed by an edge from it.
std::string ResidualChainDot(int n) {
  std::string dot = "digraph g {\n  node [shape=box, fixedsize=true, width=1, height=0.4];\n";
  for (int i = 1; i < n; ++i) {
    dot += "  n" + std::to_string(i - 1) + " -> n" + std::to_string(i) + ";\n";
    if (i > 1) dot += "  n0 -> n" + std::to_string(i) + ";\n";
  }
  return dot + "}\n";
}

}  // namespace

class LayoutProcessTest : public QObject {
  Q_OBJECT
 private slots:
  void RanksFollowLongestPathsAndBreakCycles() {
    // 0 -> 1 -> 2 -> 0 (a cycle), and 0 -> 3 -> 4 -> 2.
    std::vector<std::pair<int, int>> edges = {{0, 1}, {1, 2}, {2, 0}, {0, 3}, {3, 4}, {4, 2}};
    std::vector<int> rank = LongestPathRanks(5, edges);
    QCOMPARE(rank[0], 0);
    QCOMPARE(rank[1], 1);
    QCOMPARE(rank[3], 1);
    QCOMPARE(rank[4], 2);
    QCOMPARE(rank[2], 3);  // the longest way there, through 3 and 4
  }

  void OrderingWorkGrowsWithTheSquareOfLayerWidths() {
    auto work = [](int n) {
      std::vector<std::pair<int, int>> edges;
      for (int i = 1; i < n; ++i) {
        edges.emplace_back(i - 1, i);
        if (i > 1) edges.emplace_back(0, i);
      }
      return EstimateOrderingWork(n, edges, LongestPathRanks(n, edges));
    };
    QVERIFY(work(50) < kMaxDotOrderingWork);   // dot: 0.1 s
    QVERIFY(work(100) > kMaxDotOrderingWork);  // dot: 10 s
  }

  void LayeredLayoutKeepsLayersApartAndEdgesOnTheirEnds() {
    LayeredGraph graph;
    const int n = 300;
    for (int i = 0; i < n; ++i) graph.sizes.emplace_back(60 + (i % 3) * 10, 24);
    for (int i = 1; i < n; ++i) {
      graph.edges.emplace_back(i - 1, i);
      graph.edges.emplace_back(0, i);
      if (i % 7 == 0) graph.edges.emplace_back(i, i / 2);  // back edges: cycles
    }
    LayeredResult result = LayOutLayered(graph);
    QCOMPARE(result.centres.size(), size_t(n));
    std::vector<QRectF> boxes;
    for (int i = 0; i < n; ++i) {
      QRectF box(result.centres[i] - QPointF(graph.sizes[i].width() / 2, graph.sizes[i].height() / 2), graph.sizes[i]);
      QVERIFY(result.bounds.contains(box));
      boxes.push_back(box);
    }
    for (int i = 0; i < n; ++i) {
      for (int j = i + 1; j < n; ++j) QVERIFY2(!boxes[i].intersects(boxes[j]), "two nodes overlap");
    }
    for (size_t e = 0; e < graph.edges.size(); ++e) {
      auto [from, to] = graph.edges[e];
      const std::vector<QPointF>& points = result.edges[e].points;
      QVERIFY(points.size() >= 2);
      QCOMPARE(points.front().x(), result.centres[from].x());
      QCOMPARE(points.back().x(), result.centres[to].x());
      if (result.rank[to] > result.rank[from]) {
        QVERIFY(result.centres[to].y() > result.centres[from].y());
      }
      // A long edge leaves its column only in the gaps between layers: never through a node.
      for (size_t k = 1; k + 1 < points.size(); ++k) {
        for (const QRectF& box : boxes) {
          QVERIFY(!box.contains(points[k]));
        }
      }
    }
  }

  void ResidualChainIsDrawnLayeredWithANote() {
    QVERIFY(!LayoutProgram().empty());
    QElapsedTimer timer;
    timer.start();
    auto layout = LayOutInChild(ResidualChainDot(990), LayoutLimits{});
    QVERIFY2(layout.ok(), layout.ok() ? "" : layout.status().message().c_str());
    QVERIFY(timer.elapsed() < 5000);
    QCOMPARE(layout->engine, QString("layered"));
    QVERIFY(layout->note.contains("layered"));
    QCOMPARE(layout->nodes.size(), size_t(990));
    QCOMPARE(layout->edges.size(), size_t(989 + 988));
  }

  void SmallGraphsStayWithGraphviz() {
    auto layout = LayOutInChild("digraph { a -> b; b -> c; a -> c; }", LayoutLimits{});
    QVERIFY(layout.ok());
    QCOMPARE(layout->engine, QString("dot"));
    QVERIFY(layout->note.isEmpty());
    QCOMPARE(layout->nodes.size(), size_t(3));
  }

  void SlowGraphvizIsStoppedAndReplaced() {
    // Under the threshold, but more than dot finishes in 0.2 s.
    LayoutLimits limits;
    limits.graphviz_seconds = 0.2;
    QElapsedTimer timer;
    timer.start();
    auto layout = LayOutInChild(ResidualChainDot(70), limits);
    QVERIFY2(layout.ok(), layout.ok() ? "" : layout.status().message().c_str());
    QVERIFY(timer.elapsed() < 3000);
    QCOMPARE(layout->engine, QString("layered"));
    QVERIFY2(layout->note.contains("did not finish"), qPrintable(layout->note));
  }

  void BadDotIsAnErrorNotAFallback() {
    auto layout = LayOutInChild("digraph { a -> ", LayoutLimits{});
    QVERIFY(!layout.ok());
    QVERIFY(QString::fromStdString(layout.status().message()).startsWith("DOT:"));
  }

  void FilesNamedByTheGraphAreNeverOpened() {
    QTemporaryDir dir;
    const std::string fifo = dir.filePath("image.png").toStdString();
    QCOMPARE(::mkfifo(fifo.c_str(), 0600), 0);
    std::string dot = "digraph { a [label=<<TABLE><TR><TD><IMG SRC=\"" + fifo + "\"/></TD><TD>text</TD></TR></TABLE>>];"
                      " b [image=\"" + fifo + "\", shapefile=\"" + fifo + "\", shape=epsf];"
                      " subgraph cluster_x { label=< <img src=\"" + fifo + "\"/> >; c; }"
                      " fontpath=\"" + dir.path().toStdString() + "\"; a -> b -> c; }";
    LayoutLimits limits;
    limits.graphviz_seconds = 5;
    QElapsedTimer timer;
    timer.start();
    auto layout = LayOutInChild(dot, limits);
    QVERIFY2(layout.ok(), layout.ok() ? "" : layout.status().message().c_str());
    QCOMPARE(layout->engine, QString("dot"));  // not the fallback after a blocked dot
    QVERIFY(timer.elapsed() < 4000);
    int a = layout->FindNode("a");
    QVERIFY(a >= 0);
    QCOMPARE(layout->nodes[a].label.join(""), QString("text"));
  }

  void SerializedLayoutsComeBackWhole() {
    auto layout = LayoutDot("digraph { subgraph cluster_c { label=\"C\"; a; } a -> b [style=dashed]; }");
    QVERIFY(layout.ok());
    auto back = DeserializeLayout(SerializeLayout(*layout));
    QVERIFY(back.ok());
    QCOMPARE(back->nodes.size(), layout->nodes.size());
    QCOMPARE(back->edges.size(), layout->edges.size());
    QCOMPARE(back->clusters.size(), size_t(1));
    QCOMPARE(back->nodes[0].box, layout->nodes[0].box);
    QCOMPARE(back->edges[0].path, layout->edges[0].path);
    QCOMPARE(back->engine, QString("dot"));
    QByteArray damaged = SerializeLayout(*layout);
    damaged.truncate(damaged.size() / 2);
    QVERIFY(!DeserializeLayout(damaged).ok());
  }

  void DestroyingTheServiceDoesNotWaitForALayout() {
    auto* service = new LayoutService();
    LayoutLimits limits;
    limits.graphviz_seconds = 60;
    service->SetLimits(limits);
    // Under the threshold and dot takes seconds on it.
    service->Request(ResidualChainDot(75));
    QTest::qWait(300);
    QElapsedTimer timer;
    timer.start();
    delete service;
    QVERIFY2(timer.elapsed() < 1000, qPrintable(QString("took %1 ms").arg(timer.elapsed())));
  }
};

QTEST_MAIN(LayoutProcessTest)
#include "layout_process_test.moc"
