#!/usr/bin/env python3
"""TensorArrays and stacks of TensorFlow 1 graphs run in xlens with TensorFlow's numbers, op by
op, auto-clustered and compiled, and cluster as TensorFlow clusters them.

TensorFlow 2.21 builds every graph in one process (its start-up is most of the test's time):
tf.compat.v1.nn.dynamic_rnn over an LSTM and a GRU cell (a TensorArray scattered from the input,
one written per step, read back by a gather, in a while_loop), a tf.TensorArray in a while_loop
whose trip count is computed from the data (read, write, gather at computed indices, scatter,
split, concat, size), and tf.gradients through dynamic_rnn; each under the v1 control flow
(Enter/Merge/Switch loops, TensorArrayV3 and its gradient arrays, the gradient's StackV2
accumulators) and under the default v2 control flow (a functional While, TensorLists). The
cells are written here with constant weights, so no graph needs freezing.

Each graph runs with `xlens graph run` op by op, with --jit=auto and --jit=compile; every output
must be within 1e-4 of the largest reference value. A graph TensorFlow's XLA refuses to compile
(the v1 gradient's stacks have no size bound: tf2xla asks for maximum_iterations) must be
refused by --jit=compile in one line of xlens's own; the same gradients built in an XLA
control-flow context (stacks bounded by the loop's maximum_iterations) must compile. `xlens cluster` on TensorFlow's own
before_mark_for_compilation graph of each must put every node in TensorFlow's cluster.

Exits 77 (skipped) when tensorflow cannot be imported.

usage: tensor_array_parity_test.py --xlens path/to/xlens [--workdir DIR] [--only NAME]
"""
import os
import re
import shutil
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-4
# TensorFlow's clustering flags, read once when its process starts: the build process clusters
# every graph in a session of its own and keeps the dumps per graph.
CLUSTER_FLAGS = ["--tf_xla_clustering_debug", "--tf_xla_cpu_global_jit"]
DUMPS = ("before_mark_for_compilation", "mark_for_compilation")


def make_cells(tf, np, rng, units, features):
    """The classes of an LSTM and a GRU cell as dynamic_rnn takes them (output_size, state_size,
    zero_state, call): an instance made in a graph holds the same weights as constants of it."""
    weights = {}

    def const(*shape):
        if shape not in weights:
            weights[shape] = (rng.randn(*shape) * 0.4).astype(np.float32)
        return tf.constant(weights[shape])

    class Lstm:
        output_size = units
        state_size = (units, units)

        def __init__(self):
            self.w, self.u, self.b = const(features, 4 * units), const(units, 4 * units), const(4 * units)

        def zero_state(self, batch, dtype):
            return (tf.zeros([batch, units], dtype), tf.zeros([batch, units], dtype))

        def __call__(self, x, state, scope=None):
            c, h = state
            i, f, g, o = tf.split(tf.matmul(x, self.w) + tf.matmul(h, self.u) + self.b, 4, axis=1)
            c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(g)
            h = tf.sigmoid(o) * tf.tanh(c)
            return h, (c, h)

    class Gru:
        output_size = units
        state_size = units

        def __init__(self):
            self.w, self.u, self.b = const(features, 3 * units), const(units, 3 * units), const(3 * units)

        def zero_state(self, batch, dtype):
            return tf.zeros([batch, units], dtype)

        def __call__(self, x, h, scope=None):
            xz, xr, xn = tf.split(tf.matmul(x, self.w) + self.b, 3, axis=1)
            uz, ur, un = tf.split(self.u, 3, axis=1)
            z = tf.sigmoid(xz + tf.matmul(h, uz))
            r = tf.sigmoid(xr + tf.matmul(h, ur))
            n = tf.tanh(xn + tf.matmul(r * h, un))
            h = z * h + (1.0 - z) * n
            return h, h

    return Lstm, Gru


