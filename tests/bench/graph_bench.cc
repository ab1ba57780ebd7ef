// Benchmarks of the TensorFlow graph front end, each against a baseline measured in the same
// process:
//   BM_Baseline_ProtobufParse/{pb,pbtxt}  protobuf alone parsing the bytes of a 100,000-node
//                         GraphDef into its generated message (TextFormat for .pbtxt)
//   BM_LoadGraph/{pb,pbtxt}  the same bytes through ReadGraphDef's parser, Graph::FromGraphDef and
//                         Graph::InferShapes (counters: the three phases per iteration, and
//                         x_protobuf: the whole load over protobuf's parse alone, so the ratio is
//                         what building and typing our Graph costs on top of reading the bytes)
//   BM_MnistSoftmaxStep   one training step of TensorFlow 2.21's MNIST softmax graph
//                         (corpus/tf/mnist_softmax_tf1/nojit, batch 100) op by op through
//                         Session::Run; counters: tf_step_ms, TensorFlow's own op-by-op step
//                         (median of the steps its result.json recorded, the first left out), and
//                         x_tensorflow = our step / TensorFlow's. tests/bench/tf_mnist_step.py
//                         times TensorFlow on this machine for a same-machine ratio.
//
// The graph is a ladder of elementwise ops on f32[64]: n_i = op_i(n_{i-1}, n_{i-2}), op cycling
// through AddV2, Mul, Sub, Maximum, with every node's dtype attr set as TensorFlow writes it.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include <google/protobuf/text_format.h>
#include <nlohmann/json.hpp>

#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def_io.h"
#include "compiler/graph/proto/graph.pb.h"
#include "compiler/graph/session.h"
#include "compiler/hlo/npy.h"

namespace xlens::graph {
namespace {

constexpr int kLadderNodes = 100000;

GraphDef MakeLadder(int n) {
  GraphDef def;
  def.versions.producer = 1994;
  NodeDef x;
  x.name = "x";
  x.op = "Placeholder";
  x.attr["dtype"] = AttrValue::Type(DT_FLOAT);
  x.attr["shape"] = AttrValue::Shape(PartialShape({64}));
  def.node.push_back(x);
  NodeDef c;
  c.name = "c";
  c.op = "Const";
  c.attr["dtype"] = AttrValue::Type(DT_FLOAT);
  Tensor value(DT_FLOAT, {64});
  for (int i = 0; i < 64; ++i) value.flat<float>()[i] = 0.5f;
  c.attr["value"] = AttrValue::TensorValue(value);
  def.node.push_back(c);
  const char* ops[] = {"AddV2", "Mul", "Sub", "Maximum"};
  std::string a = "x", b = "c";
  for (int i = def.node.size(); i < n; ++i) {
    NodeDef node;
    node.name = "ladder/n" + std::to_string(i);
    node.op = ops[i % 4];
    node.input = {a, b};
    node.attr["T"] = AttrValue::Type(DT_FLOAT);
    b = a;
    a = node.name;
    def.node.push_back(std::move(node));
  }
  return def;
}

const std::string& LadderBytes(GraphDefFormat format) {
  static const std::string* pb = nullptr;
  static const std::string* text = nullptr;
  if (pb == nullptr) {
    GraphDef def = MakeLadder(kLadderNodes);
    pb = new std::string(*SerializeGraphDef(def, GraphDefFormat::kBinary));
    text = new std::string(*SerializeGraphDef(def, GraphDefFormat::kText));
  }
  return format == GraphDefFormat::kBinary ? *pb : *text;
}

bool ProtobufParse(const std::string& bytes, GraphDefFormat format) {
  tfproto::GraphDef message;
  if (format == GraphDefFormat::kBinary) return message.ParseFromString(bytes);
  return google::protobuf::TextFormat::ParseFromString(bytes, &message);
}

GraphDefFormat FormatOf(const benchmark::State& state) {
  return state.range(0) == 0 ? GraphDefFormat::kBinary : GraphDefFormat::kText;
}

void BM_Baseline_ProtobufParse(benchmark::State& state) {
  const GraphDefFormat format = FormatOf(state);
  const std::string& bytes = LadderBytes(format);
  for (auto _ : state) {
    if (!ProtobufParse(bytes, format)) {
      state.SkipWithError("protobuf refused the ladder");
      return;
    }
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes.size()));
  state.SetLabel(format == GraphDefFormat::kBinary ? "pb" : "pbtxt");
}
BENCHMARK(BM_Baseline_ProtobufParse)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

using Clock = std::chrono::steady_clock;
double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

void BM_LoadGraph(benchmark::State& state) {
  const GraphDefFormat format = FormatOf(state);
  const std::string& bytes = LadderBytes(format);
  // The baseline, in this process, right before: the fastest of three protobuf parses.
  double baseline_ms = 1e300;
  for (int i = 0; i < 3; ++i) {
    auto start = Clock::now();
    ProtobufParse(bytes, format);
    baseline_ms = std::min(baseline_ms, Ms(Clock::now() - start));
  }
  double parse_ms = 0, build_ms = 0, infer_ms = 0;
  for (auto _ : state) {
    auto t0 = Clock::now();
    auto def = ParseGraphDef(bytes, format, "ladder");
    auto t1 = Clock::now();
    if (!def.ok()) {
      state.SkipWithError(def.status().message().c_str());
      return;
    }
    auto graph = Graph::FromGraphDef(*def);
    auto t2 = Clock::now();
    if (!graph.ok()) {
      state.SkipWithError(graph.status().message().c_str());
      return;
    }
    Status inferred = (*graph)->InferShapes();
    auto t3 = Clock::now();
    if (!inferred.ok()) {
      state.SkipWithError(inferred.message().c_str());
      return;
    }
    parse_ms += Ms(t1 - t0);
    build_ms += Ms(t2 - t1);
    infer_ms += Ms(t3 - t2);
    // Freeing 100,000 nodes is part of what a load costs the caller; keep it in the timing.
  }
  const double n = static_cast<double>(state.iterations());
  state.counters["parse_ms"] = parse_ms / n;
  state.counters["build_ms"] = build_ms / n;
  state.counters["infer_ms"] = infer_ms / n;
  state.counters["protobuf_ms"] = baseline_ms;
  state.counters["x_protobuf"] = (parse_ms + build_ms + infer_ms) / n / baseline_ms;
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(bytes.size()));
  state.SetLabel(format == GraphDefFormat::kBinary ? "pb, 100k nodes" : "pbtxt, 100k nodes");
}
BENCHMARK(BM_LoadGraph)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

