// linear_regression: the graph of the XLA dump walkthrough, W * x + b fitted to y by gradient
// descent on the mean squared error (learning rate 0.025), as its TF1 program builds it
// (tf.compat.v1.get_variable W and b, GradientDescentOptimizer(0.025).minimize(loss)).
//
// It trains on synthetic data, y = 3x + 2 at 100 points of [-2, 2], once op by op and once with
// the JIT, from the same initial W and b (TensorFlow's, from the corpus run), and prints both
// loss curves, how far apart they are step by step, and the W and b each recovered. With
// TF_DUMP_GRAPH_PREFIX, --tf_xla_clustering_debug and --xla_dump_to it also says, from the dump's
// manifest.json, which files hold each phase the walkthrough names: the three clustering passes
// (mark for compilation, encapsulate subgraphs, build XLA launch ops) and the HLO passes
// (optimization, simplification, conv canonicalization, layout assignment, fusion, reduce
// precision), and where the LLVM IR is.
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>

#include <fmt/format.h>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/grads/grad_util.h"
#include "compiler/graph/scope.h"
#include "compiler/graph/training.h"
#include "compiler/hlo/npy.h"
#include "dump/manifest.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Output;
using graph::Tensor;
namespace ops = graph::ops;
namespace fs = std::filesystem;

constexpr int64_t kPoints = 100;
constexpr double kTrueW = 3.0, kTrueB = 2.0;
// TensorFlow's glorot-uniform draws of the corpus run (linreg_tf1: W_init, b_init), so that the
// first steps read like the walkthrough's program.
constexpr float kInitW = -1.66361f, kInitB = 0.13763f;

struct Model {
  graph::GraphDef def;
  std::string loss, train, w_read, b_read;
};

// The walkthrough's program, statement by statement, with the names Python gives each node.
StatusOr<Model> BuildGraph() {
  graph::Scope root = graph::Scope::NewRootScope();
  graph::VariableOptions init;
  init.initial_value = Tensor::Scalar<float>(graph::DT_FLOAT, kInitW);
  ASSIGN_OR_RETURN(graph::GraphVariable w, graph::CreateVariable(root, "weights", graph::DT_FLOAT, {}, init));
  init.initial_value = Tensor::Scalar<float>(graph::DT_FLOAT, kInitB);
  ASSIGN_OR_RETURN(graph::GraphVariable b, graph::CreateVariable(root, "bias", graph::DT_FLOAT, {}, init));
  Output x = ops::Placeholder(root.WithOpName("x_observed"), graph::DT_FLOAT, graph::PartialShape({-1}));
  // y_pred = W * x_observed + b: `+ b` reads b inside the add's name scope, as Python does.
  Output w_value = ops::ReadVariableOp(root, w.handle, graph::DT_FLOAT);
  Output mul = graph::grad::MulOp(root, w_value, x);
  graph::Scope add_inputs = root;
  graph::Scope add = root.NewOpScope("add", &add_inputs);
  Output b_value = ops::ReadVariableOp(add_inputs, b.handle, graph::DT_FLOAT);
  Output y_pred = ops::AsOutput(add.AddNode("AddV2", {mul, b_value}, {}));
  Output y = ops::Placeholder(root.WithOpName("y_observed"), graph::DT_FLOAT, graph::PartialShape({-1}));
  // loss_op = tf.reduce_mean(tf.square(y_pred - y_observed))
  Output loss = ops::Mean(root, ops::Square(root, graph::grad::SubOp(root, y_pred, y)),
                          ops::Const(root, std::vector<int32_t>{0}));
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(graph::Node * train, graph::GradientDescentOptimizer(0.025f).Minimize(root, loss, {w, b}));
  // tf.compat.v1.global_variables_initializer()
  ops::NoOp(root.WithOpName("init").WithControlDependencies(
      std::vector<graph::Node*>{w.initializer, b.initializer}));
  RETURN_IF_ERROR(root.status());
  return Model{root.graph()->ToGraphDef(), loss.name(), train->name(), w.read.name(), b.read.name()};
}

// y = 3x + 2 at kPoints evenly spaced points of [-2, 2]: no noise, so the answer is exact.
std::vector<std::pair<std::string, Tensor>> Data() {
  Tensor x(graph::DT_FLOAT, {kPoints}), y(graph::DT_FLOAT, {kPoints});
  for (int64_t i = 0; i < kPoints; ++i) {
    const float xi = static_cast<float>(-2.0 + 4.0 * i / (kPoints - 1));
    x.flat<float>()[i] = xi;
    y.flat<float>()[i] = static_cast<float>(kTrueW * xi + kTrueB);
  }
  return {{"x_observed", x}, {"y_observed", y}};
}

struct Training {
  std::vector<double> losses;  // each step's loss, fetched with that step's update
  double w = 0, b = 0;
  double ms_per_step = 0;  // the median: the first JIT step also compiles
  int64_t compilations = 0;
  KernelCount kernels;  // of the last step
  profiler::Trace trace;
};

