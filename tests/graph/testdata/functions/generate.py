"""Writes the function-library test graphs of tests/graph/function_test.cc and
lower_functional_ops_test.cc with the installed TensorFlow.

For every case CASE (one tf.function):
  CASE.pbtxt            the concrete function's GraphDef (Placeholders in, Identity out) with its
                        function library: StatelessIf / StatelessWhile / PartitionedCall nodes
                        whose branches and bodies are FunctionDefs.
  CASE.json             feeds and fetches of each recorded run: {"runs": [{"feeds": {name: file},
                        "fetches": {name: file}}]}, the tensors in CASE_*.npy.
  CASE_lowered.pbtxt    TensorFlow's own lowered graph of the function (its
                        before_mark_for_compilation dump, grappler off), the reference for the
                        names and ops the lowering creates.

Run: python3 generate.py [--only CASE...]   (each case runs in a fresh process so its dumps stay
apart)
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    x8 = rng.standard_normal(8).astype(np.float32)

    def cond_fn(x, p):
        return tf.cond(p, lambda: x * 2.0 + 1.0, lambda: tf.sin(x) - 3.0)

    def while_fn(x, y):
        # y is captured by the body: a loop invariant.
        _, r = tf.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * y + 0.5), [0, x])
        return r

    def nested_fn(x, p):
        def loop():
            _, r = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, tf.tanh(v) * 1.5),
                                 [0, x])
            return r
        return tf.cond(p, loop, lambda: x * 3.0)

    @tf.function
    def inner(a):
        return a * a + 1.0

    def call_fn(x):
        return inner(x) + x

    def stateful_fn(x, p):
        # RandomUniform is stateful: the cond becomes If, not StatelessIf.
        return tf.cond(p, lambda: x + tf.random.uniform([8], seed=7), lambda: x - 1.0)

    def case_fn(x, k):
        # Index 7 and -1 are out of range: TensorFlow takes the last branch.
        return tf.switch_case(k, [lambda: x * 2.0, lambda: tf.sin(x) + 10.0,
                                  lambda: x * x - 5.0])

    b = lambda v: np.array(v, dtype=np.bool_)
    k = lambda v: np.array(v, dtype=np.int32)
    y8 = (0.5 + 0.1 * rng.standard_normal(8)).astype(np.float32)
    return {
        "cond": (cond_fn, [tf.TensorSpec([8], tf.float32), tf.TensorSpec([], tf.bool)],
                 [[x8, b(True)], [x8, b(False)]]),
        "while": (while_fn, [tf.TensorSpec([8], tf.float32), tf.TensorSpec([8], tf.float32)],
                  [[x8, y8]]),
        "nested": (nested_fn, [tf.TensorSpec([8], tf.float32), tf.TensorSpec([], tf.bool)],
                   [[x8, b(True)], [x8, b(False)]]),
        "call": (call_fn, [tf.TensorSpec([8], tf.float32)], [[x8]]),
        "stateful": (stateful_fn, [tf.TensorSpec([8], tf.float32), tf.TensorSpec([], tf.bool)],
                     [[x8, b(False)], [x8, b(True)]]),
        "case": (case_fn, [tf.TensorSpec([8], tf.float32), tf.TensorSpec([], tf.int32)],
                 [[x8, k(0)], [x8, k(1)], [x8, k(2)], [x8, k(7)], [x8, k(-1)]]),
    }


def run_case(name):
    import numpy as np
    import tensorflow as tf

    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})
    tf.random.set_seed(1)
    fn, specs, runs = cases()[name]
    f = tf.function(fn)
    cf = f.get_concrete_function(*specs)
    gd = cf.graph.as_graph_def()
    with open(os.path.join(HERE, name + ".pbtxt"), "w") as out:
        out.write(str(gd))
    feeds_names = [t.name for t in cf.inputs]
    fetch_names = [t.name for t in cf.outputs]
    record = {"runs": []}
    for k, args in enumerate(runs):
        result = f(*args)
        run = {"feeds": {}, "fetches": {}}
        for j, (n, a) in enumerate(zip(feeds_names, args)):
            fname = "%s_run%d_in%d.npy" % (name, k, j)
            np.save(os.path.join(HERE, fname), a)
            run["feeds"][n] = fname
        for j, n in enumerate(fetch_names):
            fname = "%s_run%d_out%d.npy" % (name, k, j)
            np.save(os.path.join(HERE, fname), result.numpy())
            run["fetches"][n] = fname
        record["runs"].append(run)
    with open(os.path.join(HERE, name + ".json"), "w") as out:
        json.dump(record, out, indent=1, sort_keys=True)


def main():
    if len(sys.argv) == 2:
        run_case(sys.argv[1])
        return
    names = ["cond", "while", "nested", "call", "stateful", "case"]
    if len(sys.argv) > 2 and sys.argv[1] == "--only":
        names = sys.argv[2:]
    for name in names:
        dump = tempfile.mkdtemp()
        env = dict(os.environ)
        env["TF_DUMP_GRAPH_PREFIX"] = dump
        env["TF_XLA_FLAGS"] = ("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit "
                               "--tf_xla_clustering_debug --tf_xla_min_cluster_size=1000")
        env["TF_CPP_MIN_LOG_LEVEL"] = "2"
        env["PYTHONHASHSEED"] = "0"
        subprocess.run([sys.executable, __file__, name], env=env, check=True)
        dumps = sorted(glob.glob(os.path.join(dump, "before_mark_for_compilation*.pbtxt")))
        # The function's own graph is the one holding the lowered control flow (or, for the
        # call case, the inlined body): the largest dump.
        best = max(dumps, key=os.path.getsize) if dumps else None
        if best:
            shutil.copy(best, os.path.join(HERE, name + "_lowered.pbtxt"))
        else:
            print("no before_mark_for_compilation dump for", name)
        shutil.rmtree(dump)


if __name__ == "__main__":
    main()
