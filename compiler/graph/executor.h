// The op-by-op executor: runs a graph whose inputs are _Arg nodes and whose results are _Retval
// nodes (what Session and function calls hand it), one kernel per node as soon as its inputs are
// ready, honouring control dependencies and v1 control flow: Switch/Merge propagate deadness,
// Enter/Exit/NextIteration/LoopCond run loops in frames and iterations, as TensorFlow's executor
// does, freeing each iteration once it is done and each frame once it finishes, so a loop holds
// only its live state however many iterations it runs. Each kernel is a span on the profiler's
// trace (category "tf_op": name, op, shapes), the "without XLA" timeline.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/graph.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/resource_mgr.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens {
class ThreadPool;
}

namespace xlens::graph {

inline constexpr std::string_view kTfOpCategory = "tf_op";

struct ExecutorOptions {
  ResourceMgr* resources = nullptr;  // required when the graph has variables
  ThreadPool* pool = nullptr;        // null: ThreadPool::Default()
  // Per-node state across runs, by node name, shared by every signature of a session as
  // TensorFlow shares stateful kernels (OpSegment); null: state lives for one run.
  std::map<std::string, KernelState>* kernel_state = nullptr;
  // Largest tensor one kernel may allocate, so a hostile graph cannot exhaust memory.
  int64_t max_tensor_bytes = int64_t{1} << 34;
  // Largest number of iterations of one loop frame (a runaway loop is an error, not a hang).
  int64_t max_loop_iterations = int64_t{1} << 31;
  // The graph whose function library the kernels of calls (If, While, PartitionedCall) look in;
  // null: the graph run. A function body runs with its caller's, so bodies need no library copy.
  const Graph* function_library = nullptr;
};

// What one run held at its peak, to check that loops run in memory proportional to their live
// state: iterations are freed once done and frames once finished, as in TensorFlow's executor.
struct ExecutorRunStats {
  int64_t peak_live_iterations = 0;  // iteration states alive at once, over all frames
  int64_t peak_live_frames = 0;      // loop frames alive at once (the root frame not counted)
  int64_t peak_held_values = 0;      // tensors waiting as inputs of nodes not yet run
  int64_t iterations_started = 0;    // iteration states created in all
};

// Whether a node computes the same value on every run when its inputs are constants: a kernel of
// a stateless op that calls no function and yields no handle, list or reference. The executor
// computes such nodes of constants once (as grappler's constant folding would) and reuses them.
bool IsFoldableKernel(const Node& node);

class Executor {
 public:
  // Checks the graph can run: every node has a kernel, the graph is acyclic except for loop
  // back edges. Keeps a pointer to `graph`, which must outlive the executor.
  static StatusOr<std::unique_ptr<Executor>> Create(const Graph* graph, ExecutorOptions options);
  ~Executor();

  // Runs once: `args[i]` is the value of the _Arg node with index i; the result holds one tensor
  // per _Retval index. A fetch that is dead (on an untaken branch) is an error naming it.
  StatusOr<std::vector<Tensor>> Run(const std::vector<Tensor>& args);

  // Figures of the last Run.
  const ExecutorRunStats& last_run_stats() const;

 private:
  Executor(const Graph* graph, ExecutorOptions options);
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace xlens::graph
