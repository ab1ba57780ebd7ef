#!/usr/bin/env python3
"""All-reduce bandwidth: simulated devices in one process, and ranks under mpirun (--distributed=mpi).

For each message size (f32 arrays of 4 KB to 64 MB per device) a module runs CHAIN all-reduces
(sum over every device) one after another; `xlens run --iterations=N` gives the median time of
the whole step, divided by CHAIN. Bandwidth is the algorithm bandwidth (bytes of one device's
array over the time of one all-reduce), and each figure is also given as a ratio against memcpy
bandwidth of an array of the same size measured in the same run (numpy's copyto, best of 5):
the in-process runs on 2 and 4 devices (xlens run --num_partitions=N), and the MPI runs on 2
and 4 ranks of one device each (MPI_Allreduce) and 2 ranks of 2 devices each (an MPI
all-gather of both devices' arrays, then the evaluator's sum).

With --baseline OTHER_XLENS (an earlier build, say; its libxlens_mpi.so beside it), each run of
--xlens is followed by the same run of OTHER_XLENS, so that both meet the same load on a shared
machine, and a second table gives its figures.

Run by hand (not in CI): python3 tests/bench/allreduce_bandwidth.py --xlens build/compiler/cli/xlens
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

CHAIN = 4


def module(elements, devices):
  lines = [f"HloModule allreduce_{elements}, num_partitions={devices}", "",
           "add {", "  a = f32[] parameter(0)", "  b = f32[] parameter(1)", "  ROOT s = f32[] add(a, b)",
           "}", "", "ENTRY e {", f"  p = f32[{elements}] parameter(0)"]
  previous = "p"
  group = ",".join(str(d) for d in range(devices))
  for i in range(CHAIN):
    root = "ROOT " if i == CHAIN - 1 else ""
    lines.append(f"  {root}ar{i} = f32[{elements}] all-reduce({previous}), channel_id={i + 1}, "
                 f"replica_groups={{{{{group}}}}}, use_global_device_ids=true, to_apply=add")
    previous = f"ar{i}"
  lines.append("}")
  return "\n".join(lines) + "\n"


def memcpy_gbs(nbytes):
  src = np.ones(nbytes // 4, np.float32)
  dst = np.empty_like(src)
  repeat = max(1, (64 << 20) // nbytes)
  best = float("inf")
  for _ in range(5):
    start = time.perf_counter()
    for _ in range(repeat):
      np.copyto(dst, src)
    best = min(best, (time.perf_counter() - start) / repeat)
  return nbytes / best / 1e9


def run_ms(argv):
  result = subprocess.run(argv, capture_output=True, text=True, timeout=600)
  if result.returncode != 0:
    raise SystemExit(f"failed: {' '.join(argv)}\n{result.stderr}")
  m = re.search(r"run median ([0-9.]+) ms", result.stdout)
  if not m:
    raise SystemExit(f"no median in: {result.stdout}")
  return float(m.group(1))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  parser.add_argument("--iterations", type=int, default=5)
  parser.add_argument("--sizes", default="4K,64K,1M,16M,64M")
  parser.add_argument("--baseline", help="another xlens run beside --xlens, for comparison")
  args = parser.parse_args()
  mpirun = shutil.which("mpirun")
  units = {"K": 1 << 10, "M": 1 << 20}
  sizes = [int(s[:-1]) * units[s[-1]] for s in args.sizes.split(",")]
  setups = [("1 process, 2 devices", None, 2), ("1 process, 4 devices", None, 4)]
  if mpirun:
    setups += [("MPI, 2 ranks", 2, 2), ("MPI, 4 ranks", 4, 4), ("MPI, 2 ranks x 2 devices", 2, 4)]
  print(f"{os.cpu_count()} CPUs; algorithm bandwidth of one all-reduce (sum, f32), median of "
        f"{args.iterations} runs of {CHAIN} chained all-reduces; in parentheses, the ratio against "
        f"memcpy bandwidth at the same size in this run")
  header = f"{'size':>6} {'memcpy GB/s':>11} " + " ".join(f"{name:>26}" for name, _, _ in setups)
  binaries = [args.xlens] + ([args.baseline] if args.baseline else [])
  rows = {b: [] for b in binaries}
  if not args.baseline:
    print(header)
  with tempfile.TemporaryDirectory(prefix="allreduce_bw_") as tmp:
    for nbytes in sizes:
      elements = nbytes // 4
      copy = memcpy_gbs(nbytes)
      cells = {b: [] for b in binaries}
      for name, ranks, devices in setups:
        path = os.path.join(tmp, f"ar_{elements}_{devices}.hlo")
        with open(path, "w") as f:
          f.write(module(elements, devices))
        for binary in binaries:
          argv = [binary, "run", path, f"--num_partitions={devices}",
                  f"--iterations={args.iterations}", "--inputs=random"]
          if ranks:
            argv = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + argv + [
                "--distributed=mpi"]
          ms = run_ms(argv) / CHAIN
          gbs = nbytes / (ms / 1e3) / 1e9
          cells[binary].append(f"{gbs:8.3f} GB/s ({gbs / copy:6.3f}x)")
      label = f"{nbytes >> 20}M" if nbytes >= 1 << 20 else f"{nbytes >> 10}K"
      for binary in binaries:
        rows[binary].append(f"{label:>6} {copy:11.2f} " + " ".join(f"{c:>26}" for c in cells[binary]))
      if not args.baseline:
        print(rows[args.xlens][-1], flush=True)
  if args.baseline:
    for binary in binaries:
      print(f"{binary}{' (baseline)' if binary == args.baseline else ''}:")
      print(header)
      print("\n".join(rows[binary]))
  return 0


if __name__ == "__main__":
  sys.exit(main())
