// Benchmarks of TensorFlow's auto-clustering, each against a baseline measured in the same process:
//   BM_Baseline_LoadAndOrder/N   Graph::FromGraphDef and Graph::TopologicalOrder of the synthetic
//                                N-node graph: what any pass over the graph pays at least
//   BM_MarkForCompilation/N      mark_for_compilation alone on a freshly loaded graph
//   BM_MarkAndDecluster/N        mark_for_compilation and partially_decluster (what `xlens cluster`
//                                runs without dumps)
//   BM_ClusteringPasses/N        the whole pipeline: mark, decluster, encapsulate_subgraphs,
//                                build_xla_ops
//   BM_ClusteringStages/N        the same four passes one by one (as RunClusteringPasses calls
//                                them), with each one's share as counters, to see where it goes
// Each clustering benchmark times the passes only (the load is outside the timed region, the
// graph is rebuilt every iteration since the passes rewrite it) and reports x_baseline, its time
// over the baseline's fastest of three loads measured right before, plus the cluster count.
//
//   BM_MnistSoftmaxStep/jit:0|1  one training step of TensorFlow 2.21's MNIST softmax graph
//                                (corpus/tf/mnist_softmax_tf1/jit, batch 100) through
//                                Session::Run, op by op and with the JIT installed
//                                (global_jit_level ON_1, --tf_xla_cpu_global_jit). The first steps
//                                (pruning, clustering, compiling) are not timed; the losses of
//                                the first steps both ways must agree or the benchmark stops.
//                                BM_MnistJitSpeedup runs both in one process, interleaved, and
//                                reports x_op_by_op = compiled step / op-by-op step.
//
// The synthetic graph is what a model's graph looks like to the clustering: blocks of about 50
// nodes on f32[64], each a chain of elementwise ops with constants, two diamonds, a Shape feeding
// a Reshape (a must-be-constant input), an AsString -> StringToNumber round trip that no XLA
// kernel covers (it splits the block's ops into clusters and, since a path around it stays
// compilable, makes the contraction refuse cycles), and a v1 while loop every 20 blocks (Enter,
// Merge, Switch, LoopCond, NextIteration, Exit: the deadness analysis and the loop's frame).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "compiler/cluster/build_xla_ops_pass.h"
#include "compiler/cluster/clustering_pipeline.h"
#include "compiler/cluster/encapsulate_subgraphs_pass.h"
#include "compiler/cluster/mark_for_compilation_pass.h"
#include "compiler/cluster/partially_decluster_pass.h"
#include "compiler/cluster/xla_device_compiler.h"
#include "compiler/cluster/xla_jit.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"
#include "dump/flags.h"

namespace xlens::cluster {
namespace {

using graph::AttrValue;
using graph::GraphDef;
using graph::NodeDef;
using graph::Tensor;
using Clock = std::chrono::steady_clock;

double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

constexpr int kWidth = 64;

class GraphBuilder {
 public:
  GraphBuilder() { def_.versions.producer = 1994; }

  std::string Add(const std::string& name, const std::string& op, std::vector<std::string> inputs,
                  std::map<std::string, AttrValue> attrs = {}) {
    NodeDef node;
    node.name = name;
    node.op = op;
    node.input = std::move(inputs);
    for (auto& [k, v] : attrs) node.attr[k] = std::move(v);
    def_.node.push_back(std::move(node));
    return name;
  }
  std::string Float(const std::string& name, const std::string& op,
                    std::vector<std::string> inputs) {
    return Add(name, op, std::move(inputs), {{"T", AttrValue::Type(graph::DT_FLOAT)}});
  }
  std::string ConstF32(const std::string& name, std::vector<int64_t> dims, float v) {
    Tensor value(graph::DT_FLOAT, dims);
    for (int64_t i = 0; i < value.num_elements(); ++i) value.flat<float>()[i] = v;
    return Add(name, "Const", {},
               {{"dtype", AttrValue::Type(graph::DT_FLOAT)}, {"value", AttrValue::TensorValue(value)}});
  }
  std::string ConstI32(const std::string& name, Tensor value) {
    return Add(name, "Const", {},
               {{"dtype", AttrValue::Type(graph::DT_INT32)}, {"value", AttrValue::TensorValue(value)}});
  }
  size_t size() const { return def_.node.size(); }
  GraphDef Take() { return std::move(def_); }