def build_graphs(out_dir):
    """Writes NAME.pb, NAME.in.npy, NAME.ref<k>.npy, NAME.meta and NAME.tf_clustering/ for every
    case; TensorFlow's clustering flags and dump folder are set before it is imported."""
    dump = os.path.join(out_dir, "tf_dump")
    os.makedirs(dump, exist_ok=True)
    os.environ["TF_XLA_FLAGS"] = " ".join(CLUSTER_FLAGS)
    os.environ["TF_DUMP_GRAPH_PREFIX"] = dump
    tf, np = tf_driver.tensorflow_or_skip()
    from tensorflow.python.ops import control_flow_ops, control_flow_util

    rng = np.random.RandomState(11)

    def collect_dumps(into):
        """Moves TensorFlow's dumps of the last session into `into` (None: away), their `_N`
        suffixes dropped: the dump of the last graph clustered."""
        if into:
            os.makedirs(into, exist_ok=True)
        for f in sorted(os.listdir(dump)):
            src = os.path.join(dump, f)
            m = re.match(r"(.*?)(_\d+)?\.pbtxt$", f)
            if into and m and m.group(1) in DUMPS:
                shutil.move(src, os.path.join(into, m.group(1) + ".pbtxt"))
            else:
                os.remove(src)

    def run_session(g, fetches, feed, cluster):
        config = tf.compat.v1.ConfigProto()
        if cluster:
            config.graph_options.optimizer_options.global_jit_level = (
                tf.compat.v1.OptimizerOptions.ON_1)
        config.graph_options.rewrite_options.disable_meta_optimizer = True
        with tf.compat.v1.Session(graph=g, config=config) as sess:
            return sess.run(fetches, feed)

    def case(name, v1, build, x, compile_ok, xla_context=False):
        """build(x_placeholder) -> {fetch name: tensor} in a graph of its own; with
        `xla_context`, built inside an XLA control-flow context, as tf.compat.v1's XLA
        compilation built graphs: the v1 gradient's stacks are then bounded by the loop's
        maximum_iterations."""
        g = tf.Graph()
        with g.as_default():
            if v1:
                tf.compat.v1.disable_control_flow_v2()
            context = control_flow_ops.XLAControlFlowContext() if xla_context else None
            try:
                assert control_flow_util.EnableControlFlowV2(g) == (not v1)
                xp = tf.compat.v1.placeholder(tf.float32, x.shape, name="x")
                if context:
                    context.Enter()
                outs = build(xp)
                if context:
                    context.Exit()
                fetches = [tf.identity(t, name=n) for n, t in outs.items()]
            finally:
                tf.compat.v1.enable_control_flow_v2()
        refs = run_session(g, fetches, {"x:0": x}, cluster=False)
        collect_dumps(None)
        run_session(g, [f.name for f in fetches], {"x:0": x}, cluster=True)
        collect_dumps(os.path.join(out_dir, name + ".tf_clustering"))
        tf_driver.save_case(np, out_dir, name, g.as_graph_def(), x, refs,
                            ["x", ",".join(outs), compile_ok])
        ops = sorted({n.op for n in g.as_graph_def().node if n.op.startswith(("TensorArray", "Stack", "TensorList"))})
        print(f"{name}: {' '.join(ops)}")

    Lstm, Gru = make_cells(tf, np, rng, units=6, features=5)
    x_rnn = rng.randn(3, 7, 5).astype(np.float32)

    def lstm_forward(xp):
        lstm = Lstm()
        out, (c, h) = tf.compat.v1.nn.dynamic_rnn(lstm, xp, dtype=tf.float32)
        return {"outputs": out, "c": c, "h": h}

    def gru_forward(xp):
        gru = Gru()
        # The sequence lengths come from the data: the loop runs to the longest, shorter rows
        # keep their state and give zeros past their end.
        lengths = tf.cast(tf.reduce_sum(tf.abs(xp), axis=[1, 2]) * 10.0, tf.int32) % 7 + 1
        out, h = tf.compat.v1.nn.dynamic_rnn(gru, xp, sequence_length=lengths, dtype=tf.float32)
        return {"outputs": out, "h": h, "lengths": lengths}

    def lstm_grad(xp):
        lstm = Lstm()
        out, (c, h) = tf.compat.v1.nn.dynamic_rnn(lstm, xp, dtype=tf.float32)
        loss = tf.reduce_sum(out * out) + tf.reduce_sum(c)
        dx, dw = tf.gradients(loss, [xp, lstm.w])
        return {"loss": loss, "dx": dx, "dw": dw}

    def gru_grad(xp):
        gru = Gru()
        out, h = tf.compat.v1.nn.dynamic_rnn(gru, xp, dtype=tf.float32)
        loss = tf.reduce_sum(tf.sin(out)) + tf.reduce_sum(h * h)
        dx, du = tf.gradients(loss, [xp, gru.u])
        return {"loss": loss, "dx": dx, "du": du}

    def counted_loop(xp):
        # The trip count is computed from the data (2..6), the array has a fixed size (8): the
        # element read at the computed last index and the final state tell a wrong trip count.
        n = tf.cast(tf.reduce_sum(tf.abs(xp)) * 3.0, tf.int32) % 5 + 2
        rows = tf.TensorArray(tf.float32, size=4, element_shape=[3]).unstack(xp)
        out = tf.TensorArray(tf.float32, size=8, element_shape=[3], clear_after_read=False)

        def body(i, acc, out):
            acc = tf.tanh(acc * 0.9 + rows.read(i % 4))
            return i + 1, acc, out.write(i, acc * tf.cast(i + 1, tf.float32))

        _, acc, out = tf.compat.v1.while_loop(lambda i, acc, out: i < n, body,
                                              (tf.constant(0), tf.zeros([3]), out))
        picked = out.gather(tf.stack([n - 1, 0, 1]))
        # Split and concat: the input in two halves of two rows, back together.
        halves = tf.TensorArray(tf.float32, size=2).split(xp, tf.constant([2, 2], tf.int64))
        return {"picked": picked, "last": out.read(n - 1), "acc": acc, "n": n,
                "concat": halves.concat() * 2.0, "size": out.size() + halves.size()}

    x_count = rng.rand(4, 3).astype(np.float32)
    for v1 in (True, False):
        cf = "v1" if v1 else "v2"
        case(f"lstm_{cf}", v1, lstm_forward, x_rnn, "compile")
        case(f"gru_lengths_{cf}", v1, gru_forward, x_rnn, "compile")
        case(f"counted_loop_{cf}", v1, counted_loop, x_count, "compile")
        # The v1 gradient keeps the forward loop's values on stacks of no size bound (StackV2
        # of max_size -1 outside an XLA context), which tf2xla refuses to compile.
        case(f"lstm_grad_{cf}", v1, lstm_grad, x_rnn, "refused" if v1 else "compile")
        case(f"gru_grad_{cf}", v1, gru_grad, x_rnn, "refused" if v1 else "compile")
    # The v1 gradients built in an XLA context: stacks of max_size maximum_iterations (the
    # sequence length), the input's gradient array taken in every backward iteration.
    case("lstm_grad_v1_xla_context", True, lstm_grad, x_rnn, "compile", xla_context=True)
    case("gru_grad_v1_xla_context", True, gru_grad, x_rnn, "compile", xla_context=True)


def check_clustering(xlens, workdir, name):
    """xlens's clusters against the ones TensorFlow's build process dumped for the case."""
    return tf_driver.compare_clusters(xlens, name, workdir,
                                      os.path.join(workdir, name + ".tf_clustering"), CLUSTER_FLAGS)


def main():
    args = tf_driver.parity_parser().parse_args()
    return tf_driver.parity_main(__file__, args, build_graphs, "xlens_tensor_array_", TOLERANCE,
                                 lambda workdir, name: check_clustering(args.xlens, workdir, name))


if __name__ == "__main__":
    sys.exit(main())
