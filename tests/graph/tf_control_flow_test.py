#!/usr/bin/env python3
"""Control flow whose branches and trip counts depend on computed values gives TensorFlow's
answer. TensorFlow builds a set of programs (If/StatelessIf/Case on computed predicates, While
with a data-dependent trip count, a While nested in an If, a While carrying strings, a loop whose
body round-trips its value through AsString/StringToNumber before an If on its sum, TF1's
tf.cond/tf.while_loop in the lowered Switch/Merge form, a loop on a second device) whose outputs change with a wrong branch
or a wrong trip count: each output records which branch ran and how many times a loop turned.
Every program runs in TensorFlow and in xlens op by op, with --jit=auto, and with --jit=compile
where TensorFlow compiles it (jit_compile=True), to within 1e-5 of the largest reference value.
A wrong number, a crash or a refusal fails; a --jit=compile that xlens refuses in words (an op
it cannot compile) is listed as NOT COMPILED and fails too, unless --allow-refusals is given.

TensorFlow's own runtime graphs for the same programs (TF_DUMP_GRAPH_PREFIX with auto-clustering
and the VMODULE settings that make every dump) must each load with `xlens graph verify`; the
runtime graphs that hold the whole program (_Arg in, _Retval out, lowered control flow, cluster
function calls; build_xla_ops' launch ops with --jit=auto) run to TensorFlow's answer.

Exits 77 (skipped) when tensorflow cannot be imported."""

import argparse
import concurrent.futures
import glob
import json
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tf_driver  # noqa: E402

TOLERANCE = 1e-5
# The programs whose runtime graphs TensorFlow dumps (each writes ~27 graphs): one of each form.
DUMPED = ("asstring_while_if", "case_computed", "nested_while_in_if",
          "stateful_if_while", "two_devices")
DUMP_VMODULE = ("encapsulate_subgraphs_pass=1,build_xla_ops_pass=1,"
                "clone_constants_for_better_clustering=1")


# ---- The programs: each is (name, inputs, fn, compiles), fn written against `tf`. -----------
# Inputs are small arrays chosen so the data decides: change a branch or a trip count and the
# output moves by far more than the tolerance.