 private:
  GraphDef def_;
};

// One block of about 50 nodes from `in` (f32[64]); returns its output.
std::string AddBlock(GraphBuilder& b, const std::string& in, int k) {
  const std::string p = "block" + std::to_string(k) + "/";
  const char* ops[] = {"AddV2", "Mul", "Sub", "Maximum"};
  std::string c = b.ConstF32(p + "c", {kWidth}, 0.5f);
  std::string c2 = b.ConstF32(p + "c2", {kWidth}, 1.5f);
  std::string x = in;
  for (int i = 0; i < 12; ++i) {
    x = b.Float(p + "chain" + std::to_string(i), ops[i % 4], {x, i % 2 ? c : c2});
  }
  // Two diamonds.
  for (int d = 0; d < 2; ++d) {
    std::string q = p + "diamond" + std::to_string(d) + "/";
    std::string l = b.Float(q + "left", "Mul", {x, c});
    std::string r = b.Float(q + "right", "Tanh", {x});
    std::string l2 = b.Float(q + "left2", "Sub", {l, c2});
    std::string r2 = b.Float(q + "right2", "Neg", {r});
    x = b.Float(q + "join", "AddV2", {l2, r2});
  }
  // A must-be-constant input: the shape of one value reshapes another.
  std::string shape = b.Add(p + "Shape", "Shape", {x},
                            {{"T", AttrValue::Type(graph::DT_FLOAT)},
                             {"out_type", AttrValue::Type(graph::DT_INT32)}});
  std::string y = b.Float(p + "pre_reshape", "Mul", {x, x});
  x = b.Add(p + "Reshape", "Reshape", {y, shape},
            {{"T", AttrValue::Type(graph::DT_FLOAT)}, {"Tshape", AttrValue::Type(graph::DT_INT32)}});
  // The uncompilable round trip, with a compilable path around it.
  std::string s = b.Add(p + "AsString", "AsString", {x}, {{"T", AttrValue::Type(graph::DT_FLOAT)}});
  std::string back = b.Add(p + "StringToNumber", "StringToNumber", {s},
                           {{"out_type", AttrValue::Type(graph::DT_FLOAT)}});
  std::string around = b.Float(p + "around", "Abs", {x});
  std::string around2 = b.Float(p + "around2", "Mul", {around, c});
  x = b.Float(p + "merge", "AddV2", {back, around2});
  for (int i = 0; i < 12; ++i) {
    x = b.Float(p + "tail" + std::to_string(i), ops[(i + 1) % 4], {x, i % 2 ? c2 : c});
  }
  return x;
}

Tensor ScalarI32(int32_t v) {
  Tensor t(graph::DT_INT32, {});
  t.flat<int32_t>()[0] = v;
  return t;
}

// A v1 while loop around `in`: i < 10 { x = x * c; i += 1 }.
std::string AddLoop(GraphBuilder& b, const std::string& in, int k) {
  const std::string p = "loop" + std::to_string(k) + "/";
  const AttrValue frame = AttrValue::String(p + "while_context");
  auto enter = [&](const std::string& name, const std::string& input, graph::DataType t) {
    return b.Add(p + name, "Enter", {input},
                 {{"T", AttrValue::Type(t)}, {"frame_name", frame},
                  {"is_constant", AttrValue::Bool(false)}, {"parallel_iterations", AttrValue::Int(10)}});
  };
  auto typed = [&](const std::string& name, const std::string& op, std::vector<std::string> inputs,
                   graph::DataType t) { return b.Add(p + name, op, std::move(inputs), {{"T", AttrValue::Type(t)}}); };
  std::string i0 = b.ConstI32(p + "i0", ScalarI32(0));
  std::string ei = enter("Enter_i", i0, graph::DT_INT32);
  std::string ex = enter("Enter_x", in, graph::DT_FLOAT);
  // Merge's second input is its NextIteration, declared below.
  std::string mi = b.Add(p + "Merge_i", "Merge", {ei, p + "NextIteration_i"},
                         {{"T", AttrValue::Type(graph::DT_INT32)}, {"N", AttrValue::Int(2)}});
  std::string mx = b.Add(p + "Merge_x", "Merge", {ex, p + "NextIteration_x"},
                         {{"T", AttrValue::Type(graph::DT_FLOAT)}, {"N", AttrValue::Int(2)}});
  // A constant inside the frame hangs off the frame by a control edge, as TensorFlow builds it.
  std::string limit = b.Add(p + "limit", "Const", {"^" + mi},
                            {{"dtype", AttrValue::Type(graph::DT_INT32)},
                             {"value", AttrValue::TensorValue(ScalarI32(10))}});
  std::string less = typed("Less", "Less", {mi, limit}, graph::DT_INT32);
  std::string cond = b.Add(p + "LoopCond", "LoopCond", {less});
  std::string si = typed("Switch_i", "Switch", {mi, cond}, graph::DT_INT32);
  std::string sx = typed("Switch_x", "Switch", {mx, cond}, graph::DT_FLOAT);
  std::string ii = typed("Identity_i", "Identity", {si + ":1"}, graph::DT_INT32);
  std::string ix = typed("Identity_x", "Identity", {sx + ":1"}, graph::DT_FLOAT);
  std::string one = b.Add(p + "one", "Const", {"^" + ii},
                          {{"dtype", AttrValue::Type(graph::DT_INT32)},
                           {"value", AttrValue::TensorValue(ScalarI32(1))}});
  std::string inc = typed("add", "AddV2", {ii, one}, graph::DT_INT32);
  std::string scale = b.ConstF32(p + "scale", {kWidth}, 0.99f);
  std::string scale_in = b.Add(p + "Enter_scale", "Enter", {scale},
                               {{"T", AttrValue::Type(graph::DT_FLOAT)}, {"frame_name", frame},
                                {"is_constant", AttrValue::Bool(true)},
                                {"parallel_iterations", AttrValue::Int(10)}});
  std::string mul = b.Float(p + "mul", "Mul", {ix, scale_in});
  typed("NextIteration_i", "NextIteration", {inc}, graph::DT_INT32);
  typed("NextIteration_x", "NextIteration", {mul}, graph::DT_FLOAT);
  typed("Exit_i", "Exit", {si}, graph::DT_INT32);
  return typed("Exit_x", "Exit", {sx}, graph::DT_FLOAT);
}

GraphDef MakeModelGraph(int n) {
  GraphBuilder b;
  std::string x = b.Add("x", "Placeholder", {},
                        {{"dtype", AttrValue::Type(graph::DT_FLOAT)},
                         {"shape", AttrValue::Shape(graph::PartialShape({kWidth}))}});
  for (int k = 0; b.size() < static_cast<size_t>(n); ++k) {
    x = AddBlock(b, x, k);
    if (k % 20 == 19) x = AddLoop(b, x, k);
  }
  b.Add("y", "Identity", {x}, {{"T", AttrValue::Type(graph::DT_FLOAT)}});
  return b.Take();
}

const GraphDef& ModelGraph(int n) {
  static std::map<int, GraphDef>* graphs = new std::map<int, GraphDef>;
  auto it = graphs->find(n);
  if (it == graphs->end()) it = graphs->emplace(n, MakeModelGraph(n)).first;
  return it->second;
}

MarkForCompilationOptions Options() {
  MarkForCompilationOptions options;
  options.global_jit_level = graph::GlobalJitLevel::kOn1;
  options.cpu_global_jit_flag = true;
  return options;
}

StatusOr<std::unique_ptr<graph::Graph>> Load(const GraphDef& def) {
  return graph::Graph::FromGraphDef(def);
}

// The baseline: load the graph and order it, the fastest of three.
double BaselineMs(const GraphDef& def) {
  double best = 1e300;
  for (int i = 0; i < 3; ++i) {
    auto start = Clock::now();
    auto g = Load(def);
    if (g.ok()) (void)(*g)->TopologicalOrder();
    best = std::min(best, Ms(Clock::now() - start));
  }
  return best;
}

void BM_Baseline_LoadAndOrder(benchmark::State& state) {
  const GraphDef& def = ModelGraph(state.range(0));
  for (auto _ : state) {
    auto g = Load(def);
    if (!g.ok()) {
      state.SkipWithError(g.status().message().c_str());
      return;
    }
    auto order = (*g)->TopologicalOrder();
    if (!order.ok()) {
      state.SkipWithError(order.status().message().c_str());
      return;
    }
    benchmark::DoNotOptimize(order->size());
  }
  state.counters["nodes"] = static_cast<double>(def.node.size());
}

enum class Stages { kMark, kMarkAndDecluster, kAll };

void RunClustering(benchmark::State& state, Stages stages) {
  const GraphDef& def = ModelGraph(state.range(0));
  const double baseline_ms = BaselineMs(def);
  double total_ms = 0;
  size_t clusters = 0, left_out = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto g = Load(def);
    if (!g.ok()) {
      state.SkipWithError(g.status().message().c_str());
      return;
    }
    state.ResumeTiming();
    auto start = Clock::now();
    StatusOr<ClusteringResult> result = Status::Error("not run");
    if (stages == Stages::kMark) {
      result = MarkForCompilationPass(Options()).Run(g->get());
    } else {
      ClusteringPipelineOptions options;
      options.mark = Options();
      options.mark_only = stages == Stages::kMarkAndDecluster;
      auto outcome = RunClusteringPasses(g->get(), options);
      if (outcome.ok()) {
        result = std::move(outcome->result);
      } else {
        result = outcome.status();
      }
    }
    total_ms += Ms(Clock::now() - start);
    state.PauseTiming();
    if (!result.ok()) {
      state.SkipWithError(result.status().message().c_str());
      return;
    }
    clusters = result->clusters.size();
    left_out = result->unclustered.size();
    g->reset();  // freeing the graph is the caller's, not the passes'
    state.ResumeTiming();
  }
  const double ms = total_ms / static_cast<double>(state.iterations());
  state.counters["nodes"] = static_cast<double>(def.node.size());
  state.counters["clusters"] = static_cast<double>(clusters);
  state.counters["left_out"] = static_cast<double>(left_out);
  state.counters["pass_ms"] = ms;
  state.counters["baseline_ms"] = baseline_ms;
  state.counters["x_baseline"] = ms / baseline_ms;
}

void BM_MarkForCompilation(benchmark::State& state) { RunClustering(state, Stages::kMark); }
void BM_MarkAndDecluster(benchmark::State& state) {
  RunClustering(state, Stages::kMarkAndDecluster);
}
void BM_ClusteringPasses(benchmark::State& state) { RunClustering(state, Stages::kAll); }

// The four passes one by one, as RunClusteringPasses runs them without dumps.
void BM_ClusteringStages(benchmark::State& state) {
  const GraphDef& def = ModelGraph(state.range(0));
  double mark_ms = 0, decluster_ms = 0, encapsulate_ms = 0, build_ms = 0;
  auto fail = [&](const Status& s) { state.SkipWithError(s.message().c_str()); };
  for (auto _ : state) {
    state.PauseTiming();
    auto g = Load(def);
    if (!g.ok()) return fail(g.status());
    state.ResumeTiming();
    auto t0 = Clock::now();
    auto result = MarkForCompilationPass(Options()).Run(g->get());
    if (!result.ok()) return fail(result.status());
    auto t1 = Clock::now();
    if (Status s = PartiallyDeclusterPass().Run(g->get(), &*result); !s.ok()) return fail(s);
    auto t2 = Clock::now();
    auto encapsulated = EncapsulateSubgraphsPass().Run(**g);
    if (!encapsulated.ok()) return fail(encapsulated.status());
    auto t3 = Clock::now();
    auto built = BuildXlaOpsPass().Run(*encapsulated->graph);
    if (!built.ok()) return fail(built.status());
    auto t4 = Clock::now();
    mark_ms += Ms(t1 - t0);
    decluster_ms += Ms(t2 - t1);
    encapsulate_ms += Ms(t3 - t2);
    build_ms += Ms(t4 - t3);
    state.PauseTiming();
    g->reset();
    *encapsulated = {};
    *built = {};
    state.ResumeTiming();
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["mark_ms"] = mark_ms / n;
  state.counters["decluster_ms"] = decluster_ms / n;
  state.counters["encapsulate_ms"] = encapsulate_ms / n;
  state.counters["build_xla_ops_ms"] = build_ms / n;
}

BENCHMARK(BM_Baseline_LoadAndOrder)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MarkForCompilation)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_MarkAndDecluster)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ClusteringPasses)->Arg(1000)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ClusteringStages)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------
// The MNIST softmax training step, op by op and compiled.

