"""Records TensorFlow's own static shape inference for every graph of the TF corpus.

For each graph.pbtxt and tf_dump/before_mark_for_compilation*.pbtxt under the corpus, imports
the GraphDef into a fresh tf.Graph (TensorFlow's C++ shape refiner runs on import) and writes
every node's output shapes as TensorFlow knows them: null for an unknown rank, -1 for an unknown
dimension. The C++ test (graph_shapes_test.cc) checks that xlens infers the same.

Usage: python3 generate.py CORPUS_DIR > shapes.json
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402
from google.protobuf import text_format  # noqa: E402


def shapes_of(path):
    graph_def = tf.compat.v1.GraphDef()
    with open(path) as f:
        text_format.Parse(f.read(), graph_def)
    # TensorFlow's importer refuses names that start with '_' (the _arg_/_retval_ nodes of its
    # own dumps): import them under a prefixed name and report the original.
    renamed = {}
    for node in graph_def.node:
        if node.name.startswith("_"):
            renamed["xlens" + node.name] = node.name
            node.name = "xlens" + node.name
    original = {v: k for k, v in renamed.items()}
    for node in graph_def.node:
        for i, inp in enumerate(node.input):
            ctrl = inp.startswith("^")
            base = inp[1:] if ctrl else inp
            name, sep, idx = base.partition(":")
            if name in original:
                node.input[i] = ("^" if ctrl else "") + original[name] + sep + idx
    graph = tf.Graph()
    with graph.as_default():
        tf.graph_util.import_graph_def(graph_def, name="")
    out = {}
    for op in graph.get_operations():
        shapes = []
        for t in op.outputs:
            if t.shape.rank is None:
                shapes.append(None)
            else:
                shapes.append([-1 if d is None else d for d in t.shape.as_list()])
        out[renamed.get(op.name, op.name)] = shapes
    return out


def main():
    corpus = sys.argv[1]
    result = {}
    for root, _, files in sorted(os.walk(corpus)):
        for name in sorted(files):
            rel = os.path.relpath(os.path.join(root, name), corpus)
            base = os.path.basename(root)
            if not name.endswith(".pbtxt"):
                continue
            if not (name.startswith("graph") or
                    (base == "tf_dump" and name.startswith("before_mark_for_compilation"))):
                continue
            try:
                result[rel] = shapes_of(os.path.join(root, name))
            except Exception as e:  # a graph TensorFlow itself cannot import is reported
                result[rel] = {"__error__": str(e).splitlines()[0]}
    json.dump(result, sys.stdout, indent=0, sort_keys=True)


if __name__ == "__main__":
    main()
