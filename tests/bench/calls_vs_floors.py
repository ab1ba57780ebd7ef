#!/usr/bin/env python3
"""Where a library-bound module's time goes, call by call, against oneDNN standalone.

codegen_vs_xla.py holds a module of products and convolutions to the sum of oneDNN's standalone
times for its calls (machine_limits --floors --hlo=FILE). A module under 90% of that sum misses it
in one of three places, which this script tells apart:

  - a call: xlens's library call (oneDNN's kernel in parts on the pool, or xlens's own small
    product loops) slower than the same shape standalone;
  - the kernels between the calls: the elementwise and reduction fusions a chain of calls leaves
    outside them (an activation whose input a gradient still reads, a softmax), which the floor
    does not count;
  - the gaps: the module's best run less the sum of its thunks' times in that same run (launches,
    waits for a late worker).

It alternates, `--rounds` times, machine_limits --floors (each call's best over 0.2 s of runs on
oneDNN's own threads) with `xlens run --trace` over `--iterations` runs, so that each call meets
the machine in the same minutes as its floor; a shared machine's load moves both by 2x from one
minute to the next. Per call it prints the floor's best and xlens's best over all the rounds and
their ratio; then the kernels' bests summed, and the best run split into calls, kernels and gaps.
The library calls are matched to the floor's in program order (both follow the module's schedule
of dots and convolutions); a call whose kind differs from its floor's is flagged.

Usage: tests/bench/calls_vs_floors.py --xlens build/compiler/cli/xlens MODULE.hlo [--inputs DIR]
                                      [--rounds 3] [--iterations 400]
                                      [--machine-limits build/tests/bench/machine_limits]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def floors(machine_limits, hlo):
    """Each library call's standalone floor, in program order: [(kind, ms)]."""
    proc = subprocess.run([machine_limits, "--floors", f"--hlo={hlo}"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip() or f"machine_limits exited with {proc.returncode}")
    calls = json.loads(proc.stdout)["hlo_modules"][0]["calls"]
    return [(c["kind"], c.get("ms")) for c in calls]


def traced_runs(xlens, hlo, inputs, iterations, directory):
    """Per run of `xlens run --trace`: (run us, [(thunk, us, is_library_call)]) in execution order."""
    trace = os.path.join(directory, "trace.json")
    command = [xlens, "run", hlo, "--iterations", str(iterations), "--trace", trace]
    if inputs:
        command += ["--inputs", inputs]
    proc = subprocess.run(command, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip()[-500:] or f"xlens exited with {proc.returncode}")
    with open(trace) as f:
        events = json.load(f)
    events = events["traceEvents"] if isinstance(events, dict) else events
    spans = sorted((e for e in events if e.get("ph") == "X"), key=lambda e: e["ts"])
    runs = [e for e in spans if e["name"].startswith("execute ")]
    if not runs:
        raise RuntimeError("the trace has no runs")
    out, r = [], -1
    for e in spans:
        if e["name"].startswith("execute "):
            out.append((e["dur"], []))
            r += 1
        elif r >= 0 and e["ts"] < runs[r]["ts"] + runs[r]["dur"] and "hlo_op" in e.get("args", {}):
            args = e["args"]
            # A kernel names its function; a library call (a kCustom fusion) does not.
            out[r][1].append((e["name"], e["dur"], "kernel" not in args and args.get("fusion_kind") == "kCustom"))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("hlo")
    parser.add_argument("--xlens", required=True)
    parser.add_argument("--inputs", help="directory of arg0.npy, ... (default: random inputs)")
    parser.add_argument("--machine-limits", help="default: beside xlens in its build tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=400)
    args = parser.parse_args()
    build = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(args.xlens))))
    machine_limits = args.machine_limits or os.path.join(build, "tests", "bench", "machine_limits")
    floor_best, call_best, kernel_best, best_run = None, {}, {}, None
    names = []
    with tempfile.TemporaryDirectory() as directory:  # under TMPDIR
        for round_number in range(args.rounds):
            f = floors(machine_limits, args.hlo)
            # A call oneDNN refused has no floor (None) in every round.
            floor_best = f if floor_best is None else [
                (kind, b if a is None else a if b is None else min(a, b)) for (kind, a), (_, b) in zip(floor_best, f)]
            runs = traced_runs(args.xlens, args.hlo, args.inputs, args.iterations, directory)
            for run_us, thunks in runs:
                for name, us, library in thunks:
                    kept = call_best if library else kernel_best
                    kept[name] = min(kept.get(name, us), us)
                    if library and name not in names:
                        names.append(name)
                if best_run is None or run_us < best_run[0]:
                    best_run = (run_us, thunks)
            load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
            print(f"round {round_number + 1}: floors {sum(ms for _, ms in f if ms) * 1e3:.1f} us, "
                  f"xlens best run {min(r for r, _ in runs):.1f} us (load {load})", file=sys.stderr)
    print(f"{'call':<14}{'floor kind':<30}{'floor us':>10}{'xlens us':>10}{'floor/xlens':>13}")
    floor_sum = 0.0
    for i, name in enumerate(names):
        kind, ms = floor_best[i] if i < len(floor_best) else ("-", None)
        floor_us = ms * 1e3 if ms else None
        floor_sum += floor_us or 0
        share = f"{floor_us / call_best[name] * 100:>12.0f}%" if floor_us else f"{'-':>13}"
        print(f"{name:<14}{kind:<30}{floor_us or float('nan'):>10.1f}{call_best[name]:>10.1f}{share}")
    if len(names) != len(floor_best):
        print(f"note: {len(names)} library calls against {len(floor_best)} floors; matched in order")
    kernels = sum(kernel_best.values())
    if floor_sum == 0:
        sys.exit("no call has a floor (oneDNN refused every one, or the module has none)")
    print(f"calls' bests {sum(call_best.values()):.1f} us against floors {floor_sum:.1f} us; kernels' bests "
          f"{kernels:.1f} us ({len(kernel_best)} kernels, {kernels / floor_sum * 100:.0f}% of the floors)")
    run_us, thunks = best_run
    in_calls = sum(us for _, us, library in thunks if library)
    in_kernels = sum(us for _, us, library in thunks if not library)
    print(f"best run {run_us:.1f} us ({floor_sum / run_us * 100:.0f}% of the floors): calls {in_calls:.1f}, "
          f"kernels {in_kernels:.1f}, gaps {run_us - in_calls - in_kernels:.1f}")


if __name__ == "__main__":
    main()
