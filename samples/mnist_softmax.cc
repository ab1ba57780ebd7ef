// mnist_softmax: the tutorial "Using JIT Compilation"'s mnist_softmax_xla, a softmax regression
// (y = x W + b, W [784, 10] and b [10] from zeros) trained with
// tf.compat.v1.losses.sparse_softmax_cross_entropy and GradientDescentOptimizer(0.5) on batches
// of 100, here on Fashion-MNIST (Debian's dataset-fashion-mnist) instead of MNIST. It prints the
// loss every --log-every steps, the accuracy on the 10,000 test images and the time per step.
// --trace writes the last step's timeline, as the tutorial's RunMetadata does: with --jit=off the
// op-by-op kernels (MatMul and friends), with the JIT one cluster launch holding a few fused
// kernels.
#include <cstdio>
#include <cstdlib>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/scope.h"
#include "compiler/graph/training.h"
#include "samples/classifier_training.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Output;
namespace ops = graph::ops;

// The tutorial's graph in TF1's names (the ones TensorFlow 2.21 wrote in
// ../shared/corpus/tf/mnist_softmax_tf1/nojit/graph.pbtxt).
StatusOr<ClassifierGraph> BuildGraph(float learning_rate) {
  graph::Scope root = graph::Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), graph::DT_FLOAT, graph::PartialShape({-1, 784}));
  graph::VariableOptions zeros;
  zeros.initial_value = graph::Tensor(graph::DT_FLOAT, {784, 10});
  ASSIGN_OR_RETURN(graph::GraphVariable w, graph::CreateVariable(root, "w", graph::DT_FLOAT, {784, 10}, zeros));
  zeros.initial_value = graph::Tensor(graph::DT_FLOAT, {10});
  ASSIGN_OR_RETURN(graph::GraphVariable b, graph::CreateVariable(root, "b", graph::DT_FLOAT, {10}, zeros));
  // x @ W and `+ b` read their variable inside their own name scope, as Python does.
  graph::Scope mm_inputs = root;
  graph::Scope mm = root.NewOpScope("MatMul", &mm_inputs);
  Output w_value = ops::ReadVariableOp(mm_inputs, w.handle, graph::DT_FLOAT);
  Output matmul = ops::AsOutput(mm.AddNode("MatMul", {x, w_value}, {}));
  graph::Scope add_inputs = root;
  graph::Scope add = root.NewOpScope("add", &add_inputs);
  Output b_value = ops::ReadVariableOp(add_inputs, b.handle, graph::DT_FLOAT);
  Output logits = ops::AsOutput(add.AddNode("AddV2", {matmul, b_value}, {}));
  Output labels = ops::Placeholder(root.WithOpName("y_"), graph::DT_INT64, graph::PartialShape({-1}));
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(Output loss, graph::SparseSoftmaxCrossEntropyLoss(root, labels, logits));
  ASSIGN_OR_RETURN(graph::Node * train, graph::GradientDescentOptimizer(learning_rate).Minimize(root, loss, {w, b}));
  AddAccuracy(root, logits, labels);
  ops::NoOp(root.WithOpName("init").WithControlDependencies(
      std::vector<graph::Node*>{w.initializer, b.initializer}));
  RETURN_IF_ERROR(root.status());
  ClassifierGraph g;
  g.def = root.graph()->ToGraphDef();
  g.loss = loss.name();
  g.train = train->name();
  g.accuracy = "accuracy";
  return g;
}

int Main(int argc, char** argv) {
  TrainingFlags flags;
  // The tutorial's loop: `for i in range(1000): batch_xs, batch_ys = mnist.train.next_batch(100)`.
  flags.default_steps = 1000;
  ExtractTiny(&argc, argv, &flags);
  std::string rate_text = "0.5";
  std::vector<SampleFlag> extra = flags.AsSampleFlags();
  extra.push_back({"learning-rate", "gradient descent's learning rate (default 0.5, the tutorial's)",
                   &rate_text});
  SampleOptions options = ParseSampleOptions(
      argc, argv, "mnist_softmax",
      "The tutorial's mnist_softmax_xla: softmax regression on Fashion-MNIST, batch 100, gradient "
      "descent 0.5, 1000 steps as the tutorial's loop (--tiny: a small generated set instead).",
      JitMode::kAuto, extra);
  // 0.5 is the tutorial's rate for MNIST; Fashion-MNIST's brighter images make it large enough
  // that the loss jumps about, and float rounding then grows from step to step (the runs with and
  // without the JIT part after a few dozen steps): a smaller rate keeps them together.
  float rate = 0;
  {
    char* end = nullptr;
    rate = std::strtof(rate_text.c_str(), &end);
    if (end == rate_text.c_str() || *end != '\0' || !(rate > 0 && rate < 100)) {
      return Fail(options, Error("--learning-rate " + rate_text + ": expected a number between 0 and 100"));
    }
  }
  return RunClassifierSample(options, flags, BuildGraph(rate), /*batch=*/100);
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }
