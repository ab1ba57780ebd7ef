// The ops build_xla_ops puts in place of a cluster (TensorFlow's jit/ops/xla_ops.cc): _XlaCompile
// compiles the cluster's function for the shapes and constant values it sees and hands out a key
// to the compiled program, _XlaRun runs the program that key names, and _XlaMerge forwards
// whichever of the compiled run and the op-by-op fallback produced a value. Signatures are
// TensorFlow's, so graphs TensorFlow dumped after build_xla_ops load here. They have no kernels
// yet and, like in TensorFlow, no XLA kernels: they are what launches XLA, never part of a cluster.
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

Status CompileShape(InferenceContext& c) {
  // The key and the success flag are scalars whatever the cluster computes.
  c.set_output(0, PartialShape::Scalar());
  c.set_output(1, PartialShape::Scalar());
  return OkStatus();
}

Status MergeShape(InferenceContext& c) {
  // Both inputs carry the same value of the cluster's output; the fallback's shape is as good.
  c.set_output(0, c.input(0));
  return OkStatus();
}

}  // namespace

void RegisterXlaOps(OpRegistry& r) {
  REGISTER_OP(r, "_XlaCompile")
      .Input("constants: Tconstants")
      .Attr("Tconstants: list(type) >= 0")
      .Attr("must_compile: bool")
      .Input("args: Targs")
      .Attr("Targs: list(type) >= 0")
      .Input("resources: Nresources * resource")
      .Attr("Nresources: int >= 0")
      .Output("key: string")
      .Output("compilation_successful: bool")
      .Attr("function: func")
      // The compilation cache it fills is state.
      .SetIsStateful()
      .SetShapeFn(CompileShape)
      .NoXlaKernel();
  REGISTER_OP(r, "_XlaRun")
      .Input("args: Targs")
      .Attr("Targs: list(type) >= 0")
      .Output("results: Tresults")
      .Attr("Tresults: list(type) >= 0")
      .Input("key: string")
      // The compiled program may hold stateful ops (random numbers, variable updates).
      .SetIsStateful()
      .SetShapeFn(shape_fn::UnknownShape)
      .NoXlaKernel();
  REGISTER_OP(r, "_XlaMerge")
      .Input("partitioned_call: T")
      .Input("xla_run: T")
      .Output("output: T")
      .Attr("T: type")
      .SetShapeFn(MergeShape)
      .NoXlaKernel();
}

}  // namespace xlens::graph
