// mlp_training: a two-layer perceptron on Fashion-MNIST (784 -> 256 ReLU -> 10, softmax
// cross-entropy, gradient descent 0.1, batches of 100), trained a few hundred steps with the
// JIT: the realistic workload for the benchmarks and the viewer, with two matmuls and their
// gradients per step instead of the softmax regression's one.
#include <cstdio>

#include "compiler/graph/cc_ops.h"
#include "compiler/graph/scope.h"
#include "compiler/graph/training.h"
#include "samples/classifier_training.h"
#include "samples/sample_options.h"

namespace xlens::samples {
namespace {

using graph::Output;
namespace ops = graph::ops;

constexpr int64_t kHidden = 256;

// tf.compat.v1.layers.dense twice: kernels glorot-uniform (fixed seeds, so every run starts from
// the same weights), biases zero.
StatusOr<ClassifierGraph> BuildGraph() {
  graph::Scope root = graph::Scope::NewRootScope();
  Output x = ops::Placeholder(root.WithOpName("x"), graph::DT_FLOAT, graph::PartialShape({-1, 784}));
  Output labels = ops::Placeholder(root.WithOpName("y_"), graph::DT_INT64, graph::PartialShape({-1}));
  graph::VariableOptions glorot;
  glorot.seed = 1;
  glorot.seed2 = 1;
  ASSIGN_OR_RETURN(graph::GraphVariable w1, graph::CreateVariable(root, "dense/kernel", graph::DT_FLOAT, {784, kHidden}, glorot));
  glorot.seed2 = 2;
  ASSIGN_OR_RETURN(graph::GraphVariable w2, graph::CreateVariable(root, "dense_1/kernel", graph::DT_FLOAT, {kHidden, 10}, glorot));
  graph::VariableOptions zeros;
  zeros.initial_value = graph::Tensor(graph::DT_FLOAT, {kHidden});
  ASSIGN_OR_RETURN(graph::GraphVariable b1, graph::CreateVariable(root, "dense/bias", graph::DT_FLOAT, {kHidden}, zeros));
  zeros.initial_value = graph::Tensor(graph::DT_FLOAT, {10});
  ASSIGN_OR_RETURN(graph::GraphVariable b2, graph::CreateVariable(root, "dense_1/bias", graph::DT_FLOAT, {10}, zeros));
  // Each layer reads its variables under its own name, as Keras' dense layers do.
  auto read = [&](const graph::GraphVariable& v, const std::string& name) {
    return ops::ReadVariableOp(root.WithOpName(name), v.handle, graph::DT_FLOAT);
  };
  Output hidden = ops::Relu(
      root.WithOpName("dense/Relu"),
      ops::BiasAdd(root.WithOpName("dense/BiasAdd"),
                   ops::MatMul(root.WithOpName("dense/MatMul"), x, read(w1, "dense/MatMul/ReadVariableOp")),
                   read(b1, "dense/BiasAdd/ReadVariableOp")));
  Output logits = ops::BiasAdd(
      root.WithOpName("dense_1/BiasAdd"),
      ops::MatMul(root.WithOpName("dense_1/MatMul"), hidden, read(w2, "dense_1/MatMul/ReadVariableOp")),
      read(b2, "dense_1/BiasAdd/ReadVariableOp"));
  RETURN_IF_ERROR(root.status());
  ASSIGN_OR_RETURN(Output loss, graph::SparseSoftmaxCrossEntropyLoss(root, labels, logits));
  ASSIGN_OR_RETURN(graph::Node * train,
                   graph::GradientDescentOptimizer(0.1f).Minimize(root, loss, {w1, b1, w2, b2}));
  AddAccuracy(root, logits, labels);
  ops::NoOp(root.WithOpName("init").WithControlDependencies(std::vector<graph::Node*>{
      w1.initializer, b1.initializer, w2.initializer, b2.initializer}));
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
  flags.steps = "300";
  ExtractTiny(&argc, argv, &flags);
  SampleOptions options = ParseSampleOptions(
      argc, argv, "mlp_training",
      "A 784-256-10 ReLU perceptron trained on Fashion-MNIST with the JIT (300 steps of batch 100 "
      "by default; --tiny: a small generated set instead).",
      JitMode::kAuto, flags.AsSampleFlags());
  return RunClassifierSample(options, flags, BuildGraph(), /*batch=*/100);
}

}  // namespace
}  // namespace xlens::samples

int main(int argc, char** argv) { return xlens::samples::Main(argc, argv); }
