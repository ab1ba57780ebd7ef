// TensorFlow's functional While (and StatelessWhile) as an XLA `while`, as tf2xla's XlaWhileOp
// builds it: the loop state is a tuple of every loop variable, the cond and body functions become
// computations of the module over that tuple. A resource variable passed into the loop is carried
// in the state as its current value: the body reads it and writes it like any variable of the
// function, its last value leaves the loop as the state's element, and after the loop the
// variable holds that value (and is an update of the module when the body wrote it). The handle
// itself is the loop's output for that variable, as in TensorFlow.
#pragma once

#include <functional>
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

// Whether `op` is one of the functional loops LowerWhile lowers.
bool IsFunctionalWhile(const std::string& op);

}  // namespace xlens::cluster
