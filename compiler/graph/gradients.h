// Symbolic gradients: adds to the graph the nodes computing d(outputs)/d(inputs), with the
// algorithm of TensorFlow's gradients (tensorflow/python/ops/gradients_util.py, which
// tensorflow/cc/framework/gradients.cc follows): the nodes between `inputs` and `outputs` are
// visited from the outputs back, each once every consumer's gradient has arrived; several
// gradients of one tensor are summed with AddN; each op's gradient is built by the GradFn its
// registration carries, in the name scope "gradients/<op>_grad", so the graph has the node
// names TensorFlow's Python would give it.
#pragma once

#include <vector>

#include "compiler/graph/scope.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct GradientsOptions {
  // Python's gate_gradients (Optimizer.GATE_OP): the gradients of an op's inputs are grouped
  // with control_flow_ops.tuple, so none is used before all are computed. tf.gradients leaves
  // it off; Optimizer.minimize turns it on.
  bool gate_gradients = false;
  // The name scope the gradient nodes go in (made unique: "gradients", "gradients_1").
  std::string name = "gradients";
};

// `grad_outputs` empty: each output's gradient is ones (Fill named "gradients/grad_ys_<i>").
// `grad_inputs` gets one gradient per input; an input the outputs do not depend on gets an
// invalid Output (Python's None).
Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& outputs,
                            const std::vector<Output>& inputs,
                            const std::vector<Output>& grad_outputs,
                            std::vector<Output>* grad_inputs);
Status AddSymbolicGradients(const Scope& scope, const std::vector<Output>& outputs,
                            const std::vector<Output>& inputs,
                            const std::vector<Output>& grad_outputs,
                            const GradientsOptions& options, std::vector<Output>* grad_inputs);

// Python's control_flow_ops.tuple in `scope` (a sub-scope "tuple" is opened): a NoOp
// "group_deps" waiting for every tensor, and per tensor an Identity "control_dependency"
// depending on it. Invalid entries stay invalid.
std::vector<Output> GradientTuple(const Scope& scope, const std::vector<Output>& tensors);

}  // namespace xlens::graph
