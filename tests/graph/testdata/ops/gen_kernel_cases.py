"""Runs TensorFlow's CPU kernels of the math, nn and training ops on small inputs and writes the
cases (op, attrs, inputs, TensorFlow's outputs) that tests/graph/op_kernels_test.cc replays
against our kernels.

  python3 tests/graph/testdata/ops/gen_kernel_cases.py > tests/graph/testdata/ops/kernel_cases.txt

Format, one item a line: `case NAME OP`, `attr NAME KIND VALUE...` (KIND: type, bool, int,
float, string, ints, strings), `in DTYPE DIMS VALUES...` and `out DTYPE DIMS VALUES...` (DIMS
comma-separated, `-` for a scalar; floats printed exactly), `error SUBSTRING` for a case that must
fail, `end`.
"""
import inspect
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")
import numpy as np
import tensorflow as tf
from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import op_def_registry

rng = np.random.default_rng(20261124)
out_lines = []


def tname(dtype):
  # TensorFlow's short DataType names ("float", "double", "half"), as OpDefs write them.
  return types_pb2.DataType.Name(tf.as_dtype(dtype).as_datatype_enum)[3:].lower()


def fmt_values(a):
  a = np.asarray(a)
  if a.dtype == np.bool_:
    return " ".join("1" if v else "0" for v in a.ravel())
  if a.dtype.kind == "f":
    # The shortest text that reads back as the same value of the array's type.
    return " ".join(str(v) for v in a.ravel())
  return " ".join(str(int(v)) for v in a.ravel())


def fmt_tensor(kind, a):
  a = np.asarray(a)
  dims = ",".join(str(d) for d in a.shape) or "-"
  values = fmt_values(a)
  return f"{kind} {tname(a.dtype)} {dims} {values}".rstrip()


def fmt_attr(name, v):
  if isinstance(v, tf.dtypes.DType):
    return f"attr {name} type {tname(v)}"
  if isinstance(v, bool):
    return f"attr {name} bool {int(v)}"
  if isinstance(v, int):
    return f"attr {name} int {v}"
  if isinstance(v, float):
    return f"attr {name} float {v!r}"
  if isinstance(v, str):
    return f"attr {name} string {v}"
  if isinstance(v, list) and all(isinstance(x, str) for x in v) and v:
    return f"attr {name} strings {' '.join(v)}"
  return f"attr {name} ints {' '.join(str(x) for x in v)}".rstrip()


def case(name, op, inputs, attrs=None, error=None):
  """inputs: list of numpy arrays (or lists of arrays for N * T), in the op's input order."""
  attrs = dict(attrs or {})
  d = op_def_registry.get(op)
  kwargs = {}
  flat = []
  all_attrs = dict(attrs)
  params = [a.name for a in d.input_arg]
  if hasattr(tf.raw_ops, op):
    params = list(inspect.signature(getattr(tf.raw_ops, op)).parameters)
  for index, (arg, value) in enumerate(zip(d.input_arg, inputs)):
    py_name = params[index]  # the Python name (Select's t is x, Sum's reduction_indices is axis)
    if arg.number_attr:
      kwargs[py_name] = [tf.constant(v) for v in value]
      all_attrs[arg.number_attr] = len(value)
      if arg.type_attr:
        all_attrs[arg.type_attr] = tf.as_dtype(np.asarray(value[0]).dtype)
      flat.extend(value)
    else:
      kwargs[py_name] = tf.constant(value)
      if arg.type_attr:
        all_attrs.setdefault(arg.type_attr, tf.as_dtype(np.asarray(value).dtype))
      flat.append(value)
  call_attrs = {k: v for k, v in attrs.items()}
  lines = [f"case {name} {op}"]
  for k, v in sorted(all_attrs.items()):
    lines.append(fmt_attr(k, v))
  for v in flat:
    lines.append(fmt_tensor("in", v))
  try:
    if op == "_UnaryOpsComposition":
      # Not in tf.raw_ops: the chain of the ops it fuses, as grappler's rewrite promises.
      result = kwargs["x"]
      for unary in attrs["op_names"]:
        result = getattr(tf.raw_ops, unary)(x=result) if unary not in ("Relu",) else \
            tf.raw_ops.Relu(features=result)
    else:
      result = getattr(tf.raw_ops, op)(**kwargs, **call_attrs)
    if error is not None:
      raise SystemExit(f"{name}: expected an error, TensorFlow gave {result}")
    if not isinstance(result, (list, tuple)):
      result = [result]
    for r in result:
      lines.append(fmt_tensor("out", r.numpy()))
  except (tf.errors.InvalidArgumentError, ValueError) as e:
    if error is None:
      raise
    lines.append(f"error {error}")
  lines.append("end")
  out_lines.extend(lines)


