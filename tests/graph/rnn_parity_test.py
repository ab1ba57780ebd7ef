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
import shutil
import os
import subprocess
import sys
import tempfile

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


def cluster_assignment(path):
    """{node: cluster} of a mark_for_compilation.pbtxt dump."""
    import re
    with open(path) as f:
        text = f.read()
    out = {}
    for m in re.finditer(r'node \{\n  name: "([^"]+)"(.*?)\n\}', text, re.S):
        c = re.search(r'key: "_XlaCluster"\n    value \{\n      s: "([^"]+)"', m.group(2))
        if c:
            out[m.group(1)] = c.group(1)
    return out


def check_clustering(args, name, workdir, feed, fetches):
    tf_dir = os.path.join(workdir, name + ".tf_clustering")
    if not os.path.isdir(tf_dir):
        env = tf_driver.tensorflow_env(" ".join(CLUSTER_FLAGS + ["--tf_xla_auto_jit=1"]), tf_dir)
        ran = tf_driver.run_script(__file__, ["--xlens", args.xlens, "--tf-cluster",
                                              os.path.join(workdir, name + ".pb"), feed,
                                              ",".join(fetches),
                                              os.path.join(workdir, name + ".in.npy")],
                                   env=env, capture_output=True, text=True)
        if ran.returncode != 0:
            return [f"TensorFlow's session failed: {ran.stderr[-400:]}"]
    before = os.path.join(tf_dir, "before_mark_for_compilation.pbtxt")
    if not os.path.exists(before):
        return ["TensorFlow wrote no before_mark_for_compilation.pbtxt"]
    ours_dir = tempfile.mkdtemp(prefix=name + "_cluster_", dir=workdir)
    env = dict(os.environ, TF_DUMP_GRAPH_PREFIX=ours_dir)
    proc = subprocess.run([args.xlens, "cluster", before, "--jit-level", "ON_1"] + CLUSTER_FLAGS,
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"xlens cluster: exit {proc.returncode}: {proc.stderr[-400:]}"]
    theirs = cluster_assignment(os.path.join(tf_dir, "mark_for_compilation.pbtxt"))
    ours_path = os.path.join(ours_dir, "mark_for_compilation.pbtxt")
    ours = cluster_assignment(ours_path) if os.path.exists(ours_path) else {}
    errors = []
    for node in sorted(set(theirs) | set(ours)):
        if theirs.get(node) != ours.get(node):
            errors.append(f"node {node}: TensorFlow's cluster {theirs.get(node)}, "
                          f"xlens's {ours.get(node)}")
    if not errors:
        print(f"{name}: {len(theirs)} nodes in {len(set(theirs.values()))} clusters")
    return errors[:10]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--workdir", help="keep (and reuse) TensorFlow's graphs and outputs here")
    parser.add_argument("--only", help="run only the cases whose name contains this")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tf-cluster", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.tf_cluster:
        graph, feed, fetches, x = args.tf_cluster
        tf_cluster(graph, feed, fetches.split(","), x)
        sys.stdout.flush()
        os._exit(0)
    if args.build_only:
        build_graphs(args.workdir)
        sys.stdout.flush()
        # TensorFlow's function objects complain while the interpreter tears them down.
        os._exit(0)

    workdir = os.path.abspath(args.workdir or tempfile.mkdtemp(prefix="xlens_rnn_"))
    try:
        return run_cases(args, workdir)
    finally:
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


def run_cases(args, workdir):
    os.makedirs(workdir, exist_ok=True)
    # TensorFlow builds the graphs in a process of its own, which ends without tearing down.
    cases = tf_driver.built_cases(__file__, args.xlens, workdir)
    if isinstance(cases, int):
        return cases
    import numpy as np
    failures = []
    runs = 0
    for name in cases:
        if args.only and args.only not in name:
            continue
        with open(os.path.join(workdir, name + ".meta")) as f:
            feed, fetches, compile_ok = f.read().split("\n")
        fetches = fetches.split(",")
        modes = ["off", "auto"] + (["compile"] if compile_ok != "nocompile" else [])
        for mode in modes:
            out_dir = tempfile.mkdtemp(prefix=f"{name}_{mode}_", dir=workdir)
            proc = tf_driver.graph_run(args.xlens, os.path.join(workdir, name + ".pb"),
                                       [(feed, os.path.join(workdir, name + ".in.npy"))], fetches,
                                       out_dir, ["--jit", mode, "--timeout", "60"], timeout=None)
            runs += 1
            if mode == "compile" and name in KNOWN_GAPS:
                if proc.returncode == 0:
                    failures.append(f"{name} --jit=compile: compiles now; take it out of "
                                    "KNOWN_GAPS")
                elif not tf_driver.refused_in_one_line(proc):
                    failures.append(f"{name} --jit=compile: exit {proc.returncode}: "
                                    f"{proc.stderr[-300:]}")
                print(f"{name} --jit=compile: refused (known gap: {KNOWN_GAPS[name]})")
                continue
            if mode == "compile" and compile_ok == "refused":
                # TensorFlow refuses to compile it: so must xlens, in one line of its own.
                if not tf_driver.refused_in_one_line(proc):
                    failures.append(f"{name} --jit=compile: TensorFlow refuses to compile it, "
                                    f"xlens gave exit {proc.returncode}: {proc.stderr[-300:]}")
                print(f"{name} --jit=compile: refused as by TensorFlow")
                continue
            if proc.returncode != 0:
                failures.append(f"{name} --jit={mode}: exit {proc.returncode}: "
                                f"{(proc.stderr or proc.stdout).strip()[-600:]}")
                continue
            for e in tf_driver.compare_to_references(np, name, workdir, out_dir, len(fetches),
                                                     TOLERANCE):
                failures.append(f"{name} --jit={mode}: {e}")
            print(f"{name} --jit={mode}: " + ("ok" if not failures or
                                               not failures[-1].startswith(f"{name} --jit={mode}")
                                               else "FAILED"))
        if name in CLUSTER_CASES:
            errors = check_clustering(args, name, workdir, feed, fetches)
            runs += 1
            failures += [f"{name} clustering: {e}" for e in errors]
            print(f"{name} clustering: " + ("TensorFlow's, node for node" if not errors
                                             else "FAILED"))
    return tf_driver.finish(failures, f"{runs} runs, {len(failures)} failures")


if __name__ == "__main__":
    sys.exit(main())
