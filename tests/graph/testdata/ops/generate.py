#!/usr/bin/env python3
"""Expected results of single ops, computed by the installed TensorFlow (2.21, CPU).

Each case builds one op in a TF1 graph from constant inputs, runs it in a Session, and records
the node's attrs (as TensorFlow filled them in), the inputs, and either every output or the
first line of the error. tests/graph/*_ops_test.cc run the same node through our kernels.

usage: python3 generate.py   (writes array_cases.json, random_cases.json, string_cases.json)
"""
import inspect
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.core.framework import types_pb2  # noqa: E402
from tensorflow.python.framework import op_def_registry  # noqa: E402

tf1 = tf.compat.v1
tf1.disable_eager_execution()
HERE = os.path.dirname(os.path.abspath(__file__))


def tensor_json(a):
    a = np.asarray(a)
    if a.dtype.kind in "SUO":
        dtype = "DT_STRING"
        values = [x.decode("utf-8") if isinstance(x, bytes) else str(x) for x in a.reshape(-1)]
    else:
        dtype = types_pb2.DataType.Name(tf.as_dtype(a.dtype).as_datatype_enum)
        values = a.reshape(-1).tolist()
        if a.dtype.kind == "f":
            # JSON has no infinities or NaN: they are written as strings.
            values = [v if np.isfinite(v) else str(v) for v in values]
    return {"dtype": dtype, "shape": list(a.shape), "values": values}


def attr_json(v):
    kind = v.WhichOneof("value")
    if kind == "type":
        return {"type": types_pb2.DataType.Name(v.type)}
    if kind in ("i", "b", "f"):
        return {kind: getattr(v, kind)}
    if kind == "s":
        return {"s": v.s.decode("utf-8")}
    if kind == "shape":
        return {"shape": [] if v.shape.unknown_rank else [d.size for d in v.shape.dim],
                "unknown_rank": v.shape.unknown_rank}
    if kind == "list":
        if v.list.type:
            return {"list_type": [types_pb2.DataType.Name(t) for t in v.list.type]}
        if v.list.i:
            return {"list_i": list(v.list.i)}
        if v.list.s:
            return {"list_s": [s.decode() for s in v.list.s]}
        return {"list_i": []}
    raise ValueError(kind)


def case(cases, op, inputs, runs=1, **attrs):
    """inputs: list of numpy arrays, or lists of arrays for list inputs."""
    g = tf.Graph()
    with g.as_default():
        args = []
        flat_inputs = []
        for x in inputs:
            if isinstance(x, list):
                args.append([tf.constant(v) for v in x])
                flat_inputs.extend(x)
            else:
                args.append(tf.constant(x))
                flat_inputs.append(x)
        fn = getattr(tf.raw_ops, op)
        # raw_ops take the inputs first, in OpDef order, under Python names (Split's `axis`).
        n_inputs = len(op_def_registry.get(op).input_arg)
        arg_names = list(inspect.signature(fn).parameters)[:n_inputs]
        kwargs = dict(zip(arg_names, args))
        kwargs.update(attrs)
        try:
            out = fn(**kwargs)
        except (ValueError, TypeError) as e:
            # TensorFlow's shape function refused the node: build it again from inputs of
            # unknown shape for its attrs; the kernel must refuse the values too.
            error = str(e).split(" for '{{node")[0]
            g2 = tf.Graph()
            with g2.as_default():
                def ph(v):
                    return tf1.placeholder(tf.as_dtype(np.asarray(v).dtype) if
                                           np.asarray(v).dtype.kind not in "SUO" else tf.string)
                args2 = [[ph(v) for v in x] if isinstance(x, list) else ph(x) for x in inputs]
                kwargs2 = dict(zip(arg_names, args2))
                kwargs2.update(attrs)
                out2 = fn(**kwargs2)
                node2 = out2.op if hasattr(out2, "op") else out2[0].op
            cases.append({"op": op, "name": f"{op}_{len(cases)}",
                          "attrs": {k: attr_json(v) for k, v in node2.node_def.attr.items()},
                          "inputs": [tensor_json(x) for x in flat_inputs], "error": error,
                          "shape_error": True})
            return
        node = out.op if hasattr(out, "op") else (out[0].op if isinstance(out, (list, tuple)) and
                                                   out else g.get_operations()[-1])
        if not hasattr(out, "op") and not isinstance(out, (list, tuple)):
            node = out  # an Operation (no outputs)
        fetch = list(node.outputs) if node.outputs else node
        entry = {"op": op, "name": f"{op}_{len(cases)}",
                 "attrs": {k: attr_json(v) for k, v in node.node_def.attr.items()},
                 "inputs": [tensor_json(x) for x in flat_inputs]}
        with tf1.Session(graph=g) as s:
            results = []
            try:
                for _ in range(runs):
                    r = s.run(fetch)
                    results.append([tensor_json(t) for t in r] if isinstance(r, list) else [])
                entry["outputs"] = results[0]
                if runs > 1:
                    entry["later_runs"] = results[1:]
            except tf.errors.OpError as e:
                entry["error"] = runtime_message(e.message)
    cases.append(entry)


