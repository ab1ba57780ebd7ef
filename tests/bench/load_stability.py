#!/usr/bin/env python3
"""How much xlens' CPU code and XLA's lose when another process keeps one core busy.

A speed that depends on what else runs on the machine is not yet a speed. For each workload (the
JAX functions of codegen_vs_xla.py, lowered to the same HLO for both compilers) the script times,
in R alternating rounds (`--rounds`, default 3):

  - xlens and XLA on the machine as it is ("idle": no competitor of ours; others may be there,
    so the load average is printed beside every row);
  - xlens confined to one core (its process' CPU affinity), which gives the ideal below;
  - xlens and XLA again while a busy process (a Python spin loop, started by this script, pinned
    to one core: `--busy-cpu`, by default the last CPU) runs beside them ("busy").

Each time is the median of N runs (`--iterations`), then the median over the rounds. The table
gives both times and the ratio busy/idle for each compiler, and the ideal ratio:

  ideal = max(1, one-core time / idle time), from xlens' own times.

Why: the competitor is one single-threaded process, so it can take at most one core away. A
kernel that loses no more than that runs at least as fast as it does with one core to itself:
a compute-bound kernel that scales to two cores then slows by about 2x, a memory-bound one that
one core already saturates hardly at all. Where the scheduler also grants the kernel part of the
competitor's core (a fair share would be half of it), busy/idle can be below the ideal; above it,
the kernel lost more than the busy machine took, e.g. by waiting at the end of a parallel loop
for a thread that was descheduled while holding its share. The `excess` column is
(busy/idle) / ideal; `range` is the lowest and highest per-round busy/idle ratio.

Several builds are compared in the same rounds with `--xlens LABEL=PATH` given once for each:
they then meet the same neighbours, which on a shared machine matter more than anything else.

Usage: tests/bench/load_stability.py --xlens build/compiler/cli/xlens [--iterations 20]
                                     [--rounds 3] [--only REGEX] [--busy-cpu N] [--keep DIR]
       tests/bench/load_stability.py --xlens before=/tmp/xlens.old --xlens after=build/...
Exit status: 0 when every output agrees, 1 otherwise, 77 without jax.
"""
import argparse
import atexit
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

# Reductions, memory-bound elementwise work, a transpose, products and a convolution: one of each
# kind of parallel loop the CPU backend runs.
DEFAULT_WORKLOADS = ("column_reduce", "row_reduce", "triad", "sigmoid_tanh_exp", "softmax",
                     "layer_norm", "transpose", "gelu_mlp", "conv3x3_relu", "attention_8x256x64")


class BusyProcess:
    """A spin loop pinned to one CPU, as another user's compute-bound job would be."""

    def __init__(self, cpu):
        self.cpu = cpu
        self.proc = None

    def __enter__(self):
        # It pins itself: a preexec_fn would fork this multithreaded (JAX) process. In a session
        # of its own, as another user's job: Linux's autogroups share the CPUs between sessions
        # first, so a spinner in this session would only divide this session's own share.
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import os\nos.sched_setaffinity(0, {{{self.cpu}}})\n"
                                   "while True: pass"], start_new_session=True)
        time.sleep(0.2)  # running, and seen by the scheduler as a CPU-bound task
        return self

    def __exit__(self, *exc):
        self.proc.kill()
        self.proc.wait()


def on_one_cpu(cpu, fn, *args):
    """Runs fn with this thread's CPU affinity (which a child process inherits) set to one CPU."""
    saved = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    try:
        return fn(*args)
    finally:
        os.sched_setaffinity(0, saved)