const std::string kMnist = XLENS_SHARED_DIR "/corpus/tf/mnist_softmax_tf1/jit";
const std::vector<std::string> kFetches = {"sparse_softmax_cross_entropy_loss/value"};
const std::vector<std::string> kTargets = {"GradientDescent"};
constexpr int kUntimedSteps = 3;

struct MnistStep {
  std::unique_ptr<XlaJit> jit;
  std::unique_ptr<graph::Session> session;
  std::vector<std::pair<std::string, Tensor>> feeds;
  std::vector<double> first_losses;  // of the untimed steps
  std::string error;
};

// A session on the corpus graph, initialized and stepped kUntimedSteps times (the prepare, the
// clustering and the compilation happen there).
std::unique_ptr<MnistStep> OpenMnist(bool jit) {
  auto step = std::make_unique<MnistStep>();
  auto def = graph::ReadGraphDef(kMnist + "/graph.pbtxt");
  auto images = ReadNpy(kMnist + "/inputs/images_u8.npy");
  auto labels = ReadNpy(kMnist + "/inputs/labels.npy");
  if (!def.ok() || !images.ok() || !labels.ok()) {
    step->error = "cannot read the mnist_softmax_tf1/jit case";
    return step;
  }
  constexpr int kBatch = 100, kPixels = 784;
  Tensor x(graph::DT_FLOAT, {kBatch, kPixels});
  for (int64_t i = 0; i < kBatch * kPixels; ++i) {
    x.flat<float>()[i] = static_cast<float>(images->GetAsDouble(i) / 255.0);
  }
  Tensor y(graph::DT_INT64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) y.flat<int64_t>()[i] = labels->GetAsInt64(i);
  step->feeds = {{"x", x}, {"y_", y}};
  graph::SessionOptions options;
  if (jit) {
    FlagEnvironment env;
    env.tf_xla_flags = "--tf_xla_cpu_global_jit";
    auto flags = ParseDebugOptions(env);
    if (!flags.ok()) {
      step->error = flags.status().message();
      return step;
    }
    step->jit = std::make_unique<XlaJit>(*flags, [](const std::string&) {});
    options.global_jit_level = graph::GlobalJitLevel::kOn1;
    step->jit->Install(&options);
  }
  auto session = graph::Session::Create(*def, options);
  if (!session.ok()) {
    step->error = session.status().message();
    return step;
  }
  step->session = std::move(*session);
  if (auto init = step->session->Run({}, {}, {"init"}); !init.ok()) {
    step->error = init.status().message();
    return step;
  }
  for (int i = 0; i < kUntimedSteps; ++i) {
    auto ran = step->session->Run(step->feeds, kFetches, kTargets);
    if (!ran.ok()) {
      step->error = ran.status().message();
      return step;
    }
    step->first_losses.push_back((*ran)[0].GetAsDouble(0));
  }
  return step;
}