def runtime_message(message):
    """The kernel's own message out of a Session error's decorations."""
    message = message.split("\n\t [[")[0]
    if "\nNode: '" in message:
        message = message.split("\nNode: '", 1)[1].split("\n", 1)[1]
    elif message.startswith("Graph execution error:"):
        message = message[len("Graph execution error:"):].strip()
    return message


def f32(x):
    return np.array(x, dtype=np.float32)


def i32(x):
    return np.array(x, dtype=np.int32)


def i64(x):
    return np.array(x, dtype=np.int64)


def array_cases():
    c = []
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    # StridedSlice: masks, negative strides, ellipsis, new axes, shrink, clamping, errors.
    ss = [
        ([0, 0, 0], [2, 3, 4], [1, 1, 1], {}),
        ([1, 0, 0], [2, 3, 4], [1, 1, 1], {"shrink_axis_mask": 1}),
        ([0, -1, 0], [0, 0, 0], [1, 1, 1], {"shrink_axis_mask": 2, "begin_mask": 5, "end_mask": 5}),
        ([0, 2, 3], [0, 0, 0], [1, -1, -2], {"begin_mask": 1, "end_mask": 7}),
        ([0, 0], [0, 2], [1, 1], {"ellipsis_mask": 1}),
        ([0, 0, 1], [0, 0, 3], [1, 1, 1], {"ellipsis_mask": 1, "new_axis_mask": 2}),
        ([0, 1], [0, 2], [1, 1], {"new_axis_mask": 1}),
        ([-100, 1, -3], [100, 100, 100], [1, 1, 1], {}),
        ([5, 0, 0], [-5, 3, 4], [-1, 1, 1], {}),
        ([1, 1, 1], [1, 1, 1], [1, 1, 1], {}),
        ([0], [0], [1], {"ellipsis_mask": 1, "new_axis_mask": 0}),
        ([0, 0], [1, 1], [1, 1], {"ellipsis_mask": 2, "shrink_axis_mask": 1}),
        ([0, 0, 0, 0], [1, 1, 1, 1], [1, 1, 1, 1], {"new_axis_mask": 8}),
        ([3, 0, 0], [4, 3, 4], [1, 1, 1], {"shrink_axis_mask": 1}),
        ([0, 0, 0], [2, 3, 4], [1, 0, 1], {}),
        ([0, 0, 0], [2, 3, 4], [1, 1, 1], {"ellipsis_mask": 3}),
        ([1, -1], [2, -3], [1, -1], {}),
        ([0, 0, 0], [0, 0, 0], [1, 1, -1], {"shrink_axis_mask": 4}),
        ([-1], [0], [1], {"shrink_axis_mask": 1}),
    ]
    for b, e, s, m in ss:
        case(c, "StridedSlice", [x, i32(b), i32(e), i32(s)], **m)
    case(c, "StridedSlice", [np.array([b"a", b"b", b"c"]), i64([2]), i64([-4]), i64([-1])])
    case(c, "Slice", [x, i32([1, 1, 0]), i32([-1, 2, 3])])
    case(c, "Slice", [x, i64([0, 2, 1]), i64([2, 2, 1])])
    # GatherV2 with axis and batch_dims.
    p = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    case(c, "GatherV2", [p, i32([[2, 0], [1, 1]]), i32(1)])
    case(c, "GatherV2", [p, i32([[2, 0], [1, 1]]), i32(1)], batch_dims=1)
    case(c, "GatherV2", [p, i64([[3, 0, 1], [0, 0, 2]]), i32(-1)], batch_dims=1)
    case(c, "GatherV2", [p, i32([1, 0]), i32(0)])
    case(c, "GatherV2", [p, i32(2), i32(2)])
    case(c, "GatherV2", [p, i32([[0], [2]]), i32(2)], batch_dims=-1)
    case(c, "GatherV2", [p, i32([3]), i32(1)])
    case(c, "GatherV2", [np.array([b"x", b"y", b"z"]), i32([2, 2, 0]), i32(0)])
    case(c, "Transpose", [x, i32([2, 0, 1])])
    case(c, "Transpose", [np.arange(6, dtype=np.int64).reshape(2, 3), i64([1, 0])])
    case(c, "ConcatV2", [[x, x[:, :1]], i32(1)])
    case(c, "ConcatV2", [[f32([[1, 2]]), f32([[3, 4]])], i32(-2)])
    case(c, "ConcatV2", [[f32([[1, 2]]), f32([[3, 4, 5]])], i32(0)])
    case(c, "Pack", [[f32([1, 2]), f32([3, 4]), f32([5, 6])]], axis=1)
    case(c, "Pack", [[np.array([b"a"]), np.array([b"b"])]])
    case(c, "Unpack", [x], num=3, axis=1)
    case(c, "Tile", [f32([[1, 2], [3, 4]]), i32([2, 3])])
    case(c, "Tile", [i32([7, 8]), i32([0])])
    case(c, "BroadcastTo", [f32([1, 2, 3]), i32([2, 3])])
    case(c, "BroadcastTo", [f32([[1], [2]]), i64([2, 2, 3])])
    case(c, "BroadcastTo", [f32([1, 2, 3]), i32([2, 2])])
    case(c, "Pad", [f32([[1, 2], [3, 4]]), i32([[1, 0], [0, 2]])])
    case(c, "PadV2", [i32([1, 2]), i32([[2, 1]]), i32(9)])
    case(c, "ReverseV2", [x, i32([0, 2])])
    case(c, "ReverseV2", [x, i64([-2])])
    case(c, "Split", [i32(2), x], num_split=2)
    case(c, "Split", [i32(1), x], num_split=2)
    case(c, "SplitV", [x, i64([1, -1]), i32(2)], num_split=2)
    case(c, "SplitV", [x, i32([1, 1, 1]), i32(-2)], num_split=3)
    case(c, "Reshape", [x, i32([4, -1])])
    case(c, "Reshape", [x, i64([5, -1])])
    case(c, "Reshape", [x, i32([2, 2])])
    case(c, "ExpandDims", [x, i32(-1)])
    case(c, "ExpandDims", [x, i32(4)])
    case(c, "Squeeze", [np.zeros((1, 2, 1, 3), np.float32)])
    case(c, "Squeeze", [np.zeros((1, 2, 1, 3), np.float32)], axis=[-2])
    case(c, "Squeeze", [np.zeros((1, 2, 1, 3), np.float32)], axis=[1])
    case(c, "Fill", [i32([2, 3]), f32(1.5)])
    case(c, "Fill", [i64([2]), np.array(b"s")])
    case(c, "Range", [f32(0.1), f32(1.0), f32(0.1)])
    case(c, "Range", [i32(10), i32(-3), i32(-4)])
    case(c, "Range", [np.float64(1.0), np.float64(2.0), np.float64(0.3)])
    case(c, "Range", [i32(1), i32(0), i32(1)])
    case(c, "Shape", [x], out_type=tf.int64)
    case(c, "ShapeN", [[x, f32(1.0)]])
    case(c, "Size", [x])
    case(c, "Rank", [x])
    case(c, "ZerosLike", [i32([[1, 2]])])
    case(c, "OnesLike", [np.array([True, False])])
    case(c, "OnesLike", [f32([[1, 2]])])
    for s0, s1 in [([2, 3], [3]), ([2, 1], [2, 1]), ([1, 1, 3], [3]), ([4, 1], [1, 5]),
                   ([], [2, 2]), ([1], [1]), ([2, 3], [2]), ([5, 1, 3], [1, 4, 1])]:
        case(c, "BroadcastGradientArgs", [i32(s0), i32(s1)])
        case(c, "BroadcastArgs", [i32(s0), i32(s1)])
    case(c, "Where", [np.array([[True, False], [False, True]])])
    case(c, "Where", [f32([0, -0.0, 2, 0.5])])
    case(c, "Unique", [i32([1, 2, 1, 5, 2, 7, 1, 3])])
    case(c, "Unique", [f32([0.0, -0.0, 1.5, 1.5])], out_idx=tf.int64)
    case(c, "Unique", [np.array([b"b", b"a", b"b"])])
    case(c, "UniqueWithCounts", [i64([4, 4, 3, 4, 1])])
    case(c, "OneHot", [i64([0, 2, -1, 5]), i32(3), f32(1.0), f32(0.0)])
    case(c, "OneHot", [i32([[0, 2], [1, 1]]), i32(3), i32(5), i32(-1)], axis=0)
    case(c, "OneHot", [np.array([1, 0], np.uint8), i32(2), f32(1), f32(0)], axis=1)
    case(c, "Cumsum", [f32([[1, 2, 3], [4, 5, 6]]), i32(1)])
    case(c, "Cumsum", [f32([[1, 2, 3], [4, 5, 6]]), i32(0)], exclusive=True, reverse=True)
    case(c, "Cumsum", [i64([1, 2, 3]), i32(0)], exclusive=True)
    case(c, "InvertPermutation", [i32([2, 0, 3, 1])])
    case(c, "InvertPermutation", [i32([2, 0, 2])])
    case(c, "CheckNumerics", [f32([1, np.inf])], message="bad")
    case(c, "CheckNumerics", [f32([1, 2])], message="fine")
    case(c, "Identity", [np.array([[b"p", b"q"]])])
    case(c, "IdentityN", [[f32([1]), i32([2, 3])]])
    case(c, "StopGradient", [f32([1])])
    case(c, "Snapshot", [i32([4])])
    return c


