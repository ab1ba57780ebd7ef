#!/usr/bin/env python3
"""The op-by-op executor against TensorFlow's own, side by side on the same graphs and machine.

TensorFlow (installed) builds the workloads itself, so the script runs anywhere: five Keras
applications and layers frozen to constants (ResNet50 1x64x64x3, VGG16 1x32x32x3, DenseNet121
1x64x64x3, InceptionV3 1x75x75x3, an Embedding + Conv1D + Dropout model 2x20), and a TF1 CNN
training step (variables and a GradientDescent update, batch 32 of 28x28x1). Each is written once
as a GraphDef with its inputs (.npy) under --workdir and reused on later runs.

TensorFlow's side is a tf.compat.v1.Session on the imported graph (grappler on, no XLA: the
session's jit level is OFF and TF_XLA_FLAGS is cleared) called through Session.make_callable,
which takes Python's feed/fetch handling off the step. xlens's side is
`xlens graph run FILE --steps N`, which times each Session::Run in process and prints the median.
Rounds alternate the two (and every xlens binary given) model by model, so both see the same
machine load; the table shows the median over rounds of each side's per-step median, the ratio
TF / xlens (above 1: xlens is faster) and its min..max over rounds (the noise). With --cpu it
also shows each side's CPU time per step (every thread's user and system time), the work done,
which other processes on the machine change less than they change the wall time.

    python3 tests/bench/executor_vs_tf.py --xlens build/compiler/cli/xlens
    python3 tests/bench/executor_vs_tf.py --xlens before=/tmp/xlens.old --xlens after=build/compiler/cli/xlens

A benchmark, run by hand: not part of CTest. Exits 77 (skipped) without TensorFlow.
"""
import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time

MODELS = ["resnet50", "vgg16", "densenet121", "inception_v3", "embed_conv1d", "cnn_train_step"]