def programs(tf, np):
    f32 = np.float32
    out = []

    def add(name, inputs, fn, compiles=True):
        out.append((name, inputs, fn, compiles))

    # The loop turns until the sum passes 10; each turn round-trips the value through its
    # decimal text (3 digits), then an If on the sum picks a branch.
    def asstring_while_if(x):
        def body(i, v):
            text = tf.strings.as_string(v * 1.37, precision=3)
            return i + 1, tf.strings.to_number(text) + 0.25
        i, y = tf.while_loop(lambda i, v: tf.reduce_sum(v) < 10.0, body, [tf.constant(0), x])
        s = tf.reduce_sum(y)
        r = tf.cond(s > 12.0, lambda: s * 2.0 + 100.0, lambda: s - 1.0)
        return r, i
    add("asstring_while_if", [np.array([0.31, 0.72, 1.234567], f32)], asstring_while_if, False)

    # The same with TensorFlow's default text (%f) and a loop-carried string: the loop passes
    # the text, not the number, from one turn to the next.
    def while_carrying_string(x):
        def body(i, text):
            v = tf.strings.to_number(text)
            return i + 1, tf.strings.as_string(v * 1.5 + tf.cast(i, tf.float32) * 0.01)
        i, text = tf.while_loop(lambda i, t: tf.reduce_max(tf.strings.to_number(t)) < 20.0,
                                body, [tf.constant(0), tf.strings.as_string(x)])
        y = tf.strings.to_number(text)
        return tf.cond(i > 5, lambda: y + 1000.0, lambda: y), i
    add("while_carrying_string", [np.array([0.5, 1.25, -2.0], f32)], while_carrying_string, False)

    # Collatz steps: the trip count is the data.
    def collatz(n):
        def body(i, v):
            v = tf.cond(tf.equal(v % 2, 0), lambda: v // 2, lambda: 3 * v + 1)
            return i + 1, v
        i, _ = tf.while_loop(lambda i, v: v > 1, body, [tf.constant(0), n])
        return i
    add("collatz", [np.array(27, np.int32)], collatz)

    # A float loop whose count depends on x; the output is the count and the value.
    def while_float(x):
        def body(i, v):
            return i + 1, v * 1.7 + tf.cast(i, tf.float32)
        i, v = tf.while_loop(lambda i, v: tf.reduce_mean(v) < 50.0, body, [tf.constant(0), x])
        return tf.cast(i, tf.float32) * 1000.0 + tf.reduce_sum(v)
    add("while_float", [np.array([0.5, 2.0, 3.5, -1.0], f32)], while_float)

    # If on a computed predicate whose branches differ by far, and the untaken one would be
    # visibly wrong.
    def if_computed(x, y):
        p = tf.reduce_sum(x * y) > tf.reduce_max(x)
        return tf.cond(p, lambda: tf.sin(x) * 10.0 + 50.0, lambda: tf.cos(y) - 50.0)
    add("if_computed", [np.array([1.0, -2.0, 3.0], f32), np.array([0.5, 0.25, 2.0], f32)],
        if_computed)
    add("if_computed_else", [np.array([1.0, -2.0, 3.0], f32), np.array([-0.5, 0.25, 0.1], f32)],
        if_computed)

    # Case (tf.switch_case) on an index computed from the data, clamped into range.
    def case_computed(x):
        k = tf.cast(tf.math.floormod(tf.reduce_sum(tf.cast(x > 0.0, tf.int32)), 3), tf.int32)
        return tf.switch_case(k, [lambda: x * 0.0 + 11.0, lambda: x * 2.0 + 22.0,
                                  lambda: x * x + 33.0])
    add("case_computed", [np.array([1.0, -2.0, 3.0, 0.5], f32)], case_computed)
    add("case_computed_0", [np.array([-1.0, -2.0, -3.0, 0.5], f32)], case_computed)

    # A While in each branch of an If; the two loops turn different numbers of times.
    def nested_while_in_if(x):
        def loop(step, limit):
            def body(i, v):
                return i + 1, v + step
            return tf.while_loop(lambda i, v: tf.reduce_sum(v) < limit, body, [tf.constant(0), x])
        s = tf.reduce_sum(x)
        i, v = tf.cond(s > 0.0, lambda: loop(1.0, 40.0), lambda: loop(0.5, 7.0))
        return tf.cast(i, tf.float32) * 100.0 + v
    add("nested_while_in_if", [np.array([1.0, 2.0, -0.5], f32)], nested_while_in_if)
    add("nested_while_in_if_else", [np.array([-1.0, 2.0, -3.5], f32)], nested_while_in_if)

    # An If inside a While body, and a While inside that body: counts multiply.
    def if_and_while_in_while(x):
        def inner(v):
            return tf.while_loop(lambda j, w: j < tf.cast(tf.reduce_max(w), tf.int32) % 4,
                                 lambda j, w: (j + 1, w + 0.5), [tf.constant(0), v])
        def body(i, acc, v):
            j, v = inner(v)
            acc = tf.cond(i % 2 == 0, lambda: acc + tf.cast(j, tf.float32),
                          lambda: acc * 1.5)
            return i + 1, acc, v
        i, acc, v = tf.while_loop(lambda i, acc, v: i < 6, body,
                                  [tf.constant(0), tf.constant(1.0), x])
        return acc, v
    add("if_and_while_in_while", [np.array([1.0, 2.5], f32)], if_and_while_in_while)

    # A stateful If and While (an Assert inside makes them If/While, not the stateless twins).
    def stateful_if_while(x):
        def body(i, v):
            with tf.control_dependencies([tf.debugging.assert_less(i, 100)]):
                return i + 1, v * 2.0
        i, v = tf.while_loop(lambda i, v: tf.reduce_sum(v) < 30.0, body, [tf.constant(0), x])
        def then():
            with tf.control_dependencies([tf.debugging.assert_greater(tf.reduce_sum(v), 0.0)]):
                return tf.identity(v * 3.0)
        return tf.cond(tf.reduce_sum(v) > 40.0, then, lambda: v - 7.0), i
    add("stateful_if_while", [np.array([1.0, 0.75], f32)], stateful_if_while, False)

    # Ops on two devices (two logical CPUs): TensorFlow's runtime graph places each op on its own
    # device, and the loop count is computed on the second.
    def two_devices(x, n):
        with tf.device("/cpu:1"):
            y = x * 2.0 + tf.cast(n, tf.float32)
            i, y = tf.while_loop(lambda i, v: tf.reduce_sum(v) < 40.0,
                                 lambda i, v: (i + 1, v * 1.5), [tf.constant(0), y])
        with tf.device("/cpu:0"):
            z = tf.sin(y) + x
        return z, i * n
    add("two_devices", [np.array([0.5, 1.0, -2.0], f32), np.array(3, np.int32)], two_devices)
    return out


def two_logical_cpus(tf):
    """Two logical CPU devices, for the two-device program (before TensorFlow's runtime starts)."""
    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration(), tf.config.LogicalDeviceConfiguration()])


