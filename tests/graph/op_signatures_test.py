#!/usr/bin/env python3
"""Every op the registry holds has TensorFlow's signature, exactly.

Runs the op_signatures_dump driver (every registered OpDef as JSON) and compares each op with
the OpDef of the installed TensorFlow: argument names, types, type/number/list attrs and ref-ness
in order; attrs in order with their types, defaults, allowed values and minimums; and the
stateful, commutative, aggregate and allows-uninitialized-input flags. Ops TensorFlow does not
know fail too, unless their name starts with '_' and TensorFlow lacks it (internal ops).
Exits 77 (skipped) where TensorFlow is not installed.

usage: op_signatures_test.py --dump path/to/graph_op_signatures_dump [--ops A,B,...]
"""
import argparse
import json
import os
import subprocess
import sys


def load_tf():
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        from tensorflow.python.framework import op_def_registry  # noqa: F401
        from tensorflow.core.framework import types_pb2
        import tensorflow  # noqa: F401  (registers the Python-side ops too)
    except ImportError:
        return None, None
    return op_def_registry, types_pb2


def shape_json(shape):
    return {"unknown_rank": bool(shape.unknown_rank),
            "dims": [] if shape.unknown_rank else [d.size for d in shape.dim]}


def value_json(v, types_pb2):
    kind = v.WhichOneof("value")
    if kind == "s":
        return {"s": v.s.decode("utf-8", "replace")}
    if kind == "i":
        return {"i": v.i}
    if kind == "f":
        return {"f": v.f}
    if kind == "b":
        return {"b": v.b}
    if kind == "type":
        return {"type": types_pb2.DataType.Name(v.type)}
    if kind == "shape":
        return {"shape": shape_json(v.shape)}
    if kind == "list":
        out = {}
        l = v.list
        if l.s:
            out["s"] = [x.decode("utf-8", "replace") for x in l.s]
        if l.i:
            out["i"] = list(l.i)
        if l.f:
            out["f"] = list(l.f)
        if l.b:
            out["b"] = list(l.b)
        if l.type:
            # Types our DataType lacks (float8, int4, ...) cannot be allowed by us.
            out["type"] = [types_pb2.DataType.Name(t) for t in l.type if t <= MAX_DATA_TYPE]
        if l.shape:
            out["shape"] = [shape_json(s) for s in l.shape]
        return {"list": out}
    if kind == "tensor":
        return {"tensor": "<tensor>"}
    if kind == "func":
        return {"func": v.func.name}
    return {"none": True}


def arg_json(a, types_pb2):
    return {"name": a.name,
            "type": "" if a.type == 0 else types_pb2.DataType.Name(a.type),
            "type_attr": a.type_attr, "number_attr": a.number_attr,
            "type_list_attr": a.type_list_attr, "is_ref": a.is_ref}


def tf_op_json(op, types_pb2):
    attrs = []
    for a in op.attr:
        j = {"name": a.name, "type": a.type, "has_minimum": a.has_minimum,
             "minimum": a.minimum if a.has_minimum else 0}
        if a.HasField("default_value"):
            j["default_value"] = value_json(a.default_value, types_pb2)
        if a.HasField("allowed_values"):
            j["allowed_values"] = value_json(a.allowed_values, types_pb2)
        attrs.append(j)
    return {"name": op.name,
            "input_arg": [arg_json(a, types_pb2) for a in op.input_arg],
            "output_arg": [arg_json(a, types_pb2) for a in op.output_arg],
            "attr": attrs,
            "is_stateful": op.is_stateful, "is_commutative": op.is_commutative,
            "is_aggregate": op.is_aggregate,
            "allows_uninitialized_input": op.allows_uninitialized_input}


MAX_DATA_TYPE = 23  # DT_UINT64, the last DataType of compiler/graph/types.h

SIGNATURE_KEYS = ["input_arg", "output_arg", "attr", "is_stateful", "is_commutative",
                  "is_aggregate", "allows_uninitialized_input"]


def normalise_ours(op):
    for a in op["attr"]:
        if not a["has_minimum"]:
            a["minimum"] = 0
        # A tensor default cannot be compared by value across the two dumps.
        if "default_value" in a and "tensor" in a["default_value"]:
            a["default_value"] = {"tensor": "<tensor>"}
    return op


def differences(ours, theirs):
    out = []
    for key in SIGNATURE_KEYS:
        if ours.get(key) != theirs.get(key):
            if key in ("input_arg", "output_arg", "attr"):
                a, b = ours.get(key, []), theirs.get(key, [])
                if len(a) != len(b):
                    out.append(f"{key}: {len(a)} entries, TensorFlow has {len(b)}: "
                               f"ours {[x['name'] for x in a]} vs {[x['name'] for x in b]}")
                for x, y in zip(a, b):
                    if x != y:
                        out.append(f"{key} {x['name']}: ours {json.dumps(x, sort_keys=True)}\n"
                                   f"      TensorFlow {json.dumps(y, sort_keys=True)}")
            else:
                out.append(f"{key}: ours {ours.get(key)}, TensorFlow {theirs.get(key)}")
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--dump", required=True)
    parser.add_argument("--ops", default="", help="only these ops (comma separated)")
    args = parser.parse_args()
    op_def_registry, types_pb2 = load_tf()
    if op_def_registry is None:
        print("SKIPPED: TensorFlow is not installed")
        return 77
    ours = json.loads(subprocess.run([args.dump], check=True, capture_output=True,
                                     text=True).stdout)
    only = set(filter(None, args.ops.split(",")))
    failures, checked = [], 0
    for op in ours:
        name = op["name"]
        if only and name not in only:
            continue
        theirs = op_def_registry.get(name)
        if theirs is None:
            if not name.startswith("_"):
                failures.append(f"{name}: TensorFlow has no op of this name")
            continue
        checked += 1
        diff = differences(normalise_ours(op), tf_op_json(theirs, types_pb2))
        if diff:
            failures.append(f"{name}:\n    " + "\n    ".join(diff))
    print(f"compared {checked} ops with TensorFlow")
    for f in failures:
        print("MISMATCH " + f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