// ---------------------------------------------------------------------------------------------

const std::string kMnist = XLENS_SHARED_DIR "/corpus/tf/mnist_softmax_tf1/nojit";

// TensorFlow's op-by-op step from result.json: the median of step_seconds without the first
// (which pays for TensorFlow's graph setup).
double TensorFlowStepMs() {
  std::ifstream in(kMnist + "/result.json");
  nlohmann::json result = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!result.contains("step_seconds")) return 0;
  std::vector<double> steps = result["step_seconds"].get<std::vector<double>>();
  if (steps.size() < 2) return 0;
  steps.erase(steps.begin());
  std::sort(steps.begin(), steps.end());
  return steps[steps.size() / 2] * 1e3;
}

void BM_MnistSoftmaxStep(benchmark::State& state) {
  if (!std::filesystem::exists(kMnist + "/graph.pbtxt")) {
    state.SkipWithError("no corpus/tf/mnist_softmax_tf1 in ../shared");
    return;
  }
  auto def = ReadGraphDef(kMnist + "/graph.pbtxt");
  auto images = ReadNpy(kMnist + "/inputs/images_u8.npy");
  auto labels = ReadNpy(kMnist + "/inputs/labels.npy");
  if (!def.ok() || !images.ok() || !labels.ok()) {
    state.SkipWithError("cannot read the mnist_softmax_tf1 case");
    return;
  }
  // Batch 0 as the corpus's README says: x = images_u8[0:100] / 255, y_ = labels[0:100].
  constexpr int kBatch = 100, kPixels = 784;
  Tensor x(DT_FLOAT, {kBatch, kPixels});
  for (int64_t i = 0; i < kBatch * kPixels; ++i) {
    x.flat<float>()[i] = static_cast<float>(images->GetAsDouble(i) / 255.0);
  }
  Tensor y(DT_INT64, {kBatch});
  for (int64_t i = 0; i < kBatch; ++i) y.flat<int64_t>()[i] = labels->GetAsInt64(i);
  auto session = Session::Create(*def);
  if (!session.ok()) {
    state.SkipWithError(session.status().message().c_str());
    return;
  }
  if (auto init = (*session)->Run({}, {}, {"init"}); !init.ok()) {
    state.SkipWithError(init.status().message().c_str());
    return;
  }
  const std::vector<std::pair<std::string, Tensor>> feeds = {{"x", x}, {"y_", y}};
  const std::vector<std::string> fetches = {"sparse_softmax_cross_entropy_loss/value"};
  const std::vector<std::string> targets = {"GradientDescent"};
  // The first step prepares (prunes, builds the executor); TensorFlow's first is left out too.
  auto first = (*session)->Run(feeds, fetches, targets);
  if (!first.ok()) {
    state.SkipWithError(first.status().message().c_str());
    return;
  }
  double loss = 0, total_ms = 0;
  for (auto _ : state) {
    auto start = Clock::now();
    auto ran = (*session)->Run(feeds, fetches, targets);
    total_ms += Ms(Clock::now() - start);
    if (!ran.ok()) {
      state.SkipWithError(ran.status().message().c_str());
      return;
    }
    loss = (*ran)[0].GetAsDouble(0);
  }
  const double step_ms = total_ms / static_cast<double>(state.iterations());
  state.counters["loss"] = loss;
  state.counters["step_ms"] = step_ms;
  if (double tf_ms = TensorFlowStepMs(); tf_ms > 0) {
    state.counters["tf_step_ms"] = tf_ms;
    state.counters["x_tensorflow"] = step_ms / tf_ms;
  }
  state.SetLabel("batch 100, first step and init not timed");
}
BENCHMARK(BM_MnistSoftmaxStep)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace xlens::graph