def f32(*shape, lo=-3.0, hi=3.0):
  return rng.uniform(lo, hi, size=shape).astype(np.float32)


def i32(*shape, lo=-9, hi=10):
  return rng.integers(lo, hi, size=shape).astype(np.int32)


def main():
  F = tf.float32
  # Binary arithmetic and broadcasting corners.
  for op in ["AddV2", "Add", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference",
             "DivNoNan"]:
    case(f"{op}_same", op, [f32(2, 3), f32(2, 3)])
    case(f"{op}_bcast", op, [f32(4, 1, 3), f32(2, 1)])
    case(f"{op}_scalar", op, [np.float32(1.5), f32(5)])
  case("DivNoNan_zero", "DivNoNan", [np.array([1, -2, 0], np.float32), np.array([0, 0, 2], np.float32)])
  case("Maximum_nan", "Maximum", [np.array([np.nan, 1, 2], np.float32), np.array([1, np.nan, 3], np.float32)])
  case("Add_double", "AddV2", [rng.normal(size=(3,)), rng.normal(size=(2, 3))])
  case("Add_int64", "AddV2", [np.array([1, 2, 3], np.int64), np.int64(7)])
  case("Add_half", "AddV2", [f32(4).astype(np.float16), f32(4).astype(np.float16)])
  case("Sub_empty", "Sub", [np.zeros((0, 3), np.float32), f32(3)])
  case("Add_incompatible", "AddV2", [f32(2, 3), f32(4)], error="Incompatible shapes: [2,3] vs. [4]")
  for op in ["Div", "FloorDiv", "FloorMod"]:
    case(f"{op}_int", op, [i32(12), np.array([3, -3, 4, -4, 5, -5, 7, -7, 2, -2, 1, -1], np.int32)])
    case(f"{op}_float", op, [f32(6), np.array([1.5, -1.5, 2, -2, 0.7, -0.7], np.float32)])
    case(f"{op}_int_zero", op, [i32(3), np.array([1, 0, 2], np.int32)], error="Integer division by zero")
  case("FloorMod_int64_bcast", "FloorMod", [np.arange(-6, 6, dtype=np.int64).reshape(3, 4), np.int64(-4)])
  case("Pow_float", "Pow", [f32(5, lo=0.1, hi=3), f32(5)])
  case("Pow_int", "Pow", [np.array([2, -3, 5, 0], np.int32), np.array([10, 3, 0, 2], np.int32)])
  case("Pow_int_negative", "Pow", [np.array([2], np.int32), np.array([-1], np.int32)],
       error="Integers to negative integer powers are not allowed")
  case("AddN", "AddN", [[f32(2, 2), f32(2, 2), f32(2, 2)]])
  # Unary math.
  for op in ["Square", "Neg", "Abs", "Sign", "Exp", "Tanh", "Sigmoid", "Sin", "Cos", "Floor",
             "Ceil", "Erf", "Reciprocal"]:
    case(f"{op}_float", op, [f32(7)])
  for op in ["Sqrt", "Rsqrt", "Log", "Log1p"]:
    case(f"{op}_float", op, [f32(7, lo=0.05, hi=5)])
  case("Exp_double", "Exp", [rng.normal(size=(4,))])
  case("Round", "Round", [np.array([0.5, 1.5, 2.5, -0.5, -1.5, 0.49, 2.51], np.float32)])
  for op in ["Square", "Neg", "Abs", "Sign"]:
    case(f"{op}_int", op, [i32(6)])
  case("Sign_nan", "Sign", [np.array([np.nan, -0.0, 3], np.float32)])
  case("IsFinite", "IsFinite", [np.array([1, np.inf, -np.inf, np.nan], np.float32)])
  case("IsNan", "IsNan", [np.array([1, np.inf, -np.inf, np.nan], np.float32)])
  b1 = np.array([[True, False], [True, True]])
  b2 = np.array([True, False])
  case("LogicalAnd", "LogicalAnd", [b1, b2])
  case("LogicalOr", "LogicalOr", [b1, b2])
  case("LogicalNot", "LogicalNot", [b1])
  case("Cast_f2i", "Cast", [np.array([1.7, -1.7, 0.2, 5], np.float32)], {"DstT": tf.int32})
  case("Cast_i2f", "Cast", [np.array([1, -7, 300], np.int64)], {"DstT": tf.float32})
  case("Cast_f2b", "Cast", [np.array([0, 0.5, -1], np.float32)], {"DstT": tf.bool})
  case("Cast_b2f", "Cast", [b1], {"DstT": tf.float32})
  case("Cast_f2h", "Cast", [f32(5)], {"DstT": tf.float16})
  case("Cast_f2d", "Cast", [f32(5)], {"DstT": tf.float64})
  # Comparisons.
  x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
  y = np.array([3, 2, 1], np.float32)
  for op in ["Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"]:
    case(f"{op}", op, [x, y])
  case("Equal_int", "Equal", [np.array([1, 2], np.int32), np.int32(2)])
  case("NotEqual_incompatible_false", "NotEqual", [f32(2, 3), f32(4)],
       {"incompatible_shape_error": False})
  case("Equal_incompatible_false", "Equal", [f32(2, 3), f32(4)],
       {"incompatible_shape_error": False})
  case("Select_same", "Select", [b1, f32(2, 2), f32(2, 2)])
  case("Select_vector", "Select", [b2, f32(2, 3), f32(2, 3)])
  case("Select_scalar", "Select", [np.array(False), f32(2, 3), f32(2, 3)])
  case("SelectV2_bcast", "SelectV2", [b2, f32(3, 2), np.float32(-1)])
  # MatMul.
  for ta in [False, True]:
    for tb in [False, True]:
      a = f32(3, 4) if not ta else f32(4, 3)
      b = f32(4, 5) if not tb else f32(5, 4)
      case(f"MatMul_{int(ta)}{int(tb)}", "MatMul", [a, b], {"transpose_a": ta, "transpose_b": tb})
  case("MatMul_big", "MatMul", [f32(40, 70), f32(70, 30)])
  case("MatMul_int", "MatMul", [i32(2, 3), i32(3, 2)])
  case("MatMul_mismatch", "MatMul", [f32(2, 3), f32(4, 2)], error="Matrix size-incompatible")
  case("BatchMatMulV2", "BatchMatMulV2", [f32(2, 3, 4), f32(4, 5)])
  case("BatchMatMulV2_bcast_adj", "BatchMatMulV2", [f32(2, 1, 4, 3), f32(3, 5, 4)],
       {"adj_x": True, "adj_y": True})
  # Reductions.
  t = f32(2, 3, 4)
  for op in ["Sum", "Mean", "Max", "Min", "Prod"]:
    case(f"{op}_axis1", op, [t, np.array([1], np.int32)])
    case(f"{op}_neg_keep", op, [t, np.array([-1, 0], np.int32)], {"keep_dims": True})
    case(f"{op}_all", op, [t, np.array([0, 1, 2], np.int64)])
    case(f"{op}_none", op, [t, np.zeros((0,), np.int32)])
  case("Sum_int", "Sum", [i32(3, 4), np.array(0, np.int32)])
  case("Mean_int", "Mean", [i32(3, 4), np.array(1, np.int32)])
  case("Sum_large", "Sum", [f32(5000, lo=0, hi=1), np.array([0], np.int32)])
  case("Mean_large", "Mean", [f32(300, 20, lo=0, hi=1), np.array([0], np.int32)])
  case("Sum_empty", "Sum", [np.zeros((0, 3), np.float32), np.array([0], np.int32)])
  case("Max_empty", "Max", [np.zeros((0, 3), np.float32), np.array([0], np.int32)])
  case("Sum_bad_axis", "Sum", [t, np.array([3], np.int32)], error="Invalid reduction dimension 3")
  bb = np.array([[True, False, True], [True, True, True]])
  case("All", "All", [bb, np.array([1], np.int32)])
  case("Any", "Any", [bb, np.array([0], np.int32)])
  case("ArgMax", "ArgMax", [f32(3, 5), np.int32(1)])
  case("ArgMax_axis0_int32out", "ArgMax", [f32(3, 5), np.int32(0)], {"output_type": tf.int32})
  case("ArgMin", "ArgMin", [f32(3, 5), np.int32(-1)])
  case("ArgMax_ties", "ArgMax", [np.array([1, 3, 3, 2], np.float32), np.int32(0)])
  case("UnaryOpsComposition", "_UnaryOpsComposition", [f32(6)],
       {"op_names": ["Abs", "Sqrt", "Tanh", "Relu"]})
  # Gradients of the unary ops.
  yv = f32(5, lo=0.1, hi=0.9)
  for op in ["SigmoidGrad", "TanhGrad", "RsqrtGrad", "SqrtGrad", "ReciprocalGrad"]:
    case(op, op, [yv, f32(5)])
  # NN.
  feats = np.array([-7, -1, -0.5, 0, 0.5, 3, 6, 8], np.float32)
  for op in ["Relu", "Relu6", "Elu", "Selu", "Softplus"]:
    case(op, op, [feats])
  case("Softplus_extremes", "Softplus", [np.array([-100, -20, 20, 100], np.float32)])
  case("Relu_int", "Relu", [i32(5)])
  case("LeakyRelu", "LeakyRelu", [feats], {"alpha": 0.1})
  g = f32(8)
  for op in ["ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "SoftplusGrad"]:
    case(op, op, [g, feats])
  case("LeakyReluGrad", "LeakyReluGrad", [g, feats], {"alpha": 0.3})
  logits = f32(4, 6, lo=-5, hi=5)
  case("Softmax", "Softmax", [logits])
  case("Softmax_3d", "Softmax", [f32(2, 3, 4)])
  case("Softmax_big", "Softmax", [np.array([[1000, 1001, 999]], np.float32)])
  case("LogSoftmax", "LogSoftmax", [logits])
  case("BiasAdd", "BiasAdd", [f32(2, 3, 4), f32(4)])
  case("BiasAdd_NCHW", "BiasAdd", [f32(2, 3, 2, 2), f32(3)], {"data_format": "NCHW"})
  case("BiasAddGrad", "BiasAddGrad", [f32(2, 3, 4)])
  case("BiasAddGrad_NCHW", "BiasAddGrad", [f32(2, 3, 2, 2)], {"data_format": "NCHW"})
  labels = rng.uniform(0, 1, size=(4, 6)).astype(np.float32)
  labels /= labels.sum(axis=1, keepdims=True)
  case("SoftmaxXent", "SoftmaxCrossEntropyWithLogits", [logits, labels])
  case("SoftmaxXent_bcast", "SoftmaxCrossEntropyWithLogits", [logits, labels[:1]])
  case("SparseXent", "SparseSoftmaxCrossEntropyWithLogits", [logits, np.array([0, 5, 2, 3], np.int32)])
  case("SparseXent_int64", "SparseSoftmaxCrossEntropyWithLogits", [logits, np.array([1, 1, 4, 0], np.int64)])
  case("SparseXent_bad_label", "SparseSoftmaxCrossEntropyWithLogits",
       [logits, np.array([0, 6, 2, 3], np.int32)],
       error="Received a label value of 6 which is outside the valid range of [0, 6).  Label values: 0 6 2 3")
  # Convolutions.
  img = f32(2, 7, 6, 3)
  filt = f32(3, 2, 3, 4)
  for padding, strides, dil in [("VALID", [1, 1, 1, 1], [1, 1, 1, 1]), ("SAME", [1, 2, 2, 1], [1, 1, 1, 1]),
                                ("SAME", [1, 1, 1, 1], [1, 2, 1, 1]), ("VALID", [1, 2, 1, 1], [1, 1, 2, 1])]:
    tag = f"{padding}_s{strides[1]}{strides[2]}_d{dil[1]}{dil[2]}"
    attrs = {"strides": strides, "padding": padding, "dilations": dil}
    case(f"Conv2D_{tag}", "Conv2D", [img, filt], attrs)
    if dil != [1, 1, 1, 1]:
      continue  # TensorFlow's CPU backprops refuse dilations
    out_shape = tf.raw_ops.Conv2D(input=img, filter=filt, **attrs).shape
    dy = f32(*out_shape)
    case(f"Conv2DBackpropInput_{tag}", "Conv2DBackpropInput",
         [np.array(img.shape, np.int32), filt, dy], attrs)
    case(f"Conv2DBackpropFilter_{tag}", "Conv2DBackpropFilter",
         [img, np.array(filt.shape, np.int32), dy], attrs)
  case("Conv2D_explicit", "Conv2D", [img, filt],
       {"strides": [1, 1, 2, 1], "padding": "EXPLICIT", "explicit_paddings": [0, 0, 1, 2, 0, 1, 0, 0]})
  for padding in ["VALID", "SAME"]:
    attrs = {"ksize": [1, 3, 2, 1], "strides": [1, 2, 2, 1], "padding": padding}
    case(f"MaxPool_{padding}", "MaxPool", [img], attrs)
    case(f"AvgPool_{padding}", "AvgPool", [img], attrs)
    out = tf.raw_ops.MaxPool(input=img, **attrs)
    gy = f32(*out.shape)
    case(f"MaxPoolGrad_{padding}", "MaxPoolGrad", [img, out.numpy(), gy], attrs)
    case(f"AvgPoolGrad_{padding}", "AvgPoolGrad", [np.array(img.shape, np.int32), gy], attrs)
  case("L2Loss", "L2Loss", [f32(3, 5)])
  preds = np.array([[0.1, 0.5, 0.3, 0.1], [0.4, 0.4, 0.1, 0.1], [0.2, 0.2, np.nan, 0.6]], np.float32)
  case("InTopKV2_k1", "InTopKV2", [preds, np.array([1, 1, 3], np.int32), np.int32(1)])
  case("InTopKV2_k2", "InTopKV2", [preds, np.array([2, 0, 9], np.int32), np.int32(2)])
  print("\n".join(out_lines))


if __name__ == "__main__":
  sys.exit(main())
