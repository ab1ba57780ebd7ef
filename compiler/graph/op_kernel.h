// What a CPU kernel of the op-by-op executor sees: its node, its input tensors, its outputs to
// set, the session's variables, the thread pool, and state kept per node across runs (the
// generator of a stateful random op).
#pragma once

#include <any>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens {
class ThreadPool;
}

namespace xlens::graph {

// Per-node state that survives between runs of the same session.
struct KernelState {
  std::any value;
};

class OpKernelContext {
 public:
  OpKernelContext(const Node& node, std::vector<Tensor> inputs, std::vector<bool> input_is_dead,
                  ResourceMgr* resources, KernelState* state, ThreadPool* pool);

  const Node& node() const { return node_; }
  const std::string& name() const { return node_.name(); }
  const std::string& op() const { return node_.type_string(); }
  const AttrMap& attrs() const { return node_.attrs(); }

  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  const Tensor& input(int i) const { return inputs_[i]; }
  Tensor& mutable_input(int i) { return inputs_[i]; }  // to move from it
  // Only Merge sees dead inputs (every other kernel is skipped when one is dead).
  bool input_is_dead(int i) const { return input_is_dead_[i]; }

  int num_outputs() const { return static_cast<int>(outputs_.size()); }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  // Allocates output i with `dims` of the node's output type (zeroed). Refuses sizes past the
  // executor's limit with a message naming the node.
  StatusOr<Tensor*> allocate_output(int i, std::vector<int64_t> dims);
  // Output `output` over the buffer of input `input` when nothing else holds that buffer and its
  // type and dims are the output's (TensorFlow's forward_input_or_allocate_output): an
  // elementwise kernel then writes its result in place, reading the input as it goes. Otherwise
  // allocate_output.
  StatusOr<Tensor*> forward_input_or_allocate_output(int input, int output,
                                                     std::vector<int64_t> dims);
  Tensor& output(int i) { return outputs_[i]; }
  std::vector<Tensor>& outputs() { return outputs_; }
  // Marks output i dead (Switch's untaken branch).
  void set_output_dead(int i) { output_is_dead_[i] = true; }
  bool output_is_dead(int i) const { return output_is_dead_[i]; }

  ResourceMgr* resources() const { return resources_; }
  KernelState* state() const { return state_; }
  ThreadPool* pool() const { return pool_; }
  int64_t max_tensor_bytes() const { return max_tensor_bytes_; }
  void set_max_tensor_bytes(int64_t bytes) { max_tensor_bytes_ = bytes; }
  // The graph the node runs in: its function library is where the kernels of function calls
  // (If, While, PartitionedCall kept by the lowering) find their functions. Null outside an
  // executor.
  const Graph* graph() const { return graph_; }
  void set_graph(const Graph* graph) { graph_ = graph; }

  template <typename T>
  StatusOr<T> GetAttr(const std::string& name) const;

  // "node 'x' (Op): message": the one form every kernel error takes.
  Status Error(const std::string& message) const;

 private:
  const Node& node_;
  std::vector<Tensor> inputs_;
  std::vector<bool> input_is_dead_;
  std::vector<Tensor> outputs_;
  std::vector<bool> output_is_dead_;
  ResourceMgr* resources_;
  KernelState* state_;
  ThreadPool* pool_;
  int64_t max_tensor_bytes_ = int64_t{1} << 34;
  const Graph* graph_ = nullptr;
};

// GetAttr is defined for DataType, int64_t, float, bool, std::string, PartialShape, Tensor,
// std::vector<int64_t> and std::vector<DataType>.

}  // namespace xlens::graph
