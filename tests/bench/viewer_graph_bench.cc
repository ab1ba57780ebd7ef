// The graph view's costs on generated HLO of 250 to 5,000 instructions: reading the outline,
// writing DOT, Graphviz's layout (the part LayoutService keeps off the UI thread), building the
// scene, and one frame of panning and of the whole graph zoomed out (the UI thread's share).
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QScrollBar>
#include <QSettings>
#include <QWindow>
#include <cstdlib>
#include <fstream>
#include <string>

#include "viewer/graph_layout.h"
#include "viewer/graph_view.h"
#include "viewer/hlo_outline.h"
#include "viewer/layout_process.h"

namespace {

using namespace xlens::viewer;

// `n` elementwise instructions, each reading the previous one and one up to 13 back, as an
// unrolled training step looks to dot (long edges make most of its work).
std::string GeneratedModule(int n) {
  std::string text = "HloModule generated\n\nENTRY %main (p: f32[64]) -> f32[64] {\n  %i0 = f32[64]{0} parameter(0)\n";
  const char* opcodes[] = {"add", "multiply", "subtract", "maximum"};
  for (int i = 1; i < n; ++i) {
    int back = std::max(0, i - 1 - (i * 7 + 1) % 13);
    text += std::string(i == n - 1 ? "  ROOT " : "  ") + "%i" + std::to_string(i) + " = f32[64]{0} " + opcodes[i % 4] +
            "(f32[64]{0} %i" + std::to_string(i - 1) + ", f32[64]{0} %i" + std::to_string(back) +
            "), metadata={op_type=\"AddV2\" op_name=\"layer" + std::to_string(i / 10) + "/op\"}\n";
  }
  return text + "}\n";
}

HloOutline Outline(int n) { return ParseHloOutline(GeneratedModule(n), "generated").value(); }

void BM_ParseHloOutline(benchmark::State& state) {
  std::string text = GeneratedModule(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(ParseHloOutline(text, "generated"));
  state.SetItemsProcessed(state.iterations() * state.range(0));
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(text.size()));
}
BENCHMARK(BM_ParseHloOutline)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);

