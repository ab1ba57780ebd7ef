"""What the tests that hold xlens to TensorFlow share (graph/*_vs_tensorflow.py, rnn_parity_test.py,
cluster/functionalize_vs_tensorflow.py, ...): TensorFlow imported or the test skipped, TensorFlow
run in a process of its own (its flags, dumps and logging set by the environment), `xlens graph
run` driven with .npy feeds, and outputs compared to TensorFlow's.

A test script imports it from the directory above its own:

    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    import tf_driver
"""
import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile

SKIPPED = 77  # ctest's SKIP_RETURN_CODE for these tests


def parse_args(keep_help):
    """The arguments of a test that builds its cases as it runs them: --xlens PATH, and --keep DIR
    (`keep_help`: what is written there instead of a temporary directory)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--keep", help=keep_help)
    return parser.parse_args()


def finish(failures, summary):
    """Prints each failure and the summary line: the test's exit code."""
    for f in failures:
        print(f"FAIL {f}")
    print(summary)
    return 1 if failures else 0


def tensorflow_or_skip():
    """(tf, np), TensorFlow's logging quiet; without TensorFlow, says why and ends the test as
    skipped (SystemExit(SKIPPED), through the script's `finally` blocks)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    try:
        import numpy as np
        import tensorflow as tf
    except Exception as e:  # ImportError, or a broken installation
        print(f"skipped: tensorflow is not importable ({type(e).__name__}: {e})")
        raise SystemExit(SKIPPED)
    return tf, np


def tensorflow_env(xla_flags=None, dump_to=None, **extra):
    """The environment of a child process: this one's, TensorFlow's logging quiet, TF_XLA_FLAGS and
    TF_DUMP_GRAPH_PREFIX as given (removed when None: a parent's flags never leak into a child),
    and any other variables given."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    for key, value in (("TF_XLA_FLAGS", xla_flags), ("TF_DUMP_GRAPH_PREFIX", dump_to)):
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    env.update(extra)
    return env


# How long a test's TensorFlow side may run (building its graphs takes up to a minute on one
# core): under the 300 s CTest gives most of these tests, so a hung TensorFlow is killed and
# named here instead of outliving the test CTest stops.
SCRIPT_TIMEOUT = 240


def run_script(script, args, env=None, timeout=SCRIPT_TIMEOUT, **kwargs):
    """Runs `script` (a test's own file, for its TensorFlow side) with `args` in a new Python, for
    at most `timeout` seconds. Past it the child is killed and the result is a failure, exit 124,
    whose stderr (also printed) says which script did not finish.

    The child's TMPDIR is a folder of its own, removed when the child ends: TensorFlow's autograph
    writes __autograph_generated_file*.py there and removes them only at a clean interpreter exit,
    which a child that ends with os._exit (or is killed) never has."""
    cmd = [sys.executable, os.path.abspath(script)] + list(args)
    child_tmp = tempfile.mkdtemp(prefix="xlens-tf-child-")
    env = dict(os.environ if env is None else env, TMPDIR=child_tmp)
    try:
        return subprocess.run(cmd, env=env, timeout=timeout, **kwargs)
    except subprocess.TimeoutExpired as e:
        message = (f"{os.path.basename(script)} {' '.join(args)} did not finish within "
                   f"{timeout} s and was stopped")
        print(message, file=sys.stderr)
        text = kwargs.get("text") or kwargs.get("universal_newlines")
        out = e.stdout
        if text and isinstance(out, bytes):
            out = out.decode(errors="replace")
        return subprocess.CompletedProcess(cmd, 124, out, message if text else message.encode())
    finally:
        shutil.rmtree(child_tmp, ignore_errors=True)


def save_case(np, directory, name, graph_def, x, refs, meta):
    """Writes one case as built_cases and compare_to_references read it: NAME.pb (the GraphDef),
    NAME.in.npy (its input), NAME.ref<k>.npy (TensorFlow's outputs) and, last, NAME.meta (the
    lines of `meta`: what the test needs to run the case)."""
    with open(os.path.join(directory, name + ".pb"), "wb") as f:
        f.write(graph_def.SerializeToString())
    np.save(os.path.join(directory, name + ".in.npy"), x)
    for k, r in enumerate(refs):
        np.save(os.path.join(directory, f"{name}.ref{k}.npy"), np.asarray(r))
    with open(os.path.join(directory, name + ".meta"), "w") as f:
        f.write("\n".join(meta))


def built_cases(script, xlens, workdir, args=(), timeout=SCRIPT_TIMEOUT):
    """The cases TensorFlow built in `workdir` (NAME for every NAME.meta there): when there are none
    yet, `script --xlens XLENS --workdir WORKDIR --build-only ARGS` builds them first, in a process
    of its own (TensorFlow's clustering flags are read once per process) given `timeout` seconds.
    A list, or the exit code to return: SKIPPED without TensorFlow, 1 when the build failed."""
    def listed():
        return sorted(f[:-5] for f in os.listdir(workdir) if f.endswith(".meta"))
    cases = listed()
    if cases:
        return cases
    if importlib.util.find_spec("tensorflow") is None:
        print("skipped: tensorflow is not installed")
        return SKIPPED
    built = run_script(script, ["--xlens", xlens, "--workdir", workdir, "--build-only", *args],
                       env=tensorflow_env(), timeout=timeout)
    if built.returncode != 0:
        print(f"TensorFlow could not build the graphs (exit {built.returncode})")
        return 1
    return listed()


def save_feeds(np, directory, feeds, stem=""):
    """Saves each (name, array) of `feeds` as DIRECTORY/STEMNAME.npy: the [(name, path)] of
    graph_run's feeds."""
    saved = []
    for name, value in feeds:
        path = os.path.join(directory, f"{stem}{name}.npy")
        np.save(path, value)
        saved.append((name, path))
    return saved


def graph_run_command(xlens, graph, feeds, fetches, outputs, extra=()):
    """`xlens graph run GRAPH --outputs DIR EXTRA... --feed NAME=PATH... --fetch NAME...`."""
    cmd = [xlens, "graph", "run", graph, "--outputs", outputs, *extra]
    for name, path in feeds:
        cmd += ["--feed", f"{name}={path}"]
    for fetch in fetches:
        cmd += ["--fetch", fetch]
    return cmd


def graph_run(xlens, graph, feeds, fetches, outputs, extra=(), env=None, timeout=120):
    """Runs graph_run_command's command; its CompletedProcess, output as text. Output k is
    OUTPUTS/out<k>.npy (load_outputs)."""
    return subprocess.run(graph_run_command(xlens, graph, feeds, fetches, outputs, extra),
                          capture_output=True, text=True, timeout=timeout, env=env)


def load_outputs(np, outputs, count):
    """The arrays `xlens graph run --outputs OUTPUTS` wrote for `count` fetches."""
    return [np.load(os.path.join(outputs, f"out{k}.npy")) for k in range(count)]


def refused_in_one_line(proc):
    """Whether xlens refused as it must: exit 1 and one line of its own on stderr."""
    lines = proc.stderr.strip().splitlines()
    return proc.returncode == 1 and len(lines) == 1 and lines[0].startswith("xlens")


def max_error(np, got, want, floor):
    """(the largest |got - want|, the scale it is held to: the largest |want|, at least `floor`);
    (0, floor) for empty arrays. Compared in float64."""
    got = np.asarray(got, np.float64)
    want = np.asarray(want, np.float64)
    if not want.size:
        return 0.0, floor
    return float(np.max(np.abs(got - want))), max(floor, float(np.max(np.abs(want))))


def compare_to_references(np, name, workdir, outputs, count, tolerance):
    """Output k of `xlens graph run --outputs OUTPUTS` against WORKDIR/NAME.ref<k>.npy, each within
    `tolerance` of its largest reference value (at least 1): the errors, one line each."""
    errors = []
    for k in range(count):
        ref = np.load(os.path.join(workdir, f"{name}.ref{k}.npy"))
        path = os.path.join(outputs, f"out{k}.npy")
        if not os.path.exists(path):
            return [f"output {k} was not written"]
        got = np.load(path)
        if got.shape != ref.shape:
            errors.append(f"output {k}: shape {got.shape}, TensorFlow's is {ref.shape}")
            continue
        err, scale = max_error(np, got, ref, 1.0)
        if err > tolerance * scale:
            errors.append(f"output {k}: off by {err:.3g} (largest value {scale:.3g})")
    return errors


def parity_parser():
    """The arguments of a test whose TensorFlow side builds its cases in a process of its own
    (built_cases): --xlens PATH, --workdir DIR (kept, TensorFlow's outputs there reused), --only
    NAME and the hidden --build-only; the test adds its own."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--workdir", help="keep (and reuse) TensorFlow's graphs and outputs here")
    parser.add_argument("--only", help="run only the cases whose name contains this")
    parser.add_argument("--build-only", action="store_true", help=argparse.SUPPRESS)
    return parser


def case_meta(workdir, name):
    """(feed, fetches, compile_ok) of a case whose NAME.meta holds those three lines (save_case):
    the input's name, the fetches (a list) and what --jit=compile must do: "compile", "refused"
    (TensorFlow's XLA refuses the graph) or "nocompile" (not tried)."""
    with open(os.path.join(workdir, name + ".meta")) as f:
        feed, fetches, compile_ok = f.read().split("\n")
    return feed, fetches.split(","), compile_ok


def run_case_modes(np, xlens, workdir, name, tolerance, known_gaps=None):
    """Runs the case `name` of `workdir` (case_meta) with `xlens graph run` op by op, with
    --jit=auto and, unless it is "nocompile", with --jit=compile, every output within `tolerance`
    of TensorFlow's (compare_to_references). Where TensorFlow's XLA refuses the graph, or it is in
    `known_gaps` ({name: why}: what TensorFlow compiles and xlens does not yet), --jit=compile
    must be refused in one line of xlens's own. Prints a line a run; (failures, runs)."""
    known_gaps = known_gaps or {}
    feed, fetches, compile_ok = case_meta(workdir, name)
    modes = ["off", "auto"] + (["compile"] if compile_ok != "nocompile" else [])
    failures = []
    for mode in modes:
        out_dir = tempfile.mkdtemp(prefix=f"{name}_{mode}_", dir=workdir)
        proc = graph_run(xlens, os.path.join(workdir, name + ".pb"),
                         [(feed, os.path.join(workdir, name + ".in.npy"))], fetches, out_dir,
                         ["--jit", mode, "--timeout", "60"], timeout=None)
        if mode == "compile" and name in known_gaps:
            if proc.returncode == 0:
                failures.append(f"{name} --jit=compile: compiles now; take it out of the known "
                                "gaps")
            elif not refused_in_one_line(proc):
                failures.append(f"{name} --jit=compile: exit {proc.returncode}: "
                                f"{proc.stderr[-300:]}")
            print(f"{name} --jit=compile: refused (known gap: {known_gaps[name]})")
            continue
        if mode == "compile" and compile_ok == "refused":
            if not refused_in_one_line(proc):
                failures.append(f"{name} --jit=compile: TensorFlow's XLA refuses it, xlens "
                                f"gave exit {proc.returncode}: {proc.stderr[-300:]}")
            print(f"{name} --jit=compile: refused as by TensorFlow: {proc.stderr.strip()}")
            continue
        if proc.returncode != 0:
            failures.append(f"{name} --jit={mode}: exit {proc.returncode}: "
                            f"{(proc.stderr or proc.stdout).strip()[-600:]}")
            continue
        errors = compare_to_references(np, name, workdir, out_dir, len(fetches), tolerance)
        worst = 0.0
        for k in range(len(fetches) if not errors else 0):
            ref = np.load(os.path.join(workdir, f"{name}.ref{k}.npy"))
            got = np.load(os.path.join(out_dir, f"out{k}.npy"))
            err, scale = max_error(np, got, ref, 1.0)
            worst = max(worst, err / scale)
        failures += [f"{name} --jit={mode}: {e}" for e in errors]
        print(f"{name} --jit={mode}: " +
              (f"ok (largest error {worst:.2g} of the largest value)" if not errors
               else "FAILED"))
    return failures, len(modes)


def cluster_assignment(path):
    """{node: cluster} of a mark_for_compilation.pbtxt dump; {} when there is none."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        text = f.read()
    out = {}
    for m in re.finditer(r'node \{\n  name: "([^"]+)"(.*?)\n\}', text, re.S):
        c = re.search(r'key: "_XlaCluster"\n    value \{\n      s: "([^"]+)"', m.group(2))
        if c:
            out[m.group(1)] = c.group(1)
    return out


def compare_clusters(xlens, name, workdir, tf_dir, flags, same_names=False):
    """`xlens cluster` with TensorFlow's clustering `flags` on TensorFlow's
    TF_DIR/before_mark_for_compilation.pbtxt against TensorFlow's mark_for_compilation.pbtxt
    there: (errors, nodes clustered, clusters). With `same_names` each node's cluster must have
    TensorFlow's name; else the partitions are compared, each node's cluster named by the nodes it
    holds (TensorFlow numbers its clusters across the sessions of its process)."""
    before = os.path.join(tf_dir, "before_mark_for_compilation.pbtxt")
    if not os.path.exists(before):
        return ["TensorFlow wrote no before_mark_for_compilation.pbtxt"], 0, 0
    ours_dir = tempfile.mkdtemp(prefix=name + "_cluster_", dir=workdir)
    env = dict(os.environ, TF_DUMP_GRAPH_PREFIX=ours_dir)
    proc = subprocess.run([xlens, "cluster", before, "--jit-level", "ON_1"] + list(flags),
                          env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return [f"xlens cluster: exit {proc.returncode}: {proc.stderr[-400:]}"], 0, 0
    theirs = cluster_assignment(os.path.join(tf_dir, "mark_for_compilation.pbtxt"))
    ours = cluster_assignment(os.path.join(ours_dir, "mark_for_compilation.pbtxt"))

    def members(assignment):
        if same_names:
            return assignment
        groups = {}
        for node, cluster in assignment.items():
            groups.setdefault(cluster, set()).add(node)
        return {node: min(groups[cluster]) for node, cluster in assignment.items()}

    theirs_by, ours_by = members(theirs), members(ours)
    errors = [f"node {n}: TensorFlow's cluster {theirs.get(n)} (with {theirs_by.get(n)}), "
              f"xlens's {ours.get(n)} (with {ours_by.get(n)})"
              for n in sorted(set(theirs) | set(ours)) if theirs_by.get(n) != ours_by.get(n)]
    return errors[:10], len(theirs), len(set(theirs.values()))


def run_parity_cases(script, args, workdir, tolerance, check_clusters=None, known_gaps=None):
    """Every case `script` builds in `workdir` (built_cases) whose name holds `args.only`, run by
    run_case_modes, and where `check_clusters(name)` gives (errors, nodes, clusters), not None,
    clustered as TensorFlow clusters it. Prints a line a run and the summary: the exit code."""
    os.makedirs(workdir, exist_ok=True)
    cases = built_cases(script, args.xlens, workdir)
    if isinstance(cases, int):
        return cases
    import numpy as np
    failures = []
    runs = 0
    for name in cases:
        if args.only and args.only not in name:
            continue
        errors, ran = run_case_modes(np, args.xlens, workdir, name, tolerance, known_gaps)
        failures += errors
        runs += ran
        clustered = check_clusters(name) if check_clusters else None
        if clustered is None:
            continue
        errors, nodes, clusters = clustered
        runs += 1
        failures += [f"{name} clustering: {e}" for e in errors]
        print(f"{name} clustering: " + (f"TensorFlow's, node for node ({nodes} nodes in "
                                        f"{clusters} clusters)" if not errors else "FAILED"))
    return finish(failures, f"{runs} runs, {len(failures)} failures")


def in_workdir(workdir, prefix, run):
    """run(WORKDIR): in `workdir` when given (kept, and TensorFlow's outputs there reused), else in
    a temporary directory named from `prefix`, removed after."""
    path = os.path.abspath(workdir or tempfile.mkdtemp(prefix=prefix))
    try:
        return run(path)
    finally:
        if not workdir:
            shutil.rmtree(path, ignore_errors=True)


def parity_main(script, args, build_graphs, prefix, tolerance, check_clusters=None,
                known_gaps=None):
    """A parity test's main after its own arguments (parity_parser): with --build-only,
    `build_graphs(WORKDIR)` (TensorFlow's side) and the process ends at once (TensorFlow's objects
    complain while the interpreter tears them down); else run_parity_cases in in_workdir(`prefix`),
    `check_clusters(WORKDIR, NAME)` comparing a case's clustering. The exit code."""
    if args.build_only:
        build_graphs(args.workdir)
        sys.stdout.flush()
        os._exit(0)

    def run(workdir):
        check = (lambda name: check_clusters(workdir, name)) if check_clusters else None
        return run_parity_cases(script, args, workdir, tolerance, check, known_gaps)

    return in_workdir(args.workdir, prefix, run)
