#!/usr/bin/env python3
"""xlens's own SPMD partitioner on jax's sharded programs, against jax's per-device outputs.

make_sharded_programs.py compiles programs with jax on 4 and 8 host devices and keeps the modules
before XLA's partitioner ran. Each program is partitioned by `xlens opt
--passes=spmd-partitioning`, from both of them:

  - before_spmd_partitioning.txt   XLA's shardings propagated, Shardy's made HLO's; shard_map's
                                   bodies already manual;
  - before_optimizations.txt       what jax handed XLA: shardings on the parameters, Shardy's
                                   annotations, calls not yet inlined;

and the result is evaluated on the devices (`xlens eval --num_partitions=P`), and on 4 devices also
compiled (`xlens run --reference`), from jax's global inputs, which xlens splits by the partitioned
module's parameter shardings. Every device's every
output must match jax's shard of it. A table says which program partitions from which module.

Programs that are expected not to partition from a module are listed in KNOWN_GAPS with the
reason; a gap that starts to pass is reported so the list shrinks.

The programs are those of --programs DIR (in CTest, made once by the fixture
sharded_programs_make), or made here; everything else is made in a temporary directory that is
removed. Exit 77 (skip) without jax.
"""
import argparse
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
compare = common.compare

SOURCES = ("before_spmd_partitioning", "before_optimizations")
# Programs whose point is one op partitioned rather than run whole: a line `xlens opt
# --explain-spmd` must print for the before_optimizations module (and none may say an op "runs on
# whole values on every device").
EXPLAINED = {
  "n4/loop_train_step": "while runs on its pieces",
  "n4/embedding_step": "gather from its rows of",
  "n4/halo_slices": "collective-permute of",
  "n4/partial_manual": "enters manual code",
}
SCATTER_EXPLAINED = ("n4/embedding_step", "scatter into its rows of")
COLLECTIVES = re.compile(r" (all-reduce|all-gather|collective-permute|all-to-all|reduce-scatter)(?:-start)?\(")
# (program, source): why it does not partition yet.
KNOWN_GAPS = {
}


def check(args, where, source, scratch):
  """Failures (empty: every device matches jax)."""
  name = f"{os.path.relpath(where, args.out)} from {source}"
  meta = common.read_meta(where)
  partitions = meta["num_partitions"]
  if meta["num_replicas"] != 1:
    return [f"{name}: {meta['num_replicas']} replicas: the partitioner makes partitions only"]
  partitioned = os.path.join(scratch, "partitioned.txt")
  result = subprocess.run([args.xlens, "opt", os.path.join(where, source + ".txt"),
                           "--passes=spmd-partitioning"], capture_output=True, text=True, timeout=120)
  if result.returncode != 0:
    return [f"{name}: xlens opt failed: {result.stderr.strip()}"]
  with open(partitioned, "w") as f:
    f.write(result.stdout)
  failures = []
  if source == "before_optimizations":
    check_decisions(args, where, result.stdout, failures)
  # The evaluator everywhere; compiled too (one executable per device) on 4 devices, to keep the
  # test short.
  runs = [("eval", [])] + ([("run", ["--reference"])] if partitions == 4 else [])
  for command, extra in runs:
    outputs = os.path.join(scratch, command)
    result = subprocess.run([args.xlens, command, partitioned, f"--num_partitions={partitions}", "--inputs",
                             os.path.join(where, "inputs"), "--outputs", outputs] + extra,
                            capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
      failures.append(f"{name}: xlens {command} failed: {result.stderr.strip()}")
      continue
    compare(f"{name} (xlens {command})", outputs, where, partitions, failures)
  return failures


def count_collectives(text):
  counts = {}
  for m in COLLECTIVES.finditer(text):
    counts[m.group(1)] = counts.get(m.group(1), 0) + 1
  return counts


def check_decisions(args, where, partitioned, failures):
  """The explanation of the partitioned ops, and no more collectives than XLA's own partitioned
  module of the same program has."""
  program = os.path.relpath(where, args.out)
  ours = count_collectives(partitioned)
  with open(os.path.join(where, "after_spmd_partitioning.txt")) as f:
    xla = count_collectives(f.read())
  line = ", ".join(f"{k} {v}" for k, v in sorted(ours.items())) or "none"
  print(f"{program}: collectives {line} (XLA's: {', '.join(f'{k} {v}' for k, v in sorted(xla.items())) or 'none'})")
  if sum(ours.values()) > sum(xla.values()):
    failures.append(f"{program}: {sum(ours.values())} collectives, XLA's partitioned module has {sum(xla.values())}")
  if program not in EXPLAINED:
    return
  result = subprocess.run([args.xlens, "opt", os.path.join(where, "before_optimizations.txt"), "--explain-spmd"],
                          capture_output=True, text=True, timeout=120)
  text = result.stdout + result.stderr
  wanted = [EXPLAINED[program]] + ([SCATTER_EXPLAINED[1]] if program == SCATTER_EXPLAINED[0] else [])
  for phrase in wanted:
    if phrase not in text:
      failures.append(f"{program}: --explain-spmd does not say '{phrase}':\n{text}")
  if "runs on whole values on every device" in text:
    failures.append(f"{program}: --explain-spmd runs an op whole:\n{text}")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  common.add_programs_option(parser)
  args = parser.parse_args()
  failures, rows = [], []
  with tempfile.TemporaryDirectory(prefix="sharded_partitioner_") as tmp:
    failed = common.obtain(args, tmp)
    if failed is not None:
      return failed
    for where in common.program_dirs(args.out):
      program = os.path.relpath(where, args.out)
      row = [program]
      for source in SOURCES:
        got = check(args, where, source, tempfile.mkdtemp(dir=tmp))
        gap = KNOWN_GAPS.get((program, source))
        row.append("match" if not got else ("known gap" if gap else "FAIL"))
        if got and not gap:
          failures.extend(got)
        if not got and gap:
          failures.append(f"{program} from {source} now matches jax: drop it from KNOWN_GAPS")
      rows.append(row)
      if program == "n4/tp_mlp":
        # The pass dumps under XLA's name, so its files line up with XLA's own dump.
        dump = tempfile.mkdtemp(dir=tmp)
        subprocess.run([args.xlens, "opt", os.path.join(where, "before_optimizations.txt"),
                        "--passes=spmd-partitioning", f"--xla_dump_to={dump}", "--xla_dump_hlo_pass_re=.*"],
                       capture_output=True, text=True, timeout=120)
        if not glob.glob(os.path.join(dump, "*.after_spmd-partitioning.*.txt")):
          failures.append(f"{program}: no *.after_spmd-partitioning.*.txt in the dump: {sorted(os.listdir(dump))}")
        # Run unpartitioned, the module is refused with the way to partition it.
        result = subprocess.run([args.xlens, "eval", os.path.join(where, "before_optimizations.txt"),
                                 "--num_partitions=4", "--inputs", os.path.join(where, "inputs")],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 1 or "--passes=spmd-partitioning" not in result.stderr:
          failures.append(f"{program}: before_optimizations run unpartitioned: expected a refusal naming "
                          f"--passes=spmd-partitioning, got exit {result.returncode}: {result.stderr.strip()}")
  print(f"{'program':28} {SOURCES[0]:26} {SOURCES[1]}")
  for row in rows:
    print(f"{row[0]:28} {row[1]:26} {row[2]}")
  for f in failures:
    print("FAIL:", f)
  if not rows:
    print("FAIL: no programs were made")
    return 1
  matched = sum(cell == "match" for row in rows for cell in row[1:])
  print(f"{matched} of {2 * len(rows)} partitioned programs match jax on their devices")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