def tf1_programs(tf, np):
    """TF1 graphs in the lowered form: tf.cond and tf.while_loop with control flow v1."""
    f32 = np.float32
    out = []

    def cond_and_loop():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        i, v = tf.compat.v1.while_loop(lambda i, v: tf.reduce_sum(v) < 25.0,
                                       lambda i, v: (i + 1, v * 1.5 + 0.5),
                                       [tf.constant(0), x])
        s = tf.reduce_sum(v)
        y = tf.compat.v1.cond(s > 30.0, lambda: s * 10.0, lambda: s - 100.0)
        tf.identity(y, name="y")
        tf.identity(i, name="i")
        return {"x": np.array([1.0, 0.5, 2.0], f32)}, ["y", "i"]
    out.append(("tf1_cond_and_loop", cond_and_loop))

    def nested():
        x = tf.compat.v1.placeholder(tf.float32, [2], name="x")
        def body(i, v):
            j, w = tf.compat.v1.while_loop(lambda j, w: j < i, lambda j, w: (j + 1, w + 1.0),
                                           [tf.constant(0), v])
            w = tf.compat.v1.cond(tf.reduce_max(w) > 8.0, lambda: w * 0.5, lambda: w)
            return i + 1, w
        i, v = tf.compat.v1.while_loop(lambda i, v: i < 5, body, [tf.constant(0), x])
        tf.identity(v, name="y")
        return {"x": np.array([0.25, 3.0], f32)}, ["y"]
    out.append(("tf1_nested", nested))

    def asstring():
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        def body(i, v):
            return i + 1, tf.strings.to_number(tf.strings.as_string(v * 1.37, precision=3)) + 0.25
        i, y = tf.compat.v1.while_loop(lambda i, v: tf.reduce_sum(v) < 10.0, body,
                                       [tf.constant(0), x])
        s = tf.reduce_sum(y)
        tf.identity(tf.compat.v1.cond(s > 12.0, lambda: s * 2.0 + 100.0, lambda: s - 1.0),
                    name="y")
        return {"x": np.array([0.31, 0.72, 1.234567], f32)}, ["y"]
    out.append(("tf1_asstring", asstring))
    return out


# ---- TensorFlow's side ------------------------------------------------------------------------