void BM_HloComputationToDot(benchmark::State& state) {
  HloOutline outline = Outline(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(HloComputationToDot(outline, *outline.entry(), DotOptions{}));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_HloComputationToDot)->Arg(1000)->Arg(5000)->Unit(benchmark::kMillisecond);

void BM_LayoutDot(benchmark::State& state) {
  HloOutline outline = Outline(static_cast<int>(state.range(0)));
  std::string dot = HloComputationToDot(outline, *outline.entry(), DotOptions{});
  for (auto _ : state) benchmark::DoNotOptimize(LayoutDot(dot));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_LayoutDot)->Arg(250)->Arg(1000)->Arg(5000)->Iterations(1)->Unit(benchmark::kMillisecond);

std::shared_ptr<const GraphLayout> Layout(int n) {
  HloOutline outline = Outline(n);
  return std::make_shared<const GraphLayout>(LayoutDot(HloComputationToDot(outline, *outline.entry(), DotOptions{})).value());
}

// Shows the view and waits until the window system exposes it, so repaint() really paints.
void ShowExposed(GraphView& view) {
  view.show();
  for (int i = 0; i < 500 && !(view.windowHandle() && view.windowHandle()->isExposed()); ++i) {
    QCoreApplication::processEvents(QEventLoop::AllEvents, 10);
  }
  QCoreApplication::processEvents();
}

void BM_BuildScene(benchmark::State& state) {
  auto layout = Layout(static_cast<int>(state.range(0)));
  GraphView view;
  view.resize(1200, 800);
  for (auto _ : state) view.ShowLayout(layout);
  state.SetItemsProcessed(state.iterations() * state.range(0));
}
BENCHMARK(BM_BuildScene)->Arg(1000)->Arg(2000)->Unit(benchmark::kMillisecond);

// A chain whose every node also reads the parameter (a residual stream): dot's worst case, each
// layer crossed by an edge from the parameter. Graphviz 2.43's dot on this DOT: 8.8 s at 100
// nodes, a segmentation fault after 86 s (1.6 GB) at 1,000, 23 GB and killed after 74 s at 10,000.
// The viewer lays it out in its child process, with dot or, past dot's reach, its own layered
// layout (35 ms, 56 ms and 0.3 s). The label says which. XLENS_BENCH_DOT_DIR=DIR also writes each DOT there
// (residual_chain_N.dot), to time Graphviz's own `dot` on it.
std::string ResidualChain(int n) {
  std::string text = "HloModule residual\n\nENTRY %main (p: f32[8]) -> f32[8] {\n  %p = f32[8]{0} parameter(0)\n";
  for (int i = 0; i < n; ++i) {
    std::string previous = i == 0 ? "%p" : "%a" + std::to_string(i - 1);
    text += std::string(i == n - 1 ? "  ROOT " : "  ") + "%a" + std::to_string(i) + " = f32[8]{0} add(f32[8]{0} " +
            previous + ", f32[8]{0} %p)\n";
  }
  return text + "}\n";
}

void BM_ResidualChainLayout(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  HloOutline outline = ParseHloOutline(ResidualChain(n), "residual").value();
  std::string dot = HloComputationToDot(outline, *outline.entry(), DotOptions{});
  if (const char* dir = std::getenv("XLENS_BENCH_DOT_DIR")) {
    std::ofstream(std::string(dir) + "/residual_chain_" + std::to_string(n) + ".dot") << dot;
  }
  QString engine;
  for (auto _ : state) {
    auto layout = LayOutInChild(dot, LayoutLimits{});
    if (!layout.ok()) {
      state.SkipWithError(layout.status().message().c_str());
      return;
    }
    engine = layout->engine;
  }
  state.SetLabel(engine.toStdString());
}
BENCHMARK(BM_ResidualChainLayout)->Arg(100)->Arg(1000)->Arg(10000)->Iterations(1)->Unit(benchmark::kMillisecond);

// One frame of dragging at 1:2 (text drawn): what the view repaints as it scrolls.
void BM_PanFrame(benchmark::State& state) {
  auto layout = Layout(static_cast<int>(state.range(0)));
  GraphView view;
  view.resize(1200, 800);
  ShowExposed(view);
  view.ShowLayout(layout);
  view.SetViewState(layout->bounds.center(), 0.5);
  int step = 0;
  for (auto _ : state) {
    QScrollBar* bar = ++step % 40 < 20 ? view.verticalScrollBar() : view.horizontalScrollBar();
    bar->setValue(bar->value() + (step % 80 < 40 ? 30 : -30));
    view.viewport()->repaint();
  }
}
BENCHMARK(BM_PanFrame)->Arg(2000)->Arg(4000)->Unit(benchmark::kMillisecond);

// One frame with every node on screen (no text: level of detail).
void BM_WholeGraphFrame(benchmark::State& state) {
  auto layout = Layout(static_cast<int>(state.range(0)));
  GraphView view;
  view.resize(1200, 800);
  ShowExposed(view);
  view.ShowLayout(layout);
  for (auto _ : state) view.viewport()->repaint();
}
BENCHMARK(BM_WholeGraphFrame)->Arg(2000)->Unit(benchmark::kMillisecond);

// Time to first paint of a stage, as the window opens one: ShowComputation on the outline, the
// layout on LayoutService's thread, the scene, and the first frame painted. Arg 0: nodes; arg 1:
// 1 = the layout is in LayoutService's cache (the stage was seen before), 0 = it is not (each
// iteration's module differs in an op_name, so its DOT hashes anew); arg 2: 1 = whole graph
// (graph/node_threshold raised past it), 0 = the default threshold (a neighbourhood over 1,000).
void BM_FirstPaint(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  const bool cached = state.range(1) != 0;
  const bool whole = state.range(2) != 0;
  QSettings().setValue("graph/node_threshold", whole ? n + 1 : 1000);
  GraphView view;
  view.resize(1200, 800);
  ShowExposed(view);
  auto make = [&](int variant) {
    std::string text = GeneratedModule(n);
    std::string tag = "/v" + std::to_string(variant) + "\"";
    for (size_t at = text.find("/op\""); at != std::string::npos; at = text.find("/op\"", at + 1)) {
      text.replace(at + 3, 1, tag);
    }
    return std::make_shared<const HloOutline>(ParseHloOutline(text, "generated").value());
  };
  static int variant = 0;
  auto warm = make(++variant);
  if (cached) {  // lay it out once so the measured opening finds it in the cache
    view.ShowComputation(warm);
    while (view.layout_pending()) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    view.Clear();
  }
  for (auto _ : state) {
    auto outline = cached ? warm : make(++variant);
    view.ShowComputation(outline);
    while (view.layout_pending()) QCoreApplication::processEvents(QEventLoop::AllEvents, 5);
    view.viewport()->repaint();
    state.PauseTiming();
    if (view.graph_layout() == nullptr) state.SkipWithError("no layout");
    view.Clear();
    QCoreApplication::processEvents();
    state.ResumeTiming();
  }
  QSettings().remove("graph/node_threshold");
}
BENCHMARK(BM_FirstPaint)
    ->Args({2000, 0, 1})
    ->Args({2000, 1, 1})
    ->Args({2000, 0, 0})
    ->Args({2000, 1, 0})
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  // Settings of their own, so the threshold the benchmark sets never reaches a user's viewer.
  QApplication::setOrganizationName("xlens-bench");
  QApplication::setApplicationName("viewer_graph_bench");
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