StatusOr<Training> Train(const SampleOptions& options, const Model& model, JitMode jit, int steps) {
  ASSIGN_OR_RETURN(auto session, SampleSession::Create(options, model.def, jit, "train_step"));
  auto init = session->session().Run({}, {}, {"init"});
  if (!init.ok()) return init.status().WithContext("init");
  const auto feeds = Data();
  Training t;
  std::vector<double> step_ms;
  for (int step = 0; step < steps; ++step) {
    const auto start = std::chrono::steady_clock::now();
    // The last step is traced: by then every compilation is done, so the trace shows the step.
    const bool traced = step == steps - 1;
    if (traced) RETURN_IF_ERROR(StartTrace());
    auto out = session->session().Run(feeds, {model.loss}, {model.train});
    if (traced) t.trace = StopTrace();
    step_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    if (!out.ok()) return out.status().WithContext(fmt::format("step {}", step + 1));
    t.losses.push_back((*out)[0].GetAsDouble(0));
  }
  std::sort(step_ms.begin(), step_ms.end());
  t.ms_per_step = step_ms[step_ms.size() / 2];
  auto end = session->session().Run({}, {model.w_read, model.b_read});
  if (!end.ok()) return end.status();
  t.w = (*end)[0].GetAsDouble(0);
  t.b = (*end)[1].GetAsDouble(0);
  t.compilations = session->compilations();
  t.kernels = CountKernels(t.trace);
  return t;
}

// The walkthrough's phases, found in the manifest by the names the passes and pipelines have.
struct Phase {
  const char* title;
  const char* stage;  // a clustering stage, an HLO pipeline or an HLO pass
};
constexpr Phase kClusteringPhases[] = {{"Mark For Compilation Pass", "mark_for_compilation"},
                                       {"Encapsulate Subgraph Pass", "encapsulate_subgraphs"},
                                       {"Build Xla Launch Ops Pass", "build_xla_ops"}};
constexpr Phase kHloPhases[] = {{"Optimization", "optimization"},
                                {"Simplification", "simplification"},
                                {"Conv Canonicalization", "conv-canonicalization"},
                                {"Layout Assignment", "layout-assignment"},
                                {"Fusion", "fusion"},
                                {"Reduce Precision", "reduce-precision-insertion"}};

bool StageIs(const ManifestStage& s, std::string_view name) {
  if (s.pass == name) return true;
  // A pipeline is named in the stage's path ("cpu-compiler/optimization/simplification").
  std::string_view p = s.pipeline;
  size_t at = p.find(name);
  return at != std::string_view::npos && (at == 0 || p[at - 1] == '/') &&
         (at + name.size() == p.size() || p[at + name.size()] == '/');
}

void PrintDumpStory(const std::string& dir) {
  auto manifest = ReadManifest((fs::path(dir) / std::string(kManifestFileName)).string());
  if (!manifest.ok()) {
    std::printf("no dump manifest in %s: %s\n", dir.c_str(), manifest.status().message().c_str());
    return;
  }
  std::printf("\nThe walkthrough's phases in %s (from manifest.json):\n", dir.c_str());
  std::printf("JIT compilation passes over the TensorFlow graph:\n");
  for (const Phase& phase : kClusteringPhases) {
    std::vector<std::string> files;
    for (const ManifestGraph& g : manifest->graphs) {
      for (const ManifestGraphStage& s : g.stages) {
        if (s.name.rfind(phase.stage, 0) != 0) continue;
        for (const std::string& f : s.files) files.push_back(f);
      }
    }
    std::printf("  %s: %zu file%s%s\n", phase.title, files.size(), files.size() == 1 ? "" : "s",
                files.empty() ? " (set TF_DUMP_GRAPH_PREFIX and --tf_xla_clustering_debug)" : "");
    for (const std::string& f : files) std::printf("    %s\n", f.c_str());
  }
  for (const ManifestModule& module : manifest->modules) {
    std::printf("HLO pass pipeline of module %s:\n", module.name.c_str());
    for (const Phase& phase : kHloPhases) {
      int runs = 0, changed = 0;
      std::vector<std::string> files;
      for (const ManifestStage& s : module.stages) {
        if (!StageIs(s, phase.stage)) continue;
        ++runs;
        changed += s.changed;
        for (const std::string& f : s.files) {
          if (f.ends_with(".txt")) files.push_back(f);
        }
      }
      std::printf("  %s: %d pass run%s, %d changed the module%s\n", phase.title, runs,
                  runs == 1 ? "" : "s", changed,
                  runs == 0 || !files.empty() ? ""
                  : changed == 0 ? "; no file (a pass that changes nothing writes none, as in XLA)"
                                 : " (--xla_dump_hlo_pass_re=.* writes a file per pass)");
      for (const std::string& f : files) std::printf("    %s\n", f.c_str());
    }
    std::vector<std::string> ir;
    for (const std::string& f : module.files) {
      if (f.ends_with(".ll")) ir.push_back(f);
    }
    for (const ManifestKernel& k : module.kernels) {
      for (const std::string& f : k.files) {
        if (f.ends_with(".ll") && std::find(ir.begin(), ir.end(), f) == ir.end()) ir.push_back(f);
      }
    }
    std::printf("  LLVM IR: %zu file%s\n", ir.size(), ir.size() == 1 ? "" : "s");
    for (const std::string& f : ir) std::printf("    %s\n", f.c_str());
  }
}