def build(workdir):
    """Writes every program's graph, inputs and TensorFlow's outputs under workdir/NAME/."""
    import numpy as np
    import tensorflow as tf
    two_logical_cpus(tf)
    manifest = []
    for name, inputs, fn, compiles in programs(tf, np):
        d = os.path.join(workdir, name)
        os.makedirs(d, exist_ok=True)
        spec = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=f"in{k}")
                for k, a in enumerate(inputs)]
        f = tf.function(fn, input_signature=spec)
        concrete = f.get_concrete_function()
        ref = f(*inputs)
        ref = list(ref) if isinstance(ref, (tuple, list)) else [ref]
        with open(os.path.join(d, "graph.pbtxt"), "w") as fh:
            fh.write(str(concrete.graph.as_graph_def()))
        for k, a in enumerate(inputs):
            np.save(os.path.join(d, f"in{k}.npy"), a)
        for k, r in enumerate(ref):
            np.save(os.path.join(d, f"out{k}.npy"), r.numpy())
        entry = {"name": name, "kind": "tf2", "feeds": [f"in{k}" for k in range(len(inputs))],
                 "fetches": [t.name.split(":")[0] if t.name.endswith(":0") else t.name
                             for t in concrete.graph.outputs],
                 "outputs": len(ref), "compiles": compiles}
        if compiles:
            jf = tf.function(fn, input_signature=spec, jit_compile=True)
            jref = jf(*inputs)
            jref = list(jref) if isinstance(jref, (tuple, list)) else [jref]
            for k, r in enumerate(jref):
                np.save(os.path.join(d, f"jit_out{k}.npy"), r.numpy())
        manifest.append(entry)

    tf.compat.v1.disable_control_flow_v2()
    try:
        for name, make in tf1_programs(tf, np):
            d = os.path.join(workdir, name)
            os.makedirs(d, exist_ok=True)
            g = tf.Graph()
            with g.as_default():
                feeds, fetches = make()
            ops = {n.op for n in g.as_graph_def().node}
            assert "Switch" in ops and "Merge" in ops, f"{name}: not in the lowered form: {ops}"
            with tf.compat.v1.Session(graph=g) as sess:
                ref = sess.run([f + ":0" for f in fetches],
                               {k + ":0": v for k, v in feeds.items()})
            with open(os.path.join(d, "graph.pbtxt"), "w") as fh:
                fh.write(str(g.as_graph_def()))
            for k, v in feeds.items():
                np.save(os.path.join(d, f"{k}.npy"), v)
            for k, r in enumerate(ref):
                np.save(os.path.join(d, f"out{k}.npy"), np.asarray(r))
            manifest.append({"name": name, "kind": "tf1", "feeds": list(feeds),
                             "fetches": fetches, "outputs": len(ref), "compiles": False})
    finally:
        tf.compat.v1.enable_control_flow_v2()
    with open(os.path.join(workdir, "manifest.json"), "w") as fh:
        json.dump(manifest, fh, indent=1)


def dump(workdir):
    """Runs the TF2 programs once more with auto-clustering and every dump TensorFlow writes
    (this process was started with TF_DUMP_GRAPH_PREFIX, TF_XLA_FLAGS and TF_CPP_VMODULE set)."""
    import numpy as np
    import tensorflow as tf
    two_logical_cpus(tf)
    dumpdir = os.environ["TF_DUMP_GRAPH_PREFIX"]
    owner = {}
    for name, inputs, fn, _ in programs(tf, np):
        if name not in DUMPED:
            continue
        spec = [tf.TensorSpec(a.shape, tf.as_dtype(a.dtype), name=f"in{k}")
                for k, a in enumerate(inputs)]
        before = set(os.listdir(dumpdir)) if os.path.isdir(dumpdir) else set()
        tf.function(fn, input_signature=spec)(*inputs)
        for f in set(os.listdir(dumpdir)) - before:
            owner[f] = name
    with open(os.path.join(workdir, "dump_owner.json"), "w") as fh:
        json.dump(owner, fh, indent=1, sort_keys=True)


# ---- xlens's side -----------------------------------------------------------------------------

def close(np, got, want):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape} != {want.shape}"
    if want.dtype.kind in "iub":
        return None if np.array_equal(got, want) else f"{got.tolist()} != {want.tolist()}"
    err, scale = tf_driver.max_error(np, got, want, 1.0)
    return None if err <= TOLERANCE * scale else f"{got.tolist()} != {want.tolist()} (error {err:g})"


AUTO_JIT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1"


def run_xlens(xlens, graph, feeds, fetches, outdir, extra=()):
    """Runs `xlens graph run`; with --jit=auto under TensorFlow's auto-clustering flags."""
    os.makedirs(outdir, exist_ok=True)
    env = tf_driver.tensorflow_env(AUTO_JIT_FLAGS if "--jit=auto" in extra else None)
    r = tf_driver.graph_run(xlens, graph, feeds, fetches, outdir, extra, env=env)
    return r.returncode, (r.stdout + r.stderr).strip()


def refusal(text):
    """Whether xlens refused to compile (said so and stopped) rather than computed a number."""
    return "--jit=compile" in text or "cannot be compiled" in text or "OpKernel for XLA" in text


