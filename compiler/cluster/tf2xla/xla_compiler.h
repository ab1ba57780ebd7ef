// tf2xla's XlaCompiler: lowers the body of a cluster's function (a graph of _Arg, ops, _Retval)
// to an HLO module, given what each argument is at launch (a value of a static shape, a
// compile-time constant, or a resource variable). Values flow through the graph as
// XlaExpressions: constants fold on the host (with the op's CPU kernel), everything else becomes
// HLO through the per-op lowerings of xla_op_registry.h. The module's parameters, outputs and
// metadata are what TensorFlow's XlaCompiler produces for the same function, so TensorFlow's
// dumps and ours can be compared instruction for instruction.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/function.h"
#include "compiler/graph/graph.h"
#include "compiler/graph/tensor.h"
#include "compiler/hlo/module.h"
#include "compiler/hlo/stack_frames.h"
#include "compiler/support/status.h"

namespace xlens::cluster {

struct XlaArgument {
  enum class Kind { kParameter, kConstant, kResource };
  Kind kind = Kind::kParameter;
  graph::DataType dtype = graph::DT_INVALID;  // for kResource: the variable's dtype
  std::vector<int64_t> shape;                 // static shape as launched (kResource: the variable's)
  graph::Tensor constant_value;               // kConstant: the value
  bool initialized = true;                    // kResource: whether the variable holds a value
  std::string name;  // kResource: the variable's name, for messages ("" : the _Arg's)
};

struct XlaCompilationResult {
  std::unique_ptr<HloModule> module;
  // The module's entry parameters: one per kParameter argument and one per initialized kResource
  // argument, in argument order (constants are folded in), as TensorFlow's XlaCompiler orders
  // them. input_mapping[i] = the argument index of parameter i.
  std::vector<int> input_mapping;
  // The outputs: first one per _Retval in index order, then one per resource argument the
  // function updated (resource_updates[k] = its argument index). One output is the root itself;
  // several are the elements of the root tuple (TensorFlow's auto-clustering form).
  std::vector<graph::DataType> output_dtypes;
  std::vector<std::vector<int64_t>> output_shapes;
  std::vector<int> resource_updates;
};

struct XlaCompileOptions {
  std::string module_name = "cluster";  // e.g. cluster_0__XlaCompiledKernel_true__..._.3
  // Metadata source location: auto-clustered modules say TensorFlow's placeholder / 10 as TF does.
  std::string source_file{kTfPlaceholderSourceFile};
  int source_line = 10;
};

// Lowers `body` (its _Arg nodes index into `args`). Errors name the node at fault: an op without
// a lowering, an input that must be a compile-time constant but is not, a read of an
// uninitialized variable, shapes that do not fit.
StatusOr<XlaCompilationResult> CompileGraphToHlo(const graph::Graph& body,
                                                 const std::vector<XlaArgument>& args,
                                                 const XlaCompileOptions& options);

// The body graph of function `name` of `library` (TensorFlow's FunctionDefToBodyHelper; the
// graph front end's instantiation), ready for CompileGraphToHlo.
StatusOr<std::unique_ptr<graph::FunctionBody>> FunctionBodyForCompilation(
    const graph::FunctionDefLibrary& library, const std::string& name);
// The same for a FunctionDef at hand (an encapsulate_fdef_cluster_N.pbtxt dump); control inputs
// from arguments are dropped (they order nothing in a compiled function).
StatusOr<std::unique_ptr<graph::FunctionBody>> FunctionBodyForCompilation(
    const graph::FunctionDef& fdef);

}  // namespace xlens::cluster
