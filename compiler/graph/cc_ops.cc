#include "compiler/graph/cc_ops.h"

#include "compiler/graph/graph.h"

namespace xlens::graph::ops {

Input::Input(std::initializer_list<int32_t> values)
    : value_(Tensor::Vector<int32_t>(DT_INT32, std::vector<int32_t>(values))) {}
Input::Input(int32_t value) : value_(Tensor::Scalar<int32_t>(DT_INT32, value)) {}

Input Input::Like(double value) {
  Input in;
  in.flexible_ = value;
  return in;
}

namespace {

Tensor ScalarTensor(DataType dtype, double value) {
  Tensor t(dtype, {});
  if (DataTypeIsFloating(dtype) || DataTypeIsComplex(dtype)) {
    t.SetFromDouble(0, value);
  } else {
    t.SetFromInt64(0, static_cast<int64_t>(value));
  }
  return t;
}

// The type a flexible scalar bound to `arg` takes: the arg's type attr when given, else the
// type of the first tensor input bound to the same type attr.
DataType TypeForArg(const OpDef& op_def, size_t arg, const AttrMap& attrs,
                    const std::vector<std::vector<Input>>& args) {
  const OpDef::ArgDef& def = op_def.input_arg[arg];
  if (def.type != DT_INVALID) return def.type;
  if (def.type_attr.empty()) return DT_FLOAT;
  if (const AttrValue* t = FindAttr(attrs, def.type_attr)) return t->type();
  for (size_t a = 0; a < op_def.input_arg.size() && a < args.size(); ++a) {
    if (op_def.input_arg[a].type_attr != def.type_attr) continue;
    for (const Input& in : args[a]) {
      if (in.output().valid()) return RemoveRefType(in.output().type());
      if (in.value()) return in.value()->dtype();
    }
  }
  return DT_FLOAT;
}

}  // namespace

Node* BuildOpWithList(const Scope& scope, const std::string& op,
                      const std::vector<std::vector<Input>>& args, AttrMap attrs,
                      const std::string& default_name) {
  if (!scope.ok()) return nullptr;
  auto reg = scope.graph()->registry().LookUp(op);
  if (!reg.ok()) {
    scope.UpdateStatus(reg.status());
    return nullptr;
  }
  const OpDef& op_def = (*reg)->op_def;
  if (args.size() != op_def.input_arg.size()) {
    scope.UpdateStatus(Error("building a " + op + " node: " + std::to_string(args.size()) +
                             " arguments given, the op takes " +
                             std::to_string(op_def.input_arg.size())));
    return nullptr;
  }
  bool has_constants = false;
  for (const auto& arg : args) {
    for (const Input& in : arg) has_constants |= !in.output().valid();
  }
  const std::string name = default_name.empty() ? op : default_name;
  Scope op_scope = scope;
  Scope inputs_scope = scope;
  // Python's wrappers open the op's name scope and convert constant arguments inside it.
  if (has_constants) op_scope = scope.NewOpScope(name, &inputs_scope);
  std::vector<Output> inputs;
  for (size_t a = 0; a < args.size(); ++a) {
    for (const Input& in : args[a]) {
      if (in.output().valid()) {
        inputs.push_back(in.output());
        continue;
      }
      Tensor value = in.value() ? *in.value()
                                : ScalarTensor(TypeForArg(op_def, a, attrs, args),
                                               in.flexible().value_or(0.0));
      inputs.push_back(Const(inputs_scope.WithOpName(op_def.input_arg[a].name), value));
    }
  }
  return op_scope.AddNode(op, inputs, std::move(attrs), name);
}

Node* BuildOp(const Scope& scope, const std::string& op, const std::vector<Input>& inputs,
              AttrMap attrs, const std::string& default_name) {
  if (!scope.ok()) return nullptr;
  auto reg = scope.graph()->registry().LookUp(op);
  if (!reg.ok()) {
    scope.UpdateStatus(reg.status());
    return nullptr;
  }
  std::vector<std::vector<Input>> args;
  for (const Input& in : inputs) args.push_back({in});
  if (args.size() != (*reg)->op_def.input_arg.size()) {
    scope.UpdateStatus(Error("building a " + op + " node: " + std::to_string(args.size()) +
                             " inputs given, the op takes " +
                             std::to_string((*reg)->op_def.input_arg.size())));
    return nullptr;
  }
  return BuildOpWithList(scope, op, args, std::move(attrs), default_name);
}

namespace {

Output Out(Node* n, int i = 0) { return n == nullptr ? Output() : Output(n, i); }

Output Unary(const Scope& s, const std::string& op, Input x) { return Out(BuildOp(s, op, {x})); }
Output Binary(const Scope& s, const std::string& op, Input x, Input y) {
  return Out(BuildOp(s, op, {x, y}));
}

AttrValue IntList(const std::vector<int64_t>& v) {
  AttrListValue l;
  l.i = v;
  return AttrValue::List(std::move(l));
}

}  // namespace

Output Const(const Scope& scope, const Tensor& value) {
  if (!scope.ok()) return Output();
  AttrMap attrs;
  attrs["dtype"] = AttrValue::Type(value.dtype());
  attrs["value"] = AttrValue::TensorValue(value);
  return Out(scope.AddNode("Const", {}, std::move(attrs)));
}
Output Const(const Scope& scope, float value) {
  return Const(scope, Tensor::Scalar<float>(DT_FLOAT, value));
}
Output Const(const Scope& scope, int32_t value) {
  return Const(scope, Tensor::Scalar<int32_t>(DT_INT32, value));
}
Output Const(const Scope& scope, const std::vector<float>& values) {
  return Const(scope, Tensor::Vector<float>(DT_FLOAT, values));
}
Output Const(const Scope& scope, const std::vector<int32_t>& values) {
  return Const(scope, Tensor::Vector<int32_t>(DT_INT32, values));
}
Output ScalarConst(const Scope& scope, DataType dtype, double value) {
  return Const(scope, ScalarTensor(dtype, value));
}
Output ShapeConst(const Scope& scope, const std::vector<int64_t>& dims, DataType dtype) {
  Tensor t(dtype, {static_cast<int64_t>(dims.size())});
  for (size_t i = 0; i < dims.size(); ++i) t.SetFromInt64(static_cast<int64_t>(i), dims[i]);
  return Const(scope, t);
}

Output Placeholder(const Scope& scope, DataType dtype, PartialShape shape) {
  AttrMap attrs;
  attrs["dtype"] = AttrValue::Type(dtype);
  attrs["shape"] = AttrValue::Shape(std::move(shape));
  return Out(BuildOp(scope, "Placeholder", {}, std::move(attrs)));
}
Output Identity(const Scope& scope, Input x) { return Unary(scope, "Identity", x); }
Node* NoOp(const Scope& scope) { return BuildOp(scope, "NoOp", {}); }
Output StopGradient(const Scope& scope, Input x) { return Unary(scope, "StopGradient", x); }

Output Add(const Scope& s, Input x, Input y) { return Binary(s, "AddV2", x, y); }
Output Sub(const Scope& s, Input x, Input y) { return Binary(s, "Sub", x, y); }
Output Mul(const Scope& s, Input x, Input y) { return Binary(s, "Mul", x, y); }
Output RealDiv(const Scope& s, Input x, Input y) { return Binary(s, "RealDiv", x, y); }
Output DivNoNan(const Scope& s, Input x, Input y) { return Binary(s, "DivNoNan", x, y); }
Output FloorDiv(const Scope& s, Input x, Input y) { return Binary(s, "FloorDiv", x, y); }
Output FloorMod(const Scope& s, Input x, Input y) { return Binary(s, "FloorMod", x, y); }
Output Maximum(const Scope& s, Input x, Input y) { return Binary(s, "Maximum", x, y); }
Output Minimum(const Scope& s, Input x, Input y) { return Binary(s, "Minimum", x, y); }
Output Pow(const Scope& s, Input x, Input y) { return Binary(s, "Pow", x, y); }
Output SquaredDifference(const Scope& s, Input x, Input y) {
  return Binary(s, "SquaredDifference", x, y);
}
Output Equal(const Scope& s, Input x, Input y) { return Binary(s, "Equal", x, y); }
Output NotEqual(const Scope& s, Input x, Input y) { return Binary(s, "NotEqual", x, y); }
Output Less(const Scope& s, Input x, Input y) { return Binary(s, "Less", x, y); }
Output LessEqual(const Scope& s, Input x, Input y) { return Binary(s, "LessEqual", x, y); }
Output Greater(const Scope& s, Input x, Input y) { return Binary(s, "Greater", x, y); }
Output GreaterEqual(const Scope& s, Input x, Input y) {
  return Binary(s, "GreaterEqual", x, y);
}
Output AddN(const Scope& scope, const std::vector<Output>& inputs) {
  std::vector<Input> list(inputs.begin(), inputs.end());
  return Out(BuildOpWithList(scope, "AddN", {list}));
}

Output Square(const Scope& s, Input x) { return Unary(s, "Square", x); }
Output Sqrt(const Scope& s, Input x) { return Unary(s, "Sqrt", x); }
Output Rsqrt(const Scope& s, Input x) { return Unary(s, "Rsqrt", x); }
Output Neg(const Scope& s, Input x) { return Unary(s, "Neg", x); }
Output Exp(const Scope& s, Input x) { return Unary(s, "Exp", x); }
Output Log(const Scope& s, Input x) { return Unary(s, "Log", x); }
Output Tanh(const Scope& s, Input x) { return Unary(s, "Tanh", x); }
Output Sigmoid(const Scope& s, Input x) { return Unary(s, "Sigmoid", x); }
Output Relu(const Scope& s, Input x) { return Unary(s, "Relu", x); }
Output Sin(const Scope& s, Input x) { return Unary(s, "Sin", x); }
Output Cos(const Scope& s, Input x) { return Unary(s, "Cos", x); }
Output Abs(const Scope& s, Input x) { return Unary(s, "Abs", x); }
Output Sign(const Scope& s, Input x) { return Unary(s, "Sign", x); }
Output Reciprocal(const Scope& s, Input x) { return Unary(s, "Reciprocal", x); }
Output Floor(const Scope& s, Input x) { return Unary(s, "Floor", x); }
Output Cast(const Scope& s, Input x, DataType dst) {
  AttrMap attrs;
  attrs["DstT"] = AttrValue::Type(dst);
  return Out(BuildOp(s, "Cast", {x}, std::move(attrs)));
}
Output ZerosLike(const Scope& s, Input x) { return Unary(s, "ZerosLike", x); }
Output OnesLike(const Scope& s, Input x) { return Unary(s, "OnesLike", x); }
Output ReluGrad(const Scope& s, Input g, Input f) { return Binary(s, "ReluGrad", g, f); }
Output TanhGrad(const Scope& s, Input y, Input dy) { return Binary(s, "TanhGrad", y, dy); }
Output SigmoidGrad(const Scope& s, Input y, Input dy) { return Binary(s, "SigmoidGrad", y, dy); }
Output SqrtGrad(const Scope& s, Input y, Input dy) { return Binary(s, "SqrtGrad", y, dy); }
Output RsqrtGrad(const Scope& s, Input y, Input dy) { return Binary(s, "RsqrtGrad", y, dy); }

Output Select(const Scope& s, Input c, Input t, Input e) {
  return Out(BuildOp(s, "Select", {c, t, e}));
}
Output SelectV2(const Scope& s, Input c, Input t, Input e) {
  return Out(BuildOp(s, "SelectV2", {c, t, e}));
}

Output MatMul(const Scope& s, Input a, Input b, const MatMulAttrs& attrs) {
  AttrMap m;
  m["transpose_a"] = AttrValue::Bool(attrs.transpose_a);
  m["transpose_b"] = AttrValue::Bool(attrs.transpose_b);
  return Out(BuildOp(s, "MatMul", {a, b}, std::move(m)));
}
Output BatchMatMulV2(const Scope& s, Input x, Input y, const BatchMatMulAttrs& attrs) {
  AttrMap m;
  m["adj_x"] = AttrValue::Bool(attrs.adj_x);
  m["adj_y"] = AttrValue::Bool(attrs.adj_y);
  return Out(BuildOp(s, "BatchMatMulV2", {x, y}, std::move(m)));
}
Output BiasAdd(const Scope& s, Input value, Input bias, const std::string& data_format) {
  AttrMap m;
  m["data_format"] = AttrValue::String(data_format);
  return Out(BuildOp(s, "BiasAdd", {value, bias}, std::move(m)));
}
Output BiasAddGrad(const Scope& s, Input out_backprop, const std::string& data_format) {
  AttrMap m;
  m["data_format"] = AttrValue::String(data_format);
  return Out(BuildOp(s, "BiasAddGrad", {out_backprop}, std::move(m)));
}
Output Softmax(const Scope& s, Input logits) { return Unary(s, "Softmax", logits); }
Output LogSoftmax(const Scope& s, Input logits) { return Unary(s, "LogSoftmax", logits); }
SoftmaxCrossEntropyWithLogits SoftmaxCrossEntropyWithLogitsOp(const Scope& s, Input features,
                                                               Input labels) {
  Node* n = BuildOp(s, "SoftmaxCrossEntropyWithLogits", {features, labels});
  return {Out(n, 0), Out(n, 1)};
}
SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogitsOp(const Scope& s,
                                                                     Input features,
                                                                     Input labels) {
  Node* n = BuildOp(s, "SparseSoftmaxCrossEntropyWithLogits", {features, labels});
  return {Out(n, 0), Out(n, 1)};
}

namespace {
AttrMap ConvAttrMap(const ConvAttrs& a) {
  AttrMap m;
  m["strides"] = IntList(a.strides);
  m["padding"] = AttrValue::String(a.padding);
  m["data_format"] = AttrValue::String(a.data_format);
  m["dilations"] = IntList(a.dilations);
  return m;
}
AttrMap PoolAttrMap(const PoolAttrs& a) {
  AttrMap m;
  m["ksize"] = IntList(a.ksize);
  m["strides"] = IntList(a.strides);
  m["padding"] = AttrValue::String(a.padding);
  m["data_format"] = AttrValue::String(a.data_format);
  return m;
}
}  // namespace

Output Conv2D(const Scope& s, Input input, Input filter, const ConvAttrs& attrs) {
  return Out(BuildOp(s, "Conv2D", {input, filter}, ConvAttrMap(attrs)));
}
Output Conv2DBackpropInput(const Scope& s, Input input_sizes, Input filter, Input out_backprop,
                           const ConvAttrs& attrs) {
  return Out(
      BuildOp(s, "Conv2DBackpropInput", {input_sizes, filter, out_backprop}, ConvAttrMap(attrs)));
}
Output Conv2DBackpropFilter(const Scope& s, Input input, Input filter_sizes, Input out_backprop,
                            const ConvAttrs& attrs) {
  return Out(
      BuildOp(s, "Conv2DBackpropFilter", {input, filter_sizes, out_backprop}, ConvAttrMap(attrs)));
}
Output MaxPool(const Scope& s, Input input, const PoolAttrs& attrs) {
  return Out(BuildOp(s, "MaxPool", {input}, PoolAttrMap(attrs)));
}
Output MaxPoolGrad(const Scope& s, Input orig_input, Input orig_output, Input grad,
                   const PoolAttrs& attrs) {
  return Out(BuildOp(s, "MaxPoolGrad", {orig_input, orig_output, grad}, PoolAttrMap(attrs)));
}

Output Reshape(const Scope& s, Input tensor, Input shape) {
  return Binary(s, "Reshape", tensor, shape);
}
Output Transpose(const Scope& s, Input x, Input perm) { return Binary(s, "Transpose", x, perm); }
Output InvertPermutation(const Scope& s, Input x) { return Unary(s, "InvertPermutation", x); }
Output ExpandDims(const Scope& s, Input input, Input axis) {
  return Binary(s, "ExpandDims", input, axis);
}
Output Squeeze(const Scope& s, Input input, const std::vector<int64_t>& axis) {
  AttrMap m;
  m["squeeze_dims"] = IntList(axis);
  return Out(BuildOp(s, "Squeeze", {input}, std::move(m)));
}
Output ConcatV2(const Scope& s, const std::vector<Input>& values, Input axis) {
  return Out(BuildOpWithList(s, "ConcatV2", {values, {axis}}));
}
Output Pack(const Scope& s, const std::vector<Input>& values, int64_t axis) {
  AttrMap m;
  m["axis"] = AttrValue::Int(axis);
  return Out(BuildOpWithList(s, "Pack", {values}, std::move(m)));
}
std::vector<Output> Unpack(const Scope& s, Input value, int64_t num, int64_t axis) {
  AttrMap m;
  m["num"] = AttrValue::Int(num);
  m["axis"] = AttrValue::Int(axis);
  Node* n = BuildOp(s, "Unpack", {value}, std::move(m));
  std::vector<Output> outs;
  for (int64_t i = 0; i < num; ++i) outs.push_back(Out(n, static_cast<int>(i)));
  return outs;
}
Output Fill(const Scope& s, Input dims, Input value) { return Binary(s, "Fill", dims, value); }
Output Tile(const Scope& s, Input input, Input multiples) {
  return Binary(s, "Tile", input, multiples);
}
Output Range(const Scope& s, Input start, Input limit, Input delta) {
  return Out(BuildOp(s, "Range", {start, limit, delta}));
}
Output Slice(const Scope& s, Input input, Input begin, Input size) {
  return Out(BuildOp(s, "Slice", {input, begin, size}));
}
Output Pad(const Scope& s, Input input, Input paddings) {
  return Binary(s, "Pad", input, paddings);
}
namespace {
AttrMap StridedSliceAttrMap(const StridedSliceAttrs& a) {
  AttrMap m;
  m["begin_mask"] = AttrValue::Int(a.begin_mask);
  m["end_mask"] = AttrValue::Int(a.end_mask);
  m["ellipsis_mask"] = AttrValue::Int(a.ellipsis_mask);
  m["new_axis_mask"] = AttrValue::Int(a.new_axis_mask);
  m["shrink_axis_mask"] = AttrValue::Int(a.shrink_axis_mask);
  return m;
}
}  // namespace
Output StridedSlice(const Scope& s, Input input, Input begin, Input end, Input strides,
                    const StridedSliceAttrs& attrs) {
  return Out(BuildOp(s, "StridedSlice", {input, begin, end, strides}, StridedSliceAttrMap(attrs)));
}
Output StridedSliceGrad(const Scope& s, Input shape, Input begin, Input end, Input strides,
                        Input dy, const StridedSliceAttrs& attrs) {
  return Out(BuildOp(s, "StridedSliceGrad", {shape, begin, end, strides, dy},
                     StridedSliceAttrMap(attrs)));
}
Output GatherV2(const Scope& s, Input params, Input indices, Input axis, int64_t batch_dims) {
  AttrMap m;
  m["batch_dims"] = AttrValue::Int(batch_dims);
  return Out(BuildOp(s, "GatherV2", {params, indices, axis}, std::move(m)));
}
Output UnsortedSegmentSum(const Scope& s, Input data, Input segment_ids, Input num_segments) {
  return Out(BuildOp(s, "UnsortedSegmentSum", {data, segment_ids, num_segments}));
}
Output Shape(const Scope& s, Input input, DataType out_type) {
  AttrMap m;
  m["out_type"] = AttrValue::Type(out_type);
  return Out(BuildOp(s, "Shape", {input}, std::move(m)));
}
Output Size(const Scope& s, Input input, DataType out_type) {
  AttrMap m;
  m["out_type"] = AttrValue::Type(out_type);
  return Out(BuildOp(s, "Size", {input}, std::move(m)));
}
Output Rank(const Scope& s, Input input) { return Unary(s, "Rank", input); }
BroadcastGradientArgs BroadcastGradientArgsOp(const Scope& s, Input s0, Input s1) {
  Node* n = BuildOp(s, "BroadcastGradientArgs", {s0, s1});
  return {Out(n, 0), Out(n, 1)};
}

namespace {
Output Reduction(const Scope& s, const std::string& op, Input input, Input axis, bool keep) {
  AttrMap m;
  m["keep_dims"] = AttrValue::Bool(keep);
  return Out(BuildOp(s, op, {input, axis}, std::move(m)));
}
}  // namespace
Output Sum(const Scope& s, Input in, Input axis, bool k) { return Reduction(s, "Sum", in, axis, k); }
Output Mean(const Scope& s, Input in, Input axis, bool k) {
  return Reduction(s, "Mean", in, axis, k);
}
Output Max(const Scope& s, Input in, Input axis, bool k) { return Reduction(s, "Max", in, axis, k); }
Output Min(const Scope& s, Input in, Input axis, bool k) { return Reduction(s, "Min", in, axis, k); }
Output Prod(const Scope& s, Input in, Input axis, bool k) {
  return Reduction(s, "Prod", in, axis, k);
}
Output ArgMax(const Scope& s, Input input, Input dimension, DataType output_type) {
  AttrMap m;
  m["output_type"] = AttrValue::Type(output_type);
  return Out(BuildOp(s, "ArgMax", {input, dimension}, std::move(m)));
}

Output VarHandleOp(const Scope& s, DataType dtype, const PartialShape& shape,
                   const std::string& shared_name) {
  AttrMap m;
  m["dtype"] = AttrValue::Type(dtype);
  m["shape"] = AttrValue::Shape(shape);
  m["container"] = AttrValue::String("");
  // TF1 names the resource after the variable's node: reserve the node's name first.
  Scope inner = s;
  Scope named = s.NewOpScope("VarHandleOp", &inner);
  m["shared_name"] = AttrValue::String(shared_name.empty() ? inner.name_prefix() : shared_name);
  return Out(named.AddNode("VarHandleOp", {}, std::move(m)));
}
Output ReadVariableOp(const Scope& s, Input resource, DataType dtype) {
  AttrMap m;
  m["dtype"] = AttrValue::Type(dtype);
  return Out(BuildOp(s, "ReadVariableOp", {resource}, std::move(m)));
}
Node* AssignVariableOp(const Scope& s, Input resource, Input value) {
  AttrMap m;
  m["dtype"] = AttrValue::Type(value.output().valid() ? RemoveRefType(value.output().type())
                                                      : value.value()->dtype());
  return BuildOp(s, "AssignVariableOp", {resource, value}, std::move(m));
}
Output VariableV2(const Scope& s, const PartialShape& shape, DataType dtype) {
  AttrMap m;
  m["dtype"] = AttrValue::Type(dtype);
  m["shape"] = AttrValue::Shape(shape);
  m["container"] = AttrValue::String("");
  m["shared_name"] = AttrValue::String("");
  return Out(BuildOp(s, "VariableV2", {}, std::move(m)));
}
Output Assign(const Scope& s, Input ref, Input value) {
  return Out(BuildOp(s, "Assign", {ref, value}));
}
Output RandomUniform(const Scope& s, Input shape, DataType dtype, int64_t seed, int64_t seed2) {
  AttrMap m;
  m["dtype"] = AttrValue::Type(dtype);
  m["seed"] = AttrValue::Int(seed);
  m["seed2"] = AttrValue::Int(seed2);
  return Out(BuildOp(s, "RandomUniform", {shape}, std::move(m)));
}
Output ApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta) {
  return Out(BuildOp(s, "ApplyGradientDescent", {var, alpha, delta}));
}
Node* ResourceApplyGradientDescent(const Scope& s, Input var, Input alpha, Input delta) {
  AttrMap m;
  m["T"] = AttrValue::Type(alpha.output().valid() ? alpha.output().type()
                                                  : alpha.value()->dtype());
  return BuildOp(s, "ResourceApplyGradientDescent", {var, alpha, delta}, std::move(m));
}

}  // namespace xlens::graph::ops
