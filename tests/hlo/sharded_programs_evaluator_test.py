#!/usr/bin/env python3
"""XLA's partitioned modules on xlens's simulated devices against jax's own per-device outputs.

make_sharded_programs.py compiles programs with jax on 4 and 8 host devices (data and tensor
parallel, a pipeline permute, all-to-all, all-gather, reduce-scatter, uneven tiles) and keeps the
module after XLA's spmd-partitioning pass with jax's inputs and outputs. Each partitioned module
runs twice with --num_replicas=R --num_partitions=P:

  - `xlens run` (compiled for the CPU, one executable per device, --reference checking every
    device against the evaluator) from jax's global inputs, which xlens splits by the entry
    parameters' shardings;
  - `xlens eval` (the reference evaluator over the devices) from jax's per-device shards, one
    folder per device (device_0/, device_1/, ...);

and every device's every output must match jax's shard of it.

Everything is made in a temporary directory that is removed. Exit 77 (skip) without jax.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

try:
  import numpy as np
  import jax  # noqa: F401
except ImportError:
  print("skip: jax and numpy are needed")
  sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
# f32 sums in another order than XLA:CPU's.
RTOL, ATOL = 1e-4, 1e-5


def compare(name, outputs_dir, where, devices, failures):
  for d in range(devices):
    wanted = sorted(glob.glob(os.path.join(where, "devices", str(d), "outputs", "out*.npy")))
    if not wanted:
      failures.append(f"{name}: jax kept no outputs for device {d}")
    for want_path in wanted:
      out = os.path.basename(want_path)
      got_path = os.path.join(outputs_dir, f"device_{d}", out)
      if not os.path.exists(got_path):
        failures.append(f"{name}: device {d} wrote no {out}")
        continue
      got, want = np.load(got_path), np.load(want_path)
      if got.shape != want.shape:
        failures.append(f"{name}: device {d} {out} is {list(got.shape)}, jax's {list(want.shape)}")
      elif not np.allclose(got, want, rtol=RTOL, atol=ATOL):
        worst = float(np.max(np.abs(got.astype(np.float64) - want)))
        failures.append(f"{name}: device {d} {out} differs from jax's by up to {worst:.3g}")


def check_program(args, where, scratch, failures):
  name = os.path.relpath(where, args.out)
  with open(os.path.join(where, "meta.json")) as f:
    meta = json.load(f)
  replicas, partitions = meta["num_replicas"], meta["num_partitions"]
  devices = replicas * partitions
  module = os.path.join(where, "after_spmd_partitioning.txt")
  per_device = os.path.join(scratch, "per_device_inputs")
  os.makedirs(per_device)
  for d in range(devices):
    os.symlink(os.path.join(where, "devices", str(d), "inputs"), os.path.join(per_device, f"device_{d}"))
  for how, command, inputs in (("compiled, global inputs", ["run", "--reference"], os.path.join(where, "inputs")),
                               ("evaluated, per-device inputs", ["eval"], per_device)):
    outputs = os.path.join(scratch, how.replace(" ", "_").replace(",", ""))
    result = subprocess.run([args.xlens, command[0], module] + command[1:] +
                            [f"--num_replicas={replicas}", f"--num_partitions={partitions}", "--inputs",
                             inputs, "--outputs", outputs], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
      failures.append(f"{name} ({how}): xlens {command[0]} failed: {result.stderr.strip()}")
      continue
    compare(f"{name} ({how})", outputs, where, devices, failures)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  parser.add_argument("--out", help="use programs already made here instead of making them")
  args = parser.parse_args()
  with tempfile.TemporaryDirectory(prefix="sharded_evaluator_") as tmp:
    if not args.out:
      args.out = os.path.join(tmp, "programs")
      made = subprocess.run([sys.executable, os.path.join(HERE, "make_sharded_programs.py"),
                             "--out", args.out], timeout=240)
      if made.returncode == 77:
        return 77
      if made.returncode != 0:
        print("FAIL: make_sharded_programs.py failed")
        return 1
    failures, checked = [], 0
    for where in sorted(glob.glob(os.path.join(args.out, "n*", "*"))):
      check_program(args, where, tempfile.mkdtemp(dir=tmp), failures)
      checked += 1
  for f in failures:
    print("FAIL:", f)
  if checked == 0:
    print("FAIL: no programs were made")
    return 1
  print(f"{checked} partitioned programs ran on their devices, {len(failures)} failures")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
