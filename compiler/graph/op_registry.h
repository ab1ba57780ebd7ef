// The op registry: for every op the front end knows, its signature (OpDef), its shape function,
// its CPU kernel for the op-by-op executor, its symbolic gradient, and whether XLA can compile
// it (the clustering reads that). Ops are registered by the Register*Ops functions of ops/, which
// Global() calls once: explicit calls, so a static library never drops a registration.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compiler/graph/op_def.h"
#include "compiler/support/status.h"

namespace xlens::graph {

class InferenceContext;
class OpKernelContext;
class Scope;
class Node;
struct Output;

using ShapeFn = std::function<Status(InferenceContext&)>;
using KernelFn = std::function<Status(OpKernelContext&)>;
// Builds the gradient of `op`'s inputs from the gradients of its outputs, in `scope` (TensorFlow
// C++'s GradFunc). `grad_outputs[i]` is the gradient of output i (never null: missing ones are
// zeros); `grad_inputs` gets one entry per input, Output{} where there is none (NoGradient).
using GradFn = std::function<Status(const Scope& scope, const Node& op,
                                    const std::vector<Output>& grad_outputs,
                                    std::vector<Output>* grad_inputs)>;

struct OpRegistration {
  OpDef op_def;
  ShapeFn shape_fn;
  KernelFn kernel;  // null: the op loads and verifies but the executor cannot run it
  GradFn gradient;  // null: not differentiable (an error if a gradient must flow through it)
  // Inputs whose value (not only shape) the XLA lowering needs at compile time (Reshape's shape,
  // Sum's axes): TensorFlow's compile-time constant inputs.
  std::vector<std::string> compile_time_const_inputs;
  // Empty when XLA_CPU_JIT has a kernel for the op; else why not (clustering reasons).
  bool has_xla_kernel = true;
};

class OpRegistry {
 public:
  // Every op of ops/, registered once.
  static const OpRegistry& Global();

  const OpRegistration* Find(const std::string& op) const;
  // Unknown op: one message naming it (and the closest known names).
  StatusOr<const OpRegistration*> LookUp(const std::string& op) const;
  std::vector<std::string> OpNames() const;

  void Register(OpRegistration registration);

 private:
  std::map<std::string, std::unique_ptr<OpRegistration>> ops_;
};

// Registration in TensorFlow's style; the registration is added when the object is destroyed
// at the end of the statement:
//   REGISTER_OP(registry, "Square").Input("x: T").Output("y: T").Attr("T: {half, float}")
//       .SetShapeFn(UnchangedShape).SetKernel(SquareKernel).SetGradient(SquareGrad);
class OpRegistrationBuilder {
 public:
  OpRegistrationBuilder(OpRegistry& registry, std::string name);
  ~OpRegistrationBuilder() noexcept(false);
  OpRegistrationBuilder& Input(std::string spec);
  OpRegistrationBuilder& Output(std::string spec);
  OpRegistrationBuilder& Attr(std::string spec);
  OpRegistrationBuilder& SetIsStateful();
  OpRegistrationBuilder& SetIsCommutative();
  OpRegistrationBuilder& SetIsAggregate();
  OpRegistrationBuilder& SetAllowsUninitializedInput();
  OpRegistrationBuilder& SetShapeFn(ShapeFn fn);
  OpRegistrationBuilder& SetKernel(KernelFn fn);
  OpRegistrationBuilder& SetGradient(GradFn fn);
  OpRegistrationBuilder& CompileTimeConstInput(std::string arg);
  OpRegistrationBuilder& NoXlaKernel();

 private:
  OpRegistry& registry_;
  OpDefBuilder def_;
  OpRegistration reg_;
};
#define REGISTER_OP(registry, name) ::xlens::graph::OpRegistrationBuilder(registry, name)

// Attaches a gradient to an op registered earlier (gradients live beside the other gradients).
void SetGradient(OpRegistry& registry, const std::string& op, GradFn fn);
// Attaches a kernel to an op registered earlier: the XLA launch ops (_XlaCompile, _XlaRun) get
// theirs from the clustering library, which sits above the graph front end.
void SetKernel(const OpRegistry& registry, const std::string& op, KernelFn fn);

}  // namespace xlens::graph
