// The graph view's costs on generated HLO of 250 to 5,000 instructions: reading the outline,
// writing DOT, Graphviz's layout (the part LayoutService keeps off the UI thread), building the
// scene, and one frame of panning and of the whole graph zoomed out (the UI thread's share).
#include <benchmark/benchmark.h>

#include <QApplication>
#include <QScrollBar>
#include <QWindow>
#include <string>

#include "viewer/graph_layout.h"
#include "viewer/graph_view.h"
#include "viewer/hlo_outline.h"

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
BENCHMARK(BM_PanFrame)->Arg(2000)->Unit(benchmark::kMillisecond);

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

}  // namespace

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QApplication app(argc, argv);
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