// Both ways must train alike: the compiled steps are only worth timing if they compute the same.
std::string CompareLosses(const MnistStep& op_by_op, const MnistStep& compiled) {
  for (size_t i = 0; i < op_by_op.first_losses.size(); ++i) {
    double a = op_by_op.first_losses[i], b = compiled.first_losses[i];
    if (!(std::fabs(a - b) <= 1e-5 * std::fabs(a) + 1e-6)) {
      char line[200];
      std::snprintf(line, sizeof line, "the losses differ at step %zu: op by op %.9g, jit %.9g",
                    i + 1, a, b);
      return line;
    }
  }
  return "";
}

// The two sessions, opened once per process, their first losses compared.
struct MnistPair {
  std::unique_ptr<MnistStep> op_by_op, compiled;
  std::string error;
};

MnistPair& Mnist() {
  static MnistPair* pair = [] {
    auto* p = new MnistPair;
    if (!std::filesystem::exists(kMnist + "/graph.pbtxt")) {
      p->error = "no corpus/tf/mnist_softmax_tf1/jit in ../shared";
      return p;
    }
    p->op_by_op = OpenMnist(false);
    p->compiled = OpenMnist(true);
    if (!p->op_by_op->error.empty()) p->error = "op by op: " + p->op_by_op->error;
    else if (!p->compiled->error.empty()) p->error = "jit: " + p->compiled->error;
    else p->error = CompareLosses(*p->op_by_op, *p->compiled);
    if (p->error.rfind("the losses differ", 0) == 0) {
      // Timing a JIT that computes something else is meaningless: stop the whole run.
      std::fprintf(stderr, "cluster_bench: MNIST step: %s\n", p->error.c_str());
      std::exit(1);
    }
    return p;
  }();
  return *pair;
}

