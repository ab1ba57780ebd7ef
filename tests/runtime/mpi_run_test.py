#!/usr/bin/env python3
"""XLA's partitioned jax modules under `mpirun ... xlens run|eval --distributed=mpi`, to jax's outputs.

make_sharded_programs.py compiles programs with jax on 4 and 8 host devices and keeps the module
after XLA's spmd-partitioning pass with jax's inputs and per-device outputs. Each runs under
Open MPI with its devices spread over the ranks (2 and 4 ranks; 1 or 2 devices per rank), compiled
(`xlens run`, from jax's global inputs) and evaluated (`xlens eval`, from per-device folders), and
every device's every output, written by its own rank, must match jax's shard of it. Then the
hostile cases: a rank whose input is missing, a rank killed mid-run, a device late past
--collective_timeout, more ranks than devices: each ends within seconds with one line per rank
that still runs, starting "xlens: rank R of N:".

The programs are those of --programs DIR (in CTest, made once by the fixture
sharded_programs_make), or made here; everything else is made in a temporary directory that is
removed. Exit 77 (skip) without mpirun, jax, or an xlens built without Open MPI (no
libxlens_mpi.so beside it).
"""
import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "hlo"))
import sharded_programs_common as common  # noqa: E402

MPIRUN = shutil.which("mpirun")


def mpirun(ranks, argv, timeout=120, **kwargs):
  return [MPIRUN, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks)] + argv


def rank_lines(stderr, ranks):
  """Our lines per rank: {rank: [line, ...]}."""
  lines = {}
  for line in stderr.splitlines():
    m = re.match(rf"xlens: rank (\d+) of {ranks}: ", line)
    if m:
      lines.setdefault(int(m.group(1)), []).append(line)
  return lines


def check_programs(args, tmp, failures):
  checked = 0
  for where in common.program_dirs(args.out):
    name = os.path.relpath(where, args.out)
    meta = common.read_meta(where)
    replicas, partitions = meta["num_replicas"], meta["num_partitions"]
    devices = replicas * partitions
    module = os.path.join(where, "after_spmd_partitioning.txt")
    per_device = common.per_device_inputs(where, devices, tempfile.mkdtemp(dir=tmp))
    # 4 devices: 2 ranks compiled, 4 ranks evaluated; 8 devices: 4 ranks (2 devices each) both ways.
    runs = ([(2, "run", os.path.join(where, "inputs")), (4, "eval", per_device)] if devices == 4 else
            [(4, "run", per_device), (4, "eval", os.path.join(where, "inputs"))])
    for ranks, command, inputs in runs:
      outputs = tempfile.mkdtemp(dir=tmp)
      how = f"{ranks} ranks, xlens {command}"
      result = subprocess.run(mpirun(ranks, [args.xlens, command, module, f"--num_replicas={replicas}",
                                             f"--num_partitions={partitions}", "--inputs", inputs,
                                             "--outputs", outputs, "--distributed=mpi"]),
                              capture_output=True, text=True, timeout=120)
      if result.returncode != 0:
        failures.append(f"{name} ({how}): failed: {result.stderr.strip()[:2000]}")
        continue
      common.compare(f"{name} ({how})", outputs, where, devices, failures)
      # The global outputs, as one process writes them: assembled where jax's results are the same
      # on every device, by rank 0 alone; otherwise one line (rank 0's) says why not.
      assembled = os.path.exists(os.path.join(outputs, "out0.npy"))
      if common.replicated_outputs(where, devices) and replicas == 1:
        if not assembled:
          failures.append(f"{name} ({how}): no global outputs were assembled: {result.stdout.strip()[-300:]}")
        elif result.stdout.count(f"wrote {outputs}/out0.npy") != 1:
          failures.append(f"{name} ({how}): the global out0.npy was not written once")
      elif assembled:
        failures.append(f"{name} ({how}): global outputs were assembled without a sharding to assemble them by")
      elif result.stdout.count("global outputs not assembled") != 1:
        failures.append(f"{name} ({how}): not one line says why the global outputs were not assembled")
      checked += 1
  return checked


SPIN = """HloModule spin, num_partitions={n}

add {{
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}}

cond {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  pid = s32[] convert(u32[] partition-id())
  one = s32[] constant(1)
  late = pred[] compare(pid, one), direction=EQ
  limit = s32[] select(late, s32[] constant(2000000000), s32[] constant(0))
  ROOT lt = pred[] compare(i, limit), direction=LT
}}

body {{
  p = (s32[], f32[4]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  j = s32[] add(i, s32[] constant(1))
  v = f32[4] get-tuple-element(p), index=1
  ROOT t = (s32[], f32[4]) tuple(j, v)
}}

ENTRY e {{
  x = f32[4] parameter(0)
  init = (s32[], f32[4]) tuple(s32[] constant(0), x)
  w = (s32[], f32[4]) while(init), condition=cond, body=body
  v = f32[4] get-tuple-element(w), index=1
  ROOT ar = f32[4] all-reduce(v), channel_id=1, replica_groups={{{{{group}}}}}, use_global_device_ids=true, to_apply=add
}}
"""


def spin_module(tmp, n):
  """Device 1 spins for ages before an all-reduce of every device; the others arrive at once."""
  path = os.path.join(tmp, f"spin{n}.hlo")
  with open(path, "w") as f:
    f.write(SPIN.format(n=n, group=",".join(str(d) for d in range(n))))
  return path


