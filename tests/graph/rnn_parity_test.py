#!/usr/bin/env python3
"""TensorList and TensorArray graphs run in xlens with TensorFlow's numbers, op by op and compiled.

TensorFlow 2.21 builds the graphs here: a Keras LSTM stack and a GRU + SimpleRNN stack frozen
with their functional While loops kept (TensorListFromTensor/GetItem/SetItem/Stack as loop
variables) and frozen with the loops lowered to Enter/Merge/Switch/NextIteration (what
convert_variables_to_constants_v2 writes by default); a tf.compat.v1 while_loop over TensorArrays
(control flow v1, with its gradient: TensorArrayGradV3); and a loop whose trip count is computed
from the input, so a wrong trip count gives a wrong answer, not only a crash. Each graph runs with
`xlens graph run` op by op, with --jit=auto and, where TensorFlow's jit_compile compiles it
(both forms: the lowered loops are functionalized again), with --jit=compile; every output must
be within 1e-4 of the largest reference value.
`xlens cluster` on TensorFlow's own before_mark_for_compilation graphs of the lowered LSTM and of
the TensorArray loop must give TensorFlow's clusters node for node.

Exits 77 (skipped) when tensorflow cannot be imported.

usage: rnn_parity_test.py --xlens path/to/xlens [--workdir DIR] [--only NAME]
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-4

# What TensorFlow compiles and xlens does not yet: such a --jit=compile run must be refused with
# one line of xlens's own (never a crash or a wrong answer), and is reported as a gap.
KNOWN_GAPS = {}


def build_graphs(out_dir):
    """Writes NAME.pb, NAME.in.npy, NAME.ref<k>.npy and NAME.meta for every case; returns cases."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)

    cases = []
    rng = np.random.RandomState(7)

    def save(name, graph_def, feed, fetches, refs, x, compile_ok):
        tf_driver.save_case(np, out_dir, name, graph_def, x, refs,
                            [feed, ",".join(fetches), compile_ok])
        cases.append(name)

    def freeze(fn, spec, x, name):
        concrete = fn.get_concrete_function(spec)
        ref = concrete(tf.constant(x))
        refs = [t.numpy() for t in tf.nest.flatten(ref)]
        # Compiled where TensorFlow's jit_compile compiles it (a list whose size is computed is
        # not), to its numbers too; refused where TensorFlow refuses.
        try:
            jitted = tf.function(fn.python_function, jit_compile=True)(tf.constant(x))
            jit_refs = [t.numpy() for t in tf.nest.flatten(jitted)]
            for a, b in zip(refs, jit_refs):
                assert np.allclose(a, b, atol=1e-4), "TensorFlow's jit_compile disagrees"
            compiles = True
        except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError):
            compiles = False
        for lowered in (False, True):
            frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lowered)
            gd = frozen.graph.as_graph_def()
            feed = frozen.inputs[0].name.split(":")[0]
            fetches = [t.name.replace(":0", "") for t in frozen.outputs]
            save(name + ("_lowered" if lowered else "_functional"), gd, feed, fetches, refs, x,
                 compile_ok="compile" if compiles else "refused")

    import keras
    L = keras.layers
    keras.utils.set_random_seed(3)
    x = rng.randn(2, 9, 5).astype(np.float32)
    lstm = keras.Sequential([keras.Input((9, 5)), L.LSTM(12, return_sequences=True), L.LSTM(6)])
    freeze(tf.function(lambda t: lstm(t, training=False)), tf.TensorSpec(x.shape, tf.float32), x,
           "lstm")
    # The gradient of a recurrence with respect to its input: TensorFlow's While gradient, the
    # forward loop's values kept in EmptyTensorList accumulators (PushBack in the forward loop,
    # PopBack in the backward one), the lists' own gradients (Stack <-> FromTensor,
    # GetItem <-> SetItem). Compiled, the accumulators' element shapes come from a first
    # compilation of the forward body, and the backward loop's TensorListReserve takes its size
    # and element shape from accumulators of constants, as TensorFlow's jit_compile does.
    w = tf.constant(rng.randn(5, 6).astype(np.float32) * 0.4)
    u = tf.constant(rng.randn(6, 6).astype(np.float32) * 0.4)

    @tf.function
    def rnn_grad(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            inputs = tf.TensorArray(tf.float32, size=9).unstack(t)
            outputs = tf.TensorArray(tf.float32, size=9)

            def body(i, h, out):
                h = tf.tanh(tf.matmul(inputs.read(i), w) + tf.matmul(h, u))
                return i + 1, h, out.write(i, h)

            _, h, out = tf.while_loop(lambda i, h, out: i < 9, body,
                                      (tf.constant(0), tf.zeros([2, 6]), outputs),
                                      maximum_iterations=9)
            loss = tf.reduce_sum(tf.square(out.stack())) + tf.reduce_sum(h)
        return tape.gradient(loss, t), loss

    xt = rng.randn(9, 2, 5).astype(np.float32)
    freeze(rnn_grad, tf.TensorSpec(xt.shape, tf.float32), xt, "rnn_input_grad")
    # The gradient of a loop inside a loop (each with maximum_iterations, so TensorFlow compiles
    # it): the inner loop's While gradient is built inside the outer one's backward body. And the
    # gradient of a loop whose trip count comes from the data alone, which TensorFlow refuses to
    # compile (its accumulators have no size).
    @tf.function
    def nested_grad(t):
        with tf.GradientTape() as tape:
            tape.watch(t)

            def outer(i, h):
                _, h = tf.while_loop(lambda j, h: j < 2,
                                     lambda j, h: (j + 1, tf.tanh(h @ u + t[i] @ w)), (0, h),
                                     maximum_iterations=2)
                return i + 1, h

            _, h = tf.while_loop(lambda i, h: i < 3, outer, (0, tf.zeros([2, 6])),
                                 maximum_iterations=3)
            loss = tf.reduce_sum(h * h)
        return tape.gradient(loss, t), loss

    freeze(nested_grad, tf.TensorSpec(xt.shape, tf.float32), xt, "nested_loop_grad")

    @tf.function
    def data_trip_grad(t):
        with tf.GradientTape() as tape:
            tape.watch(t)
            (v,) = tf.while_loop(lambda v: tf.reduce_sum(tf.abs(v)) < 20.0,
                                 lambda v: (v * 1.3 + tf.tanh(v @ u),), (t[0] @ w,))
            loss = tf.reduce_sum(v * v)
        return tape.gradient(loss, t), loss

    freeze(data_trip_grad, tf.TensorSpec(xt.shape, tf.float32), xt, "data_trip_count_grad")
    gru = keras.Sequential([keras.Input((9, 5)), L.GRU(10, return_sequences=True),
                            L.SimpleRNN(7, return_sequences=True)])
    freeze(tf.function(lambda t: gru(t, training=False)), tf.TensorSpec(x.shape, tf.float32), x,
           "gru_simplernn")

    # Loops whose trip count comes from the data, writing one row per iteration to a list: into
    # a list of fixed size (TensorFlow compiles it), and into one of the computed size (it does
    # not: XLA's buffers have static sizes).
    def counted(size_from_data):
        @tf.function
        def fn(t):
            n = tf.cast(tf.reduce_sum(tf.abs(t)) * 3.0, tf.int32) % 5 + 2
            ta = tf.TensorArray(tf.float32, size=n if size_from_data else 8, element_shape=[3])

            def body(i, acc, ta):
                acc = tf.tanh(acc * 0.9 + tf.gather(t, i % 4))
                return i + 1, acc, ta.write(i, acc * tf.cast(i + 1, tf.float32))

            _, acc, ta = tf.while_loop(lambda i, acc, ta: i < n, body,
                                       (tf.constant(0), tf.zeros([3]), ta))
            return ta.stack(), acc, n
        return fn

    xc = rng.rand(4, 3).astype(np.float32)
    freeze(counted(False), tf.TensorSpec(xc.shape, tf.float32), xc, "counted_loop")
    freeze(counted(True), tf.TensorSpec(xc.shape, tf.float32), xc, "counted_loop_sized")

    # tf.compat.v1: TensorArrays in a v1 while_loop, and their gradient.
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.disable_control_flow_v2()
        try:
            xv = tf.compat.v1.placeholder(tf.float32, [6, 4], name="x")
            inputs = tf.TensorArray(tf.float32, size=6).unstack(xv)
            outputs = tf.TensorArray(tf.float32, size=6)

            def body(i, h, out):
                h = tf.tanh(inputs.read(i) + 0.5 * h)
                return i + 1, h, out.write(i, h * h)

            _, h, out = tf.compat.v1.while_loop(lambda i, h, out: i < 6, body,
                                                (tf.constant(0), tf.zeros([4]), outputs))
            stacked = tf.identity(out.stack(), name="stacked")
            grad = tf.identity(tf.gradients(tf.reduce_sum(stacked * stacked), xv)[0], name="grad")
            xt = rng.randn(6, 4).astype(np.float32)
            with tf.compat.v1.Session(graph=g) as sess:
                refs = sess.run([stacked, grad], {xv: xt})
        finally:
            tf.compat.v1.enable_control_flow_v2()
    save("tensor_array_v1", g.as_graph_def(), "x", ["stacked", "grad"], refs, xt,
         compile_ok="nocompile")
    return cases


# Graphs whose auto-clustering must be TensorFlow's, node for node: TensorFlow clusters them in a
# session (ON_1, --tf_xla_cpu_global_jit) and dumps its graphs; `xlens cluster` on TensorFlow's
# before_mark_for_compilation graph must put every node in the cluster TensorFlow put it in
# (lists are DT_VARIANT producers/consumers, TensorArrays and stacks TensorArray/Stack ops, which
# TensorFlow's CPU device leaves out).
CLUSTER_CASES = ["lstm_lowered", "tensor_array_v1"]
CLUSTER_FLAGS = ["--tf_xla_clustering_debug", "--tf_xla_cpu_global_jit"]


def tf_cluster(graph, feed, fetches, x):
    """Runs in its own process with TF_DUMP_GRAPH_PREFIX and TF_XLA_FLAGS set by the caller."""
    import numpy as np
    import tensorflow as tf
    gd = tf.compat.v1.GraphDef()
    with open(graph, "rb") as f:
        gd.ParseFromString(f.read())
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    config = tf.compat.v1.ConfigProto()
    config.graph_options.optimizer_options.global_jit_level = tf.compat.v1.OptimizerOptions.ON_1
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        sess.run([f + ":0" for f in fetches], {feed + ":0": np.load(x)})


def check_clustering(args, name, workdir, feed, fetches):
    """TensorFlow clusters the case in a session of a process of its own (once; the dumps are kept
    in WORKDIR/NAME.tf_clustering), and xlens must give its clusters, by name: compare_clusters."""
    tf_dir = os.path.join(workdir, name + ".tf_clustering")
    if not os.path.isdir(tf_dir):
        env = tf_driver.tensorflow_env(" ".join(CLUSTER_FLAGS + ["--tf_xla_auto_jit=1"]), tf_dir)
        ran = tf_driver.run_script(__file__, ["--xlens", args.xlens, "--tf-cluster",
                                              os.path.join(workdir, name + ".pb"), feed,
                                              ",".join(fetches),
                                              os.path.join(workdir, name + ".in.npy")],
                                   env=env, capture_output=True, text=True)
        if ran.returncode != 0:
            return [f"TensorFlow's session failed: {ran.stderr[-400:]}"], 0, 0
    return tf_driver.compare_clusters(args.xlens, name, workdir, tf_dir, CLUSTER_FLAGS,
                                      same_names=True)


def main():
    parser = tf_driver.parity_parser()
    parser.add_argument("--tf-cluster", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf_cluster:
        graph, feed, fetches, x = args.tf_cluster
        tf_cluster(graph, feed, fetches.split(","), x)
        sys.stdout.flush()
        os._exit(0)

    def check_clusters(workdir, name):
        if name not in CLUSTER_CASES:
            return None
        feed, fetches, _ = tf_driver.case_meta(workdir, name)
        return check_clustering(args, name, workdir, feed, fetches)

    return tf_driver.parity_main(__file__, args, build_graphs, "xlens_rnn_", TOLERANCE,
                                 check_clusters, KNOWN_GAPS)


if __name__ == "__main__":
    sys.exit(main())