double StepMs(MnistStep& s, std::string* error) {
  auto start = Clock::now();
  auto ran = s.session->Run(s.feeds, kFetches, kTargets);
  double ms = Ms(Clock::now() - start);
  if (!ran.ok()) *error = ran.status().message();
  return ms;
}

void BM_MnistSoftmaxStep(benchmark::State& state) {
  MnistPair& pair = Mnist();
  if (!pair.error.empty()) {
    state.SkipWithError(pair.error.c_str());
    return;
  }
  MnistStep& s = state.range(0) ? *pair.compiled : *pair.op_by_op;
  for (auto _ : state) {
    std::string error;
    StepMs(s, &error);
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
  state.SetLabel(state.range(0) ? "jit ON_1 + --tf_xla_cpu_global_jit" : "op by op");
}
BENCHMARK(BM_MnistSoftmaxStep)->ArgName("jit")->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Both ways interleaved step by step, so that both see the same machine state.
void BM_MnistJitSpeedup(benchmark::State& state) {
  MnistPair& pair = Mnist();
  if (!pair.error.empty()) {
    state.SkipWithError(pair.error.c_str());
    return;
  }
  std::vector<double> op_by_op, compiled;
  for (auto _ : state) {
    std::string error;
    op_by_op.push_back(StepMs(*pair.op_by_op, &error));
    compiled.push_back(StepMs(*pair.compiled, &error));
    if (!error.empty()) {
      state.SkipWithError(error.c_str());
      return;
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double a = median(op_by_op), b = median(compiled);
  state.counters["op_by_op_ms"] = a;
  state.counters["jit_ms"] = b;
  state.counters["x_op_by_op"] = b / a;
  state.counters["loss_step1"] = pair.compiled->first_losses[0];
  state.counters["compilations"] =
      pair.compiled->jit->compiler() ? pair.compiled->jit->compiler()->compilations() : 0;
  state.SetLabel("medians of interleaved steps; x_op_by_op = jit / op by op");
}
BENCHMARK(BM_MnistJitSpeedup)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace xlens::cluster
