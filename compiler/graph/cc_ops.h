// The op functions of the builder, in the spirit of tensorflow/cc/ops: one function per op,
// taking a Scope and the inputs, returning the output(s). An Input is an Output or a constant
// value; constants are made as Python's op wrappers make them, in the op's own name scope and
// named after the op's argument ("Reshape/shape", "Sum/reduction_indices", "Equal/y").
//
// Errors are recorded in the scope (Scope::status) and the functions return an invalid Output.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "compiler/graph/partial_shape.h"
#include "compiler/graph/scope.h"
#include "compiler/graph/tensor.h"

namespace xlens::graph::ops {

class Input {
 public:
  Input(Output output) : output_(output) {}  // NOLINT: implicit like TF's Input
  Input(Node* node) : output_(node, 0) {}    // NOLINT
  Input(Tensor value) : value_(std::move(value)) {}  // NOLINT
  Input(std::initializer_list<int32_t> values);      // an int32 vector
  Input(int32_t value);                              // NOLINT: an int32 scalar
  // A scalar that takes the type of the other inputs of the same type attr (Python's
  // `tf.equal(x, 0.0)` converting 0.0 to x's dtype).
  static Input Like(double value);

  const Output& output() const { return output_; }
  const std::optional<Tensor>& value() const { return value_; }
  const std::optional<double>& flexible() const { return flexible_; }

