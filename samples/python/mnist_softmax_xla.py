#!/usr/bin/env python3
"""mnist_softmax_xla: TensorFlow's "Using JIT Compilation" tutorial script, run by TensorFlow's
session or by xlens's, the two one line apart (look for `xlens.Session`).

A TF1 graph: softmax regression y = x W + b (W [784, 10] and b [10] from zeros) trained with
sparse_softmax_cross_entropy and GradientDescentOptimizer(0.5) on batches of 100, the session's
global_jit_level ON_1 (--xla=''  turns it off), session.run in a loop. The images are
Fashion-MNIST's (Debian's dataset-fashion-mnist, /usr/share/datasets/fashion-mnist), as the C++
sample samples/mnist_softmax.cc reads them; --tiny trains on generated images instead.

    python3 samples/python/mnist_softmax_xla.py --session=xlens
    python3 samples/python/mnist_softmax_xla.py --session=both --trace /tmp/timelines

--trace DIR writes each session's timeline of the last step (TensorFlow's through RunMetadata, as
the tutorial does: DIR/tensorflow.ctf.json; xlens's through Session(trace=): DIR/xlens.trace.json)
and prints how many kernels each ran in that step (TensorFlow's graph optimizer folds constants
and fuses MatMul with its bias before running; xlens runs the graph as written, so op by op it
runs more of them). As in TensorFlow, ON_1 compiles on the CPU only with cpu_global_jit
(--cpu-global-jit, or TF_XLA_FLAGS=--tf_xla_cpu_global_jit): then a cluster's launch holds the
step's few fused kernels.
"""

import argparse
import gzip
import json
import os
import struct
import sys
import time

import numpy as np

DATA_DIR = "/usr/share/datasets/fashion-mnist"


def read_idx(path, limit=None):
    """An IDX file (plain or .gz) as a uint8 array, its first `limit` items at most."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        magic = struct.unpack(">I", f.read(4))[0]
        if magic >> 8 != 0x08:
            raise ValueError(f"{path}: not an IDX file of unsigned bytes")
        dims = list(struct.unpack(f">{magic & 0xFF}I", f.read(4 * (magic & 0xFF))))
        if limit is not None:
            dims[0] = min(dims[0], limit)
        data = f.read(int(np.prod(dims)))
    return np.frombuffer(data, np.uint8).reshape(dims)


def find(data_dir, name):
    for candidate in (name, name + ".gz"):
        path = os.path.join(data_dir, candidate)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(f"{data_dir}: no {name}[.gz]: install Debian's dataset-fashion-mnist "
                            f"(apt-get install dataset-fashion-mnist), give --data DIR, or --tiny")


def load_data(data_dir=DATA_DIR, tiny=False, train_limit=None):
    """((train images, labels), (test images, labels)): images float32 [n, 784] of pixels / 255,
    labels int64 [n], as the tutorial's input_data gives them."""
    if tiny:
        rng = np.random.RandomState(0)
        labels = rng.randint(0, 10, 2000).astype(np.int64)
        images = rng.rand(2000, 784).astype(np.float32) * 0.5
        images[np.arange(2000), labels * 78] += 1.0  # a learnable mark per class
        return (images[:1500], labels[:1500]), (images[1500:], labels[1500:])

    def pair(prefix, limit):
        images = read_idx(find(data_dir, f"{prefix}-images-idx3-ubyte"), limit)
        labels = read_idx(find(data_dir, f"{prefix}-labels-idx1-ubyte"), limit)
        return (images.reshape(len(images), -1).astype(np.float32) / 255.0,
                labels.astype(np.int64))
    return pair("train", train_limit), pair("t10k", None)


def build_graph(tf, learning_rate=0.5):
    """The tutorial's graph, in a graph of its own: its tensors and ops by role."""
    v1 = tf.compat.v1
    graph = tf.Graph()
    with graph.as_default():
        x = v1.placeholder(tf.float32, [None, 784], name="x")
        w = tf.Variable(tf.zeros([784, 10]), name="w")
        b = tf.Variable(tf.zeros([10]), name="b")
        y = tf.matmul(x, w) + b
        y_ = v1.placeholder(tf.int64, [None], name="y_")
        cross_entropy = v1.losses.sparse_softmax_cross_entropy(labels=y_, logits=y)
        train_step = v1.train.GradientDescentOptimizer(learning_rate).minimize(cross_entropy)
        correct_prediction = tf.equal(tf.argmax(y, 1), y_)
        accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
        init = v1.global_variables_initializer()
    return dict(graph=graph, x=x, y_=y_, w=w, b=b, loss=cross_entropy, train_step=train_step,
                accuracy=accuracy, init=init)


def make_config(tf, xla=True, cpu_global_jit=False):
    config = tf.compat.v1.ConfigProto()
    jit_level = 0
    if xla:
        jit_level = tf.compat.v1.OptimizerOptions.ON_1
    config.graph_options.optimizer_options.global_jit_level = jit_level
    config.graph_options.optimizer_options.cpu_global_jit = cpu_global_jit
    return config


def batches(images, labels, batch_size=100):
    """The tutorial's next_batch, in order (no shuffling, so both sessions see the same)."""
    first = 0
    while True:
        index = np.arange(first, first + batch_size) % len(images)
        yield images[index], labels[index]
        first = (first + batch_size) % len(images)


def kernel_count_tensorflow(step_stats):
    """Kernels of TensorFlow's traced step: the node stats of every device (its _SOURCE left
    out)."""
    return sum(1 for device in step_stats.dev_stats for node in device.node_stats
               if node.node_name != "_SOURCE")


XLENS_KERNEL_CATEGORIES = ("tf_op", "cpu_kernel", "library_call", "kernel")