def check_programs(np, xlens, workdir, pool, failures, gaps):
    with open(os.path.join(workdir, "manifest.json")) as fh:
        manifest = json.load(fh)
    jobs = []
    for entry in manifest:
        d = os.path.join(workdir, entry["name"])
        feeds = [(f, os.path.join(d, f"{f}.npy")) for f in entry["feeds"]]
        modes = [("op by op", [], "out"), ("--jit=auto", ["--jit=auto"], "out")]
        if entry["compiles"]:
            modes.append(("--jit=compile", ["--jit=compile"], "jit_out"))
        for label, extra, ref in modes:
            outdir = os.path.join(d, "xlens_" + re.sub(r"\W", "", label))
            job = pool.submit(run_xlens, xlens, os.path.join(d, "graph.pbtxt"), feeds,
                              entry["fetches"], outdir, extra)
            jobs.append((entry, label, ref, outdir, job))
    for entry, label, ref, outdir, job in jobs:
        code, text = job.result()
        name = entry["name"]
        d = os.path.join(workdir, name)
        if code != 0:
            # A compilation xlens refuses in words is a gap to close, listed; a crash, a refusal
            # op by op, or a wrong number is a failure.
            if label == "--jit=compile" and code == 1 and refusal(text):
                gaps.append(f"{name} {label}: {text.splitlines()[-1][:240]}")
            else:
                failures.append(f"{name} {label}: exit {code}: {text[-400:]}")
            continue
        for k in range(entry["outputs"]):
            why = close(np, np.load(os.path.join(outdir, f"out{k}.npy")),
                        np.load(os.path.join(d, f"{ref}{k}.npy")))
            if why:
                failures.append(f"{name} {label}: output {k}: {why}")
    return len(jobs)


def retval_inputs(text):
    """The tensors the _Retval nodes of a runtime GraphDef read, by their index attr."""
    rets = {}
    for m in re.finditer(r'node \{\n  name: "[^"]*"\n  op: "_Retval"\n  input: "([^"]*)"(.*?)\n\}',
                         text, re.S):
        idx = re.search(r'key: "index"\n    value \{\n      i: (\d+)', m.group(2))
        rets[int(idx.group(1)) if idx else 0] = m.group(1)
    return [rets[k] for k in sorted(rets)]


def arg_names(text):
    args = {}
    for m in re.finditer(r'node \{\n  name: "([^"]*)"\n  op: "_Arg"(.*?)\n\}', text, re.S):
        idx = re.search(r'key: "index"\n    value \{\n      i: (\d+)', m.group(2))
        args[int(idx.group(1)) if idx else 0] = m.group(1)
    return [args[k] for k in sorted(args)]


def verify(xlens, path):
    r = subprocess.run([xlens, "graph", "verify", path], capture_output=True, text=True,
                       timeout=60)
    return r.returncode, (r.stdout + r.stderr).strip()


