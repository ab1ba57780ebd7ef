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
import subprocess
import sys

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
    whose stderr (also printed) says which script did not finish."""
    cmd = [sys.executable, os.path.abspath(script)] + list(args)
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