int Main(int argc, char** argv) {
  std::string steps_text = "200";
  SampleOptions options = ParseSampleOptions(
      argc, argv, "linear_regression",
      "W*x + b fitted to y = 3x + 2 by gradient descent (0.025) on the mean squared error, op by op "
      "and with the JIT.",
      JitMode::kAuto, {{"steps", "training steps (default 200)", &steps_text}});
  int steps = 0;
  if (auto [p, ec] = std::from_chars(steps_text.data(), steps_text.data() + steps_text.size(), steps);
      ec != std::errc() || p != steps_text.data() + steps_text.size() || steps < 1 || steps > 1000000) {
    return Fail(options, Error("--steps " + steps_text + ": expected a whole number from 1 to 1000000"));
  }
  auto model = BuildGraph();
  if (!model.ok()) return Fail(options, model.status());
  if (Status s = MaybeWriteGraph(options, model->def); !s.ok()) return Fail(options, s);
  if (!options.write_graph.empty()) {
    // The feeds too, so that `xlens graph run` trains the written graph as this program does.
    for (const auto& [name, tensor] : Data()) {
      auto literal = tensor.ToLiteral();
      if (!literal.ok()) return Fail(options, literal.status());
      const std::string path = (fs::path(options.write_graph) / (name + ".npy")).string();
      if (Status s = WriteNpy(path, *literal); !s.ok()) return Fail(options, s);
    }
  }

  std::printf("linear_regression: W*x + b fitted to y = %gx + %g (%lld points), gradient descent 0.025, "
              "%d steps from W = %g, b = %g\n",
              kTrueW, kTrueB, static_cast<long long>(kPoints), steps, kInitW, kInitB);
  // Op by op first, and without any dump flags: the dump is the JIT run's.
  SampleOptions plain = options;
  plain.flags.xla_dump_to.clear();
  plain.flags.tf_dump_graph_prefix.clear();
  auto off = Train(plain, *model, JitMode::kOff, steps);
  if (!off.ok()) return Fail(options, off.status());
  StatusOr<Training> on = Error("not run");
  if (options.jit != JitMode::kOff) {
    on = Train(options, *model, options.jit, steps);
    if (!on.ok()) return Fail(options, on.status());
  }
  const std::string jit_name(JitModeName(options.jit));
  std::printf("%8s  %14s%s\n", "step", "loss op by op", on.ok() ? fmt::format("  {:>14}", "loss, JIT " + jit_name).c_str() : "");
  double max_diff = 0, max_rel = 0;
  for (int i = 0; i < steps; ++i) {
    const bool shown = i < 3 || (i + 1) % std::max(1, steps / 10) == 0 || i == steps - 1;
    double with = on.ok() ? on->losses[i] : 0;
    if (on.ok()) {
      max_diff = std::max(max_diff, std::fabs(with - off->losses[i]));
      max_rel = std::max(max_rel, std::fabs(with - off->losses[i]) / std::max(1e-30, std::fabs(off->losses[i])));
    }
    if (shown) {
      std::printf("%8d  %14.7g%s\n", i + 1, off->losses[i], on.ok() ? fmt::format("  {:14.7g}", with).c_str() : "");
    }
  }
  auto report = [&](const char* how, const Training& t) {
    std::printf("%-14s W = %.6f (%+.4f%%), b = %.6f (%+.4f%%), median %.3f ms per step, last step: %d kernel%s\n",
                how, t.w, 100 * (t.w - kTrueW) / kTrueW, t.b, 100 * (t.b - kTrueB) / kTrueB,
                t.ms_per_step, t.kernels.total(), t.kernels.total() == 1 ? "" : "s");
  };
  report("op by op:", *off);
  if (on.ok()) {
    report(("JIT " + jit_name + ":").c_str(), *on);
    std::printf("losses agree step by step to %.3g (relative %.3g); %lld compilation%s\n", max_diff,
                max_rel, static_cast<long long>(on->compilations), on->compilations == 1 ? "" : "s");
  }
  if (Status s = MaybeWriteTrace(options, on.ok() ? on->trace : off->trace); !s.ok()) return Fail(options, s);
  if (on.ok() && !options.flags.xla_dump_to.empty()) PrintDumpStory(options.flags.xla_dump_to);
  return 0;
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }
