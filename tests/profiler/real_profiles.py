#!/usr/bin/env python3
"""Real XLA in: profiles as jax.profiler and tf.profiler record them, read by `xlens trace summary`.

Records, at test time, a profile of jitted jax functions (jax.profiler.trace, which writes an
XSpace `*.xplane.pb`, its `*.trace.json.gz` and `perfetto_trace.json.gz`) and, when TensorFlow is
installed, of a tf.function(jit_compile=True) (tf.profiler.experimental.start/stop, an XSpace) and
TensorFlow 1's timeline of a session run (RunMetadata, `timeline.ctf.json`). Then checks:

- `xlens trace summary` reads every file;
- the XSpace and the JSON of the same run hold the same events, and the same XLA kernels;
- XLA's kernels are named by their HLO module (`jit_*` for jax, `a_inference_*`/`cluster_*` for
  TensorFlow's compiled function) and counted as kernels.

Prints what it read and exits 1 on any failure, 77 (skipped) when jax is not installed.
"""
import argparse
import atexit
import glob
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SKIP = 77

JAX_PROGRAM = r'''
import sys
import jax, jax.numpy as jnp

@jax.jit
def f(x, y):
    return jnp.tanh(x @ y) + 1.0

@jax.jit
def step(w, x):
    loss, g = jax.value_and_grad(lambda w: jnp.mean(jnp.tanh(x @ w) ** 2))(w)
    return w - 0.1 * g, loss

x = jnp.ones((64, 64)); y = jnp.ones((64, 64))
f(x, y).block_until_ready(); step(y, x)[0].block_until_ready()
with jax.profiler.trace(sys.argv[1], create_perfetto_trace=True):
    for _ in range(3):
        f(x, y).block_until_ready()
        step(y, x)[0].block_until_ready()
'''

TF_PROGRAM = r'''
import json, os, sys
import tensorflow as tf

@tf.function(jit_compile=True)
def dense(x, w):
    return tf.nn.relu(tf.matmul(x, w) + 1.0)

x = tf.ones((32, 32)); w = tf.ones((32, 32))
dense(x, w)
tf.profiler.experimental.start(sys.argv[1])
for _ in range(3):
    dense(x, w).numpy()
tf.profiler.experimental.stop()

# TensorFlow 1's timeline: a session run with RunMetadata.
from tensorflow.python.client import timeline
g = tf.Graph()
with g.as_default():
    a = tf.compat.v1.placeholder(tf.float32, (16, 16))
    out = tf.nn.relu(tf.matmul(a, a) + 1.0)
with tf.compat.v1.Session(graph=g) as sess:
    options = tf.compat.v1.RunOptions(trace_level=tf.compat.v1.RunOptions.FULL_TRACE)
    metadata = tf.compat.v1.RunMetadata()
    sess.run(out, {a: [[1.0] * 16] * 16}, options=options, run_metadata=metadata)
    with open(os.path.join(sys.argv[1], "timeline.ctf.json"), "w") as f:
        f.write(timeline.Timeline(metadata.step_stats).generate_chrome_trace_format())
'''


def record(program, out, env_extra, timeout):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="", **env_extra)
    script = os.path.join(out, "program.py")
    with open(script, "w") as f:
        f.write(program)
    proc = subprocess.run([sys.executable, script, out], env=env, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError("recording failed:\n" + proc.stderr[-3000:])


def summary(xlens, path):
    proc = subprocess.run([xlens, "trace", "summary", path, "--top", "100"], capture_output=True, text=True,
                          timeout=60)
    if proc.returncode != 0:
        return None, proc.stderr.strip() or proc.stdout.strip()
    text = proc.stdout
    events = int(re.match(r"(\d+) events", text).group(1))
    modules = dict((name, int(count)) for _, count, name in
                   re.findall(r"^\s+([\d.]+)\s+(\d+)  (\S+)$", text.split("Kernels by HLO module:")[1].split("\n\n")[0],
                              re.M)) if "Kernels by HLO module:" in text else {}
    kernels = 0
    for cat, count in re.findall(r"^  (cpu_kernel|kernel|library_call)\s+(\d+)\s", text, re.M):
        kernels += int(count)
    return {"events": events, "modules": modules, "kernels": kernels, "text": text}, None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--keep", help="record into this directory and keep it")
    args = parser.parse_args()
    if importlib.util.find_spec("jax") is None:
        print("real_profiles: jax is not installed: skipped")
        return SKIP
    have_tf = importlib.util.find_spec("tensorflow") is not None
    work = args.keep or tempfile.mkdtemp(prefix="xlens_real_profiles_")
    if not args.keep:
        # What this check writes is scratch unless the user asked to keep it.
        atexit.register(shutil.rmtree, work, True)
    failures = []
    started = time.time()

    jax_dir = os.path.join(work, "jax")
    os.makedirs(jax_dir, exist_ok=True)
    record(JAX_PROGRAM, jax_dir, {}, 120)
    runs = {"jax": jax_dir}
    if have_tf:
        tf_dir = os.path.join(work, "tf")
        os.makedirs(tf_dir, exist_ok=True)
        record(TF_PROGRAM, tf_dir, {}, 180)
        runs["tf"] = tf_dir
    else:
        print("real_profiles: TensorFlow is not installed: its profiles are not checked")

    for run, directory in runs.items():
        files = sorted(glob.glob(os.path.join(directory, "**", "*.xplane.pb"), recursive=True) +
                       glob.glob(os.path.join(directory, "**", "*.json.gz"), recursive=True) +
                       glob.glob(os.path.join(directory, "**", "*.ctf.json"), recursive=True))
        xspaces = [f for f in files if f.endswith(".xplane.pb")]
        if not xspaces:
            failures.append(f"{run}: the profiler wrote no *.xplane.pb in {directory}")
        read = {}
        for path in files:
            result, error = summary(args.xlens, path)
            name = os.path.relpath(path, directory)
            if error:
                failures.append(f"{run}: {name}: {error}")
                continue
            read[path] = result
            print(f"{run}: {name}: {result['events']} events, {result['kernels']} kernels, "
                  f"modules {result['modules']}")
        # The XSpace and the JSON the profiler converted from it in the same run.
        for xspace in xspaces:
            if xspace not in read:
                continue
            x = read[xspace]
            directory_of = os.path.dirname(xspace)
            for path in files:
                if path == xspace or os.path.dirname(path) != directory_of or path not in read:
                    continue
                j = read[path]
                if j["events"] != x["events"]:
                    failures.append(f"{run}: {os.path.basename(path)} has {j['events']} events, "
                                    f"{os.path.basename(xspace)} {x['events']}")
                if j["modules"] != x["modules"]:
                    failures.append(f"{run}: kernels by module differ: {os.path.basename(path)} {j['modules']}, "
                                    f"{os.path.basename(xspace)} {x['modules']}")
            if x["kernels"] == 0:
                failures.append(f"{run}: {os.path.basename(xspace)}: no XLA kernels found")
            expected = ("jit_f", "jit_step") if run == "jax" else ()
            for module in expected:
                if x["modules"].get(module, 0) == 0:
                    failures.append(f"{run}: {os.path.basename(xspace)}: no kernel of HLO module {module} "
                                    f"(modules: {x['modules']})")
            if run == "tf" and not x["modules"]:
                failures.append(f"tf: {os.path.basename(xspace)}: no kernel names its HLO module")
        if run == "tf":
            timelines = [f for f in files if f.endswith(".ctf.json")]
            if not timelines:
                failures.append("tf: no timeline.ctf.json written")
            for path in timelines:
                if path in read and read[path]["events"] == 0:
                    failures.append(f"tf: {os.path.basename(path)}: no events read")

    print(f"real_profiles: {len(runs)} runs checked in {time.time() - started:.1f} s")
    for failure in failures:
        print("FAIL:", failure)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
