// TensorFlow's LowerFunctionalOpsPass: TF2's functional control flow becomes v1 control flow and
// function calls are inlined, before any XLA pass sees the graph (TensorFlow runs it among the
// pre-placement optimizations, so mark_for_compilation only ever meets Switch/Merge/Enter/Exit).
//
//  * If / StatelessIf (lower_if_op.cc): `<if>/switch_pred/_N` = Switch(pred, pred) with the pivots
//    `<if>/pivot_f/_N`, `<if>/pivot_t/_N`; one Switch `<if>/<input's node>/_N` per input; the
//    branches called as `<if>/then/_N`, `<if>/else/_N` and inlined; one Merge `<if>/output/_N`
//    per output; `<if>/branch_executed/_N` = Merge(pivot_t, pivot_f) after both branches; and a
//    node named as the If: IdentityN of the outputs when the lowered nodes must stay fetchable
//    (a graph without _Arg/_Retval, the TF1 session graph), else a NoOp after branch_executed.
//  * Case / StatelessCase (lower_case_op.cc): `<case>/branch<b>/_N` calls, `<case>/branch_index/_N`
//    = _SwitchN(index, index) with the pivots `<case>/pivot_<b>/_N`, a _SwitchN
//    `<case>/<input's node>/_N` per input, a Merge `<case>/merge/_N` per output and
//    `<case>/branch_executed/_N`; the node named as the Case as for an If.
//  * While / StatelessWhile (lower_while_op.cc): per loop variable `<w>/enter/_N` (frame_name =
//    the While's name, its parallel_iterations), `<w>/merge/_N`, `<w>/<input's node>_switch/_N`
//    on `<w>/LoopCond/_N`, `<w>/exit/_N`, `<w>/next_iteration/_N`; the cond called as
//    `<w>/cond/_N` after the first Merge and the body as `<w>/body/_N` after
//    `<w>/loop_body_control/_N`; `<w>/LoopExecuted/_N` after every Exit; a node named as the While.
//  * PartitionedCall / StatefulPartitionedCall, and the branch and body calls above
//    (inline_function_utils.cc): `Func/<call>/input_control_node/_N` when the call has control
//    inputs, `Func/<call>/input/_N` Identity per argument, the body's nodes as `<call>/<node>`,
//    `Func/<call>/output/_N` Identity per result, `Func/<call>/output_control_node/_N` after the
//    control outputs, and the call itself kept as a NoOp (IdentityN when fetchable).
//
// `_N` is TensorFlow's Graph::NewName counter, one per pass, so the names are TensorFlow's.
// If, Case and While are lowered only when they carry `_lower_using_switch_merge = true` (what TF2 sets
// outside XLA contexts); nothing is lowered or inlined on a node with `_XlaMustCompile = true`, and
// calls marked `_noinline` stay calls. What stays runs through the op's kernel, which runs the
// function on a nested executor.
#pragma once

#include <optional>

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::graph {

struct LowerFunctionalOpsOptions {
  // Whether the node named as the lowered If/While/call stays fetchable (IdentityN of its
  // outputs) or only targetable (NoOp). Unset: fetchable exactly when the graph has no _Arg and
  // no _Retval nodes, as TensorFlow decides.
  std::optional<bool> keep_lowered_nodes_fetchable;
};

// Lowers every If/While and inlines every function call of `graph`, repeatedly, until none is
// left but those kept on purpose. Errors name the node and the function.
Status LowerFunctionalOps(Graph* graph, const LowerFunctionalOpsOptions& options = {});

// Whether the graph has any node the pass would rewrite (so callers can skip a copy).
bool HasFunctionalOpsToLower(const Graph& graph);

}  // namespace xlens::graph
