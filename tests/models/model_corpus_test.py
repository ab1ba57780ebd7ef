#!/usr/bin/env python3
"""Real models in xlens: every model of the corpus (tests/models/make_model_corpus.py, made now
with TensorFlow) loads, runs op by op, with --jit=auto and with --jit=compile, in each of its
forms, to TensorFlow's numbers; and `xlens cluster` makes TensorFlow's partition, node for node,
on every graph TensorFlow's auto-clustering saw for it. Two small models (model_aot.py) are also
compiled ahead of time with `xlens aot` and run by a program that links only the object.

    model_corpus_test.py --xlens XLENS [--corpus DIR] [--models a,b] [--no-aot] [--keep]

Forms and what they are checked against (within TOLERANCE of the largest reference value):
  frozen.pb        --feed the inputs; --jit=off to TensorFlow's executor, --jit=auto to its
                   auto-clustering run, --jit=compile to tf.function(jit_compile=True)
  function.pb      the TF2 function graph, its captured variables bound with --assign by the
                   capture's Placeholder name
  saved_model/     `xlens graph run DIR --signature NAME`, the variables read from the bundle
A training step runs STEPS steps and each step's loss is compared.

With --corpus DIR an existing corpus is used (made when absent). Prints one line per check and
the totals; exits 1 on any failure, 77 (skipped) without TensorFlow."""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77
TOLERANCE = 1e-4
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_model_corpus  # noqa: E402  (the model names; it imports TensorFlow only when run)
AUTO_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
REFERENCE = {"off": "expected", "auto": "expected_auto", "compile": "expected_jit"}
# The JIT modes each form runs in. The frozen graph runs in all three; the function graph adds
# what binding captured variables changes (op by op, and compiled with the variables as
# parameters); the SavedModel adds reading the bundle (op by op, and auto-clustered). A training
# step runs its function graph in all three.
MATRIX = {
    "inference": {"frozen": ("off", "auto", "compile"), "function": ("off", "compile"),
                  "saved_model": ("off", "auto")},
    "train": {"function": ("off", "auto", "compile"), "saved_model": ("off", "compile")},
}


class Checks:
    def __init__(self):
        self.passed, self.failed = [], []

    def ok(self, what, detail=""):
        self.passed.append(what)
        print(f"ok   {what} {detail}".rstrip(), flush=True)

    def fail(self, what, detail):
        self.failed.append(what)
        print(f"FAIL {what}: {detail}", flush=True)


def run_xlens(xlens, args, env=None, timeout=600):
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        p = subprocess.run([xlens, *args], capture_output=True, text=True, timeout=timeout,
                           env=full_env)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s"
    if p.returncode != 0:
        lines = (p.stderr or p.stdout).strip().splitlines()
        return None, f"exit {p.returncode}: {lines[-1][:400] if lines else ''}"
    return p, None


def compare(np, got, want, tolerance=TOLERANCE):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return f"shape {got.shape}, TensorFlow's {want.shape}"
    scale = float(np.max(np.abs(want))) if want.size else 0.0
    err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
    if not np.isfinite(err) or err > tolerance * max(scale, 1e-30):
        return f"max error {err:.3g} > {tolerance} x {scale:.3g}"
    return None


def parse_losses(stdout, fetch):
    """`graph run --steps N` prints a scalar fetch once per step: 'step K: NAME = VALUE' or the
    final 'NAME: float [] [VALUE]' line."""
    values = []
    for line in stdout.splitlines():
        m = re.search(r"step \d+.*?([-+0-9.eE]+(?:nan|inf)?)\s*$", line)
        if m and fetch.split(":")[0] in line:
            values.append(float(m.group(1)))
    return values