def random_cases():
    c = []
    for op in ["RandomUniform", "RandomStandardNormal", "TruncatedNormal"]:
        case(c, op, [i32([3, 5])], runs=2, seed=1, seed2=2, dtype=tf.float32)
        case(c, op, [i64([7])], seed=87654321, seed2=5, dtype=tf.float64)
    case(c, "RandomUniformInt", [i32([9]), i32(-5), i32(10)], runs=2, seed=3, seed2=4)
    case(c, "RandomUniformInt", [i32([5]), i64(0), i64(1 << 40)], seed=3, seed2=4)
    case(c, "RandomUniformInt", [i32([5]), i32(3), i32(3)], seed=3, seed2=4)
    for op in ["StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal"]:
        case(c, op, [i32([2, 3]), i64([12, 34])])
        case(c, op, [i32([5]), i32([-1, 7])], dtype=tf.float64)
    for op in ["StatelessRandomUniformV2", "StatelessRandomNormalV2",
               "StatelessTruncatedNormalV2"]:
        case(c, op, [i32([4]), np.array([123456789], np.uint64),
                     np.array([5, 0], np.uint64), i32(1)])
        case(c, op, [i32([3]), np.array([1], np.uint64), np.array([0, 0], np.uint64), i32(3)],
             dtype=tf.float64)
    key, counter = np.array([123456789], np.uint64), np.array([5, 0], np.uint64)
    case(c, "StatelessRandomUniformIntV2", [i32([7]), key, counter, i32(1), i32(-5), i32(10)])
    case(c, "StatelessRandomUniformIntV2",
         [i32([2, 2]), key, counter, i32(3), i64(-(1 << 40)), i64(1 << 41)])
    case(c, "StatelessRandomUniformIntV2", [i32([3]), key, counter, i32(1), i32(3), i32(3)])
    case(c, "StatelessRandomGetAlg", [])
    case(c, "StatelessRandomGetKeyCounter", [i64([12, 34])])
    case(c, "StatelessRandomGetKeyCounterAlg", [i32([-3, 5])])
    return c


