// What of a must-compile graph (TensorFlow's tf.function(jit_compile=True), xla.compile) is the
// compiled function and what stays on the host. TensorFlow compiles the function's body; its
// resource variables are created outside it and captured, so the body sees only their handles,
// as arguments: every read becomes a use of the variable's current value (an XLA parameter) and
// every write an extra result, which the launch writes back after the run
// (tf2xla/variable_ops.cc, tf2xla/training_ops.cc, xla_launch_ops.h). A whole GraphDef run as
// one must-compile function holds the variables' own nodes too; they are that outside:
//   - VarHandleOp, and a resource Placeholder (a TF2 function graph's captured variable,
//     ".../ReadVariableOp/resource"): the handle, an input of the compiled computation;
//   - VariableV2 (a reference variable) and the Identity that reads its value ("w/read"): the
//     value, a parameter. A reference variable cannot be updated inside a compiled function,
//     in TensorFlow either: its Assign/Apply ops keep TensorFlow's error.
// A node stays on the host only when every input it has (control inputs too) does, so the host
// part runs before the launch and the clustered rest never waits on it the other way round.
#pragma once

#include <map>
#include <string>

#include "compiler/cluster/compilability_check.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def.h"

namespace xlens::cluster {

// The nodes of `graph` a must-compile function leaves on the host (its _Arg and _Retval nodes
// aside), each with why, as `xlens cluster` and the JIT's record list unclustered nodes.
std::map<std::string, std::string> MustCompileHostNodes(const graph::Graph& graph);

// Readies a GraphDef to run as a must-compile function: its If, Case and While nodes (in the
// graph and in its functions) lose `_lower_using_switch_merge`, as TensorFlow traces them in a
// jit_compile function, so the session keeps them functional and XLA compiles them whole
// (functional_ops.h) instead of meeting Switch/Merge. Function calls are still inlined.
void KeepFunctionalControlFlow(graph::GraphDef* def);

// Why `node` cannot be part of a must-compile function, "" when it can: UncompilableReason's
// answer, but a functional While, If or Case (lowered to an XLA while or conditional,
// tf2xla/functional_ops.h) compiles when every node of its functions does.
std::string MustCompileReason(const graph::Node& node, const graph::Graph& graph,
                              const OperationFilter& filter, int depth = 0);

}  // namespace xlens::cluster
