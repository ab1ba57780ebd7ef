// Functions of a graph's library (FunctionDefLibrary): instantiating a FunctionDef into a Graph of
// its own, as TensorFlow's FunctionDefToBodyHelper does, and running one from a kernel.
//
// An instantiated function is a graph with one `_Arg` node per input tensor (index = position),
// the body's nodes, and one `_Retval` node per output tensor: the form the executor runs and the
// inliner (lower_functional_ops.h) splices into the caller. The signature's attr placeholders
// (`$T`) are bound from the call's attrs; body inputs written in FunctionDef form
// ("node:out_arg:index", "arg_name", "^node") become edges, the output index of
// "node:out_arg:index" found from the body op's OpDef (NameRangeForArg).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/attr_value.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/graph_def.h"
#include "compiler/graph/tensor.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class OpKernelContext;

// TensorFlow's FunctionBody: the instantiated graph and its interface nodes.
struct FunctionBody {
  std::unique_ptr<Graph> graph;  // holds a copy of the library, for nested calls
  std::vector<DataType> arg_types;
  std::vector<DataType> ret_types;
  std::vector<Node*> arg_nodes;          // _Arg, by index
  std::vector<Node*> ret_nodes;          // _Retval, by index
  std::vector<Node*> control_ret_nodes;  // the FunctionDef's control_ret, in signature order
};

// Instantiates `func` (a function of `library` and the attrs its placeholders take). Errors name
// the function and, where one is at fault, the body node: an unknown function, an unbound
// placeholder, an input naming no node or argument, an output index past the node's outputs.
// `copy_library`: whether the body's graph gets a copy of `library` (for a body compiled or run
// on its own). The inliner and RunFunction pass false: they find nested functions in the
// caller's library, and a copy per call would make a chain of n calls cost n libraries.
StatusOr<std::unique_ptr<FunctionBody>> InstantiateFunction(
    const FunctionDefLibrary& library, const NameAttrList& func,
    const OpRegistry* registry = &OpRegistry::Global(), bool copy_library = true);

// The same for a FunctionDef at hand (`call_attrs` bind its placeholders).
StatusOr<std::unique_ptr<FunctionBody>> InstantiateFunctionDef(
    const FunctionDef& fdef, const AttrMap& call_attrs, const FunctionDefLibrary& library,
    const OpRegistry* registry = &OpRegistry::Global(), bool copy_library = true);

// A FunctionDef on its own (TensorFlow's encapsulate_fdef_<cluster>.pbtxt dumps) as the GraphDef
// of its body: one `_Arg` per input tensor named as the argument, the body's nodes, one `_Retval`
// per output, and the function in the library (nested calls and TensorFlow's runtime-graph form
// load, verify and run like any graph). Placeholders the function leaves unbound (a polymorphic
// function) are an error naming them.
StatusOr<GraphDef> FunctionDefAsGraphDef(const FunctionDef& fdef);

// Writes a graph of _Arg/_Retval form back as a FunctionDef named `name` (what TensorFlow's
// GraphToFunctionDef does, in the form encapsulate_subgraphs writes): inputs and outputs from the
// _Arg and _Retval nodes (their index attrs give the order, their `T` the types), body inputs as
// "node:out_arg:index". `control_outputs` names nodes whose execution the function guarantees.
StatusOr<FunctionDef> GraphToFunctionDef(const Graph& graph, const std::string& name,
                                         const std::vector<std::string>& control_outputs = {});

// How deep calls that run at run time may nest (If and While bodies, calls the lowering keeps):
// each runs on a nested executor on the caller's thread, so depth is C++ stack. TensorFlow's
// executor has no such limit because it runs a call asynchronously; here a call 1000 deep, or one
// that would leave less than kMinFreeStackBytes of the thread's stack, is an error naming the
// function and the depth. A function that calls itself without end ends there.
inline constexpr int kMaxCallDepth = 1000;
inline constexpr size_t kMinFreeStackBytes = size_t{256} << 10;

// Runs `func` from a kernel (If, While and call kernels): the function comes from the library of
// the graph the kernel's node runs in, and runs on a nested executor with the kernel's resources,
// pool and limits.
StatusOr<std::vector<Tensor>> RunFunction(OpKernelContext& ctx, const NameAttrList& func,
                                          const std::vector<Tensor>& args);

// How many RunFunction calls are active on this thread (for tests).
int CurrentCallDepth();

}  // namespace xlens::graph