def string_cases():
    c = []
    case(c, "Assert", [np.array(False), [np.array(b"x must be positive"),
                                           f32([[1.5, 2], [3, 4]]), i32(7),
                                           i32([1, 2, 3, 4, 5, 6, 7])]])
    case(c, "Assert", [np.array(False), [np.array([True, False]), f32([0.1, 1e10, 1 / 3])]],
         summarize=5)
    case(c, "Assert", [np.array(True), [i32([1])]])
    case(c, "StringFormat", [[np.array([b"a", b"b"]), i32([[1, 2], [3, 4]])]],
         template="{} and {}", placeholder="{}")
    case(c, "StringFormat", [[np.arange(10, dtype=np.int32)]], template="v={}",
         placeholder="{}", summarize=2)
    case(c, "StringFormat", [[np.arange(24, dtype=np.int32).reshape(2, 3, 4)]],
         template="{}", placeholder="{}", summarize=1)
    case(c, "StringFormat", [[np.array(b"hi"), f32(3.5), np.array([True, False]),
                              np.float64(0.1)]], template="{} {} {} {}", placeholder="{}")
    case(c, "StringFormat", [[f32([0.1, 1e10, 1 / 3, -2.5e-7])]], template="{}",
         placeholder="{}")
    case(c, "AsString", [f32([1.5, -2.25, 1e10])])
    case(c, "AsString", [f32([1.5, -2.25])], precision=2, width=8)
    case(c, "AsString", [f32([1.5, 0.000125])], shortest=True)
    case(c, "AsString", [np.float64(12345.678)], scientific=True, precision=3)
    case(c, "AsString", [i32([1, -20, 300])], width=5, fill="0")
    case(c, "AsString", [i64([7])], width=4)
    case(c, "AsString", [np.array([True, False])])
    case(c, "AsString", [np.array([b"ab"])], width=4)
    case(c, "StringToNumber", [np.array([b"1.5", b"-2e3", b" 7 "])])
    case(c, "StringToNumber", [np.array([b"12", b"-3"])], out_type=tf.int32)
    case(c, "StringToNumber", [np.array([b"12abc"])], out_type=tf.int64)
    case(c, "StringToNumber", [np.array([b"99999999999"])], out_type=tf.int32)
    case(c, "StringJoin", [[np.array([b"a", b"b"]), np.array(b"-"), np.array([b"c", b"d"])]],
         separator="/")
    case(c, "StringJoin", [[np.array([b"a", b"b"]), np.array([b"c", b"d", b"e"])]])
    return c


def main():
    for name, fn in [("array_cases", array_cases), ("random_cases", random_cases),
                     ("string_cases", string_cases)]:
        with open(os.path.join(HERE, name + ".json"), "w") as f:
            json.dump(fn(), f, indent=None, separators=(",", ":"))
            f.write("\n")


if __name__ == "__main__":
    main()