def make_frozen(tf, np, name, path):
    """Writes path/NAME.pb (frozen), NAME.in0.npy and NAME.json (feeds, fetches)."""
    import keras
    from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
    A, L = keras.applications, keras.layers
    keras.utils.set_random_seed(0)
    builders = {
        "resnet50": (lambda: A.ResNet50(input_shape=(64, 64, 3), weights=None, classes=10), (1, 64, 64, 3)),
        "vgg16": (lambda: A.VGG16(input_shape=(32, 32, 3), weights=None, classes=10), (1, 32, 32, 3)),
        "densenet121": (lambda: A.DenseNet121(input_shape=(64, 64, 3), weights=None, classes=10), (1, 64, 64, 3)),
        "inception_v3": (lambda: A.InceptionV3(input_shape=(75, 75, 3), weights=None, classes=10), (1, 75, 75, 3)),
    }

    def embed_conv1d():
        x = keras.Input((20,), dtype="int32")
        e = L.Embedding(50, 8)(x)
        c = L.Conv1D(8, 3, padding="same")(e)
        c = L.Dropout(0.3)(c, training=True)
        return keras.Model(x, L.GlobalMaxPooling1D()(c))

    if name == "embed_conv1d":
        model, spec = embed_conv1d(), tf.TensorSpec((2, 20), tf.int32)
        value = np.random.RandomState(0).randint(0, 50, size=(2, 20)).astype(np.int32)
    else:
        make, shape = builders[name]
        model, spec = make(), tf.TensorSpec(shape, tf.float32)
        value = np.random.RandomState(0).uniform(-1, 1, size=shape).astype(np.float32)
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(fn)
    graph_def = frozen.graph.as_graph_def()
    feed = frozen.inputs[0].name
    fetch = frozen.outputs[0].name
    with open(os.path.join(path, name + ".pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    np.save(os.path.join(path, name + ".in0.npy"), value)
    return {"feeds": [feed], "fetches": [fetch], "targets": [], "init": []}


def make_train_step(tf, np, path):
    """A TF1 CNN training step: conv-relu-pool twice, a dense layer, softmax cross-entropy and
    GradientDescent on every variable (Conv2DBackpropInput/Filter, MaxPoolGrad, MatMul's
    gradients, ApplyGradientDescent)."""
    v1 = tf.compat.v1
    g = tf.Graph()
    with g.as_default():
        v1.set_random_seed(0)
        x = v1.placeholder(tf.float32, (32, 28, 28, 1), name="x")
        y = v1.placeholder(tf.float32, (32, 10), name="y")

        def var(name, shape):
            return v1.Variable(v1.truncated_normal(shape, stddev=0.1), name=name, use_resource=False)

        h = x
        for i, (cin, cout) in enumerate([(1, 16), (16, 32)]):
            w, b = var(f"conv{i}/w", (3, 3, cin, cout)), var(f"conv{i}/b", (cout,))
            h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, 1, "SAME"), b))
            h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        h = tf.reshape(h, (32, 7 * 7 * 32))
        w1, b1 = var("fc1/w", (7 * 7 * 32, 128)), var("fc1/b", (128,))
        h = tf.nn.relu(tf.matmul(h, w1) + b1)
        w2, b2 = var("fc2/w", (128, 10)), var("fc2/b", (10,))
        logits = tf.matmul(h, w2) + b2
        loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits), name="loss")
        v1.train.GradientDescentOptimizer(0.01).minimize(loss, name="train")
        v1.group(*[v.initializer for v in v1.global_variables()], name="init")
    with open(os.path.join(path, "cnn_train_step.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    rs = np.random.RandomState(0)
    np.save(os.path.join(path, "cnn_train_step.in0.npy"), rs.uniform(0, 1, (32, 28, 28, 1)).astype(np.float32))
    np.save(os.path.join(path, "cnn_train_step.in1.npy"), np.eye(10, dtype=np.float32)[rs.randint(0, 10, 32)])
    return {"feeds": ["x:0", "y:0"], "fetches": ["loss:0"], "targets": ["train"], "init": ["init"]}


def prepare(tf, np, name, path):
    meta_path = os.path.join(path, name + ".json")
    if os.path.exists(meta_path) and os.path.exists(os.path.join(path, name + ".pb")):
        with open(meta_path) as f:
            return json.load(f)
    print(f"  building {name} with TensorFlow ...", file=sys.stderr)
    meta = make_train_step(tf, np, path) if name == "cnn_train_step" else make_frozen(tf, np, name, path)
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    return meta


class TfSide:
    """One Session per model, made once; each round times `steps` calls of its callable."""

    def __init__(self, tf, np, name, path, meta):
        v1 = tf.compat.v1
        graph_def = v1.GraphDef()
        with open(os.path.join(path, name + ".pb"), "rb") as f:
            graph_def.ParseFromString(f.read())
        self.graph = tf.Graph()
        with self.graph.as_default():
            v1.import_graph_def(graph_def, name="")
        config = v1.ConfigProto()
        config.graph_options.optimizer_options.global_jit_level = v1.OptimizerOptions.OFF
        self.sess = v1.Session(graph=self.graph, config=config)
        if meta["init"]:
            self.sess.run(meta["init"])
        feeds = [self.graph.get_tensor_by_name(n) for n in meta["feeds"]]
        fetches = [self.graph.get_tensor_by_name(n) for n in meta["fetches"]]
        fetches += [self.graph.get_operation_by_name(n) for n in meta["targets"]]
        self.call = self.sess.make_callable(fetches, feed_list=feeds)
        self.values = [np.load(os.path.join(path, f"{name}.in{i}.npy")) for i in range(len(feeds))]
        for _ in range(5):
            self.call(*self.values)

    def time(self, steps):
        """The median step in ms, and the CPU time (user + system, all threads) per step."""
        times = []
        before = resource.getrusage(resource.RUSAGE_SELF)
        for _ in range(steps):
            start = time.perf_counter()
            self.call(*self.values)
            times.append((time.perf_counter() - start) * 1e3)
        after = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3 / steps
        return statistics.median(times), cpu


def run_xlens(binary, name, path, meta, steps):
    """The median step in ms, and the CPU time of the whole process (load, setup and steps)."""
    cmd = [binary, "graph", "run", os.path.join(path, name + ".pb"), "--steps", str(steps)]
    for i, feed in enumerate(meta["feeds"]):
        cmd += ["--feed", f"{feed}={os.path.join(path, f'{name}.in{i}.npy')}"]
    for fetch in meta["fetches"]:
        cmd += ["--fetch", fetch]
    for target in meta["targets"]:
        cmd += ["--target", target]
    for init in meta["init"]:
        cmd += ["--init", init]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    run = subprocess.run(cmd, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    m = re.search(r"median ([0-9.]+) ms per step", run.stdout)
    if run.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)}\n{run.stdout[-800:]}{run.stderr[-800:]}")
    return float(m.group(1)), (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1e3


def time_xlens(binary, name, path, meta, steps, cpu):
    """The median step in ms, and with `cpu` the CPU time per step: the difference between a run
    of 2 * steps and one of `steps`, which takes the load and setup off."""
    ms, cpu_short = run_xlens(binary, name, path, meta, steps)
    if not cpu:
        return ms, None
    _, cpu_long = run_xlens(binary, name, path, meta, 2 * steps)
    return ms, (cpu_long - cpu_short) / steps


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xlens", action="append", required=True,
                   help="the xlens binary, or LABEL=PATH to compare several (repeat)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated, of " + ",".join(MODELS))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=50, help="timed steps per side per round")
    p.add_argument("--workdir", default="/tmp/xlens_executor_vs_tf", help="where the graphs are kept")
    p.add_argument("--cpu", action="store_true",
                   help="also show the CPU time per step (user + system, every thread), which the "
                        "machine's load changes less than the wall time; xlens then runs twice")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    binaries = []
    for spec in args.xlens:
        label, _, path = spec.rpartition("=")
        binaries.append((label or "xlens", os.path.abspath(path)))
    os.environ.pop("TF_XLA_FLAGS", None)
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    os.makedirs(args.workdir, exist_ok=True)
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            p.error(f"--models: unknown model {m!r} (known: {', '.join(MODELS)})")
    metas = {m: prepare(tf, np, m, args.workdir) for m in models}
    sessions = {m: TfSide(tf, np, m, args.workdir, metas[m]) for m in models}
    times = {m: {"tf": []} | {label: [] for label, _ in binaries} for m in models}
    cpus = {m: {"tf": []} | {label: [] for label, _ in binaries} for m in models}
    # The machine's load (1-minute average) after each round: the figures' context on a shared
    # machine, where other work moves the wall times by more than the changes measured.
    loads = []
    for r in range(args.rounds):
        for m in models:
            # Which side goes first alternates by round.
            sides = [("tf", None)] + binaries
            if r % 2:
                sides.reverse()
            for label, binary in sides:
                if binary is None:
                    ms, cpu = sessions[m].time(args.steps)
                else:
                    ms, cpu = time_xlens(binary, m, args.workdir, metas[m], args.steps, args.cpu)
                times[m][label].append(ms)
                cpus[m][label].append(cpu)
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds} done (load average {loads[-1]:.2f})", file=sys.stderr)

    header = f"{'model':<16}{'TF ms':>9}"
    for label, _ in binaries:
        header += f"{label + ' ms':>14}{'TF/' + label:>12}{'min..max':>14}"
    if args.cpu:
        header += f"{'TF cpu':>9}" + "".join(f"{label + ' cpu':>12}" for label, _ in binaries)
    print(header)
    summary = {}
    for m in models:
        tf_ms = statistics.median(times[m]["tf"])
        line = f"{m:<16}{tf_ms:>9.3f}"
        summary[m] = {"tf_ms": times[m]["tf"]}
        for label, _ in binaries:
            ours = statistics.median(times[m][label])
            ratios = [t / o for t, o in zip(times[m]["tf"], times[m][label])]
            line += f"{ours:>14.3f}{tf_ms / ours:>11.2f}x{min(ratios):>8.2f}..{max(ratios):.2f}"
            summary[m][label + "_ms"] = times[m][label]
        if args.cpu:
            line += f"{statistics.median(cpus[m]['tf']):>9.3f}"
            for label, _ in binaries:
                line += f"{statistics.median(cpus[m][label]):>12.3f}"
                summary[m][label + "_cpu_ms"] = cpus[m][label]
            summary[m]["tf_cpu_ms"] = cpus[m]["tf"]
        print(line)
    print(f"load average over the rounds: {min(loads):.1f} to {max(loads):.1f} "
          f"on {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
