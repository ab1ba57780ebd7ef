#!/usr/bin/env python3
"""What the tests of jax's sharded programs share (sharded_programs_test.py,
sharded_programs_evaluator_test.py, sharded_programs_partitioner_test.py, runtime/mpi_run_test.py):
the programs make_sharded_programs.py makes, each program's folder, and the comparison of what
xlens wrote for every device with jax's per-device outputs.

The programs take jax seconds to make, so CTest makes them once: run as a script,
`sharded_programs_common.py --make DIR` makes them afresh under DIR (the fixture
sharded_programs_make), and the tests take `--programs DIR`. A test run alone without
`--programs` makes its own in its temporary directory.
"""
import argparse
import glob
import json
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
MAKER = os.path.join(HERE, "make_sharded_programs.py")
# Written last by make_sharded_programs.py: the programs under its folder are all there.
FINISHED = "FINISHED"
# f32 sums in another order than XLA:CPU's.
RTOL, ATOL = 1e-4, 1e-5


def require_jax():
  """Exits 77 (CTest's skip) when jax or numpy is missing."""
  try:
    import numpy  # noqa: F401
    import jax  # noqa: F401
  except ImportError:
    print("skip: jax and numpy are needed")
    sys.exit(77)


def add_programs_option(parser):
  """--programs DIR (args.out; --out is its older name)."""
  parser.add_argument("--programs", "--out", dest="out", metavar="DIR",
                      help="use the programs already made here (make_sharded_programs.py --out DIR) "
                           "instead of making them")


def argument_parser(doc):
  """The tests' parser: described by `doc`'s first line, with --xlens BINARY and --programs DIR."""
  parser = argparse.ArgumentParser(description=doc.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  add_programs_option(parser)
  return parser


def report(failures, checked, summary):
  """Prints every failure, then `summary` (or that no programs were made when `checked` is 0): the
  test's exit code, 1 when anything failed or nothing was checked."""
  for f in failures:
    print("FAIL:", f)
  if checked == 0:
    print("FAIL: no programs were made")
    return 1
  print(summary)
  return 1 if failures else 0


def make(out):
  """Makes the programs afresh under `out`: 0, 77 (no jax: skip) or 1 (the reason printed)."""
  shutil.rmtree(out, ignore_errors=True)
  made = subprocess.run([sys.executable, MAKER, "--out", out], timeout=240)
  if made.returncode == 77:
    return 77
  if made.returncode != 0 or not os.path.exists(os.path.join(out, FINISHED)):
    print(f"FAIL: make_sharded_programs.py --out {out} failed (exit {made.returncode})")
    return 1
  return 0


def obtain(args, tmp):
  """Points args.out at the programs: the folder given, which must hold finished programs, or ones
  made now under `tmp`. None when they are there, else the exit code (the reason printed)."""
  if args.out:
    if not os.path.exists(os.path.join(args.out, FINISHED)):
      print(f"FAIL: {args.out} holds no finished sharded programs: make_sharded_programs.py failed "
            "or never ran there (in CTest: see the test sharded_programs_make)")
      return 1
    return None
  args.out = os.path.join(tmp, "programs")
  return make(args.out) or None


def program_dirs(out):
  """Every program's folder, OUT/nN/PROGRAM, in order."""
  return sorted(glob.glob(os.path.join(out, "n*", "*")))


def read_meta(where):
  with open(os.path.join(where, "meta.json")) as f:
    return json.load(f)


def per_device_inputs(where, devices, into):
  """`into`/device_D/ for every device: jax's shards of the inputs, the layout xlens reads per device."""
  os.makedirs(into, exist_ok=True)
  for d in range(devices):
    os.symlink(os.path.join(where, "devices", str(d), "inputs"), os.path.join(into, f"device_{d}"))
  return into


def replicated_outputs(where, devices):
  """Whether every device holds each of jax's outputs whole: the results xlens can assemble from
  XLA's partitioned modules, whose root carries no sharding= to assemble sharded ones by."""
  import numpy as np
  for want_path in sorted(glob.glob(os.path.join(where, "outputs", "out*.npy"))):
    whole = np.load(want_path)
    for d in range(devices):
      shard = np.load(os.path.join(where, "devices", str(d), "outputs", os.path.basename(want_path)))
      if shard.shape != whole.shape or not np.array_equal(shard, whole):
        return False
  return True


def compare_global(name, outputs_dir, where, failures):
  """The global outputs xlens assembled by the root's sharding, outputs_dir/outI.npy, against
  jax's global outputs, where xlens wrote them."""
  import numpy as np
  for want_path in sorted(glob.glob(os.path.join(where, "outputs", "out*.npy"))):
    out = os.path.basename(want_path)
    got_path = os.path.join(outputs_dir, out)
    if not os.path.exists(got_path):
      failures.append(f"{name}: no global {out} was assembled")
      continue
    got, want = np.load(got_path), np.load(want_path)
    if got.shape != want.shape:
      failures.append(f"{name}: global {out} is {list(got.shape)}, jax's {list(want.shape)}")
    elif not np.allclose(got, want, rtol=RTOL, atol=ATOL):
      worst = float(np.max(np.abs(got.astype(np.float64) - want)))
      failures.append(f"{name}: global {out} differs from jax's by up to {worst:.3g}")


def compare(name, outputs_dir, where, devices, failures):
  """Every device's every output xlens wrote under outputs_dir/device_D/ against jax's shard, and
  the global outputs outputs_dir/outI.npy against jax's where xlens assembled them."""
  import numpy as np
  if glob.glob(os.path.join(outputs_dir, "out*.npy")):
    compare_global(name, outputs_dir, where, failures)
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


def main():
  parser = argparse.ArgumentParser(description="Makes the sharded programs afresh under DIR.")
  parser.add_argument("--make", required=True, metavar="DIR")
  return make(parser.parse_args().make)


if __name__ == "__main__":
  sys.exit(main())
