#!/usr/bin/env python3
"""Run time of xlens' CPU code against XLA's CPU backend (jaxlib) on the same computations.

For each module of tests/bench/modules (an 8-op elementwise chain on f32[16M], softmax on
f32[4096,1000], layer-norm on f32[4096,1024], row and column sums), times `xlens run
--iterations N` (the median of the runs, after a warm-up) and the same computation written in
jax.numpy, jitted by XLA, on the same machine in the same run (median of N calls after a warm-up,
each waited for). Prints one row per module and the ratio xlens / XLA (below 1: xlens is faster).
Usage: tests/bench/codegen_vs_xla.py --xlens build/compiler/cli/xlens [--iterations 20]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import time

MODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules")


def jax_functions(jnp):
    def chain8(x, y):
        a = x * y
        b = a + x
        c = b - y
        d = jnp.maximum(c, x)
        e = d * d
        f = jnp.minimum(e, y)
        g = f + a
        return -g

    def softmax(x):
        m = jnp.max(x, axis=1, keepdims=True)
        e = jnp.exp(x - m)
        return e / jnp.sum(e, axis=1, keepdims=True)

    def layer_norm(x, gamma, beta):
        mean = jnp.sum(x, axis=1, keepdims=True) / 1024.0
        c = x - mean
        var = jnp.sum(c * c, axis=1, keepdims=True) / 1024.0
        return c * (1.0 / jnp.sqrt(var + 1e-5)) * gamma + beta

    return {
        "chain8": (chain8, [(16777216,), (16777216,)]),
        "softmax": (softmax, [(4096, 1000)]),
        "layer_norm": (layer_norm, [(4096, 1024), (1024,), (1024,)]),
        "row_reduce": (lambda x: jnp.sum(x, axis=1), [(4096, 1024)]),
        "column_reduce": (lambda x: jnp.sum(x, axis=0), [(4096, 1024)]),
    }


def xlens_ms(xlens, name, iterations):
    out = subprocess.run([xlens, "run", os.path.join(MODULES, name + ".hlo"), "--iterations",
                          str(iterations)], capture_output=True, text=True, check=True).stdout
    match = re.search(r"run median ([0-9.]+) ms", out)
    return float(match.group(1))


def xla_ms(jax, fn, shapes, iterations):
    import numpy as np
    rng = np.random.default_rng(1)
    args = [jax.device_put(rng.uniform(-1, 1, s).astype(np.float32)) for s in shapes]
    jitted = jax.jit(fn)
    jitted(*args).block_until_ready()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        jitted(*args).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--iterations", type=int, default=20)
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        print("jax is not installed (scripts/setup.sh --test-peers installs it)", file=sys.stderr)
        return 77
    jax.config.update("jax_platforms", "cpu")
    print(f"{'module':<15}{'xlens ms':>10}{'XLA ms':>10}{'xlens/XLA':>11}")
    for name, (fn, shapes) in jax_functions(jnp).items():
        ours = xlens_ms(args.xlens, name, args.iterations)
        theirs = xla_ms(jax, fn, shapes, args.iterations)
        print(f"{name:<15}{ours:>10.3f}{theirs:>10.3f}{ours / theirs:>11.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
