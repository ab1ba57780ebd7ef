// A node whose op names a function of the graph's library is a call of that function, as in
// TensorFlow, whose FunctionLibraryDefinition is an op registry with the library's functions on
// top of the global ops: `op: "cluster_0"` in encapsulate_subgraphs' output, a body calling
// another function by name, a FunctionDef's nested calls. The op is the function's signature;
// running the node runs the function's body on a nested executor (function.h's RunFunction),
// with the node's attrs binding the signature's placeholders. A function never shadows an op of
// the registry, as TensorFlow refuses a function named as an op.
#pragma once

#include <memory>

#include "compiler/graph/graph_def.h"
#include "compiler/graph/op_registry.h"

namespace xlens::graph {

// The registration of `fdef` called as an op: its signature, a shape function that takes the
// node's `_output_shapes` when it has one per output (TensorFlow's dumps carry them) and leaves
// the outputs unknown otherwise, and the kernel that runs the function. No XLA kernel: the
// clustering leaves such a call alone, and a must-compile function is compiled from its body.
std::unique_ptr<OpRegistration> MakeFunctionCallRegistration(const FunctionDef& fdef);

}  // namespace xlens::graph
