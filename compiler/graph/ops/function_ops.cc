// TensorFlow's functional ops: the TF2 control flow (If, Case, While and their stateless twins) and
// function calls (PartitionedCall, StatefulPartitionedCall, SymbolicGradient), with TensorFlow's
// signatures (functional_ops.cc). TensorFlow lowers them to v1 control flow and inlines the calls
// before the XLA passes run (LowerFunctionalOpsPass), so the clustering never sees them: none has
// an XLA kernel here. Their CPU kernels run the branch or body through a nested executor; they
// serve only the calls the lowering keeps (lower_functional_ops.h).
#include "compiler/graph/function.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/op_registry.h"
#include "compiler/graph/ops/register_ops.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

// output_shapes when the node declares one per output, else every output unknown.
Status OutputShapesOrUnknown(InferenceContext& c) {
  const AttrValue* shapes = FindAttr(c.attrs(), "output_shapes");
  if (shapes && shapes->kind() == AttrValue::Kind::kList &&
      static_cast<int>(shapes->list().shape.size()) == c.num_outputs()) {
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, shapes->list().shape[i]);
    return OkStatus();
  }
  return shape_fn::UnknownShape(c);
}

// While: output_shapes when present; otherwise TensorFlow's WhileShapeFn keeps each input's
// shape (the loop variables are assumed shape-invariant), the body's own checks happen at run
// time.
Status WhileShape(InferenceContext& c) {
  const AttrValue* shapes = FindAttr(c.attrs(), "output_shapes");
  if (shapes && shapes->kind() == AttrValue::Kind::kList &&
      static_cast<int>(shapes->list().shape.size()) == c.num_outputs()) {
    return OutputShapesOrUnknown(c);
  }
  for (int i = 0; i < c.num_outputs() && i < c.num_inputs(); ++i) {
    c.set_output(i, c.input(i));
    if (c.input_handle_shape(i)) {
      c.set_output_handle_shape(i, c.input_handle_shape(i)->first,
                                c.input_handle_shape(i)->second);
    }
  }
  return OkStatus();
}

Status IfKernel(OpKernelContext& c) {
  const Tensor& pred = c.input(0);
  bool take_then;
  if (pred.dtype() == DT_STRING) {
    take_then = pred.num_elements() != 1 || !pred.strings()[0].empty();
  } else if (pred.num_elements() == 1) {
    take_then = pred.GetAsDouble(0) != 0;
  } else {
    // TensorFlow's ToBool: a non-scalar is true when it has elements.
    take_then = pred.num_elements() > 0;
  }
  ASSIGN_OR_RETURN(NameAttrList branch, GetFuncAttr(c.attrs(), take_then ? "then_branch" : "else_branch", c.name()));
  std::vector<Tensor> args(c.num_inputs() - 1);
  for (int i = 1; i < c.num_inputs(); ++i) args[i - 1] = c.input(i);
  ASSIGN_OR_RETURN(std::vector<Tensor> results, RunFunction(c, branch, args));
  if (static_cast<int>(results.size()) != c.num_outputs()) {
    return c.Error("branch '" + branch.name + "' returned " + std::to_string(results.size()) +
                   " values, the node has " + std::to_string(c.num_outputs()) + " outputs");
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, std::move(results[i]));
  return OkStatus();
}

// Case: branch `branch_index`, or the last branch (the default) when the index is out of range,
// as TensorFlow's CaseOp picks it.
Status CaseKernel(OpKernelContext& c) {
  const Tensor& index = c.input(0);
  if (index.rank() != 0) {
    return c.Error("branch_index must be scalar, got " + DimsToString(index.dims()));
  }
  const AttrValue* branches = FindAttr(c.attrs(), "branches");
  if (!branches || branches->kind() != AttrValue::Kind::kList || branches->list().func.empty()) {
    return c.Error("attr 'branches' must list at least one function");
  }
  const std::vector<NameAttrList>& funcs = branches->list().func;
  const int64_t n = static_cast<int64_t>(funcs.size());
  int64_t b = index.GetAsInt64(0);
  if (b < 0 || b >= n) b = n - 1;
  std::vector<Tensor> args(c.num_inputs() - 1);
  for (int i = 1; i < c.num_inputs(); ++i) args[i - 1] = c.input(i);
  ASSIGN_OR_RETURN(std::vector<Tensor> results, RunFunction(c, funcs[b], args));
  if (static_cast<int>(results.size()) != c.num_outputs()) {
    return c.Error("branch " + std::to_string(b) + " ('" + funcs[b].name + "') returned " +
                   std::to_string(results.size()) + " values, the node has " +
                   std::to_string(c.num_outputs()) + " outputs");
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, std::move(results[i]));
  return OkStatus();
}

