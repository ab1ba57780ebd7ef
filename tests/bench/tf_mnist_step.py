#!/usr/bin/env python3
"""TensorFlow's own op-by-op step on the graph graph_bench's BM_MnistSoftmaxStep runs.

Imports corpus/tf/mnist_softmax_tf1/nojit/graph.pbtxt into a TF1 Session (no XLA: the session's
global_jit_level is OFF and TF_XLA_FLAGS is cleared), runs `init`, then times the training step
(fetch the loss, run GradientDescent) on batch 0 (x = images_u8[0:100] / 255, y_ = labels[0:100],
as the case's README says), so the ratio to xlens is measured on one machine.

    python3 tests/bench/tf_mnist_step.py [--steps 200] [--shared ../shared]

Prints the median, the quartiles and the first step in milliseconds, as one JSON line too.
Exits 77 (skipped) when tensorflow or the corpus is missing.
"""
import argparse
import json
import os
import statistics
import sys
import time


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shared", default=os.path.join(here, "..", "..", "..", "shared"))
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--threads", type=int, default=0, help="intra/inter op threads (0: TF's default)")
    args = p.parse_args()
    case = os.path.join(args.shared, "corpus", "tf", "mnist_softmax_tf1", "nojit")
    if not os.path.exists(os.path.join(case, "graph.pbtxt")):
        print(f"skipped: no {case}")
        return 77
    os.environ.pop("TF_XLA_FLAGS", None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    try:
        import numpy as np
        import tensorflow as tf
        from google.protobuf import text_format
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    tf.compat.v1.disable_eager_execution()
    graph_def = tf.compat.v1.GraphDef()
    with open(os.path.join(case, "graph.pbtxt")) as f:
        text_format.Parse(f.read(), graph_def)
    images = np.load(os.path.join(case, "inputs", "images_u8.npy"))
    labels = np.load(os.path.join(case, "inputs", "labels.npy"))
    x = (images[:100] / 255.0).astype(np.float32)
    y = labels[:100]
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=args.threads,
                                      inter_op_parallelism_threads=args.threads)
    config.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.OFF
    loss_name = "sparse_softmax_cross_entropy_loss/value:0"
    with tf.compat.v1.Session(graph=graph, config=config) as sess:
        sess.run("init")
        feeds = {"x:0": x, "y_:0": y}
        times, losses = [], []
        for _ in range(args.steps + 1):
            start = time.perf_counter()
            loss, _ = sess.run([loss_name, "GradientDescent"], feeds)
            times.append((time.perf_counter() - start) * 1e3)
            losses.append(float(loss))
    first, rest = times[0], sorted(times[1:])
    q = statistics.quantiles(rest, n=4)
    result = {"tf_version": tf.__version__, "steps": args.steps, "median_ms": statistics.median(rest),
              "q1_ms": q[0], "q3_ms": q[2], "first_ms": first, "loss_first": losses[0],
              "loss_last": losses[-1]}
    print(f"TensorFlow {tf.__version__} op by op, mnist softmax step (batch 100): median "
          f"{result['median_ms']:.3f} ms (quartiles {q[0]:.3f} .. {q[2]:.3f}) over {args.steps} steps; "
          f"first {first:.1f} ms; loss {losses[0]:.6f} -> {losses[-1]:.6f}")
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
