#!/usr/bin/env python3
"""xlens's JIT against TensorFlow's XLA, side by side on the model corpus and the same machine.

The models are the corpus's (tests/models/make_model_corpus.py; --corpus names a built one, made
with the CI set when absent). Each side runs the same graph:

  TensorFlow  the SavedModel's signature (serving_default; a training step's train_step),
              called through tf.function(jit_compile=True) (XLA) and through a plain
              tf.function with auto-clustering on (TF_XLA_FLAGS=--tf_xla_auto_jit=2
              --tf_xla_cpu_global_jit).
  xlens       --jit=compile: the same function's graph (function.pb) with its captured variables
              bound by --assign, so they are parameters of the compiled program as they are of
              TensorFlow's; a training step updates them each step as TensorFlow's does.
              --jit=auto: the SavedModel's signature (an inference model) or function.pb (a
              training step), auto-clustered under the same TF_XLA_FLAGS.

TensorFlow's step is timed per call after warm-up; the cost of calling a function that does
nothing with the same arguments (Python's dispatch, the argument conversion) is measured the same
way and taken off. xlens's is `graph run --steps N`, which times each step in process and prints
the median. Rounds alternate the sides (which goes first flips each round), so both see the same
machine load. The table shows the median over rounds of each side's per-step median, the ratio
TF / xlens (above 1: xlens is faster) and its min..max over rounds (the noise). Before timing,
each side's outputs (inference) or first losses (train) are checked against TensorFlow's
jit_compile reference within 1e-4 of its largest value.

    python3 tests/bench/jit_vs_tf.py --xlens build/compiler/cli/xlens
    python3 tests/bench/jit_vs_tf.py --xlens before=/tmp/xlens.old --xlens after=build/compiler/cli/xlens

A benchmark, run by hand: not part of CTest. Exits 77 (skipped) without TensorFlow.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = ["resnet50", "mobilenet_v2", "efficientnet_b0", "densenet121", "transformer_block", "lstm",
          "cnn_train", "transformer_train"]
AUTO_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
TOLERANCE = 1e-4


def ensure_corpus(corpus, models):
    missing = [m for m in models if not os.path.exists(os.path.join(corpus, m, "meta.json"))]
    if missing:
        print(f"  building {', '.join(missing)} with TensorFlow ...", file=sys.stderr)
        subprocess.run([sys.executable, os.path.join(HERE, "..", "models", "make_model_corpus.py"),
                        corpus, "--models", ",".join(missing)], check=True)


def load_meta(corpus, name):
    with open(os.path.join(corpus, name, "meta.json")) as f:
        meta = json.load(f)
    meta["dir"] = os.path.join(corpus, name)
    return meta


def inputs(np, meta):
    return [np.load(os.path.join(meta["dir"], "inputs", f"{n}.npy")) for n in meta["inputs"]]


class TfSide:
    """The model as TensorFlow runs it: `xla` (jit_compile) and `auto` (auto-clustering)."""

    def __init__(self, tf, np, meta):
        self.tf, self.np, self.meta = tf, np, meta
        self.values = [tf.constant(v) for v in inputs(np, meta)]
        self.loaded = tf.saved_model.load(os.path.join(meta["dir"], "saved_model"))
        sig = self.loaded.signatures[meta["signature"]["name"]]
        self.variables = list(sig.variables)
        names = list(meta["signature"]["feeds"])
        output = meta["signature"]["outputs"][0] if meta["kind"] == "inference" else "loss"
        body = lambda *xs: sig(**dict(zip(names, xs)))[output]
        self.fns = {"xla": tf.function(body, jit_compile=True), "auto": tf.function(body)}
        # What a call costs with no work in it: the same arguments, a function that returns one.
        self.empty = tf.function(lambda *xs: xs[0], jit_compile=True)
        self.snapshot = [v.numpy() for v in self.variables] if meta["kind"] == "train" else None

    def restore(self):
        if self.snapshot is not None:
            for v, value in zip(self.variables, self.snapshot):
                v.assign(value)

    def check(self, mode):
        """The outputs against the corpus's reference for `mode`, or None when they agree."""
        self.restore()
        fn = self.fns[mode]
        if self.meta["kind"] == "inference":
            got = [fn(*self.values).numpy()]
        else:
            got = [self.np.asarray([float(fn(*self.values).numpy())
                                    for _ in range(self.meta["steps"])], self.np.float32)]
        problem = compare_reference(self.np, self.meta, got, "compile" if mode == "xla" else "auto")
        self.restore()
        return problem

    def _median(self, fn, steps):
        times = []
        for _ in range(steps):
            start = time.perf_counter()
            fn(*self.values).numpy()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    def warm(self, steps):
        for fn in list(self.fns.values()) + [self.empty]:
            for _ in range(steps):
                fn(*self.values).numpy()

    def time(self, mode, steps):
        """The median step in ms less the median empty call, and that call's cost."""
        step = self._median(self.fns[mode], steps)
        empty = self._median(self.empty, steps)
        return step - empty, empty


