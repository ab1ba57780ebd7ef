#include "compiler/graph/function_call_op.h"

#include <string>
#include <vector>

#include "compiler/graph/function.h"
#include "compiler/graph/op_kernel.h"
#include "compiler/graph/shape_inference.h"

namespace xlens::graph {
namespace {

Status CallShape(InferenceContext& c) {
  const AttrValue* shapes = FindAttr(c.attrs(), "_output_shapes");
  if (shapes && shapes->kind() == AttrValue::Kind::kList &&
      static_cast<int>(shapes->list().shape.size()) == c.num_outputs()) {
    for (int i = 0; i < c.num_outputs(); ++i) c.set_output(i, shapes->list().shape[i]);
    return OkStatus();
  }
  return shape_fn::UnknownShape(c);
}

// The function is the one the op names, found in the library of the graph the node runs in;
// the node's attrs are the instantiation's (TensorFlow instantiates a call with the node's
// AttrSlice).
Status CallFunctionKernel(OpKernelContext& c) {
  NameAttrList func;
  func.name = c.op();
  func.attr = std::make_shared<AttrMap>(c.attrs());
  std::vector<Tensor> args(c.num_inputs());
  for (int i = 0; i < c.num_inputs(); ++i) args[i] = c.input(i);
  ASSIGN_OR_RETURN(std::vector<Tensor> results, RunFunction(c, func, args));
  if (static_cast<int>(results.size()) != c.num_outputs()) {
    return c.Error("function '" + func.name + "' returned " + std::to_string(results.size()) +
                   " values, the node has " + std::to_string(c.num_outputs()) + " outputs");
  }
  for (int i = 0; i < c.num_outputs(); ++i) {
    if (results[i].dtype() != RemoveRefType(c.node().output_type(i))) {
      return c.Error("function '" + func.name + "' returned " + DataTypeName(results[i].dtype()) +
                     " as output " + std::to_string(i) + ", the node's output is " +
                     DataTypeName(c.node().output_type(i)));
    }
    c.set_output(i, std::move(results[i]));
  }
  return OkStatus();
}

}  // namespace

std::unique_ptr<OpRegistration> MakeFunctionCallRegistration(const FunctionDef& fdef) {
  auto reg = std::make_unique<OpRegistration>();
  reg->op_def = fdef.signature;
  reg->shape_fn = CallShape;
  reg->kernel = CallFunctionKernel;
  reg->has_xla_kernel = false;
  return reg;
}

}  // namespace xlens::graph
