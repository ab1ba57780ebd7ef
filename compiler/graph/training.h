// Variables and gradient descent as TensorFlow 1's Python lays them out in a graph:
// tf.compat.v1.get_variable (VarHandleOp "weights", its glorot-uniform initializer under
// "weights/Initializer/random_uniform", "weights/Assign", "weights/Read/ReadVariableOp") and
// tf.compat.v1.train.GradientDescentOptimizer(lr).minimize(loss) (the "gradients/" subgraph,
// "GradientDescent/learning_rate", "GradientDescent/update_<var>/ResourceApplyGradientDescent"
// and the "GradientDescent" NoOp grouping the updates).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/scope.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct VariableOptions {
  // The initial value; unset: get_variable's default, glorot_uniform (uniform in
  // [-sqrt(6 / (fan_in + fan_out)), +...]) drawn by RandomUniform with these seeds.
  std::optional<Tensor> initial_value;
  int64_t seed = 0;
  int64_t seed2 = 0;
  // A resource variable (VarHandleOp, what TF2's TF1 mode makes); false: a reference
  // variable (VariableV2 with Assign and Identity "read").
  bool use_resource = true;
};

// A variable as TF1 lays it out in the graph (the runtime Variable is resource_mgr.h's).
struct GraphVariable {
  std::string name;
  DataType dtype = DT_INVALID;
  PartialShape shape;
  bool is_resource = true;
  Output handle;        // VarHandleOp, or VariableV2's reference output
  Output initial_value;
  Node* initializer = nullptr;  // "weights/Assign": run it to initialise the variable
  Output read;          // "weights/Read/ReadVariableOp" or "weights/read"
  // A fresh read of the value (a ReadVariableOp in `scope`) for resource variables; the
  // "read" Identity for reference variables.
  Output Value(const Scope& scope) const;
};

StatusOr<GraphVariable> CreateVariable(const Scope& scope, const std::string& name, DataType dtype,
                                  const std::vector<int64_t>& shape,
                                  const VariableOptions& options = {});

// tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits) with its defaults (weights
// 1.0, Reduction.SUM_BY_NONZERO_WEIGHTS), laid out as losses_impl lays it out in the name scope
// "sparse_softmax_cross_entropy_loss": the "xentropy" op, the static weights checks
// (assert_broadcastable), the weighted sum and num_present, and the mean as DivNoNan "value".
// The ranks of `labels` and `logits` must be known and differ by one (what Python's static
// _remove_squeezable_dimensions path needs to add no nodes).
StatusOr<Output> SparseSoftmaxCrossEntropyLoss(const Scope& scope, const Output& labels,
                                               const Output& logits);

class GradientDescentOptimizer {
 public:
  explicit GradientDescentOptimizer(float learning_rate, std::string name = "GradientDescent")
      : learning_rate_(learning_rate), name_(std::move(name)) {}

  // compute_gradients (gate_gradients=GATE_OP, as minimize uses) then apply_gradients; returns
  // the NoOp that runs every update. A variable the loss does not depend on is an error, as
  // in TensorFlow ("No gradients provided for any variable" when none has one).
  StatusOr<Node*> Minimize(const Scope& scope, const Output& loss,
                           const std::vector<GraphVariable>& var_list) const;
  StatusOr<std::vector<Output>> ComputeGradients(const Scope& scope, const Output& loss,
                                                 const std::vector<GraphVariable>& var_list) const;
  StatusOr<Node*> ApplyGradients(const Scope& scope, const std::vector<Output>& grads,
                                 const std::vector<GraphVariable>& var_list) const;

 private:
  float learning_rate_;
  std::string name_;
};

}  // namespace xlens::graph