def graph_args(meta, form, model_dir):
    """The feeds, assigns and fetches of one form."""
    inputs = {n: os.path.join(model_dir, "inputs", f"{n}.npy") for n in meta["inputs"]}
    args = []
    if form == "saved_model":
        sig = meta["signature"]
        args += [os.path.join(model_dir, "saved_model"), "--signature", sig["name"]]
        for sig_input, name in sig["feeds"].items():
            args += ["--feed", f"{sig_input}={inputs[name]}"]
        fetches = list(sig["outputs"]) if meta["kind"] == "inference" else ["loss"]
    else:
        spec = meta[form]
        args.append(os.path.join(model_dir, f"{form}.pb"))
        for feed, name in zip(spec["feeds"], meta["inputs"]):
            args += ["--feed", f"{feed}={inputs[name]}"]
        if form == "function":
            for c in meta["captures"]:
                flag = "--assign" if c["kind"] == "variable" else "--feed"
                args += [flag, f"{c['placeholder']}={os.path.join(model_dir, c['file'])}"]
        fetches = spec["fetches"]
    for f in fetches:
        args += ["--fetch", f]
    return args, fetches


def check_runs(np, xlens, checks, model_dir, meta, forms, jits):
    name = meta["name"]
    for form, form_jits in MATRIX[meta["kind"]].items():
        if form not in forms:
            continue
        for jit in (j for j in form_jits if j in jits):
            what = f"{name} {form} --jit={jit}"
            args, fetches = graph_args(meta, form, model_dir)
            env = {}
            steps = meta.get("steps", 1)
            if jit == "auto":
                env["TF_XLA_FLAGS"] = AUTO_FLAGS
                # TensorFlow compiles a cluster lazily, after it has run once; inference runs a
                # second step so the compiled cluster gives the answer.
                steps = max(steps, 2) if meta["kind"] == "inference" else steps
            with tempfile.TemporaryDirectory() as out:
                start = time.time()
                p, err = run_xlens(xlens, ["graph", "run", *args, "--jit", jit, "--steps",
                                           str(steps), "--outputs", out], env)
                if err:
                    checks.fail(what, err)
                    continue
                ref = os.path.join(model_dir, REFERENCE[jit])
                if meta["kind"] == "inference":
                    problems = []
                    for i in range(len(fetches)):
                        got = np.load(os.path.join(out, f"out{i}.npy"))
                        want = np.load(os.path.join(ref, f"out{i}.npy"))
                        problem = compare(np, got, want)
                        if problem:
                            problems.append(f"output {i}: {problem}")
                else:
                    want = np.load(os.path.join(ref, "losses.npy"))
                    got = parse_losses(p.stdout, fetches[0])
                    problems = [] if len(got) == len(want) else [
                        f"{len(got)} losses printed, {len(want)} expected: {p.stdout[-300:]!r}"]
                    if not problems:
                        problem = compare(np, np.asarray(got, np.float32), want)
                        if problem:
                            problems.append(f"losses {got} against TensorFlow's "
                                            f"{want.tolist()}: {problem}")
                if problems:
                    checks.fail(what, "; ".join(problems))
                else:
                    checks.ok(what, f"({time.time() - start:.1f} s)")


def tf_partition(graph_pb2, text_format, path):
    graph = graph_pb2.GraphDef()
    with open(path) as f:
        text_format.Parse(f.read(), graph, allow_unknown_field=True)
    clusters = {}
    for node in graph.node:
        if "_XlaCluster" in node.attr:
            clusters.setdefault(node.attr["_XlaCluster"].s.decode(), set()).add(node.name)
    return [n.name for n in graph.node], clusters


