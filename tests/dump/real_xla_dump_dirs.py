#!/usr/bin/env python3
"""Dump directories as XLA writes them, opened by `xlens inspect` without a manifest.

Makes, at test time, real dumps with jax (XLA_FLAGS=--xla_dump_to=D --xla_dump_hlo_pass_re=.*)
of a small training step and a scan, run by this very file (so the stack frames XLA records point
here), once more with every rendering XLA offers (proto, DOT, HTML, timestamps, snapshots, fusion
pages), and, when TensorFlow is installed, of a tf.function(jit_compile=True) with XLA_FLAGS and
TF_DUMP_GRAPH_PREFIX, beside an auto-clustered function (the clustering dumps that
--tf_xla_clustering_debug adds). Then runs
`xlens inspect D --json` and checks:

- every file of the directory is placed in the model or listed as unplaced with a reason;
- the stages of each module are in XLA's order (its step counter, strictly increasing);
- every kernel of the JAX programs has its Python file and line, and the file is this script;
- xlens's own dump of the same module (CPU and GPU names) reads alike with and without its
  manifest.json: the dumped stages in order, the module's files, as many kernels;
- the profile jax.profiler recorded (XSpace and JSON) links at least 95% of its kernel events to
  the dump's kernels (`xlens inspect D --trace P`).

Prints how many files were placed and exits 1 on any failure, 77 (skipped) without jax.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77
HERE = os.path.abspath(__file__)
JAX_PROGRAM_MODULES = {"jit_train_step", "jit_rnn_scan"}


def jax_programs():
    # Runs in a child process whose XLA_FLAGS are set before jax starts.
    import jax
    import jax.numpy as jnp
    from jax import lax

    def loss(w, b, x, y):
        return jnp.mean((jnp.tanh(x @ w + b) - y) ** 2)

    @jax.jit
    def train_step(w, b, x, y):
        gw, gb = jax.grad(loss, argnums=(0, 1))(w, b, x, y)
        return w - 0.1 * gw, b - 0.1 * gb

    @jax.jit
    def rnn_scan(xs, w, h0):
        def step(h, x):
            h = jnp.tanh(h @ w + x)
            return h, h.sum(-1)
        return lax.scan(step, h0, xs)

    w, b = jnp.full((8, 4), 0.1), jnp.zeros((4,))
    x, y = jnp.full((16, 8), 0.5), jnp.zeros((16, 4))
    xs, wr, h0 = jnp.full((6, 2, 4), 0.3), jnp.full((4, 4), 0.2), jnp.zeros((2, 4))
    jax.block_until_ready(train_step(w, b, x, y))
    jax.block_until_ready(rnn_scan(xs, wr, h0))
    # A profile of the compiled programs, as jax.profiler records one (XSpace and JSON).
    with jax.profiler.trace(os.environ["XLENS_TEST_PROFILE_DIR"]):
        for _ in range(3):
            jax.block_until_ready(train_step(w, b, x, y))
            jax.block_until_ready(rnn_scan(xs, wr, h0))


def tf_program():
    import tensorflow as tf

    @tf.function(jit_compile=True)
    def f(x, w):
        return tf.reduce_sum(tf.nn.relu(tf.matmul(x, w)) * 2.0)

    # Auto-clustered (TF_XLA_FLAGS=--tf_xla_auto_jit=2): mark_for_compilation's graph dumps.
    @tf.function
    def g(x, w):
        return tf.reduce_sum(tf.tanh(tf.matmul(x, w)) + 1.0)

    f(tf.ones((4, 8)), tf.ones((8, 3))).numpy()
    g(tf.ones((4, 8)), tf.ones((8, 3))).numpy()


def make_dump(kind, directory):
    env = dict(os.environ)
    env["XLA_FLAGS"] = f"--xla_dump_to={directory} --xla_dump_hlo_pass_re=.*"
    if kind == "jax-renderings":
        # Every rendering XLA offers, timestamps, snapshots and fusion pages beside the text.
        env["XLA_FLAGS"] = (f"--xla_dump_to={directory} --xla_dump_hlo_pass_re=fusion --xla_dump_hlo_as_text "
                            "--xla_dump_hlo_as_proto --xla_dump_hlo_as_dot --xla_dump_hlo_as_html "
                            "--xla_dump_include_timestamp --xla_dump_hlo_snapshots --xla_dump_fusion_visualization")
    env["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env["JAX_PLATFORMS"] = "cpu"
    env["XLENS_TEST_PROFILE_DIR"] = directory + "_profile"
    if kind == "tf":
        env["TF_DUMP_GRAPH_PREFIX"] = directory
        env["TF_XLA_FLAGS"] = "--tf_xla_clustering_debug --tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
        env["CUDA_VISIBLE_DEVICES"] = ""
    run = subprocess.run([sys.executable, HERE, "--child", "jax" if kind.startswith("jax") else kind], env=env, capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        raise RuntimeError(f"the {kind} program failed:\n{run.stderr[-2000:]}")


def all_files(directory):
    files = []
    for root, dirs, names in os.walk(directory):
        for name in names:
            files.append(os.path.relpath(os.path.join(root, name), directory))
    return sorted(files)


def check(xlens, kind, directory, failures):
    out = os.path.join(directory + ".json")
    run = subprocess.run([xlens, "inspect", directory, "--json", out], capture_output=True, text=True, timeout=120)
    if run.returncode != 0:
        failures.append(f"{kind}: xlens inspect exited {run.returncode}: {run.stderr.strip()}")
        return 0, 0
    model = json.load(open(out))
    if model["source"] != "xla_file_names":
        failures.append(f"{kind}: read as {model['source']}, not from XLA's file names")
    placed = set()
    for module in model["modules"]:
        placed.update(module["files"])
        for stage in module["stages"]:
            placed.update(stage["files"])
        steps = [stage["step"] for stage in module["stages"]]
        if steps != sorted(set(steps)):
            failures.append(f"{kind}: module {module['name']}: stages not in XLA's step order: {steps[:20]}")
        for stage in module["stages"]:
            if not stage["pipeline"] or not stage["pass"] or not stage["file"]:
                failures.append(f"{kind}: module {module['name']}: stage without pipeline, pass or file: {stage}")
    for graph in model["graphs"]:
        for stage in graph["stages"]:
            placed.update(stage["files"])
    unplaced = {entry["file"]: entry["reason"] for entry in model["unplaced"]}
    for file, reason in unplaced.items():
        if not reason:
            failures.append(f"{kind}: {file} unplaced without a reason")
    files = all_files(directory)
    for file in files:
        if file not in placed and file not in unplaced:
            failures.append(f"{kind}: {file} neither placed nor listed as unplaced")
    if model["placed_files"] != len(placed):
        failures.append(f"{kind}: placed_files says {model['placed_files']}, the model lists {len(placed)}")
    if not model["modules"]:
        failures.append(f"{kind}: no modules read")
    if kind == "jax":
        kernels = 0
        for module in model["modules"]:
            if not any(stage for stage in module["stages"]):
                failures.append(f"{kind}: module {module['name']} has no stages (--xla_dump_hlo_pass_re=.*)")
            # jnp.full and friends compile helper modules of their own (jit_broadcast_in_dim, a copy
            # of a parameter with no metadata at all); the programs are the script's functions.
            if module["name"] not in JAX_PROGRAM_MODULES:
                continue
            for kernel in module["kernels"]:
                kernels += 1
                source = kernel["source"]
                if source is None or source["line"] <= 0:
                    failures.append(f"{kind}: {module['name']}: kernel {kernel['name']} ({kernel['op_name']}) has no source line")
                elif os.path.abspath(source["file"]) != HERE:
                    failures.append(f"{kind}: {module['name']}: kernel {kernel['name']} comes from {source['file']}, not {HERE}")
        if kernels == 0:
            failures.append(f"{kind}: no kernels derived for {sorted(JAX_PROGRAM_MODULES)}")
        print(f"{kind}: {kernels} kernels of {sorted(JAX_PROGRAM_MODULES)}, each with its line in {os.path.basename(HERE)}")
    if kind == "tf":
        stages = {stage["name"] for graph in model["graphs"] for stage in graph["stages"]}
        if "mark_for_compilation" not in stages:
            failures.append(f"{kind}: TensorFlow's clustering dumps not read (stages: {sorted(stages)})")
    if kind == "jax":
        check_profiles(xlens, directory, failures)
    print(f"{kind}: {len(placed)} of {len(files)} files placed, {len(unplaced)} unplaced with a reason, "
          f"{len(model['modules'])} modules, {sum(len(m['stages']) for m in model['modules'])} stages, "
          f"{sum(len(m['kernels']) for m in model['modules'])} kernels")
    for file, reason in list(unplaced.items())[:5]:
        print(f"  unplaced: {file} ({reason})")
    return len(placed), len(files)


def check_profiles(xlens, directory, failures):
    """The profile jax.profiler recorded (XSpace and JSON), its kernel events linked to the dump."""
    profiles = []
    for root, _, names in os.walk(directory + "_profile"):
        profiles += [os.path.join(root, n) for n in names if n.endswith((".xplane.pb", ".trace.json.gz"))]
    if not profiles:
        failures.append("jax: jax.profiler wrote no profile")
    for profile in sorted(profiles):
        out = directory + ".trace.json"
        run = subprocess.run([xlens, "inspect", directory, "--trace", profile, "--json", out],
                             capture_output=True, text=True, timeout=120)
        name = os.path.basename(profile)
        if run.returncode != 0:
            failures.append(f"jax: xlens inspect --trace {name} exited {run.returncode}: {run.stderr.strip()}")
            continue
        model = json.load(open(out))
        trace = model["trace"]
        linked = trace["linked_events"] / trace["kernel_events"] if trace["kernel_events"] else 0
        if trace["kernel_events"] == 0 or linked < 0.95:
            failures.append(f"jax: {name}: {trace['linked_events']} of {trace['kernel_events']} kernel events linked")
        timed = [k for m in model["modules"] if m["name"] in JAX_PROGRAM_MODULES for k in m["kernels"]
                 if k["trace"]["events"] > 0 and k["trace"]["total_us"] > 0]
        if not timed:
            failures.append(f"jax: {name}: no kernel of the programs has a time")
        print(f"jax: {name}: {trace['events']} events, {trace['linked_events']} of {trace['kernel_events']} "
              f"kernel events linked, {len(timed)} program kernels timed")


def check_own_dump_without_manifest(xlens, jax_directory, base, failures):
    """xlens's own dump of the same module, read with its manifest and without: the stages that
    have files, in order, with their pipeline, pass and files, and the module's files are the same."""
    before = sorted(f for f in os.listdir(jax_directory) if f.endswith("jit_train_step.before_optimizations.txt"))
    if not before:
        failures.append("own: no jit_train_step before_optimizations module to compile")
        return
    own = os.path.join(base, "own")
    for backend in ("cpu", "gpu"):
        directory = os.path.join(own, backend)
        run = subprocess.run([xlens, "compile", os.path.join(jax_directory, before[0]), "--backend", backend,
                              f"--xla_dump_to={directory}", "--xla_dump_hlo_pass_re=.*"],
                             capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            failures.append(f"own/{backend}: xlens compile exited {run.returncode}: {run.stderr.strip()[:300]}")
            continue
        models = []
        for step in ("with", "without"):
            if step == "without":
                os.rename(os.path.join(directory, "manifest.json"), os.path.join(own, f"{backend}.manifest.json"))
            out = subprocess.run([xlens, "inspect", directory, "--json", "-"], capture_output=True, text=True, timeout=60)
            models.append(json.loads(out.stdout))
        with_manifest, without = models
        if without["source"] != "xla_file_names" or without["unplaced"]:
            failures.append(f"own/{backend}: without its manifest: {without['source']}, unplaced {without['unplaced'][:3]}")
        for a, b in zip(with_manifest["modules"], without["modules"]):
            dumped = [(s["pipeline"], s["pass"], sorted(s["files"])) for s in a["stages"] if s["files"]]
            named = [(s["pipeline"], s["pass"], sorted(s["files"])) for s in b["stages"]]
            if dumped != named:
                failures.append(f"own/{backend}: stages differ without the manifest: {dumped[:3]} vs {named[:3]}")
            if sorted(a["files"]) != sorted(b["files"]):
                failures.append(f"own/{backend}: files differ: {sorted(set(a['files']) ^ set(b['files']))[:5]}")
            if len(a["kernels"]) != len(b["kernels"]):
                failures.append(f"own/{backend}: {len(a['kernels'])} kernels in the manifest, {len(b['kernels'])} derived")
        print(f"own/{backend}: {sum(len(m['stages']) for m in without['modules'])} dumped stages and "
              f"{sum(len(m['files']) for m in without['modules'])} module files read alike with and without manifest.json")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xlens")
    parser.add_argument("--child", choices=["jax", "tf"])
    parser.add_argument("--keep", help="make the dumps here and keep them")
    args = parser.parse_args()
    if args.child == "jax":
        return jax_programs()
    if args.child == "tf":
        return tf_program()
    if importlib.util.find_spec("jax") is None:
        print("jax is not installed: skipped")
        return SKIP
    kinds = ["jax", "jax-renderings"] + (["tf"] if importlib.util.find_spec("tensorflow") is not None else [])
    failures = []
    with tempfile.TemporaryDirectory(prefix="xlens_xla_dump_dirs_") as tmp:
        base = args.keep or tmp
        for kind in kinds:
            directory = os.path.join(base, kind)
            make_dump(kind, directory)
            check(args.xlens, kind, directory, failures)
            if kind == "jax":
                check_own_dump_without_manifest(args.xlens, directory, base, failures)
    for failure in failures[:40]:
        print("FAIL", failure)
    if len(failures) > 40:
        print(f"... and {len(failures) - 40} more")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main() or 0)
