#!/usr/bin/env python3
"""Parse+verify time of a large generated module: xlens against XLA's own HLO parser.

Writes a module of N instructions (the same shape of module as tests/bench/hlo_bench.cc), then
times `xlens verify` on it and XLA's `hlo_module_from_text` (jaxlib) on the same text, in the
same run. xlens' time includes process start and reading the file; XLA's is the call alone.
Usage: tests/bench/parse_vs_xla.py --xlens build/compiler/cli/xlens [--instructions 100000]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time


def make_module(n):
    lines = ["HloModule large", "",
             "add { a = f32[] parameter(0) b = f32[] parameter(1) ROOT s = f32[] add(a, b) }", "",
             "ENTRY %main {"]
    for i in range(4):
        lines.append(f"  %v{i} = f32[16,8]{{1,0}} parameter({i})")
    lines.append("  %zero = f32[] constant(0)")
    ops = ["add", "multiply", "subtract", "maximum"]
    i = 4
    while i < n - 1:
        if i % 10 == 0:
            lines.append(f"  %r{i} = f32[16]{{0}} reduce(f32[16,8]{{1,0}} %v{i - 1}, f32[] %zero), "
                         f"dimensions={{1}}, to_apply=add")
            lines.append(f"  %v{i} = f32[16,8]{{1,0}} broadcast(f32[16]{{0}} %r{i}), dimensions={{0}}, "
                         f"metadata={{op_type=\"Sum\" op_name=\"layer{i}/sum\"}}")
            i += 1
            lines.append(f"  %v{i} = f32[16,8]{{1,0}} negate(f32[16,8]{{1,0}} %v{i - 1})")
            i += 1
            continue
        lines.append(f"  %v{i} = f32[16,8]{{1,0}} {ops[i % 4]}(f32[16,8]{{1,0}} %v{i - 1}, "
                     f"f32[16,8]{{1,0}} %v{i - 3}), metadata={{op_type=\"Op\" op_name=\"layer{i}/op\"}}")
        i += 1
    lines.append(f"  ROOT %out = f32[16,8]{{1,0}} copy(f32[16,8]{{1,0}} %v{i - 1})")
    lines.append("}")
    return "\n".join(lines) + "\n"


def best_of(runs, fn):
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--instructions", type=int, default=100000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    try:
        from jaxlib import _hlo as xla_hlo
    except ImportError as e:
        print(f"jaxlib is not installed ({e}); scripts/setup.sh installs it")
        return 1
    text = make_module(args.instructions)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "large.hlo")
        with open(path, "w") as f:
            f.write(text)
        xlens = best_of(args.runs, lambda: subprocess.run([args.xlens, "verify", path], check=True,
                                                          capture_output=True))
    xla = best_of(args.runs, lambda: xla_hlo.hlo_module_from_text(text))
    print(f"module: {args.instructions} instructions, {len(text) / 1e6:.1f} MB of text")
    print(f"xlens verify (parse + verify, whole process): {xlens * 1000:8.1f} ms")
    print(f"XLA hlo_module_from_text (parse + verify):     {xla * 1000:8.1f} ms")
    print(f"ratio xlens / XLA: {xlens / xla:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
