#include "samples/classifier_training.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "compiler/graph/cc_ops.h"
#include "samples/data/mnist_batch.h"
#include "samples/data/tiny_image_set.h"

namespace xlens::samples {
namespace {

namespace ops = graph::ops;

StatusOr<int64_t> ParseCount(const std::string& flag, const std::string& text) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || p != text.data() + text.size() || v < 1 || v > 100000000) {
    return Error(fmt::format("--{} {}: expected a whole number from 1 to 100000000", flag, text));
  }
  return v;
}

double Ms(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since).count();
}

}  // namespace

graph::Output AddAccuracy(const graph::Scope& scope, const graph::Output& logits,
                          const graph::Output& labels) {
  graph::Output argmax = ops::ArgMax(scope, logits, ops::Const(scope, 1), graph::DT_INT64);
  graph::Output correct = ops::Equal(scope, argmax, labels);
  graph::Output as_float = ops::Cast(scope, correct, graph::DT_FLOAT);
  return ops::Mean(scope.WithOpName("accuracy"), as_float, ops::Const(scope, std::vector<int32_t>{0}));
}

std::vector<SampleFlag> TrainingFlags::AsSampleFlags() {
  const std::string steps_default =
      default_steps > 0 ? std::to_string(default_steps) : std::string("one epoch");
  return {{"data", "the Fashion-MNIST directory (default " + std::string(kDebianFashionMnistDir) + ")", &data},
          {"steps", "training steps of batch 100 (default: " + steps_default + "; with --tiny one epoch)", &steps},
          {"log-every", "print the loss every N steps (default 100)", &log_every}};
}

void ExtractTiny(int* argc, char** argv, TrainingFlags* flags) {
  int out = 1;
  for (int i = 1; i < *argc; ++i) {
    if (std::strcmp(argv[i], "--tiny") == 0) {
      flags->tiny = true;
    } else {
      argv[out++] = argv[i];
    }
  }
  *argc = out;
}

StatusOr<TrainingRun> TrainClassifier(const SampleOptions& options, const TrainingFlags& flags,
                                      const ClassifierGraph& graph, int64_t batch) {
  MnistDataSets data;
  if (flags.tiny) {
    data = GenerateTinyImageSets();
  } else {
    ASSIGN_OR_RETURN(data, LoadFashionMnist(flags.data));
  }
  const int64_t epoch = std::max<int64_t>(1, data.train.count / batch);
  int64_t steps = flags.default_steps > 0 && !flags.tiny ? flags.default_steps : epoch;
  if (!flags.steps.empty()) {
    ASSIGN_OR_RETURN(steps, ParseCount("steps", flags.steps));
  }
  ASSIGN_OR_RETURN(int64_t log_every, ParseCount("log-every", flags.log_every));
  std::printf("%s: %s: %lld training images, %lld test images; %lld steps of batch %lld (%.2f epochs), "
              "--jit=%s\n",
              options.program.c_str(), data.source.c_str(), static_cast<long long>(data.train.count),
              static_cast<long long>(data.test.count), static_cast<long long>(steps),
              static_cast<long long>(batch), double(steps * batch) / data.train.count,
              std::string(JitModeName(options.jit)).c_str());

  ASSIGN_OR_RETURN(auto session, SampleSession::Create(options, graph.def, options.jit, "train_step"));
  auto init = session->session().Run({}, {}, {graph.init});
  if (!init.ok()) return init.status().WithContext("init");
  TrainingRun run;
  std::vector<double> step_ms;
  for (int64_t step = 0; step < steps; ++step) {
    // In order, wrapping around: the tutorial's next_batch without shuffling, so that runs with
    // and without the JIT see the same batches.
    auto [x, y] = MakeBatch(data.train, step * batch, batch);
    const bool traced = step == steps - 1;
    if (traced) RETURN_IF_ERROR(StartTrace());
    const auto start = std::chrono::steady_clock::now();
    auto out = session->session().Run({{graph.x, x}, {graph.labels, y}}, {graph.loss}, {graph.train});
    step_ms.push_back(Ms(start));
    if (traced) run.last_step_trace = StopTrace();
    if (!out.ok()) return out.status().WithContext(fmt::format("step {}", step + 1));
    run.losses.push_back((*out)[0].GetAsDouble(0));
    if ((step + 1) % log_every == 0 || step == 0 || step == steps - 1) {
      std::printf("step %lld: loss %.9g\n", static_cast<long long>(step + 1), run.losses.back());
    }
  }
  run.first_step_ms = step_ms.front();
  std::sort(step_ms.begin(), step_ms.end());
  run.median_step_ms = step_ms[step_ms.size() / 2];
  run.last_step_kernels = CountKernels(run.last_step_trace);
  auto [test_x, test_y] = MakeBatch(data.test, 0, data.test.count);
  auto accuracy = session->session().Run({{graph.x, test_x}, {graph.labels, test_y}}, {graph.accuracy});
  if (!accuracy.ok()) return accuracy.status().WithContext("test accuracy");
  run.test_accuracy = (*accuracy)[0].GetAsDouble(0);
  run.compilations = session->compilations();
  return run;
}

void PrintTrainingSummary(const SampleOptions& options, const TrainingRun& run) {
  std::printf("test accuracy: %.4f\n", run.test_accuracy);
  std::printf("time per step: median %.3f ms (first step %.3f ms%s)\n", run.median_step_ms,
              run.first_step_ms, run.compilations > 0 ? ", with the compilation" : "");
  const KernelCount& k = run.last_step_kernels;
  std::printf("last step: %d kernel%s (%d compiled, %d op by op); %lld compilation%s in the run\n",
              k.total(), k.total() == 1 ? "" : "s", k.compiled, k.op_by_op,
              static_cast<long long>(run.compilations), run.compilations == 1 ? "" : "s");
  // The compiled step's few kernels in full; of the op-by-op step's many, the first few.
  const size_t shown = k.names.size() <= 12 ? k.names.size() : 8;
  for (size_t i = 0; i < shown; ++i) std::printf("  %s\n", k.names[i].c_str());
  if (shown < k.names.size()) std::printf("  ... and %zu more\n", k.names.size() - shown);
}

int RunClassifierSample(const SampleOptions& options, const TrainingFlags& flags,
                        const StatusOr<ClassifierGraph>& graph, int64_t batch) {
  if (!graph.ok()) return Fail(options, graph.status());
  if (Status s = MaybeWriteGraph(options, graph->def); !s.ok()) return Fail(options, s);
  auto run = TrainClassifier(options, flags, *graph, batch);
  if (!run.ok()) return Fail(options, run.status());
  PrintTrainingSummary(options, *run);
  if (Status s = MaybeWriteTrace(options, run->last_step_trace); !s.ok()) return Fail(options, s);
  return 0;
}

}  // namespace xlens::samples
