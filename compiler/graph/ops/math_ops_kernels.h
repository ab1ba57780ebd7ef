// The elementwise math of the op library, one functor per TensorFlow op, shared by the math and
// nn kernels and by _UnaryOpsComposition (grappler's fused chain of unary ops). Each computes what
// TensorFlow's CPU kernel computes, in the element type (16-bit floats in float, rounded once).
#pragma once

#include <string>

#include "compiler/graph/ops/cwise.h"

namespace xlens::graph::cwise {

// A unary function of float or double; nullptr for a name that is not one of the unary ops
// (_UnaryOpsComposition accepts exactly these names).
using FloatUnaryFn = float (*)(float);
using DoubleUnaryFn = double (*)(double);
FloatUnaryFn FindFloatUnary(const std::string& op);
DoubleUnaryFn FindDoubleUnary(const std::string& op);

// Runs the named unary function over input 0 into output 0, for the floating element types.
Status FloatUnaryKernel(OpKernelContext& ctx, const std::string& op);

}  // namespace xlens::graph::cwise
