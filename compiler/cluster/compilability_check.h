// Can XLA compile this node? TensorFlow's RecursiveCompilabilityChecker for the XLA_CPU_JIT
// device: an XLA kernel must exist for the op and its types, and auto-clustering refuses some ops
// XLA can compile (Unique, stateful random ops, Assert) or could compile only unsafely (a
// forwarded reference variable). Function calls are compilable when their bodies are. The
// reasons are TensorFlow's own words, as its compilability_check_util logs them, but for an op
// TensorFlow compiles and xlens cannot lower yet, which is said as such (tensorflow_xla_ops.h).
#pragma once

#include <string>

#include "compiler/graph/graph.h"

namespace xlens::cluster {

inline constexpr char kXlaCpuJitDevice[] = "XLA_CPU_JIT";

struct OperationFilter {
  // Unique's output shape depends on its values; auto-clustering leaves it out by name.
  bool allow_unique_op = false;
  bool allow_where_op = true;
  // XLA's random numbers are not TensorFlow's (the stateful RandomUniform & co.).
  bool allow_stateful_rng_ops = false;
  // Assert and CheckNumerics compile to nothing in XLA.
  bool allow_dummy_ops = false;
  bool allow_string_consts = false;
  bool allow_control_trigger = false;
  // Top-level _Arg/_Retval are the graph's interface, never clustered; inside a function they are.
  bool allow_top_level_args = false;
  // TensorFlow's CPU device leaves lists (DT_VARIANT values) and TensorArrays to the executor
  // when auto-clustering; a must-compile function compiles them.
  bool allow_variant_ops = false;
  bool allow_tensor_array_ops = false;
  bool allow_stack_ops = false;
  // A resource variable op inside a called function (a must-compile call's body reading its
  // captured variables): auto-clustering leaves the call out, a must-compile function compiles it.
  bool allow_resource_ops_in_called_functions = false;

  // What auto-clustering allows (mark_for_compilation).
  static OperationFilter ForAutoClustering();
  // What a must-compile function allows (everything XLA can compile).
  static OperationFilter ForMustCompile();
};

// "" when the node can be compiled under `filter`, else why not, e.g. "No registered 'AsString'
// OpKernel for XLA_CPU_JIT devices compatible with node {{node AsString}}", "Unique op",
// "stateful random op".
std::string UncompilableReason(const graph::Node& node, const graph::Graph& graph,
                               const OperationFilter& filter, int depth = 0);

// Whether a node forwards a reference variable's buffer (Identity of a VariableV2): XLA cannot
// alias a cluster's input and output, so such nodes stay out ("Identity with unsafe cast.").
bool HasForwardedRefInput(const graph::Node& node);

}  // namespace xlens::cluster
