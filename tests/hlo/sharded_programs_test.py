#!/usr/bin/env python3
"""Sharded programs made now by jax (make_sharded_programs.py, 4 and 8 host devices) against
xlens's shardings:

  - every module (before_optimizations, before and after spmd-partitioning) parses (`xlens print`);
  - every `sharding=` in them reads back and prints as XLA wrote it (alone and in `xlens print`'s
    module), and every Shardy annotation
    (xla.sdy.sharding) converts to the HLO sharding XLA put beside it;
  - splitting jax's global inputs by the entry parameters' shardings gives exactly jax's
    addressable shards, and each shard has the shape of the partitioned module's parameter;
  - assembling jax's per-device outputs by the root's sharding gives exactly jax's global outputs.

The programs, and where the rest is made, are as sharded_programs_common.py says; exit 77 (skip)
without jax.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sharded_programs_common as common  # noqa: E402

common.require_jax()
import numpy as np  # noqa: E402
MODULES = ["before_optimizations.txt", "before_spmd_partitioning.txt", "after_spmd_partitioning.txt"]


def run(cmd):
  return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def entry_parameter_shapes(text):
  """parameter number -> dims of the entry computation's parameters."""
  entry = text[text.find("\nENTRY"):]
  shapes = {}
  for m in re.finditer(r"= \w+\[([0-9,]*)\](?:\{[^}]*\})? parameter\((\d+)\)", entry):
    shapes[int(m.group(2))] = tuple(int(d) for d in m.group(1).split(",") if d)
  return shapes


def check_program(args, where, n, scratch, failures):
  name = os.path.relpath(where, args.out)
  fail = lambda message: failures.append(f"{name}: {message}")
  meta = common.read_meta(where)
  if meta["num_partitions"] * meta["num_replicas"] != n:
    fail(f"meta.json says {meta['num_replicas']} x {meta['num_partitions']} devices, expected {n}")

  shardings_seen = 0
  for module in MODULES:
    path = os.path.join(where, module)
    printed = run([args.xlens, "print", path])
    if printed.returncode != 0:
      fail(f"xlens print {module}: {printed.stderr.strip()}")
    listed = run([args.shard_tool, "shardings", path])
    if listed.returncode != 0:
      fail(f"shardings of {module}: {listed.stderr.strip()}")
      continue
    for line in listed.stdout.splitlines():
      instr, kind, written, read = line.split("\t")
      shardings_seen += 1
      if kind == "hlo" and written != read:
        fail(f"{module} {instr}: sharding {written} reads back as {read}")
      if kind == "hlo" and printed.returncode == 0 and f"sharding={written}" not in printed.stdout:
        fail(f"{module} {instr}: xlens print dropped or changed sharding={written}")
      if kind == "sdy" and written != "-" and written != read:
        fail(f"{module} {instr}: Shardy's annotation converts to {read}, XLA wrote {written}")
  if shardings_seen == 0:
    fail("no sharding found in the modules")

  before = os.path.join(where, "before_optimizations.txt")
  split_dir = os.path.join(scratch, "split")
  result = run([args.shard_tool, "split", before, os.path.join(where, "inputs"), str(n), split_dir])
  if result.returncode != 0:
    fail(f"split: {result.stderr.strip()}")
    return
  with open(os.path.join(where, "after_spmd_partitioning.txt")) as f:
    partitioned = entry_parameter_shapes(f.read())
  for ours in sorted(glob.glob(os.path.join(split_dir, "*", "inputs", "*.npy"))):
    rel = os.path.relpath(ours, split_dir)
    device, arg = rel.split(os.sep)[0], os.path.basename(ours)
    got, want = np.load(ours), np.load(os.path.join(where, "devices", rel))
    if got.shape != want.shape or got.dtype != want.dtype or not np.array_equal(got, want):
      fail(f"device {device} {arg}: split gives {got.dtype}{list(got.shape)}, jax's shard is "
           f"{want.dtype}{list(want.shape)}" + ("" if got.shape != want.shape else " (values differ)"))
    index = int(arg[len("arg"):-len(".npy")])
    if partitioned.get(index) != want.shape:
      fail(f"{arg}: jax's shard is {list(want.shape)} but the partitioned module's parameter "
           f"{index} is {partitioned.get(index)}")
  expected_files = n * len(glob.glob(os.path.join(where, "inputs", "*.npy")))
  if len(glob.glob(os.path.join(split_dir, "*", "inputs", "*.npy"))) != expected_files:
    fail(f"split wrote the wrong number of files (expected {expected_files})")

  assembled = os.path.join(scratch, "assembled")
  result = run([args.shard_tool, "assemble", before, os.path.join(where, "devices"), str(n),
                assembled])
  if result.returncode != 0:
    fail(f"assemble: {result.stderr.strip()}")
    return
  for want_path in sorted(glob.glob(os.path.join(where, "outputs", "*.npy"))):
    out = os.path.basename(want_path)
    got, want = np.load(os.path.join(assembled, out)), np.load(want_path)
    if got.shape != want.shape or not np.array_equal(got, want):
      fail(f"{out}: assembling the devices' outputs does not give jax's global output")


def main():
  parser = common.argument_parser(__doc__)
  parser.add_argument("--shard-tool", required=True)
  args = parser.parse_args()
  with tempfile.TemporaryDirectory(prefix="sharded_programs_") as tmp:
    failed = common.obtain(args, tmp)
    if failed is not None:
      return failed
    failures, checked = [], 0
    for where in common.program_dirs(args.out):
      n = int(os.path.basename(os.path.dirname(where))[1:])
      scratch = tempfile.mkdtemp(dir=tmp)
      check_program(args, where, n, scratch, failures)
      checked += 1
  return common.report(failures, checked, f"{checked} sharded programs checked, {len(failures)} failures")


if __name__ == "__main__":
  sys.exit(main())