def kernel_count_xlens(trace_path):
    """Kernels of xlens's traced step: the ops run op by op (tf_op) and the compiled kernels
    (cpu_kernel, library_call) inside the span of the run that asked for FULL_TRACE."""
    with open(trace_path) as f:
        events = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    runs = [e for e in events if e.get("cat") == "session" and e.get("name") == "Session.run"
            and e.get("args", {}).get("full_trace")]
    if not runs:
        return 0
    run = runs[-1]
    return sum(1 for e in events if e.get("cat") in XLENS_KERNEL_CATEGORIES
               and run["ts"] <= e["ts"] <= run["ts"] + run.get("dur", 0))


def train(tf, session_kind, images, labels, steps, config, trace_dir=None, log_every=100,
          initial_values=None, test=None, learning_rate=0.5):
    """Trains the tutorial's model `steps` steps with `session_kind`'s session; returns the
    losses of every step and the final variables."""
    g = build_graph(tf, learning_rate)
    x, y_ = g["x"], g["y_"]
    trace_path = os.path.join(trace_dir, "xlens.trace.json") if trace_dir else None
    with g["graph"].as_default():
        if session_kind == "xlens":
            import xlens
            sess = xlens.Session(config=config, trace=trace_path)
        else:
            sess = tf.compat.v1.Session(config=config)
        run_metadata = tf.compat.v1.RunMetadata()
        g["init"].run(session=sess)
        if initial_values is not None:
            g["w"].load(initial_values[0], sess)
            g["b"].load(initial_values[1], sess)
        losses = []
        feed = batches(images, labels)
        start = time.perf_counter()
        for i in range(steps):
            batch_xs, batch_ys = next(feed)
            if trace_dir and i == steps - 1:
                # The last step's timeline, as the tutorial writes it.
                options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
                _, loss = sess.run([g["train_step"], g["loss"]],
                                   feed_dict={x: batch_xs, y_: batch_ys},
                                   options=options, run_metadata=run_metadata)
            else:
                _, loss = sess.run([g["train_step"], g["loss"]],
                                   feed_dict={x: batch_xs, y_: batch_ys})
            losses.append(float(loss))
            if log_every and (i + 1) % log_every == 0:
                print(f"{session_kind}: step {i + 1}: loss {loss:.6f}")
        seconds = time.perf_counter() - start
        accuracy = None
        if test is not None:
            accuracy = sess.run(g["accuracy"], feed_dict={x: test[0], y_: test[1]})
        w, b = sess.run([g["w"], g["b"]])
        sess.close()
    kernels = None
    if trace_dir and session_kind == "xlens":
        kernels = kernel_count_xlens(trace_path)
    elif trace_dir:
        from tensorflow.python.client import timeline
        path = os.path.join(trace_dir, "tensorflow.ctf.json")
        with open(path, "w") as f:
            f.write(timeline.Timeline(step_stats=run_metadata.step_stats)
                    .generate_chrome_trace_format())
        kernels = kernel_count_tensorflow(run_metadata.step_stats)
    return dict(losses=losses, w=w, b=b, accuracy=accuracy, seconds=seconds, kernels=kernels)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", choices=("tensorflow", "xlens", "both"), default="xlens")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--xla", default="1", help="'' turns the JIT off (global_jit_level 0)")
    parser.add_argument("--cpu-global-jit", action="store_true",
                        help="config's cpu_global_jit: ON_1 clusters on the CPU too")
    parser.add_argument("--learning-rate", type=float, default=0.5,
                        help="the optimizer's (the tutorial's 0.5 makes training chaotic here)")
    parser.add_argument("--data", default=DATA_DIR, help="Fashion-MNIST's IDX files")
    parser.add_argument("--tiny", action="store_true", help="generated images, no data set")
    parser.add_argument("--trace", metavar="DIR", help="write the last step's timelines here")
    args = parser.parse_args(argv)
    if args.steps < 1:
        parser.error("--steps: expected at least 1")
    try:
        train_set, test_set = load_data(args.data, args.tiny)
    except (OSError, ValueError) as e:
        print(f"mnist_softmax_xla: {e}", file=sys.stderr)
        return 1
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    if args.trace:
        os.makedirs(args.trace, exist_ok=True)
    config = make_config(tf, xla=bool(args.xla), cpu_global_jit=args.cpu_global_jit)
    kinds = ("tensorflow", "xlens") if args.session == "both" else (args.session,)
    results = {}
    for kind in kinds:
        r = train(tf, kind, train_set[0], train_set[1], args.steps, config, args.trace,
                  test=test_set, learning_rate=args.learning_rate)
        results[kind] = r
        print(f"{kind}: accuracy {r['accuracy']:.4f} on {len(test_set[1])} test images, "
              f"{1e3 * r['seconds'] / args.steps:.3f} ms per step")
        if r["kernels"] is not None:
            print(f"{kind}: {r['kernels']} kernels in the last step's timeline")
    if len(results) == 2:
        # The tutorial's learning rate (0.5) makes training chaotic on these images: a rounding
        # difference grows step by step (TensorFlow against itself, its initial weights moved by
        # 1e-7, differs by 5e-5 at step 10 and entirely by step 50), so the curves agree closely
        # at first, then part. At --learning-rate 0.05 they agree over the whole run.
        a = np.array(results["tensorflow"]["losses"])
        b = np.array(results["xlens"]["losses"])
        diff = np.abs(a - b) / np.maximum(np.abs(a), 1e-30)
        print(f"losses: largest relative difference {float(np.max(diff[:10])):.3g} over the "
              f"first {min(10, len(diff))} steps, {float(np.max(diff)):.3g} over all {len(diff)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