def check_dumps(np, xlens, workdir, dumpdir, pool, failures):
    with open(os.path.join(workdir, "manifest.json")) as fh:
        manifest = {e["name"]: e for e in json.load(fh)}
    with open(os.path.join(workdir, "dump_owner.json")) as fh:
        owners = json.load(fh)
    files = sorted(glob.glob(os.path.join(dumpdir, "*.pbtxt")))
    if not files:
        failures.append(f"TensorFlow wrote no graphs under {dumpdir}")
    verified = [(path, pool.submit(verify, xlens, path)) for path in files]
    runs = []
    loaded = 0
    for path, job in verified:
        base = os.path.basename(path)
        code, text = job.result()
        if code != 0:
            failures.append(f"dump {base}: graph verify: {text[-300:]}")
            continue
        loaded += 1
        # Whole-program runtime graphs: their _Arg nodes are the program's inputs by name.
        with open(path) as fh:
            text = fh.read()
        owner = owners.get(base)
        if base.startswith("encapsulate_fdef") or owner not in manifest:
            continue  # a function, or a graph of TensorFlow's own (the _EagerConst of an input)
        e = manifest[owner]
        fetches = retval_inputs(text)
        if arg_names(text) != e["feeds"] or len(fetches) != e["outputs"]:
            continue  # a part of the program (a cluster's subgraph)
        d = os.path.join(workdir, e["name"])
        feeds = [(f, os.path.join(d, f"{f}.npy")) for f in e["feeds"]]
        # The launch ops of build_xla_ops compile their cluster: they run with the JIT. The
        # cluster calls of encapsulate_subgraphs_after run their bodies op by op, and compiled.
        modes = [[]]
        if base.startswith("build_xla_ops"):
            modes = [["--jit=auto"]]
        elif base.startswith("encapsulate_subgraphs_after"):
            modes = [[], ["--jit=auto"]]
        for extra in modes:
            outdir = os.path.join(workdir, "dump_runs", base + "".join(extra))
            runs.append((base, e, outdir, " ".join(extra) or "op by op",
                         pool.submit(run_xlens, xlens, path, feeds, fetches, outdir, extra)))
    for base, e, outdir, label, job in runs:
        code, out = job.result()
        if code != 0:
            failures.append(f"dump {base} ({e['name']}) {label}: exit {code}: {out[-300:]}")
            continue
        for k in range(e["outputs"]):
            why = close(np, np.load(os.path.join(outdir, f"out{k}.npy")),
                        np.load(os.path.join(workdir, e["name"], f"out{k}.npy")))
            if why:
                failures.append(f"dump {base} ({e['name']}) {label}: output {k}: {why}")
    return len(files), loaded, len(runs)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--workdir", help="keep TensorFlow's graphs and outputs here (reused "
                        "when manifest.json exists)")
    parser.add_argument("--jobs", type=int, default=2, help="xlens runs at once")
    parser.add_argument("--allow-refusals", action="store_true",
                        help="list, but do not fail on, programs TensorFlow compiles that xlens "
                        "refuses to compile")
    parser.add_argument("--child", choices=["build", "dump"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if args.child == "build":
        build(args.workdir)
        return 0
    if args.child == "dump":
        dump(args.workdir)
        return 0
    try:
        import numpy as np
    except ImportError:
        print("skipped: numpy is not importable")
        return 77
    probe = subprocess.run([sys.executable, "-c", "import tensorflow"], capture_output=True,
                           text=True)
    if probe.returncode != 0:
        print(f"skipped: tensorflow is not importable ({probe.stderr.strip()[-200:]})")
        return 77

    tmp = None
    workdir = args.workdir
    if not workdir:
        tmp = tempfile.TemporaryDirectory()
        workdir = tmp.name
    os.makedirs(workdir, exist_ok=True)
    dumpdir = os.path.join(workdir, "tf_dump")
    if not os.path.exists(os.path.join(workdir, "manifest.json")):
        # TensorFlow's plain run and its dumping run are separate processes: the clustering flags
        # are read once per process, and the reference outputs come from the unclustered run.
        env = tf_driver.tensorflow_env()
        build_log = open(os.path.join(workdir, "tensorflow_build.log"), "w")
        builder = subprocess.Popen([sys.executable, __file__, "--xlens", args.xlens, "--workdir",
                                    workdir, "--child", "build"], env=env, stdout=build_log,
                                   stderr=subprocess.STDOUT)
        denv = tf_driver.tensorflow_env("--tf_xla_clustering_debug " + AUTO_JIT_FLAGS, dumpdir,
                                        TF_CPP_VMODULE=DUMP_VMODULE)
        dumper = tf_driver.run_script(__file__, ["--xlens", args.xlens, "--workdir", workdir,
                                                 "--child", "dump"], env=denv,
                                      capture_output=True, text=True)
        built = builder.wait()
        build_log.close()
        if built != 0 or dumper.returncode != 0:
            with open(build_log.name) as fh:
                print("FAIL TensorFlow could not build the programs:", fh.read()[-2000:],
                      dumper.stderr[-2000:])
            return 1

    failures, gaps = [], []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        checked = check_programs(np, args.xlens, workdir, pool, failures, gaps)
        files, loaded, ran = check_dumps(np, args.xlens, workdir, dumpdir, pool, failures)
    print(f"{checked} program runs checked against TensorFlow; {files} graphs TensorFlow dumped: "
          f"{loaded} load; {ran} runs of whole-program runtime graphs; {len(gaps)} compilations "
          f"xlens refuses; {len(failures)} failures")
    for g in gaps:
        print("NOT COMPILED", g)
    for f in failures:
        print("FAIL", f)
    if gaps and not args.allow_refusals:
        return 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
