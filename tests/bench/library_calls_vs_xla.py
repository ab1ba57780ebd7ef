#!/usr/bin/env python3
"""Dots and convolutions: xlens with oneDNN calls, xlens with Eigen, and XLA:CPU (jaxlib).

Each workload is a JAX function lowered to HLO text by JAX itself, so every side runs the same
module on inputs of the same shapes. xlens runs it twice, with the onednn-rewriter pass (oneDNN
calls with fused epilogues) and without it (--xla_disable_hlo_passes=onednn-rewriter: the Eigen
path); XLA runs the jitted function. Each side is the median of --iterations runs after a warm-up;
the whole comparison is repeated --repeats times, interleaved, and the table shows the median of
the repeats with their spread (max/min - 1), which says how noisy the machine was.
Usage: tests/bench/library_calls_vs_xla.py --xlens build/compiler/cli/xlens [--iterations 20]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time


def workloads(jax, jnp):
    def gelu_mlp(x, w1, w2):
        return jax.nn.gelu(x @ w1, approximate=True) @ w2

    def dense_gelu_erf(x, w, b):
        return jax.nn.gelu(x @ w + b, approximate=False)

    def conv_relu(x, k):
        y = jax.lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                         dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jax.nn.relu(y)

    def mlp_step(w1, b1, w2, b2, x, y):
        def loss(p):
            w1, b1, w2, b2 = p
            h = jax.nn.relu(x @ w1 + b1)
            return -jnp.mean(jnp.sum(jax.nn.log_softmax(h @ w2 + b2) * y, axis=1))
        g = jax.grad(loss)((w1, b1, w2, b2))
        return tuple(p - 0.1 * gp for p, gp in zip((w1, b1, w2, b2), g))

    def attention(q, k, v):
        s = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
        return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)

    return {
        "GELU MLP [256,512]x[512,2048] tanh GELU x[2048,512]":
            (gelu_mlp, [(256, 512), (512, 2048), (2048, 512)]),
        "dense + bias + erf GELU [256,512]x[512,2048]":
            (dense_gelu_erf, [(256, 512), (512, 2048), (2048,)]),
        "conv 3x3 NHWC [8,32,32,64]->64 ReLU": (conv_relu, [(8, 32, 32, 64), (3, 3, 64, 64)]),
        "MLP training step 784-256-10 batch 128":
            (mlp_step, [(784, 256), (256,), (256, 10), (10,), (128, 784), (128, 10)]),
        "attention 8 heads 256x64": (attention, [(8, 256, 64)] * 3),
    }


def xlens_ms(xlens, path, iterations, disable):
    env = dict(os.environ)
    if disable:
        env["XLA_FLAGS"] = "--xla_disable_hlo_passes=onednn-rewriter"
    out = subprocess.run([xlens, "run", path, "--iterations", str(iterations)], env=env,
                         capture_output=True, text=True, check=True).stdout
    return float(re.search(r"run median ([0-9.]+) ms", out).group(1))


def xla_ms(jax, fn, shapes, iterations):
    import numpy as np
    rng = np.random.default_rng(1)
    args = [jax.device_put(rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes]
    jitted = jax.jit(fn)
    jax.block_until_ready(jitted(*args))
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        jax.block_until_ready(jitted(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("jax is not installed (scripts/setup.sh --test-peers); nothing to compare against")
        return 0
    directory = tempfile.mkdtemp(prefix="xlens-library-bench-")
    print(f"{'workload (f32)':56} {'oneDNN ms':>10} {'Eigen ms':>10} {'XLA ms':>10} "
          f"{'XLA/oneDNN':>10} {'XLA/Eigen':>10}  spread (oneDNN, Eigen, XLA)")
    for name, (fn, shapes) in workloads(jax, jnp).items():
        specs = [jax.ShapeDtypeStruct(s, jnp.float32) for s in shapes]
        path = os.path.join(directory, re.sub(r"[^a-z0-9]+", "_", name.lower())[:40] + ".hlo")
        with open(path, "w") as f:
            f.write(jax.jit(fn).lower(*specs).as_text(dialect="hlo"))
        runs = {"onednn": [], "eigen": [], "xla": []}
        for _ in range(args.repeats):
            runs["onednn"].append(xlens_ms(args.xlens, path, args.iterations, False))
            runs["eigen"].append(xlens_ms(args.xlens, path, args.iterations, True))
            runs["xla"].append(xla_ms(jax, fn, shapes, args.iterations))
        med = {k: statistics.median(v) for k, v in runs.items()}
        spread = ", ".join(f"{(max(v) / min(v) - 1) * 100:.0f}%" for v in runs.values())
        print(f"{name:56} {med['onednn']:10.3f} {med['eigen']:10.3f} {med['xla']:10.3f} "
              f"{med['xla'] / med['onednn']:10.2f} {med['xla'] / med['eigen']:10.2f}  {spread}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
