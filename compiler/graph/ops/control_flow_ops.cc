// TensorFlow's v1 control-flow primitives. Their semantics (deadness, frames, iterations) live
// in the executor; here are their signatures and shapes, and the kernel of _SwitchN, the
// n-way Switch TensorFlow lowers Case to, which marks its untaken outputs dead itself. XLA_CPU_JIT has no kernel for any of
// them, which is why TensorFlow's clustering never crosses a loop or cond boundary.
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

Status SwitchShape(InferenceContext& c) {
  c.set_output(0, c.input(0));
  c.set_output(1, c.input(0));
  if (c.input_handle_shape(0)) {
    for (int i = 0; i < 2; ++i) {
      c.set_output_handle_shape(i, c.input_handle_shape(0)->first, c.input_handle_shape(0)->second);
    }
  }
  return OkStatus();
}

Status MergeShape(InferenceContext& c) {
  // The inputs' common shape where they agree, unknown dimensions where they differ.
  PartialShape out = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    const PartialShape& s = c.input(i);
    if (out.unknown_rank() || s.unknown_rank() || out.rank() != s.rank()) {
      out = PartialShape::UnknownRank();
      break;
    }
    for (int64_t d = 0; d < out.rank(); ++d) {
      if (out.dim(d) != s.dim(d)) out.set_dim(d, PartialShape::kUnknownDim);
    }
  }
  c.set_output(0, out);
  c.set_output(1, PartialShape::Scalar());
  return OkStatus();
}

// _SwitchN(data, output_index): data on output `output_index`, or on the last output when the
// index is out of range (TensorFlow's SwitchNOp); every other output is dead.
Status SwitchNKernel(OpKernelContext& c) {
  const Tensor& index = c.input(1);
  if (index.rank() != 0) {
    return c.Error("output_index must be scalar, got " + DimsToString(index.dims()));
  }
  const int64_t n = c.num_outputs();
  int64_t chosen = index.GetAsInt64(0);
  if (chosen < 0 || chosen >= n) chosen = n - 1;
  for (int64_t i = 0; i < n; ++i) {
    if (i == chosen) {
      c.set_output(static_cast<int>(i), c.input(0));
    } else {
      c.set_output_dead(static_cast<int>(i));
    }
  }
  return OkStatus();
}

Status SwitchNShape(InferenceContext& c) {
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, c.input(0));
  return OkStatus();
}

}  // namespace

void RegisterControlFlowOps(OpRegistry& r) {
  REGISTER_OP(r, "Switch")
      .Input("data: T")
      .Input("pred: bool")
      .Output("output_false: T")
      .Output("output_true: T")
      .Attr("T: type")
      .SetShapeFn(SwitchShape)
      .NoXlaKernel();
  // A ref may be switched before the variable it points to is initialised.
  REGISTER_OP(r, "RefSwitch")
      .Input("data: Ref(T)")
      .Input("pred: bool")
      .Output("output_false: Ref(T)")
      .Output("output_true: Ref(T)")
      .Attr("T: type")
      .SetAllowsUninitializedInput()
      .SetShapeFn(SwitchShape)
      .NoXlaKernel();
  for (const char* name : {"Merge", "RefMerge"}) {
    bool ref = name[0] == 'R';
    REGISTER_OP(r, name)
        .Input(ref ? "inputs: Ref(N * T)" : "inputs: N * T")
        .Output(ref ? "output: Ref(T)" : "output: T")
        .Output("value_index: int32")
        .Attr("T: type")
        .Attr("N: int >= 1")
        .SetShapeFn(MergeShape)
        .NoXlaKernel();
  }
  for (const char* name : {"Enter", "RefEnter"}) {
    bool ref = name[0] == 'R';
    REGISTER_OP(r, name)
        .Input(ref ? "data: Ref(T)" : "data: T")
        .Output(ref ? "output: Ref(T)" : "output: T")
        .Attr("T: type")
        .Attr("frame_name: string")
        .Attr("is_constant: bool = false")
        .Attr("parallel_iterations: int = 10")
        .SetShapeFn(shape_fn::UnchangedShape)
        .NoXlaKernel();
  }
  for (const char* name : {"Exit", "RefExit", "NextIteration", "RefNextIteration"}) {
    bool ref = name[0] == 'R';
    REGISTER_OP(r, name)
        .Input(ref ? "data: Ref(T)" : "data: T")
        .Output(ref ? "output: Ref(T)" : "output: T")
        .Attr("T: type")
        .SetShapeFn(shape_fn::UnchangedShape)
        .NoXlaKernel();
  }
  REGISTER_OP(r, "LoopCond")
      .Input("input: bool")
      .Output("output: bool")
      .SetShapeFn(shape_fn::UnchangedShape)
      .NoXlaKernel();
  REGISTER_OP(r, "_SwitchN")
      .Input("data: T")
      .Input("output_index: int32")
      .Output("outputs: num_outs * T")
      .Attr("num_outs: int >= 1")
      .Attr("T: type")
      .SetShapeFn(SwitchNShape)
      .SetKernel(SwitchNKernel)
      .NoXlaKernel();
  // Nothing to compute: it orders by its control edges (and runs live whatever its inputs, which
  // the executor sees to). TensorFlow's XLA kernel for it is empty too, so a must-compile v1
  // loop gradient gets past it to what does decide (its stacks' size bound).
  REGISTER_OP(r, "ControlTrigger")
      .SetShapeFn(shape_fn::NoOutputs)
      .SetKernel([](OpKernelContext&) { return OkStatus(); });
}

}  // namespace xlens::graph