 private:
  Input() = default;
  Output output_;
  std::optional<Tensor> value_;
  std::optional<double> flexible_;
};

// Adds a node of `op` whose inputs may be constants (see above); `default_name` is the name
// Python's wrapper gives (the op's name when empty). Returns nullptr on error.
Node* BuildOp(const Scope& scope, const std::string& op, const std::vector<Input>& inputs,
              AttrMap attrs = {}, const std::string& default_name = "");
// As BuildOp, with the list inputs of a list argument given as a group (ConcatV2, AddN, Pack).
Node* BuildOpWithList(const Scope& scope, const std::string& op,
                      const std::vector<std::vector<Input>>& args, AttrMap attrs = {},
                      const std::string& default_name = "");

// Output 0 of `node`, invalid for nullptr (a BuildOp that failed).
inline Output AsOutput(Node* node) { return node == nullptr ? Output() : Output(node, 0); }

// Constants.
Output Const(const Scope& scope, const Tensor& value);
Output Const(const Scope& scope, float value);
Output Const(const Scope& scope, int32_t value);
Output Const(const Scope& scope, const std::vector<float>& values);
Output Const(const Scope& scope, const std::vector<int32_t>& values);
// A scalar of `dtype` holding `value` (converted).
Output ScalarConst(const Scope& scope, DataType dtype, double value);
// A shape vector as array_ops.shape makes for a fully known shape.
Output ShapeConst(const Scope& scope, const std::vector<int64_t>& dims, DataType dtype = DT_INT32);

Output Placeholder(const Scope& scope, DataType dtype, PartialShape shape = PartialShape());
Output Identity(const Scope& scope, Input x);
Node* NoOp(const Scope& scope);
Output StopGradient(const Scope& scope, Input x);

// Element-wise binary (broadcasting) ops.
Output Add(const Scope& scope, Input x, Input y);  // AddV2
Output Sub(const Scope& scope, Input x, Input y);
Output Mul(const Scope& scope, Input x, Input y);
Output RealDiv(const Scope& scope, Input x, Input y);
Output DivNoNan(const Scope& scope, Input x, Input y);
Output FloorDiv(const Scope& scope, Input x, Input y);
Output FloorMod(const Scope& scope, Input x, Input y);
Output Maximum(const Scope& scope, Input x, Input y);
Output Minimum(const Scope& scope, Input x, Input y);
Output Pow(const Scope& scope, Input x, Input y);
Output SquaredDifference(const Scope& scope, Input x, Input y);
Output Equal(const Scope& scope, Input x, Input y);
Output NotEqual(const Scope& scope, Input x, Input y);
Output Less(const Scope& scope, Input x, Input y);
Output LessEqual(const Scope& scope, Input x, Input y);
Output Greater(const Scope& scope, Input x, Input y);
Output GreaterEqual(const Scope& scope, Input x, Input y);
Output AddN(const Scope& scope, const std::vector<Output>& inputs);

// Element-wise unary ops.
Output Square(const Scope& scope, Input x);
Output Sqrt(const Scope& scope, Input x);
Output Rsqrt(const Scope& scope, Input x);
Output Neg(const Scope& scope, Input x);
Output Exp(const Scope& scope, Input x);
Output Log(const Scope& scope, Input x);
Output Tanh(const Scope& scope, Input x);
Output Sigmoid(const Scope& scope, Input x);
Output Relu(const Scope& scope, Input x);
Output Sin(const Scope& scope, Input x);
Output Cos(const Scope& scope, Input x);
Output Abs(const Scope& scope, Input x);
Output Sign(const Scope& scope, Input x);
Output Reciprocal(const Scope& scope, Input x);
Output Floor(const Scope& scope, Input x);
Output Cast(const Scope& scope, Input x, DataType dst);
Output ZerosLike(const Scope& scope, Input x);
Output OnesLike(const Scope& scope, Input x);
// The gradient kernels the gradients use.
Output ReluGrad(const Scope& scope, Input gradients, Input features);
Output TanhGrad(const Scope& scope, Input y, Input dy);
Output SigmoidGrad(const Scope& scope, Input y, Input dy);
Output SqrtGrad(const Scope& scope, Input y, Input dy);
Output RsqrtGrad(const Scope& scope, Input y, Input dy);

Output Select(const Scope& scope, Input condition, Input t, Input e);
Output SelectV2(const Scope& scope, Input condition, Input t, Input e);

// Linear algebra and nn.
struct MatMulAttrs {
  bool transpose_a = false;
  bool transpose_b = false;
  MatMulAttrs TransposeA(bool v) const { MatMulAttrs a = *this; a.transpose_a = v; return a; }
  MatMulAttrs TransposeB(bool v) const { MatMulAttrs a = *this; a.transpose_b = v; return a; }
};
Output MatMul(const Scope& scope, Input a, Input b, const MatMulAttrs& attrs = {});
struct BatchMatMulAttrs {
  bool adj_x = false;
  bool adj_y = false;
};
Output BatchMatMulV2(const Scope& scope, Input x, Input y, const BatchMatMulAttrs& attrs = {});
Output BiasAdd(const Scope& scope, Input value, Input bias,
               const std::string& data_format = "NHWC");
Output BiasAddGrad(const Scope& scope, Input out_backprop,
                   const std::string& data_format = "NHWC");
Output Softmax(const Scope& scope, Input logits);
Output LogSoftmax(const Scope& scope, Input logits);
struct SoftmaxCrossEntropyWithLogits {
  Output loss, backprop;
};
SoftmaxCrossEntropyWithLogits SoftmaxCrossEntropyWithLogitsOp(const Scope& scope, Input features,
                                                               Input labels);
SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogitsOp(const Scope& scope,
                                                                     Input features,
                                                                     Input labels);
struct ConvAttrs {
  std::vector<int64_t> strides = {1, 1, 1, 1};
  std::string padding = "VALID";
  std::string data_format = "NHWC";
  std::vector<int64_t> dilations = {1, 1, 1, 1};
};
Output Conv2D(const Scope& scope, Input input, Input filter, const ConvAttrs& attrs);
Output Conv2DBackpropInput(const Scope& scope, Input input_sizes, Input filter,
                           Input out_backprop, const ConvAttrs& attrs);
Output Conv2DBackpropFilter(const Scope& scope, Input input, Input filter_sizes,
                            Input out_backprop, const ConvAttrs& attrs);
struct PoolAttrs {
  std::vector<int64_t> ksize = {1, 2, 2, 1};
  std::vector<int64_t> strides = {1, 2, 2, 1};
  std::string padding = "VALID";
  std::string data_format = "NHWC";
};
Output MaxPool(const Scope& scope, Input input, const PoolAttrs& attrs);
Output MaxPoolGrad(const Scope& scope, Input orig_input, Input orig_output, Input grad,
                   const PoolAttrs& attrs);

// Array ops.
Output Reshape(const Scope& scope, Input tensor, Input shape);
Output Transpose(const Scope& scope, Input x, Input perm);
Output InvertPermutation(const Scope& scope, Input x);
Output ExpandDims(const Scope& scope, Input input, Input axis);
Output Squeeze(const Scope& scope, Input input, const std::vector<int64_t>& axis = {});
Output ConcatV2(const Scope& scope, const std::vector<Input>& values, Input axis);
Output Pack(const Scope& scope, const std::vector<Input>& values, int64_t axis = 0);
std::vector<Output> Unpack(const Scope& scope, Input value, int64_t num, int64_t axis = 0);
Output Fill(const Scope& scope, Input dims, Input value);
Output Tile(const Scope& scope, Input input, Input multiples);
Output Range(const Scope& scope, Input start, Input limit, Input delta);
Output Slice(const Scope& scope, Input input, Input begin, Input size);
Output Pad(const Scope& scope, Input input, Input paddings);
struct StridedSliceAttrs {
  int64_t begin_mask = 0, end_mask = 0, ellipsis_mask = 0, new_axis_mask = 0,
          shrink_axis_mask = 0;
};
Output StridedSlice(const Scope& scope, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& attrs = {});
Output StridedSliceGrad(const Scope& scope, Input shape, Input begin, Input end, Input strides,
                        Input dy, const StridedSliceAttrs& attrs = {});
Output GatherV2(const Scope& scope, Input params, Input indices, Input axis,
                int64_t batch_dims = 0);
Output UnsortedSegmentSum(const Scope& scope, Input data, Input segment_ids,
                          Input num_segments);
Output Shape(const Scope& scope, Input input, DataType out_type = DT_INT32);
Output Size(const Scope& scope, Input input, DataType out_type = DT_INT32);
Output Rank(const Scope& scope, Input input);
struct BroadcastGradientArgs {
  Output r0, r1;
};
BroadcastGradientArgs BroadcastGradientArgsOp(const Scope& scope, Input s0, Input s1);

// Reductions (TensorFlow's keep_dims attr).
Output Sum(const Scope& scope, Input input, Input axis, bool keep_dims = false);
Output Mean(const Scope& scope, Input input, Input axis, bool keep_dims = false);
Output Max(const Scope& scope, Input input, Input axis, bool keep_dims = false);
Output Min(const Scope& scope, Input input, Input axis, bool keep_dims = false);
Output Prod(const Scope& scope, Input input, Input axis, bool keep_dims = false);
Output ArgMax(const Scope& scope, Input input, Input dimension, DataType output_type = DT_INT64);

// Variables, random numbers and training.
Output VarHandleOp(const Scope& scope, DataType dtype, const PartialShape& shape,
                   const std::string& shared_name = "");
Output ReadVariableOp(const Scope& scope, Input resource, DataType dtype);
Node* AssignVariableOp(const Scope& scope, Input resource, Input value);
Output VariableV2(const Scope& scope, const PartialShape& shape, DataType dtype);
Output Assign(const Scope& scope, Input ref, Input value);
Output RandomUniform(const Scope& scope, Input shape, DataType dtype, int64_t seed = 0,
                     int64_t seed2 = 0);
Output ApplyGradientDescent(const Scope& scope, Input var, Input alpha, Input delta);
Node* ResourceApplyGradientDescent(const Scope& scope, Input var, Input alpha, Input delta);

}  // namespace xlens::graph::ops
