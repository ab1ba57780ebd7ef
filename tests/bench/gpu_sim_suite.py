#!/usr/bin/env python3
"""What the GPU kernels of the bench suite would do on an H100, from the GPU simulator's analysis.

For each module of tests/bench/modules (an 8-op elementwise chain on f32[16M], softmax on
f32[4096,1000], layer-norm on f32[4096,1024], row and column sums of f32[4096,1024], a column sum
of f32[65536,64] (two 32-column tiles: the rows split across blocks), a transpose
of f32[4096,2048] and one training step of a 784-256-10 MLP on a batch of 128), runs

    xlens run --backend=gpu-sim --gpu_sim_analysis --gpu_target=TARGET --trace=T.json MODULE

and reads the predicted kernel spans back from the trace (the spans flagged "predicted"). Prints,
per kernel: grid x block, sectors per request of its global loads and stores (4 is ideal for
f32), bytes from DRAM, the predicted time, the fraction of the target's device-copy bandwidth
(3.0 TB/s on an H100) and the bound; per module: the kernel count and the totals.

With --compare FLAG, each module also runs with FLAG added (the GPU emitters' switch back to the
old emitters, say) and the two are printed side by side, from the same binary in the same run.

Usage: tests/bench/gpu_sim_suite.py --xlens build/compiler/cli/xlens [--target h100]
           [--compare=--FLAG] [--modules chain8,softmax] [--markdown]
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
import time

MODULES_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "modules")
SUITE = ["chain8", "softmax", "layer_norm", "row_reduce", "column_reduce", "column_reduce_narrow", "transpose",
         "mlp_step"]


def predicted_kernels(trace_path):
    opener = gzip.open if trace_path.endswith(".gz") else open
    with opener(trace_path, "rt") as f:
        trace = json.load(f)
    kernels = []
    for event in trace.get("traceEvents", []):
        args = event.get("args") or {}
        if event.get("ph") == "X" and args.get("predicted") == 1:
            kernels.append({
                "name": event.get("name", "?"),
                "hlo": args.get("hlo_op", ""),
                "grid": (args.get("grid") or [0])[0],
                "block": (args.get("block") or [0])[0],
                "sectors_per_request": float(args.get("sectors per request", 0)),
                "load_spr": float(args.get("load sectors per request", 0)),
                "store_spr": float(args.get("store sectors per request", 0)),
                "dram_bytes": int(args.get("dram bytes", 0)),
                "us": float(event.get("dur", 0)),
                "copy_fraction": float(args.get("fraction of copy bandwidth", 0)),
                "bound": args.get("bound", "?"),
                "sampled": args.get("blocks analysed"),
                "ts": float(event.get("ts", 0)),
            })
    kernels.sort(key=lambda k: k["ts"])
    return kernels


def run_module(xlens, name, target, extra):
    with tempfile.TemporaryDirectory() as tmp:
        trace = os.path.join(tmp, "trace.json")
        command = [xlens, "run", "--backend=gpu-sim", "--gpu_sim_analysis", f"--gpu_target={target}",
                   f"--trace={trace}", os.path.join(MODULES_DIR, name + ".hlo")] + extra
        start = time.monotonic()
        result = subprocess.run(command, capture_output=True, text=True)
        wall = time.monotonic() - start
        if result.returncode != 0:
            message = (result.stderr.strip() or result.stdout.strip()).splitlines()
            return None, wall, message[-1] if message else f"exit {result.returncode}"
        return predicted_kernels(trace), wall, None


def summary(kernels):
    us = sum(k["us"] for k in kernels)
    dram = sum(k["dram_bytes"] for k in kernels)
    return us, dram


def print_text(rows, target, compare):
    copy_gbps = {"h100": 3000, "h200": 4300}.get(target, 0)
    for label, name, kernels, wall, error in rows:
        head = f"{name}{' [' + label + ']' if label else ''}"
        if error:
            print(f"{head}: failed: {error}")
            continue
        us, dram = summary(kernels)
        frac = dram / (us * 1e3) / copy_gbps if us > 0 and copy_gbps else 0
        print(f"{head}: {len(kernels)} kernel{'s' if len(kernels) != 1 else ''}, "
              f"{us:.1f} us predicted on {target}, {dram / 1e6:.1f} MB from DRAM, "
              f"{100 * frac:.1f}% of the copy bandwidth (simulated in {wall:.1f} s)")
        for k in kernels:
            note = f" (sampled {k['sampled']} blocks)" if k["sampled"] else ""
            print(f"  {k['name']:<24} {k['grid']:>7}x{k['block']:<5} sect/req ld {k['load_spr']:5.2f} st {k['store_spr']:5.2f}"
                  f"  DRAM {k['dram_bytes'] / 1e6:8.2f} MB  {k['us']:9.2f} us  "
                  f"{100 * k['copy_fraction']:5.1f}% copyBW  {k['bound']}{note}")


def print_markdown(rows, target):
    print(f"| module | emitters | kernels | kernel | sectors/request (load / store) "
          f"| predicted {target} (us) | % of copy BW | bound |")
    print("|---|---|---|---|---|---|---|---|")
    for label, name, kernels, wall, error in rows:
        if error:
            print(f"| {name} | {label or 'current'} | - | failed: {error} | | | | |")
            continue
        for i, k in enumerate(kernels):
            print(f"| {name if i == 0 else ''} | {(label or 'current') if i == 0 else ''} "
                  f"| {len(kernels) if i == 0 else ''} | {k['name']} | {k['load_spr']:.2f} / {k['store_spr']:.2f} "
                  f"| {k['us']:.1f} | {100 * k['copy_fraction']:.1f}% | {k['bound']} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--target", default="h100")
    parser.add_argument("--compare", default="", help="a flag that selects the old emitters")
    parser.add_argument("--modules", default=",".join(SUITE))
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    rows = []
    for name in [m for m in args.modules.split(",") if m]:
        if args.compare:
            kernels, wall, error = run_module(args.xlens, name, args.target, [args.compare])
            rows.append(("before: " + args.compare, name, kernels, wall, error))
        kernels, wall, error = run_module(args.xlens, name, args.target, [])
        rows.append(("after" if args.compare else "", name, kernels, wall, error))
        if not args.markdown:
            print_text(rows[-2 if args.compare else -1:], args.target, args.compare)
            sys.stdout.flush()
    if args.markdown:
        print_markdown(rows, args.target)
    return 1 if any(r[4] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