def compare_reference(np, meta, got, mode):
    ref = os.path.join(meta["dir"], "expected_jit" if mode == "compile" else "expected_auto")
    if meta["kind"] == "inference":
        wants = [np.load(os.path.join(ref, f"out{i}.npy")) for i in range(len(got))]
    else:
        wants = [np.load(os.path.join(ref, "losses.npy"))]
    for g, w in zip(got, wants):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        if g.shape != w.shape:
            return f"shape {g.shape}, reference {w.shape}"
        err = float(np.max(np.abs(g - w))) if w.size else 0.0
        scale = float(np.max(np.abs(w))) if w.size else 0.0
        if not np.isfinite(err) or err > TOLERANCE * max(scale, 1e-30):
            return f"max error {err:.3g} > {TOLERANCE} x {scale:.3g}"
    return None


def xlens_args(meta, mode):
    """The SavedModel's signature for an inference model under --jit=auto (as TensorFlow runs it),
    else the TF2 function graph with its captured variables bound: the same function TensorFlow's
    side calls, its variables parameters of the compiled program."""
    d = meta["dir"]
    paths = {n: os.path.join(d, "inputs", f"{n}.npy") for n in meta["inputs"]}
    if meta["kind"] == "inference" and mode == "auto":
        sig = meta["signature"]
        args = [os.path.join(d, "saved_model"), "--signature", sig["name"]]
        for sig_input, name in sig["feeds"].items():
            args += ["--feed", f"{sig_input}={paths[name]}"]
        return args + ["--fetch", sig["outputs"][0]]
    args = [os.path.join(d, "function.pb")]
    for c in meta["captures"]:
        flag = "--assign" if c["kind"] == "variable" else "--feed"
        args += [flag, f"{c['placeholder']}={os.path.join(d, c['file'])}"]
    for feed, name in zip(meta["function"]["feeds"], meta["inputs"]):
        args += ["--feed", f"{feed}={paths[name]}"]
    return args + ["--fetch", meta["function"]["fetches"][0]]


def run_xlens(binary, meta, mode, steps, outputs=None):
    cmd = [binary, "graph", "run", *xlens_args(meta, mode), "--jit", mode, "--steps", str(steps)]
    if outputs:
        cmd += ["--outputs", outputs]
    env = dict(os.environ)
    env["TF_XLA_FLAGS"] = AUTO_FLAGS if mode == "auto" else ""
    run = subprocess.run(cmd, capture_output=True, text=True, env=env)
    m = re.search(r"median ([0-9.]+) ms per step", run.stdout)
    if run.returncode != 0 or not m:
        raise RuntimeError(f"{' '.join(cmd)}\n{run.stdout[-800:]}{run.stderr[-800:]}")
    return float(m.group(1)), run.stdout