Status WhileKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(NameAttrList cond, GetFuncAttr(c.attrs(), "cond", c.name()));
  ASSIGN_OR_RETURN(NameAttrList body, GetFuncAttr(c.attrs(), "body", c.name()));
  std::vector<Tensor> vars(c.num_inputs());
  for (int i = 0; i < c.num_inputs(); ++i) vars[i] = c.input(i);
  for (int64_t iteration = 0;; ++iteration) {
    if (iteration > (int64_t{1} << 31)) return c.Error("the loop ran more than 2^31 iterations");
    ASSIGN_OR_RETURN(std::vector<Tensor> p, RunFunction(c, cond, vars));
    if (p.size() != 1) return c.Error("cond '" + cond.name + "' must return one value");
    bool go = p[0].dtype() == DT_STRING ? !p[0].strings().empty() && !p[0].strings()[0].empty()
                                        : p[0].num_elements() == 1 ? p[0].GetAsDouble(0) != 0
                                                                   : p[0].num_elements() > 0;
    if (!go) break;
    ASSIGN_OR_RETURN(std::vector<Tensor> next, RunFunction(c, body, vars));
    if (next.size() != vars.size()) {
      return c.Error("body '" + body.name + "' returned " + std::to_string(next.size()) +
                     " values for " + std::to_string(vars.size()) + " loop variables");
    }
    vars = std::move(next);
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, std::move(vars[i]));
  return OkStatus();
}

Status CallKernel(OpKernelContext& c) {
  ASSIGN_OR_RETURN(NameAttrList f, GetFuncAttr(c.attrs(), "f", c.name()));
  std::vector<Tensor> args(c.num_inputs());
  for (int i = 0; i < c.num_inputs(); ++i) args[i] = c.input(i);
  ASSIGN_OR_RETURN(std::vector<Tensor> results, RunFunction(c, f, args));
  if (static_cast<int>(results.size()) != c.num_outputs()) {
    return c.Error("function '" + f.name + "' returned " + std::to_string(results.size()) +
                   " values, the node has " + std::to_string(c.num_outputs()) + " outputs");
  }
  for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, std::move(results[i]));
  return OkStatus();
}

}  // namespace

void RegisterFunctionOps(OpRegistry& r) {
  for (const char* name : {"If", "StatelessIf"}) {
    auto b = REGISTER_OP(r, name);
    b.Input("cond: Tcond")
        .Input("input: Tin")
        .Output("output: Tout")
        .Attr("Tcond: type")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("then_branch: func")
        .Attr("else_branch: func")
        .Attr("output_shapes: list(shape) = []")
        .SetShapeFn(OutputShapesOrUnknown)
        .SetKernel(IfKernel)
        .NoXlaKernel();
    if (name[0] == 'I') b.SetIsStateful();
  }
  for (const char* name : {"Case", "StatelessCase"}) {
    auto b = REGISTER_OP(r, name);
    b.Input("branch_index: int32")
        .Input("input: Tin")
        .Output("output: Tout")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("branches: list(func) >= 1")
        .Attr("output_shapes: list(shape) = []")
        .SetShapeFn(OutputShapesOrUnknown)
        .SetKernel(CaseKernel)
        .NoXlaKernel();
    if (name[0] == 'C') b.SetIsStateful();
  }
  for (const char* name : {"While", "StatelessWhile"}) {
    auto b = REGISTER_OP(r, name);
    b.Input("input: T")
        .Output("output: T")
        .Attr("T: list(type) >= 0")
        .Attr("cond: func")
        .Attr("body: func")
        .Attr("output_shapes: list(shape) = []")
        .Attr("parallel_iterations: int = 10")
        .SetShapeFn(WhileShape)
        .SetKernel(WhileKernel)
        .NoXlaKernel();
    if (name[0] == 'W') b.SetIsStateful();
  }
  for (const char* name : {"PartitionedCall", "StatefulPartitionedCall"}) {
    auto b = REGISTER_OP(r, name);
    b.Input("args: Tin")
        .Output("output: Tout")
        .Attr("Tin: list(type) >= 0")
        .Attr("Tout: list(type) >= 0")
        .Attr("f: func")
        .Attr("config: string = ''")
        .Attr("config_proto: string = ''")
        .Attr("executor_type: string = ''")
        .SetShapeFn(shape_fn::UnknownShape)
        .SetKernel(CallKernel)
        .NoXlaKernel();
    if (name[0] == 'S') b.SetIsStateful();
  }
  // Only its signature: gradients here are built symbolically (grads/), never through it.
  REGISTER_OP(r, "SymbolicGradient")
      .Input("input: Tin")
      .Output("output: Tout")
      .Attr("Tin: list(type) >= 1")
      .Attr("Tout: list(type) >= 1")
      .Attr("f: func")
      .SetShapeFn(shape_fn::UnknownShape)
      .NoXlaKernel();
}

}  // namespace xlens::graph