def expect_lines(name, result, ranks, expected, failures, took, limit):
  """`expected`: {rank: regex its one line must match}."""
  lines = rank_lines(result.stderr, ranks)
  if result.returncode == 0:
    failures.append(f"{name}: exit status 0")
  if took > limit:
    failures.append(f"{name}: took {took:.1f} s (more than {limit} s)")
  for rank, pattern in expected.items():
    got = lines.get(rank, [])
    if len(got) != 1 or not re.search(pattern, got[0]):
      failures.append(f"{name}: rank {rank} said {got!r}, expected one line matching {pattern!r}; "
                      f"stderr: {result.stderr.strip()[:1500]}")


def hostile(args, tmp, failures):
  dp = os.path.join(args.out, "n4", "dp_mlp_train_step")
  module = os.path.join(dp, "after_spmd_partitioning.txt")
  # A rank whose input is missing: it says so, the other names it; nothing runs.
  inputs = os.path.join(tmp, "missing")
  for d in range(4):
    shutil.copytree(os.path.join(dp, "devices", str(d), "inputs"), os.path.join(inputs, f"device_{d}"))
  os.remove(os.path.join(inputs, "device_3", "arg0.npy"))
  start = time.time()
  result = subprocess.run(mpirun(2, [args.xlens, "eval", module, "--num_partitions=4", "--inputs", inputs,
                                     "--outputs", os.path.join(tmp, "missing_out"), "--distributed=mpi"]),
                          capture_output=True, text=True, timeout=120)
  expect_lines("missing input on rank 1", result, 2,
               {1: r"device_3/arg0\.npy: missing", 0: r"rank 1 failed: .*device_3/arg0\.npy: missing"},
               failures, time.time() - start, 30)
  if os.path.exists(os.path.join(tmp, "missing_out")):
    failures.append("missing input on rank 1: outputs were written though the run never started")

  # A device on rank 0 late past --collective_timeout: rank 0 says which device, rank 1 hears it.
  start = time.time()
  result = subprocess.run(mpirun(2, [args.xlens, "eval", spin_module(tmp, 4), "--num_partitions=4",
                                     "--distributed=mpi", "--collective_timeout=2"]),
                          capture_output=True, text=True, timeout=120)
  expect_lines("device late past the timeout", result, 2,
               {0: r"collective %ar cannot complete within 2 s: device 1 never arrived \(still running\)",
                1: r"rank 0 failed: .*device 1 never arrived"}, failures, time.time() - start, 30)

  # A rank killed mid-run: the other stops at once, saying so before mpirun's report.
  start = time.time()
  process = subprocess.Popen(mpirun(2, [args.xlens, "eval", spin_module(tmp, 2), "--num_partitions=2",
                                        "--distributed=mpi"]),
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  killed = False
  deadline = time.time() + 20
  while not killed and time.time() < deadline and process.poll() is None:
    time.sleep(0.2)
    for pid in descendants(process.pid):
      if environ_of(pid).get("OMPI_COMM_WORLD_RANK") == "1" and time.time() - start > 1:
        os.kill(pid, signal.SIGKILL)
        killed = True
  try:
    stdout, stderr = process.communicate(timeout=60)
  except subprocess.TimeoutExpired:
    process.kill()
    stdout, stderr = process.communicate()
    failures.append("rank 1 killed: mpirun did not end within 60 s")
  if not killed:
    failures.append("rank 1 killed: found no rank 1 to kill")
  else:
    result = subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)
    expect_lines("rank 1 killed", result, 2, {0: r"stopped by mpirun: another rank ended"},
                 failures, time.time() - start, 30)

  # More ranks than devices: every rank refuses before running.
  start = time.time()
  result = subprocess.run(mpirun(4, [args.xlens, "eval", spin_module(tmp, 2), "--num_partitions=2",
                                     "--distributed=mpi"]), capture_output=True, text=True, timeout=120)
  expect_lines("more ranks than devices", result, 4,
               {r: r"4 processes for 2 devices|rank \d failed: 4 processes for 2 devices" for r in range(4)},
               failures, time.time() - start, 30)


def descendants(pid):
  found, todo = [], [pid]
  while todo:
    p = todo.pop()
    try:
      for task in os.listdir(f"/proc/{p}/task"):
        with open(f"/proc/{p}/task/{task}/children") as f:
          kids = [int(k) for k in f.read().split()]
        found += kids
        todo += kids
    except OSError:
      pass
  return found


def environ_of(pid):
  try:
    with open(f"/proc/{pid}/environ", "rb") as f:
      pairs = f.read().split(b"\0")
  except OSError:
    return {}
  return dict(p.decode(errors="replace").split("=", 1) for p in pairs if b"=" in p)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--xlens", required=True)
  common.add_programs_option(parser)
  parser.add_argument("--hostile-only", action="store_true")
  args = parser.parse_args()
  if MPIRUN is None:
    print("skip: mpirun is missing (scripts/setup.sh installs openmpi-bin)")
    return 77
  if not os.path.exists(os.path.join(os.path.dirname(os.path.abspath(args.xlens)), "libxlens_mpi.so")):
    print("skip: this xlens was built without Open MPI (libopenmpi-dev): no libxlens_mpi.so beside it")
    return 77
  common.require_jax()
  start = time.time()
  with tempfile.TemporaryDirectory(prefix="mpi_run_") as tmp:
    failed = common.obtain(args, tmp)
    if failed is not None:
      return failed
    failures = []
    checked = 0 if args.hostile_only else check_programs(args, tmp, failures)
    hostile(args, tmp, failures)
  for f in failures:
    print("FAIL:", f)
  if checked == 0 and not args.hostile_only:
    print("FAIL: no programs ran")
    return 1
  print(f"{checked} runs of partitioned programs under mpirun matched jax, hostile cases checked, "
        f"{len(failures)} failures, {time.time() - start:.1f} s")
  return 1 if failures else 0


if __name__ == "__main__":
  sys.exit(main())