def load_average():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--xlens", action="append", required=True,
                        help="the xlens binary, or LABEL=PATH to compare several (repeat)")
    parser.add_argument("--iterations", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="",
                        help="run the workloads whose name matches (default: " +
                             ", ".join(DEFAULT_WORKLOADS) + ")")
    parser.add_argument("--busy-cpu", type=int, default=-1,
                        help="the CPU the busy process is pinned to (default: the last one)")
    parser.add_argument("--keep", default="", help="keep the HLO, inputs and outputs here")
    args = parser.parse_args()
    try:
        import jax
        import jax.numpy as jnp
        import numpy as np
    except ImportError:
        print("jax is not installed (scripts/setup.sh --test-peers installs it)", file=sys.stderr)
        return 77
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import codegen_vs_xla as cvx
    jax.config.update("jax_platforms", "cpu")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        print("xlens load_stability: needs 2 CPUs or more, this process may use "
              f"{len(cpus)}", file=sys.stderr)
        return 1
    busy_cpu = cpus[-1] if args.busy_cpu < 0 else args.busy_cpu
    if busy_cpu not in cpus:
        print(f"xlens load_stability: --busy-cpu {busy_cpu}: not one of this process' CPUs "
              f"({', '.join(map(str, cpus))})", file=sys.stderr)
        return 1
    free_cpu = next(c for c in cpus if c != busy_cpu)
    work = args.keep or tempfile.mkdtemp(prefix="load_stability.")
    if not args.keep:
        atexit.register(shutil.rmtree, work, True)
    builds = []
    for spec in args.xlens:
        label, _, path = spec.rpartition("=")
        label = label or "xlens"
        try:  # a rebuild of the tree during the run must not pull xlens away
            builds.append((label, shutil.copy2(path, os.path.join(work, f"xlens.{len(builds)}"))))
        except OSError as e:
            print(f"xlens load_stability: --xlens {spec}: {e.strerror}", file=sys.stderr)
            return 1
    rounds, iterations = max(1, args.rounds), args.iterations
    print(f"jax {jax.__version__}, {len(cpus)} CPUs, the busy process on CPU {busy_cpu}, "
          f"one-core runs on CPU {free_cpu}; medians of {iterations} runs, then over {rounds} "
          f"rounds (ms); load average (1 min) at the start {load_average():.2f}")
    print(f"{'workload':<20}{'runner':<10}{'idle':>9}{'busy':>9}{'busy/idle':>10}{'range':>11}"
          f"{'one core':>10}{'ideal':>7}{'excess':>8}{'XLA/this idle':>14}{'busy':>7}{'load':>6}"
          f"  agree")
    runners = [label for label, _ in builds] + ["XLA"]
    failures, excesses = 0, {label: [] for label in runners}
    for seed, (name, (fn, specs)) in enumerate(cvx.workloads(jax, jnp).items()):
        if not (re.search(args.only, name) if args.only else name in DEFAULT_WORKLOADS):
            continue
        print(f"  {name} ...", file=sys.stderr, flush=True)
        directory = os.path.join(work, name)
        inputs, outputs = os.path.join(directory, "inputs"), os.path.join(directory, "outputs")
        os.makedirs(inputs, exist_ok=True)
        os.makedirs(outputs, exist_ok=True)
        lowered = jax.jit(fn).lower(*[jax.ShapeDtypeStruct(shape, jnp.float32)
                                      for shape, _ in specs])
        hlo_file = os.path.join(directory, name + ".hlo")
        with open(hlo_file, "w") as f:
            f.write(lowered.as_text(dialect="hlo"))
        host_args = cvx.make_arguments(np, specs, seed)
        for i, a in enumerate(host_args):
            np.save(os.path.join(inputs, f"arg{i}.npy"), a)
        device_args = [jax.device_put(a) for a in host_args]
        compiled = lowered.compile()
        expected = compiled(*device_args)
        times = {(who, how): [] for who in runners for how in ("idle", "one", "busy")}
        agree, loads = {}, []

        def run(binary, label):
            outputs = os.path.join(directory, "outputs." + label)
            os.makedirs(outputs, exist_ok=True)
            ms = cvx.run_xlens(binary, hlo_file, inputs, outputs, iterations)[1]
            if label not in agree:
                agree[label] = cvx.outputs_agree(np, expected, outputs)
            return ms

        try:
            for _ in range(rounds):
                loads.append(load_average())
                for label, binary in builds:
                    times[label, "idle"].append(run(binary, label))
                times["XLA", "idle"].append(cvx.time_xla(jax, compiled, device_args, iterations))
                for label, binary in builds:
                    times[label, "one"].append(on_one_cpu(free_cpu, run, binary, label))
                with BusyProcess(busy_cpu):
                    for label, binary in builds:
                        times[label, "busy"].append(run(binary, label))
                    times["XLA", "busy"].append(cvx.time_xla(jax, compiled, device_args, iterations))
        except RuntimeError as e:
            print(f"{name:<20}xlens failed: {str(e).splitlines()[0][:200]}")
            failures += 1
            continue
        med = {key: statistics.median(values) for key, values in times.items() if values}
        # XLA is held to the first build's ideal: the workload's, as near as can be measured.
        first_ideal = max(1.0, med[builds[0][0], "one"] / med[builds[0][0], "idle"])
        for who in runners:
            idle, busy = med[who, "idle"], med[who, "busy"]
            per_round = [b / i for b, i in zip(times[who, "busy"], times[who, "idle"])]
            if who == "XLA":
                one_core, ideal = "", first_ideal
            else:
                one_core = f"{med[who, 'one']:.3f}"
                ideal = max(1.0, med[who, "one"] / idle)
                ok, detail = agree[who]
                failures += 0 if ok else 1
            excesses[who].append(busy / idle / ideal)
            agreement = "" if who == "XLA" else ("yes " if ok else "NO ") + detail
            versus = (f"{med['XLA', 'idle'] / idle:>13.2f}x{med['XLA', 'busy'] / busy:>6.2f}x"
                      if who != "XLA" else f"{'':>21}")
            print(f"{name:<20}{who:<10}{idle:>9.3f}{busy:>9.3f}{busy / idle:>9.2f}x"
                  f"{min(per_round):>6.2f}-{max(per_round):<4.2f}{one_core:>10}{ideal:>6.2f}x"
                  f"{busy / idle / ideal:>7.2f}x{versus}{statistics.median(loads):>6.2f}"
                  f"  {agreement}")
    for who, values in excesses.items():
        if values:
            geomean = math.exp(sum(math.log(v) for v in values) / len(values))
            print(f"{who}: busy/idle over the ideal, geometric mean {geomean:.2f}x, worst "
                  f"{max(values):.2f}x; {sum(v <= 1.1 for v in values)} of {len(values)} within "
                  f"10% of the ideal")
    print(f"load average (1 min) at the end {load_average():.2f}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
