// Function calls inside a compiled function, as tf2xla compiles them: the call's function is
// instantiated with the call's attrs and its body lowered in place, into the computation the call
// is in, with the body's _Arg nodes bound to the call's inputs (TensorFlow's XlaCompiler inlines
// calls before it compiles a function; what it cannot inline it compiles and calls, the same
// instructions). A variable passed in is the caller's: the body reads and writes it like any
// variable of the cluster. Calls are PartitionedCall and StatefulPartitionedCall (their `f`) and
// a node whose op names a function of the library (encapsulate_subgraphs' `op: "cluster_0"`).
// The callee's attrs (`_XlaMustCompile` on a jit_compile function Keras made) change nothing
// here: inside a compiled function everything is compiled.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "compiler/cluster/tf2xla/functional_ops.h"
#include "compiler/graph/function.h"

namespace xlens::cluster {

// Whether `op` calls the function of its `f` attr (PartitionedCall, StatefulPartitionedCall).
bool IsFunctionCallOp(const std::string& op);

// The function `node` calls and the attrs that bind its placeholders; nullopt when the node is
// no function call.
std::optional<graph::NameAttrList> CalledFunction(const graph::Node& node,
                                                  const graph::FunctionDefLibrary& library);

// How deep calls may nest inside one compiled function: a function that calls itself has no
// inlined form.
inline constexpr int kMaxInlinedCallDepth = 64;

// The outputs of call node `node` to `func` (found in `library`), its body lowered through
// `lower_body` into `builder`'s computation with `inputs` as its arguments. `depth`: how many calls
// the node is already inside. Errors name the node and the function: one that cannot be
// instantiated, results that are not the call's in number or type, a nesting past the limit, and
// the body's own errors.
StatusOr<std::vector<XlaExpression>> LowerFunctionCall(
    const graph::Node& node, const graph::NameAttrList& func,
    const std::vector<XlaExpression>& inputs, const graph::FunctionDefLibrary& library,
    const graph::OpRegistry& registry, HloBuilder& builder, int depth,
    const FunctionBodyLowering& lower_body);

}  // namespace xlens::cluster
