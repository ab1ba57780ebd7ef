#!/usr/bin/env python3
"""Peak memory of a long TF1 while loop: `xlens graph run` against TensorFlow's own session.

TensorFlow builds the graph: tf.compat.v1.while_loop over (i, x) with x: f32[SIZE], the body
x + 1, for ITERATIONS iterations, then y = reduce_max(x) (= ITERATIONS), with TF1's control flow
(Enter, Merge, Switch, NextIteration, Exit). The GraphDef is written as text; TensorFlow then runs it in a TF1 session in a child process, and xlens runs the same file with
`graph run --fetch y`. Each side's peak RSS is its child's ru_maxrss (wait4), so neither counts the
other or this script. A loop whose executor frees finished iterations holds a few values of 256 KiB
whatever the count; one that keeps them all holds ITERATIONS of them.

Also measured: the time to inline a chain of N functions, each calling the next (N = 1k, 2k, 4k):
the lowering pass should be linear in the chain, so each doubling about doubles the time.

Usage: tests/bench/graph_loop_memory.py --xlens build/compiler/cli/xlens [--iterations 20000]
                                        [--size 65536] [--chains 1000,2000,4000] [--keep DIR]
                                        [--control-flow v1|v2]
Not part of CI (TensorFlow takes seconds to start). Exit status: 0 when both answers are right,
1 otherwise, 77 without TensorFlow.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hardening"))

RUN_TF = r"""
import sys
import tensorflow as tf
from google.protobuf import text_format
graph_def = tf.compat.v1.GraphDef()
text_format.Parse(open(sys.argv[1]).read(), graph_def)
with tf.Graph().as_default() as g:
    tf.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=g) as s:
        print(float(s.run("y:0")))
"""


MAKE_GRAPH = r"""
import sys
import tensorflow as tf
path, iterations, size, flow = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
if flow == "v1":
    tf.compat.v1.disable_control_flow_v2()  # Enter/Merge/Switch/NextIteration/Exit frames
g = tf.Graph()
with g.as_default():
    x0 = tf.zeros([size], tf.float32)
    _, x = tf.compat.v1.while_loop(lambda i, x: i < iterations, lambda i, x: (i + 1, x + 1.0),
                                   (tf.constant(0), x0))
    tf.reduce_max(x, name="y")
ops = {n.op for n in g.as_graph_def().node}
assert ("Enter" in ops) == (flow == "v1"), sorted(ops)
with open(path, "w") as f:
    f.write(str(g.as_graph_def()))
"""


def peak_of(argv):
    """(exit status, stdout, stderr, seconds, peak RSS in MiB) of one child, its own wait4 rusage."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.monotonic()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, stdin=subprocess.DEVNULL,
                                env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        return (proc.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"),
                seconds, usage.ru_maxrss / 1024.0)


def inlining_times(xlens, workdir, lengths):
    import executor_cases
    import craft
    rows = []
    with open(os.path.join(workdir, "x.npy"), "wb") as f:
        f.write(craft.npy_f32([1, 2, 3]))
    for n in lengths:
        path = os.path.join(workdir, f"chain{n}.pbtxt")
        with open(path, "w") as f:
            f.write(executor_cases.call_chain(n))
        t0 = time.monotonic()
        r = subprocess.run([xlens, "graph", "run", path, "--feed", f"x={workdir}/x.npy", "--fetch", "y"],
                           capture_output=True, timeout=1800)
        rows.append((n, time.monotonic() - t0, r.returncode, r.stdout.decode().strip()))
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--xlens", required=True)
    p.add_argument("--iterations", type=int, default=20000)
    p.add_argument("--size", type=int, default=65536)
    p.add_argument("--chains", default="1000,2000,4000")
    p.add_argument("--control-flow", choices=("v1", "v2"), default="v1",
                   help="v1: tf.compat.v1's frames (the default); v2: a functional While, which "
                        "xlens lowers to frames as TensorFlow does")
    p.add_argument("--keep", help="keep the graphs in this directory")
    args = p.parse_args()
    # TensorFlow runs only in children: a child forked from a process that holds it would
    # inherit that process's peak RSS.
    import importlib.util
    if importlib.util.find_spec("tensorflow") is None:
        print("tensorflow is not installed", file=sys.stderr)
        return 77
    workdir = args.keep or tempfile.mkdtemp(prefix="graph_loop_memory.")
    os.makedirs(workdir, exist_ok=True)
    graph = os.path.join(workdir, "while.pbtxt")
    made = subprocess.run([sys.executable, "-c", MAKE_GRAPH, graph, str(args.iterations), str(args.size),
                           args.control_flow], capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if made.returncode != 0:
        print(made.stderr[-2000:], file=sys.stderr)
        return 1
    print(f"graph: {graph} ({os.path.getsize(graph)} bytes), {args.iterations} iterations over "
          f"f32[{args.size}], control flow {args.control_flow}")
    ok = True
    code, out, err, secs, xlens_mb = peak_of([args.xlens, "graph", "run", graph, "--fetch", "y"])
    print(f"xlens graph run: exit {code}, {secs:.1f} s, peak RSS {xlens_mb:.0f} MiB: {out.strip() or err.strip()}")
    ok &= code == 0 and str(args.iterations) in out
    code, out, err, secs, tf_mb = peak_of([sys.executable, "-c", RUN_TF, graph])
    print(f"TensorFlow session: exit {code}, {secs:.1f} s, peak RSS {tf_mb:.0f} MiB: "
          f"{out.strip() or err.strip()[-200:]}")
    ok &= code == 0 and float(out.strip() or "nan") == args.iterations
    print(f"peak RSS xlens / TensorFlow: {xlens_mb / tf_mb:.2f}")
    lengths = [int(n) for n in args.chains.split(",") if n]
    if lengths:
        print("inlining a chain of calls (graph run, each function calling the next):")
        for n, secs, code, out in inlining_times(args.xlens, workdir, lengths):
            print(f"  {n:6d} calls: {secs:6.2f} s  exit {code}  {out[:60]}")
            ok &= code == 0
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