def check_clustering(xlens, checks, model_dir, meta, graph_pb2, text_format):
    """xlens's partition of each graph TensorFlow's mark_for_compilation saw, against the
    partition TensorFlow wrote for it: the same node sets, node for node."""
    dump = os.path.join(model_dir, "tf_dump")
    if not os.path.isdir(dump):
        checks.fail(f"{meta['name']} clustering", "TensorFlow wrote no tf_dump")
        return
    graphs = agreeing = nodes_total = differing_graphs = 0
    for before in sorted(os.listdir(dump)):
        m = re.fullmatch(r"before_mark_for_compilation(_\d+)?\.pbtxt", before)
        if not m:
            continue
        after = os.path.join(dump, f"mark_for_compilation{m.group(1) or ''}.pbtxt")
        if not os.path.exists(after):
            continue
        names, want = tf_partition(graph_pb2, text_format, after)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "clusters.json")
            _, err = run_xlens(xlens, ["cluster", os.path.join(dump, before), "--json", out],
                               {"TF_XLA_FLAGS": AUTO_FLAGS})
            if err:
                checks.fail(f"{meta['name']} cluster {before}", err)
                continue
            with open(out) as f:
                got = {k: set(v) for k, v in json.load(f)["clusters"].items()}
        want_of = {n: frozenset(c) for c in want.values() for n in c}
        got_of = {n: frozenset(c) for c in got.values() for n in c}
        agree = sum(1 for n in names if want_of.get(n) == got_of.get(n))
        graphs += 1
        agreeing += agree
        nodes_total += len(names)
        if agree != len(names):
            differing_graphs += 1
            differ = [n for n in names if want_of.get(n) != got_of.get(n)][:3]
            checks.fail(f"{meta['name']} cluster {before}",
                        f"{agree} of {len(names)} nodes agree ({len(got)} clusters, TensorFlow's "
                        f"{len(want)}); first differing: {differ}")
    summary = f"{graphs} graphs, {agreeing} of {nodes_total} nodes in TensorFlow's partition"
    if not graphs:
        checks.fail(f"{meta['name']} clustering", "no before_mark_for_compilation graph dumped")
    elif differing_graphs:
        checks.fail(f"{meta['name']} clustering", f"{differing_graphs} graphs differ; {summary}")
    else:
        checks.ok(f"{meta['name']} clustering", f"({summary})")


def check_hlo_dumps(xlens, checks, corpus, names):
    """No HLO module XLA dumped for the corpus (made for `names`) makes a command fail or crash:
    every module prints, each jit_compile module before optimizations compiles and runs (its
    elided constants filled), and `xlens inspect` reads each dump directory."""
    root = os.path.join(corpus, "xla_dump")
    for kind in ("jit_compile", "auto_clustering"):
        directory = os.path.join(root, kind)
        what = f"xla_dump/{kind} ({names[0]}..{names[-1]})"
        if not os.path.isdir(directory):
            checks.fail(what, "XLA dumped nothing")
            continue
        modules = sorted(f for f in os.listdir(directory)
                         if f.endswith((".before_optimizations.txt",
                                        ".cpu_after_optimizations.txt")))
        failures, ran = [], 0
        start = time.time()
        for module in modules:
            path = os.path.join(directory, module)
            _, err = run_xlens(xlens, ["print", path])
            if err:
                failures.append(f"print {module}: {err}")
            if kind == "jit_compile" and module.endswith(".before_optimizations.txt"):
                _, err = run_xlens(xlens, ["run", path, "--fill_elided_constants", "random"])
                ran += 1
                if err:
                    failures.append(f"run {module}: {err}")
        _, err = run_xlens(xlens, ["inspect", directory])
        if err:
            failures.append(f"inspect: {err}")
        if failures:
            checks.fail(what, f"{len(failures)} failures; " + "; ".join(failures[:3]))
        else:
            checks.ok(what, f"({len(modules)} modules printed, {ran} compiled and "
                      f"run, inspect read the directory; {time.time() - start:.0f} s)")


# Models made in one TensorFlow process; CI_MODELS orders the large applications so that no
# batch holds two of them.
BATCH = 4


