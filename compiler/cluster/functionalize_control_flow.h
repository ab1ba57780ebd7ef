// TensorFlow's FunctionalizeControlFlow (tf2xla/functionalize_while.cc, functionalize_cond.cc):
// control flow in its lowered v1 form (Enter, Merge, Switch, LoopCond, NextIteration, Exit; the
// form TF1's tf.while_loop and tf.cond write, and the one convert_variables_to_constants_v2 and
// the LowerFunctionalOps pass leave) becomes functional While and If again, so a must-compile
// graph lowers to XLA's while and conditional (tf2xla/functional_ops.h) as TensorFlow compiles it.
//
//  * Loops are found by their frames (the Enter nodes' frame_name) and rewritten innermost first:
//    each loop variable (an Enter, its Merge, the Switch on the frame's LoopCond, its Exit, the
//    NextIteration feeding the Merge) becomes one input and output of a While; a loop invariant
//    (an Enter with is_constant) an input the body hands back unchanged. The cond function holds
//    what computes the LoopCond's input from the Merges; the body what computes the
//    NextIterations' inputs from the Switches' true outputs (and every other node of the frame,
//    so side effects stay in the loop). Both are added to the graph's library; the While takes
//    the Enters' inputs and control inputs, and the Exits' consumers read its outputs.
//  * Conditionals are found by their Switch predicates, innermost first (a conditional whose
//    branches hold no Switch or Merge of another one): the nodes only a Switch's false output
//    reaches form the else branch, those only its true output reaches the then branch, and the
//    Merges joining them are the outputs of an If whose inputs are the Switches' data inputs
//    (and whatever else the branches read from outside). Conditionals on one predicate one
//    after the other become one If each, the first first; a Switch on a predicate its branch
//    already fixes (a cond nested in a cond on the same predicate) passes its taken side on, as
//    TensorFlow's does. A loop body's conditionals are functionalized inside the body function.
//
// A graph with no v1 control flow is left alone. What cannot be made functional is an error of
// one line naming the node at fault: a loop without a LoopCond, a loop variable whose Merge or
// Switch is missing, a node read from outside its frame or its branch without an Exit or a
// Merge, a Switch read outside both branches of its conditional, a node reading both branches of
// one conditional.
#pragma once

#include "compiler/graph/graph.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

// Rewrites `graph`'s v1 loops into While nodes and its v1 conditionals into If nodes, their
// functions added to graph->library(). On an error the graph may be partly rewritten.
Status FunctionalizeControlFlow(graph::Graph* graph);

// Whether `graph` has any v1 control-flow node (Switch, Merge, Enter, Exit, NextIteration,
// LoopCond) the pass would rewrite.
bool HasV1ControlFlow(const graph::Graph& graph);

}  // namespace xlens::cluster
