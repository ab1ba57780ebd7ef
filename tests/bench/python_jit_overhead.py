#!/usr/bin/env python3
"""Per-call overhead of xlens.jit on small arrays, in one run: the same JAX function called

  C++ loop      the compiled executable called N times from C++ (CompiledHlo.time_calls): the
                arguments read in place, the run, the result copied out of the arena
  run(list)     CompiledHlo.run from Python: the arguments checked and handed over, the results
                wrapped as NumPy arrays (nanobind)
  xlens.jit     the decorated function: the pytree flattened, the cache looked up, run(list),
                the result's pytree rebuilt
  jax.jit       JAX's own jit on the same NumPy arguments, waited for (block_until_ready)
  jax.jit dev   the same with the arguments already JAX arrays (no transfer per call)

Each variant is timed in `--repeats` rounds of `--calls` calls, the rounds interleaved; the table
gives the median time per call over the rounds, its quartiles and the fastest round (what the
call costs when nothing else runs), and the overhead over the C++ loop. Run by hand (not in CI):

    PYTHONPATH=build/python python3 tests/bench/python_jit_overhead.py
"""

import argparse
import statistics
import time

import numpy as np


def per_call_us(fn, calls):
    start = time.perf_counter_ns()
    for _ in range(calls):
        fn()
    return (time.perf_counter_ns() - start) / calls / 1e3


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--size", type=int, default=8, help="the arrays are SIZE x SIZE float32")
    args = parser.parse_args()

    import jax
    import jax.numpy as jnp

    import xlens

    def f(x, y, b):
        return jnp.tanh(x @ y + b), jnp.sum(x * y)

    rng = np.random.default_rng(0)
    n = args.size
    x, y = rng.standard_normal((n, n), np.float32), rng.standard_normal((n, n), np.float32)
    b = rng.standard_normal(n).astype(np.float32)

    jax_f = jax.jit(f)
    xlens_f = xlens.jit(f)
    compiled = xlens_f.compile(x, y, b)
    leaves = [x, y, b]
    on_device = [jax.device_put(a) for a in leaves]
    for out_jax, out_xlens in zip(jax_f(x, y, b), xlens_f(x, y, b)):
        np.testing.assert_allclose(np.asarray(out_jax), out_xlens, rtol=1e-5, atol=1e-5)

    variants = {
        "C++ loop": lambda calls: float(np.mean(compiled.time_calls(leaves, calls))) / 1e3,
        "run(list)": lambda calls: per_call_us(lambda: compiled.run(leaves), calls),
        "xlens.jit": lambda calls: per_call_us(lambda: xlens_f(x, y, b), calls),
        "jax.jit": lambda calls: per_call_us(lambda: jax.block_until_ready(jax_f(x, y, b)), calls),
        "jax.jit dev": lambda calls: per_call_us(lambda: jax.block_until_ready(jax_f(*on_device)), calls),
    }
    for measure in variants.values():
        measure(max(1, args.calls // 10))  # warm up
    rounds = {name: [] for name in variants}
    for _ in range(args.repeats):
        for name, measure in variants.items():
            rounds[name].append(measure(args.calls))

    base = statistics.median(rounds["C++ loop"])
    print(f"f(x, y, b) = (tanh(x @ y + b), sum(x * y)), x and y f32[{n},{n}], b f32[{n}]; "
          f"{args.repeats} rounds of {args.calls} calls; borrows arguments: {compiled.borrows_arguments}")
    print(f"{'variant':<12} {'median us/call':>15} {'quartiles':>17} {'fastest round':>14} {'over C++ loop':>14}")
    for name, values in rounds.items():
        median = statistics.median(values)
        q1, _, q3 = statistics.quantiles(values, n=4) if len(values) > 1 else (median, median, median)
        print(f"{name:<12} {median:>15.2f} {q1:>8.2f} - {q3:<6.2f} {min(values):>14.2f} {median - base:>+14.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
