"""Writes TensorFlow's signatures of the math, nn and training ops in one line per op.

tests/graph/op_signatures_test.cc formats the registry's OpDefs the same way and compares: the
input, output and attr names, attr types, defaults and allowed values must be TensorFlow's. Types
our DataType does not have (float8, int4, ...) are left out of allowed lists.

  python3 tests/graph/testdata/ops/gen_op_signatures.py > tests/graph/testdata/ops/op_signatures.txt
"""
import sys

from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import op_def_registry

OPS = """
AddV2 Add AddN Sub Mul RealDiv Div DivNoNan FloorDiv FloorMod Maximum Minimum Pow
SquaredDifference Square Sqrt Rsqrt Reciprocal Neg Abs Sign Exp Log Log1p Tanh Sigmoid Sin Cos
Floor Ceil Round Erf IsFinite IsNan LogicalAnd LogicalOr LogicalNot Cast Equal NotEqual Less
LessEqual Greater GreaterEqual Select SelectV2 MatMul BatchMatMulV2 Sum Mean Max Min Prod All Any
ArgMax ArgMin UnsortedSegmentSum _UnaryOpsComposition SigmoidGrad TanhGrad RsqrtGrad SqrtGrad ReciprocalGrad
Relu Relu6 ReluGrad Relu6Grad Elu EluGrad Selu SeluGrad LeakyRelu LeakyReluGrad Softplus
SoftplusGrad Softmax LogSoftmax BiasAdd BiasAddGrad SoftmaxCrossEntropyWithLogits
SparseSoftmaxCrossEntropyWithLogits Conv2D Conv2DBackpropInput Conv2DBackpropFilter MaxPool
MaxPoolGrad AvgPool AvgPoolGrad L2Loss InTopKV2 ApplyGradientDescent ResourceApplyGradientDescent
ApplyMomentum ResourceApplyMomentum ApplyAdam ResourceApplyAdam
""".split()

# The DataTypes compiler/graph/types.h has (TensorFlow's enum values 1..23).
KNOWN = set(range(1, 24))


def type_name(t):
  base = t % 100
  name = types_pb2.DataType.Name(base)[3:].lower()
  return name + ("_ref" if t > 100 else "")


def value(v):
  kind = v.WhichOneof("value")
  if kind == "type":
    return type_name(v.type)
  if kind == "b":
    return "true" if v.b else "false"
  if kind == "i":
    return str(v.i)
  if kind == "f":
    return repr(float(v.f))
  if kind == "s":
    return "'" + v.s.decode() + "'"
  if kind == "list":
    if v.list.type:
      return "{" + ",".join(type_name(t) for t in v.list.type if t in KNOWN) + "}"
    if v.list.s:
      return "{" + ",".join("'" + s.decode() + "'" for s in v.list.s) + "}"
    if v.list.i:
      return "[" + ",".join(str(i) for i in v.list.i) + "]"
    return "[]"
  return "?"


def arg(a):
  if a.number_attr:
    t = a.type_attr or type_name(a.type)
    t = a.number_attr + "*" + t
  elif a.type_list_attr:
    t = a.type_list_attr
  elif a.type_attr:
    t = a.type_attr
  else:
    t = type_name(a.type)
  if a.is_ref:
    t = "Ref(" + t + ")"
  return a.name + ":" + t


def line(op):
  d = op_def_registry.get(op)
  parts = [d.name, "(" + ",".join(arg(a) for a in d.input_arg) + ")",
           "->(" + ",".join(arg(a) for a in d.output_arg) + ")"]
  for a in d.attr:
    s = a.name + ":" + a.type
    if a.HasField("allowed_values"):
      s += " in " + value(a.allowed_values)
    if a.has_minimum:
      s += " >=" + str(a.minimum)
    if a.HasField("default_value"):
      s += " =" + value(a.default_value)
    parts.append(s)
  flags = []
  if d.is_commutative:
    flags.append("commutative")
  if d.is_aggregate:
    flags.append("aggregate")
  if d.is_stateful:
    flags.append("stateful")
  if d.allows_uninitialized_input:
    flags.append("uninitialized")
  if flags:
    parts.append("[" + ",".join(flags) + "]")
  return " ".join(parts)


def main():
  for op in OPS:
    print(line(op))


if __name__ == "__main__":
  sys.exit(main())
