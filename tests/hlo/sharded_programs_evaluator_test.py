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

and every device's every output must match jax's shard of it. The global outputs xlens assembles
by the root's sharding (OUT/outI.npy) must match jax's global outputs wherever jax's results are
the same on every device (XLA's partitioned modules drop the root's sharding, so a sharded result
cannot be assembled: xlens must say so and write none).

The programs are those of --programs DIR (in CTest, made once by the fixture
sharded_programs_make), or made here; everything else is made in a temporary directory that is
removed. Exit 77 (skip) without jax.
"""
import argparse
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import sharded_programs_common as common  # noqa: E402

common.require_jax()
compare = common.compare


# [runs whose global outputs were rightly not assembled, runs whose were and were compared]
global_checks = [0, 0]


def check_program(args, where, scratch, failures):
  name = os.path.relpath(where, args.out)
  meta = common.read_meta(where)
  replicas, partitions = meta["num_replicas"], meta["num_partitions"]
  devices = replicas * partitions
  module = os.path.join(where, "after_spmd_partitioning.txt")
  per_device = common.per_device_inputs(where, devices, os.path.join(scratch, "per_device_inputs"))
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
    assembled = os.path.exists(os.path.join(outputs, "out0.npy"))
    if common.replicated_outputs(where, devices) and replicas == 1:
      if not assembled:
        failures.append(f"{name} ({how}): no global outputs were assembled: {result.stdout.strip()[-300:]}")
    elif assembled:
      failures.append(f"{name} ({how}): global outputs were assembled without a sharding to assemble them by")
    elif "global outputs not assembled" not in result.stdout:
      failures.append(f"{name} ({how}): no line says why the global outputs were not assembled")
    else:
      global_checks[0] += 1
    if assembled:
      global_checks[1] += 1


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  common.add_programs_option(parser)
  args = parser.parse_args()
  with tempfile.TemporaryDirectory(prefix="sharded_evaluator_") as tmp:
    failed = common.obtain(args, tmp)
    if failed is not None:
      return failed
    failures, checked = [], 0
    for where in common.program_dirs(args.out):
      check_program(args, where, tempfile.mkdtemp(dir=tmp), failures)
      checked += 1
  for f in failures:
    print("FAIL:", f)
  if checked == 0:
    print("FAIL: no programs were made")
    return 1
  print(f"{checked} partitioned programs ran on their devices, {len(failures)} failures; global "
        f"outputs assembled and compared in {global_checks[1]} runs, rightly refused in {global_checks[0]}")
  if global_checks[1] == 0:
    print("FAIL: no run's global outputs were assembled")
    return 1
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