class CorpusMaker:
    """make_model_corpus.py --serve: one TensorFlow process builds every batch. A process a batch
    started TensorFlow again for each: 5.1-14.3 s of a batch's making (median 7) beside its builds
    and auto-clustering run, against 0.4-1.9 s in the one process."""

    def __init__(self, corpus):
        self.corpus = corpus
        self.server = None

    def make_missing(self, names):
        missing = [m for m in names if not os.path.exists(os.path.join(self.corpus, m, "meta.json"))]
        if not missing:
            return True
        start = time.time()
        if self.server is None:
            self.server = subprocess.Popen(
                [sys.executable, os.path.join(HERE, "make_model_corpus.py"), self.corpus,
                 "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.server.stdin.write(" ".join(missing) + "\n")
        self.server.stdin.flush()
        for line in self.server.stdout:
            if line.strip() == make_model_corpus.SERVED:
                break
            print(line, end="", flush=True)
        else:
            print(f"FAIL: make_model_corpus.py failed (exit {self.server.wait()})")
            return False
        print(f"corpus of {len(missing)} models made in {time.time() - start:.0f} s", flush=True)
        return True

    def close(self):
        if self.server is not None:
            self.server.stdin.close()
            self.server.wait()


def check_batch(np, args, checks, corpus, names, graph_pb2, text_format):
    for name in names:
        model_dir = os.path.join(corpus, name)
        with open(os.path.join(model_dir, "meta.json")) as f:
            meta = json.load(f)
        check_runs(np, args.xlens, checks, model_dir, meta, args.forms.split(","),
                   args.jit.split(","))
        if not args.no_clustering:
            check_clustering(args.xlens, checks, model_dir, meta, graph_pb2, text_format)
    if not args.no_aot:
        import model_aot
        model_aot.check_models(np, compare, args.xlens, checks, corpus, names)
    check_hlo_dumps(args.xlens, checks, corpus, names)


def prune(corpus, names):
    """Everything of `names` but meta.json (what op_coverage.py reads), and XLA's dumps."""
    for name in names:
        model_dir = os.path.join(corpus, name)
        for entry in os.listdir(model_dir):
            if entry != "meta.json":
                path = os.path.join(model_dir, entry)
                shutil.rmtree(path) if os.path.isdir(path) else os.remove(path)
    shutil.rmtree(os.path.join(corpus, "xla_dump"), ignore_errors=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--corpus", help="reuse (or make here) the corpus")
    parser.add_argument("--models", default="all",
                        help="comma-separated names, 'ci' (CI's set) or 'all' (the default)")
    parser.add_argument("--op-table", metavar="README",
                        help="also check README's op table against the corpus (op_coverage.py)")
    parser.add_argument("--forms", default="frozen,function,saved_model")
    parser.add_argument("--jit", default="off,auto,compile")
    parser.add_argument("--no-clustering", action="store_true")
    parser.add_argument("--no-aot", action="store_true",
                        help="skip compiling model_aot.py's models ahead of time")
    args = parser.parse_args()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import numpy as np
        from google.protobuf import text_format
        from tensorflow.core.framework import graph_pb2
    except Exception as e:  # noqa: BLE001
        print(f"skipped: tensorflow is not importable ({type(e).__name__}: {e})")
        return SKIP

    tmp = None
    corpus = args.corpus
    if corpus is None:
        tmp = tempfile.TemporaryDirectory(prefix="xlens-models-")
        corpus = tmp.name
    names = {"all": make_model_corpus.model_names(),
             "ci": make_model_corpus.CI_MODELS}.get(args.models, args.models.split(","))
    # A corpus of its own is made and checked a few models at a time, and each batch's weights and
    # dumps are removed once checked (meta.json stays for the op table): the whole corpus holds
    # every model's weights three times (frozen, captured, saved) and is 2 GB, more than a CI
    # machine may have free. A corpus given with --corpus is kept whole.
    batches = [names] if args.corpus else [names[i:i + BATCH] for i in range(0, len(names), BATCH)]
    checks = Checks()
    maker = CorpusMaker(corpus)
    try:
        for batch in batches:
            if not maker.make_missing(batch):
                return 1
            check_batch(np, args, checks, corpus, batch, graph_pb2, text_format)
            if tmp is not None:
                prune(corpus, batch)
    finally:
        maker.close()
    if args.op_table:
        # In this process, where TensorFlow is imported already (see op_coverage.check).
        import op_coverage
        failed, report = op_coverage.check(args.xlens, corpus, args.op_table)
        if failed:
            checks.fail("op table", " ".join(report))
        else:
            checks.ok("op table", f"({report[-1]})")
    print(f"{len(checks.passed)} passed, {len(checks.failed)} failed")
    if checks.failed:
        print("failed: " + ", ".join(checks.failed))
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