def check_xlens(np, binary, meta, mode):
    steps = meta.get("steps", 2)
    with tempfile.TemporaryDirectory() as out:
        _, stdout = run_xlens(binary, meta, mode, steps, out)
        if meta["kind"] == "inference":
            got = [np.load(os.path.join(out, "out0.npy"))]
        else:
            fetch = xlens_args(meta, mode)[-1].split(":")[0]
            losses = [float(m.group(1)) for line in stdout.splitlines() if fetch in line
                      for m in [re.search(r"step \d+.*?([-+0-9.eE]+)\s*$", line)] if m]
            got = [np.asarray(losses, np.float32)]
    return compare_reference(np, meta, got, mode)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--xlens", action="append", required=True,
                   help="the xlens binary, or LABEL=PATH to compare several (repeat)")
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated corpus models")
    p.add_argument("--corpus", default="/tmp/model_corpus_ci", help="a built model corpus")
    p.add_argument("--modes", default="compile,auto",
                   help="compile (against jit_compile), auto (against auto-clustering)")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--steps", type=int, default=30, help="timed steps per side per round")
    p.add_argument("--json", help="also write the figures here")
    args = p.parse_args()
    binaries = []
    for spec in args.xlens:
        label, _, path = spec.rpartition("=")
        binaries.append((label or "xlens", os.path.abspath(path)))
    # Auto-clustering for TensorFlow's plain functions; jit_compile functions compile either way.
    os.environ["TF_XLA_FLAGS"] = AUTO_FLAGS
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import numpy as np
        import tensorflow as tf
    except ImportError as e:
        print(f"skipped: {e}")
        return 77
    models = [m for m in args.models.split(",") if m]
    modes = [m for m in args.modes.split(",") if m]
    ensure_corpus(args.corpus, models)
    metas = {m: load_meta(args.corpus, m) for m in models}
    tf_mode = {"compile": "xla", "auto": "auto"}
    sides, agree = {}, {}
    for m in models:
        sides[m] = TfSide(tf, np, metas[m])
        for mode in modes:
            agree[(m, "tf", mode)] = sides[m].check(tf_mode[mode])
            for label, binary in binaries:
                agree[(m, label, mode)] = check_xlens(np, binary, metas[m], mode)
        sides[m].warm(5)
    times = {(m, mode): {"tf": []} | {label: [] for label, _ in binaries}
             for m in models for mode in modes}
    overhead = {m: [] for m in models}
    # The machine's load (1-minute average) after each round: the figures' context on a shared
    # machine, where other work moves the wall times by more than the changes measured.
    loads = []
    for r in range(args.rounds):
        for m in models:
            for mode in modes:
                order = [("tf", None)] + binaries
                if r % 2:
                    order.reverse()
                for label, binary in order:
                    if binary is None:
                        ms, empty = sides[m].time(tf_mode[mode], args.steps)
                        overhead[m].append(empty)
                    else:
                        ms, _ = run_xlens(binary, metas[m], mode, args.steps)
                    times[(m, mode)][label].append(ms)
        loads.append(os.getloadavg()[0])
        print(f"round {r + 1}/{args.rounds} done (load average {loads[-1]:.2f})", file=sys.stderr)

    names = {"compile": "TF XLA", "auto": "TF auto"}
    summary = {}
    for mode in modes:
        header = f"{'model':<18}{names[mode] + ' ms':>12}"
        for label, _ in binaries:
            header += f"{label + ' ms':>14}{'TF/' + label:>12}{'min..max':>14}"
        print(f"\n--jit={mode} against {'tf.function(jit_compile=True)' if mode == 'compile' else 'auto-clustering'}")
        print(header + "  outputs")
        for m in models:
            t = times[(m, mode)]
            tf_ms = statistics.median(t["tf"])
            line = f"{m:<18}{tf_ms:>12.3f}"
            entry = {"tf_ms": t["tf"], "tf_call_overhead_ms": overhead[m]}
            for label, _ in binaries:
                ours = statistics.median(t[label])
                ratios = [a / b for a, b in zip(t["tf"], t[label])]
                line += f"{ours:>14.3f}{tf_ms / ours:>11.2f}x{min(ratios):>8.2f}..{max(ratios):.2f}"
                entry[label + "_ms"] = t[label]
            problems = [f"{who}: {agree[(m, who, mode)]}" for who in ["tf"] + [l for l, _ in binaries]
                        if agree[(m, who, mode)]]
            print(line + "  " + ("agree" if not problems else "; ".join(problems)))
            summary[f"{m}/{mode}"] = entry
    print(f"\nTensorFlow's call overhead taken off (median ms): "
          + ", ".join(f"{m} {statistics.median(overhead[m]):.3f}" for m in models))
    print(f"load average over the rounds: {min(loads):.1f} to {max(loads):.1f} "
          f"on {os.cpu_count()} CPUs")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(summary, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
