// What the two image-classifier samples (mnist_softmax, mlp_training) share: their data flags
// (--data DIR, --tiny, --steps N, --log-every N), the accuracy nodes the tutorial adds
// (reduce_mean(cast(equal(argmax(logits, 1), labels)))), and the training loop that feeds batches
// of 100, fetches each step's loss with its update, traces the last step, and measures the
// accuracy on the test set.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/scope.h"
#include "samples/data/image_set.h"
#include "samples/sample_options.h"

namespace xlens::samples {

// The node names a classifier graph exposes to the loop.
struct ClassifierGraph {
  graph::GraphDef def;
  std::string x = "x", labels = "y_";  // placeholders: f32 [batch, 784], i64 [batch]
  std::string loss, train, accuracy, init = "init";
};

// correct_prediction = tf.equal(tf.argmax(logits, 1), labels);
// accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32)), named "accuracy".
graph::Output AddAccuracy(const graph::Scope& scope, const graph::Output& logits,
                          const graph::Output& labels);

// The data and loop flags; parse them with ParseSampleOptions (ExtractTiny first).
struct TrainingFlags {
  std::string data = kDebianFashionMnistDir;
  std::string steps;  // empty: default_steps
  // Steps when --steps is not given; 0 (and always with --tiny): one epoch.
  int64_t default_steps = 0;
  std::string log_every = "100";
  bool tiny = false;
  std::vector<SampleFlag> AsSampleFlags();
};
// Removes --tiny (a flag without a value) from argv, setting flags->tiny.
void ExtractTiny(int* argc, char** argv, TrainingFlags* flags);

struct TrainingRun {
  std::vector<double> losses;  // every step's loss
  double median_step_ms = 0, first_step_ms = 0;
  double test_accuracy = 0;
  int64_t compilations = 0;
  KernelCount last_step_kernels;
  profiler::Trace last_step_trace;
};

// Loads the data (--tiny: the generated set), trains `graph` under `jit` with batches of
// `batch` for the steps the flags ask (default_steps, or one epoch, when none), printing "step N: loss L" every
// --log-every steps, then evaluates the test accuracy.
StatusOr<TrainingRun> TrainClassifier(const SampleOptions& options, const TrainingFlags& flags,
                                      const ClassifierGraph& graph, int64_t batch);

// Prints the run's summary: accuracy, time per step, the last step's kernels.
void PrintTrainingSummary(const SampleOptions& options, const TrainingRun& run);

// The end of both samples' main once their graph is built: writes it (--graph), trains it with
// batches of `batch`, prints the summary and writes the last step's timeline (--trace). Returns
// the exit code: 0, or 1 after one message naming the first thing that failed.
int RunClassifierSample(const SampleOptions& options, const TrainingFlags& flags,
                        const StatusOr<ClassifierGraph>& graph, int64_t batch);

}  // namespace xlens::samples
