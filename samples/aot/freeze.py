#!/usr/bin/env python3
"""Trains a classifier graph the samples wrote (samples/graphs/mnist_softmax or mlp_training) with
`xlens graph run --jit=compile` on Fashion-MNIST training images, then freezes it for `xlens aot`:
every read of a variable the logits use becomes a Const holding the trained value, as TensorFlow's
freeze_graph does, so the weights end up in the object's read-only data and the config lists no
variable.

  freeze.py --xlens XLENS --model softmax|mlp --data DIR --out DIR [--train N] [--steps S]

DIR (--data) holds the IDX files, plain or .gz. Writes OUT/frozen.pbtxt, OUT/config.pbtxt (a
tfcompile config for a batch of --batch images), and the test set uncompressed for the C++ program,
which reads no .gz: OUT/t10k-images-idx3-ubyte, OUT/t10k-labels-idx1-ubyte. Training is full-batch
gradient descent on the first --train images (the sample's own train op and learning rate), --steps times."""
import argparse
import gzip
import os
import re
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

# graph directory, the logits' node, the reads the logits use -> the variable each reads.
MODELS = {
    "softmax": ("mnist_softmax", "add", {"MatMul/ReadVariableOp": "w", "add/ReadVariableOp": "b"}),
    "mlp": ("mlp_training", "dense_1/BiasAdd_1",
            {"dense/MatMul/ReadVariableOp": "dense/kernel", "dense/BiasAdd/ReadVariableOp": "dense/bias",
             "dense_1/MatMul/ReadVariableOp": "dense_1/kernel",
             "dense_1/BiasAdd/ReadVariableOp": "dense_1/bias"}),
}


def read_idx_bytes(data, name):
    for path in (os.path.join(data, name), os.path.join(data, name + ".gz")):
        if os.path.exists(path):
            with (gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")) as f:
                return f.read()
    sys.exit("freeze.py: no %s (or .gz) in %s" % (name, data))


def idx_array(raw):
    dims = raw[3]
    shape = tuple(int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(dims))
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * dims).reshape(shape)


def split_nodes(text):
    """The top-level `node { ... }` blocks of a GraphDef in text form, and what follows them."""
    blocks, i = [], 0
    while True:
        m = re.compile(r"^node \{\n", re.M).search(text, i)
        if not m:
            return blocks, text[i:]
        depth, j = 0, m.start()
        while True:
            c = text[j]
            if c == '"':  # skip a string, with its escapes
                j += 1
                while text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
            elif c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        blocks.append(text[m.start():j + 1])
        i = j + 1


def const_node(name, value):
    content = "".join("\\%03o" % b for b in value.astype("<f4").tobytes())
    dims = " ".join("dim { size: %d }" % d for d in value.shape)
    return ('node {\n  name: "%s"\n  op: "Const"\n  attr { key: "dtype" value { type: DT_FLOAT } }\n'
            '  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { %s } '
            'tensor_content: "%s" } } }\n}' % (name, dims, content))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--xlens", required=True)
    p.add_argument("--model", choices=sorted(MODELS), required=True)
    p.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    p.add_argument("--out", required=True)
    p.add_argument("--train", type=int, default=10000)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--batch", type=int, default=100)
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    graph_dir, logits, reads = MODELS[args.model]
    graph = os.path.join(ROOT, "samples", "graphs", graph_dir, "graph.pbtxt")

    images = idx_array(read_idx_bytes(args.data, "train-images-idx3-ubyte"))[:args.train]
    labels = idx_array(read_idx_bytes(args.data, "train-labels-idx1-ubyte"))[:args.train]
    x = os.path.join(args.out, "train_x.npy")
    y = os.path.join(args.out, "train_y.npy")
    np.save(x, images.reshape(len(images), 784).astype(np.float32) / 255.0)
    np.save(y, labels.astype(np.int64))
    for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
        with open(os.path.join(args.out, name), "wb") as f:
            f.write(read_idx_bytes(args.data, name))

    # The sample's train op, full batch, its variables fetched after the last step.
    trained = os.path.join(args.out, "trained")
    cmd = [args.xlens, "graph", "run", graph, "--jit=compile", "--init", "init", "--target",
           "GradientDescent", "--feed", "x=" + x, "--feed", "y_=" + y, "--steps", str(args.steps),
           "--outputs", trained]
    for read in reads:
        cmd += ["--fetch", read]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)

    text = open(graph).read()
    blocks, tail = split_nodes(text)
    out = []
    for block in blocks:
        name = re.search(r'^  name: "([^"]*)"', block, re.M).group(1)
        if name in reads:
            index = list(reads).index(name)
            block = const_node(name, np.load(os.path.join(trained, "out%d.npy" % index)))
        out.append(block)
    with open(os.path.join(args.out, "frozen.pbtxt"), "w") as f:
        f.write("\n".join(out) + "\n" + tail)
    with open(os.path.join(args.out, "config.pbtxt"), "w") as f:
        f.write('# The %s classifier, frozen: a batch of images to its logits; the weights are constants.\n'
                'feed {\n  id { node_name: "x" }\n  shape { dim { size: %d } dim { size: 784 } }\n'
                '  name: "images"\n}\nfetch {\n  id { node_name: "%s" }\n  name: "logits"\n}\n'
                % (args.model, args.batch, logits))
    print("wrote %s/frozen.pbtxt and config.pbtxt (%d steps on %d images)" % (args.out, args.steps, args.train))


if __name__ == "__main__":
    main()
