// TensorFlow's functional control flow as XLA control flow, as tf2xla's XlaWhileOp and XlaIfOp
// build it. A resource variable passed in is carried as its current value: the function reads
// and writes it like any variable of the cluster, and afterwards the variable holds the value it
// left with (an update of the module when it was written). The handle itself is the op's output
// for that variable, as in TensorFlow.
//   While / StatelessWhile: an XLA `while` whose state is a tuple of every loop variable; the
//     cond and body functions become computations of the module over that tuple.
//   If / StatelessIf, Case / StatelessCase: an XLA `conditional` on the predicate (the branch
//     index: out of range picks the last branch, in TensorFlow and XLA alike); each branch a
//     computation over the tuple of the inputs, returning the outputs and the value of every
//     variable any branch writes. A predicate or index known at compile time lowers the branch
//     it picks, inline.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "compiler/cluster/tf2xla/xla_op_registry.h"
#include "compiler/graph/function.h"

namespace xlens::cluster {

// Lowers a function body into the computation `builder` builds, its _Arg nodes bound to `args`;
// its _Retval values, by index.
using FunctionBodyLowering = std::function<StatusOr<std::vector<XlaExpression>>(
    const graph::Graph& body, HloBuilder* builder, std::vector<XlaExpression> args)>;

// The outputs of While node `node` given its inputs, its cond and body found in `library`; the
// loop is added through `builder`. Errors name the node: a variable without a value, a loop
// variable whose shape or type the body changes, a cond that is not a boolean scalar.
StatusOr<std::vector<XlaExpression>> LowerWhile(const graph::Node& node,
                                                const std::vector<XlaExpression>& inputs,
                                                const graph::FunctionDefLibrary& library,
                                                const graph::OpRegistry& registry,
                                                HloBuilder& builder,
                                                const FunctionBodyLowering& lower_body);

// The outputs of If or Case node `node` (input 0 the predicate or branch index, the rest the
// branches' arguments). Errors name the node: a predicate that is not a boolean scalar, an index
// that is not an int32 scalar, branches whose outputs differ in shape or type.
StatusOr<std::vector<XlaExpression>> LowerConditional(const graph::Node& node,
                                             const std::vector<XlaExpression>& inputs,
                                             const graph::FunctionDefLibrary& library,
                                             const graph::OpRegistry& registry,
                                             HloBuilder& builder,
                                             const FunctionBodyLowering& lower_body);

// Whether `op` is one of the functional loops LowerWhile lowers.
bool IsFunctionalWhile(const std::string& op);
// Whether `op` is one of the functional conditionals LowerConditional lowers.
bool IsFunctionalIf(const std::string& op);
bool IsFunctionalCase(const std::string& op);
// The functions a functional control-flow op calls (cond and body; the branches), in order;
// empty for any other op.
std::vector<graph::NameAttrList> FunctionalOpFunctions(const graph::Node& node);

}  // namespace xlens::cluster
